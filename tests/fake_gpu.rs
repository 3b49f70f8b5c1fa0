//! The GPU path's real code (cudarc's driver calls in src/memory/cuda*.rs, the kernel launches of
//! src/memory/cuda_launch.rs, the NCCL binding and engine, NVML and gpu-matrix) run end to end against fake
//! libraries built from tests/gpu/fake/: a CUDA driver on host memory that runs kernels/reduce.cu compiled as
//! host C++ and refuses any device range outside a live allocation, an NVRTC that checks its options, a
//! one-rank NCCL and an NVML with NVLinks. What they cannot show is how real hardware behaves (PTX, timing,
//! GPUDirect); tests/gpu/device-check.sh is for that. Needs the `cuda` feature and g++ (failed, not
//! skipped, without g++ when CI=true).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The folder holding the four fake libraries, built once per test binary; None (and why, printed) where
/// they cannot be built or used.
fn fakes() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        if !cfg!(feature = "cuda") {
            eprintln!("skipped: built without the cuda feature (cargo test --features cuda)");
            return None;
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gpu/fake");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-gpu-libs");
        std::fs::create_dir_all(&dir).unwrap();
        for (src, lib) in [
            ("cuda.cpp", "libcuda.so.1"),
            ("nvrtc.cpp", "libnvrtc.so"),
            ("nccl.cpp", "libnccl.so.2"),
            ("nvml.cpp", "libnvidia-ml.so.1"),
        ] {
            let out = Command::new("g++")
                .args([
                    "-std=c++17",
                    "-O2",
                    "-Wall",
                    "-Wno-unknown-pragmas",
                    "-shared",
                    "-fPIC",
                    "-o",
                ])
                .arg(dir.join(lib))
                .arg(root.join(src))
                .arg("-ldl")
                .output();
            match out {
                Ok(o) if o.status.success() => {}
                Ok(o) => panic!("g++ could not build {src}:\n{}", String::from_utf8_lossy(&o.stderr)),
                Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
                    eprintln!("skipped: g++ not runnable ({e}); apt-get install g++");
                    return None;
                }
                Err(e) => panic!("g++ not runnable ({e}); CI needs it (apt-get install g++)"),
            }
        }
        // cudarc looks for libcuda.so before libcuda.so.1.
        let link = dir.join("libcuda.so");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("libcuda.so.1", &link).unwrap();
        Some(dir)
    })
    .as_deref()
}

/// collbench `line` (split at spaces) with `-J json`, the fakes first on the loader's path and `env` set;
/// (exit code, stdout, stderr).
fn collbench(dir: &Path, env: &[(&str, &str)], line: &str, json: &Path) -> (Option<i32>, String, String) {
    let mut args: Vec<&str> = line.split_whitespace().collect();
    args.extend(["-J", json.to_str().expect("a UTF-8 path")]);
    let mut c = Command::new(env!("CARGO_BIN_EXE_collbench"));
    c.env("LD_LIBRARY_PATH", dir)
        .env("COLLBENCH_NCCL_LIB", dir.join("libnccl.so.2"))
        .env_remove("COLLBENCH_RANK")
        .env_remove("COLLBENCH_CUDA_DEVICE")
        .args(&args);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("collbench runs");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(
        !err.contains("panicked") && !err.contains("fake-cuda:") && !err.contains("fake-nccl:"),
        "{args:?}: a panic or a call the fakes refused:\n{err}"
    );
    (o.status.code(), out, err)
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("JSON written")).expect("valid JSON")
}

/// Every row's wrong-element counts, in place and out of place.
fn wrong_counts(v: &serde_json::Value) -> Vec<f64> {
    let rows = v["results"].as_array().expect("results");
    rows.iter()
        .flat_map(|r| ["out_of_place", "in_place"].map(|p| r[p]["nwrong"].as_f64().expect("nwrong a number")))
        .collect()
}

