//! Pipelined ring and chain algorithms: bandwidth-optimal for large messages.
//!
//! Messages are cut into chunks; receives are posted `depth` chunks ahead, and every chunk is reduced and
//! sent on as soon as it arrives, so sending, receiving and reducing overlap across the ring.
//!
//! Receives into the output may be posted before this rank has finished sending from the same bytes: that
//! is safe because data for a block can only arrive after this rank's own contribution to it has gone
//! round the ring, i.e. after the send was handed to the transport (a causal order every ring step keeps).

use super::{Bufs, Tuning, MAX_DEPTH};
use crate::error::Result;
use crate::reduce::kernel::{finalize, reduce_inplace, reduce_into};
use crate::reduce::{Dtype, Op};
use crate::transport::{Request, Transport};

/// Posts a send whose completion is collected by the final `wait_all`.
fn isend<T: Transport + ?Sized>(t: &mut T, peer: usize, ptr: *const u8, len: usize) -> Result<()> {
    // SAFETY: every caller's memory outlives the collective, which ends with wait_all (or with an error
    // that poisons the transport so the pointer is never used again).
    let _completed_by_wait_all = unsafe { t.post_send(peer, ptr, len)? };
    Ok(())
}

/// Element range `(start, len)` of segment `i` when `count` elements are split over `n` ranks.
pub fn segment(count: usize, n: usize, i: usize) -> (usize, usize) {
    let start = count * i / n;
    (start, count * (i + 1) / n - start)
}

/// Element range of chunk `j` of a `len`-element region cut into `ce`-element chunks (empty past the end).
fn chunk(len: usize, ce: usize, j: usize) -> (usize, usize) {
    let st = j * ce;
    if st >= len {
        (0, 0)
    } else {
        (st, ce.min(len - st))
    }
}

fn slot_ptr(scratch: &mut [u8], slot: usize, slot_bytes: usize) -> *mut u8 {
    scratch[slot * slot_bytes..(slot + 1) * slot_bytes].as_mut_ptr()
}

/// Output bytes `out_off..` become this rank's input bytes `in_off..` op `got` (in place, input and output
/// are the same bytes) and are returned.
fn fold_into_out<'b>(b: &'b Bufs<'_>, dtype: Dtype, op: Op, out_off: usize, in_off: usize, got: &[u8]) -> &'b mut [u8] {
    let dst = b.out(out_off, got.len());
    if b.in_place {
        debug_assert_eq!(out_off, in_off, "in place, the input is the output");
        reduce_inplace(dtype, op, dst, got);
    } else {
        reduce_into(dtype, op, dst, b.inp(in_off, got.len()), got);
    }
    dst
}

/// Ring all_reduce: reduce-scatter then all-gather, both pipelined in chunks.
pub fn all_reduce<T: Transport + ?Sized>(
    t: &mut T,
    b: &Bufs<'_>,
    count: usize,
    dtype: Dtype,
    op: Op,
    scratch: &mut [u8],
    tune: &Tuning,
) -> Result<()> {
    let (n, r, es) = (t.size(), t.rank(), dtype.size());
    if n == 1 || count == 0 {
        b.copy_in_to_out(0, 0, count * es);
        finalize(dtype, op, b.out(0, count * es), n);
        return Ok(());
    }
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    let ce = (tune.chunk_bytes / es).max(1);
    let slot_bytes = ce * es;
    let depth = tune.depth.clamp(1, MAX_DEPTH);
    let nchunks = count.div_ceil(n).div_ceil(ce);
    // Byte range of chunk j of segment seg.
    let piece = |seg: usize, j: usize| {
        let (s, l) = segment(count, n, seg);
        let (o, cl) = chunk(l, ce, j);
        ((s + o) * es, cl * es)
    };
    // Item k of the receive sequence: (is reduce-scatter, segment, chunk).
    let item = |k: usize| {
        let step = k / nchunks;
        if step < n - 1 {
            (true, (r + 2 * n - step - 1) % n, k % nchunks)
        } else {
            (false, (r + 2 * n - (step - (n - 1))) % n, k % nchunks)
        }
    };
    for j in 0..nchunks {
        let (o, l) = piece(r, j);
        if l > 0 {
            isend(t, right, b.inp_ptr(o), l)?;
        }
    }
    let total = 2 * (n - 1) * nchunks;
    let mut reqs: [Option<Request>; MAX_DEPTH] = std::array::from_fn(|_| None);
    let mut posted = 0;
    for k in 0..total {
        while posted < total && posted < k + depth {
            let (rs, seg, j) = item(posted);
            let (o, l) = piece(seg, j);
            if l > 0 {
                let dst = if rs {
                    slot_ptr(scratch, posted % depth, slot_bytes)
                } else {
                    b.out_ptr(o)
                };
                // SAFETY: a scratch slot is reused only after the item that used it was processed; output
                // bytes are only written by this receive (see the module note on ordering).
                reqs[posted % depth] = Some(unsafe { t.post_recv(left, dst, l)? });
            }
            posted += 1;
        }
        let (rs, seg, j) = item(k);
        let (o, l) = piece(seg, j);
        let Some(req) = reqs[k % depth].take() else { continue };
        t.wait(req)?;
        let step = k / nchunks;
        if rs {
            let dst = fold_into_out(b, dtype, op, o, o, &scratch[(k % depth) * slot_bytes..][..l]);
            if step == n - 2 {
                finalize(dtype, op, dst, n);
            }
            isend(t, right, b.out_ptr(o), l)?;
        } else if step - (n - 1) < n - 2 {
            isend(t, right, b.out_ptr(o), l)?;
        }
    }
    t.wait_all()
}

