//! CPU reduction kernels: element-wise `op` over byte buffers holding elements of a dtype.
//!
//! One concern, the CPU kernels (one loop per dtype and op, in plain and AVX2 builds); its tests are
//! nearly half of the file.
//!
//! Each entry point dispatches on (dtype, op) once, then runs a tight loop over typed slices that
//! LLVM auto-vectorises; on x86-64 the same loops are also compiled for AVX2 and picked at run
//! time, and half uses F16C conversions. Semantics follow NCCL: integers wrap, floats are IEEE,
//! half and bfloat16 are widened to f32, combined and rounded back (round to nearest even), and
//! `Avg` is a sum that [`finalize`] divides by the rank count (truncating for integers).

use bytemuck::Pod;
use half::{bf16, f16};

use super::{Dtype, Op};

mod bf16_blocks;

/// `dst[i] = dst[i] op src[i]`. Avg accumulates as a sum; call `finalize` once at the end.
pub fn reduce_inplace(dtype: Dtype, op: Op, dst: &mut [u8], src: &[u8]) {
    assert_eq!(
        dst.len(),
        src.len(),
        "reduce_inplace: dst has {} bytes but src has {}",
        dst.len(),
        src.len()
    );
    match dtype {
        Dtype::Int8 => inplace::<i8>(op, typed_mut(dtype, dst), typed(dtype, src)),
        Dtype::Uint8 => inplace::<u8>(op, typed_mut(dtype, dst), typed(dtype, src)),
        Dtype::Int32 => inplace::<i32>(op, typed_mut(dtype, dst), typed(dtype, src)),
        Dtype::Uint32 => inplace::<u32>(op, typed_mut(dtype, dst), typed(dtype, src)),
        Dtype::Int64 => inplace::<i64>(op, typed_mut(dtype, dst), typed(dtype, src)),
        Dtype::Uint64 => inplace::<u64>(op, typed_mut(dtype, dst), typed(dtype, src)),
        Dtype::Float => inplace::<f32>(op, typed_mut(dtype, dst), typed(dtype, src)),
        Dtype::Double => inplace::<f64>(op, typed_mut(dtype, dst), typed(dtype, src)),
        Dtype::Bfloat16 => bf16_reduce(op, typed_mut(dtype, dst), None, typed(dtype, src)),
        Dtype::Half => fp16::inplace(op, typed_mut(dtype, dst), typed(dtype, src)),
    }
}

/// `dst[i] = a[i] op b[i]` (dst must not overlap a or b). Avg accumulates as a sum.
pub fn reduce_into(dtype: Dtype, op: Op, dst: &mut [u8], a: &[u8], b: &[u8]) {
    assert!(
        dst.len() == a.len() && a.len() == b.len(),
        "reduce_into: dst has {} bytes, a {} and b {}; they must match",
        dst.len(),
        a.len(),
        b.len()
    );
    match dtype {
        Dtype::Int8 => into::<i8>(op, typed_mut(dtype, dst), typed(dtype, a), typed(dtype, b)),
        Dtype::Uint8 => into::<u8>(op, typed_mut(dtype, dst), typed(dtype, a), typed(dtype, b)),
        Dtype::Int32 => into::<i32>(op, typed_mut(dtype, dst), typed(dtype, a), typed(dtype, b)),
        Dtype::Uint32 => into::<u32>(op, typed_mut(dtype, dst), typed(dtype, a), typed(dtype, b)),
        Dtype::Int64 => into::<i64>(op, typed_mut(dtype, dst), typed(dtype, a), typed(dtype, b)),
        Dtype::Uint64 => into::<u64>(op, typed_mut(dtype, dst), typed(dtype, a), typed(dtype, b)),
        Dtype::Float => into::<f32>(op, typed_mut(dtype, dst), typed(dtype, a), typed(dtype, b)),
        Dtype::Double => into::<f64>(op, typed_mut(dtype, dst), typed(dtype, a), typed(dtype, b)),
        Dtype::Bfloat16 => bf16_reduce(op, typed_mut(dtype, dst), Some(typed(dtype, a)), typed(dtype, b)),
        Dtype::Half => fp16::into(op, typed_mut(dtype, dst), typed(dtype, a), typed(dtype, b)),
    }
}

/// For Op::Avg: divide every element by nranks (integers: truncating division like NCCL; floats: compute in f32 for half/bfloat16, f32/f64 otherwise). No-op for other ops.
pub fn finalize(dtype: Dtype, op: Op, buf: &mut [u8], nranks: usize) {
    if op != Op::Avg {
        return;
    }
    assert!(nranks > 0, "finalize: nranks must be at least 1");
    if nranks == 1 {
        return;
    }
    // Integers of at most 32 bits divide through floats, which vectorises where integer division
    // does not. Exact: a non-integer quotient is at least 1/n from an integer, more than the
    // rounding error (2^-24 * 2^8 / n in f32, 2^-53 * 2^32 / n in f64), so truncation matches.
    // The quotients are finite and, as n >= 2, fit in i32, so the unchecked conversion (a single
    // instruction, unlike the saturating `as`) is sound.
    let (n32, n64) = (nranks as f32, nranks as f64);
    match dtype {
        Dtype::Int8 => map(typed_mut::<i8>(dtype, buf), |x| {
            // SAFETY: |x / n| <= 64, finite.
            unsafe { (x as f32 / n32).to_int_unchecked::<i32>() as i8 }
        }),
        Dtype::Uint8 => map(typed_mut::<u8>(dtype, buf), |x| {
            // SAFETY: 0 <= x / n <= 128, finite.
            unsafe { (x as f32 / n32).to_int_unchecked::<i32>() as u8 }
        }),
        Dtype::Int32 => map(typed_mut::<i32>(dtype, buf), |x| {
            // SAFETY: |x / n| <= 2^30, finite.
            unsafe { (x as f64 / n64).to_int_unchecked::<i32>() }
        }),
        Dtype::Uint32 => map(typed_mut::<u32>(dtype, buf), |x| {
            // SAFETY: 0 <= x / n < 2^31, finite.
            unsafe { (x as f64 / n64).to_int_unchecked::<i32>() as u32 }
        }),
        Dtype::Int64 => {
            let d = Divisor::new(nranks as u64);
            map(typed_mut::<i64>(dtype, buf), |x| d.div_i64(x))
        }
        Dtype::Uint64 => {
            let d = Divisor::new(nranks as u64);
            map(typed_mut::<u64>(dtype, buf), |x| d.div_u64(x))
        }
        Dtype::Float => map(typed_mut::<f32>(dtype, buf), |x| x / n32),
        Dtype::Double => map(typed_mut::<f64>(dtype, buf), |x| x / n64),
        Dtype::Bfloat16 => map(typed_mut::<bf16>(dtype, buf), |x| bf16_via(x, n32, |a, n| a / n)),
        Dtype::Half => fp16::divide(typed_mut(dtype, buf), n32),
    }
}

