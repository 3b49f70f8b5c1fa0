//! Data the check can predict exactly.
//!
//! One concern, the data-check pattern per dtype and op; its tests are a third of the file.
//!
//! Every rank fills its input with small integers chosen so that the reduction over all ranks is
//! known in O(1) per element, exactly, whatever order the algorithm combines ranks in.
//!
//! # The pattern
//! At element index `i` let `t = i % 8` (the index phase), `h = +1` for even `t` and `-1` for odd
//! `t`, and let rank `r` sit at window position `j = (r - i) mod nranks`, so every rank takes every
//! position as `i` advances. Position 0 is the *carrier*: it holds the term that varies with the
//! index. Per op, the logical value rank `r` contributes is:
//! - Sum: carrier `-h*(t+1)`; positions `1 <= j < K` hold `h*(j+1)`; the rest 0.
//!   Result `h*(K(K+1)/2 - 1 - (t+1))`.
//! - Avg: positions `1 <= j < K` hold `+1, -1, +2, -2, ...` (they cancel); the carrier holds
//!   `c(t)*unit` minus the partner of an unpaired last position, with `c(t) = h*(1 + t/2)`.
//!   The sum is `c(t)*unit`, a multiple of `unit = nranks / 2^e`, so the average is `c(t) / 2^e`.
//! - Prod: carrier `h*(2 + (t/2)%2)`, odd positions -1, even positions +1.
//!   Result `carrier * (-1)^(nranks/2)`.
//! - Max/Min: `bias + b(t) + h*(j % P)` with `b(t)` in 0..=3 for even `t` and -4..=-1 for odd
//!   `t`, so that results differ between neighbouring indices. Result `bias + b(t)` plus
//!   `P-1` (Max, h > 0) or minus `P-1` (Min, h < 0).
//!
//! Floats must be exact for every partial result in any order: all values are integers and the
//! sum of their magnitudes at one index stays within the dtype's exact-integer range (bfloat16
//! 256, half 2048, float 2^24, double 2^53). Where `nranks` is too large for that, only a window
//! of `K < nranks` consecutive positions is non-zero (Sum, Avg), or values repeat every `P < nranks`
//! positions (Max, Min). Integers are dense (`K = nranks`) and wrap like the kernels.

use bytemuck::Pod;
use half::{bf16, f16};

use super::{Dtype, Op};

/// Runs `$go!(T)` with the Rust type of a dtype.
macro_rules! dispatch {
    ($dtype:expr, $go:ident) => {
        match $dtype {
            Dtype::Int8 => $go!(i8),
            Dtype::Uint8 => $go!(u8),
            Dtype::Int32 => $go!(i32),
            Dtype::Uint32 => $go!(u32),
            Dtype::Int64 => $go!(i64),
            Dtype::Uint64 => $go!(u64),
            Dtype::Half => $go!(f16),
            Dtype::Bfloat16 => $go!(bf16),
            Dtype::Float => $go!(f32),
            Dtype::Double => $go!(f64),
        }
    };
}

/// Which values a buffer region should hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// What rank r contributes (its input).
    Rank(usize),
    /// The op applied over the contributions of all ranks (Avg: sum / nranks), i.e. the expected result of a reduction.
    Reduced,
}

/// The first wrong element of a check.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// Element index relative to the start of the checked region.
    pub index: usize,
    /// The value that should be there, formatted as a number.
    pub expected: String,
    /// The value that is there, formatted as a number.
    pub got: String,
}

/// Outcome of checking one buffer region.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckOutcome {
    /// How many elements were wrong.
    pub wrong: u64,
    /// The first wrong element, if any.
    pub first: Option<Mismatch>,
}

impl CheckOutcome {
    /// Adds `other`'s count; keeps `self`'s first mismatch if it has one (it is the earlier region).
    pub fn merge(&mut self, other: CheckOutcome) {
        self.wrong += other.wrong;
        if self.first.is_none() {
            self.first = other.first;
        }
    }

    /// True when no element was wrong.
    pub fn is_ok(&self) -> bool {
        self.wrong == 0
    }
}

/// Expected results repeat with this period in the element index (a power of two, so `% PERIOD`
/// is a mask); it is what makes a shifted block visible.
const PERIOD: usize = 8;

/// Elements of expected values kept on the stack by fill and check (16 KiB at most).
const CACHE: usize = 2048;

