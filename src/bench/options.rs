//! The sweep's options (`run`'s Sizes, What to run and Timing flags): which collectives, types and sizes, how
//! many iterations, and how the table reports them. Validated here, naming the flag in every error.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::cli::RunArgs;
use crate::collective::Collective;
use crate::defaults;
use crate::error::{Error, Result};
use crate::flags::{parse_list, size_flag};
use crate::reduce::{Dtype, Op};
use crate::sizes::format_size;

/// Most whole-sweep repeats (`--repeat`).
pub const MAX_REPEAT: u32 = 100;
/// Most points one sweep may have; more is almost surely a typo in `-i`, and would take days.
pub const MAX_POINTS: u64 = 10_000;

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

/// Exact, in bytes, for messages that compare two ranks' sweeps: `8 to 1048576 B, x2`.
impl fmt::Display for SizeRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} to {} B, ", self.min, self.max)?;
        match self.step {
            Step::Factor(x) => write!(f, "x{x}"),
            Step::Bytes(b) => write!(f, "+{b} B"),
        }
    }
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

impl RankStat {
    /// The name `-a` takes and messages print.
    pub const fn name(self) -> &'static str {
        match self {
            RankStat::Rank0 => "rank0",
            RankStat::Avg => "avg",
            RankStat::Min => "min",
            RankStat::Max => "max",
        }
    }
}

impl fmt::Display for RankStat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RankStat {
    type Err = String;

    /// nccl-tests' numbers (0 = rank 0, 1 = avg, 2 = min, 3 = max) or their names.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "0" | "rank0" => RankStat::Rank0,
            "1" | "avg" => RankStat::Avg,
            "2" | "min" => RankStat::Min,
            "3" | "max" => RankStat::Max,
            _ => {
                return Err(format!(
                    "unknown statistic '{s}' (expected 0/rank0, 1/avg, 2/min or 3/max)"
                ))
            }
        })
    }
}

/// How the paths (and `--repeat` sweeps) take turns (`--interleave`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Interleave {
    /// Each path sweeps every point, then the next path does.
    Sweep,
    /// Every path measures a point before any path moves on to the next point.
    Point,
}

impl FromStr for Interleave {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "sweep" => Ok(Interleave::Sweep),
            "point" => Ok(Interleave::Point),
            _ => Err(format!("unknown interleaving '{s}' (expected sweep or point)")),
        }
    }
}

/// What each sweep measures and how the table reports it. Every rank must agree on all of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepOptions {
    pub sizes: SizeRange,
    /// Timed iterations per point (`-n`).
    pub iters: u32,
    /// Warm-up iterations per point (`-w`).
    pub warmup: u32,
    /// Whole sweeps of every path (`--repeat`), interleaved path by path, so the comparison's intervals
    /// also cover drift between sweeps, not only the noise within one point.
    pub repeat: u32,
    /// How the paths take turns within each `--repeat` sweep.
    pub interleave: Interleave,
    /// Data-check iterations per point (`-c`); 0 turns the check off.
    pub check_iters: u32,
    pub collectives: Vec<Collective>,
    pub dtypes: Vec<Dtype>,
    pub ops: Vec<Op>,
    /// Root rank of broadcast and reduce (`-r`).
    pub root: usize,
    pub rank_stat: RankStat,
    /// Show p50/p99 columns in the table (`--percentiles`).
    pub percentiles: bool,
    /// How each timed iteration runs and what is kept of it (nccl-tests' `-I -K -m -z -u -C`).
    pub iteration: IterOptions,
}

/// Most collectives aggregated into one timed iteration (`-m`).
pub const MAX_AGG_ITERS: u32 = 1 << 20;

/// How each timed iteration runs and what is kept of it: nccl-tests' `-I`, `-K`, `-m`, `-z`, `-u` and `-C`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct IterOptions {
    /// Keep every timed iteration's time on every rank (`-I 1`).
    pub per_iter: bool,
    /// Leading timed iterations the per-iteration summary leaves out (`-K`).
    pub skip: u32,
    /// Collectives per timed iteration, its time divided by them (`-m`).
    pub agg: u32,
    /// Waits between collectives (`-z`): 0 none, 1 a timed barrier after each, 2 as 0, 3 an untimed barrier
    /// after each timed iteration.
    pub blocking: u8,
    /// Elements by which the buffers start past their alignment (`-u`).
    pub unalign: u32,
    /// Name the time column `cputime` (`-C 1`).
    pub cputime: bool,
}

