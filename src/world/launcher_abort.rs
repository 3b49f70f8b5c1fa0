//! Outliving a launcher's abort long enough to name the culprit. When one rank dies, OpenMPI's mpirun
//! sends every other rank SIGTERM at once and SIGKILL `odls_base_sigkill_timeout` seconds later (1 by
//! default; launch/mpirun-openmpi.sh sets 5). The survivors need about a second to agree on the culprit
//! and print it (the TCP transport's abort lingers for the peers' notes), so under mpirun a rank ignores
//! SIGTERM and is ended by the SIGKILL, after it said what happened or when the grace runs out.

/// The variable OpenMPI's mpirun sets in every rank it starts.
const OPENMPI_RANK: &str = "OMPI_COMM_WORLD_RANK";

/// Under OpenMPI's mpirun (as `get` reads the environment), ignores SIGTERM for the rest of the process,
/// so a peer's death does not end this rank before it reports the culprit; elsewhere does nothing.
/// Returns whether SIGTERM is now ignored.
pub fn outlive_launcher_abort(get: impl Fn(&str) -> Option<String>) -> bool {
    if get(OPENMPI_RANK).is_none() {
        return false;
    }
    // SAFETY: SIG_IGN installs no handler code; it only sets this process's disposition for SIGTERM.
    let previous = unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    previous != libc::SIG_ERR
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_openmpis_mpirun_sigterm_keeps_its_disposition() {
        assert!(!outlive_launcher_abort(|_| None));
        // SAFETY: an all-zero sigaction is a valid value of the C struct.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only reads the disposition into `old`, which is writable.
        unsafe { libc::sigaction(libc::SIGTERM, std::ptr::null(), &mut old) };
        assert_ne!(old.sa_sigaction, libc::SIG_IGN);
    }
}
