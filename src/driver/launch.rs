//! No launcher around: every check that can be made on this host before a rank starts, then `--np` local
//! ranks, the same for every command the driver runs.

use std::ffi::OsString;

use super::RankCommand;
use crate::error::{stderr, Result};
use crate::world::local;

/// Checks the host for `cmd`, then runs `--np` copies of this program as its ranks; returns the worst of
/// their exit statuses.
pub fn local(cmd: &mut dyn RankCommand, argv: &[OsString]) -> Result<i32> {
    let np = cmd.options().np;
    // Each path's own checks (an MPI launcher for mpi, the device and port of an rdma path) come first.
    crate::paths::check_local_launch(cmd.options())?;
    if let Some(avail) = crate::memory::available::available() {
        cmd.fit_host(np, &avail)?;
        cmd.check_memory(np, &avail)?;
    }
    let opts = cmd.options();
    if let Some(room) = crate::cgroup::limits::pids_room_here() {
        opts.check_tasks(np, true, &room)?;
    }
    cmd.outputs().check()?;
    cmd.check_size(np)?;
    if let Some(name) = &opts.tcp.iface {
        crate::net::iface::address_of(name)?;
    }
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if np > cpus {
        stderr!(
            "collbench: warning: {np} local ranks on {cpus} CPUs: ranks share cores, so times include scheduling \
             delays. Use --np {cpus} or fewer to measure the transport rather than the scheduler"
        );
    }
    let args = cmd.rank_args(argv.get(1..).unwrap_or_default());
    local::launch_processes(np, &args, opts.deadlines.bootstrap_timeout)
}
