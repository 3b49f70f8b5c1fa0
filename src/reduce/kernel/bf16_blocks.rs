//! bfloat16 reductions a block at a time: widen a block of each operand to f32, combine the two f32
//! blocks, round the result back. Each of the three steps is a simple loop over a fixed-size block that
//! LLVM vectorises; combining element by element (widen, add, round, next) left the loop mostly scalar.

use half::bf16;

use super::{bf16_to_f32, f32_to_bf16_bits, Arith, Op};

/// Elements per block (two f32 blocks of 256 bytes on the stack).
pub(super) const BLOCK: usize = 64;

/// `dst = dst op b` when `a` is None, else `dst = a op b`, rounding each result once.
#[inline(always)]
pub(super) fn reduce(op: Op, dst: &mut [bf16], a: Option<&[bf16]>, b: &[bf16]) {
    match op {
        Op::Sum | Op::Avg => blocks(dst, a, b, <f32 as Arith>::sum),
        Op::Prod => blocks(dst, a, b, <f32 as Arith>::prod),
        Op::Max => blocks(dst, a, b, <f32 as Arith>::max),
        Op::Min => blocks(dst, a, b, <f32 as Arith>::min),
    }
}

/// The block loop. The last block may be short: it runs through the same widen/combine/narrow code,
/// with the unused lanes left at zero, so every element is converted the same way.
#[inline(always)]
fn blocks(dst: &mut [bf16], a: Option<&[bf16]>, b: &[bf16], f: impl Fn(f32, f32) -> f32) {
    debug_assert!(dst.len() == b.len() && a.map_or(true, |a| a.len() == b.len()));
    for (i, d) in dst.chunks_mut(BLOCK).enumerate() {
        let at = i * BLOCK..i * BLOCK + d.len();
        let mut x = [0f32; BLOCK];
        let mut y = [0f32; BLOCK];
        match a {
            Some(a) => widen(&a[at.clone()], &mut x),
            None => widen(d, &mut x),
        }
        widen(&b[at], &mut y);
        for k in 0..BLOCK {
            x[k] = f(x[k], y[k]);
        }
        narrow(&x, d);
    }
}

#[inline(always)]
fn widen(src: &[bf16], out: &mut [f32; BLOCK]) {
    for (o, s) in out.iter_mut().zip(src) {
        *o = bf16_to_f32(*s);
    }
}

#[inline(always)]
fn narrow(x: &[f32; BLOCK], dst: &mut [bf16]) {
    for (d, x) in dst.iter_mut().zip(x) {
        *d = bf16::from_bits(f32_to_bf16_bits(*x));
    }
}
