//! `--metrics FILE` as monitoring systems read it: a preflight and a pairwise test on local ranks write their
//! OpenMetrics text, and the Prometheus project's own Python client parses it with both of its parsers
//! (OpenMetrics, and the classic text format node_exporter's textfile collector speaks). Every check the JSON
//! lists must be there as a labelled sample, with the verdict the JSON gives.
//!
//! The parser (PyPI `prometheus-client`) is installed by this test into a virtual environment under the target
//! directory; where PyPI cannot be reached the test says so and passes, except in CI (`CI=true`), where that is
//! a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;

fn collbench() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("collbench"));
    common::clean_env(&mut c);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One venv for the tests of this file, made by whichever asks first.
static VENV: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A Python with prometheus-client, or `None` (said why) where it cannot be installed outside CI.
fn parser_python() -> Option<PathBuf> {
    let _one = VENV.lock().unwrap_or_else(|e| e.into_inner());
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("metrics-venv");
    let py = venv.join("bin/python3");
    let has = |py: &Path| {
        Command::new(py)
            .args([
                "-c",
                "import prometheus_client.openmetrics.parser, prometheus_client.parser",
            ])
            .status()
            .is_ok_and(|s| s.success())
    };
    let why = match Command::new("python3").arg("-m").arg("venv").arg(&venv).output() {
        _ if py.is_file() && has(&py) => return Some(py),
        Ok(o) if o.status.success() || py.is_file() => {
            let pip = Command::new(&py)
                .args(["-m", "pip", "install", "--quiet", "prometheus-client"])
                .output();
            match pip {
                Ok(o) if o.status.success() && has(&py) => return Some(py),
                Ok(o) => format!("pip install prometheus-client failed: {}", text(&o.stderr)),
                Err(e) => format!("pip did not run: {e}"),
            }
        }
        Ok(o) => format!("python3 -m venv failed (python3-venv installed?): {}", text(&o.stderr)),
        Err(e) => format!("python3 did not run: {e}"),
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the Prometheus parser could not be installed: {why}"
    );
    eprintln!("tests/metrics.rs: skipped, the Prometheus parser could not be installed: {why}");
    None
}

/// Parses `file` with both parsers; prints one JSON object: {"families": {name: type}, "samples": [[name,
/// labels, value], ...]} from the OpenMetrics parser, and the classic parser's family names.
const PARSE: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
from prometheus_client.parser import text_string_to_metric_families as classic
t = open(sys.argv[1]).read()
fams = list(om(t))
out = {"families": {f.name: f.type for f in fams},
       "samples": [[s.name, s.labels, s.value] for f in fams for s in f.samples],
       "classic": sorted(f.name for f in classic(t))}
print(json.dumps(out))
"#;

