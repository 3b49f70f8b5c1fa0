//! One stream's queues and the non-blocking I/O that moves them, plus the control bytes of an abort:
//! abort frames read from the peer, and padding plus abort frames written to it.

use std::collections::VecDeque;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;

use super::handshake::{FrameHeader, FRAME_HEADER_LEN};
use crate::transport::requests::Requests;

/// Header before every message part: payload length and sequence number.
pub const HEADER_LEN: usize = FRAME_HEADER_LEN;
/// A header whose length field is this announces an abort frame; its second field is the body length.
/// Data parts are shorter than this (the transport refuses longer messages).
pub const ABORT_MARK: u32 = u32::MAX;
/// Longest abort body accepted; anything longer is not an abort from a collbench rank.
pub const MAX_ABORT_BODY: usize = 64 << 10;
/// Most 16 KiB chunks of control bytes one call reads (1 MiB); the rest wait for the next.
const CONTROL_CHUNKS: usize = 64;

/// One queued message part.
pub struct Op {
    pub slot: usize,
    ptr: *mut u8,
    len: usize,
    /// Bytes of header + payload moved so far.
    done: usize,
    /// Expected sequence number (receives compare the header against it).
    seq: u32,
    hdr: [u8; HEADER_LEN],
}

impl Op {
    /// A part of `len` bytes at `ptr`, sequence number `seq` on its stream.
    pub fn new(slot: usize, ptr: *mut u8, len: usize, seq: u32) -> Self {
        let hdr = FrameHeader { len: len as u32, seq }.encode();
        Op {
            slot,
            ptr,
            len,
            done: 0,
            seq,
            hdr,
        }
    }

    fn total(&self) -> usize {
        HEADER_LEN + self.len
    }

    /// The not-yet-moved bytes as at most two iovecs (rest of header, rest of payload).
    fn iovecs(&mut self) -> ([libc::iovec; 2], usize) {
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        let mut v = [empty, empty];
        let mut n = 0;
        if self.done < HEADER_LEN {
            v[0] = libc::iovec {
                iov_base: self.hdr[self.done..].as_mut_ptr().cast(),
                iov_len: HEADER_LEN - self.done,
            };
            n = 1;
        }
        let pdone = self.done.saturating_sub(HEADER_LEN);
        if pdone < self.len {
            v[n] = libc::iovec {
                // SAFETY: pdone < len, inside the posted region.
                iov_base: unsafe { self.ptr.add(pdone) }.cast(),
                iov_len: self.len - pdone,
            };
            n += 1;
        }
        (v, n)
    }
}

/// Incoming bytes read as frames once data is no longer expected: after the peer sent an abort frame, or
/// after this rank gave up. Data parts are skipped, abort frames kept.
#[derive(Default)]
pub struct Control {
    /// Bytes read but not yet parsed.
    buf: Vec<u8>,
    /// Payload bytes of a data part still to be skipped.
    skip: usize,
    /// Abort bodies parsed and not yet taken.
    pub bodies: Vec<Vec<u8>>,
}

impl Control {
    /// Parses what `buf` holds; returns false on bytes that are no collbench frame (the stream is then dropped).
    fn parse(&mut self) -> bool {
        let mut at = 0;
        loop {
            if self.skip > 0 {
                let k = self.skip.min(self.buf.len() - at);
                self.skip -= k;
                at += k;
                if self.skip > 0 {
                    break;
                }
            }
            let rest = &self.buf[at..];
            if rest.len() < HEADER_LEN {
                break;
            }
            let first = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
            let second = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
            if first == ABORT_MARK {
                if second > MAX_ABORT_BODY {
                    self.buf.clear();
                    return false;
                }
                if rest.len() < HEADER_LEN + second {
                    break;
                }
                self.bodies.push(rest[HEADER_LEN..HEADER_LEN + second].to_vec());
                at += HEADER_LEN + second;
            } else {
                self.skip = first as usize;
                at += HEADER_LEN;
            }
        }
        self.buf.drain(..at);
        true
    }

