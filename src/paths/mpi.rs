//! The `mpi` path (feature `mpi`): the MPI library's own collectives on host memory, the baseline. Nothing
//! to open: the session started MPI (it may carry the bootstrap too). Its ranks must come from an MPI
//! launcher, so collbench's own launcher refuses it; its line rate is `--line-rate`'s alone.

use super::{Kind, Open, Opening, Staging};
use crate::bench::{self, Outcome, Sweep};
use crate::engine::call::HostAlloc;
use crate::error::{Error, Result};
use crate::options::{Options, PathKind};
use crate::session::Session;

/// The file's kind.
pub(super) fn unit(_kind: &PathKind) -> Box<dyn Kind> {
    Box::new(Mpi)
}

struct Mpi;

impl Kind for Mpi {
    fn check_local_launch(&self, _opts: &Options) -> Result<()> {
        Err(Error::usage(
            "--transport",
            "mpi needs ranks started by an MPI launcher (mpirun, or srun with PMI/PMIx); collbench's own local \
             launcher cannot start MPI ranks. Try: mpirun -np 4 collbench run --transport tcp,mpi",
        ))
    }

    fn open(&self, _at: &mut Opening<'_>, _opts: &Options) -> Result<Box<dyn Open>> {
        Ok(Box::new(Mpi))
    }
}

impl Open for Mpi {
    fn name(&self) -> String {
        "mpi".to_string()
    }

    /// On host memory: MPI's collectives get host buffers only (`--memory cuda` is refused with mpi).
    fn sweep(&mut self, sess: &mut Session, _staging: &Staging, s: Sweep<'_>) -> Result<Outcome> {
        let m = sess.mpi.get().expect("MPI is started when --transport has mpi");
        let mut engine = crate::mpi::engine::MpiEngine::new(m);
        bench::sweep(&mut engine, s, HostAlloc)
    }

    /// A given rate is the network's, whichever path crosses it.
    fn run_line_rate(&self, _sess: &Session, given_gbit: Option<f64>) -> Option<f64> {
        given_gbit.map(|g| g / 8.0)
    }
}
