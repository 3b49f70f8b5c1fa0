//! The GPU kernels as the host sees them: the CUDA C source (kernels/reduce.cu), the entry point for
//! each dtype and op, the NVRTC architecture for a device, and the launch geometry.
//!
//! Pure host logic, compiled in every build so that it is tested without CUDA; the launcher that uses it
//! is `super::cuda` (feature `cuda`).

use super::{Dtype, Op};

/// The CUDA C source of every reduction, finalize and verification kernel, compiled at run time.
pub const SOURCE: &str = include_str!("../../kernels/reduce.cu");

/// File name NVRTC reports in compile errors.
pub const SOURCE_NAME: &str = "kernels/reduce.cu";

/// Threads per block of every kernel (a multiple of the warp size: verify reduces counts per warp).
pub const BLOCK: u32 = 256;

/// Blocks per multiprocessor at most: enough resident warps to hide memory latency; more blocks only
/// add scheduling, since the loops stride over the grid.
pub const BLOCKS_PER_SM: u32 = 8;

/// Bytes each thread loads per operand per step of the vectorised loop.
pub const VECTOR_BYTES: usize = 16;

/// `reduce_<dtype>_<op>`: `dst[i] = op(a[i], b[i])` (Avg sums; [`finalize_name`] divides).
pub fn reduce_name(dtype: Dtype, op: Op) -> String {
    format!("reduce_{}_{}", dtype.name(), op.name())
}

/// `finalize_<dtype>_avg`: divides every element by the rank count, as the CPU's `finalize`.
pub fn finalize_name(dtype: Dtype) -> String {
    format!("finalize_{}_avg", dtype.name())
}

/// `verify_<dtype>`: counts elements that differ from an expected table of [`VERIFY_PERIOD`] values.
pub fn verify_name(dtype: Dtype) -> String {
    format!("verify_{}", dtype.name())
}

/// The verify kernel compares element `first + i` with `want[(first + i) % VERIFY_PERIOD]`: the period
/// of the data check's expected results (src/reduce/pattern.rs).
pub const VERIFY_PERIOD: usize = 8;

/// Every entry point the source defines, for checks that all of them compile and load.
pub fn all_names() -> Vec<String> {
    let mut names = Vec::new();
    for d in Dtype::ALL {
        names.extend(Op::ALL.iter().map(|&o| reduce_name(d, o)));
        names.push(finalize_name(d));
        names.push(verify_name(d));
    }
    names
}

/// NVRTC's option selecting the virtual architecture of a device with compute capability
/// `major.minor` (PTX that the driver compiles for that device when the module loads).
pub fn arch_option(major: i32, minor: i32) -> Result<String, String> {
    if !(3..=20).contains(&major) || !(0..=9).contains(&minor) {
        return Err(format!(
            "compute capability {major}.{minor} is not one collbench can compile for (expected 3.0 to 20.9)"
        ));
    }
    Ok(format!("--gpu-architecture=compute_{major}{minor}"))
}

/// Options of every NVRTC compile besides the architecture: no FMA contraction and IEEE division and
/// denormals, so that results match the CPU kernels bit for bit.
pub const COMPILE_OPTIONS: [&str; 4] = ["--fmad=false", "--prec-div=true", "--ftz=false", "--std=c++14"];

/// Grid and block size for `n` elements of `elem_size` bytes on a device with `sms` multiprocessors:
/// one thread per 16-byte vector, capped at [`BLOCKS_PER_SM`] blocks per multiprocessor (the kernels
/// stride over the grid), at least one block.
pub fn geometry(n: usize, elem_size: usize, sms: u32) -> (u32, u32) {
    let vectors = n.div_ceil((VECTOR_BYTES / elem_size.clamp(1, VECTOR_BYTES)).max(1));
    let wanted = vectors.div_ceil(BLOCK as usize).max(1);
    let cap = (sms.max(1) as usize).saturating_mul(BLOCKS_PER_SM as usize);
    (wanted.min(cap) as u32, BLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_and_op_has_an_entry_point_in_the_source() {
        let names = all_names();
        assert_eq!(names.len(), Dtype::ALL.len() * (Op::ALL.len() + 2));
        for d in Dtype::ALL {
            // The source instantiates each dtype through DTYPE(name, type); the names follow from it.
            assert!(
                SOURCE.contains(&format!("DTYPE({}, ", d.name())),
                "{d} is not instantiated"
            );
        }
        assert_eq!(reduce_name(Dtype::Bfloat16, Op::Avg), "reduce_bfloat16_avg");
        assert_eq!(finalize_name(Dtype::Half), "finalize_half_avg");
        assert_eq!(verify_name(Dtype::Uint64), "verify_uint64");
        for op in Op::ALL {
            assert!(
                SOURCE.contains(&format!("REDUCE(NAME, T, {})", op.name())),
                "{op} is not instantiated"
            );
        }
        assert!(SOURCE.contains("reduce_##NAME##_##OP") && SOURCE.contains("verify_##NAME"));
    }

    #[test]
    fn the_source_needs_no_include_path() {
        assert!(!SOURCE.contains("#include"));
    }

    #[test]
    fn arch_comes_from_the_compute_capability() {
        assert_eq!(arch_option(9, 0).unwrap(), "--gpu-architecture=compute_90");
        assert_eq!(arch_option(8, 6).unwrap(), "--gpu-architecture=compute_86");
        assert_eq!(arch_option(10, 0).unwrap(), "--gpu-architecture=compute_100");
        let e = arch_option(-1, 0).unwrap_err();
        assert!(e.contains("-1.0"), "{e}");
        assert!(arch_option(9, 12).is_err());
    }

    #[test]
    fn geometry_covers_every_vector_and_caps_the_grid() {
        // 1000 floats: 250 vectors, one block of 256 threads.
        assert_eq!(geometry(1000, 4, 132), (1, 256));
        // A tail element still gets a thread.
        assert_eq!(geometry(1025 * 4, 4, 132), (5, 256));
        // 256 MiB of floats: far more vectors than threads; capped at 8 blocks per SM.
        assert_eq!(geometry(64 << 20, 4, 132), (132 * 8, 256));
        // Empty buffers and odd inputs still launch a valid grid.
        assert_eq!(geometry(0, 8, 0), (1, 256));
        assert_eq!(geometry(17, 1, 1), (1, 256));
        // Doubles: two per vector.
        assert_eq!(geometry(2 * 256 * 3, 8, 100), (3, 256));
    }
}
