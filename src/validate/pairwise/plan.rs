//! The plan of a pairwise test within its budget (`pairwise --budget`): which rounds of the circle method
//! are measured and how many rounds are kept to measure suspects again, from the number of participants,
//! the measured time of one round and the seconds left.
//!
//! - Every pair when its N-1 rounds (N for odd N) and a reserve for re-measuring fit.
//! - Otherwise a sample of the circle's rounds, spread over all of them: every host still meets R distinct
//!   partners, so a slow host is slow in all of its R links and is named as surely as with every pair; a
//!   slow link alone is measured with chance R/(N-1) (the plan's `coverage`).
//! - At most [`MAX_PAIRS`] pairs in any case (every pair up to 4,096 hosts, 2,048 partners each at 8,192):
//!   what rank 0 gathers, judges and writes is bounded whatever the budget. [`every_pair_s`] says what a
//!   budget must leave for every pair.
//!
//! Pure: the same inputs give the same plan on every rank, and the simulation in
//! tests/pairwise_simulation.rs runs it at sizes this machine cannot host.

use serde::{Deserialize, Serialize};

use super::schedule;

/// The most pairs of the first pass: every pair of 4,096 hosts (8,386,560), and as many rounds as stay under
/// it beyond (2,048 at 8,192 hosts, 128 at 131,072): a slow link among 4,096 hosts is only found if its pair
/// is measured. Rank 0 holds one `Link` (about 240 bytes with its two names) per pair, so about 2 GB at the
/// cap, and writes each pair to the report.
pub const MAX_PAIRS: usize = 1 << 23;
/// The fewest rounds of a sampled first pass, whatever the budget: a host needs a few links to be judged.
pub const MIN_ROUNDS: usize = 4;
/// Planned rounds must fit the seconds left this many times over: rounds with a slow host or link, or on
/// busy hosts, take longer than the one measured.
pub const SAFETY: f64 = 1.25;
/// Rounds kept for re-measuring suspects, as a share of the first pass's rounds, at least [`MIN_CONFIRM`].
pub const CONFIRM_SHARE: f64 = 0.25;
/// The fewest rounds kept for re-measuring suspects when they fit.
pub const MIN_CONFIRM: usize = 4;

/// What a pairwise test measures: rounds of the circle method (indices into [`schedule::rounds`]; round 0,
/// the one measured to plan, first) and the most rounds of re-measuring suspects, each alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Hosts (or ranks) taking part.
    pub participants: usize,
    /// Rounds of the whole circle: every pair once.
    pub circle_rounds: usize,
    /// The rounds of the first pass, ascending, round 0 first.
    pub rounds: Vec<usize>,
    /// The most rounds the re-measure of suspects may take.
    pub confirm_rounds: usize,
    /// Seconds the measured round took.
    pub round_s: f64,
    /// Seconds left for the rest of the test when it was planned (after the measured round); `None`
    /// without a budget.
    pub left_s: Option<f64>,
    /// Seconds the rounds after the measured one and the whole re-measure reserve take at `round_s` (each
    /// round of re-measuring with its settling).
    pub planned_s: f64,
    /// Seconds each pair measured again exchanges untimed first: [`super::measure::SETTLE`], or 0 where
    /// settling would cost rounds of the first pass (0 in files that predate it).
    #[serde(default)]
    pub settle_s: f64,
}

/// A plan as the report records it: with the budget it was made for and the suspects it had no rounds for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// `--budget`, seconds; `None`: none.
    pub budget_s: Option<f64>,
    #[serde(flatten)]
    pub plan: Plan,
    /// Suspects left as first measured because the reserve of rounds to measure them again was spent.
    pub unconfirmed: usize,
}

impl Plan {
    /// Whether the first pass measures every pair.
    pub fn every_pair(&self) -> bool {
        self.rounds.len() == self.circle_rounds
    }

    /// Pairs the first pass measures.
    pub fn pairs(&self) -> usize {
        self.rounds.len() * (self.participants / 2)
    }

    /// The chance that a given pair is measured: rounds measured over all the circle's rounds.
    pub fn coverage(&self) -> f64 {
        if self.circle_rounds == 0 {
            1.0
        } else {
            self.rounds.len() as f64 / self.circle_rounds as f64
        }
    }

    /// Whether what is planned fits the seconds left (a plan at its minimum may not).
    pub fn fits(&self) -> bool {
        !matches!(self.left_s, Some(left) if self.planned_s > left)
    }

