//! Every path of a run, opened once before the first sweep. A TCP path is one of the session's connected
//! transports; an RDMA path's queue pairs and registered windows, the NCCL communicator and this rank's GPU
//! are set up here, and every sweep after borrows them (repeats, `--interleave point` turns, preflight
//! phases). Opening happens in `--transport` order on every rank, since RDMA and NCCL set-up exchange
//! endpoints over the control path (the first TCP path).

use crate::bench::{self, Sweep};
use crate::engine::Native;
use crate::error::{Error, Result};
use crate::options::{Options, PathKind};
use crate::session::Session;
use crate::transport::Transport;

/// How one path reaches the other ranks, once opened.
enum Link {
    /// The session's TCP transport at this index.
    Tcp(usize),
    /// The MPI library's collectives (nothing to open: MPI was initialised at start-up).
    Mpi,
    /// collbench's verbs transport, connected to every peer.
    #[cfg(feature = "rdma")]
    Rdma(Box<crate::transport::rdma::RdmaTransport<crate::transport::rdma::connect::VerbsFabric>>),
    /// NCCL's communicator, and this rank's GPU holding the sweep's buffers.
    #[cfg(feature = "cuda")]
    Nccl(Box<(crate::nccl::engine::NcclComm, crate::memory::cuda_device::CudaDevice)>),
    /// A path this build cannot open (refused before any rank starts; said again if reached).
    #[cfg(not(all(feature = "rdma", feature = "cuda")))]
    NotBuilt,
}

/// One path of the run, opened.
pub struct OpenPath {
    /// The path as `--transport` gave it.
    pub kind: PathKind,
    /// Its name in records and tables (`tcp@lo`, `rdma@mlx5_0:1`, `mpi`, `nccl`).
    pub name: String,
    link: Link,
}

/// The device that staged paths (tcp, rdma with `--memory cuda`) copy through, opened once.
enum Staging {
    /// Host memory: nothing to stage.
    None,
    /// `--emulate-device`: host memory posing as a GPU (a testing aid).
    Emulated(crate::memory::emulated::Emulated),
    /// This rank's GPU.
    #[cfg(feature = "cuda")]
    Cuda(crate::memory::cuda_device::CudaDevice),
}

/// Every path of the run, in `--transport` order, and the device staged paths share.
pub struct Paths {
    list: Vec<OpenPath>,
    staging: Staging,
}

impl Paths {
    /// Opens every path of `opts` over the connected session `sess` (its TCP transports, in order, are the
    /// TCP paths; the first carries RDMA's and NCCL's set-up). Every rank calls this at the same point.
    pub fn open(sess: &mut Session, opts: &Options) -> Result<Paths> {
        let staging = open_staging(opts, sess.world.rank)?;
        let mut list = Vec::with_capacity(opts.paths.transports.len());
        let mut tcp_index = 0;
        for kind in &opts.paths.transports {
            let (name, link) = match kind {
                PathKind::Tcp(_) => {
                    let t = sess
                        .transports
                        .get(tcp_index)
                        .ok_or_else(|| Error::peer(format!("{kind}: the session has no TCP transport {tcp_index}")))?;
                    tcp_index += 1;
                    (t.path(), Link::Tcp(tcp_index - 1))
                }
                PathKind::Mpi => ("mpi".to_string(), Link::Mpi),
                PathKind::Nccl => ("nccl".to_string(), open_nccl(sess, opts)?),
                PathKind::Rdma { device, port } => open_rdma(sess, opts, device, *port)?,
            };
            list.push(OpenPath {
                kind: kind.clone(),
                name,
                link,
            });
        }
        Ok(Paths { list, staging })
    }

    /// The opened paths, in `--transport` order.
    pub fn iter(&self) -> impl Iterator<Item = &OpenPath> {
        self.list.iter()
    }

