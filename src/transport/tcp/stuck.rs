//! Whether a connection is broken below the application: bytes this rank wrote sit unacknowledged through
//! repeated timeouts (of retransmissions, or of the probes of bytes that never left the host). A send that completed into the kernel lets a rank move on and wait on
//! another peer, so the peer it waits on is not always where the job stopped: in an all-to-all over a cut
//! link, each end's waits lead round the other ranks, and only the kernel still knows which connection lost
//! its bytes.

use std::net::TcpStream;
use std::os::fd::AsRawFd;

/// Consecutive retransmission timeouts, unanswered, that mark a connection broken by themselves: 0.2 + 0.4 +
/// 0.8 s of nothing acknowledged at the least retransmission timeout. A lossy but working path rarely loses
/// three retransmissions of the same bytes in a row; a cut link always does.
pub const TIMEOUTS: u8 = 3;

/// Fewer timer backoffs in a row (at least [`SOME_BACKOFFS`]) mark it broken once nothing was acknowledged for
/// this long. A retransmission timeout grown on a slow or loaded path (a second, say) doubles to 1 + 2 + 4 s
/// before the third, later than the peers' `-T` of 5 s; and bytes a firewall drops on their way out of this
/// host never count as sent, so the kernel only backs off its probes and retransmits nothing.
const SILENT_MS: u32 = 2000;

/// Timer backoffs in a row that, with [`SILENT_MS`] of silence, mark a connection broken.
pub const SOME_BACKOFFS: u8 = 2;

/// Whether `sock` holds bytes this rank wrote that the peer's kernel has not acknowledged, through timeouts
/// that brought nothing back (false where TCP_INFO cannot be read).
pub fn lost_bytes(sock: &TcpStream) -> bool {
    info(sock).is_some_and(|i| broken(&i, queued(sock)))
}

/// Whether a connection whose TCP_INFO is `i`, with `queued` bytes written and not yet acknowledged, lost
/// them: [`TIMEOUTS`] retransmission timeouts in a row, or [`SOME_BACKOFFS`] backoffs (of retransmissions or
/// of probes) with no acknowledgement for [`SILENT_MS`]. A peer that stopped reading still acknowledges the
/// probes of its full window, so its silence stays short.
fn broken(i: &libc::tcp_info, queued: u32) -> bool {
    let retransmitted = i.tcpi_unacked > 0 && i.tcpi_retransmits >= TIMEOUTS;
    let silent = queued > 0 && i.tcpi_backoff >= SOME_BACKOFFS && i.tcpi_last_ack_recv >= SILENT_MS;
    retransmitted || silent
}

/// Bytes written to `sock` that its peer has not acknowledged, sent or not (SIOCOUTQ); 0 where unreadable.
fn queued(sock: &TcpStream) -> u32 {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ on a socket) writes one int through the pointer, which points at one.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    if rc == 0 {
        n.max(0) as u32
    } else {
        0
    }
}

/// The connection's TCP_INFO.
fn info(sock: &TcpStream) -> Option<libc::tcp_info> {
    // SAFETY: tcp_info is plain integers, for which all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`, which is that large, and sets `len`.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    #[test]
    fn a_working_connection_lost_nothing_and_its_info_is_read() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut b, _) = l.accept().unwrap();
        a.write_all(&[7u8; 4096]).unwrap();
        let mut got = [0u8; 4096];
        b.read_exact(&mut got).unwrap();
        let i = info(&a).expect("TCP_INFO of a connected socket");
        // The kernel saw the bytes out: the info is this connection's, not zeroes.
        assert!(i.tcpi_segs_out > 0, "segments out {}", i.tcpi_segs_out);
        assert_eq!(i.tcpi_retransmits, 0);
        assert!(!lost_bytes(&a));
    }

    /// TCP_INFO with `unacked` segments out, `timeouts` retransmission timeouts and `backoff` timer backoffs in
    /// a row, and the last acknowledgement `silent_ms` ago.
    fn info_of(unacked: u32, timeouts: u8, backoff: u8, silent_ms: u32) -> libc::tcp_info {
        // SAFETY: tcp_info is plain integers, for which all zeroes is a valid value.
        let mut i: libc::tcp_info = unsafe { std::mem::zeroed() };
        i.tcpi_unacked = unacked;
        i.tcpi_retransmits = timeouts;
        i.tcpi_backoff = backoff;
        i.tcpi_last_ack_recv = silent_ms;
        i
    }

    #[test]
    fn timeouts_in_a_row_or_backoffs_and_seconds_of_silence_mark_lost_bytes() {
        assert!(
            broken(&info_of(1, 3, 3, 0), 1),
            "three in a row, however recent the last acknowledgement"
        );
        // A timeout grown to a second on a loaded path: two in a row by 3 s, the third only at 7 s.
        assert!(broken(&info_of(1, 2, 2, 3000), 1448));
        // Dropped on the way out (a firewall on this host): nothing counts as sent or retransmitted, the probe
        // timer backs off (as measured on a namespace host: backoff 3-4, lastack 2-7 s, no unacked).
        assert!(broken(&info_of(0, 0, 4, 5000), 512));
        assert!(
            !broken(&info_of(1, 2, 2, 500), 1448),
            "an acknowledgement came lately: the path works"
        );
        assert!(
            !broken(&info_of(1, 1, 1, 5000), 1448),
            "one timeout after an idle spell is a single loss"
        );
        assert!(!broken(&info_of(0, 0, 0, 60_000), 0), "an idle connection lost nothing");
    }

    #[test]
    fn bytes_the_peer_has_no_room_for_are_queued() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_b, _) = l.accept().unwrap();
        assert_eq!(queued(&a), 0, "nothing written");
        // The peer never reads: once its receive buffer is full, what this end writes stays in its own queue.
        a.set_nonblocking(true).unwrap();
        let chunk = [7u8; 65536];
        let mut written = 0usize;
        loop {
            match a.write(&chunk) {
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("write: {e}"),
            }
        }
        let q = queued(&a) as usize;
        assert!(q > 0 && q <= written, "{q} queued of {written} written");
    }
}
