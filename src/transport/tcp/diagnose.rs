//! Why a TCP wait timed out: the peer this rank was waiting on (the one with work pending that moved
//! nothing for longest), what was still pending with whom, and whether this host's own link is down.

use super::progress::Stream;
use super::stuck;
use super::{Peer, TcpTransport};
use crate::error::Error;

impl TcpTransport {
    /// The setting whose deadline a wait ran to, with its value, and the flag that raises it.
    fn deadline_setting(&self) -> (String, &'static str) {
        self.deadline_setting
            .clone()
            .unwrap_or_else(|| (format!("-T {:.1} s", self.cfg.timeout.as_secs_f64()), "-T/--timeout"))
    }

    /// The peer this rank is waiting on: of those with work pending, the one that moved nothing for longest;
    /// before them, one whose connection holds bytes of this rank's that timeouts in a row have not brought
    /// ([`stuck::lost_bytes`]), as that is where the job broke even when this rank's send to it completed
    /// and it went on to wait on another. One that gave up too is not skipped: its own note carries the blame on.
    pub(super) fn waiting_on(&self) -> Option<&Peer> {
        let peers = || self.peers.iter().flatten();
        let broken = |p: &&Peer| p.streams.iter().any(|s| !s.closed && stuck::lost_bytes(&s.sock));
        peers().filter(broken).min_by_key(|p| p.last_progress).or_else(|| {
            peers()
                .filter(|p| p.streams.iter().any(Stream::busy))
                .min_by_key(|p| p.last_progress)
        })
    }

    /// The error of a wait that reached its deadline, naming whom it waited on and why that may be; poisons
    /// the transport.
    pub(super) fn timeout_error(&mut self) -> Error {
        // The peer with work pending that moved nothing for longest is the one this rank was waiting on.
        let stuck = self.waiting_on();
        // This host's own link being down explains every silent peer at once: then this rank is the culprit.
        let own_link = std::fs::read_to_string(format!("/sys/class/net/{}/operstate", self.iface));
        if own_link.is_ok_and(|s| s.trim() == "down") {
            let msg = format!(
                "{}: timed out after {:.1} s with {} pending: this host's interface {} is down, so no peer can be \
                 reached; bring the link up (ip link set {} up) or check its cable and switch port",
                self.me(),
                self.cfg.timeout.as_secs_f64(),
                self.pending_list(None).join(", "),
                self.iface,
                self.iface
            );
            return self.poison(msg);
        }
        let (setting, raise) = self.deadline_setting();
        if let Some(p) = stuck {
            let silent = p.last_progress.elapsed().as_secs_f64();
            let (rank, host, addr) = (p.addr.rank, p.addr.host.clone(), p.addr.to_string());
            let theirs = self.pending_with(p);
            self.suspect = Some(rank);
            let others = self.pending_list(Some(rank));
            let msg = format!(
                "{}: {addr} is unresponsive: nothing moved to or from it for {silent:.1} s (timeout {setting}), \
                 with {} pending; it may be stopped, hung, overloaded or unreachable{}. If the network is merely \
                 slow, raise {raise}",
                self.me(),
                theirs,
                if others.is_empty() {
                    String::new()
                } else {
                    format!(" (also pending: {})", others.join(", "))
                }
            );
            return self.poison(msg).with_peer(rank, host).waiting_for(theirs);
        }
        let pending = self.pending_list(None);
        let msg = format!(
            "{}: timed out after {:.1} s with no completion; still pending: {}. The peer may have died, \
             stopped or be unreachable; if the network is just slow, raise {raise} ({setting})",
            self.me(),
            self.cfg.timeout.as_secs_f64(),
            if pending.is_empty() {
                "nothing".to_string()
            } else {
                pending.join(", ")
            }
        );
        self.poison(msg)
    }

    /// What is pending with `p`: its entries of [`Self::pending_list`], or, where none, the bytes already sent
    /// to it that its kernel never acknowledged.
    pub(super) fn pending_with(&self, p: &Peer) -> String {
        let addr = p.addr.to_string();
        let theirs = self
            .pending_list(None)
            .into_iter()
            .filter(|x| x.contains(&addr))
            .collect::<Vec<_>>()
            .join(", ");
        if theirs.is_empty() {
            format!(
                "the acknowledgement of bytes already written to {addr} ({} or more timeouts in a row without \
                 one)",
                stuck::SOME_BACKOFFS
            )
        } else {
            theirs
        }
    }

    /// "N receive(s) from PEER" and "N send(s) to PEER" for each peer with work pending, but `skip`.
    pub(super) fn pending_list(&self, skip: Option<usize>) -> Vec<String> {
        let mut pending = Vec::new();
        for p in self.peers.iter().flatten().filter(|p| Some(p.addr.rank) != skip) {
            let sends: usize = p.streams.iter().map(|s| s.sendq.len()).sum();
            let recvs: usize = p.streams.iter().map(|s| s.recvq.len()).sum();
            if recvs > 0 {
                pending.push(format!("{recvs} receive(s) from {}", p.addr));
            }
            if sends > 0 {
                pending.push(format!("{sends} send(s) to {}", p.addr));
            }
        }
        pending
    }
}
