//! One rank's start-up, the same for every command the driver runs: what a launched rank checks on its host,
//! MPI where a path or the bootstrap needs it, the bootstrap and the TCP connections, then every path opened,
//! a failure to open one made known to every peer.

use crate::error::{Error, Result};
use crate::memory::available::Available;
use crate::options::Options;
use crate::paths::{self, Paths};
use crate::session::{self, MpiHandle, Pairs, Session};
use crate::transport::Transport;
use crate::world::{env, Identity};

/// How a command starts each of its ranks (made by the driver from the command's [`super::RankCommand`]).
pub struct Start<'a> {
    /// The options every rank connects and opens its paths with.
    pub opts: &'a Options,
    /// What every rank must agree on, compared at the rendezvous (or through MPI) before any data moves:
    /// [`crate::options::Agreement::to_wire`], with a command's own part where it has one.
    pub agreement: serde_json::Value,
    /// The rank pairs the TCP paths connect.
    pub pairs: Pairs,
    /// Rank 0's check of the command's output files (collbench's own launcher checked them already).
    pub check_outputs: &'a dyn Fn() -> Result<()>,
    /// A rank's check that its buffers fit: given the ranks its launcher puts on this host and the memory
    /// available (collbench's own launcher checked them already).
    pub check_memory: &'a dyn Fn(usize, &Available) -> Result<()>,
}

/// A rank connected to the job, with every path of its options open.
pub struct Rank {
    pub sess: Session,
    pub paths: Paths,
}

impl Start<'_> {
    /// Under any launcher but collbench's own (which checked before it started the ranks): rank 0 checks the
    /// output files before anything else.
    pub fn check_outputs(&self, id: &Identity) -> Result<()> {
        if id.launcher == "local" || id.rank != 0 {
            return Ok(());
        }
        (self.check_outputs)()
    }

    /// Under any launcher but collbench's own: each rank checks that its buffers, and its processes and
    /// threads, fit beside the others its launcher says share this host (the memory and pids cgroups' limits
    /// included), before anything is allocated.
    pub fn check_host(&self, id: &Identity, get: &dyn Fn(&str) -> Option<String>) -> Result<()> {
        if id.launcher == "local" {
            return Ok(());
        }
        let local = env::local_size_from(get).unwrap_or(1);
        if let Some(avail) = crate::memory::available::available() {
            (self.check_memory)(local, &avail)?;
        }
        if let Some(room) = crate::cgroup::limits::pids_room_here() {
            self.opts.check_tasks(local, false, &room)?;
        }
        Ok(())
    }

    /// Under any launcher but collbench's own (whose checks come before any rank starts): tells every rank of
    /// the job that this one refuses to start because of `e`, before it exits with `e`, so that none waits for
    /// it until its bootstrap deadline.
    pub fn refuse(&self, id: &Identity, e: &Error) {
        if id.launcher != "local" {
            session::refuse(id, self.opts, e);
        }
    }

    /// MPI where a path needs it or the launcher named no rendezvous, then the bootstrap and the TCP
    /// connections: a rank that knows its peers, its paths not open yet.
    pub fn connect(&self, id: &Identity) -> Result<Session> {
        let needs_mpi = self.opts.paths.transports.iter().any(|p| p.traits().needs_mpi);
        let mpi = MpiHandle::start(needs_mpi, id)?;
        session::connect_with(id, self.opts, self.agreement.clone(), mpi, self.pairs)
    }

    /// Every path opened once over `sess`, to be borrowed by every sweep; a failure is made known to every
    /// peer over the control path, so all ranks name the same culprit.
    pub fn open(&self, mut sess: Session) -> Result<Rank> {
        match Paths::open(&mut sess, self.opts) {
            Ok(paths) => Ok(Rank { sess, paths }),
            Err(e) => Err(paths::abort_on(&mut sess, 0, e)),
        }
    }
}

impl Rank {
    /// `measure` on the first path's transport (a TCP path's, or an rdma@ path's set up over the control path),
    /// for a command that measures one of collbench's own paths; a failure is made known to every peer, so all
    /// name the same culprit, `during` saying what was running.
    pub fn measure<T>(&mut self, during: &str, measure: impl FnOnce(&mut dyn Transport) -> Result<T>) -> Result<T> {
        let Rank { sess, paths } = self;
        let done = paths.on_transport(0, sess, measure).unwrap_or_else(|| {
            Err(Error::usage(
                "--transport",
                "this path has no transport of collbench's to measure",
            ))
        });
        done.map_err(|e| paths.abort(0, sess, e.during(during)))
    }

    /// `measure` over the first path's NCCL point-to-point on this rank's GPU, with the control path, for a
    /// command that measures pairs of GPUs; a failure is made known to every peer, `during` saying what ran.
    #[cfg(feature = "cuda")]
    pub fn measure_device<T>(
        &mut self,
        during: &str,
        measure: impl FnOnce(&mut dyn Transport, crate::nccl::pair::PairPath<'_>) -> Result<T>,
    ) -> Result<T> {
        let Rank { sess, paths } = self;
        let done = paths.on_device_pairs(0, sess, measure).unwrap_or_else(|| {
            Err(Error::usage(
                "--memory",
                "device buffers are measured pair by pair over nccl only, and this path is not nccl",
            ))
        });
        done.map_err(|e| paths.abort(0, sess, e.during(during)))
    }
}