    /// The pairs of the first pass's rounds, round by round.
    pub fn schedule(&self) -> Vec<Vec<(usize, usize)>> {
        if self.every_pair() {
            return schedule::rounds(self.participants);
        }
        self.rounds
            .iter()
            .map(|&r| schedule::round(self.participants, r))
            .collect()
    }

    /// The plan in one line, for stdout: what is measured, what is kept to measure again, and the time
    /// against `budget_s` (the whole `--budget`; `None`: none).
    pub fn line(&self, budget_s: Option<f64>) -> String {
        let n = self.participants;
        let what = if self.every_pair() {
            format!(
                "every pair: {} of {} rounds, {} pairs",
                self.rounds.len(),
                self.circle_rounds,
                self.pairs()
            )
        } else {
            format!(
                "{} of {} rounds sampled: {} of {} pairs, every host meets {} partners, a single slow link is \
                 measured with chance {:.0}%",
                self.rounds.len(),
                self.circle_rounds,
                self.pairs(),
                n * n.saturating_sub(1) / 2,
                self.rounds.len(),
                100.0 * self.coverage()
            )
        };
        let time = match budget_s {
            Some(b) => format!(
                "; a round took {:.3} s, about {:.0} s planned of {:.0} s left of --budget {b:.0} s{}",
                self.round_s,
                self.planned_s.ceil(),
                self.left_s.unwrap_or(0.0).max(0.0).floor(),
                if self.fits() {
                    ""
                } else {
                    " (the fewest rounds that can judge a host do not fit: raise --budget)"
                }
            ),
            None => format!("; a round took {:.3} s, no budget", self.round_s),
        };
        format!(
            "plan: {what}; up to {} rounds to measure suspects again{time}",
            self.confirm_rounds
        )
    }

    /// Checks a plan that came from rank 0: rounds ascending, distinct and of the circle of `n`, round 0
    /// first. `Err` says what is wrong.
    pub fn check(&self, n: usize) -> std::result::Result<(), String> {
        let circle = schedule::count(n);
        if self.participants != n || self.circle_rounds != circle {
            return Err(format!(
                "a plan for {} participants ({} rounds), not {n} ({circle})",
                self.participants, self.circle_rounds
            ));
        }
        if circle > 0 && self.rounds.first() != Some(&0) {
            return Err("a plan that does not start at round 0".into());
        }
        if self.rounds.windows(2).any(|w| w[0] >= w[1]) || self.rounds.last().is_some_and(|&r| r >= circle) {
            return Err(format!("rounds {:?} are not ascending rounds of {circle}", self.rounds));
        }
        if !(0.0..=super::measure::SETTLE.as_secs_f64()).contains(&self.settle_s) {
            return Err(format!("a settling time of {} s", self.settle_s));
        }
        Ok(())
    }
}

/// Rounds kept for re-measuring after a first pass of `first` rounds.
fn confirm_for(first: usize) -> usize {
    ((first as f64 * CONFIRM_SHARE).ceil() as usize).max(MIN_CONFIRM)
}

/// Rounds the first pass measures at most for `n` participants: the whole circle, or as many as hold
/// [`MAX_PAIRS`] (never fewer than [`MIN_ROUNDS`]).
fn most_rounds(n: usize) -> usize {
    schedule::count(n).min((MAX_PAIRS / (n / 2).max(1)).max(MIN_ROUNDS))
}

/// Seconds a first pass of `first` rounds (the measured one not counted) and `confirm` rounds of
/// re-measuring take when a round took `round_s`, each re-measuring pair settling for `settle_s`.
fn seconds(first: usize, confirm: usize, round_s: f64, settle_s: f64) -> f64 {
    first.saturating_sub(1) as f64 * round_s + confirm as f64 * (round_s + settle_s)
}

/// The seconds [`plan`] must be left (after the measured round, which took `round_s`) to plan its most
/// rounds, every pair up to [`MAX_PAIRS`], with their re-measure reserve: what `--budget` must cover on
/// top of start-up, the measured round and its margin.
pub fn every_pair_s(n: usize, round_s: f64) -> f64 {
    let most = most_rounds(n);
    seconds(most, confirm_for(most), round_s, 0.0) * SAFETY
}

/// The plan for `n` participants when one round took `round_s` seconds and `left_s` seconds are left for
/// the rest (the measured round 0 done): every pair if its rounds and their re-measure reserve fit `left_s`
/// [`SAFETY`] times over, else as many rounds as fit spread evenly over the circle (at least
/// [`MIN_ROUNDS`]), never more rounds than hold [`MAX_PAIRS`]. The pairs measured again settle first
/// ([`super::measure::SETTLE`], counted in the plan) unless that would cost rounds of the first pass: a
/// link the first pass did not measure cannot be found at all. `left_s` infinite: no budget.
pub fn plan(n: usize, round_s: f64, left_s: f64) -> Plan {
    let settled = plan_settling(n, round_s, left_s, super::measure::SETTLE.as_secs_f64());
    let bare = plan_settling(n, round_s, left_s, 0.0);
    if settled.rounds.len() == bare.rounds.len() {
        settled
    } else {
        bare
    }
}