#[test]
fn selftest_gpu_runs_every_kernel_through_the_driver_api() {
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let j = tmp.path().join("selftest.json");
    let (code, out, err) = collbench(dir, &[("FAKE_CUDA_COPY_GBPS", "100")], "selftest --gpu -n 1", &j);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let v = json(&j);
    assert!(
        v["device"]["name"].as_str().unwrap().contains("fake"),
        "{}",
        v["device"]
    );
    let reductions = v["reductions"].as_array().unwrap();
    assert_eq!(reductions.len(), 10 * 5, "every dtype x op");
    for c in reductions {
        assert_eq!(c["diff"]["wrong"], 0, "{c}");
    }
    let verify = v["verify"].as_array().unwrap();
    assert_eq!(verify.len(), 10);
    for c in verify {
        assert_eq!(
            (c["counted_clean"].as_u64(), c["counted_corrupted"].as_u64()),
            (Some(0), c["corrupted"].as_u64()),
            "{c}"
        );
    }
    // The copy is timed by events on the fake's clock: 100 GB/s exactly, counted read + written.
    let copy = v["bandwidth"]["copy_gbps"].as_f64().unwrap();
    assert!((copy - 200.0).abs() < 0.5, "{copy}");
}

#[test]
fn memory_cuda_runs_every_collective_on_device_buffers_with_ranges_enforced() {
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let j = tmp.path().join("run.json");
    let (code, out, err) = collbench(
        dir,
        &[],
        "run --np 3 --memory cuda --collective all -d float,half,int32 -b 16 -e 192K -f 8 -w 1 -n 2 --staging-pieces 3",
        &j,
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let v = json(&j);
    let m = &v["collbench"]["memory"];
    // A real device as far as collbench can tell: the JSON says emulated only of `--emulate-device`.
    assert_eq!(
        (m["kind"].as_str(), m["emulated"].as_bool().unwrap_or(false)),
        (Some("cuda"), false),
        "{m}"
    );
    let collectives: std::collections::BTreeSet<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["collective"].as_str().unwrap())
        .collect();
    assert_eq!(collectives.len(), 7, "{collectives:?}");
    let wrong = wrong_counts(&v);
    assert!(!wrong.is_empty() && wrong.iter().all(|w| *w == 0.0), "{wrong:?}");
    assert!(
        out.contains("device cuda:0 [0000:10:00.0] collbench fake CUDA driver"),
        "the device is named in the rank list:\n{out}"
    );
    assert!(out.contains("copies its input to pinned host memory"), "{out}");
}

/// The devices the run's JSON lists for its ranks, in rank order.
fn rank_devices(v: &serde_json::Value) -> Vec<String> {
    let ranks = v["collbench"]["run"]["ranks"].as_array().expect("ranks listed");
    ranks
        .iter()
        .map(|r| r["device"].as_str().unwrap_or("-").to_string())
        .collect()
}

#[test]
fn each_local_rank_gets_its_own_gpu_in_turn_unless_one_is_named() {
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let gpu = |i: usize| format!("cuda:{i} [0000:1{i}:00.0] collbench fake CUDA driver (host memory)");
    for (named, want) in [
        (None, vec![gpu(0), gpu(1), gpu(0)]),
        (Some("1"), vec![gpu(1), gpu(1), gpu(1)]),
    ] {
        let j = tmp.path().join(format!("ranks-{}.json", named.unwrap_or("auto")));
        let mut env = vec![("FAKE_CUDA_DEVICES", "2")];
        env.extend(named.map(|d| ("COLLBENCH_CUDA_DEVICE", d)));
        let (code, out, err) = collbench(
            dir,
            &env,
            "run --np 3 --memory cuda --collective all_reduce -b 1K -e 4K",
            &j,
        );
        assert_eq!(code, Some(0), "{out}\n{err}");
        assert_eq!(rank_devices(&json(&j)), want, "{named:?}");
        for (r, d) in want.iter().enumerate() {
            assert!(
                out.lines()
                    .any(|l| l.starts_with(&format!("#  Rank  {r} ")) && l.ends_with(&format!("device {d}"))),
                "{out}"
            );
        }
    }
}