    /// What a close now would cut short (`an abort frame (100 of its 60016 bytes)`); `None` between frames.
    fn cut_short(&self) -> Option<String> {
        if self.skip > 0 {
            return Some(format!("a data part ({} of its bytes still to come)", self.skip));
        }
        if self.buf.is_empty() {
            return None;
        }
        let whole = (self.buf.len() >= HEADER_LEN && self.buf[..4] == ABORT_MARK.to_le_bytes())
            .then(|| HEADER_LEN + u32::from_le_bytes([self.buf[4], self.buf[5], self.buf[6], self.buf[7]]) as usize);
        Some(match whole {
            Some(n) => format!("an abort frame ({} of its {n} bytes)", self.buf.len()),
            None => format!("a frame header ({} of its {HEADER_LEN} bytes)", self.buf.len()),
        })
    }
}

/// What goes out on a stream after this rank gave up: the rest of a part cut short (its remaining header
/// bytes, then zeros for its payload, whose memory is no longer ours), then abort frames.
#[derive(Default)]
pub struct Outbox {
    head: Vec<u8>,
    zeros: usize,
    frames: Vec<u8>,
    sent: usize,
    /// The socket refused the bytes for good (the peer is gone).
    failed: bool,
}

impl Outbox {
    /// Appends one abort frame with `body`.
    pub fn push_frame(&mut self, body: &[u8]) {
        self.frames.extend_from_slice(&ABORT_MARK.to_le_bytes());
        self.frames.extend_from_slice(&(body.len() as u32).to_le_bytes());
        self.frames.extend_from_slice(&[0; HEADER_LEN - 8]);
        self.frames.extend_from_slice(body);
    }

    /// Whether everything queued has been written (or can never be).
    pub fn drained(&self) -> bool {
        self.failed || (self.head.is_empty() && self.zeros == 0 && self.sent == self.frames.len())
    }
}

/// One TCP connection to a peer with its send and receive queues.
pub struct Stream {
    pub sock: TcpStream,
    pub sendq: VecDeque<Op>,
    pub recvq: VecDeque<Op>,
    pub send_seq: u32,
    pub recv_seq: u32,
    /// The next incoming bytes are a data part no receive is posted for yet: not watched until one is.
    pub data_ahead: bool,
    /// The peer closed the connection (or reset it) while no receive was posted.
    pub closed: bool,
    /// Set once data is no longer expected on this stream.
    pub control: Option<Control>,
    /// The peer closed the connection in the middle of a frame read as control bytes: said once, by the next
    /// [`Stream::drive`].
    torn: Option<String>,
    /// Set once this rank gave up.
    pub out: Option<Outbox>,
}

impl Stream {
    /// Wraps a connected, handshaken socket.
    pub fn new(sock: TcpStream) -> Self {
        Stream {
            sock,
            sendq: VecDeque::new(),
            recvq: VecDeque::new(),
            send_seq: 0,
            recv_seq: 0,
            data_ahead: false,
            closed: false,
            control: None,
            torn: None,
            out: None,
        }
    }

    /// Whether any operation is queued.
    pub fn busy(&self) -> bool {
        !self.sendq.is_empty() || !self.recvq.is_empty()
    }

    /// Whether nothing is posted and the peer may still send: an abort frame may arrive here.
    pub fn idle_watch(&self) -> bool {
        self.recvq.is_empty() && !self.data_ahead && !self.closed
    }

