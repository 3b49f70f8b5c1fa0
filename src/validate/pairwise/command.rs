//! `collbench pairwise` on each rank: the options and test its flags ask for, the checks before local ranks
//! start, and one rank's test (started as every rank is, [`crate::start`]): every pair measured over the path
//! asked for (collbench's TCP transport, or its verbs transport on an `rdma@` path, set up over a TCP control
//! path); rank 0 prints the matrices and findings, writes JSON and heatmaps.

use std::ffi::OsString;
use std::path::Path;

use super::{render, PairwiseConfig, PairwiseReport, Thresholds};
use crate::cli::PairwiseArgs;
use crate::error::{stderr, Error, Result, EXIT_OK, EXIT_WRONG};
use crate::options::{Deadlines, Options, PathKind, PathOptions, TcpOptions};
use crate::plot::heatmap::{self, Heatmap};
use crate::session::Pairs;
use crate::sizes::parse_size;
use crate::start::{Rank, Start};
use crate::transport::tcp::options::iface_spec;
use crate::world::{local, Identity};

/// Largest `--bytes`: two buffers of it per taking-part rank.
const MAX_BYTES: u64 = 1 << 30;
/// Most timed iterations of either kind.
const MAX_ITERS: usize = 1_000_000;

/// The session options and test configuration the flags ask for; errors name the flag.
pub fn options(args: &PairwiseArgs) -> Result<(Options, PairwiseConfig)> {
    let np = crate::options::np(args.np)?;
    let path: PathKind = args.transport.parse().map_err(|e| Error::usage("--transport", e))?;
    if !path.traits().own_transport {
        return Err(Error::usage(
            "--transport",
            format!(
                "pairwise measures collbench's own transports: give tcp, tcp@SPEC or rdma@DEVICE[:PORT], not {path}"
            ),
        ));
    }
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
    let opts = Options {
        np,
        paths: PathOptions {
            transports: vec![path],
            ..PathOptions::default()
        },
        tcp: TcpOptions {
            iface: iface_spec(args.iface.as_deref())?,
            ..TcpOptions::default()
        },
        deadlines: Deadlines::from_cli(&args.deadlines)?,
        ..Options::default()
    };
    let cfg = PairwiseConfig {
        bytes: bytes as usize,
        iters: args.iters,
        lat_iters: args.lat_iters,
        per_host: !args.per_rank,
        confirm: !args.no_confirm,
    };
    Ok((opts, cfg))
}

/// No launcher: the outputs and the path checked as `run` checks them, then `--np` local ranks.
pub fn launch(opts: &Options, args: &PairwiseArgs, argv: &[OsString]) -> Result<i32> {
    check_outputs(args)?;
    crate::paths::check_local_launch(opts)?;
    local::launch_processes(opts.np, &argv[1..], opts.deadlines.bootstrap_timeout)
}

/// The JSON file's directory must exist and be writable, and the chart directory must be creatable,
/// before anything is measured.
fn check_outputs(args: &PairwiseArgs) -> Result<()> {
    if let Some(p) = &args.output_file {
        crate::report::file::check_writable(p, args.force, "-J/--output_file")?;
    }
    if let Some(p) = &args.metrics {
        crate::report::file::check_writable(p, args.force, "--metrics")?;
    }
    if let Some(d) = &args.plot {
        crate::report::file::check_dir_writable(d, "--plot")?;
    }
    crate::report::file::refuse_same_file(&files(args))
}

/// The output files asked for, with their flags.
fn files(args: &PairwiseArgs) -> Vec<(&Path, &'static str)> {
    [(&args.output_file, "-J/--output_file"), (&args.metrics, "--metrics")]
        .into_iter()
        .filter_map(|(p, f)| p.as_deref().map(|p| (p, f)))
        .collect()
}

