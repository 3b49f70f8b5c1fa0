//! The rest of a preflight once the path MTU check ([`super::mtu`]) left hosts out: their ranks leave with the
//! failing verdict the check makes, and the others measure one another with the pairwise test over a
//! transport of their own ([`Subset`]), so nothing they send or gather waits on a frame that cannot arrive.
//! The collectives are not run: every rank takes part in each of them. Where too few hosts are left, or rank
//! 0's own host is left out, or the pairwise test is off, the preflight ends at once with the check's failure.

use super::budget::{self, Budget};
use super::checks::PathInfo;
use super::decide::Measured;
use super::verdict::Check;
use super::Setup;
use crate::driver::signals::OnSignal;
use crate::driver::{Ending, Rank};
use crate::error::{stderr, Result, EXIT_WRONG};
use crate::results::RankInfo;
use crate::transport::control;
use crate::transport::subset::Subset;
use crate::transport::Transport;
use crate::validate::pairwise::{self, Thresholds};

/// What the pairwise test is sized for where no collective measured the links: 400 Mbit/s, below any data
/// centre link, so the test's messages are small enough for its share of the budget (GB/s).
const ASSUMED_LINK_GBS: f64 = 0.05;
/// A small round trip's cost assumed for sizing, microseconds.
const ASSUMED_CALL_US: f64 = 200.0;

/// What rank 0 (and every rank) brings from the preflight so far.
pub struct Sofar<'a> {
    pub setup: &'a Setup,
    pub budget: &'a Budget,
    pub ranks: &'a [RankInfo],
    pub paths: &'a [PathInfo],
    /// Ranks left out by the MTU check, ascending.
    pub excluded: &'a [usize],
    /// Rank 0's checks so far (the GPU and MTU checks) and what it measured; `None` elsewhere.
    pub judged: Option<(Vec<Check>, Measured)>,
    pub on_signal: &'a OnSignal,
}

