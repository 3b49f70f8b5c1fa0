//! Recursive doubling: log2(n) exchange steps, for small messages where latency dominates; and Rabenseifner's
//! recursive halving + doubling all-reduce for mid-sized ones.
//!
//! For n not a power of two, the first 2r ranks (r = n - 2^k) pair up: even ones hand their data to the
//! odd neighbour and sit out, the rest run recursive doubling among 2^k, and the result is handed back.

use super::{Bufs, Tuning};
use crate::error::Result;
use crate::reduce::kernel::{finalize, reduce_inplace, reduce_into};
use crate::reduce::{Dtype, Op};
use crate::transport::{self, Transport};

/// The most of a step's message sent before the partner is known to have reached the step (MPI's eager
/// limit over TCP, where the rest waits for the receiver's answer).
pub const EAGER: usize = 64 << 10;

/// One step with `partner`: sends `send` while receiving `recv`. A message longer than [`EAGER`] goes as two,
/// its first [`EAGER`] bytes at once and the rest only once the partner's first message arrived, which says
/// the partner reached this step: a rank a step or a call ahead of its partner would otherwise push a whole
/// large message onto the partner's link while the partner still exchanges its earlier step there, slowing
/// both, and the ranks stay out of step for many calls (results/model-prediction/paced: such calls at 16
/// ranks took 1.2-3.3 times their wire time). In step, the partner's first bytes arrive as this rank's leave,
/// so the wait costs about a one-way latency.
fn exchange<T: Transport + ?Sized>(t: &mut T, partner: usize, send: &[u8], recv: &mut [u8]) -> Result<()> {
    // Each direction is cut by its own length, so both ends cut alike even where the two lengths differ (the
    // gathered blocks may differ by an element); a message of at most EAGER goes whole, at once.
    let (head, tail) = send.split_at(send.len().min(EAGER));
    let (first, rest) = recv.split_at_mut(recv.len().min(EAGER));
    // SAFETY: every buffer outlives the call, and every request is waited for before it returns; on error the
    // transport is poisoned and never touches them again. Receives are posted in the order the partner cuts
    // its message (its first part, then the rest), as the transport's per-peer matching requires.
    unsafe {
        let got_first = t.post_recv(partner, first.as_mut_ptr(), first.len())?;
        let got_rest = (!rest.is_empty())
            .then(|| t.post_recv(partner, rest.as_mut_ptr(), rest.len()))
            .transpose()?;
        let sent_head = t.post_send(partner, head.as_ptr(), head.len())?;
        t.wait(got_first)?;
        let sent_tail = (!tail.is_empty())
            .then(|| t.post_send(partner, tail.as_ptr(), tail.len()))
            .transpose()?;
        if let Some(r) = got_rest {
            t.wait(r)?;
        }
        t.wait(sent_head)?;
        sent_tail.map_or(Ok(()), |s| t.wait(s))
    }
}

/// All-reduce of `count` elements from the input into the output. Scratch: one message.
pub fn all_reduce<T: Transport + ?Sized>(
    t: &mut T,
    b: &Bufs<'_>,
    count: usize,
    dtype: Dtype,
    op: Op,
    scratch: &mut [u8],
) -> Result<()> {
    let bytes = count * dtype.size();
    b.copy_in_to_out(0, 0, bytes);
    all_reduce_in_place(t, b.out(0, bytes), dtype, op, &mut scratch[..bytes])
}

/// Where a rank stands in the power-of-two group the recursive algorithms run on: the first `2 * rem` ranks
/// (rem = n - p2) pair up, even ones handing their data to their odd neighbour and sitting out.
struct Fold {
    p2: usize,
    rem: usize,
    /// This rank's place among the p2 ranks that run the exchange steps; `None`: it sits out.
    vrank: Option<usize>,
}

impl Fold {
    fn new(r: usize, n: usize) -> Self {
        let p2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
        let rem = n - p2;
        let vrank = if r < 2 * rem {
            (r % 2 == 1).then_some(r / 2)
        } else {
            Some(r - rem)
        };
        Fold { p2, rem, vrank }
    }

    /// The real rank of group member `v`.
    fn real(&self, v: usize) -> usize {
        if v < self.rem {
            2 * v + 1
        } else {
            v + self.rem
        }
    }

    /// Folds the ranks beyond the largest power of two into their neighbours (`data` reduced in place).
    fn fold_in<T: Transport + ?Sized>(
        &self,
        t: &mut T,
        data: &mut [u8],
        dtype: Dtype,
        op: Op,
        tmp: &mut [u8],
    ) -> Result<()> {
        let r = t.rank();
        if r < 2 * self.rem {
            if r % 2 == 0 {
                transport::send(t, r + 1, data)?;
            } else {
                transport::recv(t, r - 1, tmp)?;
                reduce_inplace(dtype, op, data, tmp);
            }
        }
        Ok(())
    }