#[test]
fn reductions_on_the_device_launch_every_dtype_and_op() {
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let j = tmp.path().join("rod.json");
    let (code, out, err) = collbench(
        dir,
        &[],
        "run --np 2 --memory cuda --reduce-on device --collective all_reduce,reduce_scatter -d all -o all
            -b 16 -e 64K -f 16 -w 1 -n 1 --staging-pieces 3",
        &j,
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let v = json(&j);
    let rows = v["results"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["algo"] == "device_reduce"), "{rows:?}");
    let ops: std::collections::BTreeSet<&str> = rows.iter().map(|r| r["redop"].as_str().unwrap()).collect();
    let types: std::collections::BTreeSet<&str> = rows.iter().map(|r| r["type"].as_str().unwrap()).collect();
    assert_eq!((ops.len(), types.len()), (5, 10), "{ops:?} {types:?}");
    assert!(wrong_counts(&v).iter().all(|w| *w == 0.0));
}

#[test]
fn a_corrupted_copy_from_the_device_is_counted_and_fails_the_run() {
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let j = tmp.path().join("bad.json");
    let (code, out, err) = collbench(
        dir,
        &[("FAKE_CUDA_CORRUPT_DTOH", "1")],
        "run --np 2 --memory cuda --collective all_reduce,all_gather -d int32 -b 1K -e 64K -f 8 -w 1 -n 1",
        &j,
    );
    assert_eq!(code, Some(1), "{out}\n{err}");
    let wrong = wrong_counts(&json(&j));
    assert!(!wrong.is_empty() && wrong.iter().all(|w| *w > 0.0), "{wrong:?}");
}

#[test]
fn nccl_runs_every_collective_on_the_device_buffers() {
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let j = tmp.path().join("nccl.json");
    let (code, out, err) = collbench(
        dir,
        &[],
        "run --np 1 --memory cuda --transport nccl --collective all -d float,half -b 16 -e 1M -f 8 -w 1 -n 2",
        &j,
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let v = json(&j);
    let rows = v["results"].as_array().unwrap();
    let collectives: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r["collective"].as_str().unwrap()).collect();
    assert_eq!(collectives.len(), 7, "{collectives:?}");
    assert!(rows.iter().all(|r| r["path"] == "nccl"), "{rows:?}");
    // A run of nccl alone stages nothing, and its header says only that.
    assert!(
        out.contains("# Memory: cuda (device buffers, one GPU per rank)\n") && !out.contains("pinned host memory"),
        "{out}"
    );
    assert!(wrong_counts(&v).iter().all(|w| *w == 0.0));
}

#[test]
fn gpu_matrix_flags_an_nvlink_pair_below_its_links_rate_and_passes_one_at_it() {
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // Two GPUs joined by 2 NVLinks 4.0: 50 GB/s expected per direction, flagged under half of it.
    for (gbps, code_wanted, flagged) in [("10", 1, true), ("40", 0, false)] {
        let j = tmp.path().join(format!("gm{gbps}.json"));
        let env = [
            ("FAKE_CUDA_DEVICES", "2"),
            ("FAKE_NVML_NVLINKS", "2"),
            ("FAKE_CUDA_COPY_GBPS", gbps),
        ];
        let (code, out, err) = collbench(dir, &env, "gpu-matrix --bytes 4M -n 2", &j);
        assert_eq!(code, Some(code_wanted), "{gbps} GB/s:\n{out}\n{err}");
        assert!(out.contains("NV2 (NVLink 4.0, 25 GB/s per link)"), "{out}");
        let text = serde_json::to_string(&json(&j)).unwrap();
        assert_eq!(text.contains("\"flagged\":true"), flagged, "{text}");
        let warned = format!("{out}{err}").contains("gpu 0 -> gpu 1 reached 20% of its NVLink expectation");
        assert_eq!(warned, flagged, "{out}\n{err}");
    }
}