/// Ring all_gather: each block travels n-1 hops, forwarded chunk by chunk.
pub fn all_gather<T: Transport + ?Sized>(
    t: &mut T,
    b: &Bufs<'_>,
    blk: usize,
    tune: &Tuning,
    reqs: &mut Vec<Option<Request>>,
) -> Result<()> {
    let (n, r) = (t.size(), t.rank());
    let in_off = if b.in_place { r * blk } else { 0 };
    if n == 1 || blk == 0 {
        b.copy_in_to_out(in_off, r * blk, blk);
        return Ok(());
    }
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    let cb = tune.chunk_bytes.max(1);
    let nchunks = blk.div_ceil(cb);
    for j in 0..nchunks {
        let (o, l) = chunk(blk, cb, j);
        isend(t, right, b.inp_ptr(in_off + o), l)?;
    }
    b.copy_in_to_out(in_off, r * blk, blk);
    // Every receive has its own place in the output, so all can be posted at once.
    let total = (n - 1) * nchunks;
    let place = |k: usize| {
        let (step, j) = (k / nchunks, k % nchunks);
        let block = (r + 2 * n - step - 1) % n;
        let (o, l) = chunk(blk, cb, j);
        (step, block * blk + o, l)
    };
    reqs.clear();
    for k in 0..total {
        let (_, o, l) = place(k);
        // SAFETY: distinct output bytes per receive, waited for below.
        reqs.push(Some(unsafe { t.post_recv(left, b.out_ptr(o), l)? }));
    }
    for (k, req) in reqs.iter_mut().enumerate() {
        t.wait(req.take().expect("posted above"))?;
        let (step, o, l) = place(k);
        if step < n - 2 {
            isend(t, right, b.out_ptr(o), l)?;
        }
    }
    t.wait_all()
}

/// A chain of partial reductions in chunks: receive a chunk into a scratch slot, fold in this rank's
/// input, and either pass the partial on from the slot or, at the end of the chain, write the result.
struct ChainReduce<'s> {
    scratch: &'s mut [u8],
    slot_bytes: usize,
    depth: usize,
    recvs: [Option<Request>; MAX_DEPTH],
    sends: [Option<Request>; MAX_DEPTH],
}

impl<'s> ChainReduce<'s> {
    fn new(scratch: &'s mut [u8], slot_bytes: usize, depth: usize) -> Self {
        ChainReduce {
            scratch,
            slot_bytes,
            depth,
            recvs: std::array::from_fn(|_| None),
            sends: std::array::from_fn(|_| None),
        }
    }

    /// Posts the receive of item `k` (`l` bytes) into its slot, once the slot's previous send is done.
    fn post<T: Transport + ?Sized>(&mut self, t: &mut T, from: usize, k: usize, l: usize) -> Result<()> {
        let s = k % self.depth;
        if let Some(prev) = self.sends[s].take() {
            t.wait(prev)?;
        }
        if l > 0 {
            let p = slot_ptr(self.scratch, s, self.slot_bytes);
            // SAFETY: the slot is free: its receive was processed and its send completed.
            self.recvs[s] = Some(unsafe { t.post_recv(from, p, l)? });
        }
        Ok(())
    }

