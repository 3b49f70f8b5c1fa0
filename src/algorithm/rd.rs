//! Recursive doubling: log2(n) exchange steps, for small messages where latency dominates.
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

/// Recursive-doubling all-reduce of `data` in place; `tmp` is as long as `data`.
fn all_reduce_in_place<T: Transport + ?Sized>(
    t: &mut T,
    data: &mut [u8],
    dtype: Dtype,
    op: Op,
    tmp: &mut [u8],
) -> Result<()> {
    let (n, r) = (t.size(), t.rank());
    if n == 1 || data.is_empty() {
        finalize(dtype, op, data, n);
        return Ok(());
    }
    let p2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - p2;
    // Fold the ranks beyond the largest power of two into their neighbours.
    let vrank = if r < 2 * rem {
        if r % 2 == 0 {
            transport::send(t, r + 1, data)?;
            None
        } else {
            transport::recv(t, r - 1, tmp)?;
            reduce_inplace(dtype, op, data, tmp);
            Some(r / 2)
        }
    } else {
        Some(r - rem)
    };
    if let Some(v) = vrank {
        let real = |v: usize| if v < rem { 2 * v + 1 } else { v + rem };
        let mut mask = 1;
        while mask < p2 {
            let partner = real(v ^ mask);
            transport::sendrecv(t, partner, data, partner, tmp)?;
            reduce_inplace(dtype, op, data, tmp);
            mask <<= 1;
        }
        finalize(dtype, op, data, n);
    }
    // Hand the result back to the folded ranks.
    if r < 2 * rem {
        if r % 2 == 1 {
            transport::send(t, r - 1, data)?;
        } else {
            transport::recv(t, r + 1, data)?;
        }
    }
    Ok(())
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
