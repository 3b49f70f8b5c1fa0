//! Whether a connection is broken below the application: bytes this rank wrote sit unacknowledged through
//! repeated retransmission timeouts. A send that completed into the kernel lets a rank move on and wait on
//! another peer, so the peer it waits on is not always where the job stopped: in an all-to-all over a cut
//! link, each end's waits lead round the other ranks, and only the kernel still knows which connection lost
//! its bytes.

use std::net::TcpStream;
use std::os::fd::AsRawFd;

/// Consecutive retransmission timeouts, unanswered, that mark a connection broken by themselves: 0.2 + 0.4 +
/// 0.8 s of nothing acknowledged at the least retransmission timeout. A lossy but working path rarely loses
/// three retransmissions of the same bytes in a row; a cut link always does.
pub const TIMEOUTS: u8 = 3;

/// Fewer timeouts in a row (at least [`SOME_TIMEOUTS`]) mark it broken once nothing was acknowledged for this
/// long: a retransmission timeout grown on a slow or loaded path (a second, say) doubles to 1 + 2 + 4 s before
/// the third, later than the peers' `-T` of 5 s.
const SILENT_MS: u32 = 2000;

/// Timeouts in a row that, with [`SILENT_MS`] of silence, mark a connection broken.
pub const SOME_TIMEOUTS: u8 = 2;

/// Whether `sock` has bytes waiting for an acknowledgement that retransmissions have not brought (false where
/// TCP_INFO cannot be read).
pub fn retransmitting(sock: &TcpStream) -> bool {
    info(sock).is_some_and(|i| broken(&i))
}

/// Whether a connection whose TCP_INFO is `i` lost its bytes: some unacknowledged, and [`TIMEOUTS`]
/// retransmission timeouts in a row, or [`SOME_TIMEOUTS`] with no acknowledgement for [`SILENT_MS`].
fn broken(i: &libc::tcp_info) -> bool {
    i.tcpi_unacked > 0
        && (i.tcpi_retransmits >= TIMEOUTS
            || (i.tcpi_retransmits >= SOME_TIMEOUTS && i.tcpi_last_ack_recv >= SILENT_MS))
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
    fn a_working_connection_is_not_retransmitting_and_its_info_is_read() {
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
        assert!(!retransmitting(&a));
    }

    /// TCP_INFO with `unacked` segments out, `timeouts` retransmission timeouts in a row and the last
    /// acknowledgement `silent_ms` ago.
    fn info_of(unacked: u32, timeouts: u8, silent_ms: u32) -> libc::tcp_info {
        // SAFETY: tcp_info is plain integers, for which all zeroes is a valid value.
        let mut i: libc::tcp_info = unsafe { std::mem::zeroed() };
        i.tcpi_unacked = unacked;
        i.tcpi_retransmits = timeouts;
        i.tcpi_last_ack_recv = silent_ms;
        i
    }

    #[test]
    fn three_timeouts_or_two_and_seconds_of_silence_mark_lost_bytes() {
        assert!(
            broken(&info_of(1, 3, 0)),
            "three in a row, however recent the last acknowledgement"
        );
        // A timeout grown to a second on a loaded path: two in a row by 3 s, the third only at 7 s.
        assert!(broken(&info_of(1, 2, 3000)));
        assert!(
            !broken(&info_of(1, 2, 500)),
            "an acknowledgement came lately: the path works"
        );
        assert!(
            !broken(&info_of(1, 1, 5000)),
            "one timeout after an idle spell is a single loss"
        );
        assert!(!broken(&info_of(0, 5, 5000)), "nothing unacknowledged: nothing lost");
    }
}
