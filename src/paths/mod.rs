//! Every path of a run, opened once before the first sweep and borrowed by every sweep after (repeats,
//! `--interleave point` turns, preflight phases). Each kind of path is one file behind two traits: [`Kind`]
//! (what it checks before anything starts, how it opens) and [`Open`] (an opened path: its engine and sweeps,
//! its transport for the pairwise test, its line rate, how its failures are made known). [`kind`] is the one
//! match over [`PathKind`]: a new kind of path is its own file, one arm there, its variant, traits and name in
//! `transport::path` and `path_names`, and its line in the CLI help.
//!
//! | kind | file | opening | sweeps | before local ranks start | line rate | a failure |
//! |---|---|---|---|---|---|---|
//! | `tcp`, `tcp@SPEC` | `tcp` | takes the session's next TCP transport | collbench's algorithms; device buffers staged | - | the interface's link speed | made known on its own connections |
//! | `rdma@DEV:PORT` | `rdma` | queue pairs to every peer, set up over the control path | the same, over the queue pairs | device and port checked | the port's rate | a peer's abort heard and the failed peer blamed on the control path |
//! | `mpi` | `mpi` | nothing (the session started MPI) | MPI's collectives on host memory | refused: needs an MPI launcher | `--line-rate` only | on the control path |
//! | `nccl` | `nccl` | NCCL's communicator and this rank's GPU | NCCL on device buffers | libnccl loaded | `--line-rate` only | on the control path |
//!
//! Opening happens in `--transport` order on every rank, since RDMA and NCCL set-up exchange endpoints over
//! the control path (the first TCP path). Paths that stage device buffers share one device ([`staging`]).

#[cfg(feature = "mpi")]
mod mpi;
#[cfg(feature = "cuda")]
mod nccl;
#[cfg(not(all(feature = "mpi", feature = "rdma", feature = "cuda")))]
mod not_built;
#[cfg(feature = "rdma")]
mod rdma;
mod staging;
mod tcp;

// A kind whose feature this build lacks is refused where `--transport` is parsed; its stand-in says so again.
#[cfg(not(feature = "mpi"))]
mod mpi {
    pub(super) fn unit(kind: &super::PathKind) -> Box<dyn super::Kind> {
        super::not_built::unit(kind)
    }
}
#[cfg(not(feature = "cuda"))]
mod nccl {
    pub(super) fn unit(kind: &super::PathKind) -> Box<dyn super::Kind> {
        super::not_built::unit(kind)
    }
}
#[cfg(not(feature = "rdma"))]
mod rdma {
    pub(super) fn unit(kind: &super::PathKind, _device: &str, _port: u8) -> Box<dyn super::Kind> {
        super::not_built::unit(kind)
    }
}

use crate::bench::{Outcome, Sweep};
use crate::error::{Error, Result};
use crate::options::{Options, PathKind};
use crate::session::Session;
use crate::transport::Transport;
use staging::Staging;

/// A kind of path before it is opened: what its file checks before anything starts, and how it opens.
trait Kind {
    /// Checks in every process of `run`, before any rank starts, that this build and host can run the path.
    fn check_host(&self, _opts: &Options) -> Result<()> {
        Ok(())
    }

    /// Checks before collbench's own launcher starts local ranks (a missing device names what was looked for).
    fn check_local_launch(&self, _opts: &Options) -> Result<()> {
        Ok(())
    }

    /// How the path moves device buffers, for the run's header, where that is worth saying.
    fn device_route(&self, _opts: &Options) -> Option<String> {
        None
    }

    /// Opens the path on this rank with `opts`; every rank opens its paths in the same order.
    fn open(&self, at: &mut Opening<'_>, opts: &Options) -> Result<Box<dyn Open>>;
}

/// What opening a path has to hand.
struct Opening<'a> {
    /// The connected session: its TCP transports, the first of which is the control path.
    sess: &'a mut Session,
    /// The session's next TCP transport not yet taken by a TCP path.
    next_tcp: usize,
}

