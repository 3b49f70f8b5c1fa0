//! collbench: a collective-communication benchmark and network validator.
//!
//! # Layout
//! - [`cli`]: the command line (clap derive only). [`options`]: the validated run options, made of typed parts
//!   each owned and validated by the module that uses it (`bench::options`, `algorithm::options`,
//!   `transport::path`, `transport::tcp::options`, `transport::rdma::options`, `world::options`,
//!   `engine::options`, `report::options`, `fault::TestAids`), and [`options::Agreement`], what every rank
//!   must agree on. `flags`: the flag parsers those parts share.
//! - [`world`]: who am I, how many are we, how do I reach the others (bootstrap, local launcher).
//! - [`transport`]: the one trait algorithms see, the request table and control exchanges every transport
//!   shares; [`transport::tcp`] implements it over sockets, [`transport::rdma`] over ibverbs (verbs calls
//!   behind the `rdma` feature).
//! - [`collective`]: one small spec per collective: buffer layout, bus-bandwidth factor, expected data.
//! - [`algorithm`]: ring, recursive doubling, Bruck, trees; written only against the transport trait.
//! - [`reduce`]: dtypes, ops, CPU reduction kernels, data-check patterns.
//! - [`memory`]: aligned host buffers, CUDA device buffers and the reduction kernels' launcher, GPUDirect
//!   RDMA detection (reported only).
//! - [`engine`]: what runs one collective on one path: collbench's algorithms over its transport, or a
//!   library's call (MPI, `nccl`); on device buffers staged through pinned host memory (split into pieces
//!   whose copies overlap the network) or passed directly.
//! - [`sizes`]: byte sizes as people type and read them (`64M` in, `64 MiB` out). [`units`]: the unit
//!   bandwidth is printed in (`--units`: GB/s or Gbit/s).
//! - [`path_names`]: the names of the kinds of path (`tcp`, `rdma`, `mpi`, `nccl`), the one list that
//!   `transport::path` parses with and `cli` offers as `--transport`'s completions.
//! - [`bench`](mod@bench): the sweep runner: warm-up, timing, data check, cross-rank statistics, and the
//!   tally of a run's sweeps.
//! - [`results`]: the results schema apart from its writers: one record per point, the run's metadata,
//!   params and summary, and the results document (written by `run -J`, read by `compare`, `model`, `plot`,
//!   `preflight`) with its reader, and which points lie far off their sweep's curve (`off_curve`).
//! - [`report`]: the reporters (table, nccl-tests' table, JSON, CSV, Markdown), the summary totals and the
//!   paths compared, and the output files they write (atomically).
//! - [`plot`]: charts of busbw and time vs size per path (PNG, SVG) and `collbench plot`.
//! - `model`: alpha-beta-gamma fits per path and predictions at a target scale (`collbench model`).
//! - `compare`: two results files against each other, regressions with significance (`collbench compare`).
//! - `net`: interfaces (discovery, classification, the default choice), host inventory, advice. `info`: that
//!   inventory and advice as text and JSON (`collbench info`).
//! - `mpi` (feature `mpi`): MPI bootstrap and the MPI baseline engine.
//! - [`session`]: one rank's bootstrap and connected TCP paths, and the MPI library where it was started.
//!   `paths`: every path of a run opened once, each kind of path (tcp, rdma, mpi, nccl) one file there with
//!   its checks, opening, sweeps, line rate and failure attribution.
//! - `driver`: the one driver of every command that runs ranks (`run`, `preflight`, `pairwise`, `p2p`,
//!   `info`): its `RankCommand` trait, launch-or-be-a-rank, every host check, the start-up (MPI, bootstrap,
//!   paths) and the job's exit status (each rank's own, or rank 0's verdict shared). `run`: `run`'s rank (sweeps,
//!   then the summary, model and charts). `p2p`: `collbench p2p`, a point-to-point latency and bandwidth sweep
//!   between two chosen ranks (the shape of OSU's osu_latency and osu_bw).
//! - [`selftest`]: `collbench selftest`, the CPU reduction kernels against memory copy bandwidth.
//! - `gpumatrix`: `collbench gpu-matrix`, device-to-device copy bandwidth between every GPU pair of a node.
//! - [`validate`]: findings about the network: the pairwise link matrix and the slow host or link
//!   (`collbench pairwise`, its ranks' work in `validate::pairwise::command`, its plan within `--budget` in
//!   `validate::pairwise::plan`), and the pre-flight verdict (`collbench preflight`). Public for the
//!   simulation in tests/, which runs the planner and the localisation at sizes one machine cannot host.
//! - [`docgen`]: man pages, the options page and shell completions, generated from [`cli`].
//! - [`alias`]: collbench under nccl-tests' names (`all_reduce_perf`, ...): its flags, output and exit
//!   status, and `collbench install-aliases`.
//! - [`commands`]: the subcommands' entry points, one file each, and the program's one error handler
//!   (`main.rs` only calls [`commands::main`]).
//! - [`error`]: errors and exit codes; `fault`: the hidden `--fault` testing aid; `input`: files users name
//!   (`--expect`, ...), read with a size bound and refused when they are not regular files.
//! - `cgroup`: this process's cgroup per controller, found from /proc/self/cgroup and the mount tables (its
//!   own, its ancestors', pid 1's), and the limits on it: CPU quota and throttling, memory and tasks left.
//!
//! Public modules are the ones the binary, the integration tests in tests/ and the fuzz targets use; the
//! others (marked as plain code above) are private to the crate.
//!
//! # Layers
//! Bottom up; a module imports only from modules in lower layers (tests/layers.rs checks every `crate::`
//! path against this list; there are no exceptions):
//! 1. `error`: errors and exit codes
//! 2. `sizes`, `units`, `defaults`, `path_names`: byte sizes; the bandwidth unit printed; what a flag means
//!    when not given; the kinds of path's names
//! 3. `flags`, `input`, `cgroup`: shared flag parsers; files users name, read with a size bound; the cgroups
//!    this process runs in
//! 4. `cli`: clap definitions
//! 5. `reduce`, `net`: element types and kernels; the host's interfaces
//! 6. `collective`, `memory`, `info`: collective specs; buffers and devices; the host inventory as text
//! 7. `fault`: testing aids
//! 8. `transport`: the trait, tcp, rdma
//! 9. `world`: bootstrap
//! 10. `algorithm`: collective algorithms over the trait
//! 11. `results`: the results schema: records, the results document and its reader
//! 12. `report`: reporters and the files they write
//! 13. `engine`: one collective on one path
//! 14. `mpi`, `nccl`: library engines
//! 15. `bench`: the sweep runner
//! 16. `options`: the run options, assembled from their parts
//! 17. `session`: one rank connected
//! 18. `paths`: every path opened once, one file per kind
//! 19. `driver`: the driver of every command that runs ranks, and one rank's start-up
//! 20. `model`, `compare`, `selftest`, `gpumatrix`, `p2p`: analyses and tools
//! 21. `plot`: charts
//! 22. `run`, `docgen`: a rank's run; the generated reference
//! 23. `validate`: pairwise and preflight
//! 24. `alias`: nccl-tests' names and flags, on top of `run`
//! 25. `commands`: the subcommands' entry points

pub mod algorithm;
pub mod alias;
pub mod bench;
mod cgroup;
pub mod cli;
pub mod collective;
pub mod commands;
mod compare;
pub mod defaults;
pub mod docgen;
mod driver;
pub mod engine;
pub mod error;
mod fault;
mod flags;
mod gpumatrix;
mod info;
mod input;
pub mod memory;
mod model;
#[cfg(feature = "mpi")]
mod mpi;
// Without `cuda` nothing runs NCCL: its bindings and plan are built (and unit-tested) but unused.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod nccl;
mod net;
pub mod options;
mod p2p;
pub mod path_names;
mod paths;
pub mod plot;
pub mod reduce;
pub mod report;
pub mod results;
mod run;
pub mod selftest;
pub mod session;
pub mod sizes;
pub mod transport;
pub mod units;
pub mod validate;
pub mod world;
