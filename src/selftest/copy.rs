//! The copy loops that define "memory copy bandwidth": glibc's memcpy and, on x86-64, explicit 256-bit
//! loads with ordinary or non-temporal stores. The reference is the fastest of them, so a slow memcpy
//! strategy on one machine (rep movsb, or streaming stores in a virtual machine) cannot make the
//! reductions look better than they are.

/// One way of copying `src` into `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CopyMethod {
    /// `copy_from_slice`, i.e. the C library's memcpy.
    Memcpy,
    /// 32-byte loads and ordinary stores (the store misses allocate the line first).
    Avx2,
    /// 32-byte loads and non-temporal stores (no read of the destination).
    Avx2Stream,
}

impl CopyMethod {
    /// The methods this CPU can run, memcpy first.
    pub fn available() -> Vec<CopyMethod> {
        let mut v = vec![CopyMethod::Memcpy];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            v.extend([CopyMethod::Avx2, CopyMethod::Avx2Stream]);
        }
        v
    }

    /// Name shown in the table.
    pub const fn name(self) -> &'static str {
        match self {
            CopyMethod::Memcpy => "memcpy",
            CopyMethod::Avx2 => "avx2",
            CopyMethod::Avx2Stream => "avx2-nt",
        }
    }

    /// Copies `src` into `dst` (same length) this way.
    pub fn run(self, dst: &mut [u8], src: &[u8]) {
        assert_eq!(dst.len(), src.len(), "copy: dst and src lengths differ");
        match self {
            CopyMethod::Memcpy => dst.copy_from_slice(src),
            #[cfg(target_arch = "x86_64")]
            CopyMethod::Avx2 | CopyMethod::Avx2Stream if std::arch::is_x86_feature_detected!("avx2") => {
                // SAFETY: the CPU supports AVX2, checked just above; lengths are equal.
                unsafe { x86::copy(dst, src, self == CopyMethod::Avx2Stream) }
            }
            // Not offered by `available` on such CPUs; copy correctly anyway.
            _ => dst.copy_from_slice(src),
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Copies 128 bytes per step; a head up to 32-byte alignment of `dst` and the tail go through memcpy
    /// (streaming stores need an aligned destination).
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn copy(dst: &mut [u8], src: &[u8], stream: bool) {
        let n = dst.len();
        let head = dst.as_ptr().align_offset(32).min(n);
        dst[..head].copy_from_slice(&src[..head]);
        let body = (n - head) / 128 * 128;
        let (d, s) = (dst.as_mut_ptr().add(head), src.as_ptr().add(head));
        let mut i = 0;
        while i < body {
            let v: [__m256i; 4] = std::array::from_fn(|k| _mm256_loadu_si256(s.add(i + 32 * k) as *const __m256i));
            for (k, v) in v.into_iter().enumerate() {
                let p = d.add(i + 32 * k) as *mut __m256i;
                if stream {
                    _mm256_stream_si256(p, v);
                } else {
                    _mm256_store_si256(p, v);
                }
            }
            i += 128;
        }
        if stream {
            // Streaming stores are weakly ordered: make them visible before the copy counts as done.
            _mm_sfence();
        }
        dst[head + body..].copy_from_slice(&src[head + body..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every method copies every byte, at offsets that exercise the aligned head and the tail.
    #[test]
    fn every_method_copies_exactly() {
        let src: Vec<u8> = (0..4099u32).map(|i| (i * 7 + 3) as u8).collect();
        for m in CopyMethod::available() {
            for (off, len) in [(0, 0), (0, 1), (1, 31), (3, 129), (5, 4000), (0, 4096)] {
                let mut dst = vec![0u8; 4099];
                m.run(&mut dst[off..off + len], &src[off..off + len]);
                assert_eq!(&dst[off..off + len], &src[off..off + len], "{m:?} off {off} len {len}");
                assert!(
                    dst[..off].iter().chain(&dst[off + len..]).all(|&b| b == 0),
                    "{m:?} wrote outside"
                );
            }
        }
    }
}