fn parse(py: &Path, file: &Path) -> Value {
    let out = Command::new(py).arg("-c").arg(PARSE).arg(file).output().unwrap();
    assert!(
        out.status.success(),
        "the Prometheus parser refused {}:\n{}\n{}",
        file.display(),
        text(&out.stderr),
        std::fs::read_to_string(file).unwrap_or_default()
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The samples named `name`, with their labels and values.
fn samples<'a>(p: &'a Value, name: &str) -> Vec<(&'a Value, f64)> {
    p["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s[0] == name)
        .map(|s| (&s[1], s[2].as_f64().unwrap()))
        .collect()
}

#[test]
fn preflight_metrics_parse_with_every_check_and_its_verdict() {
    let Some(py) = parser_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (json, prom) = (dir.path().join("p.json"), dir.path().join("p.prom"));
    // An expectation no loopback meets: the busbw checks fail, with their values.
    let expect = dir.path().join("fast.toml");
    std::fs::write(&expect, "[[expect]]\nmin_busbw = 1e6\n").unwrap();
    let out = collbench()
        .args([
            "preflight",
            "--np",
            "3",
            "--bandwidth-bytes",
            "1M",
            "--repeat",
            "1",
            "--expect",
        ])
        .arg(&expect)
        .arg("-J")
        .arg(&json)
        .arg("--metrics")
        .arg(&prom)
        .output()
        .unwrap();
    let code = out.status.code();
    assert!(code == Some(1), "{}\n{}", text(&out.stdout), text(&out.stderr));
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let p = parse(&py, &prom);
    // Gauges only, so node_exporter's classic parser reads the same families.
    for (name, ty) in p["families"].as_object().unwrap() {
        assert_eq!(ty, "gauge", "{name}");
        assert!(
            p["classic"].as_array().unwrap().iter().any(|c| c == name),
            "{name} not read by the classic parser: {p}"
        );
    }
    let verdict = doc["verdict"].as_str().unwrap();
    let states = samples(&p, "collbench_preflight_verdict");
    assert_eq!(states.len(), 3, "{p}");
    for (l, v) in states {
        assert_eq!(v, f64::from(u8::from(l["verdict"] == verdict)), "{l}");
    }
    assert_eq!(
        samples(&p, "collbench_preflight_exit_code")[0].1,
        f64::from(code.unwrap()),
        "the exit code is the process's"
    );
    let status = samples(&p, "collbench_preflight_check_status");
    let checks = doc["checks"].as_array().unwrap();
    let names: Vec<&Value> = checks.iter().map(|c| &c["name"]).collect();
    assert!(checks.len() >= 5, "{names:?}");
    assert!(
        checks.iter().any(|c| c["verdict"] == "fail" && c["value"].is_number()),
        "{names:?}"
    );
    for c in checks {
        let named: Vec<_> = status.iter().filter(|(l, _)| l["check"] == c["name"]).collect();
        assert_eq!(named.len(), 3, "check {} has a state per verdict: {p}", c["name"]);
        let on: Vec<_> = named.iter().filter(|(_, v)| *v == 1.0).collect();
        assert_eq!(on.len(), 1);
        assert_eq!(on[0].0["status"], c["verdict"], "{}", c["name"]);
        assert_eq!(on[0].0["path"], c["path"]);
        if let Some(v) = c["value"].as_f64() {
            let val = samples(&p, "collbench_preflight_check_value");
            let m = val.iter().find(|(l, _)| l["check"] == c["name"]).expect("its value");
            // The JSON keeps the check's own unit; the metric is in the Prometheus base unit its label names.
            let (unit, scale) = match c["unit"].as_str().unwrap_or("") {
                "GB/s" => ("bytes_per_second", 1e9),
                "us" => ("seconds", 1e-6),
                "%" => ("ratio", 0.01),
                "x" => ("ratio", 1.0),
                other => (other, 1.0),
            };
            assert_eq!(m.0["unit"], unit, "{}", c["name"]);
            let want = v * scale;
            assert!((m.1 - want).abs() <= 1e-9 * want.abs().max(1.0), "{} {want}", m.1);
        }
    }
    assert_eq!(samples(&p, "collbench_preflight_ranks")[0].1, 3.0);
    assert!(!samples(&p, "collbench_build_info").is_empty());
}

#[test]
fn pairwise_metrics_parse_with_every_link_both_ways() {
    let Some(py) = parser_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (json, prom) = (dir.path().join("w.json"), dir.path().join("w.prom"));
    let out = collbench()
        .args(["pairwise", "--np", "3", "--bytes", "256K", "-J"])
        .arg(&json)
        .arg("--metrics")
        .arg(&prom)
        .output()
        .unwrap();
    // One host: a finding is a warning, so the test passes either way (as preflight does on one host).
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let so = text(&out.stdout);
    assert!(!so.contains("SLOW HOST") && !so.contains("SLOW LINK"), "{so}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let p = parse(&py, &prom);
    let links = doc["links"].as_array().unwrap();
    assert_eq!(links.len(), 3);
    let bw = samples(&p, "collbench_pairwise_link_bandwidth_bytes_per_second");
    assert_eq!(bw.len(), 6, "each link both ways: {p}");
    for l in links {
        let ab = bw
            .iter()
            .find(|(x, _)| x["src"] == l["a_name"] && x["dst"] == l["b_name"])
            .expect("a to b");
        let want = l["bw_ab_gbs"].as_f64().unwrap() * 1e9;
        assert!((ab.1 - want).abs() <= 1e-6 * want, "{} {want}", ab.1);
    }
    assert_eq!(samples(&p, "collbench_pairwise_link_latency_seconds").len(), 3);
    let findings = doc["findings"].as_array().unwrap().len();
    assert_eq!(samples(&p, "collbench_pairwise_findings")[0].1, findings as f64);
    assert_eq!(samples(&p, "collbench_pairwise_finding").len(), findings);
    let on: Vec<_> = samples(&p, "collbench_pairwise_verdict")
        .into_iter()
        .filter(|(_, v)| *v == 1.0)
        .collect();
    assert_eq!(on.len(), 1);
    assert_eq!(on[0].0["verdict"], if findings == 0 { "pass" } else { "warn" });
}
