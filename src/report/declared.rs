//! The outputs a command writes, declared once with their flags: checked together before anything runs
//! (each writable, none replaced without `--force`, no two ending at one file), and asked whether one of them
//! is standard output.

use std::path::Path;

use super::file;
use crate::error::Result;

/// A command's output files and chart directory, with the flags that named them.
#[derive(Clone, Debug, Default)]
pub struct Declared<'a> {
    /// (path, flag) of each output file asked for.
    pub files: Vec<(&'a Path, &'static str)>,
    /// (directory, flag) of the charts, where asked for.
    pub charts: Option<(&'a Path, &'static str)>,
    /// `--force`: existing files may be replaced.
    pub force: bool,
}

impl<'a> Declared<'a> {
    /// No outputs yet; `force` as given.
    pub fn new(force: bool) -> Self {
        Declared {
            force,
            ..Declared::default()
        }
    }

    /// With the output file `path` named by `flag`, where one was given.
    pub fn file(mut self, flag: &'static str, path: Option<&'a Path>) -> Self {
        if let Some(p) = path {
            self.files.push((p, flag));
        }
        self
    }

    /// With the chart directory `dir` named by `flag`, where one was given.
    pub fn charts(mut self, flag: &'static str, dir: Option<&'a Path>) -> Self {
        self.charts = dir.map(|d| (d, flag));
        self
    }

    /// Refuses, before anything runs, an output that cannot be written, an existing file without `--force`,
    /// two outputs that end at one file, and a chart directory that cannot be made.
    pub fn check(&self) -> Result<()> {
        file::refuse_same_file(&self.files)?;
        for (p, flag) in &self.files {
            file::check_writable(p, self.force, flag)?;
        }
        if let Some((d, flag)) = self.charts {
            // Made now, so a directory that cannot exist or be written fails before the run rather than after.
            file::check_dir_writable(d, flag)?;
        }
        Ok(())
    }

    /// Whether an output file is standard output (`-J -`): the human text then goes to stderr, so the file
    /// stays whole for its reader.
    pub fn stdout_taken(&self) -> bool {
        self.files.iter().any(|(p, _)| file::is_stdout(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_every_declared_output_and_their_sameness() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        let b = dir.path().join("b.csv");
        let ok = Declared::new(false).file("-J", Some(&a)).file("--csv", Some(&b));
        assert!(ok.check().is_ok());
        assert!(!ok.stdout_taken());
        let same = Declared::new(false).file("-J", Some(&a)).file("--csv", Some(&a));
        assert!(same.check().unwrap_err().to_string().contains("--csv"));
        std::fs::write(&b, "old").unwrap();
        let exists = Declared::new(false).file("-J", Some(&a)).file("--csv", Some(&b));
        assert!(exists.check().unwrap_err().to_string().contains("--force"));
        assert!(Declared::new(true).file("--csv", Some(&b)).check().is_ok());
        let charts = dir.path().join("charts");
        assert!(Declared::new(false).charts("--plot", Some(&charts)).check().is_ok());
        assert!(charts.is_dir());
        assert!(Declared::new(false).file("-J", Some(Path::new("-"))).stdout_taken());
    }
}
