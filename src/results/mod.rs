//! The results schema, apart from the code that writes it: one [`Record`] per measured point, the run's
//! [`RunInfo`] and [`Summary`], and the results file's [`Document`](document::Document) that `collbench run
//! -J` writes (through `report`) and `compare`, `model`, `plot` and `preflight` read back ([`reader`]).
//! Named for what it holds, the results as data; the reporters that print and write them are `report`'s.
//! It sits just above `algorithm` and `world` (a record names its ranks and their links), below every
//! writer and reader.

pub mod document;
pub mod failure;
pub mod latency;
pub mod off_curve;
pub mod per_iter;
pub mod reader;
pub mod record;
pub mod run_params;
pub mod summary_view;
#[cfg(test)]
pub(crate) mod testutil;
pub mod timing;

pub use self::failure::{PointKey, RunError};
pub use self::run_params::RunParams;
pub use record::{
    AvgBusBw, Comparison, Connections, Endpoint, PathCost, PathFigure, PeakMemory, RankInfo, Record, RunInfo, Summary,
    Timing, WrongElement, SCHEMA_VERSION,
};
