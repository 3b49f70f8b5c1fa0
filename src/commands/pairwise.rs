//! `collbench pairwise`: launches like `run` (local ranks without a launcher, one rank per process under
//! one), measures every pair over the path asked for (collbench's TCP transport, or its verbs transport on
//! an `rdma@` path, set up over a TCP control path), prints the matrices and findings on rank 0, writes JSON
//! and heatmaps.
//!
//! Exit status: 0 no finding, 1 a slow host or link named, 2 bad flags, 3 a peer or deadline failed,
//! 4 an output file could not be written.

use std::ffi::OsString;
use std::path::Path;

use crate::cli::PairwiseArgs;
use crate::error::{stderr, Error, Result, EXIT_OK, EXIT_WRONG};
use crate::options::{Deadlines, Options, PathKind, PathOptions, TcpOptions, MAX_NP};
use crate::paths::Paths;
use crate::plot::heatmap::{self, Heatmap};
use crate::session::{self, Pairs};
use crate::sizes::parse_size;
use crate::transport::tcp::options::iface_spec;
use crate::validate::pairwise::{render, PairwiseConfig, PairwiseReport};
use crate::world::{env, local, Identity};

/// Largest `--bytes`: two buffers of it per taking-part rank.
const MAX_BYTES: u64 = 1 << 30;
/// Most timed iterations of either kind.
const MAX_ITERS: usize = 1_000_000;

/// Runs `collbench pairwise` with the command line `argv` (program name first); returns the exit status.
pub fn pairwise(args: &PairwiseArgs, argv: &[OsString]) -> Result<i32> {
    let (opts, cfg) = options(args)?;
    let id = env::identity_from(|k| std::env::var(k).ok())?;
    // Checked before any rank starts (and by rank 0 again under another launcher, on its own host).
    if id.as_ref().map_or(true, |i| i.rank == 0) {
        check_outputs(args)?;
    }
    match id {
        None => {
            check_rdma_target(&opts)?;
            local::launch_processes(opts.np, &argv[1..], opts.deadlines.bootstrap_timeout)
        }
        Some(id) => rank(&opts, &cfg, &id, args),
    }
}

/// The session options and test configuration the flags ask for; errors name the flag.
fn options(args: &PairwiseArgs) -> Result<(Options, PairwiseConfig)> {
    if args.np == 0 || args.np > MAX_NP {
        return Err(Error::usage(
            "--np",
            format!(
                "must be between 1 and {MAX_NP} local ranks (got {}); for more use a launcher such as mpirun or srun",
                args.np
            ),
        ));
    }
    let path: PathKind = args.transport.parse().map_err(|e| Error::usage("--transport", e))?;
    if matches!(path, PathKind::Mpi | PathKind::Nccl) {
        return Err(Error::usage(
            "--transport",
            format!(
                "pairwise measures collbench's own transports: give tcp, tcp@SPEC or rdma@DEVICE[:PORT], not {path}"
            ),
        ));
    }
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
        np: args.np,
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

/// An `rdma@` device is opened and its port checked before any local rank starts, as `run` does (a
/// missing device names what was looked for).
fn check_rdma_target(opts: &Options) -> Result<()> {
    #[cfg(feature = "rdma")]
    for p in &opts.paths.transports {
        if let PathKind::Rdma { device, port } = p {
            crate::transport::rdma::connect::check_target(&crate::paths::rdma_target(
                device,
                *port,
                opts.rdma.gid_index,
            ))?;
        }
    }
    #[cfg(not(feature = "rdma"))]
    let _ = opts;
    Ok(())
}

/// The JSON file's directory must exist and be writable, and the chart directory must be creatable,
/// before anything is measured.
fn check_outputs(args: &PairwiseArgs) -> Result<()> {
    if let Some(p) = &args.output_file {
        crate::report::file::check_writable(p, true, "-J/--output_file")?;
    }
    if let Some(d) = &args.plot {
        crate::report::file::check_dir_writable(d, "--plot")?;
    }
    Ok(())
}

/// One rank: bootstrap, connect every pair, measure; rank 0 reports. Returns the exit status.
fn rank(opts: &Options, cfg: &PairwiseConfig, id: &Identity, args: &PairwiseArgs) -> Result<i32> {
    #[cfg(feature = "mpi")]
    let mpi = if id.root.is_none() {
        Some(crate::mpi::Mpi::init()?)
    } else {
        None
    };
    let exchange = session::Exchange::choose(
        id,
        #[cfg(feature = "mpi")]
        mpi.as_ref(),
    )?;
    // Every rank must run the same test: the configuration and the path are compared at the rendezvous.
    let consensus = serde_json::json!({
        "command": "pairwise",
        "config": cfg,
        "transport": args.transport,
        "timeout_s": opts.deadlines.timeout.as_secs_f64(),
    });
    let mut sess = session::connect_with(id, opts, consensus, exchange, Pairs::All)?;
    // The path measured: a TCP path is the session's transport; an rdma@ path's queue pairs are set up over
    // the session's control path first.
    let mut open = match Paths::open(&mut sess, opts) {
        Ok(p) => p,
        Err(e) => return Err(crate::paths::abort_on(&mut sess, 0, e)),
    };
    let hosts: Vec<String> = sess.world.ranks.iter().map(|r| r.host.clone()).collect();
    let measured = open
        .on_transport(0, &mut sess, |t| {
            crate::validate::pairwise::measure_on(t, &hosts, cfg, &crate::validate::pairwise::Thresholds::default())
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
        Err(e) => return Err(open.abort(0, &mut sess, e.during("the pairwise test"))),
    };
    let Some(report) = report else {
        return Ok(EXIT_OK);
    };
    print!("{}", render::text(&report));
    if let Some(p) = &args.output_file {
        let text = serde_json::to_string_pretty(&report).expect("the pairwise report serialises");
        crate::report::file::write_atomic(p, text.as_bytes())?;
    }
    if let Some(dir) = &args.plot {
        for p in heatmaps(&report, dir)? {
            stderr!("collbench: heatmap {}", p.display());
        }
    }
    Ok(if report.findings.is_empty() {
        EXIT_OK
    } else {
        EXIT_WRONG
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