/// Ends the preflight without the ranks in `sofar.excluded`, as the module doc says.
pub fn finish(sofar: Sofar<'_>, mut rank: Rank) -> Result<Ending> {
    let Sofar {
        setup,
        budget,
        ranks,
        paths,
        excluded,
        judged,
        on_signal,
    } = sofar;
    let me = rank.sess.world.rank;
    let members: Vec<usize> = (0..ranks.len()).filter(|r| !excluded.contains(r)).collect();
    let mut hosts: Vec<&str> = members.iter().map(|&r| ranks[r].host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let connected = members
        .iter()
        .all(|&a| members.iter().all(|&b| a == b || rank.sess.links.connected(a, b)));
    let left_out: Vec<&str> = {
        let mut v: Vec<&str> = excluded.iter().map(|&r| ranks[r].host.as_str()).collect();
        v.dedup();
        v
    };
    if excluded.contains(&0) || hosts.len() < 2 || setup.pre.no_pairwise || !connected {
        let why = if excluded.contains(&0) {
            "rank 0's own host is one of them"
        } else if hosts.len() < 2 {
            "fewer than two hosts are left"
        } else {
            "the pairwise test is off (--no-pairwise)"
        };
        let decided = judged.map(|(checks, mut m)| {
            m.notes.push(format!(
                "nothing was measured after the path MTU check left out {}: {why}",
                left_out.join(", ")
            ));
            decide(setup, &m, checks)
        });
        on_signal.clear();
        return Ok(Ending::Shared {
            decided,
            rank: Box::new(rank),
        });
    }
    if excluded.contains(&me) {
        stderr!(
            "collbench: rank {me} (host {}): left out of the rest of the preflight, whose path MTU check found that \
             full-sized frames to or from this host vanish (rank 0's report says which); exits {EXIT_WRONG}",
            ranks[me].host
        );
        return Ok(Ending::Own(EXIT_WRONG));
    }
    let mut checks = Vec::new();
    let mut reports = Vec::new();
    let mut first_seen = Vec::new();
    let inv = crate::net::inventory::local();
    let npaths = rank.sess.transports.len();
    for k in 0..npaths {
        let started = super::evidence::start();
        let t = &mut rank.sess.transports[k];
        let path = t.path();
        let mut config = super::evidence::path_config(&inv, t.iface(), t.congestion().as_deref());
        if let Some((rx, tx)) = t.socket_buffers() {
            config.tuning.rcvbuf = Some(rx);
            config.tuning.sndbuf = Some(tx);
        }
        let mut sub = Subset::new(t, members.clone()).expect("this rank is a member");
        let names: Vec<String> = members.iter().map(|&r| ranks[r].host.clone()).collect();
        let left_s = budget.pairwise_s(budget.elapsed_s()) / (npaths - k) as f64;
        let gbs = paths.get(k).and_then(|p| p.line_rate_gbs).unwrap_or(ASSUMED_LINK_GBS);
        // Every rank sizes the test alike from the same figures but its own clock: rank 0's is sent.
        let cfg = budget::size_pairwise(
            &budget::preflight_pairwise(),
            hosts.len(),
            gbs / 2.0,
            2.0 * ASSUMED_CALL_US + budget::STALL_ALLOWANCE_US,
            left_s,
        );
        let cfg_bytes = control::broadcast(&mut sub, &serde_json::to_vec(&cfg).expect("a config serialises"))?;
        let cfg = serde_json::from_slice(&cfg_bytes).unwrap_or(cfg);
        let share = pairwise::planned::Budget::from_secs(std::time::Instant::now(), left_s);
        let report = pairwise::planned::measure_within(
            &mut sub,
            &mut pairwise::measure::OverTransport::default(),
            &names,
            &cfg,
            &Thresholds::default(),
            Some(share),
            &mut |_| (),
        );
        let report = match report {
            Ok(r) => r,
            Err(e) => {
                drop(sub);
                let during = format!("the pairwise link test of {path} without {}", left_out.join(", "));
                return Err(rank.sess.transports[k].abort(e.during(&during)));
            }
        };
        let mine = started.finish(&ranks[me].host, config, inv.cpu.quota_cores);
        let seen = super::evidence::gather(&mut sub, &mine)?.unwrap_or_default();
        let invs = super::evidence::inventories(&mut sub, &inv)?;
        if let Some(rep) = report {
            let _ =
                crate::report::stdout::print(&format!("{}\n", pairwise::render::text(&rep, setup.base.outputs.units)));
            checks.extend(super::findings::pairwise_findings(&path, &rep, &seen));
            checks.extend(super::carrier::checks(&path, "the pairwise test", &seen));
            checks.extend(super::cause::config_checks(&path, &seen, &invs));
            let starved = super::starved::checks(&path, "the pairwise test", &seen, &checks);
            checks.extend(starved);
            reports.push(rep);
        }
        if k == 0 {
            first_seen = seen;
        }
    }
    let decided = judged.map(|(mut before, mut m)| {
        before.extend(checks);
        m.evidence = first_seen;
        m.notes.push(format!(
            "the collectives were not run: each spans every rank, and full-sized frames to or from {} vanish; the \
             pairwise test measured the other {} hosts",
            left_out.join(", "),
            hosts.len()
        ));
        super::cause::cluster_line_rates(&mut m.paths, &reports);
        decide(setup, &m, before)
    });
    on_signal.clear();
    let mut sub = Subset::new(&mut rank.sess.transports[0], members).expect("this rank is a member");
    let code = crate::driver::verdict::verdict(me, "preflight", decided, |b| control::broadcast(&mut sub, b))?;
    Ok(Ending::Own(code))
}

/// Rank 0's verdict on `m` with `checks`.
fn decide(setup: &Setup, m: &Measured, checks: Vec<Check>) -> Result<i32> {
    super::decide::decide(
        &setup.pre,
        m,
        setup.baseline.as_deref(),
        checks,
        &super::path_keys(&setup.opts),
    )
}