/// The values each rank contributes and the exact reduced result, for one (dtype, op, nranks).
#[derive(Clone, Copy, Debug)]
pub struct Pattern {
    dtype: Dtype,
    op: Op,
    nranks: usize,
    /// Sum, Avg: positions holding non-zero values (K); `nranks` unless floats need it sparse.
    window: usize,
    /// Max, Min: number of distinct values across positions (P).
    spread: usize,
    /// Per index phase: the carrier's (position 0's) contribution.
    carrier: [i64; PERIOD],
    /// Per index phase: the reduced logical value (for Avg the sum, divided on conversion).
    reduced: [i64; PERIOD],
}

/// +1 for even phases, -1 for odd ones.
fn sign(t: usize) -> i64 {
    1 - 2 * (t & 1) as i64
}

/// Max/Min base by phase: 0..=3 on even phases, -1..=-4 on odd ones, so every result differs.
fn minmax_base(t: usize) -> i64 {
    if t & 1 == 0 {
        (t / 2) as i64
    } else {
        -((t as i64 + 1) / 2)
    }
}

/// Largest magnitude up to which every integer is exact in a float dtype; None for integers.
fn float_limit(dtype: Dtype) -> Option<i128> {
    match dtype {
        Dtype::Bfloat16 => Some(1 << 8),
        Dtype::Half => Some(1 << 11),
        Dtype::Float => Some(1 << 24),
        Dtype::Double => Some(1 << 53),
        _ => None,
    }
}

/// Largest positive value of the signed integer of the dtype's width.
fn int_half_range(dtype: Dtype) -> i128 {
    (1i128 << (8 * dtype.size() - 1)) - 1
}

/// Largest k in 1..=n with `fits(k)`, for a predicate that holds at 1 and is monotone.
fn largest(n: usize, fits: impl Fn(i128) -> bool) -> usize {
    debug_assert!(fits(1));
    let (mut lo, mut hi) = (1usize, n);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid as i128) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Sum of magnitudes of the Sum pattern with window k (carrier at most 8).
fn sum_mass(k: i128) -> i128 {
    k * (k + 1) / 2 - 1 + 8
}

/// Sum of magnitudes of the Avg offsets with window k, including the carrier's correction.
fn avg_mass(k: i128) -> i128 {
    let m = k - 1;
    let p = m / 2;
    let pairs = if m % 2 == 0 { p * (p + 1) } else { (p + 1) * (p + 1) };
    pairs + avg_tail(k)
}

/// With an even window the last position (odd) has no partner; the carrier takes its negation.
fn avg_tail(k: i128) -> i128 {
    if k % 2 == 0 {
        k / 2
    } else {
        0
    }
}

/// Avg over floats: the largest carrier scale (4, else 1, else 0) and the largest unit n / 2^e
/// that fit in half the exact range. e stays within n's trailing zeros, so the average
/// c(t) / 2^e is a short binary fraction, exact in every float dtype.
fn float_avg_unit(n: usize, limit: i128) -> (i64, i64) {
    for cmax in [4i64, 1] {
        for e in 0..=n.trailing_zeros() {
            let unit = (n >> e) as i128;
            if cmax as i128 * unit <= limit / 2 {
                return (cmax, unit as i64);
            }
        }
    }
    (0, n as i64)
}

/// Avg carrier scale by phase: `h*(1 + t/2)` (max 4), `h` (max 1) or 0.
fn avg_scale(cmax: i64, t: usize) -> i64 {
    match cmax {
        4 => sign(t) * (1 + (t / 2) as i64),
        1 => sign(t),
        _ => 0,
    }
}

