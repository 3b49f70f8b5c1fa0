//! Reporters and the files they write: the nccl-tests style table on stdout, JSON, CSV and Markdown files,
//! the summary totals and the paths compared. Every reporter sees the same [`RunInfo`], the same [`Record`]s
//! as points finish, and the same [`Summary`] at the end; those types, and the results file's document the
//! JSON reporter fills, are [`crate::results`]'s.

pub mod cost_table;
pub mod csv;
pub mod declared;
pub mod file;
pub mod format;
pub mod json;
pub mod markdown;
pub mod nccl_table;
pub mod openmetrics;
pub mod options;
pub mod paths_compared;
pub mod stdout;
pub mod summary;
pub mod table;

pub use self::csv::CsvReporter;
pub use self::file::check_writable;
pub use self::json::JsonReporter;
pub use self::summary::{avg_busbw, summarize};
pub use self::table::TableReporter;

use crate::error::Result;
use crate::results::{PointKey, Record, RunError, RunInfo, Summary};

/// One output format. File reporters rewrite their file after every record so an abort keeps what was
/// measured.
pub trait Reporter {
    /// Called once, before the first point.
    fn begin(&mut self, run: &RunInfo) -> Result<()>;
    /// Called after every point, in sweep order.
    fn record(&mut self, rec: &Record) -> Result<()>;
    /// Called once after the last point (not called when the run aborts).
    fn finish(&mut self, summary: &Summary) -> Result<()>;
    /// Called instead of [`Reporter::finish`] when the run fails after [`Reporter::begin`]: the error, and the
    /// points of the plan (`planned`) so the reporter can mark its output incomplete and name what is missing.
    fn fail(&mut self, _error: &RunError, _planned: &[PointKey]) -> Result<()> {
        Ok(())
    }
}

/// A file reporter another thread can reach too (the rank's signal watcher marks the file incomplete): each
/// call takes the lock, so a signal never lands between a write's start and its file's move into place.
pub struct Shared(pub std::sync::Arc<std::sync::Mutex<Box<dyn Reporter + Send>>>);

impl Shared {
    /// `r`, shared.
    pub fn new(r: Box<dyn Reporter + Send>) -> Shared {
        Shared(std::sync::Arc::new(std::sync::Mutex::new(r)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Box<dyn Reporter + Send>> {
        // A poisoned lock still holds a reporter whose file is whole (writes are moved into place).
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Reporter for Shared {
    fn begin(&mut self, run: &RunInfo) -> Result<()> {
        self.lock().begin(run)
    }

    fn record(&mut self, rec: &Record) -> Result<()> {
        self.lock().record(rec)
    }

    fn finish(&mut self, summary: &Summary) -> Result<()> {
        self.lock().finish(summary)
    }

    fn fail(&mut self, error: &RunError, planned: &[PointKey]) -> Result<()> {
        self.lock().fail(error, planned)
    }
}
