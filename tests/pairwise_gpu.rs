//! `collbench pairwise --memory cuda` on local ranks, one per GPU of the fake CUDA driver and NCCL of
//! tests/gpu/fake/: every pair of GPUs exchanges device buffers over NCCL's point-to-point (the fake carries
//! the bytes between the rank processes through FAKE_NCCL_DIR), the received bytes are checked, and the times
//! are CUDA events on the fake's virtual clock, so every bandwidth is exact whatever the machine's load. A
//! clean node passes with the path named nccl; a GPU whose point-to-point is slow (FAKE_NCCL_P2P_SLOW) fails,
//! named by host, GPU index and bus id; bytes changed on the way are an error naming the pair. Needs g++ for
//! the fakes (failed, not skipped, without it when CI=true).

#![cfg(feature = "cuda")]

mod common;

use std::path::Path;
use std::process::Command;

use common::gpu::{fake_nccl, fake_nvml};
use serde_json::Value;

/// GPUs of the fake driver, and ranks.
const GPUS: usize = 4;
/// Bytes each way per exchange.
const BYTES: f64 = 1048576.0;
/// The fake's copy rate (FAKE_CUDA_COPY_GBPS) and a transfer's fixed time (FAKE_NCCL_P2P_LATENCY_NS).
const GBPS: f64 = 20.0;
const LATENCY_NS: f64 = 2000.0;

/// What a pairwise run printed and wrote.
struct Outcome {
    code: Option<i32>,
    out: String,
    json: Option<Value>,
    /// What was left in FAKE_NCCL_DIR.
    left: Vec<String>,
}

/// `pairwise --memory cuda --np 4 --bytes 1M` with the fakes first on the loader's path and `env` set.
fn pairwise(lib: &Path, env: &[(&str, &str)]) -> Outcome {
    let tmp = tempfile::tempdir().unwrap();
    let (json, meet) = (tmp.path().join("pw.json"), tmp.path().join("nccl"));
    std::fs::create_dir(&meet).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_collbench"));
    c.args([
        "pairwise",
        "--memory",
        "cuda",
        "--np",
        &GPUS.to_string(),
        "--bytes",
        "1M",
        "-J",
    ])
    .arg(&json)
    .env_remove("COLLBENCH_RANK")
    .env("LD_LIBRARY_PATH", lib)
    .env("COLLBENCH_NCCL_LIB", fake_nccl(lib))
    .env("FAKE_NCCL_DIR", &meet)
    .env("FAKE_CUDA_DEVICES", GPUS.to_string())
    .env("FAKE_CUDA_COPY_GBPS", GBPS.to_string())
    .env("FAKE_NCCL_P2P_LATENCY_NS", LATENCY_NS.to_string());
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("collbench runs");
    let out = format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!out.contains("panicked"), "{out}");
    let json = std::fs::read_to_string(&json)
        .ok()
        .map(|t| serde_json::from_str(&t).expect("valid JSON"));
    let mut left: Vec<String> = std::fs::read_dir(&meet)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    Outcome {
        code: o.status.code(),
        out,
        json,
        left,
    }
}

/// GB/s of one bidirectional exchange on the fake's clock, the slower end's factor `slow`.
fn exact_gbs(slow: f64) -> f64 {
    BYTES / (LATENCY_NS + BYTES / (GBPS / slow))
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-4 * want
}

/// Fails unless `v` matches the pairwise JSON's schema (the GPUs included).
fn validate(v: &Value) {
    let schema: Value = serde_json::from_str(include_str!("../schema/collbench-pairwise.schema.json")).unwrap();
    let mut compiler = boon::Compiler::new();
    let mut schemas = boon::Schemas::new();
    compiler.add_resource("urn:pairwise", schema).unwrap();
    let idx = compiler.compile("urn:pairwise", &mut schemas).unwrap();
    if let Err(e) = schemas.validate(v, idx) {
        panic!("pairwise JSON does not match its schema: {e:#}");
    }
}