impl Pattern {
    /// The pattern for `nranks` ranks reducing `dtype` with `op`.
    pub fn new(dtype: Dtype, op: Op, nranks: usize) -> Self {
        assert!(nranks >= 1, "a pattern needs at least one rank");
        let n = nranks;
        let limit = float_limit(dtype);
        let mut window = n;
        let mut spread = n;
        let mut carrier = [0i64; PERIOD];
        let mut reduced = [0i64; PERIOD];
        match op {
            Op::Sum => {
                if let Some(l) = limit {
                    window = largest(n, |k| sum_mass(k) <= l);
                }
                // Wrapping: for integers only the value modulo 2^bits matters.
                let w = ((window as i128 * (window as i128 + 1) / 2) - 1) as i64;
                for t in 0..PERIOD {
                    let h = sign(t);
                    carrier[t] = -h * (t as i64 + 1);
                    reduced[t] = h.wrapping_mul(w.wrapping_sub(t as i64 + 1));
                }
            }
            Op::Avg => {
                let (cmax, unit) = match limit {
                    Some(l) => float_avg_unit(n, l),
                    // Integers divide exactly with unit = n; keep the sum from wrapping if we can.
                    None if 4 * n as i128 <= int_half_range(dtype) => (4, n as i64),
                    None => (1, n as i64),
                };
                if let Some(l) = limit {
                    window = largest(n, |k| avg_mass(k) + cmax as i128 * unit as i128 <= l);
                }
                let tail = avg_tail(window as i128) as i64;
                for t in 0..PERIOD {
                    let sum = avg_scale(cmax, t).wrapping_mul(unit);
                    carrier[t] = sum.wrapping_sub(tail);
                    reduced[t] = sum;
                }
            }
            Op::Prod => {
                // Positions 1..n hold n/2 odd ones, each -1.
                let flip = if (n / 2) % 2 == 1 { -1 } else { 1 };
                for t in 0..PERIOD {
                    carrier[t] = sign(t) * (2 + ((t >> 1) & 1) as i64);
                    reduced[t] = carrier[t] * flip;
                }
            }
            Op::Max | Op::Min => {
                // Values span bias-(P+3) ..= bias+P+2; keep clear of the poison values.
                let range = limit.unwrap_or_else(|| int_half_range(dtype));
                spread = (range - 3).min(n as i128) as usize;
                // Unsigned values sit around the middle of the range (for u64, 2^63 wraps to
                // i64::MIN, which converts back to 2^63), so values below the base stay >= 0.
                let bias = if dtype.is_unsigned() {
                    (int_half_range(dtype) + 1) as i64
                } else {
                    0
                };
                let top = spread as i64 - 1;
                for t in 0..PERIOD {
                    let h = sign(t);
                    carrier[t] = bias.wrapping_add(minmax_base(t));
                    let extra = match (op, h > 0) {
                        (Op::Max, true) => top,
                        (Op::Min, false) => -top,
                        _ => 0,
                    };
                    reduced[t] = carrier[t].wrapping_add(extra);
                }
            }
        }
        Pattern {
            dtype,
            op,
            nranks,
            window,
            spread,
            carrier,
            reduced,
        }
    }

    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// The reduction op.
    pub fn op(&self) -> Op {
        self.op
    }

    /// The number of ranks.
    pub fn nranks(&self) -> usize {
        self.nranks
    }

    /// Write the values of `source` for element indices first .. first + buf.len()/elem_size.
    pub fn fill(&self, source: Source, first: usize, buf: &mut [u8]) {
        macro_rules! go {
            ($t:ty) => {
                self.fill_typed::<$t>(source, first, elems_mut(self.dtype, buf))
            };
        }
        dispatch!(self.dtype, go)
    }

    /// Compare `got` against the values of `source` for element indices first..; Mismatch.index is relative to the start of `got` (element index, not byte). Streams through a fixed stack block; allocates only to format the first mismatch.
    pub fn check(&self, source: Source, first: usize, got: &[u8]) -> CheckOutcome {
        macro_rules! go {
            ($t:ty) => {
                self.check_typed::<$t>(source, first, elems(self.dtype, got))
            };
        }
        dispatch!(self.dtype, go)
    }

    /// Fill `buf` with a sentinel that differs from what a correct collective writes (NaN for floats; for integers a value outside the pattern's range where possible), so stale output is caught.
    pub fn poison(&self, buf: &mut [u8]) {
        macro_rules! go {
            ($t:ty) => {
                elems_mut::<$t>(self.dtype, buf).fill(<$t>::poison(self.op))
            };
        }
        dispatch!(self.dtype, go)
    }

    /// Where rank `r` sits at element index `first`.
    fn cursor(&self, r: usize, first: usize) -> Cursor {
        assert!(
            r < self.nranks,
            "rank {r} out of range for a pattern of {} ranks",
            self.nranks
        );
        let n = self.nranks;
        let j = (r + n - first % n) % n;
        Cursor {
            j,
            jp: j % self.spread,
            t: first % PERIOD,
        }
    }

    /// Moves the cursor to the next element index: the phase advances, the position goes back.
    #[inline(always)]
    fn advance(&self, c: &mut Cursor) {
        c.t = (c.t + 1) % PERIOD;
        if c.j == 0 {
            c.j = self.nranks - 1;
            c.jp = c.j % self.spread;
        } else {
            c.j -= 1;
            c.jp = if c.jp == 0 { self.spread - 1 } else { c.jp - 1 };
        }
    }

    /// The logical value a rank at cursor `c` contributes.
    #[inline(always)]
    fn contribution(&self, c: &Cursor) -> i64 {
        if c.j == 0 {
            return self.carrier[c.t];
        }
        let (j, h) = (c.j as i64, sign(c.t));
        match self.op {
            Op::Sum if c.j < self.window => h * (j + 1),
            Op::Avg if c.j < self.window => {
                let q = (j + 1) / 2;
                if j % 2 == 1 {
                    q
                } else {
                    -q
                }
            }
            Op::Sum | Op::Avg => 0,
            Op::Prod => 1 - 2 * (j & 1),
            // Position 0's base is the carrier; other positions add h * (j % P).
            Op::Max | Op::Min => self.carrier[c.t].wrapping_add(h * c.jp as i64),
        }
    }

