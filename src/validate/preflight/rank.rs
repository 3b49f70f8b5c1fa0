//! One rank of a preflight: connect as `run` does, sweep every phase of the plan over every path (repeats
//! interleaved across paths), then rank 0 judges.

use std::io::IsTerminal;

use indicatif::ProgressBar;

use super::budget::{self, Budget, Probe};
use super::checks::PathInfo;
use super::evidence::{self, HostEvidence};
use super::plan::{Phase, Plan};
use super::verdict::{bare_check, Check, Verdict};
use super::Setup;
use crate::collective::Collective;
use crate::driver::{Connected, Ending, Rank};
use crate::error::{stderr, Error, Result};
use crate::options::{Options, Progress};
use crate::paths::Paths;
use crate::results::Record;
use crate::session::Session;
use crate::sizes::format_size;
use crate::transport::control;
use crate::transport::Transport;
use crate::validate::pairwise::{self, PairwiseConfig, PairwiseReport};
use crate::world::Identity;

/// One rank connected: open every path, measure, and (rank 0) decide; the job ends with rank 0's verdict.
pub fn run_rank(setup: &Setup, id: &Identity, conn: Connected<'_>) -> Result<Ending> {
    let budget = Budget::new(setup.pre.budget);
    let opts = &setup.opts;
    let on_signal = conn.on_signal.clone();
    if id.rank == 0 {
        on_signal.set(interrupted(setup, id.size));
    }
    // Every path is opened once, here, and borrowed by every phase's sweeps.
    let Rank { sess, paths: open } = match conn.open() {
        Ok(r) => r,
        Err(e) => {
            if id.rank == 0 {
                set_up_failed(setup, id, &e);
            }
            return Err(e);
        }
    };
    let paths = path_infos(&sess, &open, opts);
    let names: Vec<String> = paths.iter().map(|p| p.name.clone()).collect();
    let mut plan_lines = setup.plan.describe(
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
    plan_lines.push(format!(
        "  within a budget of {} s (--budget): the plan is sized from a first measurement of each path",
        setup.pre.budget
    ));
    if id.rank == 0 {
        // A stdout that cannot take these lines is reported by the verdict's print, after the files are kept.
        let units = opts.outputs.units;
        let _ = crate::report::stdout::print(
            &plan_lines
                .iter()
                .map(|l| format!("{}\n", units.restate(l)))
                .collect::<String>(),
        );
    }
    let progress = (id.rank == 0 && opts.outputs.progress == Progress::Auto && std::io::stderr().is_terminal())
        .then(ProgressBar::new_spinner);
    let ranks = sess.world.ranks.clone();
    let mut run = Run {
        setup,
        sess,
        open,
        progress,
        ranks,
        paths,
        plan_lines,
        connectivity: Vec::new(),
        records: Vec::new(),
        said: Vec::new(),
        budget_checks: Vec::new(),
        gpu: super::gpu::Judged::default(),
    };
    // Every host's GPUs, before anything is measured: NVML's reads take milliseconds.
    if let Some(hosts) = super::gpu::gather(&mut run.sess.transports[0], &run.ranks, id.rank)? {
        run.gpu = super::gpu::judge(
            &hosts,
            setup.pre.gpus_per_node,
            super::gpu::ranks_count_gpus(&id.launcher),
        );
    }
    // Connectivity, once per path, with the plan as asked for.
    let conn = super::plan::phase_options(&setup.base, &setup.plan.phases[0]);
    for pi in 0..run.open.len() {
        let o = run.sweep(pi, "connectivity", &conn, 0, None)?;
        run.connectivity.extend(o.records);
    }
    // Full-sized frames between every pair of hosts, before anything sends one: a black hole is named, and its
    // hosts left out of the rest.
    let ifaces: Vec<String> = run.sess.transports.iter().map(|t| t.iface().to_string()).collect();
    let mtu = super::mtu::check(&mut run.sess.transports, &ifaces, &run.ranks)?;
    if !mtu.excluded.is_empty() {
        let judged = (id.rank == 0).then(|| {
            let mut checks = run.gpu.checks.clone();
            checks.extend(mtu.checks.clone());
            let mut m = measured(setup, &run.sess, &run.plan_lines, &run.paths, &run.connectivity, &[]);
            m.notes.extend(run.gpu.note.clone());
            (checks, m)
        });
        let (ranks, paths) = (run.ranks.clone(), run.paths.clone());
        let sofar = super::without::Sofar {
            setup,
            budget: &budget,
            ranks: &ranks,
            paths: &paths,
            excluded: &mtu.excluded,
            judged,
            on_signal: &on_signal,
        };
        let rank = Rank {
            sess: run.sess,
            paths: run.open,
        };
        return super::without::finish(sofar, rank);
    }
    run.gpu.checks.extend(mtu.checks);
    // The probe: how fast each path is, so the plan fits the budget.
    let probe = run.probe()?;
    let (_, coll_end) = budget.collectives_window(budget.elapsed_s());
    let (size, npaths) = (run.sess.world.size, run.open.len());
    let sized = run.agree(id.rank == 0, || {
        budget::size_plan(
            setup.plan.phases[2].max,
            setup.plan.repeat,
            size,
            npaths,
            probe,
            coll_end - budget.elapsed_s(),
        )
    })?;
    let plan = Plan::new(sized.bw_max, sized.repeat);
    run.plan_lines.push(format!(
        "  first measurement: {:.4} GB/s busbw at {} and {:.0} us per small call on the slowest path; {}",
        probe.busbw_gbs,
        format_size(super::plan::MIN_BANDWIDTH_BYTES),
        probe.call_us,
        if sized.lowered {
            format!(
                "the plan is lowered to fit its share of the budget ({:.0} s): bandwidth {} .. {}, {} sweep(s), about \
                 {:.0} s",
                coll_end - budget.elapsed_s(),
                format_size(plan.bandwidth_from()),
                format_size(sized.bw_max),
                sized.repeat,
                sized.expected_s.ceil()
            )
        } else {
            format!("the plan takes about {:.0} s", sized.expected_s.ceil())
        }
    ));
    if id.rank == 0 {
        let last = run.plan_lines.last().expect("just pushed");
        let line = opts.outputs.units.restate(last);
        let _ = crate::report::stdout::print(&crate::validate::wrap::para(line.trim_start(), 2));
    }
    let phases: Vec<Options> = plan
        .phases
        .iter()
        .map(|ph| super::plan::phase_options(&setup.base, ph))
        .collect();
    let started = evidence::start();
    run.collectives(&budget, &plan, &phases, coll_end)?;
    if let Some(pb) = &run.progress {
        pb.finish_and_clear();
    }
    let coll_evidence = run.evidence(&started, 0)?;
    let soak_s = setup.pre.soak_s;
    let (extra, reports) = if setup.pre.no_pairwise && soak_s.is_none() {
        (Vec::new(), Vec::new())
    } else {
        let hosts = distinct_hosts(&run.ranks);
        // Sized on rank 0, from its probe and clock: every rank must run the same test.
        let cfg = run.agree(id.rank == 0, || {
            // Sized for the worst the budget must survive: a lossy link's exchanges at half the probed rate,
            // and round trips that now and then wait out a retransmission timeout.
            budget::size_pairwise(
                &super::budget::preflight_pairwise(),
                hosts,
                probe.busbw_gbs / 2.0,
                2.0 * probe.call_us + budget::STALL_ALLOWANCE_US,
                budget.pairwise_s(budget.elapsed_s()),
            )
        })?;
        let (mut checks, reports) = if setup.pre.no_pairwise {
            (Vec::new(), Vec::new())
        } else {
            pairwise_checks(&mut run, &cfg, &budget)?
        };
        if let Some(d) = soak_s {
            checks.extend(soak_checks(&mut run, &cfg, d)?);
        }
        (checks, reports)
    };
    let decided = (id.rank == 0).then(|| {
        let mut checks = run.gpu.checks.clone();
        checks.extend(run.budget_checks.clone());
        checks.extend(extra);
        let mut m = measured(
            setup,
            &run.sess,
            &run.plan_lines,
            &run.paths,
            &run.connectivity,
            &run.records,
        );
        m.bandwidth_from = plan.bandwidth_from();
        m.repeat = plan.repeat;
        m.evidence = coll_evidence;
        m.notes.extend(run.gpu.note.clone());
        super::cause::cluster_line_rates(&mut m.paths, &reports);
        super::decide::decide(
            &setup.pre,
            &m,
            setup.baseline.as_deref(),
            checks,
            &super::path_keys(opts),
        )
    });
    // The outputs are written: a signal from here on ends the rank without touching them.
    on_signal.clear();
    Ok(Ending::Shared {
        decided,
        rank: Box::new(Rank {
            sess: run.sess,
            paths: run.open,
        }),
    })
}

/// Rank 0's report of a preflight that failed before anything was measured (the bootstrap, or connecting a
/// path): the failure as its one check, nothing measured, and the process's exit status in every file.
pub fn set_up_failed(setup: &Setup, id: &Identity, e: &Error) {
    let phase = e.phase().unwrap_or("the bootstrap").to_string();
    let path = phase.rsplit(' ').next().filter(|p| p.contains('@')).unwrap_or_default();
    let failed = bare_check(
        phase.clone(),
        path,
        "did not finish".into(),
        "completes".into(),
        "built in".into(),
        Verdict::Fail,
        e.to_string(),
    );
    let m = super::decide::Measured {
        nranks: id.size,
        plan: Vec::new(),
        paths: Vec::new(),
        bandwidth_from: setup.plan.bandwidth_from(),
        repeat: setup.plan.repeat,
        connectivity: Vec::new(),
        results: Vec::new(),
        evidence: Vec::new(),
        ended_by: Some(e.exit_code()),
        notes: Vec::new(),
    };
    let keys = super::path_keys(&setup.opts);
    if let Err(w) = super::decide::decide(&setup.pre, &m, None, vec![failed], &keys) {
        stderr!("collbench: error: reporting the failed set-up: {w}");
    }
}

/// Rank 0's hook for a stop signal (a Kubernetes eviction's SIGTERM, a Ctrl-C): every output written with the
/// interruption as its failed check, so a gate reading them never sees a missing file or a pass, and the
/// process's exit status (128 + the signal) in each.
fn interrupted(setup: &Setup, nranks: usize) -> crate::driver::signals::Hook {
    let (pre, keys, bandwidth_from, repeat) = (
        setup.pre.clone(),
        super::path_keys(&setup.opts),
        setup.plan.bandwidth_from(),
        setup.plan.repeat,
    );
    Box::new(move |sig, code| {
        let failed = bare_check(
            "interrupted".into(),
            "",
            format!("stopped by {sig}"),
            "completes".into(),
            "built in".into(),
            Verdict::Fail,
            format!("the preflight was interrupted by {sig} before its verdict; nothing it measured is judged"),
        );
        let m = super::decide::Measured {
            nranks,
            plan: Vec::new(),
            paths: Vec::new(),
            bandwidth_from,
            repeat,
            connectivity: Vec::new(),
            results: Vec::new(),
            evidence: Vec::new(),
            ended_by: Some(code),
            notes: Vec::new(),
        };
        if let Err(w) = super::decide::decide(&pre, &m, None, vec![failed], &keys) {
            stderr!("collbench: error: reporting the interruption: {w}");
        }
    })
}

/// How many hosts the ranks run on.
fn distinct_hosts(ranks: &[crate::results::RankInfo]) -> usize {
    let mut hosts: Vec<&str> = ranks.iter().map(|r| r.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    if hosts.len() == 1 {
        ranks.len()
    } else {
        hosts.len()
    }
}

/// One rank's preflight in progress: the session, its open paths and what was measured so far.
struct Run<'a> {
    setup: &'a Setup,
    sess: Session,
    open: Paths,
    progress: Option<ProgressBar>,
    ranks: Vec<crate::results::RankInfo>,
    paths: Vec<PathInfo>,
    plan_lines: Vec<String>,
    connectivity: Vec<Record>,
    records: Vec<Record>,
    said: Vec<String>,
    /// Phases the budget stopped, as failed checks naming what was too slow (rank 0).
    budget_checks: Vec<Check>,
    /// Every host's GPU checks, or why there are none (rank 0).
    gpu: super::gpu::Judged,
}

impl Run<'_> {
    /// Sweeps path `pi` with `opts` (one point of it with `only`); on a failure, rank 0 judges and writes
    /// what was measured before it, the failure as a check, and every rank returns the error.
    fn sweep(
        &mut self,
        pi: usize,
        phase: &str,
        opts: &Options,
        repeat: u32,
        only: Option<usize>,
    ) -> Result<crate::bench::Outcome> {
        let swept = self.open.sweep(
            pi,
            &mut self.sess,
            crate::bench::Sweep {
                opts: opts.settings(),
                repeat,
                ranks: &self.ranks,
                reporters: &mut [],
                progress: self.progress.as_ref(),
                only,
            },
        );
        match swept {
            Ok(o) => {
                crate::bench::note_skipped(&mut self.said, o.skipped.clone());
                Ok(o)
            }
            Err(e) => {
                if let Some(pb) = &self.progress {
                    pb.finish_and_clear();
                }
                // Every peer learns that this rank gave up, as in `run`.
                let e = self.open.abort(pi, &mut self.sess, e);
                if self.sess.world.rank == 0 {
                    // What was measured before the failure is judged and kept, the failure as a check.
                    let mut failed = bare_check(
                        format!("{} {phase}", self.paths[pi].name),
                        &self.paths[pi].name,
                        "did not finish".into(),
                        "completes".into(),
                        "built in".into(),
                        Verdict::Fail,
                        e.to_string(),
                    );
                    failed.cause = None;
                    let mut m = measured(
                        self.setup,
                        &self.sess,
                        &self.plan_lines,
                        &self.paths,
                        &self.connectivity,
                        &self.records,
                    );
                    m.ended_by = Some(e.exit_code());
                    m.notes.extend(self.gpu.note.clone());
                    let keys = super::path_keys(&self.setup.opts);
                    let mut checks = self.gpu.checks.clone();
                    checks.extend(self.budget_checks.clone());
                    checks.push(failed);
                    if let Err(w) = super::decide::decide(&self.setup.pre, &m, None, checks, &keys) {
                        stderr!("collbench: error: keeping what was measured: {w}");
                    }
                }
                Err(e)
            }
        }
    }

    /// `value` as rank 0 computed it, on every rank (over the control path).
    fn agree<T: serde::Serialize + serde::de::DeserializeOwned>(
        &mut self,
        root: bool,
        value: impl FnOnce() -> T,
    ) -> Result<T> {
        let bytes = if root {
            serde_json::to_vec(&value()).expect("a plan serialises")
        } else {
            Vec::new()
        };
        let got = control::broadcast(&mut self.sess.transports[0], &bytes)?;
        serde_json::from_slice(&got).map_err(|e| {
            Error::peer(format!(
                "rank {}: rank 0 sent an unreadable preflight plan ({e}); were all ranks started with the same \
                 collbench version?",
                self.sess.world.rank
            ))
        })
    }

    /// A short all_reduce at 8 B and at the smallest bandwidth size on every path; rank 0's figures of the
    /// slowest path (the others' are not used).
    fn probe(&mut self) -> Result<Probe> {
        let c = [Collective::AllReduce];
        let small = with_sweep(&self.setup.base, &c, 8, 8, 10, 2);
        let mb = super::plan::MIN_BANDWIDTH_BYTES;
        let big = with_sweep(&self.setup.base, &c, mb, mb, 2, 1);
        let mut p = Probe {
            busbw_gbs: f64::INFINITY,
            call_us: 0.0,
        };
        for pi in 0..self.open.len() {
            for r in self.sweep(pi, "first measurement", &small, 0, None)?.records {
                p.call_us = p.call_us.max(r.out_of_place.time_us.max(r.in_place.time_us));
            }
            for r in self.sweep(pi, "first measurement", &big, 0, None)?.records {
                p.busbw_gbs = p.busbw_gbs.min(r.out_of_place.busbw.min(r.in_place.busbw));
            }
        }
        if !p.busbw_gbs.is_finite() {
            p.busbw_gbs = 0.0;
        }
        Ok(p)
    }

    /// The latency and bandwidth phases, point by point, repeats interleaved across paths; rank 0 stops them
    /// when the next point would end after `end_s` (from the budget's start), and the stop becomes a failed
    /// check naming the slowest point.
    fn collectives(&mut self, budget: &Budget, plan: &Plan, phases: &[Options], end_s: f64) -> Result<()> {
        let n = self.sess.world.size;
        // Seconds each (path, phase, point) took the last time, for predicting the next sweep's.
        let mut took: Vec<Vec<Vec<f64>>> = (0..self.open.len())
            .map(|_| phases.iter().map(|o| vec![0.0; points(o, n).len()]).collect())
            .collect();
        let mut stopped: Option<(usize, usize, u32)> = None;
        'all: for repeat in 0..plan.repeat {
            for (k, phase_opts) in phases.iter().enumerate().skip(1) {
                #[allow(clippy::needless_range_loop)] // `took` is indexed beside the sweeps, which borrow self
                for pi in 0..self.open.len() {
                    for i in 0..points(phase_opts, n).len() {
                        // A point not yet measured is predicted from the phase's points before it: twice the
                        // longest (sizes double), never 0, so a first sweep on a slow path stops in time.
                        let predicted = match took[pi][k][i] {
                            t if t > 0.0 => t,
                            _ => budget::first_sweep_point_s(&took[pi][k][..i]),
                        };
                        let go = self.agree(self.sess.world.rank == 0, || {
                            budget::may_start(budget.elapsed_s(), predicted, end_s)
                        })?;
                        if !go {
                            stopped = Some((pi, k, repeat));
                            break 'all;
                        }
                        let t0 = std::time::Instant::now();
                        let o = self.sweep(pi, plan.phases[k].name, phase_opts, repeat, Some(i))?;
                        took[pi][k][i] = t0.elapsed().as_secs_f64();
                        self.records.extend(o.records);
                    }
                }
            }
        }
        if let (Some((pi, k, repeat)), 0) = (stopped, self.sess.world.rank) {
            let slowest = self
                .records
                .iter()
                .filter(|r| r.path == self.paths[pi].name)
                .max_by(|a, b| a.out_of_place.time_us.total_cmp(&b.out_of_place.time_us));
            let what = slowest.map_or("nothing was measured".to_string(), |r| {
                format!(
                    "slowest: {} at {}, {:.0} ms per call, {:.4} GB/s busbw",
                    r.collective,
                    format_size(r.size),
                    r.out_of_place.time_us / 1e3,
                    r.out_of_place.busbw
                )
            });
            let path = self.paths[pi].name.clone();
            self.budget_checks.push(bare_check(
                format!("{path} {} within the budget", plan.phases[k].name),
                &path,
                format!(
                    "stopped in sweep {} of {} at {:.0} s",
                    repeat + 1,
                    plan.repeat,
                    budget.elapsed_s()
                ),
                format!("ends by {end_s:.0} s"),
                format!("--budget {} s (the collectives' share)", budget.total_s()),
                Verdict::Fail,
                format!(
                    "{path} was too slow for the {} phase to finish in its share of the budget ({what}); what was \
                     measured is judged below",
                    plan.phases[k].name
                ),
            ));
        }
        Ok(())
    }

    /// Every host's evidence since `started`, on rank 0 (empty elsewhere), for the session's TCP path `path`
    /// (the collectives' evidence is the first's).
    fn evidence(&mut self, started: &evidence::Started, path: usize) -> Result<Vec<HostEvidence>> {
        let host = self.ranks[self.sess.world.rank].host.clone();
        let t = &mut self.sess.transports[path];
        let inv = crate::net::inventory::local();
        let mut config = evidence::path_config(&inv, t.iface(), t.congestion().as_deref());
        if let Some((rx, tx)) = t.socket_buffers() {
            config.tuning.rcvbuf = Some(rx);
            config.tuning.sndbuf = Some(tx);
        }
        let mine = started.finish(&host, config, inv.cpu.quota_cores);
        Ok(evidence::gather(t, &mine)?.unwrap_or_default())
    }
}

