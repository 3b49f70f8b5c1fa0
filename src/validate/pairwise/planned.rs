//! The pairwise test as planned, on every rank: round 0 of the circle measured and timed, the plan
//! ([`plan::plan`]) decided by rank 0 from that time and the budget left and shared with every rank, the
//! planned rounds, then the suspects measured again in rounds of disjoint pairs, as many as the plan's
//! reserve of rounds holds.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::plan::{self, Plan};
use super::{confirm, localise, measure, schedule};
use super::{Finding, GpuId, Link, PairwiseConfig, PairwiseReport, Participant, Thresholds};
use crate::algorithm::control;
use crate::error::{Error, Result};
use crate::transport::Transport;

/// Kept back at the end of a budget for gathering, judging and writing: this share of it, at least
/// [`MIN_MARGIN_S`].
const MARGIN_SHARE: f64 = 0.1;
/// See [`MARGIN_SHARE`].
const MIN_MARGIN_S: f64 = 2.0;

/// The clock of a pairwise test with `--budget`: when the run started and the seconds it may take.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    start: Instant,
    total_s: f64,
}

impl Budget {
    /// `total_s` seconds from `start` (the rank's start, so start-up counts).
    pub fn new(start: Instant, total_s: u64) -> Budget {
        Budget {
            start,
            total_s: total_s as f64,
        }
    }

    /// `total_s` seconds (fractions kept, negative as 0) from `start`: a share of a larger budget.
    pub fn from_secs(start: Instant, total_s: f64) -> Budget {
        Budget {
            start,
            total_s: if total_s.is_finite() { total_s.max(0.0) } else { 0.0 },
        }
    }

    /// The whole budget, seconds.
    pub fn total_s(&self) -> f64 {
        self.total_s
    }

    /// Seconds left for measuring now: the budget less what has passed and the margin for the end.
    pub fn left_s(&self) -> f64 {
        let margin = (self.total_s * MARGIN_SHARE).max(MIN_MARGIN_S);
        self.total_s - margin - self.start.elapsed().as_secs_f64()
    }
}

/// [`super::measure_on`] within `budget` (`None`: no limit, every pair up to [`plan::MAX_PAIRS`] pairs);
/// `announce` gets the plan on rank 0 as soon as it is decided; `meter` measures each pair. Every rank must
/// call it with the same `cfg` and the same kind of meter.
pub fn measure_within<T: Transport + ?Sized>(
    t: &mut T,
    meter: &mut dyn measure::Meter<T>,
    hosts: &[String],
    cfg: &PairwiseConfig,
    th: &Thresholds,
    budget: Option<Budget>,
    announce: &mut dyn FnMut(&Plan),
) -> Result<Option<PairwiseReport>> {
    let (parts, unit) = measure::participants(hosts, cfg.per_host);
    let n = parts.len();
    let started = Instant::now();
    // Round 0 between barriers, timed on rank 0: what a round costs on these links, now.
    control::barrier(t)?;
    let clock = Instant::now();
    let first_round: Vec<Vec<(usize, usize)>> = (0..schedule::count(n).min(1)).map(|r| schedule::round(n, r)).collect();
    let gpus = gather_gpus(t, &*meter)?;
    let mut mine = measure::run_rounds(t, meter, &parts, &first_round, cfg, Duration::ZERO)?;
    let round_s = clock.elapsed().as_secs_f64();
    let decided = (t.rank() == 0).then(|| plan::plan(n, round_s, budget.map_or(f64::INFINITY, |b| b.left_s())));
    let plan = share(t, decided, n)?;
    if t.rank() == 0 {
        announce(&plan);
    }
    let rounds = plan.schedule();
    mine.extend(measure::run_rounds(
        t,
        meter,
        &parts,
        rounds.get(1..).unwrap_or(&[]),
        cfg,
        Duration::ZERO,
    )?);
    let first = measure::collect(t, &mine)?;
    let participants: Vec<Participant> = parts
        .iter()
        .map(|&r| Participant {
            name: match unit {
                measure::Unit::Hosts => hosts[r].clone(),
                measure::Unit::Ranks => format!("rank{r}"),
            },
            rank: r,
            host: hosts[r].clone(),
            gpu: gpus.as_ref().and_then(|g| g.get(r).cloned().flatten()),
        })
        .collect();
    let mut links = first
        .map(|all| {
            if plan.every_pair() {
                measure::links(&participants, &all)
            } else {
                let mut pairs: Vec<(usize, usize)> = rounds.iter().flatten().copied().collect();
                pairs.sort_unstable();
                measure::links_of(&participants, &all, &pairs)
            }
        })
        .transpose()?;
    let again = match (cfg.confirm, budget) {
        (false, _) => Again::default(),
        // No budget: every suspect measured again, as many rounds as that takes.
        (true, None) => {
            let (rounds, first_findings) =
                confirm::remeasure(t, meter, &parts, &participants, &rounds, links.as_deref_mut(), cfg, th)?;
            Again {
                rounds,
                left_out: 0,
                first_findings,
            }
        }
        (true, Some(_)) => remeasure(t, meter, &parts, &participants, links.as_deref_mut(), cfg, th, &plan)?,
    };
    let Some(links) = links else {
        return Ok(None);
    };
    let elapsed_s = started.elapsed().as_secs_f64();
    let findings = localise::findings(&participants, &links, th);
    let dismissed = again
        .first_findings
        .map(|first| confirm::dismissed(&first, &findings))
        .unwrap_or_default();
    Ok(Some(PairwiseReport {
        schema: super::SCHEMA.into(),
        path: meter.path(t),
        unit: unit.name().into(),
        config: cfg.clone(),
        hosts: participants,
        links,
        findings,
        dismissed,
        host_config: Vec::new(),
        link_downs: Vec::new(),
        thresholds: th.clone(),
        rounds: plan.rounds.len(),
        remeasure_rounds: again.rounds,
        elapsed_s,
        plan: Some(plan::Record {
            budget_s: budget.map(|b| b.total_s()),
            plan,
            unconfirmed: again.left_out,
        }),
    }))
}

