//! `collbench selftest --gpu`: the GPU kernels checked on the device present.
//!
//! 1. Every dtype/op reduction against the CPU kernels, bit for bit (NaN payloads and zero signs aside),
//!    on random inputs from a fresh seed (printed), with the output poisoned first; Avg also runs the
//!    finalize kernel against the CPU's `finalize`.
//! 2. The verification kernel on a correct buffer of the data check's expected values (count 0) and on
//!    the same buffer with some elements corrupted (count = the number corrupted).
//! 3. Float sum at 256 MiB against cuMemcpyDtoD in the same run: GB/s of bytes read + written, the
//!    ratio and the 85% target.

use serde::Serialize;

use super::gpu_data::{compare, corrupt_positions, fresh_seed, random_elements, Diff, Rng};
use crate::error::{Error, Result, EXIT_OK, EXIT_WRONG};
use crate::memory::cuda::Gpu;
use crate::memory::cuda_launch::Kernels;
use crate::reduce::cuda_kernels::VERIFY_PERIOD;
use crate::reduce::kernel::{finalize, reduce_into};
use crate::reduce::pattern::{Pattern, Source};
use crate::reduce::{Dtype, Op};

/// Elements per correctness check: an odd count, so the kernels' scalar tail runs too.
const CHECK_ELEMS: usize = (1 << 20) + 7;

/// Rank count the Avg checks divide by (3: a division that is not a shift).
const AVG_RANKS: usize = 3;

/// Elements the verification check corrupts.
const CORRUPTED: usize = 37;

/// Element index the verification check's buffer starts at (not a multiple of the pattern's period).
const VERIFY_FIRST: usize = 5;

/// Buffer size of the bandwidth comparison.
const BANDWIDTH_BYTES: usize = 256 << 20;

/// The share of copy bandwidth float sum must reach.
pub const TARGET_RATIO: f64 = 0.85;

/// The device the checks ran on.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    /// Ordinal as the driver numbers it.
    pub ordinal: usize,
    /// Name (`NVIDIA H200`).
    pub name: String,
    /// Compute capability, `major.minor`.
    pub capability: String,
    /// Streaming multiprocessors.
    pub sms: u32,
}

/// One reduction checked against the CPU.
#[derive(Debug, Clone, Serialize)]
pub struct ReduceCheck {
    /// Element type.
    pub dtype: Dtype,
    /// Op (Avg: reduce, then finalize by 3 ranks).
    pub op: Op,
    /// Elements compared.
    pub elements: usize,
    /// Elements that differ from the CPU's result, and the first.
    pub diff: Diff,
}

/// The verification kernel on one dtype.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyCheck {
    /// Element type.
    pub dtype: Dtype,
    /// Count on the correct buffer (must be 0).
    pub counted_clean: u64,
    /// Elements corrupted.
    pub corrupted: u64,
    /// Count on the corrupted buffer (must equal `corrupted`).
    pub counted_corrupted: u64,
    /// What the CPU check counts on the corrupted buffer (the same, as a cross-check).
    pub cpu_counted: u64,
}

/// Float sum against a device-to-device copy.
#[derive(Debug, Clone, Serialize)]
pub struct Bandwidth {
    /// Bytes in each buffer.
    pub bytes: usize,
    /// Timed repetitions (the fastest is reported).
    pub iters: usize,
    /// cuMemcpyDtoD: fastest time, seconds; GB/s of 2 x bytes.
    pub copy_time_s: f64,
    /// Copy GB/s (1e9 bytes/s, read + written).
    pub copy_gbps: f64,
    /// Reduce float sum: fastest time, seconds.
    pub reduce_time_s: f64,
    /// Reduce GB/s of 3 x bytes (two reads, one write).
    pub reduce_gbps: f64,
    /// reduce_gbps / copy_gbps.
    pub ratio: f64,
    /// The target ratio.
    pub target_ratio: f64,
    /// "PASS" or "BELOW".
    pub status: &'static str,
}

/// Everything `selftest --gpu` found.
#[derive(Debug, Clone, Serialize)]
pub struct GpuReport {
    /// The seed of the random inputs (rerun with COLLBENCH_SEED to repeat).
    pub seed: u64,
    /// The device.
    pub device: DeviceInfo,
    /// Every dtype/op reduction.
    pub reductions: Vec<ReduceCheck>,
    /// The verification kernel per dtype.
    pub verify: Vec<VerifyCheck>,
    /// Float sum vs copy.
    pub bandwidth: Bandwidth,
    /// True when every reduction matched and every verify count was right.
    pub correct: bool,
}

