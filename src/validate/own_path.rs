//! The start-up `pairwise` and `p2p` share: both measure one path over one of collbench's own transports
//! (tcp, tcp@SPEC, rdma@DEVICE), so their options, local launch, rank start and measurement on the path's
//! transport are the same steps.

use std::ffi::OsString;

use crate::cli::DeadlineArgs;
use crate::error::{Error, Result};
use crate::options::{Deadlines, Options, PathKind, PathOptions, TcpOptions};
use crate::session::Pairs;
use crate::start::{Rank, Start};
use crate::transport::Transport;
use crate::world::{local, Identity};

/// What the flags of a test over one own path give: `--np`, `--transport`, `--iface` and the deadlines.
pub struct PathFlags<'a> {
    /// The subcommand, for its messages (`pairwise`).
    pub command: &'a str,
    pub np: usize,
    pub transport: &'a str,
    pub iface: Option<&'a str>,
    pub deadlines: &'a DeadlineArgs,
}

/// The session options the flags ask for: one path, which must be collbench's own transport; errors name the
/// flag.
pub fn options(f: &PathFlags<'_>) -> Result<Options> {
    let np = crate::options::np(f.np)?;
    let path: PathKind = f.transport.parse().map_err(|e| Error::usage("--transport", e))?;
    if !path.traits().own_transport {
        return Err(Error::usage(
            "--transport",
            format!(
                "{} measures collbench's own transports: give tcp, tcp@SPEC or rdma@DEVICE[:PORT], not {path}",
                f.command
            ),
        ));
    }
    Ok(Options {
        np,
        paths: PathOptions {
            transports: vec![path],
            ..PathOptions::default()
        },
        tcp: TcpOptions {
            iface: crate::transport::tcp::options::iface_spec(f.iface)?,
            ..TcpOptions::default()
        },
        deadlines: Deadlines::from_cli(f.deadlines)?,
        ..Options::default()
    })
}

/// No launcher: the outputs and the path checked as `run` checks them, then `--np` local ranks.
pub fn launch(opts: &Options, check_outputs: &dyn Fn() -> Result<()>, argv: &[OsString]) -> Result<i32> {
    check_outputs()?;
    crate::paths::check_local_launch(opts)?;
    local::launch_processes(opts.np, &argv[1..], opts.deadlines.bootstrap_timeout)
}

/// One rank started and connected to every other, every rank running the same `command` with the same
/// `cfg` (compared at the rendezvous); the buffers are small, so there is no memory check.
pub fn start_rank(
    opts: &Options,
    command: &str,
    cfg: &impl serde::Serialize,
    id: &Identity,
    check_outputs: &dyn Fn() -> Result<()>,
) -> Result<Rank> {
    Start {
        opts,
        agreement: opts.agreement().to_wire_with(command, cfg),
        pairs: Pairs::All,
        check_outputs,
        check_memory: &|_, _| Ok(()),
    }
    .rank(id)
}

/// `measure` on the path's transport (a TCP path's, or an rdma@ path's set up over the control path); a
/// failure is made known to every peer, so all name the same culprit, `during` saying what was running.
pub fn measure<T>(rank: &mut Rank, during: &str, measure: impl FnOnce(&mut dyn Transport) -> Result<T>) -> Result<T> {
    let Rank { sess, paths } = rank;
    let done = paths.on_transport(0, sess, measure).unwrap_or_else(|| {
        Err(Error::usage(
            "--transport",
            "this path has no transport of collbench's to measure",
        ))
    });
    done.map_err(|e| paths.abort(0, sess, e.during(during)))
}