/// The sweep options' points, as the engine plans them.
fn points(o: &Options, n: usize) -> Vec<crate::bench::plan::Point> {
    crate::bench::plan::points(&o.sweep, n)
}

/// `base` sweeping `colls` at `min..=max` bytes by doubling, `iters` timed after `warmup`, checked once.
fn with_sweep(base: &Options, colls: &[Collective], min: u64, max: u64, iters: u32, warmup: u32) -> Options {
    let plan = Phase {
        name: "probe",
        collectives: colls.to_vec(),
        min,
        max,
        factor: 2,
        iters,
        warmup,
    };
    super::plan::phase_options(base, &plan)
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
        repeat: setup.plan.repeat,
        connectivity: crate::report::json::entries(connectivity),
        results: crate::report::json::entries(records),
        evidence: Vec::new(),
        ended_by: None,
        notes: Vec::new(),
    }
}

/// The pairwise link test over every TCP path of the session, run on every rank: on rank 0 its matrices are
/// printed and its findings become checks (a slow host or link FAILs; none is one PASS check per path), each
/// with every host's evidence during the test and its most likely cause; the reports are returned too.
fn pairwise_checks(
    run: &mut Run<'_>,
    cfg: &PairwiseConfig,
    budget: &Budget,
) -> Result<(Vec<Check>, Vec<PairwiseReport>)> {
    let mut checks = Vec::new();
    let mut reports = Vec::new();
    let inv = crate::net::inventory::local();
    for k in 0..run.sess.transports.len() {
        let path = run.sess.transports[k].path();
        let started = evidence::start();
        // Each path its share of what is left; rank 0's clock plans every rank's rounds.
        let paths_left = (run.sess.transports.len() - k) as f64;
        let share = pairwise::planned::Budget::from_secs(
            std::time::Instant::now(),
            budget.pairwise_s(budget.elapsed_s()) / paths_left,
        );
        let report = match pairwise::measure(&mut run.sess, k, cfg, Some(share)) {
            Ok(r) => r,
            Err(e) => return Err(run.sess.transports[k].abort(e.during(&format!("the pairwise link test of {path}")))),
        };
        let seen = run.evidence(&started, k)?;
        let t = &mut run.sess.transports[k];
        if let Some(rep) = report {
            let _ = crate::report::stdout::print(&format!(
                "{}\n",
                pairwise::render::text(&rep, run.setup.base.outputs.units)
            ));
            checks.extend(super::findings::pairwise_findings(&path, &rep, &seen));
            checks.extend(super::carrier::checks(&path, "the pairwise test", &seen));
            checks.extend(super::cause::config_checks(
                &path,
                &seen,
                &super::evidence::inventories(t, &inv)?,
            ));
            let starved = super::starved::checks(&path, "the pairwise test", &seen, &checks);
            checks.extend(starved);
            reports.push(rep);
        } else {
            // The others send their inventory for rank 0's configuration checks.
            super::evidence::inventories(t, &inv)?;
        }
    }
    Ok((checks, reports))
}

