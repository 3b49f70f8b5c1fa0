//! `collbench pairwise` on each rank: the options and test its flags ask for, the checks before local ranks
//! start, and one rank's test (started as every rank is, `start`): every pair measured over the path
//! asked for (collbench's TCP transport, or its verbs transport on an `rdma@` path, set up over a TCP control
//! path); rank 0 prints the matrices and findings, writes JSON and heatmaps.

use std::path::Path;

use std::time::Instant;

use super::options::PairwiseOutputs;
use super::plan::Plan;
use super::planned::{self, Budget};
use super::{render, PairwiseConfig, PairwiseReport, Thresholds};
use crate::driver::{Connected, Ending, RankCommand};
use crate::error::{stderr, Error, Result, EXIT_OK, EXIT_WRONG};
use crate::memory::available::Available;
use crate::options::Options;
use crate::plot::heatmap::{self, Heatmap};
use crate::report::declared::Declared;
use crate::session::Pairs;
use crate::world::Identity;

/// `collbench pairwise` as the driver runs it.
pub struct PairwiseCommand {
    pub opts: Options,
    pub cfg: PairwiseConfig,
    /// Seconds the test may take (`--budget`; 0: no limit).
    pub budget_s: u64,
    pub outputs: PairwiseOutputs,
    /// When the command started: the budget counts from here, as start-up (connecting every pair) is part of
    /// what the user waits for.
    pub started: Instant,
}

impl PairwiseCommand {
    /// The test `opts`, `cfg`, `budget_s` and `outputs` describe, started now.
    pub fn new(opts: Options, cfg: PairwiseConfig, budget_s: u64, outputs: PairwiseOutputs) -> Self {
        PairwiseCommand {
            opts,
            cfg,
            budget_s,
            outputs,
            started: Instant::now(),
        }
    }
}

impl RankCommand for PairwiseCommand {
    fn name(&self) -> &'static str {
        "pairwise"
    }

    fn options(&self) -> &Options {
        &self.opts
    }

    /// Every rank must run the same test: the options and the test are compared at the rendezvous.
    fn agreement(&self) -> serde_json::Value {
        self.opts.agreement().to_wire_with("pairwise", &self.cfg)
    }

    fn pairs(&self) -> Pairs {
        Pairs::All
    }

    fn outputs(&self) -> Declared<'_> {
        self.outputs.declared()
    }

    /// Two buffers of `--bytes` per rank: small beside what a host has.
    fn check_memory(&self, _local: usize, _avail: &Available) -> Result<()> {
        Ok(())
    }

    fn check_size(&self, size: usize) -> Result<()> {
        if size < 2 {
            return Err(Error::usage(
                "--np",
                format!("pairwise measures pairs of ranks and a job of {size} rank has none: give 2 or more"),
            ));
        }
        Ok(())
    }

    fn rank(&self, _id: &Identity, conn: Connected<'_>) -> Result<Ending> {
        run_rank(self, conn)
    }
}

/// One rank connected to every other: open the path, measure; rank 0 reports. The job ends with its verdict.
fn run_rank(cmd: &PairwiseCommand, conn: Connected<'_>) -> Result<Ending> {
    let (cfg, out) = (&cmd.cfg, &cmd.outputs);
    let budget = (cmd.budget_s > 0).then(|| Budget::new(cmd.started, cmd.budget_s));
    let mut rank = conn.open()?;
    let hosts: Vec<String> = rank.sess.world.ranks.iter().map(|r| r.host.clone()).collect();
    // The interface the path's TCP connections use: the hosts' set-up of it is checked beside the matrix.
    let iface = rank
        .sess
        .transports
        .first()
        .map(|t| t.iface().to_string())
        .unwrap_or_default();
    let before = crate::net::carrier::Carriers::now();
    if cmd.opts.buffers.memory == crate::memory::MemoryKind::Cuda {
        let report = measure_gpus(&mut rank, &hosts, cfg, budget, out)?;
        let decided = report.map(|report| report_on_rank0(&report, out));
        return Ok(Ending::Shared {
            decided,
            rank: Box::new(rank),
        });
    }
    let report = rank.measure("the pairwise test", |t| {
        // Rank 0 says what it will measure as soon as it knows, so a long run is not silent.
        let meter = &mut super::measure::OverTransport::default();
        let report = planned::measure_within(t, meter, &hosts, cfg, &Thresholds::default(), budget, &mut |p| {
            announce(p, budget.map(|b| b.total_s()), out)
        })?;
        let seen = super::hostcheck::check(t, &iface, &before)?.unwrap_or_default();
        Ok(report.map(|r| PairwiseReport {
            host_config: seen.warnings,
            link_downs: seen.link_downs,
            ..r
        }))
    })?;
    let decided = report.map(|report| report_on_rank0(&report, out));
    Ok(Ending::Shared {
        decided,
        rank: Box::new(rank),
    })
}