/// Runs the checks; exit 1 when a result is wrong, 2 when there is no usable GPU or NVRTC, 3 when a CUDA call fails.
pub fn selftest_gpu(args: &super::options::GpuSelftest) -> Result<i32> {
    let gpu = Gpu::open(args.device.as_deref()).map_err(|m| Error::usage("--gpu", m))?;
    let seed = match std::env::var("COLLBENCH_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .map_err(|_| Error::usage("COLLBENCH_SEED", format!("'{s}' is not an unsigned 64-bit integer")))?,
        Err(_) => fresh_seed(),
    };
    let device = DeviceInfo {
        ordinal: gpu.ordinal,
        name: gpu.name.clone(),
        capability: format!("{}.{}", gpu.capability.0, gpu.capability.1),
        sms: gpu.sms,
    };
    crate::report::stdout::print(&format!(
        "# collbench selftest --gpu: device {} {} (compute {}, {} SMs), seed {seed}\n",
        device.ordinal, device.name, device.capability, device.sms
    ))?;
    let fail = |m: String| Error::peer(format!("selftest --gpu on device {}: {m}", gpu.ordinal));
    // A missing or mismatched NVRTC is the environment's, like a missing driver: a usage error (exit 2).
    let kernels = Kernels::load(&gpu).map_err(|m| Error::usage("--gpu", m))?;
    let mut rng = Rng::new(seed);
    let reductions = check_reductions(&gpu, &kernels, &mut rng).map_err(fail)?;
    let verify = check_verify(&gpu, &kernels, &mut rng).map_err(fail)?;
    let bandwidth = measure_bandwidth(&gpu, &kernels, args.iters).map_err(fail)?;
    let correct = reductions.iter().all(|r| r.diff.wrong == 0)
        && verify
            .iter()
            .all(|v| v.counted_clean == 0 && v.counted_corrupted == v.corrupted && v.cpu_counted == v.corrupted);
    let report = GpuReport {
        seed,
        device,
        reductions,
        verify,
        bandwidth,
        correct,
    };
    crate::report::stdout::print(&render(&report, args.units))?;
    if let Some(p) = &args.json {
        let text = serde_json::to_string_pretty(&report).expect("selftest JSON serialises");
        crate::report::file::write_atomic(p, text.as_bytes(), crate::report::file::Replace::from_force(args.force))?;
    }
    Ok(if correct { EXIT_OK } else { EXIT_WRONG })
}

/// Every dtype/op on fresh random inputs, GPU against CPU.
fn check_reductions(gpu: &Gpu, kernels: &Kernels, rng: &mut Rng) -> Result<Vec<ReduceCheck>, String> {
    let mut out = Vec::new();
    for dtype in Dtype::ALL {
        let bytes = CHECK_ELEMS * dtype.size();
        let (mut a_dev, mut b_dev, mut dst_dev) = (gpu.alloc(bytes)?, gpu.alloc(bytes)?, gpu.alloc(bytes)?);
        let mut got = vec![0u8; bytes];
        let mut want = vec![0u8; bytes];
        for op in Op::ALL {
            let a = random_elements(dtype, CHECK_ELEMS, rng);
            let b = random_elements(dtype, CHECK_ELEMS, rng);
            gpu.upload(&a, &mut a_dev)?;
            gpu.upload(&b, &mut b_dev)?;
            // Stale output must not pass: the destination holds the data check's poison first.
            let mut poison = vec![0u8; bytes];
            Pattern::new(dtype, op, AVG_RANKS).poison(&mut poison);
            gpu.upload(&poison, &mut dst_dev)?;
            kernels.reduce(gpu, dtype, op, &mut dst_dev, &a_dev, &b_dev)?;
            if op == Op::Avg {
                kernels.finalize(gpu, dtype, &mut dst_dev, AVG_RANKS as u64)?;
            }
            gpu.download(&dst_dev, &mut got)?;
            reduce_into(dtype, op, &mut want, &a, &b);
            finalize(dtype, op, &mut want, AVG_RANKS);
            let diff = compare(dtype, &got, &want);
            out.push(ReduceCheck {
                dtype,
                op,
                elements: CHECK_ELEMS,
                diff,
            });
        }
    }
    Ok(out)
}

