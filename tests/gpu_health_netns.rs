//! Preflight's GPU checks across four network-namespace hosts (`tests/netns/cluster.sh`), one rank per host,
//! each rank loading the fake NVML and CUDA driver of tests/gpu/fake/ as a host's driver, with 8 GPUs a host.
//! A clean fake cluster passes with no GPU finding; a fault placed on one host only, through that rank's own
//! `FAKE_*` variables (3 uncorrectable ECC errors, a PCIe link at gen4 x8, a power brake, copies at half speed,
//! 7 of 8 GPUs), fails by name: that host, that GPU's index and bus id, and the cause, and no other host or
//! GPU is named. The copies run on the fake's virtual clock, so the bandwidths are exact whatever the load;
//! nothing here rests on time. The network's own checks run too but are not judged here: on a loaded machine
//! one may rightly name a host whose rank waited for a CPU, and the network's tests judge those. These need root and g++; where that is not possible they print why and pass,
//! except in CI (`CI=true`), where that is a failure.

#![cfg(feature = "cuda")]

mod common;

use std::path::Path;
use std::time::Duration;

use common::gpu::{assert_every_gpu_check_passes, check_ranks, fake_nccl, gpu_checks, gpu_cluster, logs};
use common::netns::{spawn, wait_all, Cluster};
use serde_json::Value;

const HOSTS: usize = 4;
const GPUS: usize = 8;
/// Past this the ranks are killed and the test fails (a hang, not a speed limit: the run takes seconds).
const DEADLINE: Duration = Duration::from_secs(600);
const ROOT_PORT: &str = "29700";

/// What rank 0 reported.
struct Outcome {
    code: Option<i32>,
    out: String,
    json: Value,
    junit: String,
}

/// A short preflight over eth0 with `--gpus-per-node 8`, one rank per host, every rank's fake driver showing 8
/// GPUs at 50 GB/s each way, and host `fault.0`'s rank with the variables `fault.1` besides. Checks every rank
/// exited with rank 0's verdict.
fn preflight(c: &Cluster, lib: &Path, dir: &Path, label: &str, fault: Option<(usize, &[(&str, &str)])>) -> Outcome {
    let json = dir.join(format!("{label}.json"));
    let junit = dir.join(format!("{label}.xml"));
    let gpus = GPUS.to_string();
    let args = [
        "preflight",
        "--transport",
        "tcp@eth0",
        "--gpus-per-node",
        &gpus,
        "--repeat",
        "1",
        "--bandwidth-bytes",
        "1M",
        "--no-pairwise",
        "--no-progress",
        "-J",
        json.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ];
    let bin = assert_cmd::cargo::cargo_bin("collbench");
    let master = c.addr(0, "eth0");
    let procs = (0..HOSTS)
        .map(|h| {
            let mut cmd = c.exec_rank(h, &master, ROOT_PORT, &bin, &args);
            cmd.env("LD_LIBRARY_PATH", lib)
                .env("COLLBENCH_NCCL_LIB", fake_nccl(lib))
                .env("FAKE_CUDA_COPY_GBPS", "50")
                .env("FAKE_CUDA_DEVICES", &gpus);
            if let Some((host, env)) = fault.filter(|f| f.0 == h) {
                assert_eq!(host, h);
                for (k, v) in env {
                    cmd.env(k, v);
                }
            }
            spawn(cmd, &format!("{label}{h}"), dir)
        })
        .collect();
    let done = wait_all(procs, DEADLINE);
    check_ranks(label, &done);
    let read = |p: &Path| {
        std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{label}: {}: {e}\n{}", p.display(), logs(&done)))
    };
    let json: Value = serde_json::from_str(&read(&json)).expect("valid JSON");
    Outcome {
        code: done[0].status.code(),
        out: format!("{}\n{}", done[0].stdout, done[0].stderr),
        json,
        junit: read(&junit),
    }
}

/// The cluster, the fakes and a folder for the outputs; `None` (after saying why) where they cannot be had.
fn setup(
    tag: &str,
) -> Option<(
    std::sync::MutexGuard<'static, ()>,
    Cluster,
    std::path::PathBuf,
    tempfile::TempDir,
)> {
    gpu_cluster("cbg", tag, HOSTS)
}

#[test]
fn a_clean_fake_cluster_passes_with_no_gpu_finding() {
    let Some((_one, c, lib, dir)) = setup("clean") else {
        return;
    };
    let o = preflight(&c, &lib, dir.path(), "clean", None);
    assert_every_gpu_check_passes(&o.json, &o.out);
    let checks = gpu_checks(&o.json);
    let count = checks[0]["measured"].as_str().unwrap();
    assert_eq!(count, format!("{GPUS} GPU(s) on each of {HOSTS} host(s)"));
    assert_eq!(
        checks[7]["measured"],
        format!("{} GPU(s): 100.0 to 100.0 GB/s", GPUS * HOSTS)
    );
    // The verdict is the GPU checks' where the network's pass; a network check may fail on a loaded machine
    // (a host whose rank waited for a CPU is named, rightly), which is the network's tests' business, not this.
    let network_failed = o.json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["path"] != "gpu" && c["verdict"] == "fail");
    if !network_failed {
        assert_eq!(o.code, Some(0), "{}", o.out);
    }
    assert!(!o.out.contains("GPU checks not run"), "{}", o.out);
}