/// Where a path's line rate comes from: GB/s and the source (`link speed of eth0`), or why it is unknown.
pub type Rate = std::result::Result<(f64, String), String>;

/// One path, opened.
trait Open {
    /// Its name in records and tables (`tcp@lo`, `rdma@mlx5_0:1`, `mpi`, `nccl`).
    fn name(&self) -> String;

    /// Sweeps once on this path; paths that stage device buffers do it through `staging`.
    fn sweep(&mut self, sess: &mut Session, staging: &Staging, s: Sweep<'_>) -> Result<Outcome>;

    /// Its own transport of collbench's, for tests written against the trait; `None` for library paths.
    fn transport<'a>(&'a mut self, _sess: &'a mut Session) -> Option<&'a mut dyn Transport> {
        None
    }

    /// NCCL's point-to-point on this rank's GPU, for the pairwise test on device buffers; `None` for every
    /// path but `nccl`.
    #[cfg(feature = "cuda")]
    fn device_pairs(&mut self) -> Option<Result<crate::nccl::pair::PairPath<'_>>> {
        None
    }

    /// `e`, from this path's transport, with the reason of the peer whose abort stopped it where one did.
    fn heard(&mut self, _sess: &mut Session, e: Error) -> Error {
        e
    }

    /// `e` made known to every peer, so all name the same culprit: over the control path unless the path
    /// has connections of its own that every peer listens on.
    fn abort(&self, sess: &mut Session, e: Error) -> Error {
        abort_on(sess, 0, e)
    }

    /// The session's TCP transport this path is, if it is one.
    fn tcp_index(&self) -> Option<usize> {
        None
    }

    /// Its line rate for preflight's checks: `--line-rate` (`given_gbit`) over what the path knows.
    fn line_rate(&self, _sess: &Session, given_gbit: Option<f64>) -> Rate {
        given(given_gbit).ok_or(format!("line rate of {} unknown", self.name()))
    }

    /// Its line rate in GB/s as the run's summary and charts take it; `None` leaves the path without one.
    fn run_line_rate(&self, _sess: &Session, _given_gbit: Option<f64>) -> Option<f64> {
        None
    }
}

/// `--line-rate` (Gbit/s) as a [`Rate`].
fn given(given_gbit: Option<f64>) -> Option<(f64, String)> {
    given_gbit.map(|g| (g / 8.0, "--line-rate".to_string()))
}

/// The file of `kind`: the one match over the kinds of path, with no catch-all, so a new kind does not
/// compile until its file is written.
fn kind(kind: &PathKind) -> Box<dyn Kind> {
    match kind {
        PathKind::Tcp(spec) => tcp::unit(kind, spec.as_deref()),
        PathKind::Rdma { device, port } => rdma::unit(kind, device, *port),
        PathKind::Mpi => mpi::unit(kind),
        PathKind::Nccl => nccl::unit(kind),
    }
}

/// Checks in every process of `run`, before any rank starts, that this build and host can run every path
/// (a missing library is a usage error, not a rank failure).
pub fn check_host(opts: &Options) -> Result<()> {
    opts.paths.transports.iter().try_for_each(|p| kind(p).check_host(opts))
}

/// Checks every path can run here before collbench's own launcher starts local ranks.
pub fn check_local_launch(opts: &Options) -> Result<()> {
    opts.paths
        .transports
        .iter()
        .try_for_each(|p| kind(p).check_local_launch(opts))
}

/// How the paths move device buffers, where one says (rdma with `--memory cuda`); `None` otherwise.
pub fn device_route(opts: &Options) -> Option<String> {
    opts.paths.transports.iter().find_map(|p| kind(p).device_route(opts))
}

/// One path of the run, opened.
pub struct OpenPath {
    /// The path as `--transport` gave it.
    pub kind: PathKind,
    /// Its name in records and tables (`tcp@lo`, `rdma@mlx5_0:1`, `mpi`, `nccl`).
    pub name: String,
    open: Box<dyn Open>,
}

