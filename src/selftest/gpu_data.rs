//! Host side of `selftest --gpu`: seeded random inputs, the NaN-aware bit-exact comparison of a GPU result
//! with the CPU kernels', and the positions a verification check corrupts. No CUDA here, so it is tested
//! in every build.

use half::{bf16, f16};

use crate::reduce::Dtype;

/// SplitMix64: small, seedable, good enough for test data; the seed is printed so a failure reproduces.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A seed from the operating system (fresh every run), or a fixed one when that fails.
pub fn fresh_seed() -> u64 {
    let mut b = [0u8; 8];
    match getrandom::getrandom(&mut b) {
        Ok(()) => u64::from_le_bytes(b),
        Err(_) => 0x5eed_5eed_5eed_5eed,
    }
}

/// Special float values placed at the start of every float input: zeros of both signs, infinities,
/// the smallest subnormal of f32 and numbers that round between bfloat16/half neighbours.
const SPECIALS: [f64; 8] = [
    0.0,
    -0.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1.401298464324817e-45,
    1.00390625,
    -3.0009765625,
    65504.0,
];

/// `len` random elements of `dtype`: any bit pattern for integers; for floats, values of mixed sign and
/// scale (some overflow the narrow types in products, some are subnormal), after a few special values (zeros, infinities, a subnormal). No NaN
/// inputs: the CPU kernels leave NaN handling of max/min unspecified for half.
pub fn random_elements(dtype: Dtype, len: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(len * dtype.size());
    for i in 0..len {
        let r = rng.next_u64();
        if !dtype.is_float() {
            out.extend_from_slice(&r.to_le_bytes()[..dtype.size()]);
            continue;
        }
        let v = if let Some(&special) = SPECIALS.get(i) {
            special
        } else {
            let unit = (r >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
            let scale = [1.0, 100.0, 1e-3, 3e4, 1e-6, 1e30, 1e-40, 7.0][(r & 7) as usize];
            unit * scale
        };
        match dtype {
            Dtype::Half => out.extend_from_slice(&f16::from_f64(v).to_le_bytes()),
            Dtype::Bfloat16 => out.extend_from_slice(&bf16::from_f64(v).to_le_bytes()),
            Dtype::Float => out.extend_from_slice(&(v as f32).to_le_bytes()),
            _ => out.extend_from_slice(&v.to_le_bytes()),
        }
    }
    out
}

/// Whether `dtype` element bits `a` and `b` count as the same result: equal bits, or (floats) both NaN
/// whatever the payload, or both zero whatever the sign (the CPU kernels leave the sign of max(-0, +0)
/// to the instruction).
pub fn same_element(dtype: Dtype, a: u64, b: u64) -> bool {
    if a == b {
        return true;
    }
    let (nan, zero) = match dtype {
        Dtype::Half => (is_nan16(a, 0x7c00), a & 0x7fff == 0 && b & 0x7fff == 0),
        Dtype::Bfloat16 => (is_nan16(a, 0x7f80), a & 0x7fff == 0 && b & 0x7fff == 0),
        Dtype::Float => {
            let (x, y) = (f32::from_bits(a as u32), f32::from_bits(b as u32));
            (x.is_nan() && y.is_nan(), x == 0.0 && y == 0.0)
        }
        Dtype::Double => {
            let (x, y) = (f64::from_bits(a), f64::from_bits(b));
            (x.is_nan() && y.is_nan(), x == 0.0 && y == 0.0)
        }
        _ => return false,
    };
    let both_nan = match dtype {
        Dtype::Half => nan && is_nan16(b, 0x7c00),
        Dtype::Bfloat16 => nan && is_nan16(b, 0x7f80),
        _ => nan,
    };
    both_nan || zero
}

fn is_nan16(bits: u64, inf: u64) -> bool {
    bits & 0x7fff > inf
}

/// Element `i` of a little-endian buffer of `dtype`, as raw bits.
pub fn element_bits(dtype: Dtype, buf: &[u8], i: usize) -> u64 {
    let s = dtype.size();
    let mut b = [0u8; 8];
    b[..s].copy_from_slice(&buf[i * s..(i + 1) * s]);
    u64::from_le_bytes(b)
}

/// The first differing element of two results and how many differ.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Diff {
    /// Elements that differ.
    pub wrong: u64,
    /// The first one: index, GPU bits, CPU bits (hex).
    pub first: Option<(usize, String, String)>,
}