    /// Number of paths.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Sweeps path `i` once (`s.repeat`, `s.only` as the runner asks) on this run's opened links. `run` and
    /// `preflight` both sweep through here.
    pub fn sweep(
        &mut self,
        i: usize,
        sess: &mut Session,
        s: Sweep<'_>,
        #[cfg(feature = "mpi")] mpi: Option<&crate::mpi::Mpi>,
    ) -> Result<bench::Outcome> {
        let Paths { list, staging } = self;
        let path = &mut list[i];
        let opts = s.opts;
        match &mut path.link {
            Link::Tcp(k) => {
                let mut engine = Native::new(&mut sess.transports[*k], opts.algorithm);
                sweep_maybe_staged(&mut engine, staging, s)
            }
            #[cfg(feature = "mpi")]
            Link::Mpi => {
                let m = mpi.expect("MPI is initialised when --transport has mpi");
                let mut engine = crate::mpi::engine::MpiEngine::new(m);
                bench::sweep(&mut engine, s)
            }
            #[cfg(not(feature = "mpi"))]
            Link::Mpi => unreachable!("options refuse mpi in a build without it"),
            #[cfg(feature = "rdma")]
            Link::Rdma(t) => {
                let mut engine = Native::new(&mut **t, opts.algorithm);
                // Device memory is staged through host memory as on tcp paths; GPUDirect RDMA is not used.
                let swept = sweep_maybe_staged(&mut engine, staging, s);
                match swept {
                    Err(e) => Err(match (engine.transport.aborted_by(), engine.transport.failed_with()) {
                        (Some(origin), _) => hear_abort(&mut sess.transports[0], origin, e),
                        // The peer a verbs completion failed with is whom this rank's abort note blames.
                        (None, Some(peer)) => {
                            let host = sess.world.ranks.get(peer).map(|r| r.host.clone()).unwrap_or_default();
                            sess.transports[0].blame_peer(peer, host);
                            e
                        }
                        (None, None) => e,
                    }),
                    ok => ok,
                }
            }
            #[cfg(feature = "cuda")]
            Link::Nccl(opened) => {
                let (comm, dev) = &mut **opened;
                let mut engine = crate::nccl::engine::NcclEngine::new(&mut sess.transports[0], comm);
                let rank = crate::engine::Engine::rank(&engine);
                bench::sweep_on(&mut engine, s, |send, recv| {
                    crate::engine::direct::Direct::new(&*dev, rank, send, recv)
                })
            }
            #[cfg(not(all(feature = "rdma", feature = "cuda")))]
            Link::NotBuilt => Err(not_built(&path.kind)),
        }
    }

    /// Runs `f` over path `i`'s own transport (a TCP path's connections, or an RDMA path's queue pairs), for
    /// tests written against the [`Transport`] trait rather than the collectives (the pairwise link test).
    /// A peer's abort on an RDMA path is heard on the control path, as in [`Paths::sweep`]. `None` for paths
    /// that have no transport of collbench's (mpi, nccl) or that this build lacks.
    pub fn on_transport<R>(
        &mut self,
        i: usize,
        sess: &mut Session,
        f: impl FnOnce(&mut dyn Transport) -> Result<R>,
    ) -> Option<Result<R>> {
        match &mut self.list.get_mut(i)?.link {
            Link::Tcp(k) => Some(f(sess.transports.get_mut(*k)?)),
            #[cfg(feature = "rdma")]
            Link::Rdma(t) => Some(f(&mut **t).map_err(|e| match t.aborted_by() {
                Some(origin) => hear_abort(&mut sess.transports[0], origin, e),
                None => e,
            })),
            _ => None,
        }
    }

    /// `e` made known to every peer over the path that failed (a TCP path), or else over the control path,
    /// so all ranks name the same culprit.
    pub fn abort(&self, i: usize, sess: &mut Session, e: Error) -> Error {
        abort_on(sess, self.list.get(i).and_then(OpenPath::tcp_index).unwrap_or(0), e)
    }

    /// Each path's line rate in GB/s as the run's summary and charts take it, in their order: TCP paths (the
    /// speed rank 0's interface reports, else 0), then RDMA paths (the port's rate, else 0), then `mpi` when
    /// `--line-rate` names the network's. `--line-rate` (Gbit/s) overrides every measured speed.
    pub fn line_rates(&self, sess: &Session, given_gbit: Option<f64>) -> Vec<(String, f64)> {
        let mut rates: Vec<(String, f64)> = Vec::new();
        for p in &self.list {
            if let Link::Tcp(k) = p.link {
                let rate = given_gbit
                    .map(|g| g / 8.0)
                    .or_else(|| crate::net::iface::line_rate_gbs(sess.transports[k].iface()));
                rates.push((p.name.clone(), rate.unwrap_or(0.0)));
            }
        }
        for p in &self.list {
            if let PathKind::Rdma { device, port } = &p.kind {
                let sys = std::path::Path::new(crate::transport::rdma::sysfs::SYSFS_IB);
                let rate = given_gbit.or_else(|| {
                    crate::transport::rdma::sysfs::port_info(sys, device, *port).and_then(|i| i.rate_gbit())
                });
                rates.push((p.kind.to_string(), rate.map_or(0.0, |g| g / 8.0)));
            }
        }
        if let Some(g) = given_gbit {
            // A given rate is the network's, whichever path crosses it.
            rates.push(("mpi".into(), g / 8.0));
        }
        rates
    }
}

