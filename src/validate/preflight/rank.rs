//! One rank of a preflight: connect as `run` does, sweep every phase of the plan over every path (repeats
//! interleaved across paths), then rank 0 judges.

use std::io::IsTerminal;

use indicatif::ProgressBar;

use super::checks::PathInfo;
use super::verdict::{Check, Verdict};
use super::Setup;
use crate::error::{stderr, Error, Result};
use crate::options::{Options, PathKind, Progress};
use crate::paths::Paths;
use crate::report::Record;
use crate::session::{self, Session};
use crate::transport::Transport;
use crate::validate::pairwise::{self, Finding, PairwiseConfig, PairwiseReport};
use crate::world::{env, Identity};

/// Bootstrap, connect, measure, and (rank 0) decide; returns the exit status.
pub fn run_rank(setup: &Setup, id: &Identity) -> Result<i32> {
    let opts = &setup.opts;
    if id.launcher != "local" {
        if id.rank == 0 {
            super::check_outputs(&setup.args)?;
        }
        if let Some(avail) = crate::memory::available::mem_available() {
            let local = env::local_size_from(|k| std::env::var(k).ok()).unwrap_or(1);
            opts.check_memory(local, avail).map_err(|e| match e {
                Error::Usage { message, .. } => Error::usage("--bandwidth-bytes", message),
                other => other,
            })?;
        }
    }
    #[cfg(feature = "mpi")]
    let mpi = crate::run::init_mpi(opts, id)?;
    let exchange = session::Exchange::choose(
        id,
        #[cfg(feature = "mpi")]
        mpi.as_ref(),
    )?;
    // The pairwise link test talks over every pair, not only those the collectives' algorithms use.
    let pairs = if setup.args.no_pairwise {
        session::Pairs::Needed
    } else {
        session::Pairs::All
    };
    let mut sess = session::connect_with(id, opts, opts.agreement().to_wire(), exchange, pairs)?;
    let phases: Vec<Options> = setup
        .plan
        .phases
        .iter()
        .map(|ph| super::plan::phase_options(&setup.base, ph))
        .collect();
    // Every path is opened once, here, and borrowed by every phase's sweeps.
    let mut open = match Paths::open(&mut sess, opts) {
        Ok(p) => p,
        Err(e) => return Err(crate::paths::abort_on(&mut sess, 0, e)),
    };
    let paths = path_infos(&sess, &open, opts);
    let names: Vec<String> = paths.iter().map(|p| p.name.clone()).collect();
    let plan_lines = setup.plan.describe(
        sess.world.size,
        &names,
        // The estimate assumes the slowest path reaches the default threshold.
        paths
            .iter()
            .map(|p| {
                p.line_rate_gbs
                    .map(|r| r * super::checks::DEFAULT_LINE_RATE_PCT / 100.0)
            })
            .try_fold(f64::INFINITY, |m, r| r.map(|r| m.min(r))),
    );
    let mut plan_lines = plan_lines;
    if !setup.args.no_pairwise {
        let c = PairwiseConfig::default();
        plan_lines.push(format!(
            "  then the pairwise link test over every TCP path: every pair of hosts in rounds of disjoint pairs, {} MiB \
             each way at once x {}, 8 B ping-pong x {} (--no-pairwise skips it)",
            c.bytes >> 20,
            c.iters,
            c.lat_iters
        ));
    }
    if id.rank == 0 {
        for l in &plan_lines {
            println!("{l}");
        }
    }
    let progress = (id.rank == 0 && opts.outputs.progress == Progress::Auto && std::io::stderr().is_terminal())
        .then(ProgressBar::new_spinner);
    let ranks = sess.world.ranks.clone();
    let mut connectivity: Vec<Record> = Vec::new();
    let mut records: Vec<Record> = Vec::new();
    let mut said = Vec::new();
    for repeat in 0..setup.plan.repeat {
        for (k, phase_opts) in phases.iter().enumerate() {
            // Connectivity is asked once; later sweeps measure.
            if k == 0 && repeat > 0 {
                continue;
            }
            for pi in 0..open.len() {
                let swept = open.sweep(
                    pi,
                    &mut sess,
                    crate::bench::Sweep {
                        opts: phase_opts.settings(),
                        repeat,
                        ranks: &ranks,
                        reporters: &mut [],
                        progress: progress.as_ref(),
                        only: None,
                    },
                    #[cfg(feature = "mpi")]
                    mpi.as_ref(),
                );
                let outcome = match swept {
                    Ok(o) => o,
                    Err(e) => {
                        if let Some(pb) = &progress {
                            pb.finish_and_clear();
                        }
                        // Every peer learns that this rank gave up, as in `run`.
                        let e = open.abort(pi, &mut sess, e);
                        if id.rank == 0 {
                            // What was measured before the failure is judged and kept, the failure as a check.
                            let failed = Check {
                                name: format!("{} {}", paths[pi].name, setup.plan.phases[k].name),
                                path: paths[pi].name.clone(),
                                measured: "did not finish".into(),
                                value: None,
                                lo: None,
                                hi: None,
                                unit: String::new(),
                                threshold: "completes".into(),
                                source: "built in".into(),
                                verdict: super::verdict::Verdict::Fail,
                                detail: e.to_string(),
                            };
                            let m = measured(setup, &sess, &plan_lines, &paths, &connectivity, &records);
                            let keys = super::path_keys(opts);
                            if let Err(w) = super::decide::decide(&setup.args, &m, None, vec![failed], &keys) {
                                stderr!("collbench: error: keeping what was measured: {w}");
                            }
                        }
                        return Err(e);
                    }
                };
                crate::bench::note_skipped(&mut said, outcome.skipped);
                if k == 0 {
                    connectivity.extend(outcome.records);
                } else {
                    records.extend(outcome.records);
                }
            }
        }
    }
    if let Some(pb) = &progress {
        pb.finish_and_clear();
    }
    let extra = if setup.args.no_pairwise {
        Vec::new()
    } else {
        pairwise_checks(&mut sess, &PairwiseConfig::default())?
    };
    if id.rank != 0 {
        return Ok(0);
    }
    let m = measured(setup, &sess, &plan_lines, &paths, &connectivity, &records);
    super::decide::decide(
        &setup.args,
        &m,
        setup.baseline.as_deref(),
        extra,
        &super::path_keys(opts),
    )
}