    /// The expected reduced element per index phase.
    fn reduced_table<T: Elem>(&self) -> [T; PERIOD] {
        self.reduced.map(|v| {
            if self.op == Op::Avg {
                T::avg(v, self.nranks)
            } else {
                T::from_i64(v)
            }
        })
    }

    fn fill_typed<T: Elem>(&self, source: Source, first: usize, out: &mut [T]) {
        let mut cache = [T::zeroed(); CACHE];
        match self.cycle(source, first, out.len(), &mut cache) {
            Some(cycle) => {
                for chunk in out.chunks_mut(cycle.len()) {
                    chunk.copy_from_slice(&cycle[..chunk.len()]);
                }
            }
            None => self.fill_direct(source, first, out),
        }
    }

    fn check_typed<T: Elem>(&self, source: Source, first: usize, got: &[T]) -> CheckOutcome {
        let mut out = CheckOutcome::default();
        let mut cache = [T::zeroed(); CACHE];
        match self.cycle(source, first, got.len(), &mut cache) {
            Some(cycle) => {
                for (c, chunk) in got.chunks(cycle.len()).enumerate() {
                    compare(chunk, &cycle[..chunk.len()], c * cycle.len(), &mut out);
                }
            }
            None => {
                for (c, chunk) in got.chunks(CACHE).enumerate() {
                    let want = &mut cache[..chunk.len()];
                    self.fill_direct(source, first + c * CACHE, want);
                    compare(chunk, want, c * CACHE, &mut out);
                }
            }
        }
        out
    }

    /// The values of `source` from index `first` written into `cache` for a whole number of
    /// periods (at least `total` elements where that fits), or None when one period does not fit.
    /// Values repeat every PERIOD indices (Reduced) or lcm(nranks, PERIOD) indices (Rank), so
    /// fill and check can copy and compare against this block instead of computing each element.
    fn cycle<'a, T: Elem>(
        &self,
        source: Source,
        first: usize,
        total: usize,
        cache: &'a mut [T; CACHE],
    ) -> Option<&'a [T]> {
        let period = match source {
            Source::Reduced => PERIOD,
            // lcm(nranks, PERIOD), PERIOD being 8.
            Source::Rank(_) => self.nranks.saturating_mul(8 >> self.nranks.trailing_zeros().min(3)),
        };
        if period > CACHE {
            return None;
        }
        let reps = (CACHE / period).min(total.div_ceil(period)).max(1);
        let cycle = &mut cache[..period * reps];
        self.fill_direct(source, first, cycle);
        Some(cycle)
    }

    /// Computes the values of `source` element by element.
    fn fill_direct<T: Elem>(&self, source: Source, first: usize, out: &mut [T]) {
        match source {
            Source::Reduced => {
                let table = self.reduced_table::<T>();
                for (k, o) in out.iter_mut().enumerate() {
                    *o = table[(first + k) % PERIOD];
                }
            }
            Source::Rank(r) => {
                let mut c = self.cursor(r, first);
                for o in out {
                    *o = T::from_i64(self.contribution(&c));
                    self.advance(&mut c);
                }
            }
        }
    }
}

/// Counts the elements of `got` that differ from `want`; `offset` is `got`'s index in the region.
#[inline]
fn compare<T: Elem>(got: &[T], want: &[T], offset: usize, out: &mut CheckOutcome) {
    // Branch-free pass first (it vectorises); look element by element only when something is off.
    let clean = got.iter().zip(want).fold(true, |ok, (g, e)| ok & g.same(*e));
    if !clean {
        for (k, (g, e)) in got.iter().zip(want).enumerate() {
            if !g.same(*e) {
                out.record(offset + k, *e, *g);
            }
        }
    }
}

/// Which (position, phase) a rank is at for one element index.
#[derive(Clone, Copy, Debug)]
struct Cursor {
    /// Window position, (r - i) mod nranks.
    j: usize,
    /// j mod spread (Max/Min), kept incrementally to avoid a division per element.
    jp: usize,
    /// Index phase, i mod PERIOD.
    t: usize,
}

impl CheckOutcome {
    #[cold]
    fn record<T: Elem>(&mut self, index: usize, expected: T, got: T) {
        self.wrong += 1;
        if self.first.is_none() {
            self.first = Some(Mismatch {
                index,
                expected: expected.show(),
                got: got.show(),
            });
        }
    }
}

