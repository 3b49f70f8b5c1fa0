//! `collbench selftest`: the CPU reduction kernels' throughput against this machine's memory copy
//! bandwidth, both measured in one process on one thread with buffers of the same size.
//!
//! A reduction that cannot keep up with memory would cap every CPU all-reduce below the network, so
//! the target is a ratio: reduce GB/s >= 80% of copy GB/s. Bytes are counted as the loop moves them:
//! a copy reads and writes `size` bytes (2 x size); `dst = dst + src` reads two buffers and writes one
//! (3 x size). Write-allocate traffic the cache may add is not counted, for either. Copy bandwidth is the
//! fastest of several copy loops ([`copy::CopyMethod`]), so the reference is the best this machine does.

mod copy;
#[cfg(feature = "cuda")]
pub mod gpu;
pub mod gpu_data;
pub mod options;

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::memory::HostBuf;
use crate::reduce::kernel::reduce_inplace;
use crate::reduce::{Dtype, Op};
use crate::sizes::format_size;
use crate::units::BwUnit;

pub use copy::CopyMethod;

/// The share of copy bandwidth a reduction must reach.
pub const TARGET_RATIO: f64 = 0.8;

/// Dtypes the target applies to (the ones collectives on accelerators carry most).
pub const TARGETED: [Dtype; 3] = [Dtype::Float, Dtype::Half, Dtype::Bfloat16];

/// Dtypes measured for context only.
pub const CONTEXT: [Dtype; 2] = [Dtype::Double, Dtype::Int32];

/// Largest buffer accepted: two of them are allocated, and a typo should not exhaust memory.
pub(crate) const MAX_BYTES: u64 = 16 << 30;

/// Untimed runs of a kernel before each timed one (faults pages in, warms the branch predictors, and leaves
/// the caches as the kernel itself leaves them).
const WARMUP: usize = 1;

/// Checked options of the subcommand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelftestOptions {
    /// Bytes in each buffer.
    pub bytes: usize,
    /// Rounds, each timing every kernel once; each kernel's fastest is reported.
    pub iters: usize,
}

/// What a timed loop does to its buffers, for the byte accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// `dst.copy_from_slice(src)`: one read and one write per byte.
    Copy,
    /// `dst = dst op src`: two reads and one write per byte.
    ReduceInplace,
}

impl Kernel {
    /// Bytes read plus bytes written by one pass over buffers of `size` bytes.
    pub fn bytes_moved(self, size: usize) -> u64 {
        let passes = match self {
            Kernel::Copy => 2,
            Kernel::ReduceInplace => 3,
        };
        passes * size as u64
    }
}

/// GB/s (1e9 bytes per second, as nccl-tests) for `bytes` moved in `time`.
pub fn gbps(bytes: u64, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64() / 1e9
}

/// One copy measurement.
#[derive(Debug, Clone, Serialize)]
pub struct CopyResult {
    /// How the bytes were copied.
    pub method: CopyMethod,
    /// Best time of one pass, seconds.
    pub time_s: f64,
    /// Bytes read plus written by one pass.
    pub bytes_moved: u64,
    /// `bytes_moved / time_s / 1e9`.
    pub gbps: f64,
}

/// One reduction measurement.
#[derive(Debug, Clone, Serialize)]
pub struct ReduceResult {
    /// Element type.
    pub dtype: Dtype,
    /// Reduction op (always sum here).
    pub op: Op,
    /// Best time of one pass, seconds.
    pub time_s: f64,
    /// Bytes read plus written by one pass.
    pub bytes_moved: u64,
    /// `bytes_moved / time_s / 1e9`.
    pub gbps: f64,
    /// `gbps` over the copy's GB/s.
    pub ratio: f64,
    /// Whether the 80% target applies to this dtype (false: measured for context).
    pub targeted: bool,
    /// "PASS" or "BELOW" for targeted dtypes, absent for context rows.
    pub status: Option<&'static str>,
}

/// Everything one selftest measured.
#[derive(Debug, Clone, Serialize)]
pub struct SelftestReport {
    /// Bytes in each buffer.
    pub bytes: usize,
    /// Interleaved rounds, each timing every kernel once.
    pub iters: usize,
    /// Untimed runs of a kernel before each timed one.
    pub warmup: usize,
    /// Threads used (the ring all-reduce reduces on one thread per rank).
    pub threads: usize,
    /// How bytes are counted.
    pub accounting: &'static str,
    /// The share of copy bandwidth a targeted reduction must reach.
    pub target_ratio: f64,
    /// Memory copy bandwidth: the fastest of `copies`, the reference of every ratio.
    pub copy: CopyResult,
    /// Every copy method measured, in [`CopyMethod::available`] order.
    pub copies: Vec<CopyResult>,
    /// Reductions, targeted dtypes first.
    pub reductions: Vec<ReduceResult>,
}

