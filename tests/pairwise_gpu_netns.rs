//! `collbench pairwise --memory cuda` across four network-namespace hosts (`tests/netns/cluster.sh`), one rank
//! per host, each loading the fake CUDA driver and NCCL of tests/gpu/fake/ as its host's: every pair of hosts'
//! GPUs exchanges device buffers over NCCL's point-to-point (the fake carries the bytes between the processes
//! through a folder all hosts see), set up over the TCP control path on eth0. A clean cluster names nothing;
//! a host whose GPU-to-GPU path is slow (FAKE_NCCL_P2P_SLOW in that host's rank only) is named with its GPU's
//! index and bus id, and no other host is. The times are CUDA events on the fake's virtual clock, so nothing
//! here rests on the machine's load. Needs root and g++; where that is not possible they print why and pass,
//! except in CI (`CI=true`), where that is a failure.

#![cfg(feature = "cuda")]

mod common;

use std::path::Path;
use std::time::Duration;

use common::gpu::{check_ranks, fake_nccl, gpu_cluster, logs};
use common::netns::{spawn, wait_all, Cluster};
use serde_json::Value;

const HOSTS: usize = 4;
/// Past this the ranks are killed and the test fails (a hang, not a speed limit: the run takes seconds).
const DEADLINE: Duration = Duration::from_secs(600);
const ROOT_PORT: &str = "29720";

/// What rank 0 reported.
struct Outcome {
    code: Option<i32>,
    out: String,
    json: Value,
}

/// `pairwise --memory cuda` over eth0, one rank per host, each host's fake driver with 8 GPUs at 20 GB/s and
/// host `slow`'s rank with FAKE_NCCL_P2P_SLOW=4. Checks every rank exited with rank 0's verdict.
fn pairwise(c: &Cluster, lib: &Path, dir: &Path, label: &str, slow: Option<usize>) -> Outcome {
    let json = dir.join(format!("{label}.json"));
    let meet = dir.join(format!("{label}-nccl"));
    std::fs::create_dir(&meet).unwrap();
    let args = [
        "pairwise",
        "--memory",
        "cuda",
        "--iface",
        "eth0",
        "--bytes",
        "1M",
        "-J",
        json.to_str().unwrap(),
    ];
    let bin = assert_cmd::cargo::cargo_bin("collbench");
    let master = c.addr(0, "eth0");
    let procs = (0..HOSTS)
        .map(|h| {
            let mut cmd = c.exec_rank(h, &master, ROOT_PORT, &bin, &args);
            cmd.env("LD_LIBRARY_PATH", lib)
                .env("COLLBENCH_NCCL_LIB", fake_nccl(lib))
                .env("FAKE_NCCL_DIR", &meet)
                .env("FAKE_CUDA_COPY_GBPS", "20")
                .env("FAKE_CUDA_DEVICES", "8");
            if slow == Some(h) {
                cmd.env("FAKE_NCCL_P2P_SLOW", "4");
            }
            spawn(cmd, &format!("{label}{h}"), dir)
        })
        .collect();
    let done = wait_all(procs, DEADLINE);
    check_ranks(label, &done);
    let text =
        std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{label}: {}: {e}\n{}", json.display(), logs(&done)));
    Outcome {
        code: done[0].status.code(),
        out: format!("{}\n{}", done[0].stdout, done[0].stderr),
        json: serde_json::from_str(&text).expect("valid JSON"),
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
    gpu_cluster("cbq", tag, HOSTS)
}

/// Whether `text` names host `name` (not a longer name that starts with it, `...-h1` in `...-h10`).
fn names(text: &str, name: &str) -> bool {
    text.match_indices(name)
        .any(|(i, _)| !text[i + name.len()..].starts_with(|ch: char| ch.is_ascii_digit()))
}

#[test]
fn a_clean_cluster_names_nothing_and_a_slow_gpu_path_is_named_by_host_gpu_and_bus_id() {
    let Some((_one, c, lib, dir)) = setup("p2p") else {
        return;
    };
    let o = pairwise(&c, &lib, dir.path(), "clean", None);
    assert_eq!(o.code, Some(0), "{}", o.out);
    assert_eq!(o.json["path"], "nccl", "{}", o.out);
    assert_eq!(o.json["unit"], "hosts", "{}", o.out);
    assert_eq!(o.json["links"].as_array().map(Vec::len), Some(HOSTS * (HOSTS - 1) / 2));
    assert_eq!(o.json["findings"].as_array().map(Vec::len), Some(0), "{}", o.out);
    for (h, p) in o.json["hosts"].as_array().unwrap().iter().enumerate() {
        assert_eq!(p["host"].as_str(), Some(c.host(h).as_str()), "{p:#}");
        assert_eq!(
            (p["gpu"]["index"].as_u64(), p["gpu"]["bus_id"].as_str()),
            (Some(0), Some("0000:10:00.0")),
            "{p:#}"
        );
    }

    let slow = 2;
    let o = pairwise(&c, &lib, dir.path(), "slow", Some(slow));
    assert_eq!(o.code, Some(1), "{}", o.out);
    let host = c.host(slow);
    let findings = o.json["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{}", o.out);
    let f = &findings[0];
    assert_eq!(
        (f["kind"].as_str(), f["host"].as_str(), f["metric"].as_str()),
        (Some("slow_host"), Some(host.as_str()), Some("bandwidth")),
        "{f:#}"
    );
    // The text names that host's GPU by index and bus id, with the cause; no other host is named in a finding.
    let flat = o.out.split_whitespace().collect::<Vec<_>>().join(" ");
    let gpu = format!("SLOW HOST {host}: bandwidth");
    assert!(flat.contains(&gpu), "{}", o.out);
    assert!(flat.contains(&format!("{host} GPU 0 [0000:10:00.0]")), "{}", o.out);
    assert!(flat.contains("NCCL point-to-point is slow"), "{}", o.out);
    let finding_lines: String = o
        .out
        .lines()
        .skip_while(|l| !l.starts_with("# Findings"))
        .collect::<Vec<_>>()
        .join("\n");
    for other in (0..HOSTS).filter(|&h| h != slow) {
        assert!(!names(&finding_lines, &c.host(other)), "{}\n{}", c.host(other), o.out);
    }
}
