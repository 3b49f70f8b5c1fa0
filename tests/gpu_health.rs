//! Preflight's GPU checks end to end on loopback, against the fake NVML of tests/gpu/fake/nvml.cpp: a clean node
//! passes with no GPU finding; each fault injected through the fake's variables (uncorrectable ECC errors, a
//! PCIe link at gen4 x8, a power brake, a repair pending, an NVLink down, persistence off, 7 of 8 GPUs) is a
//! finding naming host, GPU index and bus id in the text, the JSON, JUnit and OpenMetrics, and so is a GPU
//! whose copies run at half speed in the fake CUDA driver (below its peers, and below what its PCIe link
//! carries); NCCL on device buffers beside tcp (`--memory cuda --transport nccl,tcp`) has every check in all
//! three outputs; an old driver's missing calls are "not available", never a failure; and with no driver (or
//! no cuda feature) one note says the GPU checks were not run while the network checks run as before. Needs
//! g++ for the fakes (failed, not skipped, without it when CI=true).

mod common;

use std::path::Path;
use std::process::Command;

use common::gpu::gpu_checks;
#[cfg(feature = "cuda")]
use common::gpu::{assert_every_gpu_check_passes, fake_nvml};
use serde_json::Value;

struct Outcome {
    code: Option<i32>,
    out: String,
    json: Value,
    junit: String,
    metrics: String,
}

/// A small preflight on two local ranks with `lib` first on the loader's path and `env` set.
fn preflight(lib: Option<&Path>, env: &[(&str, &str)], extra: &[&str]) -> Outcome {
    preflight_on(2, lib, env, extra)
}

/// [`preflight`] on `np` local ranks.
fn preflight_on(np: usize, lib: Option<&Path>, env: &[(&str, &str)], extra: &[&str]) -> Outcome {
    let tmp = tempfile::tempdir().unwrap();
    let (j, x, m) = (
        tmp.path().join("p.json"),
        tmp.path().join("p.xml"),
        tmp.path().join("p.prom"),
    );
    let mut c = Command::new(env!("CARGO_BIN_EXE_collbench"));
    c.args([
        "preflight",
        "--np",
        &np.to_string(),
        "--repeat",
        "1",
        "--bandwidth-bytes",
        "1M",
        "--no-pairwise",
    ])
    .args(extra)
    .arg("-J")
    .arg(&j)
    .arg("--junit")
    .arg(&x)
    .arg("--metrics")
    .arg(&m)
    .env_remove("COLLBENCH_RANK");
    if let Some(lib) = lib {
        // Copies on the fake's virtual clock, at 50 GB/s each way (100 GB/s read + written within a GPU): the
        // bandwidths are exact, whatever the machine's load.
        let nccl = common::gpu::fake_nccl(lib);
        c.env("LD_LIBRARY_PATH", lib)
            .env("COLLBENCH_NCCL_LIB", nccl)
            .env("FAKE_CUDA_COPY_GBPS", "50");
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("collbench runs");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(!err.contains("panicked"), "{out}\n{err}");
    assert!(
        !err.contains("fake-cuda:") && !err.contains("fake-nccl:"),
        "a call the fakes refused:\n{err}"
    );
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}\n{out}\n{err}", p.display()));
    let json: Value = serde_json::from_str(&read(&j)).expect("valid JSON");
    validate(&json);
    Outcome {
        code: o.status.code(),
        json,
        junit: read(&x),
        metrics: read(&m),
        out: format!("{out}\n{err}"),
    }
}