#[test]
fn info_reads_the_gpus_and_their_nvlinks_from_nvml() {
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let j = tmp.path().join("info.json");
    let env = [("FAKE_CUDA_DEVICES", "2"), ("FAKE_NVML_NVLINKS", "4")];
    let (code, out, err) = collbench(dir, &env, "info", &j);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("4/4 active (NVLink 4.0)") && out.contains("NV4"), "{out}");
    let v = json(&j);
    let gpus = v["hosts"][0]["gpu_topology"]["gpus"].as_array().expect("gpus listed");
    assert_eq!(gpus.len(), 2);
    for g in gpus {
        assert_eq!(
            (g["nvlink_version"].as_u64(), g["compute_major"].as_i64()),
            (Some(6), Some(9)),
            "{g}"
        );
    }
}

#[test]
fn the_device_check_script_passes_every_step_on_the_fake_libraries() {
    // The script a GPU machine runs, whole, at rehearsal sizes: every step, its checks and its summary
    // must pass here first (tests/cuda.rs rehearses it with no GPU libraries at all).
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("dc");
    let o = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gpu/device-check.sh"))
        .arg(env!("CARGO_BIN_EXE_collbench"))
        .arg(&out)
        .env("LD_LIBRARY_PATH", dir)
        .env("COLLBENCH_NCCL_LIB", dir.join("libnccl.so.2"))
        .env("DEVICE_CHECK_SMALL", "1")
        .env("FAKE_CUDA_COPY_GBPS", "100")
        .env_remove("COLLBENCH_RANK")
        .env_remove("OUT")
        .output()
        .expect("bash runs");
    let log = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap_or_default();
    assert_eq!(o.status.code(), Some(0), "{summary}\n{log}");
    let exits: Vec<&str> = summary.lines().filter(|l| l.contains(" exited ")).collect();
    assert_eq!(exits.len(), 11, "{summary}");
    assert!(exits.iter().all(|l| l.contains(" exited 0")), "{summary}");
    for want in [
        "reductions 50/50 match the CPU",
        "verify kernel 10/10 dtypes count right",
        "summary: nccl: ",
        "run-np4.json: memory cuda",
        "summary: preflight pass: ",
        "summary: PASS gpu host-to-device: 1 GPU(s): 100.0 to 100.0 GB/s",
    ] {
        assert!(summary.contains(want), "{want}:\n{summary}");
    }
    assert!(!log.contains("fake-cuda:") && !log.contains("panicked"), "{log}");
}

/// How many times the fakes logged `call` (FAKE_CALL_LOG) during one run.
fn calls(log: &Path, call: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == call)
        .count()
}

#[test]
fn the_gpu_and_the_nccl_communicator_are_opened_once_per_run_however_many_sweeps() {
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let line = "run --np 1 --memory cuda --transport tcp,nccl --collective all_reduce,all_gather -w 1 -n 2";
    let opened = |sweeps: &str, name: &str| {
        let log = tmp.path().join(format!("{name}.log"));
        let (code, out, err) = collbench(
            dir,
            &[("FAKE_CALL_LOG", log.to_str().unwrap())],
            &format!("{line} {sweeps}"),
            &tmp.path().join(format!("{name}.json")),
        );
        assert_eq!(code, Some(0), "{out}\n{err}");
        (calls(&log, "ncclCommInitRank"), calls(&log, "cuDevicePrimaryCtxRetain"))
    };
    // Three repeats, every point its own turn: 3 x 4 points x 2 collectives sweeps per path.
    let (comms, contexts) = opened("-b 8 -e 4K -f 8 --repeat 3 --interleave point", "many");
    let (_, contexts_once) = opened("-b 8 -e 8", "one");
    assert_eq!(comms, 1, "one NCCL communicator per run");
    assert!(contexts > 0, "the fake driver logs the contexts retained");
    assert_eq!(contexts, contexts_once, "GPU opens must not grow with sweeps");
}

