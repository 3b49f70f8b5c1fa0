//! `collbench run`: launch local ranks, or be one rank of a launched job and sweep.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::time::SystemTime;

use indicatif::ProgressBar;

use crate::bench::{self, Sweep};
use crate::cli::RunArgs;
use crate::engine::Native;
use crate::error::{Error, Result, EXIT_OK, EXIT_WRONG};
use crate::options::{Interleave, Options, PathKind, Progress};
use crate::report::{self, PathCost, RankInfo, Reporter, RunInfo};
use crate::session;
use crate::transport::Transport;
use crate::world::{env, local, Identity};

/// Runs `collbench run` with the command line `argv` (program name first); returns the exit status.
pub fn run(args: &RunArgs, argv: &[OsString]) -> Result<i32> {
    let opts = Options::from_cli(args)?;
    // Before any rank starts: a missing driver or an unbuilt feature is a usage error, not a rank failure.
    // The emulated device (a testing aid) needs neither.
    if !opts.emulate_device {
        crate::memory::kind::check_run_memory(&args.memory)?;
    }
    // NCCL likewise: a missing libnccl stops the run before any rank starts.
    if opts.transports.contains(&PathKind::Nccl) {
        crate::nccl::check_run(opts.memory)?;
    }
    match env::identity_from(|k| std::env::var(k).ok())? {
        None => launch_local(&opts, argv),
        Some(id) => run_rank(&opts, &id, argv),
    }
}

/// No launcher around: check what can be checked before anything starts, then spawn `--np` ranks.
pub fn launch_local(opts: &Options, argv: &[OsString]) -> Result<i32> {
    if opts.transports.contains(&PathKind::Mpi) {
        return Err(Error::usage(
            "--transport",
            "mpi needs ranks started by an MPI launcher (mpirun, or srun with PMI/PMIx); collbench's own local \
             launcher cannot start MPI ranks. Try: mpirun -np 4 collbench run --transport tcp,mpi",
        ));
    }
    if let Some(avail) = Options::mem_available() {
        opts.check_memory(opts.np, avail)?;
    }
    check_outputs(opts)?;
    if let Some(name) = &opts.iface {
        crate::net::iface::address_of(name)?;
    }
    // RDMA devices are checked before any rank starts (a missing device names what was looked for).
    #[cfg(feature = "rdma")]
    for p in &opts.transports {
        if let PathKind::Rdma { device, port } = p {
            crate::transport::rdma::connect::check_target(&rdma_target(device, *port, opts.gid_index))?;
        }
    }
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if opts.np > cpus {
        eprintln!(
            "collbench: warning: {} local ranks on {cpus} CPUs: ranks share cores, so times include scheduling \
             delays. Use --np {cpus} or fewer to measure the transport rather than the scheduler",
            opts.np
        );
    }
    local::launch_processes(opts.np, &argv[1..], opts.bootstrap_timeout)
}

/// Sweeps one path once (repeat `s.repeat`): TCP paths take the session's transports in order (`tcp_index`
/// walks them), MPI runs the library's collectives, RDMA sets its queue pairs up over the first TCP path (kept
/// for control traffic). `run` and `preflight` both sweep through here.
pub(crate) fn sweep_path(
    sess: &mut session::Session,
    path: &PathKind,
    tcp_index: &mut usize,
    s: Sweep<'_>,
    #[cfg(feature = "mpi")] mpi: Option<&crate::mpi::Mpi>,
) -> Result<bench::Outcome> {
    let opts = s.opts;
    match path {
        PathKind::Tcp(_) => {
            let mut engine = Native::new(&mut sess.transports[*tcp_index], opts);
            *tcp_index += 1;
            match opts.memory {
                crate::memory::MemoryKind::Host => bench::sweep(&mut engine, s),
                crate::memory::MemoryKind::Cuda => sweep_staged(&mut engine, s),
            }
        }
        #[cfg(feature = "mpi")]
        PathKind::Mpi => {
            let m = mpi.expect("MPI is initialised when --transport has mpi");
            let mut engine = crate::mpi::engine::MpiEngine::new(m);
            bench::sweep(&mut engine, s)
        }
        #[cfg(not(feature = "mpi"))]
        PathKind::Mpi => unreachable!("options refuse mpi in a build without it"),
        PathKind::Nccl => sweep_nccl(sess, s),
        #[cfg(feature = "rdma")]
        PathKind::Rdma { device, port } => {
            let t = crate::transport::rdma::connect::connect(
                &mut sess.transports[0],
                &sess.world.host,
                &rdma_target(device, *port, opts.gid_index),
                crate::transport::rdma::connect::default_config(opts.timeout, opts.rdma_qps),
            )?;
            let mut engine = Native::new(t, opts);
            // Device memory is staged through host memory as on tcp paths; GPUDirect RDMA is not used.
            let swept = match opts.memory {
                crate::memory::MemoryKind::Host => bench::sweep(&mut engine, s),
                crate::memory::MemoryKind::Cuda => sweep_staged(&mut engine, s),
            };
            match swept {
                Err(e) => Err(match engine.transport.aborted_by() {
                    Some(origin) => hear_abort(&mut sess.transports[0], origin, e),
                    None => e,
                }),
                ok => ok,
            }
        }
        #[cfg(not(feature = "rdma"))]
        PathKind::Rdma { .. } => unreachable!("options refuse rdma in a build without it"),
    }
}

