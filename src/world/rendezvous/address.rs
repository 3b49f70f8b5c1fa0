//! The rendezvous's address: resolved with a deadline (the system resolver can block on a name that does not
//! exist yet), and bound by rank 0, which waits for a name still appearing and refuses an address not its own.

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use crate::error::{stderr, Error, Result};

/// Resolves `root` (`host:port`) to socket addresses; names may take a while to appear (Kubernetes DNS).
fn resolve(root: &str) -> std::io::Result<Vec<SocketAddr>> {
    std::net::ToSocketAddrs::to_socket_addrs(root).map(|a| a.collect())
}

/// [`resolve`], giving up at `deadline`: the system resolver can block for many seconds on a name that
/// does not exist yet (a pod or container still starting), which must not overrun `-T`.
pub(super) fn resolve_until(root: &str, deadline: Instant) -> std::io::Result<Vec<SocketAddr>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let name = root.to_string();
    // A lookup still blocked at the deadline finishes on its own later; its answer is simply dropped.
    std::thread::spawn(move || {
        let _ = tx.send(resolve(&name));
    });
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    rx.recv_timeout(left).unwrap_or_else(|_| {
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "name lookup did not finish before the deadline",
        ))
    })
}

/// Binds the rendezvous service on `root` for rank 0: the address must belong to this host. A name that
/// does not resolve yet (a headless Service's DNS record appears after the pod starts) is looked up again
/// until `deadline`, the bootstrap's, as the other ranks retry their connect; the first miss is said once
/// on stderr, so a user sees why rank 0 waits. An address that resolves but is not this host's fails at
/// once.
/// `source` names the variable(s) `root` came from ([`crate::world::env::root_source`]), for the error.
pub fn bind_root(root: &str, source: &str, deadline: Instant) -> Result<TcpListener> {
    let started = Instant::now();
    let mut said = false;
    loop {
        let (err, retry) = match resolve_until(root, deadline) {
            Ok(addrs) => match bind_any(&addrs) {
                Ok(l) => return Ok(l),
                Err(e) => (e, false),
            },
            Err(e) => (format!("cannot resolve it: {e}"), true),
        };
        if !retry || Instant::now() >= deadline {
            return Err(Error::usage(
                source,
                format!(
                    "rank 0 (host {}) serves the rendezvous but cannot listen on '{root}' after trying for {:.1} s \
                     ({err}); it must name an address of rank 0's own host and a free port (raise --bootstrap-timeout \
                     if its DNS record appears later)",
                    crate::net::hostname(),
                    started.elapsed().as_secs_f64()
                ),
            ));
        }
        if !said {
            said = true;
            stderr!(
                "collbench: rank 0 (host {}): the rendezvous address '{root}' is not usable yet ({err}); retrying \
                 until the bootstrap deadline",
                crate::net::hostname()
            );
        }
        // A DNS record or an address still appearing: look again shortly.
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Binds the first of `addrs` that this host can listen on; else the last failure.
fn bind_any(addrs: &[SocketAddr]) -> std::result::Result<TcpListener, String> {
    let mut last = "it resolves to no address".to_string();
    for a in addrs {
        match TcpListener::bind(a) {
            Ok(l) => return Ok(l),
            Err(e) => last = format!("{a}: {e}"),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_0_retries_a_rendezvous_name_until_the_deadline_and_then_names_it() {
        // .invalid never resolves (RFC 6761): the lookup is retried, then the error names the address.
        let root = "collbench-rendezvous.invalid:29500";
        let e = bind_root(
            root,
            crate::world::env::ROOT,
            Instant::now() + Duration::from_millis(300),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(root) && e.contains("after trying for") && e.contains("--bootstrap-timeout"),
            "{e}"
        );
        // An address that resolves but is not this host's fails without waiting for the deadline.
        let t = Instant::now() + Duration::from_secs(3600);
        let e = bind_root("192.0.2.1:29500", "MASTER_ADDR", t).unwrap_err().to_string();
        assert!(e.contains("192.0.2.1:29500") && e.contains("own host"), "{e}");
        assert!(e.starts_with("MASTER_ADDR:"), "the variable the address came from: {e}");
    }
}