/// What [`SelftestReport::accounting`] says (the JSON's unit, GB/s, then [`ACCOUNTED`]).
const ACCOUNTING: &str =
    "GB/s = 1e9 bytes/s of bytes read + written: copy 2 x size (read src, write dst), reduce 3 x size (read dst and src, write dst)";

/// What the bandwidth counts, after its unit.
const ACCOUNTED: &str =
    "of bytes read + written: copy 2 x size (read src, write dst), reduce 3 x size (read dst and src, write dst)";

/// Measures the copy and every reduction on the same two buffers, in interleaved rounds: each round runs
/// every kernel once (after an untimed run), and each kernel's fastest round is kept. On a shared
/// machine the memory bandwidth a process gets moves by a third within seconds; kernels timed one after
/// the other each saw a different spell of it, so a ratio could swing from 0.7 to 1.0 between runs. Rounds
/// give every kernel the same spells.
pub fn measure(opts: SelftestOptions) -> SelftestReport {
    let mut dst = HostBuf::new(opts.bytes);
    let mut src = HostBuf::new(opts.bytes);
    // Fresh zeroed pages may all map the kernel's one zero page, which would make reads cache hits:
    // write every byte first.
    src.fill(0x5a);
    dst.fill(0xa5);
    let methods = CopyMethod::available();
    let dtypes: Vec<(Dtype, bool)> = TARGETED
        .iter()
        .map(|&d| (d, true))
        .chain(CONTEXT.iter().map(|&d| (d, false)))
        .collect();
    let mut copy_best = vec![Duration::MAX; methods.len()];
    let mut reduce_best = vec![Duration::MAX; dtypes.len()];
    for _ in 0..opts.iters {
        for (best, method) in copy_best.iter_mut().zip(&methods) {
            *best = (*best).min(timed(|| method.run(&mut dst, &src)));
        }
        for (best, &(dtype, _)) in reduce_best.iter_mut().zip(&dtypes) {
            // Ones stay finite and normal through any number of sums (floats saturate at exact
            // integers, integers wrap), so no pass hits slow denormal or NaN paths. Refilled every round:
            // the copies and the other dtypes' sums leave other bytes behind.
            fill_ones(dtype, &mut src);
            fill_ones(dtype, &mut dst);
            *best = (*best).min(timed(|| reduce_inplace(dtype, Op::Sum, &mut dst, &src)));
        }
    }
    let copies: Vec<CopyResult> = methods
        .into_iter()
        .zip(copy_best)
        .map(|(method, t)| {
            let moved = Kernel::Copy.bytes_moved(opts.bytes);
            CopyResult {
                method,
                time_s: t.as_secs_f64(),
                bytes_moved: moved,
                gbps: gbps(moved, t),
            }
        })
        .collect();
    let copy = copies
        .iter()
        .max_by(|a, b| a.gbps.total_cmp(&b.gbps))
        .expect("memcpy is always available")
        .clone();
    let reductions = dtypes
        .into_iter()
        .zip(reduce_best)
        .map(|((dtype, targeted), t)| {
            let moved = Kernel::ReduceInplace.bytes_moved(opts.bytes);
            let g = gbps(moved, t);
            let ratio = g / copy.gbps;
            ReduceResult {
                dtype,
                op: Op::Sum,
                time_s: t.as_secs_f64(),
                bytes_moved: moved,
                gbps: g,
                ratio,
                targeted,
                status: targeted.then_some(if ratio >= TARGET_RATIO { "PASS" } else { "BELOW" }),
            }
        })
        .collect();
    SelftestReport {
        bytes: opts.bytes,
        iters: opts.iters,
        warmup: WARMUP,
        threads: 1,
        accounting: ACCOUNTING,
        target_ratio: TARGET_RATIO,
        copy,
        copies,
        reductions,
    }
}

/// One timed run of `f`, after [`WARMUP`] untimed ones.
fn timed(mut f: impl FnMut()) -> Duration {
    for _ in 0..WARMUP {
        f();
    }
    let t0 = Instant::now();
    f();
    // A zero duration (a coarse clock on a tiny buffer) would make GB/s infinite.
    t0.elapsed().max(Duration::from_nanos(1))
}