    /// Waits for item `k`; returns its slot's bytes, or `None` for an empty item.
    fn arrive<T: Transport + ?Sized>(&mut self, t: &mut T, k: usize, l: usize) -> Result<Option<&mut [u8]>> {
        let s = k % self.depth;
        match self.recvs[s].take() {
            Some(req) => {
                t.wait(req)?;
                Ok(Some(&mut self.scratch[s * self.slot_bytes..][..l]))
            }
            None => Ok(None),
        }
    }

    /// Sends item `k`'s slot on to `to`; the slot is reused only after this send completes.
    fn forward<T: Transport + ?Sized>(&mut self, t: &mut T, to: usize, k: usize, l: usize) -> Result<()> {
        let s = k % self.depth;
        let p = slot_ptr(self.scratch, s, self.slot_bytes);
        // SAFETY: the slot is not written again until this request has been waited for in post().
        self.sends[s] = Some(unsafe { t.post_send(to, p, l)? });
        Ok(())
    }
}

/// Ring reduce_scatter: n-1 steps of receive, reduce, send on; the last step lands in the output.
///
/// Partials live in two block-sized buffers used by alternate steps, so a chunk received at step s only
/// waits for the send of the same chunk at step s-2 (which the right neighbour consumed at step s-1).
/// Reusing a small slot instead would make every rank wait on its right neighbour's progress all round
/// the ring, which deadlocks once a block outgrows the kernel's socket buffers.
pub fn reduce_scatter<T: Transport + ?Sized>(
    t: &mut T,
    b: &Bufs<'_>,
    count: usize,
    dtype: Dtype,
    op: Op,
    (scratch, sends): (&mut [u8], &mut Vec<Option<Request>>),
    tune: &Tuning,
) -> Result<()> {
    let (n, r, es) = (t.size(), t.rank(), dtype.size());
    let blk = count * es;
    let out_off = if b.in_place { r * blk } else { 0 };
    if n == 1 || count == 0 {
        b.copy_in_to_out(r * blk, out_off, blk);
        finalize(dtype, op, b.out(out_off, blk), n);
        return Ok(());
    }
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    let ce = (tune.chunk_bytes / es).max(1);
    let depth = tune.depth.clamp(1, MAX_DEPTH);
    let nchunks = count.div_ceil(ce);
    let piece = |j: usize| {
        let (o, l) = chunk(count, ce, j);
        (o * es, l * es)
    };
    // Step s receives block (r - s - 2) mod n; step 0 starts by sending block (r - 1) mod n.
    let first = (r + n - 1) % n;
    for j in 0..nchunks {
        let (o, l) = piece(j);
        isend(t, right, b.inp_ptr(first * blk + o), l)?;
    }
    let partial = scratch[..2 * blk].as_mut_ptr();
    // Byte offset in the partial buffers of item k (step k / nchunks, chunk k % nchunks).
    let at = |k: usize| (k / nchunks % 2) * blk + piece(k % nchunks).0;
    sends.clear();
    sends.resize_with(2 * nchunks, || None);
    let mut recvs: [Option<Request>; MAX_DEPTH] = std::array::from_fn(|_| None);
    let total = (n - 1) * nchunks;
    // Never post into bytes whose item (two steps back) has not been processed yet.
    let window = depth.min(2 * nchunks);
    let mut posted = 0;
    for k in 0..total {
        while posted < total && posted < k + window {
            let slot = posted % (2 * nchunks);
            if let Some(prev) = sends[slot].take() {
                t.wait(prev)?;
            }
            let l = piece(posted % nchunks).1;
            // SAFETY: the bytes belong to this item alone: the send that used them last has completed.
            recvs[posted % depth] = Some(unsafe { t.post_recv(left, partial.add(at(posted)), l)? });
            posted += 1;
        }
        let (step, j) = (k / nchunks, k % nchunks);
        let block = (r + 2 * n - step - 2) % n;
        let (o, l) = piece(j);
        t.wait(recvs[k % depth].take().expect("posted above"))?;
        let mine = b.inp(block * blk + o, l);
        // SAFETY: the receive into these bytes completed and no send of them is pending.
        let got = unsafe { std::slice::from_raw_parts_mut(partial.add(at(k)), l) };
        if step < n - 2 {
            reduce_inplace(dtype, op, got, mine);
            // SAFETY: these bytes are not written again until this send is waited for, above.
            sends[k % (2 * nchunks)] = Some(unsafe { t.post_send(right, got.as_ptr(), l)? });
        } else {
            let dst = fold_into_out(b, dtype, op, out_off + o, block * blk + o, got);
            finalize(dtype, op, dst, n);
        }
    }
    t.wait_all()
}