impl OpenPath {
    /// The session's TCP transport this path is, if it is one.
    pub fn tcp_index(&self) -> Option<usize> {
        match self.link {
            Link::Tcp(k) => Some(k),
            _ => None,
        }
    }

    /// Seconds spent connecting this path, for TCP paths (the others are set up over the control path).
    pub fn connect_s(&self, sess: &Session) -> Option<f64> {
        self.tcp_index().and_then(|k| sess.path_connect_s.get(k).copied())
    }
}

/// `e` made known to every peer over the session's TCP transport `k`, where there is one.
pub fn abort_on(sess: &mut Session, k: usize, e: Error) -> Error {
    match sess.transports.get_mut(k) {
        Some(t) => t.abort(e),
        None => e,
    }
}

/// The staging device `--memory` asks for, opened for `rank`.
fn open_staging(opts: &Options, rank: usize) -> Result<Staging> {
    if opts.buffers.memory != crate::memory::MemoryKind::Cuda || !opts.paths.transports.iter().any(staged) {
        return Ok(Staging::None);
    }
    if opts.buffers.emulate_device {
        return Ok(Staging::Emulated(crate::memory::emulated::Emulated::default()));
    }
    open_gpu(opts, rank).map(staging_gpu)
}

/// Paths whose device buffers are staged through host memory (every path but the libraries).
fn staged(p: &PathKind) -> bool {
    !matches!(p, PathKind::Mpi | PathKind::Nccl)
}

#[cfg(feature = "cuda")]
fn staging_gpu(dev: crate::memory::cuda_device::CudaDevice) -> Staging {
    Staging::Cuda(dev)
}

/// Without the `cuda` feature `--memory cuda` is refused before any rank starts; [`open_gpu`] says so again.
#[cfg(not(feature = "cuda"))]
fn staging_gpu(never: std::convert::Infallible) -> Staging {
    match never {}
}

/// This rank's GPU (`--device`, else by local rank); a failure names the rank and says what to check.
#[cfg(feature = "cuda")]
fn open_gpu(opts: &Options, rank: usize) -> Result<crate::memory::cuda_device::CudaDevice> {
    crate::memory::cuda_device::CudaDevice::open(opts.buffers.device.as_deref())
        .map_err(|m| Error::usage("--memory", format!("cuda: rank {rank}: {m}")))
}

#[cfg(not(feature = "cuda"))]
fn open_gpu(_opts: &Options, _rank: usize) -> Result<std::convert::Infallible> {
    Err(Error::usage("--memory", crate::memory::cuda_probe::not_built_message()))
}

/// [`bench::sweep`] on host memory, or on device buffers staged through pinned host memory.
fn sweep_maybe_staged<E: crate::engine::Engine>(
    engine: &mut E,
    staging: &Staging,
    s: Sweep<'_>,
) -> Result<bench::Outcome> {
    match staging {
        Staging::None => bench::sweep(engine, s),
        Staging::Emulated(dev) => sweep_on_device(engine, dev, s),
        #[cfg(feature = "cuda")]
        Staging::Cuda(dev) => sweep_on_device(engine, dev, s),
    }
}

/// [`bench::sweep`] on buffers of `dev`, calls split by `--staging-pieces`.
fn sweep_on_device<E: crate::engine::Engine, D: crate::memory::device::Device>(
    engine: &mut E,
    dev: &D,
    s: Sweep<'_>,
) -> Result<bench::Outcome> {
    let rank = engine.rank();
    let plan = crate::engine::pieces::Plan {
        pieces: s.opts.buffers.staging_pieces,
        ..Default::default()
    };
    let (nranks, on_device) = (engine.size(), s.opts.buffers.reduce_on_device);
    bench::sweep_on(engine, s, |send, recv| {
        let staged = crate::engine::staged::Staged::new(dev, rank, send, recv, plan)?;
        if on_device {
            staged.reducing_on_device(nranks)
        } else {
            Ok(staged)
        }
    })
}