/// Fills `buf` with the value one in `dtype`'s encoding.
fn fill_ones(dtype: Dtype, buf: &mut [u8]) {
    let one: &[u8] = match dtype {
        Dtype::Int8 | Dtype::Uint8 => &[1],
        Dtype::Int32 | Dtype::Uint32 => &[1, 0, 0, 0],
        Dtype::Int64 | Dtype::Uint64 => &[1, 0, 0, 0, 0, 0, 0, 0],
        Dtype::Half => &[0x00, 0x3c],
        Dtype::Bfloat16 => &[0x80, 0x3f],
        Dtype::Float => &[0x00, 0x00, 0x80, 0x3f],
        Dtype::Double => &[0, 0, 0, 0, 0, 0, 0xf0, 0x3f],
    };
    // Whole elements only, as before any sum; the pattern is written once into a small head and the rest
    // copied from it in doubling spans, at memcpy speed (every round refills 128 MiB per dtype).
    let n = buf.len() / one.len() * one.len();
    let head = n.min(4096);
    for chunk in buf[..head].chunks_exact_mut(one.len()) {
        chunk.copy_from_slice(one);
    }
    let mut done = head;
    while done < n {
        let k = done.min(n - done);
        buf.copy_within(0..k, done);
        done += k;
    }
}