/// What rank 0 measured so far, for the verdict and the files.
fn measured(
    setup: &Setup,
    sess: &Session,
    plan: &[String],
    paths: &[PathInfo],
    connectivity: &[Record],
    records: &[Record],
) -> super::decide::Measured {
    super::decide::Measured {
        nranks: sess.world.size,
        plan: plan.to_vec(),
        paths: paths.to_vec(),
        bandwidth_from: setup.plan.bandwidth_from(),
        connectivity: crate::report::json::entries(connectivity),
        results: crate::report::json::entries(records),
    }
}

/// The pairwise link test over every TCP path of the session, run on every rank: on rank 0 its matrices are
/// printed and its findings become checks (a slow host or link FAILs; none is one PASS check per path).
fn pairwise_checks(sess: &mut Session, cfg: &PairwiseConfig) -> Result<Vec<Check>> {
    let mut checks = Vec::new();
    for k in 0..sess.transports.len() {
        let path = sess.transports[k].path();
        let report = match pairwise::measure(sess, k, cfg) {
            Ok(r) => r,
            Err(e) => return Err(sess.transports[k].abort(e.during(&format!("the pairwise link test of {path}")))),
        };
        if let Some(rep) = report {
            println!("{}", pairwise::render::text(&rep));
            checks.extend(pairwise_findings(&path, &rep));
        }
    }
    Ok(checks)
}

/// The checks of one path's pairwise report.
fn pairwise_findings(path: &str, rep: &PairwiseReport) -> Vec<Check> {
    let check = |name: String, measured: String, threshold: String, verdict, detail: String| Check {
        name,
        path: path.to_string(),
        measured,
        value: None,
        lo: None,
        hi: None,
        unit: String::new(),
        threshold,
        source: "pairwise localisation (median and MAD over links and hosts, built in)".into(),
        verdict,
        detail,
    };
    if rep.links.is_empty() {
        return Vec::new();
    }
    if rep.findings.is_empty() {
        let mut bw: Vec<f64> = rep.links.iter().map(|l| l.bw_gbs).collect();
        let mut lat: Vec<f64> = rep.links.iter().map(|l| l.latency_us).collect();
        let min_bw = bw.iter().copied().fold(f64::INFINITY, f64::min);
        return vec![check(
            format!("{path} pairwise links"),
            format!(
                "{} links: {:.4} GB/s median (lowest {min_bw:.4}), {:.1} us median latency",
                rep.links.len(),
                pairwise::localise::median(&mut bw),
                pairwise::localise::median(&mut lat)
            ),
            "no slow host or link".into(),
            Verdict::Pass,
            format!("every {} pair measured in {} rounds", rep.unit, rep.rounds),
        )];
    }
    // Ranks that all share one host talk over its loopback: their differences are the CPU scheduler's, not a
    // cable's or a switch port's, so they are shown as warnings rather than failing the run.
    let one_host = rep.hosts.windows(2).all(|w| w[0].host == w[1].host);
    rep.findings
        .iter()
        .map(|f| {
            let line = pairwise::render::finding_line(f);
            let (name, measured) = match f {
                Finding::SlowHost { host, .. } => (format!("{path} pairwise: slow host {host}"), line.clone()),
                Finding::SlowLink { a, b, .. } => (format!("{path} pairwise: slow link {a} <-> {b}"), line.clone()),
            };
            if one_host {
                let detail = format!(
                    "{line}; every rank runs on one host, so these pairs share its loopback and CPUs: a slower \
                     pair here means ranks waited for a core, not a bad link (a warning, not a failure)"
                );
                check(name, measured, "no slow host or link".into(), Verdict::Warn, detail)
            } else {
                check(name, measured, "no slow host or link".into(), Verdict::Fail, line)
            }
        })
        .collect()
}

