//! The `mpi` path (feature `mpi`): the MPI library's own collectives on host memory, the baseline. Nothing
//! to open: the session started MPI (it may carry the bootstrap too). Its ranks must come from an MPI
//! launcher, so collbench's own launcher refuses it; its line rate is `--line-rate`'s alone.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::{Kind, Open, Opening, Staging};
use crate::bench::{self, Outcome, Sweep};
use crate::engine::call::HostAlloc;
use crate::engine::watchdog::{Bound, Job, Watchdog};
use crate::error::{Error, Result};
use crate::options::{Options, PathKind};
use crate::path_names::MPI;
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

    /// Starts the library watchdog: a listener on the control path's address, every rank's exchanged
    /// through MPI, so `-T` holds on calls that block inside the library.
    fn open(&self, at: &mut Opening<'_>, opts: &Options) -> Result<Box<dyn Open>> {
        let sess = &*at.sess;
        let m = sess.mpi.get().expect("MPI is started when --transport has mpi");
        let world = &sess.world;
        let me = &world.ranks[world.rank];
        let ip = me
            .endpoints
            .first()
            .and_then(|ep| ep.addr.parse::<SocketAddr>().ok())
            .map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |a| a.ip());
        let bound = Bound::new(ip)?;
        let all = m.allgather_bytes(bound.addr()?.to_string().as_bytes());
        let peers = crate::engine::watchdog::peers(all.iter().map(|a| Some(a.as_slice())), &world.ranks, MPI)?;
        let watchdog = Watchdog::start(
            bound,
            Job {
                rank: world.rank,
                peers,
                token: world.token,
                timeout: opts.deadlines.timeout,
                path: MPI.into(),
            },
        )?;
        Ok(Box::new(OpenMpi { watchdog }))
    }
}

/// The opened mpi path: its calls watched.
struct OpenMpi {
    watchdog: Watchdog,
}

impl Open for OpenMpi {
    fn name(&self) -> String {
        MPI.to_string()
    }

    /// On host memory: MPI's collectives get host buffers only (`--memory cuda` is refused with mpi).
    fn sweep(&mut self, sess: &mut Session, _staging: &Staging, s: Sweep<'_>) -> Result<Outcome> {
        let m = sess.mpi.get().expect("MPI is started when --transport has mpi");
        let mut engine = crate::mpi::engine::MpiEngine::new(m, &self.watchdog);
        bench::sweep(&mut engine, s, HostAlloc)
    }

    /// A given rate is the network's, whichever path crosses it.
    fn run_line_rate(&self, _sess: &Session, given_gbit: Option<f64>) -> Option<f64> {
        given_gbit.map(|g| g / 8.0)
    }
}
