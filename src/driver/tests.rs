//! The driver runs every host check, whichever command it drives: a command cannot skip them, because they are
//! not the command's to call. Each test drives a command whose one check fails, and shows the failure stops
//! the job before a rank connects (a launched rank) or before any rank starts (no launcher).

use std::cell::Cell;
use std::ffi::OsString;

use super::*;
use crate::error::Error;
use crate::report::declared::Declared;

/// Which check the command fails.
#[derive(Clone, Copy, PartialEq)]
enum Fails {
    Memory,
    Size,
    Nothing,
}

/// A command that fails one check and counts the work it was asked to do.
struct Probe<'a> {
    opts: Options,
    fails: Fails,
    output: Option<&'a std::path::Path>,
    ranks_run: Cell<usize>,
}

impl<'a> Probe<'a> {
    fn new(fails: Fails, output: Option<&'a std::path::Path>) -> Self {
        Probe {
            opts: Options::default(),
            fails,
            output,
            ranks_run: Cell::new(0),
        }
    }
}

impl RankCommand for Probe<'_> {
    fn name(&self) -> &'static str {
        "probe"
    }

    fn options(&self) -> &Options {
        &self.opts
    }

    fn outputs(&self) -> Declared<'_> {
        Declared::new(false).file("-J/--output_file", self.output)
    }

    fn check_memory(&self, _local: usize, _avail: &Available) -> Result<()> {
        match self.fails {
            Fails::Memory => Err(Error::usage("-e", "the probe's buffers do not fit")),
            _ => Ok(()),
        }
    }

    fn check_size(&self, size: usize) -> Result<()> {
        match self.fails {
            Fails::Size => Err(Error::usage("--np", format!("the probe refuses {size} ranks"))),
            _ => Ok(()),
        }
    }

    fn rank(&self, _id: &Identity, _conn: Connected<'_>) -> Result<Ending> {
        self.ranks_run.set(self.ranks_run.get() + 1);
        Ok(Ending::Own(0))
    }
}

/// The environment of rank `rank` of 2 under a launcher that is not collbench's own, its rendezvous on a
/// loopback port nothing serves (a rank that got as far as connecting would fail there, not at a check).
fn launched(rank: usize) -> impl Fn(&str) -> Option<String> {
    move |k| match k {
        env::RANK => Some(rank.to_string()),
        env::WORLD_SIZE => Some("2".into()),
        env::ROOT => Some("127.0.0.1:1".into()),
        env::JOB_TOKEN => Some("00112233445566778899aabbccddeeff".into()),
        env::LAUNCHER => Some("a test launcher".into()),
        _ => None,
    }
}

fn argv() -> Vec<OsString> {
    vec!["collbench".into(), "probe".into()]
}

#[test]
fn a_launched_rank_runs_the_memory_check_before_it_connects() {
    if crate::memory::available::available().is_none() {
        // The check runs only where the host says what memory it has; this test's host must.
        panic!("this host does not say what memory it has (/proc/meminfo): the check cannot be shown to run");
    }
    let mut cmd = Probe::new(Fails::Memory, None);
    let e = drive(&mut cmd, &argv(), &launched(1)).unwrap_err();
    assert!(e.to_string().contains("do not fit"), "{e}");
    assert_eq!(cmd.ranks_run.get(), 0);
}

#[test]
fn rank_0_of_a_launched_job_checks_the_outputs_before_it_connects() {
    let dir = tempfile::tempdir().unwrap();
    let taken = dir.path().join("taken.json");
    std::fs::write(&taken, "earlier results").unwrap();
    let mut cmd = Probe::new(Fails::Nothing, Some(&taken));
    let e = drive(&mut cmd, &argv(), &launched(0)).unwrap_err();
    assert!(e.to_string().contains("--force"), "{e}");
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "earlier results");
    assert_eq!(cmd.ranks_run.get(), 0);
}

#[test]
fn a_size_refusal_is_said_by_rank_0_and_obeyed_by_the_others() {
    let mut cmd = Probe::new(Fails::Size, None);
    let e = drive(&mut cmd, &argv(), &launched(0)).unwrap_err();
    assert!(e.to_string().contains("refuses 2 ranks"), "{e}");
    // Rank 1 would say the same: it exits with the status quietly.
    let code = drive(&mut cmd, &argv(), &launched(1)).unwrap();
    assert_eq!(code, crate::error::EXIT_USAGE);
    assert_eq!(cmd.ranks_run.get(), 0);
}

#[test]
fn without_a_launcher_every_check_runs_before_any_rank_starts() {
    // Were a check skipped, this test binary would be started as ranks: the memory check must run here.
    assert!(
        crate::memory::available::available().is_some(),
        "this host does not say what memory it has"
    );
    let none = |_: &str| None;
    let mut cmd = Probe::new(Fails::Memory, None);
    let e = drive(&mut cmd, &argv(), &none).unwrap_err();
    assert!(e.to_string().contains("do not fit"), "{e}");
    let mut cmd = Probe::new(Fails::Size, None);
    let e = drive(&mut cmd, &argv(), &none).unwrap_err();
    assert!(e.to_string().contains("refuses"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let taken = dir.path().join("taken.json");
    std::fs::write(&taken, "earlier results").unwrap();
    let mut cmd = Probe::new(Fails::Nothing, Some(&taken));
    let e = drive(&mut cmd, &argv(), &none).unwrap_err();
    assert!(e.to_string().contains("--force"), "{e}");
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "earlier results");
}
