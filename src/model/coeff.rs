//! The algorithms' cost forms, kept with the algorithms ([`crate::algorithm::cost`]) so that `--algo-model FILE`
//! picks with the same forms the fit uses; re-exported here for the model's modules.

pub use crate::algorithm::cost::{algo_named, coeffs, Coeffs};