fn elems<T: Pod>(dtype: Dtype, bytes: &[u8]) -> &[T] {
    bytemuck::try_cast_slice(bytes)
        .unwrap_or_else(|e| panic!("buffer of {} bytes is not a {dtype} slice: {e:?}", bytes.len()))
}

fn elems_mut<T: Pod>(dtype: Dtype, bytes: &mut [u8]) -> &mut [T] {
    let len = bytes.len();
    bytemuck::try_cast_slice_mut(bytes)
        .unwrap_or_else(|e| panic!("buffer of {len} bytes is not a {dtype} slice: {e:?}"))
}

/// What the pattern needs from an element type.
trait Elem: Pod {
    /// The logical integer `v`: integers wrap, floats are exact for the values patterns use.
    fn from_i64(v: i64) -> Self;
    /// `sum / n` as [`super::kernel::finalize`] computes it after a wrapping sum.
    fn avg(sum: i64, n: usize) -> Self;
    /// Numeric equality: +0 == -0, NaN equals nothing.
    fn same(self, other: Self) -> bool;
    /// The value as a number ("3", "-1.5", "NaN").
    fn show(self) -> String;
    /// The sentinel [`Pattern::poison`] writes.
    fn poison(op: Op) -> Self;
}

macro_rules! int_elem {
    ($($t:ty => $wide:ty),*) => {$(
        impl Elem for $t {
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            fn avg(sum: i64, n: usize) -> Self {
                // Truncating division of the wrapped sum, as finalize does.
                ((sum as $t as $wide) / (n as $wide)) as $t
            }
            fn same(self, other: Self) -> bool {
                self == other
            }
            fn show(self) -> String {
                self.to_string()
            }
            fn poison(op: Op) -> Self {
                // Unsigned Max/Min values straddle the middle of the range, so use zero there;
                // everything else stays near zero, so use the middle (the 0x80.. bit pattern).
                if matches!(op, Op::Max | Op::Min) && <$t>::MIN == 0 {
                    0
                } else {
                    (i64::MIN >> (64 - <$t>::BITS)) as $t
                }
            }
        }
    )*};
}
int_elem!(i8 => i64, u8 => u64, i32 => i64, u32 => u64, i64 => i64, u64 => u64);

macro_rules! float_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            fn avg(sum: i64, n: usize) -> Self {
                (sum as f64 / n as f64) as $t
            }
            fn same(self, other: Self) -> bool {
                self == other
            }
            fn show(self) -> String {
                self.to_string()
            }
            fn poison(_: Op) -> Self {
                <$t>::NAN
            }
        }
    )*};
}
float_elem!(f32, f64);