/// Compares a GPU result with the CPU's element by element with [`same_element`].
pub fn compare(dtype: Dtype, gpu: &[u8], cpu: &[u8]) -> Diff {
    let mut d = Diff::default();
    for i in 0..cpu.len() / dtype.size() {
        let (g, c) = (element_bits(dtype, gpu, i), element_bits(dtype, cpu, i));
        if !same_element(dtype, g, c) {
            d.wrong += 1;
            if d.first.is_none() {
                let w = dtype.size() * 2;
                d.first = Some((i, format!("0x{g:0w$x}"), format!("0x{c:0w$x}")));
            }
        }
    }
    d
}

/// `count` distinct element positions below `len`, in increasing order.
pub fn corrupt_positions(len: usize, count: usize, rng: &mut Rng) -> Vec<usize> {
    let count = count.min(len);
    let mut picked = std::collections::BTreeSet::new();
    while picked.len() < count {
        picked.insert((rng.next_u64() % len as u64) as usize);
    }
    picked.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_inputs_have_the_dtype_size_and_differ_by_seed() {
        for d in Dtype::ALL {
            let a = random_elements(d, 100, &mut Rng::new(1));
            assert_eq!(a.len(), 100 * d.size());
            assert_eq!(a, random_elements(d, 100, &mut Rng::new(1)));
            assert_ne!(a, random_elements(d, 100, &mut Rng::new(2)));
        }
        let f = random_elements(Dtype::Float, 20, &mut Rng::new(3));
        assert_eq!(
            f32::from_le_bytes(f[4..8].try_into().unwrap()).to_bits(),
            (-0.0f32).to_bits()
        );
        assert!(f.chunks(4).all(|c| !f32::from_le_bytes(c.try_into().unwrap()).is_nan()));
    }

    #[test]
    fn comparison_is_bit_exact_except_nan_payloads_and_zero_signs() {
        assert!(same_element(Dtype::Int32, 5, 5));
        assert!(!same_element(Dtype::Int32, 5, 6));
        // Half: two NaNs with different payloads match; a NaN never matches infinity.
        assert!(same_element(Dtype::Half, 0x7e00, 0xfe01));
        assert!(!same_element(Dtype::Half, 0x7e00, 0x7c00));
        assert!(same_element(Dtype::Half, 0x8000, 0x0000));
        assert!(!same_element(Dtype::Half, 0x3c00, 0x3c01));
        assert!(same_element(Dtype::Bfloat16, 0x7fc0, 0xffc1));
        assert!(!same_element(Dtype::Bfloat16, 0x7f80, 0xff80));
        assert!(same_element(Dtype::Float, f32::NAN.to_bits() as u64, 0x7f80_0001));
        assert!(same_element(Dtype::Double, (-0.0f64).to_bits(), 0));
        assert!(!same_element(
            Dtype::Double,
            1.0f64.to_bits(),
            1.0000000000000002f64.to_bits()
        ));
    }

    #[test]
    fn compare_counts_and_shows_the_first_difference() {
        let cpu = [1u8, 2, 3, 4];
        let gpu = [1u8, 9, 3, 8];
        let d = compare(Dtype::Uint8, &gpu, &cpu);
        assert_eq!(d.wrong, 2);
        assert_eq!(d.first, Some((1, "0x09".into(), "0x02".into())));
        assert_eq!(compare(Dtype::Uint8, &cpu, &cpu), Diff::default());
    }

    #[test]
    fn corrupted_positions_are_distinct_and_in_range() {
        let p = corrupt_positions(1000, 37, &mut Rng::new(9));
        assert_eq!(p.len(), 37);
        assert!(p.windows(2).all(|w| w[0] < w[1]) && p[36] < 1000);
        assert_eq!(corrupt_positions(3, 10, &mut Rng::new(9)), vec![0, 1, 2]);
    }
}