/// The nccl-tests style table, bandwidth in `units`.
pub fn render(r: &SelftestReport, units: BwUnit) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "# collbench selftest: CPU reduction vs memory copy, {} buffers, {} thread, best of {} interleaved rounds ({} warm-up per kernel and round)\n",
        format_size(r.bytes as u64),
        r.threads,
        r.iters,
        r.warmup
    ));
    s.push_str(&format!("# {} {ACCOUNTED}\n", units.definition()));
    s.push_str(&format!(
        "# target: float, half and bfloat16 sum >= {:.0}% of copy bandwidth, the fastest copy (ref); double, int32 for context\n#\n",
        r.target_ratio * 100.0
    ));
    s.push_str(&format!(
        "# {:>8} {:>9} {:>10} {:>12} {:>10} {:>8} {:>8}\n",
        "kernel",
        "dtype",
        "size(B)",
        "time(us)",
        units.label(),
        "vs copy",
        "target"
    ));
    // Bytes, as nccl-tests prints sizes, so every row splits into the same number of fields.
    let size = r.bytes;
    for c in &r.copies {
        s.push_str(&format!(
            "  {:>8} {:>9} {:>10} {:>12.1} {:>10.2} {:>8.2} {:>8}\n",
            "copy",
            c.method.name(),
            size,
            c.time_s * 1e6,
            units.of_gbs(c.gbps),
            c.gbps / r.copy.gbps,
            if c.method == r.copy.method { "ref" } else { "-" }
        ));
    }
    for x in &r.reductions {
        s.push_str(&format!(
            "  {:>8} {:>9} {:>10} {:>12.1} {:>10.2} {:>8.2} {:>8}\n",
            x.op.to_string(),
            x.dtype.to_string(),
            size,
            x.time_s * 1e6,
            units.of_gbs(x.gbps),
            x.ratio,
            x.status.unwrap_or("-")
        ));
    }
    let below: Vec<String> = r
        .reductions
        .iter()
        .filter(|x| x.status == Some("BELOW"))
        .map(|x| x.dtype.to_string())
        .collect();
    if below.is_empty() {
        s.push_str("# every targeted reduction reaches the target\n");
    } else {
        s.push_str(&format!("# below the target: {}\n", below.join(", ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::SelftestArgs;
    use crate::error::Error;

    fn args(bytes: &str, iters: usize) -> SelftestArgs {
        SelftestArgs {
            bytes: bytes.into(),
            iters,
            out: crate::cli::OutputArgs::default(),
            units: crate::cli::UnitsArg { units: "gbyte".into() },
            gpu: false,
            device: None,
        }
    }

    #[test]
    fn copy_counts_one_read_and_one_write() {
        assert_eq!(Kernel::Copy.bytes_moved(1 << 20), 2 << 20);
    }

    #[test]
    fn reduce_counts_two_reads_and_one_write() {
        assert_eq!(Kernel::ReduceInplace.bytes_moved(1 << 20), 3 << 20);
        assert_eq!(Kernel::ReduceInplace.bytes_moved(0), 0);
    }

    #[test]
    fn gbps_is_decimal_gigabytes_per_second() {
        assert_eq!(gbps(3_000_000_000, Duration::from_secs(2)), 1.5);
        assert_eq!(gbps(1_000, Duration::from_micros(1)), 1.0);
    }

    #[test]
    fn ones_encode_one_in_every_dtype() {
        let mut b = [0u8; 8];
        fill_ones(Dtype::Float, &mut b);
        assert_eq!(bytemuck::cast_slice::<u8, f32>(&b), &[1.0, 1.0]);
        fill_ones(Dtype::Double, &mut b);
        assert_eq!(bytemuck::cast_slice::<u8, f64>(&b), &[1.0]);
        fill_ones(Dtype::Half, &mut b);
        assert_eq!(bytemuck::cast_slice::<u8, half::f16>(&b), &[half::f16::ONE; 4]);
        fill_ones(Dtype::Bfloat16, &mut b);
        assert_eq!(bytemuck::cast_slice::<u8, half::bf16>(&b), &[half::bf16::ONE; 4]);
        fill_ones(Dtype::Int32, &mut b);
        assert_eq!(bytemuck::cast_slice::<u8, i32>(&b), &[1, 1]);
    }

    #[test]
    fn ones_fill_every_whole_element_of_a_large_buffer_and_nothing_after() {
        // Past the 4 KiB head the fill copies doubling spans; an odd tail must stay as it was.
        let len = 3 * 4096 + 4 * 1000 + 6;
        for dtype in [Dtype::Float, Dtype::Double, Dtype::Half, Dtype::Bfloat16, Dtype::Int32] {
            let mut small = vec![0u8; dtype.size()];
            fill_ones(dtype, &mut small);
            let mut b = vec![0xeeu8; len];
            fill_ones(dtype, &mut b);
            let whole = len / dtype.size() * dtype.size();
            for (i, e) in b[..whole].chunks_exact(dtype.size()).enumerate() {
                assert_eq!(e, &small[..], "{dtype} element {i}");
            }
            assert!(b[whole..].iter().all(|&x| x == 0xee), "{dtype}: tail written");
        }
    }

    #[test]
    fn options_reject_bad_sizes_and_iters_naming_the_flag() {
        for (b, i, flag) in [
            ("0", 1, "--bytes"),
            ("1Q", 1, "--bytes"),
            ("12", 1, "--bytes"),
            ("17G", 1, "--bytes"),
            ("4K", 0, "--iters"),
        ] {
            match SelftestOptions::from_args(&args(b, i)) {
                Err(Error::Usage { flag: f, .. }) => assert_eq!(f, flag, "{b} {i}"),
                other => panic!("{b} {i}: expected a usage error, got {other:?}"),
            }
        }
        assert_eq!(
            SelftestOptions::from_args(&args("64M", 3)).unwrap(),
            SelftestOptions {
                bytes: 64 << 20,
                iters: 3
            }
        );
    }

    #[test]
    fn report_has_every_dtype_and_marks_only_targeted_ones() {
        let r = measure(SelftestOptions {
            bytes: 64 << 10,
            iters: 1,
        });
        assert_eq!(r.copy.bytes_moved, 2 * (64 << 10));
        assert_eq!(r.copies.len(), CopyMethod::available().len());
        let fastest = r.copies.iter().map(|c| c.gbps).fold(0.0, f64::max);
        assert_eq!(r.copy.gbps, fastest, "the reference is the fastest copy");
        let dtypes: Vec<Dtype> = r.reductions.iter().map(|x| x.dtype).collect();
        assert_eq!(dtypes, [TARGETED.as_slice(), CONTEXT.as_slice()].concat());
        for x in &r.reductions {
            assert_eq!(x.bytes_moved, 3 * (64 << 10));
            assert!(x.ratio.is_finite() && x.ratio > 0.0, "{x:?}");
            assert_eq!(x.status.is_some(), x.targeted, "{x:?}");
        }
        let table = render(&r, BwUnit::Gbyte);
        for d in ["float", "half", "bfloat16", "double", "int32"] {
            assert!(
                table.lines().any(|l| !l.starts_with('#') && l.contains(d)),
                "{d} missing:\n{table}"
            );
        }
        assert!(
            table.contains(&format!("# {ACCOUNTING}\n")),
            "the header says what the JSON says:\n{table}"
        );
    }
}