/// Every measured path with its line rate and where that came from, in `--transport` order.
fn path_infos(sess: &Session, open: &Paths, opts: &Options) -> Vec<PathInfo> {
    let given_rate = opts.paths.line_rate_gbit.map(|g| (g / 8.0, "--line-rate".to_string()));
    open.iter()
        .map(|o| {
            let p = &o.kind;
            let (name, rate) = match (p, o.tcp_index()) {
                (PathKind::Tcp(_), Some(k)) => {
                    let t = &sess.transports[k];
                    // The interface rank 0 bound.
                    let iface = t.iface().to_string();
                    let rate = given_rate.clone().or_else(|| {
                        crate::net::iface::line_rate_gbs(&iface).map(|r| (r, format!("link speed of {iface}")))
                    });
                    (t.path(), rate.ok_or(format!("link speed of {iface} unknown")))
                }
                #[cfg(feature = "rdma")]
                (PathKind::Rdma { device, port }, _) => {
                    let sys = std::path::Path::new(crate::transport::rdma::sysfs::SYSFS_IB);
                    let rate = given_rate.clone().or_else(|| {
                        crate::transport::rdma::sysfs::port_info(sys, device, *port)
                            .and_then(|i| i.rate_gbit())
                            .or_else(|| {
                                // No sysfs tree (a container without /sys/class/infiniband): ask the device.
                                let ctx = crate::transport::rdma::verbs::Context::open(device).ok()?;
                                ctx.query_port(*port).ok()?.rate_gbit
                            })
                            .map(|g| (g / 8.0, format!("rate of {device} port {port}")))
                    });
                    (
                        p.to_string(),
                        rate.ok_or(format!("rate of {device} port {port} unknown")),
                    )
                }
                _ => (
                    p.to_string(),
                    given_rate.clone().ok_or(format!("line rate of {p} unknown")),
                ),
            };
            let (line_rate_gbs, rate_from) = match rate {
                Ok((r, from)) => (Some(r), from),
                Err(why) => (None, why),
            };
            PathInfo {
                name,
                given: p.to_string(),
                line_rate_gbs,
                rate_from,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::pairwise::localise::{self, tests::matrix, Thresholds};

    /// Three participants, the links of participant 0 slow, on `hosts` (one per participant).
    fn report(hosts: [&str; 3]) -> PairwiseReport {
        let (mut parts, links) = matrix(3, |a, b, _| if a == 0 || b == 0 { 0.25 } else { 1.0 }, |_, _, _| 30.0);
        for (p, h) in parts.iter_mut().zip(hosts) {
            p.host = h.to_string();
        }
        let findings = localise::findings(&parts, &links, &Thresholds::default());
        assert!(!findings.is_empty(), "the synthetic matrix has a slow participant");
        PairwiseReport {
            schema: pairwise::SCHEMA.into(),
            path: "tcp@lo".into(),
            unit: "ranks".into(),
            config: PairwiseConfig::default(),
            hosts: parts,
            links,
            findings,
            dismissed: Vec::new(),
            thresholds: Thresholds::default(),
            rounds: 3,
            remeasure_rounds: 0,
            elapsed_s: 1.0,
        }
    }

    #[test]
    fn slow_pairs_fail_across_hosts_and_only_warn_on_one_host() {
        let across = pairwise_findings("tcp@eth0", &report(["h0", "h1", "h2"]));
        assert!(
            !across.is_empty() && across.iter().all(|c| c.verdict == Verdict::Fail),
            "{across:?}"
        );
        let local = pairwise_findings("tcp@lo", &report(["vm", "vm", "vm"]));
        assert_eq!(local.len(), across.len());
        assert!(local.iter().all(|c| c.verdict == Verdict::Warn), "{local:?}");
        assert!(local.iter().all(|c| c.detail.contains("one host")), "{local:?}");
    }
}