/// Seconds one soak pass may take at most: short enough that a soak has several passes, long enough for a
/// pass of every pair of a small cluster.
const SOAK_PASS_S: f64 = 10.0;

/// `--soak`: the pairwise test over each TCP path again and again for `duration_s` in all (each path its
/// share), no re-measuring, each pass with every host's evidence; rank 0 judges the passes into checks.
fn soak_checks(run: &mut Run<'_>, cfg: &PairwiseConfig, duration_s: f64) -> Result<Vec<Check>> {
    let cfg = PairwiseConfig {
        confirm: false,
        lat_iters: cfg.lat_iters.min(50),
        ..cfg.clone()
    };
    let npaths = run.sess.transports.len();
    let me = run.sess.world.rank;
    let mut checks = Vec::new();
    for k in 0..npaths {
        let path = run.sess.transports[k].path();
        let share = duration_s / npaths as f64;
        let start = std::time::Instant::now();
        let mut passes: Vec<super::soak::Pass> = Vec::new();
        // Rank 0 keeps the participants' names and every host's evidence of the first pass for the checks,
        // and each pass's slowest link to tell which pass stands out.
        let mut names: Vec<String> = Vec::new();
        let mut evidence: Vec<HostEvidence> = Vec::new();
        let mut slowest_of: Vec<f64> = Vec::new();
        if me == 0 {
            let _ = crate::report::stdout::print(&format!(
                "# soak of {path}: the pairwise test again and again for {share:.0} s (a line for each pass that stands out)\n"
            ));
        }
        loop {
            // Rank 0's clock decides for every rank whether another pass starts.
            let left = share - start.elapsed().as_secs_f64();
            let go = run.agree(me == 0, || left > 0.0)?;
            if !go {
                break;
            }
            let at_s = start.elapsed().as_secs_f64();
            let budget = pairwise::planned::Budget::from_secs(std::time::Instant::now(), left.clamp(1.0, SOAK_PASS_S));
            let started = evidence::start();
            let report = match pairwise::measure(&mut run.sess, k, &cfg, Some(budget)) {
                Ok(r) => r,
                Err(e) => return Err(run.sess.transports[k].abort(e.during(&format!("the soak of {path}")))),
            };
            let seen = run.evidence(&started, k)?;
            let Some(rep) = report else {
                continue;
            };
            let slowest = rep.links.iter().map(|l| l.bw_gbs).fold(f64::INFINITY, f64::min);
            let stalls: u64 = rep.links.iter().map(|l| l.stalls).sum();
            let downs: Vec<(String, u64)> = seen
                .iter()
                .filter_map(|e| e.link_downs.filter(|&d| d > 0).map(|d| (e.host.clone(), d)))
                .collect();
            let down_count: u64 = downs.iter().map(|(_, d)| d).sum();
            // A line for a pass that stands out only: a day's soak has thousands of passes.
            slowest_of.push(slowest);
            let typical = super::soak::median_of(&slowest_of);
            if stalls >= super::soak::STALLS || down_count > 0 || slowest < super::soak::SLOW_SHARE * typical {
                let _ = crate::report::stdout::print(&format!(
                    "#   pass {} at {at_s:.0} s: {} links, slowest {slowest:.4} GB/s, {stalls} stalled round trip(s), \
                     {down_count} carrier loss(es)\n",
                    passes.len() + 1,
                    rep.links.len()
                ));
            }
            let busy = super::cause::every_host_busy(&seen);
            if passes.is_empty() {
                names = rep.hosts.iter().map(|p| p.name.clone()).collect();
                evidence = seen;
            }
            passes.push(super::soak::Pass {
                at_s,
                links: rep.links.iter().map(super::soak::LinkSample::of).collect(),
                downs,
                busy,
            });
        }
        if me == 0 {
            let one_host = run.ranks.windows(2).all(|w| w[0].host == w[1].host);
            checks.extend(super::soak::judge(&path, share, &names, &evidence, &passes, one_host));
        }
    }
    Ok(checks)
}

/// Every measured path with its line rate and where that came from, in `--transport` order.
fn path_infos(sess: &Session, open: &Paths, opts: &Options) -> Vec<PathInfo> {
    open.iter()
        .map(|o| {
            let (line_rate_gbs, rate_from) = match o.line_rate(sess, opts.paths.line_rate_gbit) {
                Ok((r, from)) => (Some(r), from),
                Err(why) => (None, why),
            };
            PathInfo {
                name: o.name.clone(),
                given: o.kind.to_string(),
                line_rate_gbs,
                rate_from,
            }
        })
        .collect()
}
