//! Validation: turning measurements into findings about the network.
//!
//! - [`pairwise`]: every pair of hosts measured in rounds of disjoint pairs, a host x host matrix, and the
//!   slow host or slow link named (`collbench pairwise`, also part of the pre-flight check).
//! - [`p2p`]: `collbench p2p`, a point-to-point latency and bandwidth sweep between two chosen ranks (the
//!   shape of OSU's osu_latency and osu_bw).
//! - [`preflight`]: `collbench preflight`, a fixed short plan and the pairwise test judged against
//!   expectations: PASS / WARN / FAIL per check and overall.
//! - `own_path`: the start-up pairwise and p2p share (options, local launch, rank start, the measurement on
//!   the path's transport).
//! - [`share`]: rank 0's verdict sent to every rank at the end of pairwise and preflight.

mod own_path;
pub mod p2p;
pub mod pairwise;
pub mod preflight;
pub mod share;
