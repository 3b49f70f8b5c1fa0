//! Reporters: the nccl-tests style table on stdout, JSON and CSV files. Every reporter sees the same
//! [`RunInfo`], the same [`Record`]s as points finish, and the same [`Summary`] at the end.

pub mod record;

pub use record::{AvgBusBw, RankInfo, Record, RunInfo, Summary, Timing, WrongElement, SCHEMA_VERSION};

use crate::error::Result;

/// One output format. File reporters rewrite their file after every record so an abort keeps what was
/// measured.
pub trait Reporter {
    /// Called once, before the first point.
    fn begin(&mut self, run: &RunInfo) -> Result<()>;
    /// Called after every point, in sweep order.
    fn record(&mut self, rec: &Record) -> Result<()>;
    /// Called once after the last point (not called when the run aborts).
    fn finish(&mut self, summary: &Summary) -> Result<()>;
}