impl Default for IterOptions {
    fn default() -> Self {
        IterOptions {
            per_iter: false,
            skip: 0,
            agg: 1,
            blocking: 0,
            unalign: 0,
            cputime: false,
        }
    }
}

impl IterOptions {
    /// Validates `-I`, `-K`, `-m`, `-z`, `-u` and `-C` against the timed iterations `iters`.
    pub fn from_cli(args: &RunArgs, iters: u32) -> Result<IterOptions> {
        let flag01 = |flag: &str, v: u8| match v {
            0 | 1 => Ok(v == 1),
            _ => Err(Error::usage(flag, format!("must be 0 (off) or 1 (on), got {v}"))),
        };
        let per_iter = flag01("-I/--per_iter_timing", args.per_iter_timing)?;
        if args.per_iter_skip > 0 && args.per_iter_skip >= iters {
            return Err(Error::usage(
                "-K/--per_iter_skip",
                format!(
                    "skips {} of {iters} timed iterations, leaving none to summarise; lower -K or raise -n",
                    args.per_iter_skip
                ),
            ));
        }
        if !(1..=MAX_AGG_ITERS).contains(&args.agg_iters) {
            return Err(Error::usage(
                "-m/--agg_iters",
                format!(
                    "must be between 1 and {MAX_AGG_ITERS} collectives per iteration (got {})",
                    args.agg_iters
                ),
            ));
        }
        if args.blocking > 3 {
            return Err(Error::usage(
                "-z/--blocking",
                format!(
                    "must be 0 (no waits), 1 (barrier after each collective), 2 (no barrier) or 3 (barrier after each \
                     iteration), got {}",
                    args.blocking
                ),
            ));
        }
        if args.unalign > 1024 {
            return Err(Error::usage(
                "-u/--unalign",
                format!(
                    "must be at most 1024 elements (got {}); misalignment repeats every page",
                    args.unalign
                ),
            ));
        }
        Ok(IterOptions {
            per_iter,
            skip: args.per_iter_skip,
            agg: args.agg_iters,
            blocking: args.blocking,
            unalign: args.unalign,
            cputime: flag01("-C/--report_cputime", args.report_cputime)?,
        })
    }

    /// Bytes by which buffers of `elem_size`-byte elements start past their alignment.
    pub fn shift_bytes(&self, elem_size: usize) -> usize {
        self.unalign as usize * elem_size
    }
}

impl Default for SweepOptions {
    fn default() -> Self {
        SweepOptions {
            sizes: SizeRange {
                min: defaults::MIN_BYTES,
                max: defaults::MAX_BYTES,
                step: Step::Factor(defaults::STEP_FACTOR),
            },
            iters: defaults::ITERS,
            warmup: defaults::WARMUP,
            repeat: defaults::REPEAT,
            interleave: Interleave::Sweep,
            check_iters: defaults::CHECK_ITERS,
            collectives: vec![Collective::AllReduce, Collective::AllGather],
            dtypes: vec![Dtype::Float],
            ops: vec![Op::Sum],
            root: defaults::ROOT,
            rank_stat: RankStat::Max,
            percentiles: false,
            iteration: IterOptions::default(),
        }
    }
}

impl SweepOptions {
    /// Validates the sweep's flags of `collbench run`.
    pub fn from_cli(args: &RunArgs) -> Result<SweepOptions> {
        let iters = iters(args.iters)?;
        Ok(SweepOptions {
            sizes: size_range(args)?,
            iteration: IterOptions::from_cli(args, iters)?,
            iters,
            warmup: args.warmup_iters,
            repeat: repeat(args.repeat)?,
            interleave: args.interleave.parse().map_err(|e| Error::usage("--interleave", e))?,
            check_iters: args.check,
            collectives: parse_list("--collective", &args.collective, &Collective::ALL)?,
            dtypes: parse_list("-d/--datatype", &args.datatype, &Dtype::ALL)?,
            ops: parse_list("-o/--op", &args.op, &Op::ALL)?,
            root: args.root,
            rank_stat: args.average.parse().map_err(|e| Error::usage("-a/--average", e))?,
            percentiles: args.percentiles,
        })
    }
}

