//! `collbench pairwise` on each rank: the options and test its flags ask for, the checks before local ranks
//! start, and one rank's test (started as every rank is, `start`): every pair measured over the path
//! asked for (collbench's TCP transport, or its verbs transport on an `rdma@` path, set up over a TCP control
//! path); rank 0 prints the matrices and findings, writes JSON and heatmaps.

use std::path::Path;

use std::time::Instant;

use super::plan::Plan;
use super::planned::{self, Budget};
use super::{render, PairwiseConfig, PairwiseReport, Thresholds};
use crate::cli::PairwiseArgs;
use crate::driver::{Connected, Ending, RankCommand};
use crate::error::{stderr, Error, Result, EXIT_OK, EXIT_WRONG};
use crate::memory::available::Available;
use crate::options::own_path;
use crate::options::Options;
use crate::plot::heatmap::{self, Heatmap};
use crate::report::declared::Declared;
use crate::session::Pairs;
use crate::sizes::parse_size;
use crate::world::Identity;

/// Largest `--bytes`: two buffers of it per taking-part rank.
const MAX_BYTES: u64 = 1 << 30;
/// Most timed iterations of either kind.
const MAX_ITERS: usize = 1_000_000;

/// The session options and test configuration the flags ask for; errors name the flag.
fn options(args: &PairwiseArgs) -> Result<(Options, PairwiseConfig)> {
    let opts = own_path::options(&own_path::PathFlags {
        command: "pairwise",
        np: args.np,
        transport: &args.transport,
        iface: args.iface.as_deref(),
        deadlines: &args.deadlines,
    })?;
    args.units.unit()?;
    let bytes = parse_size(&args.bytes).map_err(|e| Error::usage("--bytes", e))?;
    if !(1..=MAX_BYTES).contains(&bytes) {
        return Err(Error::usage(
            "--bytes",
            format!(
                "must be between 1 byte and 1G (got {}); a few MiB measures a link's bandwidth",
                args.bytes
            ),
        ));
    }
    for (flag, v) in [("-n/--iters", args.iters), ("--lat-iters", args.lat_iters)] {
        if !(1..=MAX_ITERS).contains(&v) {
            return Err(Error::usage(
                flag,
                format!("must be between 1 and {MAX_ITERS} (got {v})"),
            ));
        }
    }
    let cfg = PairwiseConfig {
        bytes: bytes as usize,
        iters: args.iters,
        lat_iters: args.lat_iters,
        per_host: !args.per_rank,
        confirm: !args.no_confirm,
    };
    Ok((opts, cfg))
}

/// `collbench pairwise` as the driver runs it.
pub struct PairwiseCommand<'a> {
    pub opts: Options,
    pub cfg: PairwiseConfig,
    pub args: &'a PairwiseArgs,
    /// When the command started: the budget counts from here, as start-up (connecting every pair) is part of
    /// what the user waits for.
    pub started: Instant,
}

impl<'a> PairwiseCommand<'a> {
    /// The test `args` ask for, started now; errors name the flag.
    pub fn new(args: &'a PairwiseArgs) -> Result<Self> {
        let (opts, cfg) = options(args)?;
        Ok(PairwiseCommand {
            opts,
            cfg,
            args,
            started: Instant::now(),
        })
    }
}

impl RankCommand for PairwiseCommand<'_> {
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
        declared(self.args)
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

/// The output files and chart directory asked for, with their flags.
fn declared(args: &PairwiseArgs) -> Declared<'_> {
    Declared::new(args.out.force)
        .file("-J/--output_file", args.out.output_file.as_deref())
        .file("--metrics", args.metrics.as_deref())
        .charts("--plot", args.plot.as_deref())
}

/// One rank connected to every other: open the path, measure; rank 0 reports. The job ends with its verdict.
fn run_rank(cmd: &PairwiseCommand<'_>, conn: Connected<'_>) -> Result<Ending> {
    let (cfg, args) = (&cmd.cfg, cmd.args);
    let budget = (args.budget > 0).then(|| Budget::new(cmd.started, args.budget));
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
    let report = rank.measure("the pairwise test", |t| {
        // Rank 0 says what it will measure as soon as it knows, so a long run is not silent.
        let report = planned::measure_within(t, &hosts, cfg, &Thresholds::default(), budget, &mut |p| {
            announce(p, budget.map(|b| b.total_s()), args)
        })?;
        let seen = super::hostcheck::check(t, &iface, &before)?.unwrap_or_default();
        Ok(report.map(|r| PairwiseReport {
            host_config: seen.warnings,
            link_downs: seen.link_downs,
            ..r
        }))
    })?;
    let decided = report.map(|report| report_on_rank0(&report, args));
    Ok(Ending::Shared {
        decided,
        rank: Box::new(rank),
    })
}

/// Rank 0's plan line on stdout (beside an output file that took stdout).
fn announce(plan: &Plan, budget_s: Option<f64>, args: &PairwiseArgs) {
    let taken = declared(args).stdout_taken();
    // A stdout that cannot take it loses nothing the report's own print would not say.
    let _ = crate::report::stdout::print_beside(&format!("{}\n", plan.line(budget_s)), taken);
}

/// Rank 0's part: the matrices and findings on stdout, the JSON and heatmaps; returns the exit status.
fn report_on_rank0(report: &PairwiseReport, args: &PairwiseArgs) -> Result<i32> {
    if let Some(p) = &args.out.output_file {
        let text = serde_json::to_string_pretty(report).expect("the pairwise report serialises");
        crate::report::file::write_atomic(
            p,
            text.as_bytes(),
            crate::report::file::Replace::from_force(args.out.force),
        )?;
    }
    if let Some(dir) = &args.plot {
        for p in heatmaps(report, dir)? {
            stderr!("collbench: heatmap {}", p.display());
        }
    }
    if let Some(p) = &args.metrics {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        crate::report::file::write_atomic(
            p,
            super::metrics::text(report, now).as_bytes(),
            crate::report::file::Replace::from_force(args.out.force),
        )?;
    }
    // Last, so a stdout that cannot take it (a full device) loses no file.
    let taken = declared(args).stdout_taken();
    crate::report::stdout::print_beside(&render::text(report, args.units.unit()?), taken)?;
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