/// Every rank's GPU on rank 0 (`None` elsewhere, and where the pairs are not GPUs): the report names the GPU
/// a finding is about. A GPU a rank sends that cannot be read is a protocol error.
fn gather_gpus<T: Transport + ?Sized>(t: &mut T, meter: &dyn measure::Meter<T>) -> Result<Option<Vec<Option<GpuId>>>> {
    if !meter.on_device() {
        return Ok(None);
    }
    measure::gather_json(t, &meter.gpu(), "a GPU identity")
}

/// Rank 0's plan on every rank (`plan` is `Some` on rank 0, ignored elsewhere); a plan that is not one for
/// `n` participants is a protocol error: the ranks run different versions.
fn share<T: Transport + ?Sized>(t: &mut T, plan: Option<Plan>, n: usize) -> Result<Plan> {
    let bytes = serde_json::to_vec(&plan).expect("a plan serialises");
    let got = control::broadcast(t, &bytes)?;
    let bad = |what: String| {
        Error::peer(format!(
            "rank {}: rank 0 sent an unusable pairwise plan ({what}); were all ranks started with the same \
             collbench version?",
            t.rank()
        ))
    };
    let plan: Option<Plan> = serde_json::from_slice(&got).map_err(|e| bad(e.to_string()))?;
    let plan = plan.ok_or_else(|| bad("none".into()))?;
    plan.check(n).map_err(bad)?;
    Ok(plan)
}

/// What measuring the suspects again did.
#[derive(Default)]
struct Again {
    /// Rounds run.
    rounds: usize,
    /// Suspects left as first measured, for want of rounds (rank 0).
    left_out: usize,
    /// The first pass's findings, when anything was measured again (rank 0).
    first_findings: Option<Vec<Finding>>,
}

/// The suspects of `links` (rank 0's first pass; `None` elsewhere) measured again in at most the plan's
/// reserve of rounds ([`pack`]) and merged into `links` ([`confirm::merge`]); every rank runs the rounds
/// rank 0 sends.
#[allow(clippy::too_many_arguments)]
fn remeasure<T: Transport + ?Sized>(
    t: &mut T,
    meter: &mut dyn measure::Meter<T>,
    parts: &[usize],
    participants: &[Participant],
    mut links: Option<&mut [Link]>,
    cfg: &PairwiseConfig,
    th: &Thresholds,
    plan: &Plan,
) -> Result<Again> {
    let packed = links.as_deref_mut().map(|l| {
        let first: HashMap<(usize, usize), usize> = plan
            .schedule()
            .into_iter()
            .enumerate()
            .flat_map(|(k, round)| round.into_iter().map(move |p| (p, k)))
            .collect();
        pack(
            confirm::mark_suspects(l, th),
            |p| first.get(&p).copied().unwrap_or(usize::MAX),
            plan.confirm_rounds,
        )
    });
    let left_out = packed.as_ref().map_or(0, |(_, out)| *out);
    let rounds = share_rounds(t, packed.map(|(r, _)| r), parts.len())?;
    if rounds.is_empty() {
        return Ok(Again {
            left_out,
            ..Again::default()
        });
    }
    let mine = measure::run_rounds(t, meter, parts, &rounds, cfg, Duration::from_secs_f64(plan.settle_s))?;
    let (Some(all), Some(links)) = (measure::collect(t, &mine)?, links) else {
        return Ok(Again {
            rounds: rounds.len(),
            ..Again::default()
        });
    };
    let first = localise::findings(participants, links, th);
    let suspects: Vec<(usize, usize)> = rounds.iter().flatten().copied().collect();
    for fresh in measure::links_of(participants, &all, &suspects)? {
        let i = links
            .binary_search_by(|l| (l.a, l.b).cmp(&(fresh.a, fresh.b)))
            .expect("a suspect is one of the links");
        links[i] = confirm::merge(&links[i], &fresh);
    }
    Ok(Again {
        rounds: rounds.len(),
        left_out,
        first_findings: Some(first),
    })
}