/// Views a byte buffer as elements, with a message naming the dtype when it cannot.
fn typed<T: Pod>(dtype: Dtype, bytes: &[u8]) -> &[T] {
    bytemuck::try_cast_slice(bytes)
        .unwrap_or_else(|e| panic!("buffer of {} bytes is not a {dtype} slice: {e:?}", bytes.len()))
}

/// Mutable counterpart of [`typed`].
fn typed_mut<T: Pod>(dtype: Dtype, bytes: &mut [u8]) -> &mut [T] {
    let len = bytes.len();
    bytemuck::try_cast_slice_mut(bytes)
        .unwrap_or_else(|e| panic!("buffer of {len} bytes is not a {dtype} slice: {e:?}"))
}

/// The four binary operations on one element type (Avg uses `sum`).
trait Arith: Copy {
    fn sum(self, other: Self) -> Self;
    fn prod(self, other: Self) -> Self;
    fn max(self, other: Self) -> Self;
    fn min(self, other: Self) -> Self;
}

macro_rules! int_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)]
            fn sum(self, other: Self) -> Self { self.wrapping_add(other) }
            #[inline(always)]
            fn prod(self, other: Self) -> Self { self.wrapping_mul(other) }
            #[inline(always)]
            fn max(self, other: Self) -> Self { Ord::max(self, other) }
            #[inline(always)]
            fn min(self, other: Self) -> Self { Ord::min(self, other) }
        }
    )*};
}
int_arith!(i8, u8, i32, u32, i64, u64);

macro_rules! float_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)]
            fn sum(self, other: Self) -> Self { self + other }
            #[inline(always)]
            fn prod(self, other: Self) -> Self { self * other }
            // IEEE maxNum/minNum (a NaN operand is ignored, as CUDA's fmaxf): a plain comparison
            // would be a select of the loaded value, which LLVM stores in place with a masked
            // store, several times slower on AMD than a vector max plus an unordered blend.
            #[inline(always)]
            fn max(self, other: Self) -> Self { <$t>::max(self, other) }
            #[inline(always)]
            fn min(self, other: Self) -> Self { <$t>::min(self, other) }
        }
    )*};
}
float_arith!(f32, f64);

// bfloat16 widens to f32 by a shift and narrows by integer rounding, all vectorisable, so it
// runs through the same element-wise loops as the other types.
impl Arith for bf16 {
    #[inline(always)]
    fn sum(self, other: Self) -> Self {
        bf16_via(self, bf16_to_f32(other), |a, b| a + b)
    }
    #[inline(always)]
    fn prod(self, other: Self) -> Self {
        bf16_via(self, bf16_to_f32(other), |a, b| a * b)
    }
    #[inline(always)]
    fn max(self, other: Self) -> Self {
        bf16_via(self, bf16_to_f32(other), <f32 as Arith>::max)
    }
    #[inline(always)]
    fn min(self, other: Self) -> Self {
        bf16_via(self, bf16_to_f32(other), <f32 as Arith>::min)
    }
}

/// f(x, y) computed in f32 and rounded back to bfloat16.
#[inline(always)]
fn bf16_via(x: bf16, y: f32, f: impl Fn(f32, f32) -> f32) -> bf16 {
    bf16::from_bits(f32_to_bf16_bits(f(bf16_to_f32(x), y)))
}

#[inline(always)]
fn bf16_to_f32(x: bf16) -> f32 {
    f32::from_bits((x.to_bits() as u32) << 16)
}

/// f32 -> bfloat16 with round to nearest even (as __float2bfloat16_rn); NaN stays a quiet NaN.
/// Branch-free, unlike half's conversion, so that loops using it vectorise.
#[inline(always)]
fn f32_to_bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let rounded = (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16;
    let is_nan = (b & 0x7fff_ffff) > 0x7f80_0000;
    if is_nan {
        ((b >> 16) | 0x40) as u16
    } else {
        rounded
    }
}

/// bfloat16 `op` in blocks (see [`bf16_blocks`]), compiled for AVX2 too when the CPU has it.
fn bf16_reduce(op: Op, dst: &mut [bf16], a: Option<&[bf16]>, b: &[bf16]) {
    #[cfg(target_arch = "x86_64")]
    if x86::has_avx2() {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { x86::bf16_avx2(op, dst, a, b) };
    }
    bf16_blocks::reduce(op, dst, a, b)
}

/// Applies `op` in place; the match is outside the loops so each loop is monomorphic.
fn inplace<T: Arith>(op: Op, dst: &mut [T], src: &[T]) {
    match op {
        Op::Sum | Op::Avg => zip_inplace(dst, src, T::sum),
        Op::Prod => zip_inplace(dst, src, T::prod),
        Op::Max => zip_inplace(dst, src, T::max),
        Op::Min => zip_inplace(dst, src, T::min),
    }
}

/// Applies `op` out of place.
fn into<T: Arith>(op: Op, dst: &mut [T], a: &[T], b: &[T]) {
    match op {
        Op::Sum | Op::Avg => zip_into(dst, a, b, T::sum),
        Op::Prod => zip_into(dst, a, b, T::prod),
        Op::Max => zip_into(dst, a, b, T::max),
        Op::Min => zip_into(dst, a, b, T::min),
    }
}

/// `dst[i] = f(dst[i], src[i])`, compiled for AVX2 too when the CPU has it.
#[inline(always)]
fn zip_inplace<T: Copy, F: Fn(T, T) -> T>(dst: &mut [T], src: &[T], f: F) {
    #[cfg(target_arch = "x86_64")]
    if x86::has_avx2() {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { x86::zip_inplace_avx2(dst, src, f) };
    }
    zip_inplace_loop(dst, src, f)
}

/// `dst[i] = f(a[i], b[i])`, compiled for AVX2 too when the CPU has it.
#[inline(always)]
fn zip_into<T: Copy, F: Fn(T, T) -> T>(dst: &mut [T], a: &[T], b: &[T], f: F) {
    #[cfg(target_arch = "x86_64")]
    if x86::has_avx2() {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { x86::zip_into_avx2(dst, a, b, f) };
    }
    zip_into_loop(dst, a, b, f)
}

/// `buf[i] = f(buf[i])`, compiled for AVX2 too when the CPU has it.
#[inline(always)]
fn map<T: Copy, F: Fn(T) -> T>(buf: &mut [T], f: F) {
    #[cfg(target_arch = "x86_64")]
    if x86::has_avx2() {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { x86::map_avx2(buf, f) };
    }
    map_loop(buf, f)
}

/// Elements per step of the in-place loop.
const LANES: usize = 32;