    /// Moves as many bytes as the socket takes without blocking, completing parts in `requests`; returns
    /// whether a part moved. Control bytes are never progress: they complete no part, so a wait that only reads
    /// them still reaches its deadline, however fast or slowly they come.
    pub fn drive(&mut self, requests: &mut Requests) -> Result<bool, String> {
        if self.control.is_some() {
            self.read_control();
            return self.torn.take().map_or(Ok(false), Err);
        }
        let mut moved = false;
        let fd = self.sock.as_raw_fd();
        while let Some(op) = self.sendq.front_mut() {
            let (mut iov, n) = op.iovecs();
            match xfer(fd, &mut iov[..n], true) {
                Ok(Some(k)) => {
                    moved = true;
                    op.done += k;
                    if op.done == op.total() {
                        requests.part_done(op.slot);
                        self.sendq.pop_front();
                    }
                }
                Ok(None) => break,
                Err(e) => return Err(format!("send failed: {e}")),
            }
        }
        while let Some(op) = self.recvq.front_mut() {
            let before = op.done;
            let (mut iov, n) = op.iovecs();
            match xfer(fd, &mut iov[..n], false) {
                Ok(Some(0)) => {
                    return Err("connection closed by the peer in the middle of a receive (did it exit?)".into())
                }
                Ok(Some(k)) => {
                    moved = true;
                    op.done += k;
                    if before < HEADER_LEN && op.done >= HEADER_LEN {
                        if is_abort(&op.hdr) {
                            // The peer gave up: what followed the header landed in our buffer; keep it as
                            // control bytes and read the rest of its frames from the socket.
                            let mut buf = op.hdr.to_vec();
                            // SAFETY: op.done - HEADER_LEN payload bytes were just written at op.ptr.
                            buf.extend_from_slice(unsafe { std::slice::from_raw_parts(op.ptr, op.done - HEADER_LEN) });
                            self.control = Some(Control {
                                buf,
                                ..Control::default()
                            });
                            self.read_control();
                            return self.torn.take().map_or(Ok(true), Err);
                        }
                        check_header(op)?;
                        self.data_ahead = false;
                    }
                    if op.done == op.total() {
                        requests.part_done(op.slot);
                        self.recvq.pop_front();
                    }
                }
                Ok(None) => break,
                Err(e) => return Err(format!("receive failed: {e}")),
            }
        }
        Ok(moved)
    }