/// Rank 0's rounds of suspects on every rank (`rounds` is `Some` on rank 0, ignored elsewhere). Rounds that
/// are not disjoint pairs (a, b), a < b < `n`, each pair once, are a protocol error: the ranks run different
/// versions.
fn share_rounds<T: Transport + ?Sized>(
    t: &mut T,
    rounds: Option<Vec<Vec<(usize, usize)>>>,
    n: usize,
) -> Result<Vec<Vec<(usize, usize)>>> {
    let bytes = serde_json::to_vec(&rounds.unwrap_or_default()).expect("rounds serialise");
    let got = control::broadcast(t, &bytes)?;
    let bad = |what: String| {
        Error::peer(format!(
            "rank {}: rank 0 sent unusable rounds to measure suspects again ({what}); were all ranks started with \
             the same collbench version?",
            t.rank()
        ))
    };
    let rounds: Vec<Vec<(usize, usize)>> = serde_json::from_slice(&got).map_err(|e| bad(e.to_string()))?;
    let mut seen = HashSet::new();
    for round in &rounds {
        let mut busy = HashSet::new();
        for &(a, b) in round {
            if a >= b || b >= n || !seen.insert((a, b)) || !busy.insert(a) || !busy.insert(b) {
                return Err(bad(format!("the pair ({a}, {b}) of {n} participants")));
            }
        }
    }
    Ok(rounds)
}

/// `suspects` in at most `cap` rounds of disjoint pairs, the lonely ones first: a suspect whose hosts have
/// no other is more likely a transient, which measuring again dismisses; a host with many is a fault
/// whatever a few more say, and its links, sharing the host, take a round each. Two suspects that shared a
/// round of the first pass (`first_round` of each) never share one again, so one pair's slowness is not
/// blamed on the other twice; among equals the later first-pass rounds go first, so a drift through a pass
/// (its hosts busier as it starts) does not fall on the same links twice. Returns the rounds and how many
/// suspects did not fit.
pub fn pack(
    mut suspects: Vec<(usize, usize)>,
    first_round: impl Fn((usize, usize)) -> usize,
    cap: usize,
) -> (Vec<Vec<(usize, usize)>>, usize) {
    let n = suspects.iter().map(|&(_, b)| b + 1).max().unwrap_or(0);
    let mut at = vec![0usize; n];
    for &(a, b) in &suspects {
        at[a] += 1;
        at[b] += 1;
    }
    suspects.sort_by_key(|&(a, b)| (at[a].max(at[b]), std::cmp::Reverse(first_round((a, b))), a, b));
    let mut rounds: Vec<Slot> = Vec::new();
    let mut left_out = 0;
    for p in suspects {
        let origin = first_round(p);
        let fits = |r: &Slot| !r.hosts.contains(&p.0) && !r.hosts.contains(&p.1) && !r.origins.contains(&origin);
        match rounds.iter().position(fits) {
            Some(k) => {
                let r = &mut rounds[k];
                r.pairs.push(p);
                r.hosts.extend([p.0, p.1]);
                r.origins.insert(origin);
            }
            None if rounds.len() < cap => rounds.push(Slot {
                pairs: vec![p],
                hosts: HashSet::from([p.0, p.1]),
                origins: HashSet::from([origin]),
            }),
            None => left_out += 1,
        }
    }
    (rounds.into_iter().map(|r| r.pairs).collect(), left_out)
}

/// One round [`pack`] fills: its pairs, their hosts, and the first-pass rounds they came from.
struct Slot {
    pairs: Vec<(usize, usize)>,
    hosts: HashSet<usize>,
    origins: HashSet<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;
    use crate::session::run_threads;

