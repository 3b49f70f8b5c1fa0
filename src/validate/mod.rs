//! Validation: turning measurements into findings about the network.
//!
//! - [`pairwise`]: every pair of hosts measured in rounds of disjoint pairs, a host x host matrix, and the
//!   slow host or slow link named (`collbench pairwise`, also part of the pre-flight check).

pub mod pairwise;