    /// Looks at the next incoming bytes of a stream with nothing posted (poll said it is readable): an abort
    /// frame switches it to control, a data part is left for the receive that will be posted, a close is noted.
    pub fn peek(&mut self) {
        let mut b = [0u8; 4];
        // SAFETY: b is writable for its length.
        let rc = unsafe {
            libc::recv(
                self.sock.as_raw_fd(),
                b.as_mut_ptr().cast(),
                b.len(),
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        if rc == 0 {
            self.closed = true;
        } else if rc < 0 {
            let e = io::Error::last_os_error();
            if !matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) {
                self.closed = true;
            }
        } else if rc == 4 && u32::from_le_bytes(b) == ABORT_MARK {
            self.control = Some(Control::default());
            self.read_control();
        } else {
            // A data part (or too few bytes to tell): the receive posted for it will read it.
            self.data_ahead = true;
        }
    }

    /// Switches to control once this rank gave up: a part cut short is skipped (or its header completed).
    pub fn switch_to_control(&mut self) {
        if self.control.is_some() {
            return;
        }
        let mut c = Control::default();
        if let Some(op) = self.recvq.front() {
            if op.done < HEADER_LEN {
                c.buf.extend_from_slice(&op.hdr[..op.done]);
            } else {
                c.skip = op.total() - op.done;
            }
        }
        self.control = Some(c);
    }

    /// Prepares the outbox once this rank gave up: a part cut short is completed with its header and zeros.
    pub fn open_outbox(&mut self) {
        if self.out.is_some() {
            return;
        }
        let mut o = Outbox::default();
        if let Some(op) = self.sendq.front() {
            if op.done > 0 {
                if op.done < HEADER_LEN {
                    o.head.extend_from_slice(&op.hdr[op.done..]);
                }
                o.zeros = op.total() - op.done.max(HEADER_LEN);
            }
        }
        self.out = Some(o);
    }

    /// Writes queued outbox bytes without blocking; returns whether the outbox is drained.
    pub fn push_out(&mut self) -> bool {
        const ZEROS: [u8; 4096] = [0; 4096];
        let fd = self.sock.as_raw_fd();
        let Some(o) = self.out.as_mut() else { return true };
        while !o.drained() {
            let chunk: &[u8] = if !o.head.is_empty() {
                &o.head
            } else if o.zeros > 0 {
                &ZEROS[..o.zeros.min(ZEROS.len())]
            } else {
                &o.frames[o.sent..]
            };
            let mut iov = [libc::iovec {
                iov_base: chunk.as_ptr() as *mut _,
                iov_len: chunk.len(),
            }];
            match xfer(fd, &mut iov, true) {
                Ok(Some(k)) => {
                    if !o.head.is_empty() {
                        o.head.drain(..k);
                    } else if o.zeros > 0 {
                        o.zeros -= k;
                    } else {
                        o.sent += k;
                    }
                }
                Ok(None) => return false,
                Err(_) => o.failed = true,
            }
        }
        true
    }

    /// Reads control bytes until the socket would block, or [`CONTROL_CHUNKS`] chunks came (a peer that never
    /// stops sending must not keep the caller from its deadline). A peer that closes the connection in the
    /// middle of a frame leaves the reason in `torn`.
    fn read_control(&mut self) {
        let fd = self.sock.as_raw_fd();
        let Some(c) = self.control.as_mut() else { return };
        let mut chunk = [0u8; 16 << 10];
        for _ in 0..CONTROL_CHUNKS {
            if !c.parse() {
                self.closed = true;
                return;
            }
            if self.closed {
                return;
            }
            let mut iov = [libc::iovec {
                iov_base: chunk.as_mut_ptr().cast(),
                iov_len: chunk.len(),
            }];
            match xfer(fd, &mut iov, false) {
                Ok(Some(0)) | Err(_) => {
                    self.closed = true;
                    self.torn = c
                        .cut_short()
                        .map(|what| format!("connection closed by the peer in the middle of {what}"));
                }
                Ok(Some(k)) => c.buf.extend_from_slice(&chunk[..k]),
                Ok(None) => return,
            }
        }
    }
}

fn is_abort(hdr: &[u8; HEADER_LEN]) -> bool {
    u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]) == ABORT_MARK
}

/// The header a receive got must announce the length and sequence number the receiver expects.
fn check_header(op: &Op) -> Result<(), String> {
    let expected = FrameHeader {
        len: op.len as u32,
        seq: op.seq,
    };
    FrameHeader::check(&op.hdr, expected)
}