/// This rank's GPU (`--device`, else by local rank); a failure names the rank and says what to check.
#[cfg(feature = "cuda")]
fn open_gpu(opts: &Options, rank: usize) -> Result<crate::memory::cuda_device::CudaDevice> {
    crate::memory::cuda_device::CudaDevice::open(opts.device.as_deref())
        .map_err(|m| Error::usage("--memory", format!("cuda: rank {rank}: {m}")))
}

/// [`bench::sweep`] on device buffers staged through pinned host memory: this rank's GPU, or with
/// `--emulate-device` host memory posing as one.
fn sweep_staged<E: crate::engine::Engine>(engine: &mut E, s: Sweep<'_>) -> Result<bench::Outcome> {
    if s.opts.emulate_device {
        return sweep_on_device(engine, crate::memory::emulated::Emulated::default(), s);
    }
    sweep_cuda(engine, s)
}

/// [`bench::sweep`] on buffers of `dev`, calls split by `--staging-pieces`.
fn sweep_on_device<E: crate::engine::Engine, D: crate::memory::device::Device>(
    engine: &mut E,
    dev: D,
    s: Sweep<'_>,
) -> Result<bench::Outcome> {
    let rank = engine.rank();
    let plan = crate::engine::pieces::Plan {
        pieces: s.opts.staging_pieces,
        ..Default::default()
    };
    let (nranks, on_device) = (engine.size(), s.opts.reduce_on_device);
    bench::sweep_on(engine, s, |send, recv| {
        let staged = crate::engine::staged::Staged::new(dev, rank, send, recv, plan)?;
        if on_device {
            staged.reducing_on_device(nranks)
        } else {
            Ok(staged)
        }
    })
}

/// [`sweep_on_device`] on this rank's GPU.
#[cfg(feature = "cuda")]
fn sweep_cuda<E: crate::engine::Engine>(engine: &mut E, s: Sweep<'_>) -> Result<bench::Outcome> {
    let dev = open_gpu(s.opts, engine.rank())?;
    sweep_on_device(engine, dev, s)
}

/// NCCL's collectives on device buffers of this rank's GPU, with the first TCP path carrying the control
/// exchanges (the communicator's unique id among them).
#[cfg(feature = "cuda")]
fn sweep_nccl(sess: &mut session::Session, s: Sweep<'_>) -> Result<bench::Outcome> {
    let mut engine = crate::nccl::engine::NcclEngine::new(&mut sess.transports[0], s.opts.device.as_deref())?;
    let rank = crate::engine::Engine::rank(&engine);
    let dev = open_gpu(s.opts, rank)?;
    bench::sweep_on(&mut engine, s, |send, recv| {
        crate::engine::direct::Direct::new(dev, rank, send, recv)
    })
}

/// Without the `cuda` feature, `--transport nccl` is refused before any rank starts; this says so again.
#[cfg(not(feature = "cuda"))]
fn sweep_nccl(_sess: &mut session::Session, _s: Sweep<'_>) -> Result<bench::Outcome> {
    Err(Error::usage("--transport", crate::nccl::not_built_message()))
}

