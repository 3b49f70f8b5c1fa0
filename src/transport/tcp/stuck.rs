//! Whether a connection is broken below the application: bytes this rank wrote sit unacknowledged through
//! repeated retransmission timeouts. A send that completed into the kernel lets a rank move on and wait on
//! another peer, so the peer it waits on is not always where the job stopped: in an all-to-all over a cut
//! link, each end's waits lead round the other ranks, and only the kernel still knows which connection lost
//! its bytes.

use std::net::TcpStream;
use std::os::fd::AsRawFd;

/// Consecutive retransmission timeouts, unanswered, that mark a connection broken: 0.2 + 0.4 + 0.8 s of
/// nothing acknowledged at the least retransmission timeout. A lossy but working path rarely loses three
/// retransmissions of the same bytes in a row; a cut link always does, well within any `-T`.
pub const TIMEOUTS: u8 = 3;

/// Whether `sock` has bytes waiting for an acknowledgement that [`TIMEOUTS`] retransmissions in a row have
/// not brought (false where TCP_INFO cannot be read).
pub fn retransmitting(sock: &TcpStream) -> bool {
    info(sock).is_some_and(|i| i.tcpi_retransmits >= TIMEOUTS && i.tcpi_unacked > 0)
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
}