/// One non-blocking sendmsg/recvmsg; `Ok(None)` when the socket would block.
fn xfer(fd: i32, iov: &mut [libc::iovec], send: bool) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: msghdr zeroed then pointed at valid iovecs that outlive the call.
        let rc = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = iov.as_mut_ptr();
            msg.msg_iovlen = iov.len() as _;
            if send {
                libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
            } else {
                libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT)
            }
        };
        if rc >= 0 {
            return Ok(Some(rc as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &[u8]) -> Vec<u8> {
        let mut o = Outbox::default();
        o.push_frame(body);
        o.frames
    }

    #[test]
    fn control_skips_data_parts_and_keeps_abort_frames_split_anywhere() {
        let mut wire = Vec::new();
        wire.extend_from_slice(&FrameHeader { len: 5, seq: 0 }.encode());
        wire.extend_from_slice(b"hello");
        wire.extend(frame(b"{\"a\":1}"));
        wire.extend(frame(b"second"));
        for cut in 0..wire.len() {
            let mut c = Control::default();
            c.buf.extend_from_slice(&wire[..cut]);
            assert!(c.parse());
            c.buf.extend_from_slice(&wire[cut..]);
            assert!(c.parse());
            assert_eq!(
                c.bodies,
                vec![b"{\"a\":1}".to_vec(), b"second".to_vec()],
                "cut at {cut}"
            );
            assert!(c.buf.is_empty());
        }
    }

    /// A connected loopback pair: the end a stream reads (non-blocking) and the peer's end.
    fn pair() -> (TcpStream, TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mine, _) = l.accept().unwrap();
        mine.set_nonblocking(true).unwrap();
        (mine, peer)
    }

    /// Blocks until `sock` has bytes or a close to read.
    fn readable(sock: &TcpStream) {
        let mut pfd = libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, 60_000) }, 1, "nothing arrived");
    }

    /// An abort frame's header announcing a body of `body` bytes, and the first `sent` of them.
    fn partial_abort(body: usize, sent: usize) -> Vec<u8> {
        let mut f = frame(&vec![b'x'; body]);
        f.truncate(HEADER_LEN + sent);
        f
    }

    #[test]
    fn a_partial_abort_frame_is_no_progress_and_a_close_inside_it_is_an_error() {
        use std::io::Write;
        let (mine, mut peer) = pair();
        peer.write_all(&partial_abort(60_000, 100)).unwrap();
        let mut s = Stream::new(mine);
        readable(&s.sock);
        s.peek();
        assert!(s.control.is_some(), "an abort frame switches the stream to control");
        let mut requests = Requests::default();
        // A frame still incomplete moves nothing: a wait sleeps and reaches its deadline.
        for _ in 0..3 {
            assert_eq!(s.drive(&mut requests), Ok(false));
        }
        drop(peer);
        readable(&s.sock);
        let e = s.drive(&mut requests).unwrap_err();
        assert!(
            e.contains("closed by the peer in the middle of an abort frame (116 of its 60016 bytes)"),
            "{e}"
        );
        assert!(s.closed);
        assert_eq!(s.drive(&mut requests), Ok(false), "said once");
    }

    #[test]
    fn a_wait_on_a_peer_that_sent_part_of_an_abort_frame_ends_at_its_deadline() {
        use std::io::Write;
        use std::time::Duration;

        use super::super::{PeerAddr, TcpConfig, TcpTransport};
        use crate::transport::Transport;

        let (mine, mut peer) = pair();
        // The peer holds the connection open: only -T ends the wait.
        peer.write_all(&partial_abort(60_000, 100)).unwrap();
        let addr = peer.local_addr().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let cfg = TcpConfig {
                streams: 1,
                stripe_min: 1 << 20,
                timeout: Duration::from_millis(300),
                connect_timeout: Duration::from_secs(5),
                spin: Duration::ZERO,
                sndbuf: None,
                congestion: None,
            };
            let to_1 = PeerAddr {
                rank: 1,
                host: "h1".into(),
                addr,
            };
            let peers = vec![None, Some((to_1, vec![mine]))];
            let mut t = TcpTransport::new(0, "h0".into(), "lo".into(), "tcp".into(), peers, cfg);
            let mut buf = [0u8; 8];
            // SAFETY: buf outlives the request, which the wait below ends (the transport drops it on failure).
            let req = unsafe { t.post_recv(1, buf.as_mut_ptr(), buf.len()) }.unwrap();
            let _ = tx.send(t.wait(req).map_err(|e| e.to_string()));
        });
        let waited = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the wait spun on past its deadline");
        let e = waited.expect_err("nothing the wait was for arrived");
        assert!(e.contains("rank 1 (host h1") && e.contains("-T"), "{e}");
        drop(peer);
    }

    #[test]
    fn control_refuses_an_absurd_abort_length() {
        let mut c = Control::default();
        c.buf.extend_from_slice(&ABORT_MARK.to_le_bytes());
        c.buf.extend_from_slice(&((MAX_ABORT_BODY + 1) as u32).to_le_bytes());
        c.buf.extend_from_slice(&[0; HEADER_LEN - 8]);
        assert!(!c.parse());
    }
}
