//! Binomial trees: broadcast and reduce in ceil(log2 n) rounds, and all-reduce as reduce + broadcast.

use super::Bufs;
use crate::error::Result;
use crate::reduce::kernel::{finalize, reduce_inplace};
use crate::reduce::{Dtype, Op};
use crate::transport::{self, Transport};

/// Broadcasts `data` (meaningful on `root`) to every rank along a binomial tree.
fn bcast_tree<T: Transport + ?Sized>(t: &mut T, data: &mut [u8], root: usize) -> Result<()> {
    let (n, r) = (t.size(), t.rank());
    let v = (r + n - root) % n;
    let mut mask = 1;
    while mask < n {
        if v & mask != 0 {
            transport::recv(t, (v - mask + root) % n, data)?;
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if v + mask < n {
            transport::send(t, (v + mask + root) % n, data)?;
        }
        mask >>= 1;
    }
    Ok(())
}

/// Reduces every rank's `acc` into `acc` on `root` along a binomial tree (other ranks' `acc` is clobbered).
fn reduce_tree<T: Transport + ?Sized>(
    t: &mut T,
    acc: &mut [u8],
    tmp: &mut [u8],
    dtype: Dtype,
    op: Op,
    root: usize,
) -> Result<()> {
    let (n, r) = (t.size(), t.rank());
    let v = (r + n - root) % n;
    let mut mask = 1;
    while mask < n {
        if v & mask == 0 {
            let child = v | mask;
            if child < n {
                transport::recv(t, (child + root) % n, tmp)?;
                reduce_inplace(dtype, op, acc, tmp);
            }
        } else {
            transport::send(t, ((v & !mask) + root) % n, acc)?;
            break;
        }
        mask <<= 1;
    }
    Ok(())
}

/// Tree broadcast of `bytes` from `root`.
pub fn broadcast<T: Transport + ?Sized>(t: &mut T, b: &Bufs<'_>, bytes: usize, root: usize) -> Result<()> {
    if t.rank() == root {
        b.copy_in_to_out(0, 0, bytes);
    }
    if bytes == 0 {
        return Ok(());
    }
    bcast_tree(t, b.out(0, bytes), root)
}

/// Tree reduce of `count` elements to `root`. Scratch: two messages.
#[allow(clippy::too_many_arguments)]
pub fn reduce<T: Transport + ?Sized>(
    t: &mut T,
    b: &Bufs<'_>,
    count: usize,
    dtype: Dtype,
    op: Op,
    root: usize,
    scratch: &mut [u8],
) -> Result<()> {
    let (n, r) = (t.size(), t.rank());
    let bytes = count * dtype.size();
    if bytes == 0 {
        return Ok(());
    }
    let (acc, tmp) = scratch[..2 * bytes].split_at_mut(bytes);
    if r == root {
        // The root accumulates straight into its output.
        b.copy_in_to_out(0, 0, bytes);
        let out = b.out(0, bytes);
        reduce_tree(t, out, tmp, dtype, op, root)?;
        finalize(dtype, op, out, n);
    } else {
        acc.copy_from_slice(b.inp(0, bytes));
        reduce_tree(t, acc, tmp, dtype, op, root)?;
    }
    Ok(())
}

/// All-reduce as a tree reduce to rank 0 followed by a tree broadcast. Scratch: one message.
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
    if bytes == 0 {
        return Ok(());
    }
    let out = b.out(0, bytes);
    reduce_tree(t, out, &mut scratch[..bytes], dtype, op, 0)?;
    if t.rank() == 0 {
        finalize(dtype, op, out, t.size());
    }
    bcast_tree(t, out, 0)
}
