//! One stream's queues and the non-blocking I/O that moves them.

use std::collections::VecDeque;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;

use super::handshake::{FrameHeader, FRAME_HEADER_LEN};

/// Header before every message part: payload length and sequence number.
pub const HEADER_LEN: usize = FRAME_HEADER_LEN;

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
            // SAFETY: pdone < len, inside the posted region.
            v[n] = libc::iovec {
                iov_base: unsafe { self.ptr.add(pdone) }.cast(),
                iov_len: self.len - pdone,
            };
            n += 1;
        }
        (v, n)
    }
}

/// One TCP connection to a peer with its send and receive queues.
pub struct Stream {
    pub sock: TcpStream,
    pub sendq: VecDeque<Op>,
    pub recvq: VecDeque<Op>,
    pub send_seq: u32,
    pub recv_seq: u32,
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
        }
    }

    /// Whether any operation is queued.
    pub fn busy(&self) -> bool {
        !self.sendq.is_empty() || !self.recvq.is_empty()
    }

    /// Moves as many bytes as the socket takes without blocking, completing parts in `slots`.
    pub fn drive(&mut self, slots: &mut [(u32, u32)]) -> Result<bool, String> {
        let mut moved = false;
        let fd = self.sock.as_raw_fd();
        while let Some(op) = self.sendq.front_mut() {
            let (mut iov, n) = op.iovecs();
            match xfer(fd, &mut iov[..n], true) {
                Ok(Some(k)) => {
                    moved = true;
                    op.done += k;
                    if op.done == op.total() {
                        slots[op.slot].0 -= 1;
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
                        check_header(op)?;
                    }
                    if op.done == op.total() {
                        slots[op.slot].0 -= 1;
                        self.recvq.pop_front();
                    }
                }
                Ok(None) => break,
                Err(e) => return Err(format!("receive failed: {e}")),
            }
        }
        Ok(moved)
    }
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
