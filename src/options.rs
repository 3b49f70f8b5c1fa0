//! Validated, typed options: what the rest of the program reads. `cli.rs` parses; [`Options::from_cli`]
//! checks every value and turns it into this, naming the flag in every error.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::collective::Collective;
use crate::reduce::{Dtype, Op};

/// How the sweep steps from the minimum to the maximum size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Multiply by this factor (`-f`, >= 2).
    Factor(u64),
    /// Add this many bytes (`-i`, > 0).
    Bytes(u64),
}

/// The message sizes of a sweep, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SizeRange {
    pub min: u64,
    pub max: u64,
    pub step: Step,
}

impl SizeRange {
    /// Every size of the sweep, from `min` up to and including `max`.
    pub fn sizes(&self) -> Vec<u64> {
        let mut out = Vec::new();
        let mut s = self.min;
        loop {
            out.push(s);
            let next = match self.step {
                Step::Factor(f) => s.saturating_mul(f),
                Step::Bytes(b) => s.saturating_add(b),
            };
            // A zero start with a factor would never grow; nccl-tests stops there too.
            if next <= s || next > self.max {
                break;
            }
            s = next;
        }
        out
    }
}

/// Which algorithm to run for the collectives that have a choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlgoChoice {
    /// The latency algorithm below the threshold, the ring at and above it.
    Auto,
    /// Pipelined ring (chain for broadcast and reduce).
    Ring,
    /// Recursive doubling (all_reduce, reduce_scatter) or Bruck (all_gather).
    RecDoubling,
    /// Binomial tree (broadcast, reduce; all_reduce as reduce + broadcast).
    Tree,
}

/// Which rank's time the table reports (nccl-tests' `-a`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RankStat {
    Rank0,
    Avg,
    Min,
    /// The slowest rank: a collective ends when its last rank ends. The default.
    Max,
}

/// Whether to draw a progress bar on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Progress {
    /// Only when stderr is a terminal.
    Auto,
    Never,
}

/// Everything one run needs to know, validated.
#[derive(Clone, Debug, Serialize)]
pub struct Options {
    /// Local ranks to spawn when no launcher is present (`--np`).
    pub np: usize,
    pub sizes: SizeRange,
    /// Timed iterations per point (`-n`).
    pub iters: u32,
    /// Warm-up iterations per point (`-w`).
    pub warmup: u32,
    /// Data-check iterations per point (`-c`); 0 turns the check off.
    pub check_iters: u32,
    pub collectives: Vec<Collective>,
    pub dtypes: Vec<Dtype>,
    pub ops: Vec<Op>,
    /// Root rank of broadcast and reduce (`-r`).
    pub root: usize,
    pub algo: AlgoChoice,
    /// Message size in bytes at which `--algo auto` switches from the latency algorithm to the ring.
    pub algo_threshold: u64,
    pub rank_stat: RankStat,
    /// Show p50/p99 columns in the table (`--percentiles`).
    pub percentiles: bool,
    /// Deadline for any single wait (`-T`, seconds).
    pub timeout: Duration,
    /// JSON output file (`-J`), nccl-tests layout plus collbench's fields.
    pub json: Option<PathBuf>,
    /// CSV output file (`--csv`).
    pub csv: Option<PathBuf>,
    /// Overwrite existing output files (`--force`).
    pub force: bool,
    /// TCP streams per peer (`--streams`).
    pub streams: usize,
    /// Pipeline chunk size in bytes (`--chunk`).
    pub chunk_bytes: usize,
    pub progress: Progress,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            np: 4,
            sizes: SizeRange { min: 8, max: 64 << 20, step: Step::Factor(2) },
            iters: 20,
            warmup: 5,
            check_iters: 1,
            collectives: vec![Collective::AllReduce, Collective::AllGather],
            dtypes: vec![Dtype::Float],
            ops: vec![Op::Sum],
            root: 0,
            algo: AlgoChoice::Auto,
            algo_threshold: 64 << 10,
            rank_stat: RankStat::Max,
            percentiles: false,
            timeout: Duration::from_secs(60),
            json: None,
            csv: None,
            force: false,
            streams: 1,
            chunk_bytes: 512 << 10,
            progress: Progress::Auto,
        }
    }
}