/// Without the `cuda` feature, `--memory cuda` is refused before any rank starts; this says so again.
#[cfg(not(feature = "cuda"))]
fn sweep_cuda<E: crate::engine::Engine>(_engine: &mut E, _s: Sweep<'_>) -> Result<bench::Outcome> {
    Err(Error::usage("--memory", crate::memory::cuda_probe::not_built_message()))
}

/// A peer's abort immediate stopped an RDMA path; the peer sends its reason over the control path (`ctrl`)
/// as it gives up. Waiting there for a message it will never send lets the control transport take its note
/// in, so this rank reports that peer's reason and culprit rather than blaming itself for stopping. Returns
/// what the wait ended with (the note, or the control path's own deadline naming the peer), or `stopped`.
#[cfg(any(feature = "rdma", test))]
fn hear_abort<T: Transport + ?Sized>(ctrl: &mut T, origin: usize, stopped: Error) -> Error {
    let mut byte = [0u8; 1];
    match crate::transport::recv(ctrl, origin, &mut byte) {
        Err(e) => e,
        Ok(()) => stopped,
    }
}

/// With device memory, each rank's GPU as it names it ([`Gpu::label`]), gathered on rank 0 over the
/// control path before the first sweep, for the rank list; `None` on other ranks and for host memory (no
/// exchange then, so host runs are as before).
///
/// [`Gpu::label`]: crate::memory::cuda::Gpu::label
fn rank_devices(sess: &mut session::Session, opts: &Options) -> Result<Option<Vec<String>>> {
    if opts.memory != crate::memory::MemoryKind::Cuda {
        return Ok(None);
    }
    let me = if opts.emulate_device {
        "emulated (host memory posing as a device)".to_string()
    } else {
        device_label(opts)
    };
    let Some(t) = sess.transports.first_mut() else {
        return Ok(None);
    };
    let all = crate::algorithm::control::gather(t, me.as_bytes())?;
    Ok(all.map(|v| {
        v.into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect()
    }))
}

#[cfg(feature = "cuda")]
fn device_label(opts: &Options) -> String {
    crate::memory::cuda::Gpu::label(opts.device.as_deref())
}

/// Without the `cuda` feature `--memory cuda` never gets this far (refused before any rank starts).
#[cfg(not(feature = "cuda"))]
fn device_label(_opts: &Options) -> String {
    "cuda:? (built without the cuda feature)".to_string()
}

/// `ranks` with each one's device, where they were gathered.
fn with_devices(mut ranks: Vec<RankInfo>, devices: Option<Vec<String>>) -> Vec<RankInfo> {
    for (r, d) in ranks.iter_mut().zip(devices.into_iter().flatten()) {
        r.device = Some(d);
    }
    ranks
}

/// With device memory and an rdma path: how rdma paths move device buffers (staged) and whether this host could
/// carry GPUDirect RDMA; `None` otherwise, so host-memory and tcp-only runs report nothing new.
fn rdma_route(opts: &Options) -> Option<String> {
    let rdma = opts.transports.iter().any(|p| matches!(p, PathKind::Rdma { .. }));
    (rdma && opts.memory == crate::memory::MemoryKind::Cuda).then(crate::memory::gpudirect::explain_host)
}