impl OpenPath {
    /// The session's TCP transport this path is, if it is one.
    pub fn tcp_index(&self) -> Option<usize> {
        self.open.tcp_index()
    }

    /// Seconds spent connecting this path, for TCP paths (the others are set up over the control path).
    pub fn connect_s(&self, sess: &Session) -> Option<f64> {
        self.tcp_index().and_then(|k| sess.path_connect_s.get(k).copied())
    }

    /// Its line rate in GB/s and where that came from (`--line-rate`, `given_gbit`, over what the path
    /// knows: rank 0's interface speed, the RDMA port's rate), or why it is unknown.
    pub fn line_rate(&self, sess: &Session, given_gbit: Option<f64>) -> Rate {
        self.open.line_rate(sess, given_gbit)
    }
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
        let staging = Staging::open(opts, sess.world.rank)?;
        let mut at = Opening { sess, next_tcp: 0 };
        let mut list = Vec::with_capacity(opts.paths.transports.len());
        for k in &opts.paths.transports {
            let open = kind(k).open(&mut at, opts)?;
            list.push(OpenPath {
                kind: k.clone(),
                name: open.name(),
                open,
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
    pub fn sweep(&mut self, i: usize, sess: &mut Session, s: Sweep<'_>) -> Result<Outcome> {
        self.list[i].open.sweep(sess, &self.staging, s)
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
        let p = &mut self.list.get_mut(i)?.open;
        let done = f(p.transport(sess)?);
        Some(done.map_err(|e| p.heard(sess, e)))
    }

    /// `f` given the control path (the session's first TCP transport) and path `i`'s NCCL point-to-point, for
    /// the pairwise test on device buffers; `None` when path `i` is not `nccl` or there is no control path.
    #[cfg(feature = "cuda")]
    pub fn on_device_pairs<R>(
        &mut self,
        i: usize,
        sess: &mut Session,
        f: impl FnOnce(&mut dyn Transport, crate::nccl::pair::PairPath<'_>) -> Result<R>,
    ) -> Option<Result<R>> {
        let p = self.list.get_mut(i)?.open.device_pairs()?;
        let ctrl = sess.transports.first_mut()?;
        Some(p.and_then(|p| f(ctrl, p)))
    }

    /// `e` made known to every peer over the path that failed (a TCP path), or else over the control path,
    /// so all ranks name the same culprit.
    pub fn abort(&self, i: usize, sess: &mut Session, e: Error) -> Error {
        match self.list.get(i) {
            Some(p) => p.open.abort(sess, e),
            None => abort_on(sess, 0, e),
        }
    }

    /// Each path's line rate in GB/s as the run's summary and charts take it: TCP paths (the speed rank 0's
    /// interface reports, else 0), RDMA paths (the port's rate, else 0), `mpi` when `--line-rate` names the
    /// network's. `--line-rate` (Gbit/s) overrides every measured speed.
    pub fn line_rates(&self, sess: &Session, given_gbit: Option<f64>) -> Vec<(String, f64)> {
        self.list
            .iter()
            .filter_map(|p| p.open.run_line_rate(sess, given_gbit).map(|r| (p.name.clone(), r)))
            .collect()
    }
}

/// `e` made known to every peer over the session's TCP transport `k`, where there is one.
pub fn abort_on(sess: &mut Session, k: usize, e: Error) -> Error {
    match sess.transports.get_mut(k) {
        Some(t) => t.abort(e),
        None => e,
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
            // Rank 0 may give up while this rank still exchanges set-up's last byte with another: set-up then
            // fails with rank 0's note, which must name rank 0 just the same.
            let e = e.unwrap_or_else(|set_up| set_up.to_string());
            assert!(
                e.contains("the window overflowed")
                    && e.contains("Culprit: rank 0")
                    && !e.contains(&format!("Culprit: rank {r}")),
                "rank {r}: {e}"
            );
        }
    }
}