/// Fails unless `v` matches the preflight JSON's schema (the GPU evidence and copy rates included).
fn validate(v: &Value) {
    let schema: Value = serde_json::from_str(include_str!("../schema/collbench-preflight.schema.json")).unwrap();
    let mut compiler = boon::Compiler::new();
    let mut schemas = boon::Schemas::new();
    compiler.add_resource("urn:preflight", schema).unwrap();
    let idx = compiler.compile("urn:preflight", &mut schemas).unwrap();
    if let Err(e) = schemas.validate(v, idx) {
        panic!("preflight JSON does not match its schema: {e:#}");
    }
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn named<'a>(v: &'a Value, name: &str) -> &'a Value {
    gpu_checks(v)
        .into_iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {:#}", v["checks"]))
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn host() -> String {
    collbench::world::hostname()
}

#[cfg(feature = "cuda")]
#[test]
fn a_clean_fake_node_passes_every_gpu_check_with_no_finding() {
    let Some(lib) = fake_nvml(false) else { return };
    let env = [("FAKE_CUDA_DEVICES", "2"), ("FAKE_NVML_NVLINKS", "2")];
    let o = preflight(Some(&lib), &env, &["--gpus-per-node", "2"]);
    assert_eq!(o.code, Some(0), "{}", o.out);
    assert_every_gpu_check_passes(&o.json, &o.out);
    assert_eq!(named(&o.json, "gpu count")["measured"], "2 GPU(s) on each of 1 host(s)");
    assert_eq!(
        named(&o.json, "gpu NVLink")["measured"],
        "2 GPU(s): 4 NVLinks, no NVLink down"
    );
    assert_eq!(named(&o.json, "gpu driver")["measured"], "driver 580.00, CUDA 13.0");
    assert_eq!(
        named(&o.json, "gpu copy bandwidth")["measured"],
        "2 GPU(s): 100.0 to 100.0 GB/s"
    );
    assert_eq!(
        named(&o.json, "gpu host-to-device")["measured"],
        "2 GPU(s): 50.0 to 50.0 GB/s"
    );
    assert!(!o.out.contains("GPU checks not run"), "{}", o.out);
}

#[cfg(feature = "cuda")]
#[test]
fn a_gpu_copying_at_half_speed_is_named_below_its_peers_with_its_cause() {
    let Some(lib) = fake_nvml(false) else { return };
    let env = [("FAKE_CUDA_DEVICES", "4"), ("FAKE_CUDA_HALF_SPEED", "2")];
    let o = preflight(Some(&lib), &env, &["--gpus-per-node", "4"]);
    assert_eq!(o.code, Some(1), "{}", o.out);
    let h = host();
    let gpu = format!("{h} GPU 2 [0000:12:00.0]");
    let want = [
        ("gpu copy bandwidth", "50.0 GB/s, 50% of its peers' median 100.0 GB/s"),
        (
            "gpu host-to-device",
            "25.0 GB/s, 50% of its peers' median 50.0 GB/s, 40% of gen5 x16's 63.0 GB/s",
        ),
        (
            "gpu device-to-host",
            "25.0 GB/s, 50% of its peers' median 50.0 GB/s, 40% of gen5 x16's 63.0 GB/s",
        ),
    ];
    for (kind, measured) in want {
        let name = format!("{kind}: {gpu}");
        let c = named(&o.json, &name);
        assert_eq!(
            (c["verdict"].as_str(), c["measured"].as_str()),
            (Some("fail"), Some(measured)),
            "{c:#}"
        );
        let detail = c["detail"].as_str().unwrap();
        assert!(detail.starts_with(&format!("{gpu}: ")), "{detail}");
        // Its links and clocks are as they should be: the cause is the copies themselves, and says where to look.
        assert!(detail.contains("cause: NVML shows no cause"), "{detail}");
        let read = &c["evidence"][0]["gpu"]["gpus"][0];
        assert_eq!(
            (read["index"].as_u64(), read["bus_id"].as_str()),
            (Some(2), Some("0000:12:00.0"))
        );
        assert!(read["copies"]["device_gbps"].as_f64().is_some(), "{c:#}");
        // Printed (the text wraps the rest of the line).
        assert!(o.out.contains(&format!("FAIL: {name}: ")), "{name}\n{}", o.out);
        assert!(o.junit.contains(&format!("name=\"{name}\"")), "{}", o.junit);
        assert!(
            o.metrics.contains(&format!("check=\"{name}\",status=\"fail\"}} 1\n")),
            "{}",
            o.metrics
        );
    }
    // Its peers are not named, and the GPU's health checks pass: only its copies are slow.
    let failed: Vec<&str> = gpu_checks(&o.json)
        .iter()
        .filter(|c| c["verdict"] != "pass")
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed.len(), 3, "{failed:?}");
}