/// Chain broadcast: root -> root+1 -> ... , each chunk forwarded as soon as it arrives.
pub fn broadcast<T: Transport + ?Sized>(
    t: &mut T,
    b: &Bufs<'_>,
    bytes: usize,
    root: usize,
    tune: &Tuning,
    reqs: &mut Vec<Option<Request>>,
) -> Result<()> {
    let (n, r) = (t.size(), t.rank());
    let pos = (r + n - root) % n;
    if r == root {
        b.copy_in_to_out(0, 0, bytes);
    }
    if n == 1 || bytes == 0 {
        return Ok(());
    }
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    let cb = tune.chunk_bytes.max(1);
    let nchunks = bytes.div_ceil(cb);
    if pos == 0 {
        for j in 0..nchunks {
            let (o, l) = chunk(bytes, cb, j);
            isend(t, right, b.out_ptr(o), l)?;
        }
        return t.wait_all();
    }
    reqs.clear();
    for j in 0..nchunks {
        let (o, l) = chunk(bytes, cb, j);
        // SAFETY: distinct output bytes per receive, waited for below.
        reqs.push(Some(unsafe { t.post_recv(left, b.out_ptr(o), l)? }));
    }
    for (j, req) in reqs.iter_mut().enumerate() {
        t.wait(req.take().expect("posted above"))?;
        if pos < n - 1 {
            let (o, l) = chunk(bytes, cb, j);
            isend(t, right, b.out_ptr(o), l)?;
        }
    }
    t.wait_all()
}

/// Chain reduce: root+1 -> root+2 -> ... -> root, partials folded chunk by chunk.
#[allow(clippy::too_many_arguments)]
pub fn reduce<T: Transport + ?Sized>(
    t: &mut T,
    b: &Bufs<'_>,
    count: usize,
    dtype: Dtype,
    op: Op,
    root: usize,
    scratch: &mut [u8],
    tune: &Tuning,
) -> Result<()> {
    let (n, r, es) = (t.size(), t.rank(), dtype.size());
    let bytes = count * es;
    if n == 1 || count == 0 {
        if r == root {
            b.copy_in_to_out(0, 0, bytes);
            finalize(dtype, op, b.out(0, bytes), n);
        }
        return Ok(());
    }
    let (right, left) = ((r + 1) % n, (r + n - 1) % n);
    let pos = (r + n - root - 1) % n;
    let ce = (tune.chunk_bytes / es).max(1);
    let depth = tune.depth.clamp(1, MAX_DEPTH);
    let nchunks = count.div_ceil(ce);
    let piece = |j: usize| {
        let (o, l) = chunk(count, ce, j);
        (o * es, l * es)
    };
    if pos == 0 {
        for j in 0..nchunks {
            let (o, l) = piece(j);
            isend(t, right, b.inp_ptr(o), l)?;
        }
        return t.wait_all();
    }
    let mut chain = ChainReduce::new(scratch, ce * es, depth);
    let mut posted = 0;
    for k in 0..nchunks {
        while posted < nchunks && posted < k + depth {
            chain.post(t, left, posted, piece(posted).1)?;
            posted += 1;
        }
        let (o, l) = piece(k);
        let mine = b.inp(o, l);
        let Some(slot) = chain.arrive(t, k, l)? else { continue };
        if r != root {
            reduce_inplace(dtype, op, slot, mine);
            chain.forward(t, right, k, l)?;
        } else {
            let dst = fold_into_out(b, dtype, op, o, o, slot);
            finalize(dtype, op, dst, n);
        }
    }
    t.wait_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_cover_the_buffer_without_gaps() {
        for (count, n) in [(0, 3), (1, 4), (10, 3), (1000, 7), (7, 8)] {
            let mut next = 0;
            for i in 0..n {
                let (s, l) = segment(count, n, i);
                assert_eq!(s, next);
                next = s + l;
            }
            assert_eq!(next, count);
        }
        assert_eq!(chunk(10, 4, 2), (8, 2));
        assert_eq!(chunk(10, 4, 3), (0, 0));
    }
}
