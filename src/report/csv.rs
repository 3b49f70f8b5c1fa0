//! The CSV file (`--csv`): a header row, then one row per (record, placement), appended and flushed
//! after every record so an aborted run keeps every row measured. Empty cells mean "not measured"
//! (`wrong` when the data check was off).

use super::file::Replace;
use std::path::{Path, PathBuf};

use super::Reporter;
use crate::error::{Error, Result};
use crate::results::failure::{PointKey, RunError};
use crate::results::record::{Record, RunInfo, Summary, Timing};

/// The header row, in column order.
pub const COLUMNS: [&str; 21] = [
    "path",
    "collective",
    "algo",
    "size",
    "count",
    "type",
    "redop",
    "root",
    "nranks",
    "in_place",
    "time_us",
    "algbw_gbps",
    "busbw_gbps",
    "wrong",
    "rank0_us",
    "avg_us",
    "min_us",
    "max_us",
    "p50_us",
    "p99_us",
    "iters",
];

/// Writes the CSV results file at a path.
pub struct CsvReporter {
    path: PathBuf,
    out: Option<csv::Writer<Box<dyn std::io::Write + Send>>>,
    /// Whether a file at the path may be replaced: `--force` at first, then yes (the file is this run's).
    replace: Replace,
    /// The points written, to name those a failed run did not measure.
    written: Vec<PointKey>,
}

impl CsvReporter {
    /// A reporter for `path` that replaces a file already there only with `force`; check it first with
    /// [`check_writable`](super::check_writable).
    pub fn new(path: impl Into<PathBuf>, force: bool) -> Self {
        CsvReporter {
            path: path.into(),
            out: None,
            replace: Replace::from_force(force),
            written: Vec::new(),
        }
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, e: std::io::Error) -> Error {
        Error::io(format!("writing {}", self.path.display()), e)
    }

    /// Writes `rows` and flushes, creating the file with its header row first if needed.
    fn append(&mut self, rows: &[[String; 21]]) -> Result<()> {
        if self.out.is_none() {
            let f = super::file::open_appending(&self.path, self.replace).map_err(|e| self.io(e))?;
            self.replace = Replace::Allowed;
            let mut w = csv::Writer::from_writer(f);
            w.write_record(COLUMNS).map_err(|e| self.io(e.into()))?;
            self.out = Some(w);
        }
        let written = match self.out.as_mut() {
            Some(w) => rows
                .iter()
                .try_for_each(|r| w.write_record(r))
                .map_err(std::io::Error::from)
                .and_then(|()| w.flush()),
            None => Ok(()),
        };
        written.map_err(|e| self.io(e))
    }
}

impl Reporter for CsvReporter {
    fn begin(&mut self, _run: &RunInfo) -> Result<()> {
        // A fresh file per run, even if this reporter wrote one before.
        self.out = None;
        self.written.clear();
        self.append(&[])
    }

    fn record(&mut self, rec: &Record) -> Result<()> {
        self.written.push(PointKey::of(rec));
        self.append(&[row(rec, false), row(rec, true)])
    }

    fn finish(&mut self, _summary: &Summary) -> Result<()> {
        self.append(&[])
    }

    /// The file ends with one comment line, `# incomplete: ERROR; N planned point(s) not measured: ...`,
    /// which CSV readers told that `#` opens a comment skip (pandas' `comment='#'`, the csv crate's
    /// `comment(Some(b'#'))`).
    fn fail(&mut self, error: &RunError, planned: &[PointKey]) -> Result<()> {
        use std::io::Write as _;
        self.append(&[])?;
        let e = error.clone().with_missing(planned, &self.written);
        let line = format!("{INCOMPLETE}{}\n", e.line());
        // The rows are flushed by into_inner; the line goes after them, outside the csv writer's quoting.
        let Some(w) = self.out.take() else { return Ok(()) };
        let written = w
            .into_inner()
            .map_err(|e| e.into_error())
            .and_then(|mut f| f.write_all(line.as_bytes()));
        written.map_err(|e| self.io(e))
    }
}

/// How the comment line that marks a failed run's file opens.
pub const INCOMPLETE: &str = "# incomplete: ";

/// One placement of one record, in [`COLUMNS`] order; redop `none` and root -1 as in the table. The csv
/// writer quotes free text (RFC 4180) where it holds a comma, quote or line break.
fn row(rec: &Record, in_place: bool) -> [String; 21] {
    let t: &Timing = if in_place { &rec.in_place } else { &rec.out_of_place };
    [
        rec.path.clone(),
        rec.collective.name().into(),
        rec.algo.clone(),
        rec.size.to_string(),
        rec.count.to_string(),
        rec.dtype.name().into(),
        rec.op.map_or("none", |o| o.name()).into(),
        rec.root.map_or(-1, |r| r as i64).to_string(),
        rec.nranks.to_string(),
        in_place.to_string(),
        t.time_us.to_string(),
        t.algbw.to_string(),
        t.busbw.to_string(),
        t.wrong.map_or_else(String::new, |w| w.to_string()),
        t.rank0_us.to_string(),
        t.avg_us.to_string(),
        t.min_us.to_string(),
        t.max_us.to_string(),
        t.p50_us.to_string(),
        t.p99_us.to_string(),
        t.iters.to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::report::summarize;
    use crate::results::testutil::{record, run_info};

    #[test]
    fn header_then_two_rows_per_record_written_as_they_come() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = CsvReporter::new(dir.path().join("r.csv"), false);
        c.begin(&run_info(false)).unwrap();
        let ar = record(Collective::AllReduce, 1024, 10.5, 2.0, Some(0));
        let ag = record(Collective::AllGather, 64, 3.25, 0.5, None);
        c.record(&ar).unwrap();
        // Rows are on disk before the run ends.
        let partial = std::fs::read_to_string(c.path()).unwrap();
        assert_eq!(partial.lines().count(), 3);
        c.record(&ag).unwrap();
        c.finish(&summarize(&[ar, ag], String::new(), None, &[], Vec::new()))
            .unwrap();
        let text = std::fs::read_to_string(c.path()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "path,collective,algo,size,count,type,redop,root,nranks,in_place,time_us,algbw_gbps,busbw_gbps,wrong,\
             rank0_us,avg_us,min_us,max_us,p50_us,p99_us,iters"
        );
        assert_eq!(
            lines[1],
            "tcp@lo,all_reduce,ring,1024,256,float,sum,-1,4,false,10.5,1,2,0,9.5,10,8.5,10.5,10.25,13.5,20"
        );
        assert_eq!(
            lines[2],
            "tcp@lo,all_reduce,ring,1024,256,float,sum,-1,4,true,10.5,1.5,3,0,9.5,10,8.5,10.5,10.25,13.5,20"
        );
        assert_eq!(
            lines[3],
            "tcp@lo,all_gather,ring,64,16,float,none,-1,4,false,3.25,0.25,0.5,,2.25,2.75,1.25,3.25,3,6.25,20"
        );
        assert_eq!(lines.len(), 5);
        assert!(lines.iter().all(|l| l.split(',').count() == COLUMNS.len()));
    }

    /// One cell as the csv writer writes it.
    fn field(s: &str) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([s, "x"]).unwrap();
        let line = String::from_utf8(w.into_inner().unwrap()).unwrap();
        line.strip_suffix(",x\n").unwrap().to_string()
    }

    #[test]
    fn free_text_is_quoted() {
        assert_eq!(field("tcp@lo"), "tcp@lo");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