#[cfg(feature = "cuda")]
#[test]
fn each_injected_gpu_fault_is_named_with_host_gpu_index_and_bus_id() {
    let Some(lib) = fake_nvml(false) else { return };
    let env = [
        ("FAKE_CUDA_DEVICES", "7"),
        ("FAKE_NVML_NVLINKS", "2"),
        ("FAKE_NVML_ECC", "1:3"),
        ("FAKE_NVML_PCIE", "1:4x8,6:4x16"),
        ("FAKE_NVML_CLOCK_EVENTS", "1:0x80,5:0x4"),
        ("FAKE_NVML_REMAPPED", "2:pending"),
        ("FAKE_NVML_NVLINK_DOWN", "3:1"),
        ("FAKE_NVML_PERSISTENCE", "4:off"),
    ];
    let o = preflight(Some(&lib), &env, &["--gpus-per-node", "8"]);
    assert_eq!(o.code, Some(1), "{}", o.out);
    let h = host();
    let gpu = |i: usize| format!("{h} GPU {i} [0000:1{i}:00.0]");
    // (check, verdict, what its measurement says)
    let want = [
        (format!("gpu count: {h}"), "fail", "7 of 8 GPUs".to_string()),
        (
            format!("gpu ECC: {}", gpu(1)),
            "fail",
            "3 volatile, 3 aggregate uncorrectable ECC errors".into(),
        ),
        (
            format!("gpu PCIe link: {}", gpu(1)),
            "fail",
            "gen4 x8 of gen5 x16".into(),
        ),
        (
            format!("gpu PCIe link: {}", gpu(6)),
            "warn",
            "gen4 x16 of gen5 x16".into(),
        ),
        (
            format!("gpu clocks: {}", gpu(1)),
            "fail",
            "slowed now: power brake".into(),
        ),
        (
            format!("gpu clocks: {}", gpu(5)),
            "warn",
            "held at its software power cap".into(),
        ),
        (
            format!("gpu memory repair: {}", gpu(2)),
            "fail",
            "a row remapping pending".into(),
        ),
        (format!("gpu NVLink: {}", gpu(3)), "fail", "link(s) 1 down of 2".into()),
        (
            format!("gpu persistence mode: {}", gpu(4)),
            "warn",
            "persistence mode off".into(),
        ),
    ];
    for (name, verdict, measured) in &want {
        let c = named(&o.json, name);
        assert_eq!(
            (c["verdict"].as_str(), c["measured"].as_str()),
            (Some(*verdict), Some(measured.as_str())),
            "{c:#}"
        );
        // The cause's host, GPU index and bus id, in the detail and in the evidence (the GPU's readings).
        let detail = c["detail"].as_str().unwrap();
        assert!(detail.starts_with(&h), "{detail}");
        let ev = &c["evidence"][0];
        assert_eq!(ev["host"].as_str(), Some(h.as_str()), "{c:#}");
        if !name.starts_with("gpu count") {
            let i: usize = name.split("GPU ").nth(1).unwrap()[..1].parse().unwrap();
            assert!(detail.contains(&gpu(i)[h.len() + 1..]), "{detail}");
            let read = &ev["gpu"]["gpus"];
            assert_eq!(read.as_array().map(Vec::len), Some(1), "{c:#}");
            assert_eq!(
                (read[0]["index"].as_u64(), read[0]["bus_id"].as_str()),
                (Some(i as u64), Some(format!("0000:1{i}:00.0").as_str()))
            );
        }
        // Printed with its cause, and in JUnit and OpenMetrics as every check is.
        let line = format!("{}: {name}: {measured} vs ", verdict.to_uppercase());
        assert!(o.out.contains(&line), "{line}\n{}", o.out);
        let case = format!("name=\"{name}\"");
        assert!(o.junit.contains(&case), "{case}\n{}", o.junit);
        let metric = format!("check=\"{name}\",status=\"{verdict}\"}} 1\n");
        assert!(o.metrics.contains(&metric), "{metric}\n{}", o.metrics);
    }
    // The link trained to gen4 x8 carries the fake's copies at 85% of its 15.75 GB/s: its copies between host
    // and device are slow, with the link named as their cause.
    let c = named(&o.json, &format!("gpu host-to-device: {}", gpu(1)));
    assert_eq!(c["verdict"], "fail", "{c:#}");
    assert!(c["measured"].as_str().unwrap().starts_with("13.4 GB/s, "), "{c:#}");
    let detail = c["detail"].as_str().unwrap();
    assert!(detail.contains("cause: its PCIe link trained to x8 of x16"), "{detail}");
    // The ECC finding's value is the count, for dashboards.
    assert_eq!(named(&o.json, &want[1].0)["value"], 3.0);
    // GPU 0 is clean: no finding names it.
    assert!(
        gpu_checks(&o.json)
            .iter()
            .all(|c| !c["name"].as_str().unwrap().contains("GPU 0 ")),
        "{}",
        o.out
    );
    assert_eq!(named(&o.json, "gpu driver")["verdict"], "pass");
}

