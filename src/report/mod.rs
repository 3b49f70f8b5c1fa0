//! Reporters: the nccl-tests style table on stdout, JSON and CSV files. Every reporter sees the same
//! [`RunInfo`], the same [`Record`]s as points finish, and the same [`Summary`] at the end.

pub mod compare;
pub mod cost;
pub mod csv;
pub mod document;
pub mod file;
pub mod format;
mod gpu_topo;
pub mod info;
pub mod json;
pub mod markdown;
pub mod nccl_table;
pub mod outputs;
pub mod params;
pub mod per_iter;
pub mod record;
pub mod results_file;
pub mod summary;
pub mod table;
#[cfg(test)]
pub(crate) mod testutil;

pub use self::csv::CsvReporter;
pub use self::file::check_writable;
pub use self::json::JsonReporter;
pub use self::params::RunParams;
pub use self::summary::{avg_busbw, summarize};
pub use self::table::TableReporter;
pub use record::{
    AvgBusBw, Comparison, Connections, Endpoint, PathCost, PathFigure, PeakMemory, RankInfo, Record, RunInfo, Summary,
    Timing, WrongElement, SCHEMA_VERSION,
};

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