/// The verification kernel per dtype on the data check's expected values, clean then corrupted.
fn check_verify(gpu: &Gpu, kernels: &Kernels, rng: &mut Rng) -> Result<Vec<VerifyCheck>, String> {
    let mut out = Vec::new();
    for dtype in Dtype::ALL {
        let p = Pattern::new(dtype, Op::Sum, 4);
        let mut table = vec![0u8; VERIFY_PERIOD * dtype.size()];
        p.fill(Source::Reduced, 0, &mut table);
        let mut buf = vec![0u8; CHECK_ELEMS * dtype.size()];
        p.fill(Source::Reduced, VERIFY_FIRST, &mut buf);
        let mut dev = gpu.alloc(buf.len())?;
        gpu.upload(&buf, &mut dev)?;
        let counted_clean = kernels.verify(gpu, dtype, &dev, VERIFY_FIRST as u64, &table)?;
        // Corrupt with the poison value, which no expected element holds.
        let mut poison = vec![0u8; dtype.size()];
        p.poison(&mut poison);
        let positions = corrupt_positions(CHECK_ELEMS, CORRUPTED, rng);
        for &i in &positions {
            buf[i * dtype.size()..(i + 1) * dtype.size()].copy_from_slice(&poison);
        }
        gpu.upload(&buf, &mut dev)?;
        let counted_corrupted = kernels.verify(gpu, dtype, &dev, VERIFY_FIRST as u64, &table)?;
        let cpu_counted = p.check(Source::Reduced, VERIFY_FIRST, &buf).wrong;
        out.push(VerifyCheck {
            dtype,
            counted_clean,
            corrupted: positions.len() as u64,
            counted_corrupted,
            cpu_counted,
        });
    }
    Ok(out)
}

/// Float sum and cuMemcpyDtoD on the same 256 MiB buffers, fastest of `iters` each after one warm-up.
fn measure_bandwidth(gpu: &Gpu, kernels: &Kernels, iters: usize) -> Result<Bandwidth, String> {
    let bytes = BANDWIDTH_BYTES;
    let (a, b, mut dst) = (gpu.alloc(bytes)?, gpu.alloc(bytes)?, gpu.alloc(bytes)?);
    let best = |f: &mut dyn FnMut() -> Result<(), String>| -> Result<f64, String> {
        f()?;
        gpu.sync()?;
        let mut best = f64::INFINITY;
        for _ in 0..iters {
            let start = gpu.mark()?;
            f()?;
            let end = gpu.mark()?;
            best = best.min(Gpu::elapsed(&start, &end)?);
        }
        Ok(best.max(1e-9))
    };
    let copy_time_s = best(&mut || gpu.copy(&a, &mut dst).map_err(String::from))?;
    let reduce_time_s = best(&mut || {
        kernels
            .reduce(gpu, Dtype::Float, Op::Sum, &mut dst, &a, &b)
            .map_err(String::from)
    })?;
    let copy_gbps = 2.0 * bytes as f64 / copy_time_s / 1e9;
    let reduce_gbps = 3.0 * bytes as f64 / reduce_time_s / 1e9;
    let ratio = reduce_gbps / copy_gbps;
    Ok(Bandwidth {
        bytes,
        iters,
        copy_time_s,
        copy_gbps,
        reduce_time_s,
        reduce_gbps,
        ratio,
        target_ratio: TARGET_RATIO,
        status: if ratio >= TARGET_RATIO { "PASS" } else { "BELOW" },
    })
}