#[cfg(feature = "cuda")]
#[test]
fn nccl_on_device_buffers_beside_tcp_is_judged_and_every_check_is_in_json_junit_and_metrics() {
    let Some(lib) = fake_nvml(false) else { return };
    // One rank on one GPU (the fake NCCL's collectives are exact on one rank), as the device check runs it.
    let env = [("FAKE_CUDA_DEVICES", "1")];
    let o = preflight_on(1, Some(&lib), &env, &["--memory", "cuda", "--transport", "nccl,tcp"]);
    assert_eq!(o.code, Some(0), "{}", o.out);
    let checks = o.json["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    for want in [
        "nccl connectivity",
        "nccl data",
        "tcp@lo connectivity",
        "tcp@lo data",
        "gpu count",
        "gpu ECC",
    ] {
        assert!(names.contains(&want), "{want} not in {names:?}");
    }
    assert!(names.contains(&"gpu copy bandwidth"), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("nccl ")) && names.iter().any(|n| n.starts_with("tcp@lo ")));
    // Every check, whatever its path, is a JUnit test case and an OpenMetrics sample.
    for c in checks {
        let (name, verdict) = (c["name"].as_str().unwrap(), c["verdict"].as_str().unwrap());
        assert_ne!(verdict, "fail", "{c:#}");
        assert!(o.junit.contains(&format!("name=\"{name}\"")), "{name}\n{}", o.junit);
        assert!(
            o.metrics
                .contains(&format!("check=\"{name}\",status=\"{verdict}\"}} 1\n")),
            "{name}\n{}",
            o.metrics
        );
    }
    // The measurements were on device memory, NCCL's and staged tcp's alike.
    let paths: Vec<&str> = o.json["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"nccl") && paths.contains(&"tcp@lo"), "{paths:?}");
}

#[cfg(feature = "cuda")]
#[test]
fn an_old_driver_lacking_the_health_calls_says_not_available_and_fails_nothing() {
    let Some(lib) = fake_nvml(true) else { return };
    let o = preflight(Some(&lib), &[("FAKE_CUDA_DEVICES", "2")], &["--gpus-per-node", "2"]);
    assert_eq!(o.code, Some(0), "{}", o.out);
    for name in [
        "gpu ECC",
        "gpu memory repair",
        "gpu clocks",
        "gpu PCIe link",
        "gpu persistence mode",
    ] {
        let c = named(&o.json, name);
        assert_eq!(
            (c["verdict"].as_str(), c["measured"].as_str()),
            (Some("warn"), Some("not available")),
            "{c:#}"
        );
        assert!(
            c["detail"].as_str().unwrap().contains("the driver lacks nvmlDevice"),
            "{c:#}"
        );
    }
    assert_eq!(named(&o.json, "gpu count")["verdict"], "pass");
}

#[cfg(feature = "cuda")]
#[test]
fn without_a_driver_one_note_says_so_and_the_network_checks_run_as_before() {
    let Some(lib) = fake_nvml(false) else { return };
    // libnvidia-ml is there but NVML cannot start (error 9: the kernel driver is not loaded), as in a container
    // without the GPUs exposed.
    let env = [("FAKE_NVML_INIT_ERROR", "9")];
    let o = preflight(Some(&lib), &env, &[]);
    assert_eq!(o.code, Some(0), "{}", o.out);
    assert!(gpu_checks(&o.json).is_empty(), "{:#}", o.json["checks"]);
    let lines: Vec<&str> = o.out.lines().filter(|l| l.contains("GPU checks not run")).collect();
    assert_eq!(lines.len(), 1, "{}", o.out);
    assert!(lines[0].contains("nvmlInit failed (error 9"), "{}", lines[0]);
    let notes = o.json["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("GPU checks not run: NVML loaded but nvmlInit failed")),
        "{notes:?}"
    );
    assert!(o.json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "tcp@lo connectivity" && c["verdict"] == "pass"));
    // Asked for GPUs, the same host fails by name instead.
    let o = preflight(Some(&lib), &env, &["--gpus-per-node", "1"]);
    assert_eq!(o.code, Some(1), "{}", o.out);
    let c = named(&o.json, &format!("gpu count: {}", host()));
    assert_eq!(c["verdict"], "fail");
    assert!(
        c["detail"].as_str().unwrap().contains("nvmlInit failed (error 9"),
        "{c:#}"
    );
}

#[cfg(not(feature = "cuda"))]
#[test]
fn without_the_cuda_feature_one_note_says_so_and_the_network_checks_run_as_before() {
    let o = preflight(None, &[], &[]);
    assert_eq!(o.code, Some(0), "{}", o.out);
    assert!(gpu_checks(&o.json).is_empty(), "{:#}", o.json["checks"]);
    let lines: Vec<&str> = o.out.lines().filter(|l| l.contains("GPU checks not run")).collect();
    assert_eq!(lines.len(), 1, "{}", o.out);
    assert!(lines[0].contains("built without the cuda feature"), "{}", lines[0]);
    assert!(!o.junit.contains("classname=\"preflight.gpu\""), "{}", o.junit);
    assert!(!o.metrics.contains("path=\"gpu\""), "{}", o.metrics);
    let flag = Command::new(env!("CARGO_BIN_EXE_collbench"))
        .args(["preflight", "--gpus-per-node", "8"])
        .env_remove("COLLBENCH_RANK")
        .output()
        .unwrap();
    assert_eq!(flag.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&flag.stderr).contains("--gpus-per-node"));
}