/// `-n`: at least one timed iteration.
fn iters(n: u32) -> Result<u32> {
    if n == 0 {
        return Err(Error::usage(
            "-n/--iters",
            "must be at least 1 (the timed iterations per point)",
        ));
    }
    Ok(n)
}

/// `--repeat`: 1 to [`MAX_REPEAT`] whole sweeps.
fn repeat(n: u32) -> Result<u32> {
    if !(1..=MAX_REPEAT).contains(&n) {
        return Err(Error::usage(
            "--repeat",
            format!(
                "must be between 1 and {MAX_REPEAT} whole sweeps (got {n}); for more samples per point raise -n/--iters"
            ),
        ));
    }
    Ok(n)
}

/// What to say about `--repeat N` when N is 2: an interval between two sweeps takes Student's t with one
/// degree of freedom (12.7), so it is too wide to decide anything with.
pub fn repeat_note(n: u32) -> Option<String> {
    (n == 2).then(|| {
        "--repeat 2: the 95% intervals between two sweeps use Student's t with 1 degree of freedom (12.7): too wide to use; give --repeat 3 or more"
            .to_string()
    })
}

/// `-b`, `-e`, `-f` and `-i` as one sweep.
fn size_range(args: &RunArgs) -> Result<SizeRange> {
    let min = size_flag("-b/--minbytes", &args.minbytes)?;
    let max = size_flag("-e/--maxbytes", &args.maxbytes)?;
    if min > max {
        return Err(Error::usage(
            "-b/--minbytes",
            format!(
                "the smallest size ({}) is larger than the largest (-e {}); lower -b or raise -e",
                format_size(min),
                format_size(max)
            ),
        ));
    }
    let step = match (args.stepfactor, &args.stepbytes) {
        (Some(_), Some(_)) => {
            return Err(Error::usage(
                "-f/--stepfactor",
                "cannot be used with -i/--stepbytes; multiply the size (-f) or add to it (-i), not both",
            ))
        }
        (_, Some(bytes)) => Step::Bytes(size_flag("-i/--stepbytes", bytes)?),
        (Some(f), None) => Step::Factor(f),
        (None, None) => SweepOptions::default().sizes.step,
    };
    match step {
        Step::Factor(f) if f < 2 => {
            return Err(Error::usage(
                "-f/--stepfactor",
                format!("must be at least 2 (got {f}); to step by a fixed number of bytes use -i"),
            ))
        }
        // nccl-tests loops forever here; a sweep from 0 only grows by adding.
        Step::Factor(_) if min == 0 && max > 0 => {
            return Err(Error::usage(
                "-b/--minbytes",
                "0 never grows when multiplied by -f; start at 1 or more, or step by bytes with -i",
            ))
        }
        Step::Bytes(0) => {
            return Err(Error::usage(
                "-i/--stepbytes",
                "must be more than 0 bytes; or multiply with -f instead",
            ))
        }
        Step::Bytes(b) if (max - min) / b >= MAX_POINTS => {
            return Err(Error::usage(
                "-i/--stepbytes",
                format!(
                "stepping from {} to {} by {} gives more than {MAX_POINTS} sizes; raise -i, narrow -b/-e, or use -f",
                format_size(min),
                format_size(max),
                format_size(b)
            ),
            ))
        }
        _ => {}
    }
    Ok(SizeRange { min, max, step })
}

#[cfg(test)]
mod repeat_tests {
    #[test]
    fn two_sweeps_are_said_to_be_too_few() {
        let n = super::repeat_note(2).unwrap();
        assert!(n.contains("12.7") && n.contains("--repeat 3"), "{n}");
        assert_eq!(super::repeat_note(3), None);
        assert_eq!(super::repeat_note(1), None);
    }
}