/// Refuses output files that exist (unless --force) or cannot be created, before any rank starts.
fn check_outputs(opts: &Options) -> Result<()> {
    if let Some(p) = &opts.json {
        report::file::check_writable(p, opts.force, "-J/--output_file")?;
    }
    if let Some(p) = &opts.csv {
        report::file::check_writable(p, opts.force, "--csv")?;
    }
    if let Some(p) = &opts.markdown {
        report::file::check_writable(p, opts.force, "--markdown")?;
    }
    if let Some(d) = &opts.plot {
        // Made now, so a directory that cannot exist fails before the sweep rather than after it.
        std::fs::create_dir_all(d)
            .map_err(|e| Error::io(format!("--plot: creating the chart directory {}", d.display()), e))?;
    }
    Ok(())
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// One rank of a job: bootstrap, connect, sweep, report (rank 0), and agree on the exit status.
fn run_rank(opts: &Options, id: &Identity, argv: &[OsString]) -> Result<i32> {
    let start_time = now_rfc3339();
    // The embedded launcher checked the files and the memory already; under any other launcher each rank
    // checks memory for the ranks its launcher says share this host, before anything is allocated.
    if id.launcher != "local" {
        if id.rank == 0 {
            check_outputs(opts)?;
        }
        if let Some(avail) = Options::mem_available() {
            let local = env::local_size_from(|k| std::env::var(k).ok()).unwrap_or(1);
            opts.check_memory(local, avail)?;
        }
    }
    #[cfg(feature = "mpi")]
    let mpi = init_mpi(opts, id)?;
    let exchange = session::Exchange::choose(
        id,
        #[cfg(feature = "mpi")]
        mpi.as_ref(),
    )?;
    let mut sess = session::connect(id, opts, opts.consensus_fields(), exchange)?;
    distinct_paths(&sess, opts)?;
    let devices = rank_devices(&mut sess, opts)?;
    let mut reporters: Vec<Box<dyn Reporter>> = Vec::new();
    let mut run_info = None;
    if id.rank == 0 {
        reporters = rank0_reporters(opts);
        let info = RunInfo {
            version: env!("CARGO_PKG_VERSION").to_string(),
            args: argv.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
            start_time,
            nranks: sess.world.size,
            launcher: sess.world.launcher.clone(),
            bootstrap_s: sess.world.bootstrap_s,
            connect_s: sess.connect_s,
            auth: sess.world.token_from.clone(),
            connections: Some(report::Connections {
                congestion: sess.transports.first().and_then(|t| t.congestion()),
                ..report::Connections::of(&sess.links, opts.streams, sess.transports.len())
            }),
            ranks: with_devices(sess.world.ranks.clone(), devices),
            params: report::RunParams::from_options(opts),
            legacy_options: None,
            rdma_route: rdma_route(opts),
        };
        for r in &mut reporters {
            r.begin(&info)?;
        }
        run_info = Some(info);
        if let Some(note) = crate::algorithm::Algo::unforced_note(opts.algo, &opts.collectives) {
            eprintln!("collbench: note: {note}");
        }
        let notes = bench::plan::rounded(&bench::plan::points(opts, sess.world.size), sess.world.size);
        if !notes.is_empty() {
            eprintln!(
                "collbench: note: {} point(s) rounded like nccl-tests does, e.g. {}",
                notes.len(),
                notes[0]
            );
        }
    }
    let progress = (id.rank == 0 && opts.progress == Progress::Auto && std::io::stderr().is_terminal())
        .then(ProgressBar::new_spinner);
    let ranks = sess.world.ranks.clone();
    // Each TCP path's line rate in GB/s: --line-rate, else the speed rank 0's interface reports.
    let mut line_rates: Vec<(String, f64)> = sess
        .transports
        .iter()
        .map(|t| {
            let path = t.path();
            // The interface rank 0 bound (a SPEC label such as tcp@ib0|eth0 names no single one).
            let rate = opts
                .line_rate_gbit
                .map(|g| g / 8.0)
                .or_else(|| crate::net::iface::line_rate_gbs(t.iface()));
            (path, rate.unwrap_or(0.0))
        })
        .collect();
    // RDMA paths: --line-rate, else the port's rate as the kernel reports it.
    for p in &opts.transports {
        if let PathKind::Rdma { device, port } = p {
            let sys = std::path::Path::new(crate::transport::rdma::sysfs::SYSFS_IB);
            let rate = opts
                .line_rate_gbit
                .or_else(|| crate::transport::rdma::sysfs::port_info(sys, device, *port).and_then(|i| i.rate_gbit()));
            line_rates.push((p.to_string(), rate.map_or(0.0, |g| g / 8.0)));
        }
    }
    if let Some(g) = opts.line_rate_gbit {
        // A given rate is the network's, whichever path crosses it.
        line_rates.push(("mpi".into(), g / 8.0));
    }
    let mut records = Vec::new();
    let mut wrong = 0;
    let mut costs: Vec<PathCost> = Vec::new();
    // Each rank's peak resident memory, the latest (and so largest) sample of every sweep; rank 0 only.
    let mut peak_rss: Vec<Option<u64>> = Vec::new();
    let mut said = Vec::new();
    // Repeats interleave the paths (A, B, A, B), so slow drift of the machine touches every path alike; with
    // --interleave point they take turns at every point, so a slow spell shorter than a sweep does too.
    let npoints = bench::plan::points(opts, sess.world.size).len();
    let turns: Vec<Option<usize>> = match opts.interleave {
        Interleave::Sweep => vec![None],
        Interleave::Point => (0..npoints).map(Some).collect(),
    };
    if let (Some(pb), Interleave::Point) = (&progress, opts.interleave) {
        bench::show_progress(pb, npoints * opts.transports.len() * opts.repeat as usize);
    }
    for repeat in 0..opts.repeat {
        for &only in &turns {
            // TCP paths map, in order, onto the session's transports.
            let mut tcp_index = 0;
            for path in &opts.transports {
                let outcome = sweep_path(
                    &mut sess,
                    path,
                    &mut tcp_index,
                    Sweep {
                        opts,
                        repeat,
                        ranks: &ranks,
                        reporters: &mut reporters,
                        progress: progress.as_ref(),
                        only,
                    },
                    #[cfg(feature = "mpi")]
                    mpi.as_ref(),
                );
                let outcome = match outcome {
                    Ok(o) => o,
                    Err(e) => {
                        if let Some(pb) = &progress {
                            pb.finish_and_clear();
                        }
                        // Every peer learns that this rank gave up, and all name the same culprit. The TCP path
                        // that failed carries the news; other paths' failures go over the first (control) one.
                        let t = if path.is_tcp() { tcp_index - 1 } else { 0 };
                        return Err(match sess.transports.get_mut(t) {
                            Some(t) => t.abort(e),
                            None => e,
                        });
                    }
                };
                bench::note_skipped(&mut said, outcome.skipped);
                records.extend(outcome.records);
                peak_rss.resize(outcome.peak_rss.len().max(peak_rss.len()), None);
                for (acc, p) in peak_rss.iter_mut().zip(outcome.peak_rss) {
                    *acc = (*acc).max(p);
                }
                wrong += outcome.wrong;
                if let Some(mut c) = outcome.cost {
                    match costs.iter_mut().find(|t| t.path == c.path) {
                        Some(total) => bench::cost::add(total, &c),
                        None => {
                            c.connect_s = path.is_tcp().then(|| sess.path_connect_s[tcp_index - 1]);
                            c.line_rate_gbs = line_rates.iter().find(|(p, r)| *p == c.path && *r > 0.0).map(|l| l.1);
                            costs.push(c);
                        }
                    }
                }
            }
        }
    }
    for c in &costs {
        if let Some(w) = bench::cost::warning(c) {
            eprintln!("collbench: warning: {w}");
        }
    }
    if let Some(pb) = &progress {
        pb.finish_and_clear();
    }
    if id.rank == 0 {
        let mut summary =
            report::summary::summarize(&records, now_rfc3339(), opts.reference.as_deref(), &line_rates, costs);
        let hosts: Vec<&str> = ranks.iter().map(|r| r.host.as_str()).collect();
        let largest = records.iter().map(|r| r.size).max().unwrap_or(0);
        summary.peak_memory = report::PeakMemory::of(peak_rss, &hosts, largest);
        let distinct: std::collections::BTreeSet<&str> = hosts.iter().copied().collect();
        let model = opts
            .target_ranks
            .and_then(|n| crate::model::for_run(&records, distinct.len(), n, opts.ranks_per_node));
        if let Some(m) = &model {
            crate::model::attach_to_summary(&mut summary, m);
        }
        for r in &mut reporters {
            r.finish(&summary)?;
        }
        if let Some(m) = &model {
            print!("\n{}", crate::model::render::text(m));
        }
        if let (Some(dir), Some(info)) = (&opts.plot, &run_info) {
            let mut data = crate::plot::PlotData::from_records(&records, &line_rates, &crate::plot::run_note(info));
            if let Some(m) = &model {
                data.add_predictions(&crate::plot::data::predicted_samples(m));
            }
            for p in crate::plot::write_plots(&data, dir, &crate::plot::Format::ALL)? {
                eprintln!("collbench: chart {}", p.display());
            }
        }
    }
    Ok(if wrong > 0 { EXIT_WRONG } else { EXIT_OK })
}

/// Results are keyed by path name, so two `--transport` entries that land on one interface (`tcp` and
/// `tcp@lo` for local ranks) would mix their measurements: refused before anything is measured.
fn distinct_paths(sess: &session::Session, opts: &Options) -> Result<()> {
    let names: Vec<String> = sess.transports.iter().map(|t| t.path()).collect();
    for (i, a) in names.iter().enumerate() {
        if let Some(j) = names[..i].iter().position(|b| b == a) {
            let given: Vec<String> = opts
                .transports
                .iter()
                .filter(|p| p.is_tcp())
                .map(|p| p.to_string())
                .collect();
            return Err(Error::usage(
                "--transport",
                format!(
                    "{} and {} both use {a} on rank {} (host {}): list each interface once",
                    given[j], given[i], sess.world.rank, sess.world.host
                ),
            ));
        }
    }
    Ok(())
}

/// The device and port of an `rdma@DEVICE:PORT` path, with `--gid-index` (or the GID chosen per link layer).
#[cfg(feature = "rdma")]
pub fn rdma_target(device: &str, port: u8, gid_index: Option<u8>) -> crate::transport::rdma::connect::Target {
    crate::transport::rdma::connect::Target {
        device: device.to_string(),
        port,
        gid_index,
    }
}

/// MPI, when a path or the bootstrap needs it; an MPI world that is not the launcher's job is refused.
#[cfg(feature = "mpi")]
pub fn init_mpi(opts: &Options, id: &Identity) -> Result<Option<crate::mpi::Mpi>> {
    if !opts.transports.contains(&PathKind::Mpi) && id.root.is_some() {
        return Ok(None);
    }
    let m = crate::mpi::Mpi::init()?;
    if m.size() != id.size {
        return Err(Error::usage(
            "--transport",
            format!(
                "MPI sees {} rank(s) but {} says the job has {}: MPI needs ranks started by an MPI launcher \
                 (mpirun, or srun with PMI/PMIx)",
                m.size(),
                id.launcher,
                id.size
            ),
        ));
    }
    Ok(Some(m))
}

/// Rank 0's reporters: the table on stdout and every file asked for.
fn rank0_reporters(opts: &Options) -> Vec<Box<dyn Reporter>> {
    let mut v: Vec<Box<dyn Reporter>> = vec![Box::new(report::table::TableReporter::new(std::io::stdout()))];
    if let Some(p) = &opts.json {
        v.push(Box::new(report::json::JsonReporter::new(p.clone())));
    }
    if let Some(p) = &opts.csv {
        v.push(Box::new(report::csv::CsvReporter::new(p.clone())));
    }
    if let Some(p) = &opts.markdown {
        v.push(Box::new(report::markdown::MarkdownReporter::new(p.clone())));
    }
    v
}

/// Prints `e` the way every collbench error reaches the user and returns its exit status.
pub fn report_error(e: &Error) -> i32 {
    eprintln!("collbench: error: {e}");
    e.exit_code()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_rank_stopped_by_a_peers_abort_reports_that_peers_reason_and_blames_it() {
        // Rank 0 gives up on the control path as `run` does; ranks 1 and 2 were stopped by its abort on
        // another path. Without hearing its note first, their own abort would name themselves.
        let opts = Options {
            timeout: Duration::from_secs(60),
            ..Options::default()
        };
        let out = session::run_threads(3, &opts, |sess| {
            let t = &mut sess.transports[0];
            if t.rank() == 0 {
                return t
                    .abort(Error::Peer("the window overflowed".into()).during("all_reduce of 4 MiB"))
                    .to_string();
            }
            let stopped = Error::Peer(format!("rank {}: rank 0 gave up", t.rank()));
            let e = hear_abort(&mut *t, 0, stopped);
            t.abort(e).to_string()
        });
        for (r, e) in out.into_iter().enumerate().skip(1) {
            let e = e.unwrap();
            assert!(
                e.contains("the window overflowed")
                    && e.contains("Culprit: rank 0")
                    && !e.contains(&format!("Culprit: rank {r}")),
                "rank {r}: {e}"
            );
        }
    }
}