// Results go to a stack block that is stored whole: with `*d = f(*d, *s)` LLVM turns max/min
// into "store only where the source wins", a branchy scalar loop several times slower.
#[inline(always)]
fn zip_inplace_loop<T: Copy>(dst: &mut [T], src: &[T], f: impl Fn(T, T) -> T) {
    let mut d = dst.chunks_exact_mut(LANES);
    let mut s = src.chunks_exact(LANES);
    for (d, s) in (&mut d).zip(&mut s) {
        let r: [T; LANES] = std::array::from_fn(|k| f(d[k], s[k]));
        d.copy_from_slice(&r);
    }
    for (d, s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = f(*d, *s);
    }
}

#[inline(always)]
fn zip_into_loop<T: Copy>(dst: &mut [T], a: &[T], b: &[T], f: impl Fn(T, T) -> T) {
    for ((d, x), y) in dst.iter_mut().zip(a).zip(b) {
        *d = f(*x, *y);
    }
}

#[inline(always)]
fn map_loop<T: Copy>(buf: &mut [T], f: impl Fn(T) -> T) {
    for x in buf {
        *x = f(*x);
    }
}

/// Truncating 64-bit division by a fixed divisor through a multiply by its reciprocal, because
/// a hardware 64-bit divide per element would make `finalize` slower than the reduction itself.
/// (Integers of at most 32 bits divide through f64/f32 instead: a non-integer quotient is at
/// least 1/n from an integer, more than the float rounding error, so truncation is exact.)
#[derive(Clone, Copy)]
struct Divisor {
    n: u64,
    /// floor((2^64 - 1) / n). Then x * recip / 2^64 >= x / n - x / 2^64 > x / n - 1, so its
    /// floor is the quotient or one below it.
    recip: u64,
}

impl Divisor {
    fn new(n: u64) -> Self {
        assert!(n > 0);
        Divisor { n, recip: u64::MAX / n }
    }

    #[inline(always)]
    fn div_u64(self, x: u64) -> u64 {
        let q = ((x as u128 * self.recip as u128) >> 64) as u64;
        // The estimate undershoots by at most 1 (see `recip`).
        if x - q * self.n >= self.n {
            q + 1
        } else {
            q
        }
    }

    /// Truncating signed division: divide the magnitude, then restore the sign.
    #[inline(always)]
    fn div_i64(self, x: i64) -> i64 {
        let q = self.div_u64(x.unsigned_abs()) as i64;
        if x < 0 {
            q.wrapping_neg()
        } else {
            q
        }
    }
}

/// Half precision: F16C conversions on x86-64 when present, half's slice conversions otherwise.
mod fp16 {
    use super::*;

    /// In-place `op` on half values.
    pub(super) fn inplace(op: Op, dst: &mut [f16], src: &[f16]) {
        #[cfg(target_arch = "x86_64")]
        if x86::has_f16c() {
            // SAFETY: the CPU supports AVX2 and F16C, checked just above.
            return unsafe { x86::half_inplace(op, dst, src) };
        }
        portable(op, dst, src, None)
    }

    /// Out-of-place `op` on half values.
    pub(super) fn into(op: Op, dst: &mut [f16], a: &[f16], b: &[f16]) {
        #[cfg(target_arch = "x86_64")]
        if x86::has_f16c() {
            // SAFETY: the CPU supports AVX2 and F16C, checked just above.
            return unsafe { x86::half_into(op, dst, a, b) };
        }
        portable(op, dst, a, Some(b))
    }

    /// Divides half values by `n` in f32.
    pub(super) fn divide(buf: &mut [f16], n: f32) {
        #[cfg(target_arch = "x86_64")]
        if x86::has_f16c() {
            // SAFETY: the CPU supports AVX2 and F16C, checked just above.
            return unsafe { x86::half_divide(buf, n) };
        }
        divide_portable(buf, n)
    }

    /// `divide` without F16C.
    pub(super) fn divide_portable(buf: &mut [f16], n: f32) {
        for chunk in buf.chunks_mut(BLOCK) {
            let mut x = [0f32; BLOCK];
            let x = &mut x[..chunk.len()];
            chunk.convert_to_f32_slice(x);
            for v in x.iter_mut() {
                *v /= n;
            }
            chunk.convert_from_f32_slice(x);
        }
    }

    use ::half::slice::HalfFloatSliceExt;

    /// Elements per block widened to f32 on the stack (512 bytes for two blocks).
    const BLOCK: usize = 64;

    /// `op` without F16C: dst = dst op a when `b` is None, else dst = a op b.
    pub(super) fn portable(op: Op, dst: &mut [f16], a: &[f16], b: Option<&[f16]>) {
        match op {
            Op::Sum | Op::Avg => blocks(dst, a, b, <f32 as Arith>::sum),
            Op::Prod => blocks(dst, a, b, <f32 as Arith>::prod),
            Op::Max => blocks(dst, a, b, <f32 as Arith>::max),
            Op::Min => blocks(dst, a, b, <f32 as Arith>::min),
        }
    }

