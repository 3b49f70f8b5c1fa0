//! Bruck all-gather: ceil(log2 n) steps for any n, for small messages where latency dominates.

use super::Bufs;
use crate::error::Result;
use crate::transport::{self, Transport};

/// All-gather of `blk`-byte blocks. Scratch: n blocks.
pub fn all_gather<T: Transport + ?Sized>(t: &mut T, b: &Bufs<'_>, blk: usize, scratch: &mut [u8]) -> Result<()> {
    let (n, r) = (t.size(), t.rank());
    let in_off = if b.in_place { r * blk } else { 0 };
    if n == 1 || blk == 0 {
        b.copy_in_to_out(in_off, r * blk, blk);
        return Ok(());
    }
    // tmp[i] ends up holding the block of rank (r + i) mod n.
    let tmp = &mut scratch[..n * blk];
    tmp[..blk].copy_from_slice(b.inp(in_off, blk));
    let mut have = 1;
    while have < n {
        let k = have.min(n - have);
        let to = (r + n - have) % n;
        let from = (r + have) % n;
        let (src, dst) = tmp.split_at_mut(have * blk);
        transport::sendrecv(t, to, &src[..k * blk], from, &mut dst[..k * blk])?;
        have += k;
    }
    for i in 0..n {
        let owner = (r + i) % n;
        b.out(owner * blk, blk).copy_from_slice(&tmp[i * blk..(i + 1) * blk]);
    }
    Ok(())
}
