//! Recursive doubling: log2(n) exchange steps, for small messages where latency dominates; and Rabenseifner's
//! recursive halving + doubling all-reduce for mid-sized ones.
//!
//! For n not a power of two, the first 2r ranks (r = n - 2^k) pair up: even ones hand their data to the
//! odd neighbour and sit out, the rest run recursive doubling among 2^k, and the result is handed back.

use super::Bufs;
use crate::error::Result;
use crate::reduce::kernel::{finalize, reduce_inplace};
use crate::reduce::{Dtype, Op};
use crate::transport::{self, Transport};

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
            transport::sendrecv(t, partner, data, partner, tmp)?;
            reduce_inplace(dtype, op, data, tmp);
            mask <<= 1;
        }
        finalize(dtype, op, data, n);
    }
    fold.fold_out(t, data)
}

/// Rabenseifner's all-reduce: a reduce-scatter by recursive halving, then an all-gather by recursive
/// doubling, among the largest power of two of ranks (the others folded in and out as for recursive
/// doubling). Each rank moves the ring's 2(p-1)/p of the message, in 2 log2(p) steps instead of the ring's
/// 2(p-1): fewer steps for the same bytes, which matters as p grows (on 4 ranks here it measured no better than
/// the ring, so `--algo auto` does not pick it). Scratch: one message.
pub fn all_reduce_halving<T: Transport + ?Sized>(
    t: &mut T,
    b: &Bufs<'_>,
    count: usize,
    dtype: Dtype,
    op: Op,
    scratch: &mut [u8],
) -> Result<()> {
    let es = dtype.size();
    let bytes = count * es;
    b.copy_in_to_out(0, 0, bytes);
    let data = b.out(0, bytes);
    let tmp = &mut scratch[..bytes];
    let n = t.size();
    if n == 1 || bytes == 0 {
        finalize(dtype, op, data, n);
        return Ok(());
    }
    let fold = Fold::new(t.rank(), n);
    fold.fold_in(t, data, dtype, op, tmp)?;
    if let Some(v) = fold.vrank {
        let p2 = fold.p2;
        // Block i of the p2 blocks: whole elements, the remainder spread so no block is more than one longer.
        let at = |i: usize| i * count / p2 * es;
        // Reduce-scatter: each step keeps half of the current range and hands the other half to the partner.
        let (mut lo, mut hi) = (0, p2);
        let mut mask = p2 >> 1;
        while mask > 0 {
            let partner = fold.real(v ^ mask);
            let mid = lo + mask;
            let (keep, give) = if v & mask == 0 {
                ((lo, mid), (mid, hi))
            } else {
                ((mid, hi), (lo, mid))
            };
            let (ks, ke) = (at(keep.0), at(keep.1));
            transport::sendrecv(t, partner, &data[at(give.0)..at(give.1)], partner, &mut tmp[ks..ke])?;
            reduce_inplace(dtype, op, &mut data[ks..ke], &tmp[ks..ke]);
            (lo, hi) = keep;
            mask >>= 1;
        }
        debug_assert_eq!((lo, hi), (v, v + 1));
        finalize(dtype, op, &mut data[at(v)..at(v + 1)], n);
        // All-gather: each step swaps the blocks gathered so far with the partner's, which lie next to them.
        let mut mask = 1;
        while mask < p2 {
            let partner = fold.real(v ^ mask);
            let (plo, phi) = if v & mask == 0 {
                (hi, hi + mask)
            } else {
                (lo - mask, lo)
            };
            let (ms, me, ps, pe) = (at(lo), at(hi), at(plo), at(phi));
            if ps >= me {
                let (mine, theirs) = data.split_at_mut(ps);
                transport::sendrecv(t, partner, &mine[ms..me], partner, &mut theirs[..pe - ps])?;
            } else {
                let (theirs, mine) = data.split_at_mut(ms);
                transport::sendrecv(t, partner, &mine[..me - ms], partner, &mut theirs[ps..pe])?;
            }
            (lo, hi) = (lo.min(plo), hi.max(phi));
            mask <<= 1;
        }
    }
    fold.fold_out(t, data)
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