    #[test]
    fn suspects_are_packed_disjoint_lonely_first_within_the_cap() {
        // Host 5's four links and one lonely link (1, 2), each from its own first-pass round.
        let s = vec![(0, 5), (1, 2), (1, 5), (3, 5), (4, 5)];
        let own = |(a, b): (usize, usize)| 10 * a + b;
        // The lonely link first, beside one of host 5's; then host 5's other links, a round each, the later
        // first-pass rounds first.
        let (rounds, out) = pack(s.clone(), own, 10);
        assert_eq!(
            rounds,
            vec![vec![(1, 2), (4, 5)], vec![(3, 5)], vec![(1, 5)], vec![(0, 5)]]
        );
        assert_eq!(out, 0);
        // Two rounds: what does not fit is counted.
        let (rounds, out) = pack(s.clone(), own, 2);
        assert_eq!((rounds.len(), out), (2, 2), "{rounds:?}");
        // Two suspects that shared a first-pass round do not share a round again.
        let (rounds, _) = pack(vec![(0, 1), (2, 3)], |_| 7, 10);
        assert_eq!(rounds, vec![vec![(0, 1)], vec![(2, 3)]]);
        let (rounds, _) = pack(vec![(0, 1), (2, 3)], own, 10);
        assert_eq!(rounds, vec![vec![(2, 3), (0, 1)]]);
        assert_eq!(pack(Vec::new(), own, 3), (Vec::new(), 0));
        assert_eq!(pack(vec![(0, 1)], own, 0), (Vec::new(), 1));
        // Four hosts, every suspect alone: the first pass's first round is measured again last.
        let first = |p: (usize, usize)| match p {
            (0, 1) | (2, 3) => 0,
            (0, 2) | (1, 3) => 1,
            _ => 2,
        };
        let (rounds, _) = pack(vec![(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)], first, 10);
        let order: Vec<usize> = rounds.iter().map(|r| first(r[0])).collect();
        assert_eq!(order.first(), Some(&2), "{rounds:?}");
        assert_eq!(order.last(), Some(&0), "{rounds:?}");
    }

    #[test]
    fn every_rank_follows_rank_0s_plan_within_a_budget() {
        let cfg = PairwiseConfig {
            bytes: 16 << 10,
            iters: 1,
            lat_iters: 3,
            per_host: true,
            confirm: true,
        };
        // Six ranks, no time left: the fewest rounds (4 of 5) and nothing measured again.
        let out = run_threads(6, &Options::default(), |sess| {
            let hosts: Vec<String> = sess.world.ranks.iter().map(|r| r.host.clone()).collect();
            let budget = Budget::new(Instant::now(), 0);
            let mut seen = None;
            let rep = measure_within(
                &mut sess.transports[0],
                &mut measure::OverTransport::default(),
                &hosts,
                &cfg,
                &Thresholds::default(),
                Some(budget),
                &mut |p| seen = Some(p.clone()),
            )?;
            Ok::<_, Error>((rep, seen))
        });
        let mut out: Vec<_> = out.into_iter().map(|r| r.unwrap().unwrap()).collect();
        assert!(out[1..].iter().all(|(r, s)| r.is_none() && s.is_none()));
        let (rep, seen) = out.remove(0);
        let rep = rep.expect("rank 0 has the report");
        let rec = rep.plan.clone().expect("the plan is recorded");
        let p = rec.plan;
        assert_eq!(seen.as_ref(), Some(&p), "rank 0 announced the plan it recorded");
        // No rounds to measure suspects again: every suspect of the first pass (on a loaded machine there may
        // be some) is left as it was measured, and counted.
        let suspects = rep.links.iter().filter(|l| l.suspect).count();
        assert_eq!((rec.budget_s, rec.unconfirmed), (Some(0.0), suspects));
        assert_eq!((p.rounds.len(), p.circle_rounds, p.confirm_rounds), (4, 5, 0));
        assert!(!p.fits() && !p.every_pair(), "{p:?}");
        assert_eq!((rep.rounds, rep.remeasure_rounds), (4, 0));
        // The links are exactly the planned rounds' pairs, in (a, b) order.
        let mut want: Vec<(usize, usize)> = p.schedule().into_iter().flatten().collect();
        want.sort_unstable();
        assert_eq!(rep.links.iter().map(|l| (l.a, l.b)).collect::<Vec<_>>(), want);
        assert_eq!(want.len(), 12);
        assert!(
            rep.links.iter().all(|l| l.bw_gbs > 0.0 && l.latency_us > 0.0),
            "{:?}",
            rep.links
        );
    }
}
