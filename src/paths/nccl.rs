//! The `nccl` path (feature `cuda`): NCCL's collectives on device buffers handed over directly, the GPU
//! baseline. Opening it sets NCCL's communicator up over the control path and opens this rank's GPU; before
//! any rank starts, libnccl must load. Its failures are made known on the control path.

use super::{Kind, Open, Opening, Staging};
use crate::bench::{self, Outcome, Sweep};
use crate::engine::direct::DirectAlloc;
use crate::error::{Error, Result};
use crate::memory::cuda_device::CudaDevice;
use crate::nccl::engine::{NcclComm, NcclEngine};
use crate::options::{Options, PathKind};
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
        let comm = NcclComm::open(ctrl, opts.buffers.device.as_deref())?;
        let dev = super::staging::open_gpu(opts, at.sess.world.rank)?;
        Ok(Box::new(NcclPath { comm, dev }))
    }
}

/// NCCL's communicator, and this rank's GPU holding the sweep's buffers.
struct NcclPath {
    comm: NcclComm,
    dev: CudaDevice,
}

impl Open for NcclPath {
    fn name(&self) -> String {
        "nccl".to_string()
    }

    fn sweep(&mut self, sess: &mut Session, _staging: &Staging, s: Sweep<'_>) -> Result<Outcome> {
        let mut engine = NcclEngine::new(&mut sess.transports[0], &mut self.comm);
        let rank = crate::engine::Engine::rank(&engine);
        bench::sweep(&mut engine, s, DirectAlloc { dev: &self.dev, rank })
    }
}
