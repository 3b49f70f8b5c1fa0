//! Whether this rank lost every peer at once. After giving up, a rank tells every peer (its abort note) and
//! lingers to hear theirs. One that heard from none, while none of them acknowledged, even at the TCP level,
//! what it sent, cannot reach anyone: one peer may fail, but all of them at once points at this host's own
//! network (its link, a firewall, its routes). Such a rank names itself, as the ranks that can still reach
//! each other do; left to the usual rule it would blame whichever peer it waited on first.

use std::net::TcpStream;
use std::os::fd::AsRawFd;

use super::TcpTransport;

impl TcpTransport {
    /// Whether every peer (two at least: with one, either side could be the one cut off) is silent and
    /// has left bytes of this rank's unacknowledged on an open connection.
    pub(super) fn lost_every_peer(&self) -> bool {
        let mut peers = 0;
        for p in self.peers.iter().flatten() {
            peers += 1;
            let unacked = p.streams.iter().any(|s| !s.closed && unacked(&s.sock) > 0);
            if p.heard || !unacked {
                return false;
            }
        }
        peers >= 2
    }

    /// Turns this rank's own note into one that names this rank: it lost every peer at once.
    pub(super) fn blame_self_for_isolation(&mut self) {
        let peers = self.peers.iter().flatten().count();
        let linger = super::blame::LINGER.as_secs_f64();
        let rank = self.rank;
        self.suspect = None;
        if let Some(i) = self.notes.iter().position(|n| n.origin == rank) {
            self.note_wire.truncate(i);
            let n = &mut self.notes[i];
            n.culprit = None;
            n.text = format!(
                "{}; then it lost every peer at once: none of its {peers} peers answered its abort note or \
                 acknowledged a byte it sent within {linger:.1} s, so this host's own network (its link, a \
                 firewall, its routes) is the likely cause, not any one peer",
                n.text
            );
        }
    }
}

/// Bytes written to `sock` that the peer's kernel has not acknowledged, sent or not (0 when it cannot be read).
/// A packet filter that drops what this host sends keeps them unsent; one that drops what it receives keeps
/// them unacknowledged: either way they stay counted here.
fn unacked(sock: &TcpStream) -> u32 {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one int into `n`.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::TIOCOUTQ, &mut n as *mut libc::c_int) };
    if rc == 0 {
        n.max(0) as u32
    } else {
        0
    }
}