macro_rules! narrow_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            // Through f32 (cheaper than half's f64 conversion): values here are small integers,
            // exact in f32 and in the narrow type.
            fn from_i64(v: i64) -> Self {
                <$t>::from_f32(v as f32)
            }
            fn avg(sum: i64, n: usize) -> Self {
                <$t>::from_f64(sum as f64 / n as f64)
            }
            // Bit equality (not NaN) or both zeros, without widening each element.
            fn same(self, other: Self) -> bool {
                let (a, b) = (self.to_bits(), other.to_bits());
                (a == b && !self.is_nan()) || (a | b) & 0x7fff == 0
            }
            fn show(self) -> String {
                self.to_f32().to_string()
            }
            fn poison(_: Op) -> Self {
                <$t>::NAN
            }
        }
    )*};
}
narrow_elem!(f16, bf16);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduce::kernel::{finalize, reduce_inplace, reduce_into};

    const RANKS: [usize; 8] = [1, 2, 3, 4, 7, 8, 64, 1024];

    /// An element-aligned byte buffer of `len` elements of `dtype`.
    #[derive(Clone)]
    struct Buf {
        words: Vec<u64>,
        bytes: usize,
    }

    impl Buf {
        fn new(dtype: Dtype, len: usize) -> Self {
            let bytes = len * dtype.size();
            Buf {
                words: vec![0; bytes.div_ceil(8)],
                bytes,
            }
        }
        fn get(&self) -> &[u8] {
            &bytemuck::cast_slice(&self.words)[..self.bytes]
        }
        fn get_mut(&mut self) -> &mut [u8] {
            &mut bytemuck::cast_slice_mut(&mut self.words)[..self.bytes]
        }
    }

    fn rank_bufs(p: &Pattern, first: usize, len: usize) -> Vec<Buf> {
        (0..p.nranks())
            .map(|r| {
                let mut b = Buf::new(p.dtype(), len);
                p.fill(Source::Rank(r), first, b.get_mut());
                b
            })
            .collect()
    }

    /// Reduces rank buffers in the given order with reduce_inplace, then finalizes.
    fn reduce_in_order(p: &Pattern, bufs: &[Buf], order: &[usize]) -> Buf {
        let mut acc = bufs[order[0]].clone();
        for &r in &order[1..] {
            reduce_inplace(p.dtype(), p.op(), acc.get_mut(), bufs[r].get());
        }
        finalize(p.dtype(), p.op(), acc.get_mut(), p.nranks());
        acc
    }

    /// Reduces pairwise as a tree (a different association than either linear order).
    fn reduce_tree(p: &Pattern, bufs: &[Buf]) -> Buf {
        let mut level = bufs.to_vec();
        while level.len() > 1 {
            let mut next = Vec::new();
            for pair in level.chunks(2) {
                if let [a, b] = pair {
                    let mut out = Buf::new(p.dtype(), a.bytes / p.dtype().size());
                    reduce_into(p.dtype(), p.op(), out.get_mut(), a.get(), b.get());
                    next.push(out);
                } else {
                    next.push(pair[0].clone());
                }
            }
            level = next;
        }
        let mut acc = level.pop().unwrap();
        finalize(p.dtype(), p.op(), acc.get_mut(), p.nranks());
        acc
    }

    fn every_config() -> impl Iterator<Item = Pattern> {
        RANKS.into_iter().flat_map(|n| {
            Dtype::ALL
                .into_iter()
                .flat_map(move |d| Op::ALL.into_iter().map(move |o| Pattern::new(d, o, n)))
        })
    }

    fn label(p: &Pattern) -> String {
        format!("{} {} nranks={}", p.dtype(), p.op(), p.nranks())
    }

    #[test]
    fn reduction_of_rank_inputs_matches_reduced_in_any_order() {
        for p in every_config() {
            let n = p.nranks();
            let len = if n >= 1024 { 5 } else { 37 };
            for first in [0, 3, 1021, 4 * n + 5] {
                let bufs = rank_bufs(&p, first, len);
                let forward: Vec<usize> = (0..n).collect();
                let reverse: Vec<usize> = (0..n).rev().collect();
                // A fixed shuffle: a stride coprime to n visits every rank once.
                let stride = (1..=n).rev().find(|s| gcd(*s, n) == 1 && *s < n).unwrap_or(1);
                let shuffled: Vec<usize> = (0..n).map(|k| (k * stride + 1) % n).collect();
                let results = [
                    ("forward", reduce_in_order(&p, &bufs, &forward)),
                    ("reverse", reduce_in_order(&p, &bufs, &reverse)),
                    ("shuffled", reduce_in_order(&p, &bufs, &shuffled)),
                    ("tree", reduce_tree(&p, &bufs)),
                ];
                for (how, got) in results {
                    let out = p.check(Source::Reduced, first, got.get());
                    assert_eq!(out, CheckOutcome::default(), "{} first={first} {how}", label(&p));
                }
            }
        }
    }

    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }

    /// The exactness argument, checked directly: at every index the magnitudes of all ranks'
    /// float contributions add up to at most the dtype's exact-integer range, so any partial sum
    /// in any order is exact. Includes awkward rank counts.
    #[test]
    fn float_contributions_bound_every_partial_sum() {
        for dtype in [Dtype::Bfloat16, Dtype::Half, Dtype::Float, Dtype::Double] {
            let limit = float_limit(dtype).unwrap();
            for n in RANKS.into_iter().chain([5, 255, 256, 257, 1000, 1023, 3000]) {
                for op in Op::ALL {
                    let p = Pattern::new(dtype, op, n);
                    for first in 0..2 * PERIOD {
                        let mut mass = 0i128;
                        let mut prod = 1i128;
                        for r in 0..n {
                            let v = p.contribution(&p.cursor(r, first)) as i128;
                            assert!(v.abs() <= limit, "{} value {v}", label(&p));
                            mass += v.abs();
                            if op == Op::Prod {
                                prod *= v.abs();
                            }
                        }
                        match op {
                            Op::Sum | Op::Avg => {
                                assert!(mass <= limit, "{} mass {mass}", label(&p))
                            }
                            Op::Prod => assert!(prod <= 3, "{} product {prod}", label(&p)),
                            Op::Max | Op::Min => {}
                        }
                    }
                    // Awkward rank counts are covered by the reduction itself too.
                    if n > 1024 {
                        continue;
                    }
                    let bufs = rank_bufs(&p, 11, 19);
                    let got = reduce_in_order(&p, &bufs, &(0..n).collect::<Vec<_>>());
                    assert!(p.check(Source::Reduced, 11, got.get()).is_ok(), "{}", label(&p));
                }
            }
        }
    }

    #[test]
    fn dense_where_it_can_be() {
        // Integers, float and double use every rank at every index up to 1024 ranks.
        for dtype in [Dtype::Int8, Dtype::Uint64, Dtype::Float, Dtype::Double] {
            for op in [Op::Sum, Op::Avg] {
                assert_eq!(Pattern::new(dtype, op, 1024).window, 1024, "{dtype} {op}");
            }
        }
        assert_eq!(Pattern::new(Dtype::Half, Op::Sum, 64).window, 63);
        assert_eq!(Pattern::new(Dtype::Bfloat16, Op::Sum, 8).window, 8);
        assert_eq!(Pattern::new(Dtype::Bfloat16, Op::Sum, 1024).window, 21);
        assert_eq!(Pattern::new(Dtype::Float, Op::Max, 1024).spread, 1024);
        assert_eq!(Pattern::new(Dtype::Int8, Op::Max, 1024).spread, 124);
    }

    #[test]
    fn rank_inputs_differ_between_ranks_and_match_themselves() {
        for p in every_config() {
            let n = p.nranks();
            // Cover every window position so sparse patterns show each rank somewhere.
            let len = n + 37;
            for first in [0, 5, 2 * n + 3] {
                let bufs = rank_bufs(&p, first, len);
                for r in [0, 1 % n, n / 2, n - 1] {
                    let own = p.check(Source::Rank(r), first, bufs[r].get());
                    assert!(own.is_ok(), "{} rank {r}: {own:?}", label(&p));
                    if n >= 2 {
                        let next = p.check(Source::Rank(r), first, bufs[(r + 1) % n].get());
                        assert!(next.wrong > 0, "{} rank {r} vs {}", label(&p), (r + 1) % n);
                    }
                }
            }
            // Dense patterns give neighbouring ranks different values at every index (Prod has
            // only a few magnitudes, and an Avg carrier can equal its neighbour's offset).
            if n >= 2 && p.window == n && p.spread == n && !matches!(p.op, Op::Prod | Op::Avg) {
                let bufs = rank_bufs(&p, 9, 37);
                let next = p.check(Source::Rank(0), 9, bufs[1].get());
                assert_eq!(next.wrong, 37, "{}", label(&p));
            }
        }
    }

    #[test]
    fn reduced_values_vary_with_the_index() {
        for p in every_config().filter(|p| p.nranks() <= 8) {
            let mut buf = Buf::new(p.dtype(), 2 * PERIOD);
            p.fill(Source::Reduced, 0, buf.get_mut());
            // A block shifted by one element must not pass.
            let shifted = p.check(Source::Reduced, 1, buf.get());
            assert_eq!(shifted.wrong, 2 * PERIOD as u64, "{}", label(&p));
        }
    }

    #[test]
    fn a_corrupted_element_is_reported() {
        let p = Pattern::new(Dtype::Float, Op::Sum, 4);
        let mut buf = Buf::new(Dtype::Float, 1000);
        p.fill(Source::Reduced, 100, buf.get_mut());
        let vals: &mut [f32] = bytemuck::cast_slice_mut(buf.get_mut());
        let expected = vals[777];
        vals[777] = -1.5;
        let out = p.check(Source::Reduced, 100, buf.get());
        let m = Mismatch {
            index: 777,
            expected: expected.to_string(),
            got: "-1.5".into(),
        };
        assert_eq!(
            out,
            CheckOutcome {
                wrong: 1,
                first: Some(m)
            }
        );
        // Index 877 has phase 5: h = -1, K = 4, so the sum is -(4*5/2 - 1 - 6) = -3.
        assert_eq!(expected, -3.0);

        // A second bad element counts but does not replace the first.
        let vals: &mut [f32] = bytemuck::cast_slice_mut(buf.get_mut());
        vals[900] = f32::NAN;
        let out = p.check(Source::Reduced, 100, buf.get());
        assert_eq!((out.wrong, out.first.unwrap().index), (2, 777));

        // Rank inputs and integers report the same way.
        let p = Pattern::new(Dtype::Int32, Op::Max, 3);
        let mut buf = Buf::new(Dtype::Int32, 50);
        p.fill(Source::Rank(2), 7, buf.get_mut());
        let vals: &mut [i32] = bytemuck::cast_slice_mut(buf.get_mut());
        let expected = vals[0];
        vals[0] = 12345;
        let out = p.check(Source::Rank(2), 7, buf.get());
        let m = Mismatch {
            index: 0,
            expected: expected.to_string(),
            got: "12345".into(),
        };
        assert_eq!(
            out,
            CheckOutcome {
                wrong: 1,
                first: Some(m)
            }
        );

        // Half prints as a number too; NaN as "NaN".
        let p = Pattern::new(Dtype::Half, Op::Avg, 2);
        let mut buf = Buf::new(Dtype::Half, 4);
        p.poison(buf.get_mut());
        let out = p.check(Source::Reduced, 0, buf.get());
        let first = out.first.unwrap();
        assert_eq!((first.expected.as_str(), first.got.as_str()), ("1", "NaN"));
    }

    /// Fill and check copy a cached period when it fits on the stack and compute each element
    /// otherwise; both must give the same values and report the same positions.
    #[test]
    fn cached_and_direct_paths_agree() {
        for n in [1, 3, 8, 256, 257, 1500] {
            for dtype in Dtype::ALL {
                for op in [Op::Sum, Op::Avg, Op::Max] {
                    let p = Pattern::new(dtype, op, n);
                    let len = 5000;
                    for source in [Source::Reduced, Source::Rank(n / 2)] {
                        let mut via_fill = Buf::new(dtype, len);
                        p.fill(source, 13, via_fill.get_mut());
                        let mut direct = Buf::new(dtype, len);
                        macro_rules! go {
                            ($t:ty) => {
                                p.fill_direct::<$t>(source, 13, elems_mut(dtype, direct.get_mut()))
                            };
                        }
                        dispatch!(dtype, go);
                        assert!(via_fill.get() == direct.get(), "{} {source:?}", label(&p));
                        assert!(p.check(source, 13, direct.get()).is_ok(), "{}", label(&p));
                        // Corrupt two elements in different blocks (inverting every bit never
                        // gives an equal number): both are counted, the first is kept.
                        let size = dtype.size();
                        for k in [4500, 4999] {
                            for b in &mut direct.get_mut()[k * size..(k + 1) * size] {
                                *b = !*b;
                            }
                        }
                        let out = p.check(source, 13, direct.get());
                        assert_eq!(out.wrong, 2, "{} {source:?}", label(&p));
                        assert_eq!(out.first.unwrap().index, 4500, "{}", label(&p));
                    }
                }
            }
        }
    }

    #[test]
    fn poison_fails_the_check() {
        for p in every_config() {
            let len = 37;
            let mut buf = Buf::new(p.dtype(), len);
            p.poison(buf.get_mut());
            for first in [0, 1000] {
                let out = p.check(Source::Reduced, first, buf.get());
                assert_eq!(out.wrong, len as u64, "{} reduced", label(&p));
                let out = p.check(Source::Rank(p.nranks() - 1), first, buf.get());
                // Wrapped integer sums over many ranks can take any value, the poison included.
                if p.dtype().is_float() || p.nranks() <= 64 {
                    assert_eq!(out.wrong, len as u64, "{} rank", label(&p));
                } else {
                    assert!(out.wrong > 0, "{} rank", label(&p));
                }
            }
        }
    }

    #[test]
    fn floats_compare_numerically() {
        assert!(0.0f32.same(-0.0));
        assert!(f16::ZERO.same(f16::NEG_ZERO));
        assert!(bf16::ZERO.same(bf16::NEG_ZERO));
        assert!(!f32::NAN.same(f32::NAN));
        assert!(!f16::NAN.same(f16::NAN));
        assert!(!bf16::NAN.same(bf16::NAN));
        assert!(!f16::ONE.same(f16::NEG_ONE));
        assert_eq!(f16::from_f32(-1.5).show(), "-1.5");
        assert_eq!(3.0f64.show(), "3");
    }

    #[test]
    fn merge_adds_counts_and_keeps_the_earlier_first() {
        let m = |index| {
            Some(Mismatch {
                index,
                expected: "1".into(),
                got: "2".into(),
            })
        };
        let mut a = CheckOutcome::default();
        a.merge(CheckOutcome { wrong: 2, first: m(5) });
        a.merge(CheckOutcome { wrong: 3, first: m(1) });
        a.merge(CheckOutcome::default());
        assert_eq!(a, CheckOutcome { wrong: 5, first: m(5) });
    }

    #[test]
    fn avg_results_are_exact_fractions_for_sparse_floats() {
        // bfloat16 over 1024 ranks: the sum is c(t) * 32, so the average is c(t) / 32.
        let p = Pattern::new(Dtype::Bfloat16, Op::Avg, 1024);
        let mut buf = Buf::new(Dtype::Bfloat16, PERIOD);
        p.fill(Source::Reduced, 0, buf.get_mut());
        let vals: &[bf16] = bytemuck::cast_slice(buf.get());
        let want = [1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0, -4.0].map(|c: f32| bf16::from_f32(c / 32.0));
        assert_eq!(vals, want);
    }
}