/// The text report: one line per failure, counts, and the bandwidth table.
pub fn render(r: &GpuReport, units: crate::units::BwUnit) -> String {
    let mut s = String::new();
    let bad: Vec<&ReduceCheck> = r.reductions.iter().filter(|c| c.diff.wrong != 0).collect();
    s.push_str(&format!(
        "# reductions vs CPU kernels: {} of {} dtype/op pairs match bit for bit ({} elements each, output poisoned first)\n",
        r.reductions.len() - bad.len(),
        r.reductions.len(),
        CHECK_ELEMS
    ));
    for c in bad {
        let (i, g, w) = c.diff.first.clone().unwrap_or_default();
        s.push_str(&format!(
            "WRONG {} {}: {} elements differ; first at {i}: GPU {g}, CPU {w}\n",
            c.dtype, c.op, c.diff.wrong
        ));
    }
    for v in &r.verify {
        let ok = v.counted_clean == 0 && v.counted_corrupted == v.corrupted && v.cpu_counted == v.corrupted;
        s.push_str(&format!(
            "# verify {:>8}: clean {} wrong, {} corrupted -> {} counted (CPU {}) {}\n",
            v.dtype.name(),
            v.counted_clean,
            v.corrupted,
            v.counted_corrupted,
            v.cpu_counted,
            if ok { "ok" } else { "WRONG" }
        ));
    }
    let b = &r.bandwidth;
    s.push_str(&format!(
        "# bandwidth, {} MiB buffers, best of {}: {} read + written (copy 2 x size, reduce 3 x size)\n",
        b.bytes >> 20,
        b.iters,
        units.definition()
    ));
    s.push_str(&format!(
        "  copy (cuMemcpyDtoD) {:>9.1} {units} {:>10.1} us\n",
        units.of_gbs(b.copy_gbps),
        b.copy_time_s * 1e6
    ));
    s.push_str(&format!(
        "  reduce float sum    {:>9.1} {units} {:>10.1} us  {:.1}% of copy (target {:.0}%): {}\n",
        units.of_gbs(b.reduce_gbps),
        b.reduce_time_s * 1e6,
        b.ratio * 100.0,
        b.target_ratio * 100.0,
        b.status
    ));
    s.push_str(&format!("# result: {}\n", if r.correct { "correct" } else { "WRONG" }));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(wrong: u64, counted: u64) -> GpuReport {
        GpuReport {
            seed: 42,
            device: DeviceInfo {
                ordinal: 0,
                name: "test device".into(),
                capability: "9.0".into(),
                sms: 132,
            },
            reductions: vec![ReduceCheck {
                dtype: Dtype::Half,
                op: Op::Max,
                elements: 10,
                diff: Diff {
                    wrong,
                    first: (wrong > 0).then(|| (3, "0x3c00".into(), "0x3c01".into())),
                },
            }],
            verify: vec![VerifyCheck {
                dtype: Dtype::Float,
                counted_clean: 0,
                corrupted: 37,
                counted_corrupted: counted,
                cpu_counted: 37,
            }],
            bandwidth: Bandwidth {
                bytes: BANDWIDTH_BYTES,
                iters: 20,
                copy_time_s: 1e-3,
                copy_gbps: 536.9,
                reduce_time_s: 1.6e-3,
                reduce_gbps: 503.3,
                ratio: 0.9375,
                target_ratio: TARGET_RATIO,
                status: "PASS",
            },
            correct: wrong == 0 && counted == 37,
        }
    }

    #[test]
    fn the_text_names_each_failure_and_the_ratio() {
        let ok = render(&report(0, 37), crate::units::BwUnit::Gbyte);
        assert!(
            ok.contains("1 of 1 dtype/op pairs match") && ok.contains("93.8% of copy (target 85%): PASS"),
            "{ok}"
        );
        assert!(ok.contains("# result: correct"));
        let bad = render(&report(5, 36), crate::units::BwUnit::Gbyte);
        assert!(
            bad.contains("WRONG half max: 5 elements differ; first at 3: GPU 0x3c00, CPU 0x3c01"),
            "{bad}"
        );
        assert!(
            bad.contains("37 corrupted -> 36 counted (CPU 37) WRONG") && bad.contains("# result: WRONG"),
            "{bad}"
        );
    }

    /// tests/gpu/device-check.sh's summary reads these keys.
    #[test]
    fn the_json_has_the_keys_the_device_script_reads() {
        let v = serde_json::to_value(report(0, 37)).unwrap();
        assert_eq!(v["device"]["name"], "test device");
        assert_eq!(v["device"]["capability"], "9.0");
        assert_eq!(v["seed"], 42);
        assert_eq!(v["reductions"][0]["dtype"], "half");
        assert_eq!(v["reductions"][0]["op"], "max");
        assert_eq!(v["reductions"][0]["diff"]["wrong"], 0);
        assert_eq!(v["verify"][0]["counted_corrupted"], 37);
        assert_eq!(v["verify"][0]["corrupted"], 37);
        assert_eq!(v["verify"][0]["counted_clean"], 0);
        for k in ["reduce_gbps", "copy_gbps", "ratio", "target_ratio", "status"] {
            assert!(!v["bandwidth"][k].is_null(), "bandwidth.{k}");
        }
    }
}
