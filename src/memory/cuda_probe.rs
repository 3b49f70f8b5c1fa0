//! What the GPU path needs before it touches a device: the messages for a missing driver, NVRTC or
//! device, and which device a process uses. Pure logic, compiled in every build.

use super::MemoryError;

/// Environment variable that picks the CUDA device by ordinal, over the local-rank default.
pub const DEVICE_ENV: &str = "COLLBENCH_CUDA_DEVICE";

/// Local-rank variables of the launchers collbench runs under, first found wins: collbench's own
/// launcher's (`COLLBENCH_LOCAL_RANK`, see `world::env::LOCAL_RANK`), then OpenMPI's, Slurm's, MPICH's and
/// torchrun's.
pub const LOCAL_RANK_ENV: [&str; 5] = [
    "COLLBENCH_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_LOCALID",
    "MPI_LOCALRANKID",
    "LOCAL_RANK",
];

/// The message when libcuda cannot be loaded: what was looked for and what to check.
pub fn no_driver_message() -> String {
    "the NVIDIA driver library libcuda.so (libcuda.so.1) could not be loaded: this machine has no NVIDIA \
     driver, or the loader cannot find it. Check `nvidia-smi`; install the NVIDIA driver; in a container, run \
     with the GPU exposed (docker --gpus all, or the NVIDIA container toolkit); or add the directory holding \
     libcuda.so.1 to LD_LIBRARY_PATH"
        .to_string()
}

/// The message when libnvrtc cannot be loaded (the kernels are compiled at run time).
pub fn no_nvrtc_message() -> String {
    "the CUDA run-time compiler libnvrtc.so (libnvrtc.so.13 or .12) could not be loaded; collbench compiles its \
     GPU kernels with it at start-up. Install it (the CUDA toolkit's cuda-nvrtc package, or `pip install \
     nvidia-cuda-nvrtc`) and add the directory holding libnvrtc.so.* to LD_LIBRARY_PATH"
        .to_string()
}

/// The message for a build without the `cuda` feature.
pub fn not_built_message() -> String {
    "this collbench was built without CUDA; rebuild with `cargo build --release --features cuda` (needs no CUDA \
     toolkit at build time; the driver and NVRTC are loaded at run time)"
        .to_string()
}

/// The device a process uses among `count`: `override_` (from [`DEVICE_ENV`] or a flag) when given,
/// else the local rank modulo the count (ranks share devices when there are more ranks than devices).
pub fn pick_device(override_: Option<&str>, local_rank: Option<&str>, count: usize) -> Result<usize, MemoryError> {
    if count == 0 {
        return Err(MemoryError::NoDevices);
    }
    if let Some(s) = override_ {
        let d: usize = s.trim().parse().map_err(|_| MemoryError::NotAnOrdinal {
            given: s.to_string(),
            count,
        })?;
        if d >= count {
            return Err(MemoryError::NoSuchDevice { ordinal: d, count });
        }
        return Ok(d);
    }
    let rank = local_rank.and_then(|s| s.trim().parse::<usize>().ok()).unwrap_or(0);
    Ok(rank % count)
}

/// The first local-rank variable set in the environment `get` reads.
pub fn local_rank_from(get: impl Fn(&str) -> Option<String>) -> Option<String> {
    LOCAL_RANK_ENV.iter().find_map(|k| get(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_library_and_what_to_do() {
        let m = no_driver_message();
        assert!(
            m.contains("libcuda.so") && m.contains("nvidia-smi") && m.contains("LD_LIBRARY_PATH"),
            "{m}"
        );
        let m = no_nvrtc_message();
        assert!(
            m.contains("libnvrtc.so") && m.contains("pip install nvidia-cuda-nvrtc"),
            "{m}"
        );
        assert!(not_built_message().contains("--features cuda"));
    }

    #[test]
    fn the_device_follows_the_local_rank_unless_overridden() {
        assert_eq!(pick_device(None, None, 8), Ok(0));
        assert_eq!(pick_device(None, Some("3"), 8), Ok(3));
        assert_eq!(pick_device(None, Some("9"), 8), Ok(1));
        assert_eq!(pick_device(Some("5"), Some("3"), 8), Ok(5));
        let e = pick_device(Some("8"), None, 8).unwrap_err();
        assert_eq!(e, MemoryError::NoSuchDevice { ordinal: 8, count: 8 });
        let m = e.to_string();
        assert!(m.contains("device 8") && m.contains("0 to 7"), "{m}");
        let e = pick_device(Some("gpu0"), None, 2).unwrap_err();
        assert!(matches!(&e, MemoryError::NotAnOrdinal { given, count: 2 } if given == "gpu0"));
        assert!(e.to_string().contains("'gpu0'"), "{e}");
        let e = pick_device(None, None, 0).unwrap_err();
        assert_eq!(e, MemoryError::NoDevices);
        assert!(e.to_string().contains("no CUDA device"));
    }

    #[test]
    fn the_local_rank_comes_from_the_first_launcher_variable_set() {
        let env = |k: &str| (k == "SLURM_LOCALID").then(|| "2".to_string());
        assert_eq!(local_rank_from(env).as_deref(), Some("2"));
        assert_eq!(local_rank_from(|_| None), None);
        // The embedded launcher's own variable is read first (it sets no launcher's).
        let env = |k: &str| match k {
            "COLLBENCH_LOCAL_RANK" => Some("3".to_string()),
            "LOCAL_RANK" => Some("0".to_string()),
            _ => None,
        };
        assert_eq!(local_rank_from(env).as_deref(), Some("3"));
    }
}
