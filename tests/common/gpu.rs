//! The fake vendor libraries of tests/gpu/fake/ (NVML, CUDA driver, NVRTC, NCCL) built for a test binary, so a
//! test can load them through the loader's path and inject faults through their `FAKE_*` variables.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Builds `src` of tests/gpu/fake/ with `defines` into `dir` as `lib`: to a name of its own, then renamed, so test
/// threads or test binaries building at once never load half a file. False (and why, printed) without g++
/// outside CI; without it in CI, a failure.
pub fn build_fake(dir: &Path, src: &str, lib: &str, defines: &[&str]) -> bool {
    std::fs::create_dir_all(dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gpu/fake").join(src);
    let tmp = dir.join(format!(
        "build-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let mut c = Command::new("g++");
    c.args(["-std=c++17", "-O2", "-Wall", "-Wno-unknown-pragmas", "-shared", "-fPIC"]);
    c.args(defines);
    match c.arg("-o").arg(&tmp).arg(&src).arg("-ldl").output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "g++ could not build {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("skipped: g++ not runnable ({e}); apt-get install g++");
            return false;
        }
        Err(e) => panic!("g++ not runnable ({e}); CI needs it (apt-get install g++)"),
    }
    std::fs::rename(&tmp, dir.join(lib)).unwrap();
    true
}

/// The loader's path for a fake driver: a fake libnvidia-ml.so.1 (`old`: one lacking the health calls) and the
/// fake CUDA driver, NVRTC and NCCL, each built once per test binary. `None` where g++ is missing outside CI.
pub fn fake_nvml(old: bool) -> Option<PathBuf> {
    static CUDA: OnceLock<Option<PathBuf>> = OnceLock::new();
    static NVML: [OnceLock<Option<PathBuf>>; 2] = [OnceLock::new(), OnceLock::new()];
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let cuda = CUDA.get_or_init(|| {
        let dir = tmp.join("gpu-health-cuda");
        for (src, lib) in [
            ("cuda.cpp", "libcuda.so.1"),
            ("nvrtc.cpp", "libnvrtc.so"),
            ("nccl.cpp", "libnccl.so.2"),
        ] {
            if !build_fake(&dir, src, lib, &[]) {
                return None;
            }
        }
        // cudarc looks for libcuda.so before libcuda.so.1; the link is made beside, then renamed over.
        let link = dir.join("libcuda.so");
        let tmp = dir.join(format!("link-{}-{:?}", std::process::id(), std::thread::current().id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink("libcuda.so.1", &tmp).unwrap();
        std::fs::rename(&tmp, &link).unwrap();
        Some(dir)
    });
    let nvml = NVML[usize::from(old)].get_or_init(|| {
        let dir = tmp.join(if old { "fake-nvml-old" } else { "fake-nvml" });
        let defines: &[&str] = if old { &["-DFAKE_NVML_OLD"] } else { &[] };
        build_fake(&dir, "nvml.cpp", "libnvidia-ml.so.1", defines).then_some(dir)
    });
    let (cuda, nvml) = (cuda.as_ref()?, nvml.as_ref()?);
    Some(std::env::join_paths([nvml, cuda]).unwrap().into())
}

/// The fake NCCL on the loader's path `lib` (as [`fake_nvml`] returns it).
pub fn fake_nccl(lib: &Path) -> PathBuf {
    std::env::split_paths(lib).last().unwrap().join("libnccl.so.2")
}

/// The GPU checks of a preflight's JSON (path `gpu`).
pub fn gpu_checks(v: &serde_json::Value) -> Vec<&serde_json::Value> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["path"] == "gpu")
        .collect()
}

/// Every GPU check a clean node gets, in order, each passed; `out` is shown on failure.
pub fn assert_every_gpu_check_passes(v: &serde_json::Value, out: &str) {
    let checks = gpu_checks(v);
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "gpu count",
            "gpu ECC",
            "gpu memory repair",
            "gpu clocks",
            "gpu PCIe link",
            "gpu NVLink",
            "gpu persistence mode",
            "gpu copy bandwidth",
            "gpu host-to-device",
            "gpu device-to-host",
            "gpu driver"
        ],
        "{out}"
    );
    assert!(checks.iter().all(|c| c["verdict"] == "pass"), "{checks:#?}");
}

/// Every rank's output, labelled, for a failed assertion's message.
pub fn logs(done: &[super::netns::Done]) -> String {
    done.iter()
        .enumerate()
        .map(|(h, d)| format!("--- rank {h} stdout:\n{}\n--- rank {h} stderr:\n{}", d.stdout, d.stderr))
        .collect()
}

/// A GPU test on namespace hosts: the one-at-a-time guard, a cluster of `hosts` named from `prefix` and
/// `tag`, the fakes' folder and a folder for the outputs; `None` (after saying why) where they cannot be had.
pub fn gpu_cluster(
    prefix: &str,
    tag: &str,
    hosts: usize,
) -> Option<(
    std::sync::MutexGuard<'static, ()>,
    super::netns::Cluster,
    PathBuf,
    tempfile::TempDir,
)> {
    let one = super::netns::namespace_test()?;
    let lib = fake_nvml(false)?;
    let c = super::netns::Cluster::up(prefix, tag, hosts, &[]);
    Some((one, c, lib, tempfile::tempdir().unwrap()))
}

/// Fails unless every rank of a fake-GPU job ended alike, without a panic or a call the fakes refused.
pub fn check_ranks(label: &str, done: &[super::netns::Done]) {
    for (h, d) in done.iter().enumerate() {
        assert!(!d.stderr.contains("panicked"), "{label}: rank {h}:\n{}", logs(done));
        assert!(
            !d.stderr.contains("fake-cuda:") && !d.stderr.contains("fake-nccl:"),
            "{label}: a call the fakes refused on rank {h}:\n{}",
            logs(done)
        );
        assert_eq!(
            d.status.code(),
            done[0].status.code(),
            "{label}: rank {h}:\n{}",
            logs(done)
        );
    }
}