/// One rank: start up connecting every pair, measure; rank 0 reports. Returns the exit status.
pub fn run_rank(opts: &Options, cfg: &PairwiseConfig, id: &Identity, args: &PairwiseArgs) -> Result<i32> {
    let start = Start {
        opts,
        // Every rank must run the same test: the options and the test are compared at the rendezvous.
        agreement: opts.agreement().to_wire_with("pairwise", cfg),
        pairs: Pairs::All,
        check_outputs: &|| check_outputs(args),
        // Two buffers of --bytes per rank: nothing worth checking ahead.
        check_memory: &|_, _| Ok(()),
    };
    // The path measured: a TCP path is the session's transport; an rdma@ path's queue pairs are set up over
    // the session's control path first.
    let Rank { mut sess, mut paths } = start.rank(id)?;
    let hosts: Vec<String> = sess.world.ranks.iter().map(|r| r.host.clone()).collect();
    let measured = paths
        .on_transport(0, &mut sess, |t| {
            super::measure_on(t, &hosts, cfg, &Thresholds::default())
        })
        .unwrap_or_else(|| {
            Err(Error::usage(
                "--transport",
                "this path has no transport of collbench's to measure",
            ))
        });
    let report = match measured {
        Ok(r) => r,
        // Every peer learns that this rank gave up, and all name the same culprit.
        Err(e) => return Err(paths.abort(0, &mut sess, e.during("the pairwise test"))),
    };
    let decided = report.map(|report| report_on_rank0(&report, args));
    share_verdict(&mut sess, &mut paths, decided)
}

/// Rank 0's part: the matrices and findings on stdout, the JSON and heatmaps; returns the exit status.
fn report_on_rank0(report: &PairwiseReport, args: &PairwiseArgs) -> Result<i32> {
    if let Some(p) = &args.output_file {
        let text = serde_json::to_string_pretty(report).expect("the pairwise report serialises");
        crate::report::file::write_atomic(p, text.as_bytes())?;
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
        crate::report::file::write_atomic(p, super::metrics::text(report, now).as_bytes())?;
    }
    // Last, so a stdout that cannot take it (a full device) loses no file.
    let taken = files(args).iter().any(|(p, _)| crate::report::file::is_stdout(p));
    crate::report::stdout::print_beside(&render::text(report, args.units.unit()?), taken)?;
    // Findings among ranks of one host are warnings, as in preflight: its loopback and CPUs, not a network.
    Ok(if report.verdict() == "fail" {
        EXIT_WRONG
    } else {
        EXIT_OK
    })
}

/// Every rank ends with rank 0's verdict: `decided` is rank 0's (`None` elsewhere); the others exit with the
/// status rank 0 sends, so a per-pod or per-node check sees the job's verdict on every rank.
fn share_verdict(
    sess: &mut crate::session::Session,
    paths: &mut crate::paths::Paths,
    decided: Option<Result<i32>>,
) -> Result<i32> {
    let me = sess.world.rank;
    let code = match &decided {
        Some(Ok(c)) => *c,
        Some(Err(e)) => e.exit_code(),
        None => EXIT_OK,
    };
    let heard = paths
        .on_transport(0, sess, |t| {
            crate::transport::control::broadcast(t, &code.to_le_bytes())
        })
        .unwrap_or_else(|| Ok(code.to_le_bytes().to_vec()));
    match (decided, heard) {
        // Rank 0 keeps its own verdict even when a rank is gone before hearing it.
        (Some(d), Ok(_)) => d,
        (Some(d), Err(e)) => {
            stderr!("collbench: rank 0: the verdict could not reach every rank: {e}");
            d
        }
        (None, Ok(b)) => {
            let code = <[u8; 4]>::try_from(b.as_slice()).map(i32::from_le_bytes).map_err(|_| {
                Error::peer(format!(
                    "rank {me}: rank 0 sent an unreadable verdict ({} bytes); were all ranks started with the same \
                     collbench version?",
                    b.len()
                ))
            })?;
            if code != EXIT_OK {
                stderr!(
                    "collbench: rank {me}: exits {code}, the pairwise verdict rank 0 reached (its output says why)"
                );
            }
            Ok(code)
        }
        (None, Err(e)) => Err(e),
    }
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
