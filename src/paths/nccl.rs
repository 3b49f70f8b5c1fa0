//! The `nccl` path (feature `cuda`): NCCL's collectives on device buffers handed over directly, the GPU
//! baseline. Opening it sets NCCL's communicator up over the control path, opens this rank's GPU and starts
//! the library watchdog (`-T` on every NCCL call, as on mpi's; addresses exchanged over the control path);
//! before any rank starts, libnccl must load. Its failures are made known on the control path.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::{Kind, Open, Opening, Staging};
use crate::algorithm::control;
use crate::bench::{self, Outcome, Sweep};
use crate::engine::call::WithRuntime;
use crate::engine::direct::DirectAlloc;
use crate::engine::watchdog::{Bound, Job, Watchdog};
use crate::error::{Error, Result};
use crate::memory::cuda_device::CudaDevice;
use crate::nccl::engine::{NcclComm, NcclEngine};
use crate::options::{Options, PathKind};
use crate::path_names::NCCL;
use crate::session::Session;

/// The file's kind.
pub(super) fn unit(_kind: &PathKind) -> Box<dyn Kind> {
    Box::new(Nccl)
}

struct Nccl;

impl Kind for Nccl {
    /// A missing libnccl stops the run before any rank starts.
    fn check_host(&self, opts: &Options) -> Result<()> {
        crate::nccl::check_run(opts.buffers.memory).map(drop)
    }

    fn open(&self, at: &mut Opening<'_>, opts: &Options) -> Result<Box<dyn Open>> {
        let ctrl = at
            .sess
            .transports
            .first_mut()
            .ok_or_else(|| Error::usage("--transport", "nccl needs a TCP path for its set-up"))?;
        // What the CUDA context and NCCL's communicator take of the host's memory, for the peak's bound.
        let before = bench::memory::rss();
        let comm = NcclComm::open(ctrl, opts.buffers.device.as_deref())?;
        let dev = super::staging::open_gpu(opts, at.sess.world.rank)?;
        let runtime_bytes = bench::memory::grown_since(before);
        let watchdog = start_watchdog(at.sess, opts)?;
        Ok(Box::new(NcclPath {
            comm,
            dev,
            watchdog,
            runtime_bytes,
        }))
    }
}

/// Starts the library watchdog on the control path's address, every rank's address gathered on rank 0 and
/// sent to all over the control path (each line one rank's, in rank order).
fn start_watchdog(sess: &mut Session, opts: &Options) -> Result<Watchdog> {
    let world = &sess.world;
    let ip = world.ranks[world.rank]
        .endpoints
        .first()
        .and_then(|ep| ep.addr.parse::<SocketAddr>().ok())
        .map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |a| a.ip());
    let bound = Bound::new(ip)?;
    let (rank, token, ranks) = (world.rank, world.token, world.ranks.clone());
    let ctrl = sess
        .transports
        .first_mut()
        .ok_or_else(|| Error::usage("--transport", "nccl needs a TCP path for its set-up"))?;
    let gathered = control::gather(ctrl, bound.addr()?.to_string().as_bytes())?;
    let list = gathered.map(|all| all.join(&b'\n')).unwrap_or_default();
    let list = control::broadcast(ctrl, &list)?;
    let addrs: Vec<&[u8]> = list.split(|b| *b == b'\n').collect();
    let peers = crate::engine::watchdog::peers(addrs.into_iter().map(Some), &ranks, NCCL)?;
    Watchdog::start(
        bound,
        Job {
            rank,
            peers,
            token,
            timeout: opts.deadlines.timeout,
            path: NCCL.into(),
        },
    )
}

/// NCCL's communicator, this rank's GPU holding the sweep's buffers, and the watchdog on its calls.
struct NcclPath {
    comm: NcclComm,
    dev: CudaDevice,
    watchdog: Watchdog,
    /// Host memory the context and the communicator took when they were made, bytes.
    runtime_bytes: u64,
}

impl Open for NcclPath {
    fn name(&self) -> String {
        NCCL.to_string()
    }

    fn device_pairs(&mut self) -> Option<Result<crate::nccl::pair::PairPath<'_>>> {
        Some(crate::nccl::pair::PairPath::new(&mut self.comm, &self.watchdog))
    }

    fn sweep(&mut self, sess: &mut Session, _staging: &Staging, s: Sweep<'_>) -> Result<Outcome> {
        let mut engine = NcclEngine::new(&mut sess.transports[0], &mut self.comm, &self.watchdog)?;
        let rank = crate::engine::Engine::rank(&engine);
        let alloc = WithRuntime {
            alloc: DirectAlloc { dev: &self.dev, rank },
            runtime_bytes: self.runtime_bytes,
        };
        bench::sweep(&mut engine, s, alloc)
    }
}