/// NCCL's communicator over the control path, and this rank's GPU for the sweep's device buffers.
#[cfg(feature = "cuda")]
fn open_nccl(sess: &mut Session, opts: &Options) -> Result<Link> {
    let ctrl = sess
        .transports
        .first_mut()
        .ok_or_else(|| Error::usage("--transport", "nccl needs a TCP path for its set-up"))?;
    let comm = crate::nccl::engine::NcclComm::open(ctrl, opts.buffers.device.as_deref())?;
    let dev = open_gpu(opts, sess.world.rank)?;
    Ok(Link::Nccl(Box::new((comm, dev))))
}

/// Without the `cuda` feature, `--transport nccl` is refused before any rank starts.
#[cfg(not(feature = "cuda"))]
fn open_nccl(_sess: &mut Session, _opts: &Options) -> Result<Link> {
    Ok(Link::NotBuilt)
}

/// The verbs transport to every peer, its endpoints exchanged over the control path.
#[cfg(feature = "rdma")]
fn open_rdma(sess: &mut Session, opts: &Options, device: &str, port: u8) -> Result<(String, Link)> {
    let host = sess.world.host.clone();
    let ctrl = sess
        .transports
        .first_mut()
        .ok_or_else(|| Error::usage("--transport", "rdma needs a TCP path for its set-up"))?;
    let t = crate::transport::rdma::connect::connect(
        ctrl,
        &host,
        &rdma_target(device, port, opts.rdma.gid_index),
        crate::transport::rdma::connect::default_config(opts.deadlines.timeout, opts.rdma.rdma_qps),
    )?;
    Ok((t.path(), Link::Rdma(Box::new(t))))
}

/// Without the `rdma` feature, `--transport rdma@...` is refused before any rank starts.
#[cfg(not(feature = "rdma"))]
fn open_rdma(_sess: &mut Session, _opts: &Options, device: &str, port: u8) -> Result<(String, Link)> {
    Ok((format!("rdma@{device}:{port}"), Link::NotBuilt))
}

/// What a build without the path's feature says when it reaches one.
#[cfg(not(all(feature = "rdma", feature = "cuda")))]
fn not_built(kind: &PathKind) -> Error {
    match kind {
        PathKind::Nccl => Error::usage("--transport", crate::nccl::not_built_message()),
        other => Error::usage("--transport", format!("{other}: this build does not have its feature")),
    }
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

/// A peer's abort immediate stopped an RDMA path; the peer sends its reason over the control path (`ctrl`)
/// as it gives up. Waiting there for a message it will never send lets the control transport take its note
/// in, so this rank reports that peer's reason and culprit rather than blaming itself for stopping. Returns
/// what the wait ended with (the note, or the control path's own deadline naming the peer), or `stopped`.
#[cfg(any(feature = "rdma", test))]
pub(crate) fn hear_abort<T: Transport + ?Sized>(ctrl: &mut T, origin: usize, stopped: Error) -> Error {
    let mut byte = [0u8; 1];
    match crate::transport::recv(ctrl, origin, &mut byte) {
        Err(e) => e,
        Ok(()) => stopped,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::session;

    #[test]
    fn a_rank_stopped_by_a_peers_abort_reports_that_peers_reason_and_blames_it() {
        // Rank 0 gives up on the control path as `run` does; ranks 1 and 2 were stopped by its abort on
        // another path. Without hearing its note first, their own abort would name themselves.
        let mut opts = Options::default();
        opts.deadlines.timeout = Duration::from_secs(60);
        let out = session::run_threads(3, &opts, |sess| {
            let t = &mut sess.transports[0];
            if t.rank() == 0 {
                return t
                    .abort(Error::peer("the window overflowed").during("all_reduce of 4 MiB"))
                    .to_string();
            }
            let stopped = Error::peer(format!("rank {}: rank 0 gave up", t.rank()));
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
