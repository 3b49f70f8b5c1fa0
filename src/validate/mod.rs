//! Validation: turning measurements into findings about the network.
//!
//! - [`pairwise`]: every pair of hosts measured in rounds of disjoint pairs, a host x host matrix, and the
//!   slow host or slow link named (`collbench pairwise`, also part of the pre-flight check).
//! - [`preflight`]: `collbench preflight`, a fixed short plan and the pairwise test judged against
//!   expectations: PASS / WARN / FAIL per check and overall.
//! - [`wrap`]: their summaries' lines, fitted to 100 columns.
//!
//! Both run their ranks through `crate::driver`, like every command that runs ranks.

pub mod pairwise;
pub mod preflight;
pub mod wrap;
