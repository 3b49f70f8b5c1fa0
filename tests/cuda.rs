//! The GPU path from the outside on a machine without a GPU: `run --memory cuda` and `selftest --gpu`
//! must stop before anything starts with a usage error (exit 2) that says what is missing, never a panic.
//! On a machine with an NVIDIA driver these checks print why they did not run; the device checks are
//! tests/gpu/device-check.sh.

use assert_cmd::Command;

fn collbench(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("collbench")
        .expect("binary built")
        .env_remove("COLLBENCH_RANK")
        .timeout(std::time::Duration::from_secs(120))
        .args(args)
        .output()
        .expect("collbench runs")
}

/// True when this machine has an NVIDIA driver (then the no-driver messages cannot be checked here).
fn has_driver() -> bool {
    ["/dev/nvidiactl", "/proc/driver/nvidia/version"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
}

/// Whether the no-driver half of a test can run here; where it cannot, says so (the test then returns).
fn no_driver_here(what: &str) -> bool {
    let driver = cfg!(feature = "cuda") && has_driver();
    if driver {
        eprintln!("skipped{what}: this machine has an NVIDIA driver");
    }
    !driver
}

/// Runs collbench with `args`, which must be refused before anything starts: exit 2, no panic, no table.
/// Returns stderr.
fn refused(args: &[&str]) -> String {
    let out = collbench(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("all_reduce"),
        "ranks started: {args:?}"
    );
    err
}

/// The message for the build: the feature is missing, or (feature `cuda`) the driver library is.
fn assert_missing_cuda(err: &str, flag: &str) {
    assert!(err.contains(&format!("{flag}:")), "{err}");
    if cfg!(feature = "cuda") {
        assert!(err.contains("libcuda.so") && err.contains("nvidia-smi"), "{err}");
    } else {
        assert!(err.contains("--features cuda"), "{err}");
    }
}

#[test]
fn memory_cuda_without_a_driver_is_a_clear_usage_error_before_any_rank_starts() {
    if !no_driver_here("") {
        return;
    }
    let err = refused(&["run", "--np", "2", "-b", "8", "-e", "8", "--memory", "cuda"]);
    assert_missing_cuda(&err, "--memory");
}

#[test]
fn memory_host_is_the_default_and_unknown_kinds_are_refused() {
    let out = collbench(&["run", "--memory", "gpu"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected host or cuda"));
    let out = collbench(&["run", "--np", "2", "-b", "8", "-e", "8", "--memory", "host", "-c", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn selftest_gpu_without_a_gpu_says_what_is_missing() {
    if !no_driver_here("") {
        return;
    }
    // A writable -J path: the refusal must come from the missing GPU, not from the path, and write nothing.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("never-written.json");
    let err = refused(&["selftest", "--gpu", "-J", json.to_str().unwrap()]);
    assert_missing_cuda(&err, "--gpu");
    assert!(!json.exists(), "a refused selftest wrote {}", json.display());
}

#[test]
fn nccl_needs_the_feature_and_device_memory_and_says_so_before_any_rank_starts() {
    let err = refused(&["run", "--np", "1", "-b", "8", "-e", "8", "--transport", "nccl"]);
    assert!(err.contains("--transport"), "{err}");
    if cfg!(feature = "cuda") {
        assert!(err.contains("--memory cuda"), "{err}");
    } else {
        assert!(err.contains("--features cuda"), "{err}");
    }
}

#[test]
fn nccl_on_device_memory_without_a_driver_stops_with_what_is_missing() {
    if !no_driver_here("") {
        return;
    }
    let err = refused(&[
        "run",
        "--np",
        "1",
        "-b",
        "8",
        "-e",
        "8",
        "--transport",
        "nccl",
        "--memory",
        "cuda",
    ]);
    if cfg!(feature = "cuda") {
        // The driver is checked first; where it is present, libnccl is (message tested in the unit tests).
        assert!(err.contains("libcuda.so") || err.contains("libnccl.so.2"), "{err}");
    } else {
        assert!(err.contains("--features cuda"), "{err}");
    }
}

#[test]
fn gpu_matrix_checks_its_flags_and_says_what_is_missing_without_a_gpu() {
    let out = collbench(&["gpu-matrix", "--threshold", "1.5"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--threshold") && err.contains("fraction"), "{err}");
    if !no_driver_here(" the no-GPU half") {
        return;
    }
    let err = refused(&["gpu-matrix", "--bytes", "1M", "-n", "1"]);
    assert_missing_cuda(&err, "gpu-matrix");
}

#[test]
fn memory_cuda_with_an_rdma_path_is_no_longer_refused_for_the_pairing() {
    if !no_driver_here("") {
        return;
    }
    let err = refused(&[
        "run",
        "--np",
        "2",
        "-b",
        "8",
        "-e",
        "8",
        "--memory",
        "cuda",
        "--transport",
        "rdma@mlx5_0:1",
    ]);
    assert!(!err.contains("tcp paths only"), "{err}");
    // What stops it here is what this machine lacks (the rdma feature or device, the cuda feature or driver),
    // each named with its flag; never the pairing of the two.
    if !cfg!(feature = "rdma") {
        assert!(err.contains("--transport:") && err.contains("--features rdma"), "{err}");
    } else if !cfg!(feature = "cuda") {
        assert!(err.contains("--memory:") && err.contains("--features cuda"), "{err}");
    } else {
        assert!(err.contains("--memory:") || err.contains("mlx5_0"), "{err}");
    }
}

#[test]
fn the_staged_path_runs_end_to_end_on_an_emulated_device() {
    // `--emulate-device` puts host memory behind the Device trait, so `run --memory cuda` goes through the
    // launcher, consensus, the staged engine split into pieces, the check and the reporters without a GPU;
    // with reductions by the host algorithm and by the device.
    for reduce_on in ["host", "device"] {
        emulated_run(reduce_on);
    }
}

fn emulated_run(reduce_on: &str) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let mut args: Vec<&str> = "run --np 3 --memory cuda --emulate-device --staging-pieces 3 \
        --collective all_reduce,all_gather,reduce_scatter,alltoall -d float -b 1K -e 6M -f 8 -n 2 -w 1 -J"
        .split_whitespace()
        .collect();
    args.push(json.to_str().unwrap());
    args.extend(["--reduce-on", reduce_on]);
    let out = collbench(&args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("# Memory: cuda") && stdout.contains("in up to 3 pieces") && stdout.contains("EMULATED device"),
        "{stdout}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let m = &v["collbench"]["memory"];
    assert_eq!(
        (m["kind"].as_str(), m["emulated"].as_bool()),
        (Some("cuda"), Some(true))
    );
    let rows = v["results"].as_array().unwrap();
    // 4 collectives x sizes 1K, 8K, 64K, 512K, 4M.
    assert_eq!(rows.len(), 4 * 5, "{stdout}");
    for r in rows {
        for p in ["out_of_place", "in_place"] {
            let t = &r[p];
            assert_eq!(t["nwrong"], 0.0, "{} {} B {p}", r["collective"], r["size"]);
            // collbench's statistics are in the entry's collbench object (-J version 3).
            let t = &r["collbench"][p];
            assert!(t["staging_us"].is_number() && t["staging_wait_us"].is_number(), "{t}");
        }
        let reducing = ["all_reduce", "reduce_scatter"].contains(&r["collective"].as_str().unwrap());
        let on_device = reduce_on == "device" && reducing;
        assert_eq!(r["algo"] == "device_reduce", on_device, "{reduce_on}: {r}");
    }
    assert_eq!(
        m["reductions"].as_str().unwrap().starts_with("device"),
        reduce_on == "device"
    );
}

#[test]
fn the_emulated_device_is_refused_where_it_would_mean_nothing() {
    let err = refused(&["run", "--np", "2", "-e", "8", "--emulate-device"]);
    assert!(
        err.contains("--emulate-device:") && err.contains("--memory cuda"),
        "{err}"
    );
    let err = refused(&["run", "--np", "2", "--memory", "cuda", "--staging-pieces", "0"]);
    assert!(err.contains("--staging-pieces:"), "{err}");
    let err = refused(&["run", "--np", "2", "-e", "8", "--reduce-on", "device"]);
    assert!(err.contains("--reduce-on:") && err.contains("--memory cuda"), "{err}");
    let err = refused(&["run", "--np", "2", "-e", "8", "--reduce-on", "gpu"]);
    assert!(err.contains("--reduce-on:") && err.contains("host or device"), "{err}");
}

#[test]
fn the_device_check_script_rehearses_its_steps_on_an_emulated_device() {
    // tests/gpu/device-check.sh is what a GPU machine runs, once and briefly: its run steps, their JSON
    // checks and summaries and the packed archive must work before it gets there. DEVICE_CHECK_EMULATE=1
    // runs those steps on the emulated device; the steps that need a real GPU fail with their message.
    if !no_driver_here(" (device-check rehearsal)") {
        return;
    }
    if !python_here(" (device-check rehearsal)") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (out, pack) = (dir.path().join("dc"), dir.path().join("dc.tar.gz"));
    // nccl-tests' programs stand-ins: collbench under their names, so the side-by-side step's plumbing runs.
    let aliases = dir.path().join("aliases");
    let made = collbench(&["install-aliases", "--mkdir", aliases.to_str().unwrap()]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/gpu/device-check.sh");
    let run = Command::new("bash")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_collbench"))
        .arg(&out)
        .env("DEVICE_CHECK_EMULATE", "1")
        .env("DEVICE_CHECK_PACK", &pack)
        .env("DEVICE_CHECK_NCCL_TESTS", &aliases)
        .env_remove("COLLBENCH_RANK")
        .env_remove("OUT")
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .expect("bash runs");
    let log = format!(
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    // 2: the first failing step is selftest --gpu, which has no GPU here.
    assert_eq!(run.status.code(), Some(2), "{log}");
    let summary = std::fs::read_to_string(out.join("summary.txt")).expect("summary.txt written");
    for step in [
        "info exited 0",
        "selftest exited 2",
        "run --transport nccl exited 2",
        "gpu-matrix exited 2",
        "preflight --memory cuda exited 2",
        "run --np 2 --memory cuda exited 0",
        "run --np 4 --memory cuda exited 0",
        "run --reduce-on device --np 2 exited 0",
        "run --reduce-on device --np 4 exited 0",
        "run --staging-pieces 1 exited 0",
        "run --staging-pieces 4 exited 0",
    ] {
        assert!(summary.contains(&format!("device-check: {step}")), "{step}:\n{summary}");
    }
    // Each run step's own check ran and found every collective and no wrong point.
    for json in ["run-np2", "run-np4"] {
        let line = summary
            .lines()
            .find(|l| l.contains(&format!("{json}.json:")))
            .unwrap_or_default();
        assert!(
            line.contains("memory cuda")
                && line.contains("all_gather,all_reduce,alltoall,broadcast,reduce,reduce_scatter,sendrecv")
                && line.ends_with("wrong points 0"),
            "{json}: {line}\n{summary}"
        );
    }
    for np in [2, 4] {
        let line = summary
            .lines()
            .find(|l| l.contains(&format!("reduce-on-device-np{np}.json:")))
            .unwrap_or_default();
        assert!(
            line.contains("algos device_reduce") && line.ends_with("wrong points 0"),
            "{line}\n{summary}"
        );
    }
    let staged: Vec<&str> = summary.lines().filter(|l| l.starts_with("summary: pieces ")).collect();
    assert_eq!(
        staged.len(),
        2 * 2 * 2,
        "2 piece counts x 2 collectives x 2 sizes:\n{summary}"
    );
    assert!(staged.iter().all(|l| l.ends_with("#wrong 0")), "{summary}");
    // Both programs ran 3 times per collective and their tables were compared size by size (8 B to 1 MiB
    // by 2: 18 rows); the verdict depends on timings, the comparison having run does not.
    for coll in ["all_reduce", "all_gather"] {
        assert!(
            summary.contains(&format!("device-check: side by side {coll} exited 0"))
                || summary.contains(&format!("device-check: side by side {coll} exited 3")),
            "{coll}:\n{summary}"
        );
        let head = format!("side-by-side: {coll}: time (us) of nccl-tests (3 run(s), median) and of collbench (3)");
        let rows = summary.split(&head).nth(1).unwrap_or_default().lines().skip(2).take(18);
        let sizes: Vec<&str> = rows.filter_map(|l| l.split_whitespace().next()).collect();
        let first = if coll == "all_gather" { "0" } else { "8" }; // all_gather's 8 B is 0 B on one rank
        assert_eq!(sizes.first(), Some(&first), "{coll}:\n{summary}");
        assert_eq!(sizes.last(), Some(&"1048576"), "{coll}:\n{summary}");
    }
    for (file, says) in [
        ("selftest.txt", "libcuda.so"),
        ("run-nccl.txt", "libcuda.so"),
        ("machine.txt", "DEVICE_CHECK_EMULATE=1"),
    ] {
        let text = std::fs::read_to_string(out.join(file)).unwrap_or_default();
        let ok = if cfg!(feature = "cuda") || file == "machine.txt" {
            text.contains(says)
        } else {
            text.contains("--features cuda")
        };
        assert!(ok && !text.contains("panicked"), "{file}:\n{text}");
    }
    // The archive holds the whole folder, the JSON of every step included.
    let listing = Command::new("tar").arg("-tzf").arg(&pack).output().expect("tar runs");
    let listing = String::from_utf8_lossy(&listing.stdout);
    for f in [
        "dc/summary.txt",
        "dc/machine.txt",
        "dc/run-np4.json",
        "dc/staging-pieces4.json",
    ] {
        assert!(listing.lines().any(|l| l == f), "{f} not in the archive:\n{listing}");
    }
}

/// Whether python3 runs here (the device check's summaries are Python); where not, says so (the test then
/// returns). CI must have it.
fn python_here(what: &str) -> bool {
    let python = std::process::Command::new("python3").arg("--version").output();
    let here = python.is_ok_and(|o| o.status.success());
    if !here {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI must install python3");
        eprintln!("skipped{what}: no python3 here");
    }
    here
}

/// One of tests/gpu/'s Python scripts on `args`: exit status, stdout, stderr.
fn gpu_script(script: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = std::process::Command::new("python3")
        .arg(format!("{}/tests/gpu/{script}", env!("CARGO_MANIFEST_DIR")))
        .args(args)
        .output()
        .expect("python3 runs");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// The first run on a GPU (an H100), as the device check and the side-by-side runs wrote it.
const H100: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/results/gpu/2026-12-06-h100");

#[test]
fn the_staging_summaries_print_the_copies_and_waits_the_results_file_holds() {
    // The device check's staging lines once read the figures where results version 2 kept them and printed
    // 0 us for copies of 707-4754 us. They must print what version 3 holds, and stop on a file without them.
    if !python_here(" (staging summaries)") {
        return;
    }
    for pieces in ["1", "4"] {
        let file = format!("{H100}/device-check/staging-pieces{pieces}.json");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let (code, out, err) = gpu_script("summarize-staged.py", &["pieces", &file, pieces]);
        assert_eq!(code, Some(0), "{out}{err}");
        let rows = v["results"].as_array().unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), rows.len(), "{out}");
        for (row, line) in rows.iter().zip(&lines) {
            let stats = &row["collbench"]["out_of_place"];
            let (copies, waited) = (
                stats["staging_us"].as_f64().unwrap(),
                stats["staging_wait_us"].as_f64().unwrap(),
            );
            assert!(copies > 100.0 && waited > 100.0, "{row}");
            let want = format!(
                "summary: pieces {pieces}: {} {} B: time {:.0} us, copies {copies:.0} us, waited for copies {waited:.0} us, #wrong 0",
                row["collective"].as_str().unwrap(),
                row["size"],
                row["out_of_place"]["time"].as_f64().unwrap()
            );
            assert_eq!(*line, want);
        }
    }
    // The largest share of a call spent copying, over every row and placement of a 2-rank run.
    let file = format!("{H100}/device-check/run-np2.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let share = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            ["out_of_place", "in_place"]
                .map(|p| r["collbench"][p]["staging_us"].as_f64().unwrap() / r[p]["time"].as_f64().unwrap())
        })
        .fold(0.0, f64::max);
    assert!(share > 0.1, "{share}");
    let (code, out, err) = gpu_script("summarize-staged.py", &["run", &file]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(&format!(
            "largest staging share of a call {:.0}%, wrong points 0",
            100.0 * share
        )),
        "{share}: {out}"
    );
    // Without the figures (a layout the script does not know) it says which row lacks which, exit 2.
    let mut v = v;
    for r in v["results"].as_array_mut().unwrap() {
        r["collbench"]["in_place"].as_object_mut().unwrap().remove("staging_us");
    }
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("bare.json");
    std::fs::write(&bare, v.to_string()).unwrap();
    let (code, out, err) = gpu_script("summarize-staged.py", &["run", bare.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("in_place has no staging_us"), "{err}");
}

#[test]
fn the_side_by_side_names_every_size_where_collbench_reads_slower_than_nccl_tests() {
    // The first H100 run: NCCL through collbench took 1.4-1.9x nccl-tests' time at 8 B-8 MiB (collbench
    // waits after every call, nccl-tests once after -n calls). The comparison must show it and fail.
    if !python_here(" (side by side)") {
        return;
    }
    let file = |prog: &str, coll: &str| format!("{H100}/side-by-side/side-{prog}-{coll}.txt");
    let compare = |coll: &str, ours: &str| {
        gpu_script(
            "side-by-side.py",
            &[
                "--name",
                coll,
                "--nccl-tests",
                &file("nccltests", coll),
                "--collbench",
                ours,
            ],
        )
    };
    let (code, out, err) = compare("all_reduce", &file("collbench", "all_reduce"));
    assert_eq!(code, Some(1), "{out}{err}");
    // size, nccl-tests' and collbench's out-of-place times and their ratio, then the same in place.
    for row in [
        "8 6.62 12.31 1.86! 0.32 3.13 9.78!",
        "2048 6.94 11.61 1.67! 0.48 2.24 4.67!",
        "8388608 9.21 14.41 1.56! 0.37 2.38 6.43!",
        "134217728 92.23 101.37 1.10! 1.22 2.48 2.03!",
    ] {
        assert!(
            out.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>().join(" ") == row),
            "{row}:\n{out}"
        );
    }
    assert!(
        out.contains(
            "all_reduce: FAIL: out-of-place outside 0.95-1.05 at 13 size(s) (ratios 1.10-1.86): 8 B, 32 B, \
             128 B, 512 B, 2 KiB, 8 KiB, 32 KiB, 128 KiB, 512 KiB, 2 MiB, 8 MiB, 32 MiB, 128 MiB"
        ),
        "{out}"
    );
    let (code, out, err) = compare("all_gather", &file("collbench", "all_gather"));
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.contains("all_gather: FAIL: out-of-place outside 0.95-1.05 at 13 size(s) (ratios 1.12-7.92)"),
        "{out}"
    );
    // The same table on both sides is within the bounds: it is the ratios that fail the run above.
    let (code, out, err) = compare("all_reduce", &file("nccltests", "all_reduce"));
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("all_reduce: PASS: every ratio within 0.95-1.05"), "{out}");
    // Tables of different sizes cannot be compared: exit 2, the sizes named.
    let (code, out, err) = compare("all_reduce", &file("collbench", "all_gather"));
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("sizes only in nccl-tests' table: 8 B"), "{err}");
}
