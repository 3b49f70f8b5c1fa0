//! collbench: a collective-communication benchmark and network validator.
//!
//! # Layout
//! - [`cli`]: the command line (clap derive only); [`options`] is the aggregate of validated, typed parts, each
//!   owned and validated by the module that uses it (sweep by [`bench`](mod@bench), outputs by [`report`], ...),
//!   and the [`options::Agreement`] every rank must share; [`flags`]: the small parsers the parts share.
//! - [`world`]: who am I, how many are we, how do I reach the others (bootstrap, local launcher).
//! - [`transport`]: the one trait algorithms see; [`transport::tcp`] implements it over sockets,
//!   [`transport::rdma`] over ibverbs (verbs calls behind the `rdma` feature).
//! - [`collective`]: one small spec per collective: buffer layout, bus-bandwidth factor, expected data.
//! - [`algorithm`]: ring, recursive doubling, Bruck, trees; written only against the transport trait.
//! - [`reduce`]: dtypes, ops, CPU reduction kernels, data-check patterns.
//! - [`memory`]: aligned host buffers, CUDA device buffers, GPUDirect RDMA detection (reported only).
//! - [`engine`]: what runs one collective on one path: collbench's algorithms over its transport, or a
//!   library's call (MPI, [`nccl`]); on device buffers staged through pinned host memory (split into pieces
//!   whose copies overlap the network) or passed directly.
//! - [`sizes`]: byte sizes as people type and read them (`64M` in, `64 MiB` out).
//! - [`bench`](mod@bench): the sweep runner: warm-up, timing, data check, cross-rank statistics.
//! - [`report`]: one record schema; the results document (written by `run -J`, read by `compare`, `model`,
//!   `plot`, `preflight`) with its params record; table, JSON, CSV; the `info` inventory.
//! - [`plot`]: charts of busbw and time vs size per path (PNG, SVG) and `collbench plot`.
//! - [`model`]: alpha-beta-gamma fits per path and predictions at a target scale (`collbench model`).
//! - [`compare`]: two results files against each other, regressions with significance (`collbench compare`).
//! - [`net`]: interfaces (discovery, classification, the default choice), host inventory, advice.
//! - `mpi` (feature `mpi`): MPI bootstrap and the MPI baseline engine.
//! - [`session`]: one rank's bootstrap and connected TCP paths; [`run`] and [`info`]: the subcommands.
//! - [`selftest`]: `collbench selftest`, the CPU reduction kernels against memory copy bandwidth.
//! - [`gpumatrix`]: `collbench gpu-matrix`, device-to-device copy bandwidth between every GPU pair of a node.
//! - [`validate`]: findings about the network: the pairwise link matrix and the slow host or link
//!   (`collbench pairwise`), and the pre-flight verdict (`collbench preflight`).
//! - [`error`]: errors and exit codes; [`fault`]: the hidden testing aids (`--fault`, `--corrupt-rank`).

pub mod algorithm;
pub mod bench;
pub mod cli;
pub mod collective;
pub mod compare;
pub mod engine;
pub mod error;
pub mod fault;
pub mod flags;
pub mod gpumatrix;
pub mod info;
pub mod memory;
pub mod model;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod nccl;
pub mod net;
pub mod options;
pub mod paths;
pub mod plot;
pub mod reduce;
pub mod report;
pub mod run;
pub mod selftest;
pub mod session;
pub mod sizes;
pub mod transport;
pub mod validate;
pub mod world;