/// One fault: the variables set on one host, and the failed checks it must give, each as (check, what its
/// measurement says, what its detail must say of the cause).
struct Fault {
    label: &'static str,
    host: usize,
    env: &'static [(&'static str, &'static str)],
    want: &'static [(&'static str, &'static str, &'static str)],
}

#[test]
fn each_fault_on_one_host_is_named_with_that_host_gpu_and_cause() {
    let Some((_one, c, lib, dir)) = setup("fault") else {
        return;
    };
    let faults = [
        Fault {
            label: "ecc",
            host: 2,
            env: &[("FAKE_NVML_ECC", "1:3")],
            want: &[(
                "gpu ECC: {gpu}",
                "3 volatile, 3 aggregate uncorrectable ECC errors",
                "uncorrectable",
            )],
        },
        Fault {
            label: "pcie",
            host: 1,
            env: &[("FAKE_NVML_PCIE", "1:4x8")],
            want: &[
                ("gpu PCIe link: {gpu}", "gen4 x8 of gen5 x16", "trained to fewer lanes"),
                (
                    "gpu host-to-device: {gpu}",
                    "13.4 GB/s, ",
                    "cause: its PCIe link trained to x8 of x16",
                ),
                (
                    "gpu device-to-host: {gpu}",
                    "13.4 GB/s, ",
                    "cause: its PCIe link trained to x8 of x16",
                ),
            ],
        },
        Fault {
            label: "brake",
            host: 3,
            env: &[("FAKE_NVML_CLOCK_EVENTS", "1:0x80")],
            want: &[("gpu clocks: {gpu}", "slowed now: power brake", "runs below its clocks")],
        },
        Fault {
            label: "half",
            host: 0,
            env: &[("FAKE_CUDA_HALF_SPEED", "1")],
            want: &[
                (
                    "gpu copy bandwidth: {gpu}",
                    "50.0 GB/s, 50% of its peers' median 100.0 GB/s",
                    "cause: NVML shows no cause",
                ),
                (
                    "gpu host-to-device: {gpu}",
                    "25.0 GB/s, 50% of its peers' median 50.0 GB/s",
                    "cause: NVML shows no cause",
                ),
                (
                    "gpu device-to-host: {gpu}",
                    "25.0 GB/s, 50% of its peers' median 50.0 GB/s",
                    "cause: NVML shows no cause",
                ),
            ],
        },
        Fault {
            label: "count",
            host: 3,
            env: &[("FAKE_CUDA_DEVICES", "7")],
            want: &[("gpu count: {host}", "7 of 8 GPUs", "")],
        },
    ];
    for f in &faults {
        let o = preflight(&c, &lib, dir.path(), f.label, Some((f.host, f.env)));
        let (label, host) = (f.label, c.host(f.host));
        assert_eq!(o.code, Some(1), "{label}: {}", o.out);
        let gpu = format!("{host} GPU 1 [0000:11:00.0]");
        // The GPU checks that failed (a network check may fail too on a loaded machine: not this test's business).
        let failed: Vec<&Value> = gpu_checks(&o.json)
            .into_iter()
            .filter(|c| c["verdict"] == "fail")
            .collect();
        let got: Vec<&str> = failed.iter().map(|c| c["name"].as_str().unwrap()).collect();
        let want: Vec<String> = f
            .want
            .iter()
            .map(|w| w.0.replace("{gpu}", &gpu).replace("{host}", &host))
            .collect();
        // Exactly these fail, and every GPU check that does not pass names the faulty host only.
        assert_eq!(got, want, "{label}: {}", o.out);
        for x in gpu_checks(&o.json).into_iter().filter(|c| c["verdict"] != "pass") {
            let text = x.to_string();
            for other in (0..HOSTS).filter(|&h| h != f.host) {
                let name = c.host(other);
                let named = text
                    .match_indices(&name)
                    .any(|(i, _)| !text[i + name.len()..].starts_with(|ch: char| ch.is_ascii_digit()));
                assert!(!named, "{label}: {name} named:\n{x:#}");
            }
        }
        for (x, (name, w)) in failed.iter().zip(want.iter().zip(f.want)) {
            let (measured, cause) = (w.1, w.2);
            assert!(x["measured"].as_str().unwrap().starts_with(measured), "{label}: {x:#}");
            let detail = x["detail"].as_str().unwrap();
            assert!(detail.starts_with(&host), "{label}: {detail}");
            assert!(detail.contains(cause), "{label}: {detail}");
            let ev = &x["evidence"][0];
            assert_eq!(ev["host"].as_str(), Some(host.as_str()), "{label}: {x:#}");
            if name.contains(" GPU ") {
                assert!(detail.contains(&gpu[host.len() + 1..]), "{label}: {detail}");
                let read = &ev["gpu"]["gpus"];
                assert_eq!(read.as_array().map(Vec::len), Some(1), "{label}: {x:#}");
                assert_eq!(
                    (read[0]["index"].as_u64(), read[0]["bus_id"].as_str()),
                    (Some(1), Some("0000:11:00.0")),
                    "{label}: {x:#}"
                );
            }
            // Printed, and a JUnit test case.
            assert!(o.out.contains(&format!("FAIL: {name}: ")), "{label}: {name}\n{}", o.out);
            assert!(
                o.junit.contains(&format!("name=\"{name}\"")),
                "{label}: {name}\n{}",
                o.junit
            );
        }
    }
}