    /// Hands the result back to the folded ranks.
    fn fold_out<T: Transport + ?Sized>(&self, t: &mut T, data: &mut [u8]) -> Result<()> {
        let r = t.rank();
        if r < 2 * self.rem {
            if r % 2 == 1 {
                transport::send(t, r - 1, data)?;
            } else {
                transport::recv(t, r + 1, data)?;
            }
        }
        Ok(())
    }
}

/// Recursive-doubling all-reduce of `data` in place; `tmp` is as long as `data`.
fn all_reduce_in_place<T: Transport + ?Sized>(
    t: &mut T,
    data: &mut [u8],
    dtype: Dtype,
    op: Op,
    tmp: &mut [u8],
) -> Result<()> {
    let n = t.size();
    if n == 1 || data.is_empty() {
        finalize(dtype, op, data, n);
        return Ok(());
    }
    let fold = Fold::new(t.rank(), n);
    fold.fold_in(t, data, dtype, op, tmp)?;
    if let Some(v) = fold.vrank {
        let mut mask = 1;
        while mask < fold.p2 {
            let partner = fold.real(v ^ mask);
            exchange(t, partner, data, tmp)?;
            reduce_inplace(dtype, op, data, tmp);
            mask <<= 1;
        }
        finalize(dtype, op, data, n);
    }
    fold.fold_out(t, data)
}

/// One recursive-halving step: send the half handed to the partner while receiving the partner's
/// contribution to the half kept, both in the same `piece`-sized parts (the partner cuts the same byte range
/// the same way, so the n-th send matches its n-th receive), reducing each received part as it arrives.
struct HalvingStep {
    partner: usize,
    /// The bytes handed over: their address (input or output) and length.
    give: (*const u8, usize),
    /// Offset and length of the kept half in the output.
    keep: (usize, usize),
    piece: usize,
    dtype: Dtype,
    op: Op,
}

impl HalvingStep {
    /// Runs the step; `from_input`: the kept half is reduced from the input into the output, else in place.
    fn run<T: Transport + ?Sized>(&self, t: &mut T, b: &Bufs<'_>, from_input: bool, tmp: &mut [u8]) -> Result<()> {
        let (ks, klen) = self.keep;
        let parts = |len: usize| {
            (0..len.div_ceil(self.piece)).map(move |j| (j * self.piece, self.piece.min(len - j * self.piece)))
        };
        let mut recvs = Vec::with_capacity(klen.div_ceil(self.piece));
        for (o, l) in parts(klen) {
            // SAFETY: distinct scratch bytes per receive, read only after the receive completed; on error the
            // transport is poisoned and never touches them again.
            recvs.push(unsafe { t.post_recv(self.partner, tmp[ks + o..].as_mut_ptr(), l)? });
        }
        let mut sends = Vec::with_capacity(self.give.1.div_ceil(self.piece));
        for (o, l) in parts(self.give.1) {
            // SAFETY: the given half is disjoint from the kept half this step writes, and every send is waited
            // for below (or the transport is poisoned).
            sends.push(unsafe { t.post_send(self.partner, self.give.0.add(o), l)? });
        }
        for ((o, l), req) in parts(klen).zip(recvs) {
            t.wait(req)?;
            let got = &tmp[ks + o..ks + o + l];
            let dst = b.out(ks + o, l);
            if from_input {
                reduce_into(self.dtype, self.op, dst, b.inp(ks + o, l), got);
            } else {
                reduce_inplace(self.dtype, self.op, dst, got);
            }
        }
        for req in sends {
            t.wait(req)?;
        }
        Ok(())
    }
}

