//! A rendezvous that stopped answering, as a joining rank sees it: the kernel still accepts connections to a
//! stopped or hung process, so a rank waits out its deadline with nothing said. Once it has, it tells a
//! silent service (no answer to a new hello either) from one still waiting for other ranks, and names the
//! silent one (its address, rank 0, its host) with what to do.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::rendezvous::wire::{CHALLENGE_LEN, MAGIC, VERSION_BYTES};
use crate::error::{Culprit, Error, PeerFailure};

/// How long a probe waits for a fresh hello to be answered: a running service answers at once (its gate reads
/// openings without blocking), so a second of silence is a stopped or hung one.
pub(super) const PROBE_WAIT: Duration = Duration::from_secs(1);

/// The host part of a rendezvous address (`h:29500`, `[::1]:29500`).
pub(super) fn host_of(root: &str) -> &str {
    let host = root.rsplit_once(':').map_or(root, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Who serves the rendezvous at `root`, as the joining ranks name it.
pub(super) fn server(root: &str) -> String {
    format!("rank 0 (host {})", host_of(root))
}

/// What a rank that got no answer learns by asking the service again on a new connection.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Probe {
    /// It answered the new hello: it runs, and is waiting for other ranks.
    Answers,
    /// It took the connection and the hello but answered nothing within [`PROBE_WAIT`].
    Silent,
    /// Nothing listens there any more (refused, reset, closed): it exited.
    Gone,
}

/// Sends a fresh hello to the rendezvous at `root` and waits up to [`PROBE_WAIT`] for its first byte. The
/// service drops the connection once it sees no proof follow, as it drops any stranger's.
pub(super) fn probe(root: &str) -> Probe {
    let Ok(addrs) = std::net::ToSocketAddrs::to_socket_addrs(root) else {
        return Probe::Gone;
    };
    let Some(mut sock) = addrs
        .into_iter()
        .find_map(|a| TcpStream::connect_timeout(&a, PROBE_WAIT).ok())
    else {
        return Probe::Gone;
    };
    let mut hello = Vec::with_capacity(MAGIC.len() + 2 + 16);
    hello.extend_from_slice(&MAGIC);
    hello.extend_from_slice(&VERSION_BYTES);
    hello.extend_from_slice(&crate::transport::auth::nonce());
    if sock.write_all(&hello).is_err() || sock.set_read_timeout(Some(PROBE_WAIT)).is_err() {
        return Probe::Gone;
    }
    let mut answer = [0u8; CHALLENGE_LEN];
    match sock.read(&mut answer) {
        Ok(0) => Probe::Gone,
        Ok(_) => Probe::Answers,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => Probe::Silent,
        Err(_) => Probe::Gone,
    }
}

/// The failure of rank `who`, whose rendezvous at `root` took its connection and then sent no `what` (its
/// challenge, its verdict) for `waited`: the process serving it is not running. Blames it, as `server`.
pub(super) fn stalled(who: &str, root: &str, what: &str, waited: Duration) -> Error {
    let server = server(root);
    Error::Peer(Box::new(PeerFailure {
        phase: Some("the bootstrap".into()),
        culprit: Some(Culprit::RendezvousAt {
            root: root.to_string(),
            server: server.clone(),
        }),
        operation: Some(format!("the rendezvous's {what}")),
        message: format!(
            "{who}: the rendezvous at {root} took this rank's connection but sent no {what} in {:.1} s, and did not \
             answer a new connection within {:.0} s either: the process serving it ({server}) is stopped, hung or \
             starved of CPU. Look at that process: resume it if it was stopped (kill -CONT, or leave the debugger), \
             else end the job and start it again; raise --bootstrap-timeout only if it is merely slow to start",
            waited.as_secs_f64(),
            PROBE_WAIT.as_secs_f64()
        ),
        ..PeerFailure::default()
    }))
}

/// Whether a read error means the wait ran out (rather than the connection failing).
pub(super) fn timed_out(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
}

/// When a wait that began at `since` on the rendezvous at `root` ran out: the stall error if the service is
/// silent to a new hello too, else `None` (it runs, or it exited: the caller says so).
pub(super) fn blame_if_silent(who: &str, root: &str, what: &str, since: Instant) -> Option<Error> {
    let waited = since.elapsed();
    (probe(root) == Probe::Silent).then(|| stalled(who, root, what, waited))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_an_address_is_named_without_its_port_or_brackets() {
        assert_eq!(host_of("node1:29500"), "node1");
        assert_eq!(host_of("[::1]:29500"), "::1");
        assert_eq!(host_of("127.0.0.1:1"), "127.0.0.1");
    }

    #[test]
    fn a_listener_that_never_answers_is_silent_and_a_closed_port_is_gone() {
        // The kernel takes the connection into the listener's backlog; nothing ever reads it, as with a stopped
        // process.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        assert_eq!(probe(&root), Probe::Silent);
        drop(l);
        assert_eq!(probe(&root), Probe::Gone);
        let e = stalled("rank 1 (host h)", &root, "challenge", Duration::from_secs(3)).to_string();
        assert!(
            e.ends_with(&format!(
                "Culprit: the rendezvous at {root}, served by rank 0 (host 127.0.0.1)"
            )),
            "{e}"
        );
    }
}