#[test]
fn all_reduce_perf_runs_nccls_collectives_on_the_device_where_the_libraries_are() {
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let link = tmp.path().join("all_reduce_perf");
    let log = tmp.path().join("calls.log");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_collbench"), &link).unwrap();
    let o = Command::new(&link)
        .args(["-b", "8", "-e", "1M", "-f", "4", "-g", "1", "-w", "1", "-n", "2"])
        .current_dir(tmp.path())
        .env("LD_LIBRARY_PATH", dir)
        .env("COLLBENCH_NCCL_LIB", dir.join("libnccl.so.2"))
        .env("FAKE_CALL_LOG", &log)
        .env_remove("COLLBENCH_RANK")
        .env_remove("COLLBENCH_CUDA_DEVICE")
        .output()
        .expect("all_reduce_perf runs");
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        !err.contains("panicked") && !err.contains("fake-cuda:") && !err.contains("fake-nccl:"),
        "a panic or a call the fakes refused:\n{err}"
    );
    let first = out.lines().next().unwrap_or_default();
    assert!(first.contains("NCCL's collectives on device memory"), "{out}");
    // The rank line names the GPU as nccl-tests' does.
    assert!(out.contains(" device  0 [0000:"), "{out}");
    // nccl-tests' rows: 8 B to 1 MiB by 4 is 9 sizes (8 B .. 512 KiB), each with #wrong 0 in both placements.
    let rows: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 9, "{out}");
    assert!(rows.iter().all(|r| r[8] == "0" && r[12] == "0"), "{out}");
    assert!(rows.iter().all(|r| r[2] == "float" && r[3] == "sum"), "{out}");
    assert!(out.contains("# Out of bounds values : 0 OK"), "{out}");
    assert_eq!(
        calls(&log, "ncclCommInitRank"),
        1,
        "NCCL, not collbench's own path, ran the rows"
    );
}

#[test]
fn a_rank_stuck_inside_an_nccl_call_is_named_by_every_rank_and_the_run_ends() {
    // Three ranks, each its own process on its own fake GPU, meet in the fake NCCL's collectives through a
    // folder. Rank 1's first ncclAllReduce hangs inside the call and never launches; ranks 0 and 2 launch
    // theirs and wait on their streams for it, as with real NCCL, where no call returns an error. Only the
    // watchdog ends this run: without it, it never ends.
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let meet = tmp.path().join("meet");
    std::fs::create_dir(&meet).unwrap();
    let line = "run --np 3 --memory cuda --transport nccl --collective all_reduce -b 1K -e 1K -w 1 -n 2 -c 0 -T 2";
    let mut c = Command::new(env!("CARGO_BIN_EXE_collbench"));
    c.env("LD_LIBRARY_PATH", dir)
        .env("COLLBENCH_NCCL_LIB", dir.join("libnccl.so.2"))
        .env("FAKE_CUDA_DEVICES", "3")
        .env("FAKE_NCCL_DIR", &meet)
        .env("FAKE_NCCL_HANG_RANK", "1")
        .env_remove("COLLBENCH_RANK")
        .env_remove("COLLBENCH_CUDA_DEVICE")
        .args(line.split_whitespace())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = c.spawn().expect("collbench runs");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    // A bound on a hang, not a timing: a run the watchdog does not end is killed and the test fails.
    let o = match rx.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(o) => o.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("the run with rank 1 stuck in ncclAllReduce never ended: no watchdog held -T");
        }
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    let host = collbench::world::hostname();
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("collbench: error: ")).collect();
    assert!(!errors.is_empty(), "{err}");
    for l in &errors {
        for w in [
            "ncclAllReduce of 1 KiB has not returned after",
            "rank 1 (host",
            "never launched the call the others wait in",
            &format!("Culprit: rank 1 (host {host})"),
        ] {
            assert!(l.contains(w), "'{w}' missing from: {l}\n{err}");
        }
    }
    // The ranks that waited for it name it, not only the stuck rank itself.
    for r in [0, 2] {
        assert!(
            errors
                .iter()
                .any(|l| l.contains(&format!("the nccl path: rank {r} (host"))),
            "rank {r} said nothing:\n{err}"
        );
    }
}