/// Rabenseifner's all-reduce: a reduce-scatter by recursive halving, then an all-gather by recursive
/// doubling, among the largest power of two of ranks (the others folded in and out as for recursive
/// doubling). Each rank moves the ring's 2(p-1)/p of the message, in 2 log2(p) steps instead of the ring's
/// 2(p-1): fewer steps for the same bytes. The halving steps go in `tune.chunk_bytes` pieces, each reduced as
/// it arrives, and out of place the first step reads the input directly (no copy of it into the output).
/// Scratch: one message.
pub fn all_reduce_halving<T: Transport + ?Sized>(
    t: &mut T,
    b: &Bufs<'_>,
    count: usize,
    dtype: Dtype,
    op: Op,
    scratch: &mut [u8],
    tune: &Tuning,
) -> Result<()> {
    let es = dtype.size();
    let bytes = count * es;
    let n = t.size();
    if n == 1 || bytes == 0 {
        b.copy_in_to_out(0, 0, bytes);
        finalize(dtype, op, b.out(0, bytes), n);
        return Ok(());
    }
    let fold = Fold::new(t.rank(), n);
    // Folded ranks reduce into the output before the halving starts, so it needs the input there first;
    // otherwise the first halving step reads the input itself and every other byte of the output is written
    // by a later step (this rank's block by the reductions, the rest by the all-gather).
    let read_input = fold.rem == 0 && !b.in_place;
    if !read_input {
        b.copy_in_to_out(0, 0, bytes);
    }
    let tmp = &mut scratch[..bytes];
    fold.fold_in(t, b.out(0, bytes), dtype, op, tmp)?;
    if let Some(v) = fold.vrank {
        let p2 = fold.p2;
        // Block i of the p2 blocks: whole elements, the remainder spread so no block is more than one longer.
        let at = |i: usize| i * count / p2 * es;
        // Pieces of whole elements, so every piece can be reduced on its own.
        let piece = (tune.chunk_bytes / es).max(1) * es;
        // Reduce-scatter: each step keeps half of the current range and hands the other half to the partner.
        let (mut lo, mut hi) = (0, p2);
        let mut mask = p2 >> 1;
        let mut first = true;
        while mask > 0 {
            let partner = fold.real(v ^ mask);
            let mid = lo + mask;
            let (keep, give) = if v & mask == 0 {
                ((lo, mid), (mid, hi))
            } else {
                ((mid, hi), (lo, mid))
            };
            let (ks, ke, gs, ge) = (at(keep.0), at(keep.1), at(give.0), at(give.1));
            let from_input = first && read_input;
            let give_ptr = if from_input { b.inp_ptr(gs) } else { b.out_ptr(gs) };
            let step = HalvingStep {
                partner,
                give: (give_ptr, ge - gs),
                keep: (ks, ke - ks),
                piece,
                dtype,
                op,
            };
            step.run(t, b, from_input, tmp)?;
            (lo, hi) = keep;
            mask >>= 1;
            first = false;
        }
        debug_assert_eq!((lo, hi), (v, v + 1));
        // The halving steps took their own views of the output; from here on one view serves.
        let data = b.out(0, bytes);
        finalize(dtype, op, &mut data[at(v)..at(v + 1)], n);
        doubling_gather(t, data, at, (lo, hi), p2, |v| fold.real(v))?;
    }
    fold.fold_out(t, b.out(0, bytes))
}

/// The all-gather half of recursive doubling among `p2` group members: this member (holding the blocks
/// `held`, which contain its own) swaps everything gathered so far with the partner's, which lies next to it,
/// doubling what it holds each step. Block i of `data` starts at `at(i)`; `real` maps a member to its rank.
fn doubling_gather<T: Transport + ?Sized>(
    t: &mut T,
    data: &mut [u8],
    at: impl Fn(usize) -> usize,
    held: (usize, usize),
    p2: usize,
    real: impl Fn(usize) -> usize,
) -> Result<()> {
    let (mut lo, mut hi) = held;
    let v = lo;
    let mut mask = 1;
    while mask < p2 {
        let partner = real(v ^ mask);
        let (plo, phi) = if v & mask == 0 {
            (hi, hi + mask)
        } else {
            (lo - mask, lo)
        };
        let (ms, me, ps, pe) = (at(lo), at(hi), at(plo), at(phi));
        if ps >= me {
            let (mine, theirs) = data.split_at_mut(ps);
            exchange(t, partner, &mine[ms..me], &mut theirs[..pe - ps])?;
        } else {
            let (theirs, mine) = data.split_at_mut(ms);
            exchange(t, partner, &mine[..me - ms], &mut theirs[ps..pe])?;
        }
        (lo, hi) = (lo.min(plo), hi.max(phi));
        mask <<= 1;
    }
    Ok(())
}

/// Recursive-doubling all-gather of `blk`-byte blocks on a power-of-two number of ranks: log2(n) steps, the
/// ring's bytes, and every block received straight into its place (Bruck's steps, without its scratch copies).
/// Other rank counts run Bruck. Scratch: Bruck's (n blocks), only then.
pub fn all_gather<T: Transport + ?Sized>(t: &mut T, b: &Bufs<'_>, blk: usize, scratch: &mut [u8]) -> Result<()> {
    let (n, r) = (t.size(), t.rank());
    if !n.is_power_of_two() {
        return super::bruck::all_gather(t, b, blk, scratch);
    }
    let in_off = if b.in_place { r * blk } else { 0 };
    b.copy_in_to_out(in_off, r * blk, blk);
    if n == 1 || blk == 0 {
        return Ok(());
    }
    doubling_gather(t, b.out(0, n * blk), |i| i * blk, (r, r + 1), n, |v| v)
}