/// [`plan`] with each pair measured again settling for `settle_s` first.
fn plan_settling(n: usize, round_s: f64, left_s: f64, settle_s: f64) -> Plan {
    let circle = schedule::count(n);
    let round_s = if round_s.is_finite() { round_s.max(0.0) } else { 1e9 };
    let left = left_s.max(0.0);
    let unbounded = left.is_infinite();
    let fits = |first: usize, confirm: usize| unbounded || seconds(first, confirm, round_s, settle_s) <= left / SAFETY;
    let cap = most_rounds(n);
    let first = if fits(cap, confirm_for(cap)) {
        cap
    } else {
        (1..=cap)
            .rev()
            .find(|&r| fits(r, confirm_for(r)))
            .unwrap_or(0)
            .max(MIN_ROUNDS.min(cap))
    };
    // Whatever fits beyond the first pass may re-measure, up to twice the first pass (a slow host's links
    // and a few transients); never less than the reserve when it fits. Without a budget, every link the
    // first pass measured may be a suspect.
    let confirm = if first == 0 {
        0
    } else if unbounded {
        first * (n / 2)
    } else {
        let spare = left / SAFETY - seconds(first, 0, round_s, settle_s);
        let per_round = round_s + settle_s;
        let rounds = if per_round > 0.0 {
            (spare / per_round).floor().clamp(0.0, 1e12) as usize
        } else {
            usize::MAX
        };
        rounds.min((2 * first).max(MIN_CONFIRM))
    };
    let rounds: Vec<usize> = (0..first).map(|k| k * circle / first).collect();
    Plan {
        participants: n,
        circle_rounds: circle,
        rounds,
        confirm_rounds: confirm,
        round_s,
        left_s: left_s.is_finite().then_some(left_s),
        planned_s: seconds(first, confirm, round_s, settle_s),
        settle_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_pair_when_it_fits() {
        // 16 hosts at 100 Mbit/s: a round of about 2.3 s, 100 s left.
        let p = plan(16, 2.3, 100.0);
        assert!(p.every_pair(), "{p:?}");
        assert_eq!((p.rounds.len(), p.pairs()), (15, 120));
        assert_eq!(p.rounds, (0..15).collect::<Vec<_>>());
        assert!(p.confirm_rounds >= MIN_CONFIRM && p.fits(), "{p:?}");
        assert!(p.planned_s * SAFETY <= 100.0 + 1e-9, "{p:?}");
        assert_eq!(p.coverage(), 1.0);
        // No budget: every pair, and every link may be measured again.
        let p = plan(16, 2.3, f64::INFINITY);
        assert!(p.every_pair() && p.fits() && p.confirm_rounds == 120, "{p:?}");
    }

    #[test]
    fn a_tight_budget_samples_rounds_spread_over_the_circle() {
        // 64 hosts at 100 Mbit/s, 100 s: 63 rounds do not fit.
        let p = plan(64, 2.3, 100.0);
        assert!(!p.every_pair() && p.fits(), "{p:?}");
        let r = p.rounds.len();
        assert!((MIN_ROUNDS..63).contains(&r), "{p:?}");
        assert!(r + p.confirm_rounds <= (100.0 / SAFETY / 2.3) as usize + 1, "{p:?}");
        assert!(p.confirm_rounds >= confirm_for(r), "{p:?}");
        assert_eq!(p.rounds[0], 0);
        assert!(p.check(64).is_ok(), "{p:?}");
        // Spread: the gaps between sampled rounds differ by at most one.
        let gaps: BTreeSet<usize> = p.rounds.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.len() <= 2, "{gaps:?}");
        // Every host meets `r` distinct partners.
        let mut partners = vec![BTreeSet::new(); 64];
        for round in p.schedule() {
            assert_eq!(round.len(), 32);
            for (a, b) in round {
                partners[a].insert(b);
                partners[b].insert(a);
            }
        }
        assert!(partners.iter().all(|s| s.len() == r), "{partners:?}");
        assert!((p.coverage() - r as f64 / 63.0).abs() < 1e-12);
    }

    #[test]
    fn too_little_time_still_measures_the_minimum_and_says_it_does_not_fit() {
        let p = plan(64, 5.0, 1.0);
        assert_eq!((p.rounds.len(), p.confirm_rounds), (MIN_ROUNDS, 0), "{p:?}");
        assert!(!p.fits(), "{p:?}");
        let p = plan(3, 5.0, 0.0);
        assert_eq!(p.rounds, vec![0, 1, 2], "fewer rounds than the minimum: all of them");
    }

    #[test]
    fn never_more_than_the_cap_whatever_the_budget() {
        let p = plan(8192, 0.005, f64::INFINITY);
        assert_eq!((p.rounds.len(), p.circle_rounds), (2048, 8191));
        assert_eq!(p.pairs(), MAX_PAIRS);
        let p = plan(4096, 0.01, 1e6);
        assert!(
            p.every_pair() && p.rounds.len() == 4095 && p.pairs() <= MAX_PAIRS,
            "{p:?}"
        );
        let p = plan(4097, 0.01, 1e6);
        assert!(!p.every_pair() && p.pairs() <= MAX_PAIRS, "{p:?}");
    }

    #[test]
    fn every_pair_s_is_the_least_that_plans_every_pair() {
        for (n, round_s) in [(16, 2.3), (64, 0.05), (1024, 0.02), (4096, 0.03), (8192, 0.01)] {
            let need = every_pair_s(n, round_s);
            let p = plan(n, round_s, need + 1e-9);
            assert_eq!(p.rounds.len(), most_rounds(n), "n={n}: {p:?}");
            assert!(p.fits() && p.planned_s * SAFETY <= need + 1e-9, "n={n}: {p:?}");
            let p = plan(n, round_s, need * 0.99);
            assert!(p.rounds.len() < most_rounds(n), "n={n}: {p:?}");
        }
    }

    #[test]
    fn suspects_settle_unless_that_costs_rounds_of_the_first_pass() {
        let settle = super::super::measure::SETTLE.as_secs_f64();
        // 16 hosts at 100 Mbit/s, 100 s: every pair and the settling fit, and the plan counts it.
        let p = plan(16, 2.3, 100.0);
        assert!(p.every_pair() && p.settle_s == settle, "{p:?}");
        assert!(
            (p.planned_s - (14.0 * 2.3 + p.confirm_rounds as f64 * (2.3 + settle))).abs() < 1e-9,
            "{p:?}"
        );
        // 1,024 hosts with just what every pair needs unsettled: settling would cost rounds, so none.
        let p = plan(1024, 0.02, every_pair_s(1024, 0.02) + 1e-9);
        assert!(p.every_pair() && p.settle_s == 0.0, "{p:?}");
        // No budget: always.
        assert_eq!(plan(1024, 0.02, f64::INFINITY).settle_s, settle);
        // A plan from rank 0 that asks for more settling than collbench does is refused.
        let p = Plan {
            settle_s: 5.0,
            ..plan(8, 1.0, 100.0)
        };
        assert!(p.check(8).is_err(), "{p:?}");
    }

    #[test]
    fn nothing_to_plan_below_two() {
        for n in [0, 1] {
            let p = plan(n, 1.0, 10.0);
            assert!(p.rounds.is_empty() && p.confirm_rounds == 0 && p.every_pair(), "{p:?}");
            assert!(p.check(n).is_ok());
        }
        let p = plan(2, 0.0, 0.0);
        assert_eq!(p.rounds, vec![0]);
    }

    #[test]
    fn the_planned_time_never_exceeds_what_is_left_when_the_minimum_fits() {
        for n in [4, 5, 16, 17, 64, 256, 1024, 4096] {
            for round_s in [0.001, 0.05, 0.3, 2.0] {
                for left in [5.0, 30.0, 100.0, 600.0] {
                    let p = plan(n, round_s, left);
                    let minimum = (MIN_ROUNDS.min(p.circle_rounds) - 1) as f64 * round_s;
                    if minimum <= left {
                        assert!(p.fits(), "n={n} round {round_s} left {left}: {p:?}");
                    }
                    assert!(p.check(n).is_ok(), "{p:?}");
                }
            }
        }
    }

    #[test]
    fn a_bad_plan_from_rank_0_is_refused() {
        let good = plan(8, 1.0, 100.0);
        assert!(good.check(8).is_ok());
        assert!(good.check(9).is_err());
        for rounds in [vec![1, 2], vec![0, 3, 3], vec![0, 7]] {
            let p = Plan { rounds, ..good.clone() };
            assert!(p.check(8).is_err(), "{p:?}");
        }
    }
}
