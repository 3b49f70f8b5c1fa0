//! How a point's timed calls were timed, for paths whose calls return before they complete (NCCL's queue
//! launches on a stream): all queued and waited for once, as nccl-tests' default `-z 0` times them, or a
//! wait per iteration or per call. Paths whose calls return complete (collbench's own, MPI) have no mode:
//! each iteration is timed by the host clock as it always was. Said in the tables' `# timing:` line and in
//! each record's `timing`.

use serde::{Deserialize, Serialize};

/// How a queuing path's timed calls were waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimingMode {
    /// Every timed call queued back to back (`-m` calls grouped per iteration), one wait at the end, the
    /// time divided by the calls: nccl-tests' `-z 0`.
    Queued,
    /// A wait after each timed iteration, timed one by one: what `-I 1`, `--percentiles` and `-z 3` need.
    PerIteration,
    /// A wait after each call (`-z 1` with a barrier after it, `-z 2` without).
    PerCall,
}

impl TimingMode {
    /// The mode of a path that queues (`queues`; `None` for paths whose calls return complete) under `-z
    /// blocking`, `-I` (`per_iter`) and `--percentiles`.
    pub fn of(blocking: u8, per_iter: bool, percentiles: bool, queues: bool) -> Option<TimingMode> {
        if !queues {
            return None;
        }
        Some(match blocking {
            1 | 2 => TimingMode::PerCall,
            3 => TimingMode::PerIteration,
            _ if per_iter || percentiles => TimingMode::PerIteration,
            _ => TimingMode::Queued,
        })
    }

    /// The table's `# timing:` line (without `# `) for `iters` timed iterations of `agg` calls (`-m`).
    pub fn describe(self, iters: u32, agg: u32, blocking: u8, per_iter: bool) -> String {
        let calls = if agg > 1 {
            format!("{iters} queued groups of {agg} calls (-m {agg}, one ncclGroupStart/End each)")
        } else {
            format!("{iters} queued launches")
        };
        match self {
            TimingMode::Queued => format!("timing: {calls}, one wait (-z {blocking})"),
            TimingMode::PerIteration => {
                let why = if blocking == 3 {
                    "-z 3, barrier untimed".to_string()
                } else if per_iter {
                    "-I 1".to_string()
                } else {
                    "--percentiles".to_string()
                };
                let group = if agg > 1 {
                    format!(" of {agg} grouped calls")
                } else {
                    String::new()
                };
                format!("timing: per iteration, a wait after each of {iters}{group} ({why})")
            }
            TimingMode::PerCall => {
                let barrier = if blocking == 1 { " and a barrier" } else { "" };
                let group = if agg > 1 { ", -m calls not grouped" } else { "" };
                format!("timing: per call, a wait{barrier} after each (-z {blocking}{group})")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_queues_and_per_iteration_figures_wait_per_iteration() {
        assert_eq!(TimingMode::of(0, false, false, true), Some(TimingMode::Queued));
        assert_eq!(TimingMode::of(0, true, false, true), Some(TimingMode::PerIteration));
        assert_eq!(TimingMode::of(0, false, true, true), Some(TimingMode::PerIteration));
        assert_eq!(TimingMode::of(3, false, false, true), Some(TimingMode::PerIteration));
        assert_eq!(TimingMode::of(1, true, false, true), Some(TimingMode::PerCall));
        assert_eq!(TimingMode::of(2, false, false, true), Some(TimingMode::PerCall));
        assert_eq!(
            TimingMode::of(0, false, false, false),
            None,
            "calls that return complete"
        );
    }

    #[test]
    fn the_line_names_the_flag_behind_the_mode() {
        assert_eq!(
            TimingMode::Queued.describe(20, 1, 0, false),
            "timing: 20 queued launches, one wait (-z 0)"
        );
        assert!(TimingMode::Queued
            .describe(5, 4, 0, false)
            .contains("5 queued groups of 4 calls (-m 4"));
        assert_eq!(
            TimingMode::PerCall.describe(20, 1, 1, false),
            "timing: per call, a wait and a barrier after each (-z 1)"
        );
        assert!(TimingMode::PerIteration.describe(20, 1, 0, true).ends_with("(-I 1)"));
        assert!(TimingMode::PerIteration
            .describe(20, 1, 0, false)
            .ends_with("(--percentiles)"));
    }
}