/// What the host did from each timed point's first collective on, read from the fakes' call log: every
/// unbroken run of collectives, group calls and waits that starts with a collective or a group. Anything
/// else (a copy, an allocation, a context query) ends a run, so a run is the timed calls and exactly what
/// the host called between them.
#[derive(Debug, PartialEq)]
struct Timed {
    collectives: usize,
    waits: usize,
    /// Collectives between each ncclGroupStart and its ncclGroupEnd.
    groups: Vec<usize>,
}

fn timed_runs(log: &Path) -> Vec<Timed> {
    const COLLECTIVES: [&str; 5] = [
        "ncclAllReduce",
        "ncclAllGather",
        "ncclReduceScatter",
        "ncclBroadcast",
        "ncclReduce",
    ];
    const WAITS: [&str; 3] = ["cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize"];
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut runs: Vec<Timed> = Vec::new();
    let mut open: Option<Timed> = None;
    for l in text.lines() {
        let starts = COLLECTIVES.contains(&l) || l == "ncclGroupStart";
        let within = starts || WAITS.contains(&l) || l == "ncclGroupEnd";
        if !within {
            runs.extend(open.take());
            continue;
        }
        let Some(t) = open.as_mut() else {
            if starts {
                open = Some(Timed {
                    collectives: 0,
                    waits: 0,
                    groups: Vec::new(),
                });
                let t = open.as_mut().unwrap();
                if l == "ncclGroupStart" {
                    t.groups.push(0);
                } else {
                    t.collectives += 1;
                }
            }
            continue;
        };
        match l {
            "ncclGroupStart" => t.groups.push(0),
            "ncclGroupEnd" => {}
            w if WAITS.contains(&w) => t.waits += 1,
            _ => {
                t.collectives += 1;
                if let Some(g) = t.groups.last_mut() {
                    *g += 1;
                }
            }
        }
    }
    runs.extend(open);
    runs
}