/// Pairs of GPUs measured over NCCL's point-to-point, the TCP control path carrying the rounds' barriers. The
/// hosts' checks of a TCP path's set-up are left out: NCCL picks its own interfaces.
#[cfg(feature = "cuda")]
fn measure_gpus(
    rank: &mut crate::driver::Rank,
    hosts: &[String],
    cfg: &PairwiseConfig,
    budget: Option<Budget>,
    out: &PairwiseOutputs,
) -> Result<Option<PairwiseReport>> {
    rank.measure_device("the pairwise test over nccl", |ctrl, p2p| {
        let meter = &mut super::device::OverNccl::new(p2p);
        planned::measure_within(ctrl, meter, hosts, cfg, &Thresholds::default(), budget, &mut |p| {
            announce(p, budget.map(|b| b.total_s()), out)
        })
    })
}

/// Without the `cuda` feature `--memory cuda` is refused where the flags are read; this is never reached.
#[cfg(not(feature = "cuda"))]
fn measure_gpus(
    _rank: &mut crate::driver::Rank,
    _hosts: &[String],
    _cfg: &PairwiseConfig,
    _budget: Option<Budget>,
    _out: &PairwiseOutputs,
) -> Result<Option<PairwiseReport>> {
    Err(Error::usage("--memory", crate::nccl::not_built_message()))
}

/// Rank 0's plan line on stdout (beside an output file that took stdout).
fn announce(plan: &Plan, budget_s: Option<f64>, out: &PairwiseOutputs) {
    let taken = out.declared().stdout_taken();
    // A stdout that cannot take it loses nothing the report's own print would not say.
    let _ = crate::report::stdout::print_beside(&format!("{}\n", plan.line(budget_s)), taken);
}

/// Rank 0's part: the matrices and findings on stdout, the JSON and heatmaps; returns the exit status.
fn report_on_rank0(report: &PairwiseReport, out: &PairwiseOutputs) -> Result<i32> {
    if let Some(p) = &out.json {
        let text = serde_json::to_string_pretty(report).expect("the pairwise report serialises");
        crate::report::file::write_atomic(p, text.as_bytes(), crate::report::file::Replace::from_force(out.force))?;
    }
    if let Some(dir) = &out.plot {
        for p in heatmaps(report, dir)? {
            stderr!("collbench: heatmap {}", p.display());
        }
    }
    if let Some(p) = &out.metrics {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        crate::report::file::write_atomic(
            p,
            super::metrics::text(report, now).as_bytes(),
            crate::report::file::Replace::from_force(out.force),
        )?;
    }
    // Last, so a stdout that cannot take it (a full device) loses no file.
    let taken = out.declared().stdout_taken();
    crate::report::stdout::print_beside(&render::text(report, out.units), taken)?;
    // Findings among ranks of one host are warnings, as in preflight: its loopback and CPUs, not a network.
    Ok(if report.verdict() == "fail" {
        EXIT_WRONG
    } else {
        EXIT_OK
    })
}

/// Writes the bandwidth and latency heatmaps into `dir`; returns their paths.
pub fn heatmaps(rep: &PairwiseReport, dir: &Path) -> Result<Vec<std::path::PathBuf>> {
    let names: Vec<String> = rep.hosts.iter().map(|h| h.name.clone()).collect();
    let n = names.len();
    let mut bw = vec![vec![None; n]; n];
    let mut lat = vec![vec![None; n]; n];
    for l in &rep.links {
        bw[l.a][l.b] = Some(l.bw_ab_gbs);
        bw[l.b][l.a] = Some(l.bw_ba_gbs);
        lat[l.a][l.b] = Some(l.latency_us);
        lat[l.b][l.a] = Some(l.latency_us);
    }
    let note = format!("{} {} over {}", n, rep.unit, rep.path);
    let maps = [
        (
            "pairwise-bandwidth.png",
            "Pairwise bandwidth, GB/s (row sends to column, both ways at once)",
            bw,
            "GB/s",
            true,
        ),
        (
            "pairwise-latency.png",
            "Pairwise latency, us (half the median 8 B round trip)",
            lat,
            "us",
            false,
        ),
    ];
    let mut written = Vec::new();
    for (file, title, cells, unit, higher_is_better) in maps {
        let path = dir.join(file);
        heatmap::write_png(
            &path,
            &Heatmap {
                title,
                note: &note,
                names: &names,
                cells: &cells,
                unit,
                higher_is_better,
            },
        )?;
        written.push(path);
    }
    Ok(written)
}
