//! The validator at 16 hosts: a cluster of sixteen network-namespace hosts (`tests/netns/cluster.sh`), one
//! rank each, every eth0 shaped to 100 Mbit/s, `pairwise` and `preflight` with their defaults (budgets 120 s
//! and 180 s):
//! - clean: `pairwise` names no host and no link, and exits 0;
//! - one link slowed to 20 Mbit/s (h5 -> h9, `cluster.sh shape-pair`): `preflight` fails on exactly that link,
//!   names no host and no other link, and ends within its budget.
//!
//! Sixteen ranks on the 2-core machine are CPU-bound: that is the point (the findings must hold when the
//! hosts are busy). The five-run record of every case is in results/scale (tests/bench/scale.sh).
//! These need root; where that is not possible they print why and pass, except in CI (`CI=true`), where that
//! is a failure.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::netns::{namespace_test, spawn, wait_all, Cluster, Done};
use serde_json::Value;

const HOSTS: usize = 16;
const ROOT_PORT: &str = "29680";
/// What the launch around a run (namespaces, process start, exit) may add to its budget.
const SLACK_S: f64 = 20.0;
/// Past this the ranks are killed and the test fails.
const DEADLINE: Duration = Duration::from_secs(300);

/// Every rank's output, for a failure message.
fn logs(done: &[Done]) -> String {
    done.iter()
        .enumerate()
        .map(|(h, d)| format!("--- rank {h} stdout:\n{}\n--- rank {h} stderr:\n{}", d.stdout, d.stderr))
        .collect()
}

/// Runs `collbench CMD --transport tcp@eth0 -J FILE` with its defaults, one rank per host; every rank exits
/// with rank 0's status. Returns rank 0's status, its stdout, the JSON and the seconds the run took.
fn validate(c: &Cluster, dir: &Path, cmd: &str) -> (Option<i32>, String, Value, f64) {
    let bin = assert_cmd::cargo::cargo_bin("collbench");
    let master = c.addr(0, "eth0");
    let json = dir.join(format!("{cmd}.json"));
    let args = [cmd, "--transport", "tcp@eth0", "-J", json.to_str().unwrap()];
    let started = Instant::now();
    let procs = (0..HOSTS)
        .map(|h| {
            spawn(
                c.exec_rank(h, &master, ROOT_PORT, &bin, &args),
                &format!("{cmd}{h}"),
                dir,
            )
        })
        .collect();
    let done = wait_all(procs, DEADLINE);
    let took = started.elapsed().as_secs_f64();
    for (h, d) in done.iter().enumerate().skip(1) {
        assert_eq!(
            d.status.code(),
            done[0].status.code(),
            "{cmd}: rank {h}:\n{}",
            logs(&done)
        );
    }
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{cmd}: no JSON ({e}):\n{}", logs(&done)));
    let v = serde_json::from_str(&text).unwrap();
    (done[0].status.code(), done[0].stdout.clone(), v, took)
}

#[test]
fn at_sixteen_hosts_a_clean_cluster_has_no_finding_and_one_slow_link_is_named_alone() {
    let Some(_serial) = namespace_test() else { return };
    let c = Cluster::up("cbg", "16", HOSTS, &["--rate", "100mbit"]);
    let dir = tempfile::tempdir().unwrap();

    let (code, out, v, took) = validate(&c, dir.path(), "pairwise");
    let findings = v["findings"].as_array().unwrap();
    assert!(findings.is_empty(), "a clean cluster's findings: {findings:?}\n{out}");
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("SLOW"), "{out}");
    assert!(
        took < 120.0 + SLACK_S,
        "pairwise took {took:.0} s of a 120 s budget\n{out}"
    );

    c.run(&["shape-pair", "5", "9", "20mbit"]);
    let (code, out, v, took) = validate(&c, dir.path(), "preflight");
    assert_eq!(code, Some(1), "{out}");
    let failed: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["verdict"] == "fail")
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    let (h5, h9) = (c.host(5), c.host(9));
    let link = format!("tcp@eth0 pairwise: slow link {h5} <-> {h9}");
    assert!(failed.contains(&link.as_str()), "{failed:?}\n{out}");
    // Nothing else is named: no host, no other link (a collective's shortfall may fail too, pointing at it).
    for f in &failed {
        assert!(
            !f.contains("slow host") && (!f.contains("slow link") || *f == link),
            "{f} beside {link}\n{out}"
        );
    }
    assert!(
        took < 180.0 + SLACK_S,
        "preflight took {took:.0} s of a 180 s budget\n{out}"
    );
}
