//! The one interface algorithms see.
//!
//! # Contract
//! - Posts are non-blocking: [`Transport::post_send`] and [`Transport::post_recv`] queue an operation on a
//!   memory region and return a [`Request`]; [`Transport::wait`] drives progress until that request
//!   completes or the transport's deadline expires.
//! - Ordering is per peer: the n-th send a rank posts to peer p matches the n-th receive p posts from it,
//!   and their lengths must be equal (a mismatch is a protocol error naming both ranks).
//! - A memory region handed to a post must stay valid, and must not be read (for receives) or written
//!   (for sends) by anyone else, until its request has completed.
//! - Any error poisons the transport: every pending operation is dropped (the transport never touches
//!   their memory again) and every later call returns an error. So an algorithm that returns `Err` leaves
//!   no operation in flight, and one that returns `Ok` must have waited for everything it posted.
//! - Errors say which rank, which peer (rank, host, address), which operation and what to do.
//!
//! # Layout
//! [`tcp`] and [`rdma`] implement the trait (their request slots in one shared table, `requests`);
//! [`Links`] is the set of rank pairs connection set-up opens; [`control`] is the barrier, gather and
//! broadcast the runner and connection set-up exchange over any transport. This layer imports only
//! lower ones (errors, memory, the net helpers); algorithms, engines and options build on it.

pub mod auth;
pub mod control;
mod links;
pub mod options;
pub mod path;
pub mod rdma;
mod requests;
pub mod subset;
pub mod tcp;

pub use links::Links;

use crate::error::Result;

/// Handle to one posted operation. Not `Clone`: it is consumed by [`Transport::wait`].
#[must_use = "a posted operation must be waited for"]
#[derive(Debug, PartialEq, Eq)]
pub struct Request(pub(crate) usize, pub(crate) u32);

/// Point-to-point messaging between the ranks of one job.
pub trait Transport {
    /// This rank.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// The path this transport measures, e.g. `tcp@lo`.
    fn path(&self) -> String;

    /// Queues a send of `len` bytes at `ptr` to `peer`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid and unmodified until the request completes or the transport is
    /// poisoned.
    unsafe fn post_send(&mut self, peer: usize, ptr: *const u8, len: usize) -> Result<Request>;

    /// Queues a receive of exactly `len` bytes from `peer` into `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid, and must not be accessed by anyone else, until the request
    /// completes or the transport is poisoned.
    unsafe fn post_recv(&mut self, peer: usize, ptr: *mut u8, len: usize) -> Result<Request>;

    /// Drives progress until `req` completes; errors at the deadline naming what was still pending.
    fn wait(&mut self, req: Request) -> Result<()>;

    /// Drives progress until every posted request has completed.
    fn wait_all(&mut self) -> Result<()>;

    /// Number of posted requests that have not been waited for.
    fn pending(&self) -> usize;

    /// The buffers handed to earlier posts may now be freed: drop anything cached about them (RDMA
    /// registrations), so a new buffer at the same address is never mistaken for the old one.
    fn forget_memory(&mut self) {}
}

/// Sends `buf` to `peer` and waits for it.
pub fn send<T: Transport + ?Sized>(t: &mut T, peer: usize, buf: &[u8]) -> Result<()> {
    // SAFETY: buf is borrowed for the whole call and the request is waited for before returning; on error
    // the transport is poisoned and never touches buf again.
    let r = unsafe { t.post_send(peer, buf.as_ptr(), buf.len())? };
    t.wait(r)
}

/// Receives exactly `buf.len()` bytes from `peer` into `buf`.
pub fn recv<T: Transport + ?Sized>(t: &mut T, peer: usize, buf: &mut [u8]) -> Result<()> {
    // SAFETY: as in send().
    let r = unsafe { t.post_recv(peer, buf.as_mut_ptr(), buf.len())? };
    t.wait(r)
}

/// Sends `send_buf` to `to` while receiving `recv_buf` from `from`; both complete before it returns.
pub fn sendrecv<T: Transport + ?Sized>(
    t: &mut T,
    to: usize,
    send_buf: &[u8],
    from: usize,
    recv_buf: &mut [u8],
) -> Result<()> {
    // SAFETY: both buffers are borrowed for the whole call and both requests are waited for before
    // returning; on error the transport is poisoned and never touches them again.
    unsafe {
        let r = t.post_recv(from, recv_buf.as_mut_ptr(), recv_buf.len())?;
        let s = t.post_send(to, send_buf.as_ptr(), send_buf.len())?;
        t.wait(r)?;
        t.wait(s)
    }
}

/// A borrowed transport is a transport, so one connection set can serve several engines in turn.
impl<T: Transport + ?Sized> Transport for &mut T {
    fn rank(&self) -> usize {
        (**self).rank()
    }
    fn size(&self) -> usize {
        (**self).size()
    }
    fn path(&self) -> String {
        (**self).path()
    }
    unsafe fn post_send(&mut self, peer: usize, ptr: *const u8, len: usize) -> Result<Request> {
        // SAFETY: forwarded contract.
        unsafe { (**self).post_send(peer, ptr, len) }
    }
    unsafe fn post_recv(&mut self, peer: usize, ptr: *mut u8, len: usize) -> Result<Request> {
        // SAFETY: forwarded contract.
        unsafe { (**self).post_recv(peer, ptr, len) }
    }
    fn wait(&mut self, req: Request) -> Result<()> {
        (**self).wait(req)
    }
    fn wait_all(&mut self) -> Result<()> {
        (**self).wait_all()
    }
    fn pending(&self) -> usize {
        (**self).pending()
    }

    fn forget_memory(&mut self) {
        (**self).forget_memory()
    }
}
