//! Collectives where every pair talks directly: alltoall and sendrecv.

use super::Bufs;
use crate::error::Result;
use crate::transport::Transport;

/// Alltoall of `blk`-byte blocks: block j of the input goes to rank j. In place, the input is first
/// copied to scratch (n blocks) so no block is overwritten before it is sent.
pub fn alltoall<T: Transport + ?Sized>(t: &mut T, b: &Bufs<'_>, blk: usize, scratch: &mut [u8]) -> Result<()> {
    let (n, r) = (t.size(), t.rank());
    let total = n * blk;
    let src: *const u8 = if b.in_place {
        scratch[..total].copy_from_slice(b.inp(0, total));
        scratch.as_ptr()
    } else {
        b.inp_ptr(0)
    };
    if blk == 0 {
        return Ok(());
    }
    // Own block: a local copy.
    // SAFETY: src holds n blocks; the output's block r is disjoint from src (scratch or the send buffer).
    unsafe { std::ptr::copy_nonoverlapping(src.add(r * blk), b.out_ptr(r * blk), blk) };
    // Peers in rotating order so every rank talks to a different partner at each step.
    for i in 1..n {
        let from = (r + n - i) % n;
        // SAFETY: distinct output blocks, all waited for below.
        let _completed_by_wait_all = unsafe { t.post_recv(from, b.out_ptr(from * blk), blk)? };
    }
    for i in 1..n {
        let to = (r + i) % n;
        // SAFETY: src outlives the call, which ends with wait_all.
        let _completed_by_wait_all = unsafe { t.post_send(to, src.add(to * blk), blk)? };
    }
    t.wait_all()
}

/// Sendrecv as nccl-tests runs it: send to rank r+1, receive from rank r-1. In place, the input is copied
/// to scratch first.
pub fn sendrecv<T: Transport + ?Sized>(t: &mut T, b: &Bufs<'_>, bytes: usize, scratch: &mut [u8]) -> Result<()> {
    let (n, r) = (t.size(), t.rank());
    if n == 1 || bytes == 0 {
        b.copy_in_to_out(0, 0, bytes);
        return Ok(());
    }
    let src: &[u8] = if b.in_place {
        scratch[..bytes].copy_from_slice(b.inp(0, bytes));
        &scratch[..bytes]
    } else {
        b.inp(0, bytes)
    };
    crate::transport::sendrecv(t, (r + 1) % n, src, (r + n - 1) % n, b.out(0, bytes))
}