/// Reduce-scatter as a recursive-doubling all-reduce of all n blocks, keeping this rank's block: more
/// bytes than the ring, but log2(n) steps, which is what small messages need. Scratch: two full buffers.
pub fn reduce_scatter<T: Transport + ?Sized>(
    t: &mut T,
    b: &Bufs<'_>,
    count: usize,
    dtype: Dtype,
    op: Op,
    scratch: &mut [u8],
) -> Result<()> {
    let (n, r) = (t.size(), t.rank());
    let blk = count * dtype.size();
    let total = blk * n;
    let (acc, tmp) = scratch[..2 * total].split_at_mut(total);
    acc.copy_from_slice(b.inp(0, total));
    all_reduce_in_place(t, acc, dtype, op, tmp)?;
    let out_off = if b.in_place { r * blk } else { 0 };
    b.out(out_off, blk).copy_from_slice(&acc[r * blk..(r + 1) * blk]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Request;

    /// Rank 0 of two, its partner scripted: every receive is filled with the partner's next message (its
    /// ready byte where the step has one, then its data), and every post and completion is logged.
    struct Scripted {
        /// Per posted receive, its place and length, until a wait fills it.
        recvs: Vec<Option<(*mut u8, usize)>>,
        /// What happened, in order: "send N", "recv N", "got N" (a receive of N bytes completed).
        log: Vec<String>,
    }

    impl Transport for Scripted {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            2
        }
        fn path(&self) -> String {
            "scripted".into()
        }
        unsafe fn post_send(&mut self, _peer: usize, _ptr: *const u8, len: usize) -> Result<Request> {
            self.log.push(format!("send {len}"));
            Ok(Request(usize::MAX, 0))
        }
        unsafe fn post_recv(&mut self, _peer: usize, ptr: *mut u8, len: usize) -> Result<Request> {
            self.log.push(format!("recv {len}"));
            self.recvs.push(Some((ptr, len)));
            Ok(Request(self.recvs.len() - 1, 0))
        }
        fn wait(&mut self, req: Request) -> Result<()> {
            // Receives complete in posting order, as the partner's messages arrive.
            while let Some(i) = self.recvs.iter().position(Option::is_some).filter(|&i| i <= req.0) {
                let (ptr, len) = self.recvs[i].take().unwrap();
                // SAFETY: the place was handed to post_recv and is valid until the request completes.
                unsafe { std::ptr::write_bytes(ptr, 1, len) };
                self.log.push(format!("got {len}"));
            }
            Ok(())
        }
        fn wait_all(&mut self) -> Result<()> {
            self.wait(Request(usize::MAX - 1, 0))
        }
        fn pending(&self) -> usize {
            self.recvs.iter().flatten().count()
        }
    }

    fn steps_of(bytes: usize) -> Vec<String> {
        let mut t = Scripted {
            recvs: Vec::new(),
            log: Vec::new(),
        };
        let mut data = vec![0u8; bytes];
        let mut tmp = vec![0u8; bytes];
        all_reduce_in_place(&mut t, &mut data, Dtype::Uint8, Op::Sum, &mut tmp).unwrap();
        t.log
    }

    #[test]
    fn a_large_step_sends_its_rest_only_once_the_partners_first_bytes_arrived() {
        let log = steps_of(4 * EAGER);
        let (head, rest) = (EAGER, 3 * EAGER);
        let expected: Vec<String> = [
            format!("recv {head}"),
            format!("recv {rest}"),
            format!("send {head}"),
            format!("got {head}"),
            format!("send {rest}"),
            format!("got {rest}"),
        ]
        .into();
        assert_eq!(log, expected);
    }

    #[test]
    fn each_direction_is_cut_by_its_own_length() {
        // Gathered blocks may differ by an element: this rank sends at most EAGER, the partner more, which the
        // partner cuts in two; this rank must post two receives for it, or the lengths would not match.
        let mut t = Scripted {
            recvs: Vec::new(),
            log: Vec::new(),
        };
        let send = vec![0u8; EAGER];
        let mut recv = vec![0u8; EAGER + 4];
        exchange(&mut t, 1, &send, &mut recv).unwrap();
        let expected: Vec<String> = [
            format!("recv {EAGER}"),
            "recv 4".to_string(),
            format!("send {EAGER}"),
            format!("got {EAGER}"),
            "got 4".to_string(),
        ]
        .into();
        assert_eq!(t.log, expected);
    }

    #[test]
    fn a_step_of_at_most_the_eager_limit_is_sent_whole_at_once() {
        let log = steps_of(EAGER);
        let expected: Vec<String> = [format!("recv {EAGER}"), format!("send {EAGER}"), format!("got {EAGER}")].into();
        assert_eq!(log, expected);
    }
}