#[test]
fn nccl_queues_the_timed_calls_and_waits_once_per_point_as_nccl_tests_default_does() {
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // Two sizes, no warm-up or check: each placement's timed calls are the only collectives of the run.
    let base = "run --np 1 --memory cuda --transport nccl --collective all_reduce -b 8 -e 64 -f 8 -w 0 -c 0";
    let run = |flags: &str, name: &str| {
        let log = tmp.path().join(format!("{name}.log"));
        let j = tmp.path().join(format!("{name}.json"));
        let (code, out, err) = collbench(
            dir,
            &[("FAKE_CALL_LOG", log.to_str().unwrap())],
            &format!("{base} {flags}"),
            &j,
        );
        assert_eq!(code, Some(0), "{flags}:\n{out}\n{err}");
        let modes: Vec<String> = json(&j)["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["collbench"]["timing"].as_str().unwrap_or("none").to_string())
            .collect();
        (timed_runs(&log), out, modes)
    };
    // -z 0 (the default): 20 launches back to back, then one wait, at each of 2 sizes x 2 placements.
    let (runs, out, modes) = run("-n 20 -z 0", "queued");
    let queued = |groups: Vec<usize>, collectives| Timed {
        collectives,
        waits: 1,
        groups,
    };
    assert_eq!(runs, (0..4).map(|_| queued(vec![], 20)).collect::<Vec<_>>(), "{out}");
    assert!(
        out.contains("\n# timing: 20 queued launches, one wait (-z 0)\n"),
        "{out}"
    );
    assert_eq!(modes, ["queued", "queued"]);
    // -z 1: a wait after every call.
    let (runs, out, modes) = run("-n 20 -z 1", "per-call");
    let per_call = Timed {
        collectives: 20,
        waits: 20,
        groups: vec![],
    };
    assert_eq!(runs.len(), 4, "{runs:?}");
    assert!(runs.iter().all(|r| *r == per_call), "{runs:?}");
    assert!(
        out.contains("\n# timing: per call, a wait and a barrier after each (-z 1)\n"),
        "{out}"
    );
    assert_eq!(modes, ["per_call", "per_call"]);
    // -m 4: four collectives in each ncclGroupStart/End, five groups, still one wait.
    let (runs, out, _) = run("-n 5 -m 4", "grouped");
    assert_eq!(
        runs,
        (0..4).map(|_| queued(vec![4; 5], 20)).collect::<Vec<_>>(),
        "{out}"
    );
    assert!(out.contains("# timing: 5 queued groups of 4 calls (-m 4"), "{out}");
    // Per-iteration figures need a wait per iteration, and say so.
    let (runs, out, modes) = run("-n 20 -I 1", "per-iter");
    assert!(runs.iter().all(|r| r.waits == 20 && r.collectives == 20), "{runs:?}");
    assert!(
        out.contains("\n# timing: per iteration, a wait after each of 20 (-I 1)\n"),
        "{out}"
    );
    assert_eq!(modes, ["per_iteration", "per_iteration"]);
}

#[test]
fn nccl_tests_table_keeps_its_columns_with_the_timing_line_among_its_comments() {
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let link = tmp.path().join("all_reduce_perf");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_collbench"), &link).unwrap();
    let o = Command::new(&link)
        .args(["-b", "8", "-e", "512", "-f", "4", "-g", "1", "-w", "1", "-n", "20"])
        .current_dir(tmp.path())
        .env("LD_LIBRARY_PATH", dir)
        .env("COLLBENCH_NCCL_LIB", dir.join("libnccl.so.2"))
        .env_remove("COLLBENCH_RANK")
        .env_remove("COLLBENCH_CUDA_DEVICE")
        .output()
        .expect("all_reduce_perf runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    // nccl-tests' own output of the same sizes, from a real H100.
    let real = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("results/gpu/2026-12-06-h100/side-by-side/side-nccltests-all_reduce.txt"),
    )
    .unwrap();
    let header = |s: &str| -> Vec<String> {
        let l: Vec<&str> = s.lines().collect();
        let at = l
            .iter()
            .position(|x| x.contains("out-of-place"))
            .expect("a table header");
        l[at - 1..at + 3].iter().map(|x| x.to_string()).collect()
    };
    assert_eq!(header(&out), header(&real), "{out}");
    let rows = |s: &str| -> Vec<Vec<String>> {
        s.lines()
            .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    };
    let (ours, theirs) = (rows(&out), rows(&real));
    assert_eq!(ours.len(), 4, "{out}");
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        assert_eq!(a[..5], b[..5], "size, count, type, redop and root");
    }
    // The mode, in a comment line before the table that no column parser takes.
    let timing = out.lines().find(|l| l.starts_with("# timing:")).expect("a timing line");
    assert_eq!(timing, "# timing: 20 queued launches, one wait (-z 0)");
    assert!(out.find("# timing:") < out.find("out-of-place"), "{out}");
}

#[test]
fn nccl_alone_names_no_tcp_path_and_its_memory_bound_counts_the_cuda_context() {
    let Some(dir) = fakes() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let j = tmp.path().join("mem.json");
    // A context holding 200 MiB of the host's memory, as a real one holds a few hundred.
    let (code, out, err) = collbench(
        dir,
        &[("FAKE_CUDA_CONTEXT_MIB", "200")],
        "run --np 1 --memory cuda --transport nccl --collective all_reduce -b 8 -e 1K -w 1 -n 2",
        &j,
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(!err.contains("tcp path: interface"), "{err}");
    let m = &json(&j)["collbench"]["summary"]["peak_memory"];
    let runtime = m["runtime_bytes"].as_u64().expect("the context's memory measured");
    assert!(runtime >= 200 << 20, "{m}");
    assert_eq!(
        m["bound_bytes"].as_u64().unwrap(),
        3 * 1024 + (64 << 20) + runtime,
        "{m}"
    );
    assert!(
        m["max_bytes"].as_u64().unwrap() > 200 << 20,
        "the context's memory is in the peak: {m}"
    );
    let line = out.lines().find(|l| l.starts_with("# Peak memory per rank")).unwrap();
    assert!(
        line.contains("MiB CUDA/NCCL at start-up") && line.ends_with(" OK"),
        "{line}"
    );
}