#[test]
fn every_pair_of_gpus_is_measured_over_nccl_and_a_clean_node_passes() {
    let Some(lib) = fake_nvml(false) else { return };
    let o = pairwise(&lib, &[]);
    assert!(
        !o.out.contains("fake-cuda:") && !o.out.contains("fake-nccl:"),
        "{}",
        o.out
    );
    assert_eq!(o.code, Some(0), "{}", o.out);
    let v = o.json.expect("the JSON is written");
    validate(&v);
    assert_eq!(v["path"], "nccl", "{v:#}");
    // Each rank measured with its own GPU, named by index and bus id.
    let hosts = v["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), GPUS);
    for (r, h) in hosts.iter().enumerate() {
        assert_eq!(h["gpu"]["index"].as_u64(), Some(r as u64), "{h:#}");
        assert_eq!(h["gpu"]["bus_id"], format!("0000:{:02x}:00.0", 0x10 + r), "{h:#}");
    }
    // Every pair, at the fake's exact rate both ways, and the 8-byte round trips two transfers long.
    let links = v["links"].as_array().unwrap();
    assert_eq!(links.len(), GPUS * (GPUS - 1) / 2, "{v:#}");
    for l in links {
        for way in ["bw_ab_gbs", "bw_ba_gbs"] {
            assert!(close(l[way].as_f64().unwrap(), exact_gbs(1.0)), "{l:#}");
        }
        let half_rtt_us = (LATENCY_NS + 8.0 / GBPS) / 1e3;
        assert!(close(l["latency_us"].as_f64().unwrap(), half_rtt_us), "{l:#}");
    }
    assert_eq!(v["findings"].as_array().map(Vec::len), Some(0), "{}", o.out);
    assert!(o.out.contains("pairs are its GPUs"), "{}", o.out);
    assert!(o.out.contains("No finding"), "{}", o.out);
    // Every transfer's file was read and removed: only each rank's factor is left.
    let want: Vec<String> = (0..GPUS).map(|r| format!("p2p-slow-{r}")).collect();
    assert_eq!(o.left, want);
}

#[test]
fn a_gpu_whose_point_to_point_is_slow_is_named_by_host_index_and_bus_id() {
    let Some(lib) = fake_nvml(false) else { return };
    let o = pairwise(&lib, &[("FAKE_NCCL_P2P_SLOW", "4@2")]);
    assert_eq!(o.code, Some(1), "{}", o.out);
    let v = o.json.expect("the JSON is written");
    validate(&v);
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{}", o.out);
    let f = &findings[0];
    assert_eq!(
        (f["kind"].as_str(), f["host"].as_str()),
        (Some("slow_host"), Some("rank2")),
        "{f:#}"
    );
    assert_eq!(f["metric"], "bandwidth", "{f:#}");
    assert!(close(f["value"].as_f64().unwrap(), exact_gbs(4.0)), "{f:#}");
    assert!(close(f["reference"].as_f64().unwrap(), exact_gbs(1.0)), "{f:#}");
    // The text names the host, the GPU's index and its bus id, and what a slow GPU-to-GPU path comes from.
    let host = collbench::world::hostname();
    let gpu = format!("{host} GPU 2 [0000:12:00.0]");
    let flat = o.out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("SLOW HOST rank2: bandwidth"), "{}", o.out);
    assert!(flat.contains(&gpu), "{gpu}\n{}", o.out);
    assert!(flat.contains("PCIe link"), "{}", o.out);
    for other in [0, 1, 3] {
        assert!(!flat.contains(&format!("GPU {other} [")), "GPU {other}\n{}", o.out);
    }
}

#[test]
fn bytes_changed_on_the_way_are_an_error_naming_the_pair() {
    let Some(lib) = fake_nvml(false) else { return };
    // Every copy from a device to the host has its last byte flipped: the received buffer read back is wrong.
    let o = pairwise(&lib, &[("FAKE_CUDA_CORRUPT_DTOH", "1")]);
    assert!(!matches!(o.code, Some(0) | Some(1)), "{}", o.out);
    let flat = o.out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("arrived changed at byte 1048575 of 1048576"), "{}", o.out);
    assert!(
        flat.contains("nccl point-to-point") && flat.contains("cuda:"),
        "{}",
        o.out
    );
}