    /// dst = f(dst, a) when `b` is None, else dst = f(a, b); blockwise through f32.
    fn blocks(dst: &mut [f16], a: &[f16], b: Option<&[f16]>, f: impl Fn(f32, f32) -> f32) {
        let mut x = [0f32; BLOCK];
        let mut y = [0f32; BLOCK];
        for (k, d) in dst.chunks_mut(BLOCK).enumerate() {
            let at = k * BLOCK..k * BLOCK + d.len();
            let (x, y) = (&mut x[..d.len()], &mut y[..d.len()]);
            match b {
                None => d.convert_to_f32_slice(x),
                Some(_) => a[at.clone()].convert_to_f32_slice(x),
            }
            b.unwrap_or(a)[at].convert_to_f32_slice(y);
            zip_inplace_loop(x, y, &f);
            d.convert_from_f32_slice(x);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use half::{bf16, f16};

    use super::{map_loop, zip_inplace_loop, zip_into_loop, Op};

    /// True when the CPU has AVX2 (the answer is cached by std after the first call).
    #[inline(always)]
    pub(super) fn has_avx2() -> bool {
        std::arch::is_x86_feature_detected!("avx2")
    }

    /// True when the CPU has AVX2 and F16C.
    #[inline(always)]
    pub(super) fn has_f16c() -> bool {
        has_avx2() && std::arch::is_x86_feature_detected!("f16c")
    }

    // The generic loops again, compiled with AVX2 enabled: `f` is inlined into them, so the
    // whole loop is vectorised 256 bits wide.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn zip_inplace_avx2<T: Copy, F: Fn(T, T) -> T>(dst: &mut [T], src: &[T], f: F) {
        zip_inplace_loop(dst, src, f)
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn zip_into_avx2<T: Copy, F: Fn(T, T) -> T>(dst: &mut [T], a: &[T], b: &[T], f: F) {
        zip_into_loop(dst, a, b, f)
    }

    /// bfloat16 `op` with AVX2: sum and product sixteen at a time in registers (widen by a shift, round
    /// back by integer arithmetic as [`super::f32_to_bf16_bits`]); max and min through the block kernel,
    /// whose compiled maxNum/minNum NaN handling this would otherwise have to repeat.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn bf16_avx2(op: Op, dst: &mut [bf16], a: Option<&[bf16]>, b: &[bf16]) {
        let n = dst.len();
        let d = dst.as_mut_ptr() as *mut u16;
        let x = a.map_or(d as *const u16, |a| a.as_ptr() as *const u16);
        let y = b.as_ptr() as *const u16;
        match op {
            Op::Sum | Op::Avg => bf16_loop(d, x, y, n, |a, b| _mm256_add_ps(a, b)),
            Op::Prod => bf16_loop(d, x, y, n, |a, b| _mm256_mul_ps(a, b)),
            Op::Max | Op::Min => super::bf16_blocks::reduce(op, dst, a, b),
        }
    }

    /// `dst[i] = f(x[i], y[i])` for `n` bfloat16 values, sixteen per step; a tail of under sixteen goes
    /// through a padded stack copy so every element is converted the same way. `dst` may equal `x`.
    #[inline(always)]
    unsafe fn bf16_loop<F: Fn(__m256, __m256) -> __m256>(dst: *mut u16, x: *const u16, y: *const u16, n: usize, f: F) {
        let mut i = 0;
        // A cache line of each input a turn, with one prefetch of each (a prefetch per step takes load slots
        // the loads need).
        while i + 32 <= n {
            prefetch_ahead(x, y, i);
            bf16_step(dst.add(i), x.add(i), y.add(i), &f);
            bf16_step(dst.add(i + 16), x.add(i + 16), y.add(i + 16), &f);
            i += 32;
        }
        if i + 16 <= n {
            bf16_step(dst.add(i), x.add(i), y.add(i), &f);
            i += 16;
        }
        if i < n {
            let rest = n - i;
            let (mut a, mut b, mut r) = ([0u16; 16], [0u16; 16], [0u16; 16]);
            std::ptr::copy_nonoverlapping(x.add(i), a.as_mut_ptr(), rest);
            std::ptr::copy_nonoverlapping(y.add(i), b.as_mut_ptr(), rest);
            bf16_step(r.as_mut_ptr(), a.as_ptr(), b.as_ptr(), &f);
            std::ptr::copy_nonoverlapping(r.as_ptr(), dst.add(i), rest);
        }
    }

    /// Elements of 16 bits a half or bfloat16 loop asks for ahead of the one it reads (1 KiB). Their
    /// conversions take so many instructions per cache line that the out-of-order window spans only a few
    /// lines, and on some machines the hardware prefetcher alone then leaves the loop waiting on memory.
    /// Measured at 64 MiB on two Zen 3 machines: on one, bfloat16 and half sum ran at 0.82-0.97 of the copy
    /// rate without prefetch against 1.06-1.22 with it (0.5, 1 and 1.5 KiB ahead alike; 1 KiB best); on the
    /// other, 2 KiB ahead had measured 0.79-1.00 against 0.97-1.15 without. In the caches it costs nothing
    /// measurable. Kept for the better worst case.
    const AHEAD: usize = 512;

    /// Asks for the cache lines [`AHEAD`] elements past `i` of both inputs: a hint, which never faults, so
    /// addresses past the end are harmless (and computed with wrapping arithmetic, never dereferenced).
    #[inline(always)]
    unsafe fn prefetch_ahead(x: *const u16, y: *const u16, i: usize) {
        _mm_prefetch::<_MM_HINT_T0>(x.wrapping_add(i + AHEAD) as *const i8);
        _mm_prefetch::<_MM_HINT_T0>(y.wrapping_add(i + AHEAD) as *const i8);
    }

    // Helpers are functions marked inline(always), not closures: closures were left as calls, which
    // made the loop some fifty times slower.

    /// Sixteen results from sixteen elements of `x` and of `y`. Each 32-bit lane holds two elements, the
    /// even one in its low half and the odd one in its high half; a bfloat16 in the high half of a lane,
    /// zeros below, is its f32, so masking gives the odd elements' f32 and shifting up the even ones'.
    /// The rounded results come back in the low halves and the odd ones shift up again. Shifts and masks
    /// run on more of a core's vector ports than the unpack and pack shuffles this replaced (bfloat16
    /// sum in cache: 53.9 -> 56.3 GB/s on a Zen 3 core).
    #[inline(always)]
    unsafe fn bf16_step<F: Fn(__m256, __m256) -> __m256>(d: *mut u16, x: *const u16, y: *const u16, f: &F) {
        let xv = _mm256_loadu_si256(x as *const __m256i);
        let yv = _mm256_loadu_si256(y as *const __m256i);
        let hm = _mm256_set1_epi32(0xffff_0000_u32 as i32);
        // `lo`: the even elements, `hi`: the odd ones.
        let lo = f(
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(xv)),
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(yv)),
        );
        let hi = f(
            _mm256_castsi256_ps(_mm256_and_si256(xv, hm)),
            _mm256_castsi256_ps(_mm256_and_si256(yv, hm)),
        );
        let (lo, hi) = (bf16_round(lo), bf16_round(hi));
        _mm256_storeu_si256(d as *mut __m256i, _mm256_or_si256(lo, _mm256_slli_epi32::<16>(hi)));
    }

    /// Eight f32 rounded to bfloat16 (nearest even), as 32-bit lanes. A NaN here needs no select to stay
    /// a NaN: the inputs were bfloat16 (low 16 bits zero), and x86 arithmetic returns either an input NaN,
    /// quieted, or the default NaN 0xffc00000, so a NaN's low 16 bits are zero and adding the bias cannot
    /// carry into its top half. Without the NaN test and select this once had, bfloat16 sum in cache went
    /// from 56.3 to 72.9 GB/s on a Zen 3 core; `bfloat16_nan_payloads_stay_nan` checks every NaN pattern.
    #[inline(always)]
    unsafe fn bf16_round(v: __m256) -> __m256i {
        let b = _mm256_castps_si256(v);
        let high = _mm256_srli_epi32::<16>(b);
        let bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(high, _mm256_set1_epi32(1)));
        _mm256_srli_epi32::<16>(_mm256_add_epi32(b, bias))
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn map_avx2<T: Copy, F: Fn(T) -> T>(buf: &mut [T], f: F) {
        map_loop(buf, f)
    }

    /// In-place `op` on half values, eight at a time through F16C.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn half_inplace(op: Op, dst: &mut [f16], src: &[f16]) {
        let d = dst.as_mut_ptr() as *mut u16;
        let n = dst.len().min(src.len());
        match op {
            Op::Sum | Op::Avg => half_loop(d, d, src.as_ptr() as _, n, |a, b| _mm256_add_ps(a, b)),
            Op::Prod => half_loop(d, d, src.as_ptr() as _, n, |a, b| _mm256_mul_ps(a, b)),
            // max_ps(x, y) is x > y ? x : y, so NaN in dst propagates here (unlike maxNum);
            // NaN handling is unspecified, and this keeps the loop at one instruction.
            Op::Max => half_loop(d, d, src.as_ptr() as _, n, |a, b| _mm256_max_ps(b, a)),
            Op::Min => half_loop(d, d, src.as_ptr() as _, n, |a, b| _mm256_min_ps(b, a)),
        }
    }

    /// Out-of-place `op` on half values through F16C.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn half_into(op: Op, dst: &mut [f16], a: &[f16], b: &[f16]) {
        let d = dst.as_mut_ptr() as *mut u16;
        let (x, y) = (a.as_ptr() as *const u16, b.as_ptr() as *const u16);
        let n = dst.len().min(a.len()).min(b.len());
        match op {
            Op::Sum | Op::Avg => half_loop(d, x, y, n, |a, b| _mm256_add_ps(a, b)),
            Op::Prod => half_loop(d, x, y, n, |a, b| _mm256_mul_ps(a, b)),
            Op::Max => half_loop(d, x, y, n, |a, b| _mm256_max_ps(b, a)),
            Op::Min => half_loop(d, x, y, n, |a, b| _mm256_min_ps(b, a)),
        }
    }

    /// Divides half values by `n` in f32 through F16C.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn half_divide(buf: &mut [f16], n: f32) {
        let d = buf.as_mut_ptr() as *mut u16;
        let nv = _mm256_set1_ps(n);
        half_loop(d, d, d, buf.len(), |a, _| _mm256_div_ps(a, nv));
    }

    /// `dst[i] = f(x[i], y[i])` for `n` half values; a tail of under eight goes through a padded
    /// stack copy so every element is converted the same way. `dst` may equal `x` or `y`.
    #[inline(always)]
    unsafe fn half_loop(dst: *mut u16, x: *const u16, y: *const u16, n: usize, f: impl Fn(__m256, __m256) -> __m256) {
        let step = |d: *mut u16, x: *const u16, y: *const u16| {
            let a = _mm256_cvtph_ps(_mm_loadu_si128(x as *const __m128i));
            let b = _mm256_cvtph_ps(_mm_loadu_si128(y as *const __m128i));
            let r = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(f(a, b));
            _mm_storeu_si128(d as *mut __m128i, r);
        };
        let mut i = 0;
        // A cache line of each input a turn, one prefetch of each (as in `bf16_loop`).
        while i + 32 <= n {
            prefetch_ahead(x, y, i);
            for k in (0..32).step_by(8) {
                step(dst.add(i + k), x.add(i + k), y.add(i + k));
            }
            i += 32;
        }
        while i + 8 <= n {
            step(dst.add(i), x.add(i), y.add(i));
            i += 8;
        }
        if i < n {
            let rest = n - i;
            let (mut a, mut b, mut r) = ([0u16; 8], [0u16; 8], [0u16; 8]);
            std::ptr::copy_nonoverlapping(x.add(i), a.as_mut_ptr(), rest);
            std::ptr::copy_nonoverlapping(y.add(i), b.as_mut_ptr(), rest);
            step(r.as_mut_ptr(), a.as_ptr(), b.as_ptr());
            std::ptr::copy_nonoverlapping(r.as_ptr(), dst.add(i), rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random bytes (SplitMix64), so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    /// Reads element `i` as a number: integers exactly in i128, floats in f64.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Num {
        I(i128),
        F(f64),
    }

    fn get(dtype: Dtype, buf: &[u8], i: usize) -> Num {
        let s = dtype.size();
        let b = &buf[i * s..(i + 1) * s];
        match dtype {
            Dtype::Int8 => Num::I(b[0] as i8 as i128),
            Dtype::Uint8 => Num::I(b[0] as i128),
            Dtype::Int32 => Num::I(i32::from_ne_bytes(b.try_into().unwrap()) as i128),
            Dtype::Uint32 => Num::I(u32::from_ne_bytes(b.try_into().unwrap()) as i128),
            Dtype::Int64 => Num::I(i64::from_ne_bytes(b.try_into().unwrap()) as i128),
            Dtype::Uint64 => Num::I(u64::from_ne_bytes(b.try_into().unwrap()) as i128),
            Dtype::Half => Num::F(f16::from_ne_bytes(b.try_into().unwrap()).to_f64()),
            Dtype::Bfloat16 => Num::F(bf16::from_ne_bytes(b.try_into().unwrap()).to_f64()),
            Dtype::Float => Num::F(f32::from_ne_bytes(b.try_into().unwrap()) as f64),
            Dtype::Double => Num::F(f64::from_ne_bytes(b.try_into().unwrap())),
        }
    }

    /// Writes a number as element `i`, wrapping integers and rounding floats once (to nearest).
    fn put(dtype: Dtype, buf: &mut [u8], i: usize, v: Num) {
        let s = dtype.size();
        let b = &mut buf[i * s..(i + 1) * s];
        let (iv, fv) = match v {
            Num::I(x) => (x, x as f64),
            Num::F(x) => (x as i128, x),
        };
        match dtype {
            Dtype::Int8 => b.copy_from_slice(&(iv as i8).to_ne_bytes()),
            Dtype::Uint8 => b.copy_from_slice(&(iv as u8).to_ne_bytes()),
            Dtype::Int32 => b.copy_from_slice(&(iv as i32).to_ne_bytes()),
            Dtype::Uint32 => b.copy_from_slice(&(iv as u32).to_ne_bytes()),
            Dtype::Int64 => b.copy_from_slice(&(iv as i64).to_ne_bytes()),
            Dtype::Uint64 => b.copy_from_slice(&(iv as u64).to_ne_bytes()),
            Dtype::Half => b.copy_from_slice(&f16::from_f64(fv).to_ne_bytes()),
            Dtype::Bfloat16 => b.copy_from_slice(&bf16::from_f64(fv).to_ne_bytes()),
            Dtype::Float => b.copy_from_slice(&(fv as f32).to_ne_bytes()),
            Dtype::Double => b.copy_from_slice(&fv.to_ne_bytes()),
        }
    }

    /// The scalar reference: exact integer arithmetic then wrap; floats in f64 then one rounding
    /// (equal to the kernels' f32-then-narrow results, since f32 carries over 2p+2 bits).
    fn reference(op: Op, a: Num, b: Num) -> Num {
        match (a, b) {
            (Num::I(x), Num::I(y)) => Num::I(match op {
                Op::Sum | Op::Avg => x + y,
                Op::Prod => x.wrapping_mul(y),
                Op::Max => x.max(y),
                Op::Min => x.min(y),
            }),
            (Num::F(x), Num::F(y)) => Num::F(match op {
                Op::Sum | Op::Avg => x + y,
                Op::Prod => x * y,
                Op::Max => x.max(y),
                Op::Min => x.min(y),
            }),
            _ => unreachable!(),
        }
    }

    /// Random elements: any bit pattern for integers, finite values of mixed sign and scale for
    /// floats (so that products stay finite and comparisons are meaningful).
    fn random_buf(dtype: Dtype, len: usize, rng: &mut Rng) -> Vec<u8> {
        let mut buf = vec![0u8; len * dtype.size()];
        for i in 0..len {
            let r = rng.next();
            let v = if dtype.is_float() {
                let mant = (r >> 11) as f64 / (1u64 << 53) as f64 * 200.0 - 100.0;
                Num::F(mant * [1.0, 0.5, 0.015625, 3.0][(r & 3) as usize])
            } else {
                Num::I(r as i64 as i128)
            };
            put(dtype, &mut buf, i, v);
        }
        buf
    }

    /// A u64-aligned copy, as the real buffers are element-aligned.
    fn aligned(bytes: &[u8]) -> Vec<u64> {
        let mut v = vec![0u64; bytes.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut v)[..bytes.len()].copy_from_slice(bytes);
        v
    }

    fn bytes(v: &[u64], len: usize) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(v)[..len]
    }

    fn bytes_mut(v: &mut [u64], len: usize) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut::<u64, u8>(v)[..len]
    }

    #[test]
    fn every_dtype_and_op_matches_the_scalar_reference() {
        let mut rng = Rng(42);
        for dtype in Dtype::ALL {
            for op in Op::ALL {
                // The vector loops' boundaries: 32-value blocks (one cache line of each input, prefetched
                // ahead), then single steps (16 bfloat16 or 8 half values), then the padded tail.
                for len in [
                    0usize, 1, 7, 8, 15, 16, 24, 31, 32, 33, 40, 48, 57, 63, 64, 65, 79, 1003,
                ] {
                    let nb = len * dtype.size();
                    let a = random_buf(dtype, len, &mut rng);
                    let b = random_buf(dtype, len, &mut rng);
                    let mut want = vec![0u8; nb];
                    for i in 0..len {
                        let v = reference(op, get(dtype, &a, i), get(dtype, &b, i));
                        put(dtype, &mut want, i, v);
                    }
                    let (a, b) = (aligned(&a), aligned(&b));

                    let mut dst = a.clone();
                    reduce_inplace(dtype, op, bytes_mut(&mut dst, nb), bytes(&b, nb));
                    assert_eq!(bytes(&dst, nb), &want[..], "inplace {dtype} {op} len {len}");

                    let mut out = vec![0u64; a.len()];
                    reduce_into(dtype, op, bytes_mut(&mut out, nb), bytes(&a, nb), bytes(&b, nb));
                    assert_eq!(bytes(&out, nb), &want[..], "into {dtype} {op} len {len}");
                }
            }
        }
    }

    #[test]
    fn small_integers_wrap() {
        let mut a = [100i8, -100, 127, -128, 16];
        let b = [100i8, -100, 1, -1, 16];
        reduce_inplace(
            Dtype::Int8,
            Op::Sum,
            bytemuck::cast_slice_mut(&mut a),
            bytemuck::cast_slice(&b),
        );
        assert_eq!(a, [-56, 56, -128, 127, 32]);
        let mut a = [100i8, -100, 127, -128, 16];
        reduce_inplace(
            Dtype::Int8,
            Op::Prod,
            bytemuck::cast_slice_mut(&mut a),
            bytemuck::cast_slice(&b),
        );
        assert_eq!(a, [16, 16, 127, -128, 0]);

        let mut a = [200u8, 255, 0, 16];
        let b = [100u8, 1, 255, 16];
        reduce_inplace(Dtype::Uint8, Op::Sum, &mut a, &b);
        assert_eq!(a, [44, 0, 255, 32]);
        let mut a = [200u8, 255, 0, 16];
        reduce_inplace(Dtype::Uint8, Op::Prod, &mut a, &b);
        // 255 is -1 modulo 256: 255 * 255 == 1 and -1 * x == 256 - x.
        assert_eq!(a, [32, 255, 0, 0]);
        let mut a = [255u8];
        reduce_inplace(Dtype::Uint8, Op::Prod, &mut a, &[255u8]);
        assert_eq!(a, [1]);
    }

    #[test]
    fn half_and_bfloat16_round_to_nearest_even() {
        let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
        // Above 2048 half steps by 2: 2049 ties to 2048 (even), 2051 ties to 2052.
        let mut a = h(&[2048.0, 2048.0, 1.0, 65504.0]);
        let b = h(&[1.0, 3.0, 0.000_488_281_25, 65504.0]);
        reduce_inplace(
            Dtype::Half,
            Op::Sum,
            bytemuck::cast_slice_mut(&mut a),
            bytemuck::cast_slice(&b),
        );
        assert_eq!(a, h(&[2048.0, 2052.0, 1.0, f32::INFINITY]));

        let bf = |v: &[f32]| v.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>();
        // Above 256 bfloat16 steps by 2: 257 ties to 256, 259 ties to 260; 1 + 2^-8 ties to 1.
        let mut a = bf(&[256.0, 256.0, 1.0, 3.0]);
        let b = bf(&[1.0, 3.0, 0.003_906_25, 3.0]);
        let mut out = a.clone();
        reduce_into(
            Dtype::Bfloat16,
            Op::Sum,
            bytemuck::cast_slice_mut(&mut out),
            bytemuck::cast_slice(&a),
            bytemuck::cast_slice(&b),
        );
        assert_eq!(out, bf(&[256.0, 260.0, 1.0, 6.0]));
        // 3 * 1.0078125 = 3.0234375 is a tie between 3.015625 and 3.03125 (even mantissa).
        a[0] = bf16::from_f32(3.0);
        let b = bf(&[1.007_812_5, 1.0, 1.0, 1.0]);
        reduce_inplace(
            Dtype::Bfloat16,
            Op::Prod,
            bytemuck::cast_slice_mut(&mut a),
            bytemuck::cast_slice(&b),
        );
        assert_eq!(a[0], bf16::from_f32(3.031_25));
    }

    #[test]
    fn bfloat16_conversion_matches_half_crate() {
        let mut rng = Rng(7);
        let special = [
            0.0f32,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-40,
        ];
        for x in special
            .into_iter()
            .chain((0..100_000).map(|_| f32::from_bits(rng.next() as u32)))
        {
            let ours = bf16::from_bits(f32_to_bf16_bits(x));
            let theirs = bf16::from_f32(x);
            if x.is_nan() {
                assert!(ours.is_nan(), "{x:e}");
            } else {
                assert_eq!(ours.to_bits(), theirs.to_bits(), "{x:e}");
            }
        }
        assert!(
            f32_to_bf16_bits(f32::from_bits(0x7f80_0001)) & 0x7f != 0,
            "NaN must stay NaN"
        );
    }

    #[test]
    fn avg_finalize_truncates_integers() {
        let mut a = [-7i32, 7, 6, -6, 0, i32::MIN, i32::MAX];
        finalize(Dtype::Int32, Op::Avg, bytemuck::cast_slice_mut(&mut a), 4);
        assert_eq!(a, [-1, 1, 1, -1, 0, i32::MIN / 4, i32::MAX / 4]);

        let mut a = [-128i8, 127, -3, 3];
        finalize(Dtype::Int8, Op::Avg, bytemuck::cast_slice_mut(&mut a), 3);
        assert_eq!(a, [-42, 42, -1, 1]);
        let mut a = [-128i8, 127];
        finalize(Dtype::Int8, Op::Avg, bytemuck::cast_slice_mut(&mut a), 1024);
        assert_eq!(a, [0, 0]);

        let mut a = [255u8, 7];
        finalize(Dtype::Uint8, Op::Avg, &mut a, 2);
        assert_eq!(a, [127, 3]);

        let mut a = [i64::MIN, i64::MAX, -7, 7, -1];
        finalize(Dtype::Int64, Op::Avg, bytemuck::cast_slice_mut(&mut a), 2);
        assert_eq!(a, [i64::MIN / 2, i64::MAX / 2, -3, 3, 0]);

        let mut a = [u64::MAX, 10];
        finalize(Dtype::Uint64, Op::Avg, bytemuck::cast_slice_mut(&mut a), 3);
        assert_eq!(a, [u64::MAX / 3, 3]);

        // Other ops are left alone.
        let mut a = [9i32];
        finalize(Dtype::Int32, Op::Sum, bytemuck::cast_slice_mut(&mut a), 4);
        assert_eq!(a, [9]);
    }

    #[test]
    fn fast_division_matches_hardware_division() {
        let mut rng = Rng(3);
        let divisors = (1..300u64).chain([1023, 1024, 1 << 32, u64::MAX / 3, u64::MAX - 1, u64::MAX]);
        for n in divisors {
            let d = Divisor::new(n);
            let xs = [
                0,
                1,
                n - 1,
                n,
                n.wrapping_add(1),
                u64::MAX,
                u64::MAX - 1,
                i64::MAX as u64,
            ];
            for x in xs.into_iter().chain((0..200).map(|_| rng.next())) {
                assert_eq!(d.div_u64(x), x / n, "{x} / {n}");
                let s = x as i64;
                if n <= i64::MAX as u64 {
                    assert_eq!(d.div_i64(s), s.wrapping_div(n as i64), "{s} / {n}");
                }
            }
        }
        for n in 1..1500usize {
            let mut v = [i32::MIN, i32::MAX, -1, 1, -(n as i32) + 1, n as i32 * 3 - 1];
            let want = v.map(|x| x / n as i32);
            finalize(Dtype::Int32, Op::Avg, bytemuck::cast_slice_mut(&mut v), n);
            assert_eq!(v, want, "n = {n}");
            let mut u = [u32::MAX, u32::MAX - 1, n as u32 * 7 - 1];
            let want = u.map(|x| x / n as u32);
            finalize(Dtype::Uint32, Op::Avg, bytemuck::cast_slice_mut(&mut u), n);
            assert_eq!(u, want, "n = {n}");
            let mut b: Vec<i8> = (-128..=127).collect();
            let want: Vec<i8> = b.iter().map(|&x| (x as i32 / n as i32) as i8).collect();
            finalize(Dtype::Int8, Op::Avg, bytemuck::cast_slice_mut(&mut b), n);
            assert_eq!(b, want, "n = {n}");
            let mut b: Vec<u8> = (0..=255).collect();
            let want: Vec<u8> = b.iter().map(|&x| (x as usize / n) as u8).collect();
            finalize(Dtype::Uint8, Op::Avg, &mut b, n);
            assert_eq!(b, want, "n = {n}");
        }
    }

    #[test]
    fn avg_finalize_divides_floats() {
        let mut a = [3.0f32, -1.5, 0.0];
        finalize(Dtype::Float, Op::Avg, bytemuck::cast_slice_mut(&mut a), 3);
        assert_eq!(a, [1.0, -0.5, 0.0]);
        let mut a = [1.0f64, 7.0];
        finalize(Dtype::Double, Op::Avg, bytemuck::cast_slice_mut(&mut a), 2);
        assert_eq!(a, [0.5, 3.5]);
        let mut a = [f16::from_f32(6.0), f16::from_f32(-3.0)];
        finalize(Dtype::Half, Op::Avg, bytemuck::cast_slice_mut(&mut a), 4);
        assert_eq!(a, [f16::from_f32(1.5), f16::from_f32(-0.75)]);
        let mut a = [bf16::from_f32(96.0), bf16::from_f32(1.0)];
        finalize(Dtype::Bfloat16, Op::Avg, bytemuck::cast_slice_mut(&mut a), 3);
        assert_eq!(a, [bf16::from_f32(32.0), bf16::from_f32(1.0 / 3.0)]);
    }

    /// The fallbacks for CPUs without AVX2/F16C agree with the dispatched paths.
    #[test]
    fn portable_paths_match_dispatched_ones() {
        let mut rng = Rng(11);
        for op in Op::ALL {
            for len in [0usize, 1, 7, 8, 9, 200, 1003] {
                let a = aligned(&random_buf(Dtype::Half, len, &mut rng));
                let b = aligned(&random_buf(Dtype::Half, len, &mut rng));
                let nb = len * 2;
                let (a, b): (&[f16], &[f16]) =
                    (bytemuck::cast_slice(bytes(&a, nb)), bytemuck::cast_slice(bytes(&b, nb)));
                let mut want = a.to_vec();
                reduce_inplace(
                    Dtype::Half,
                    op,
                    bytemuck::cast_slice_mut(&mut want),
                    bytemuck::cast_slice(b),
                );
                let mut got = a.to_vec();
                fp16::portable(op, &mut got, b, None);
                assert_eq!(got, want, "half {op} in place, len {len}");
                let mut got = vec![f16::ZERO; len];
                fp16::portable(op, &mut got, a, Some(b));
                assert_eq!(got, want, "half {op} into, len {len}");
                let mut want = a.to_vec();
                finalize(Dtype::Half, Op::Avg, bytemuck::cast_slice_mut(&mut want), 3);
                let mut got = a.to_vec();
                fp16::divide_portable(&mut got, 3.0);
                assert_eq!(got, want, "half divide, len {len}");

                let a: Vec<f32> = a.iter().map(|x| x.to_f32()).collect();
                let b: Vec<f32> = b.iter().map(|x| x.to_f32()).collect();
                let mut want = a.clone();
                inplace::<f32>(op, &mut want, &b);
                let mut got = a.clone();
                let f = match op {
                    Op::Sum | Op::Avg => <f32 as Arith>::sum,
                    Op::Prod => <f32 as Arith>::prod,
                    Op::Max => <f32 as Arith>::max,
                    Op::Min => <f32 as Arith>::min,
                };
                zip_inplace_loop(&mut got, &b, f);
                assert_eq!(got, want, "float {op} len {len}");
            }
        }
    }

    /// Same bits, or both NaN (which NaN a max/min returns is not specified).
    fn same_bf16(x: bf16, y: bf16) -> bool {
        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
    }

    /// The block kernel (and its AVX2 build) against element-by-element widen/op/round, on arbitrary bit
    /// patterns (NaN, infinities, subnormals included) at lengths around the block size and odd tails.
    #[test]
    fn bfloat16_blocks_match_element_by_element() {
        let mut rng = Rng(5);
        let block = bf16_blocks::BLOCK;
        for op in Op::ALL {
            for len in [0, 1, 3, block - 1, block, block + 1, 2 * block - 1, 2 * block + 1, 1003] {
                let mut bits = || bf16::from_bits(rng.next() as u16);
                let a: Vec<bf16> = (0..len).map(|_| bits()).collect();
                let b: Vec<bf16> = (0..len).map(|_| bits()).collect();
                let mut want = a.clone();
                match op {
                    Op::Sum | Op::Avg => zip_into_loop(&mut want, &a, &b, <bf16 as Arith>::sum),
                    Op::Prod => zip_into_loop(&mut want, &a, &b, <bf16 as Arith>::prod),
                    Op::Max => zip_into_loop(&mut want, &a, &b, <bf16 as Arith>::max),
                    Op::Min => zip_into_loop(&mut want, &a, &b, <bf16 as Arith>::min),
                }
                let check = |got: &[bf16], how: &str| {
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            same_bf16(*g, *w),
                            "{how} {op} len {len} at {i}: {:#06x} op {:#06x} gave {:#06x}, want {:#06x}",
                            a[i].to_bits(),
                            b[i].to_bits(),
                            g.to_bits(),
                            w.to_bits()
                        );
                    }
                };
                let mut got = a.clone();
                reduce_inplace(
                    Dtype::Bfloat16,
                    op,
                    bytemuck::cast_slice_mut(&mut got),
                    bytemuck::cast_slice(&b),
                );
                check(&got, "dispatched in place");
                let mut got = vec![bf16::ZERO; len];
                reduce_into(
                    Dtype::Bfloat16,
                    op,
                    bytemuck::cast_slice_mut(&mut got),
                    bytemuck::cast_slice(&a),
                    bytemuck::cast_slice(&b),
                );
                check(&got, "dispatched into");
                let mut got = a.clone();
                bf16_blocks::reduce(op, &mut got, None, &b);
                check(&got, "portable in place");
                let mut got = vec![bf16::ZERO; len];
                bf16_blocks::reduce(op, &mut got, Some(&a), &b);
                check(&got, "portable into");
            }
        }
    }

    /// Overflow, infinities and NaN through the block kernel, one of each in a short tail and in a full block.
    #[test]
    fn bfloat16_sum_overflows_to_infinity_and_keeps_nan() {
        let f = |x: f32| bf16::from_f32(x);
        for pad in [0usize, bf16_blocks::BLOCK] {
            let mut a = vec![f(1.0); pad];
            let mut b = vec![f(1.0); pad];
            a.extend([bf16::MAX, bf16::INFINITY, bf16::INFINITY, bf16::NAN, f(-0.0), bf16::MIN]);
            b.extend([bf16::MAX, f(-1.0), bf16::NEG_INFINITY, f(1.0), f(-0.0), bf16::MIN]);
            let mut out = vec![bf16::ZERO; a.len()];
            reduce_into(
                Dtype::Bfloat16,
                Op::Sum,
                bytemuck::cast_slice_mut(&mut out),
                bytemuck::cast_slice(&a),
                bytemuck::cast_slice(&b),
            );
            let got = &out[pad..];
            assert!(out[..pad].iter().all(|&x| x == f(2.0)), "pad {pad}");
            assert_eq!(got[0], bf16::INFINITY, "MAX + MAX, pad {pad}");
            assert_eq!(got[1], bf16::INFINITY, "inf - 1, pad {pad}");
            assert!(got[2].is_nan(), "inf - inf, pad {pad}");
            assert!(got[3].is_nan(), "NaN + 1, pad {pad}");
            assert_eq!(got[4].to_bits(), f(-0.0).to_bits(), "-0 + -0, pad {pad}");
            assert_eq!(got[5], bf16::NEG_INFINITY, "MIN + MIN, pad {pad}");
        }
    }

    #[test]
    fn bfloat16_nan_payloads_stay_nan() {
        // Every bfloat16 NaN pattern (both signs, quiet and signalling, every payload) against finite
        // values, infinities and NaNs, in both operand positions, through the vector loops and the tail.
        let nans: Vec<bf16> = (0x7f81u16..=0x7fff)
            .chain(0xff81..=0xffff)
            .map(bf16::from_bits)
            .collect();
        let others = [
            1.0f32,
            -3.5,
            0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            1e30,
            -1e-30,
        ];
        for op in [Op::Sum, Op::Prod, Op::Avg] {
            for (k, &o) in others.iter().enumerate() {
                let other = vec![bf16::from_f32(o); nans.len()];
                // Rotated by k, so each NaN pattern meets eight lane positions and the odd-length tail.
                let nan: Vec<bf16> = nans.iter().cycle().skip(k).take(nans.len()).copied().collect();
                for (a, b) in [(&nan, &other), (&other, &nan)] {
                    let mut out = vec![bf16::ZERO; a.len()];
                    reduce_into(
                        Dtype::Bfloat16,
                        op,
                        bytemuck::cast_slice_mut(&mut out),
                        bytemuck::cast_slice(a),
                        bytemuck::cast_slice(b),
                    );
                    for (i, x) in out.iter().enumerate() {
                        assert!(
                            x.is_nan(),
                            "{op}: {:#06x} with {o} gave {:#06x}",
                            nan[i].to_bits(),
                            x.to_bits()
                        );
                    }
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "must match")]
    fn mismatched_lengths_panic() {
        let mut d = [0u8; 4];
        reduce_into(Dtype::Uint8, Op::Sum, &mut d, &[0u8; 4], &[0u8; 3]);
    }
}
