//! One broken link, one answer: on four network-namespace hosts (`tests/netns/cluster.sh`), one rank each, the
//! link between h1 and h3 alone is broken, and every rank's last line must name that link, both ends, and
//! nothing else:
//! - a path MTU black hole (`cluster.sh mtu-blackhole`: packets over 1280 bytes dropped both ways, no ICMP):
//!   connection set-up passes, the first full-sized transfer between the two stalls; in `run` and `pairwise`.
//!   `preflight` probes for it before any full-sized transfer: its path MTU check names that link, cause MTU,
//!   with the largest payload that passed, and every rank exits 1 (the hosts left measured without h3);
//! - the link cut (`cluster.sh cut`) while `run` measures;
//! - the link cut before the ranks connect, in `run`, `pairwise` and `preflight`: connection set-up fails at
//!   both ends, the others hear it before leaving set-up, and preflight's rank 0 reports the failed set-up as
//!   its one check (nothing said to pass) with the process's exit status in its JSON.
//!
//! These need root; where that is not possible they print why and pass, except in CI (`CI=true`), where that
//! is a failure.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::netns::{namespace_test, spawn, wait_all, Cluster, Done};

const HOSTS: usize = 4;
const ROOT_PORT: &str = "29650";
/// Past this the ranks are killed and the test fails.
const DEADLINE: Duration = Duration::from_secs(120);

fn up(tag: &str) -> Cluster {
    Cluster::up("cbk", tag, HOSTS, &["--rate", "400mbit"])
}

/// Every rank's output, for a failure message.
fn logs(done: &[Done]) -> String {
    done.iter()
        .enumerate()
        .map(|(h, d)| format!("--- rank {h} stdout:\n{}\n--- rank {h} stderr:\n{}", d.stdout, d.stderr))
        .collect()
}

/// Starts `collbench ARGS` as one rank per host.
fn start(c: &Cluster, dir: &Path, label: &str, args: &[&str]) -> Vec<common::netns::Proc> {
    let bin = assert_cmd::cargo::cargo_bin("collbench");
    let master = c.addr(0, "eth0");
    (0..HOSTS)
        .map(|h| {
            spawn(
                c.exec_rank(h, &master, ROOT_PORT, &bin, args),
                &format!("{label}{h}"),
                dir,
            )
        })
        .collect()
}

/// Every rank failed as a peer failure (exit 3), its last stderr line its error, naming the link between h1
/// and h3 as the culprit.
fn every_rank_names_the_link(c: &Cluster, done: &[Done], what: &str) {
    let want = format!(
        "Culprit: the link between rank 1 (host {}) and rank 3 (host {})",
        c.host(1),
        c.host(3)
    );
    for (h, d) in done.iter().enumerate() {
        assert_eq!(d.status.code(), Some(3), "{what}: rank {h}:\n{}", logs(done));
        let last = d.stderr.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("collbench: error: ") && last.ends_with(&want),
            "{what}: rank {h}'s last line does not name the link:\n{last}\n{}",
            logs(done)
        );
    }
}

#[test]
fn an_mtu_black_hole_on_one_link_is_named_as_that_link_by_every_rank_in_run_pairwise_and_preflight() {
    let Some(_serial) = namespace_test() else { return };
    let c = up("mtu");
    c.run(&["mtu-blackhole", "1", "3", "1280"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("preflight.json");
    let json_s = json.to_str().unwrap();
    let runs: [(&str, Vec<&str>); 2] = [
        (
            "run",
            vec![
                "run",
                "--iface",
                "eth0",
                "--collective",
                "alltoall",
                "-b",
                "8",
                "-e",
                "1M",
                "-n",
                "2",
                "-w",
                "1",
                "-T",
                "5",
            ],
        ),
        ("pairwise", vec!["pairwise", "--transport", "tcp@eth0", "-T", "5"]),
    ];
    for (what, args) in runs {
        let done = wait_all(start(&c, dir.path(), what, &args), DEADLINE);
        every_rank_names_the_link(&c, &done, what);
    }
    // The preflight probes the path MTU before any full-sized transfer: the link is named with cause MTU, and
    // every rank ends with the failing verdict (h3's at once, left out; the others after measuring).
    let args = ["preflight", "--transport", "tcp@eth0", "-T", "5", "-J", json_s];
    let done = wait_all(start(&c, dir.path(), "preflight", &args), DEADLINE);
    for (h, d) in done.iter().enumerate() {
        assert_eq!(d.status.code(), Some(1), "preflight: rank {h}:\n{}", logs(&done));
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["exit_code"], 1, "{v}");
    assert_eq!(v["verdict"], "fail", "{v}");
    let failed: Vec<&serde_json::Value> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["verdict"] == "fail")
        .collect();
    let name = format!("tcp@eth0 mtu: link {} - {}", c.host(1), c.host(3));
    assert_eq!(failed.len(), 1, "{}", logs(&done));
    assert_eq!(failed[0]["name"], name.as_str(), "{}", logs(&done));
    assert_eq!(failed[0]["cause"], "mtu", "{}", failed[0]);
    assert!(
        failed[0]["measured"].as_str().unwrap().contains("1252 B"),
        "{}",
        failed[0]
    );
}

#[test]
fn a_link_cut_while_run_measures_is_named_as_that_link_by_every_rank() {
    let Some(_serial) = namespace_test() else { return };
    let c = up("cut");
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "run",
        "--iface",
        "eth0",
        "--collective",
        "alltoall",
        "-b",
        "8",
        "-e",
        "4M",
        "-n",
        "20",
        "-w",
        "1",
        "-T",
        "5",
    ];
    let procs = start(&c, dir.path(), "cut", &args);
    // Cut once rank 0 printed its first measured row: every connection is up and data moves.
    let out = dir.path().join("cut0.out");
    let until = Instant::now() + DEADLINE;
    while !std::fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().next().is_some_and(|t| t.parse::<u64>().is_ok()))
    {
        assert!(Instant::now() < until, "rank 0 printed no row");
        // A bounded poll of a file another process writes, not synchronisation between threads.
        std::thread::sleep(Duration::from_millis(20));
    }
    c.run(&["cut", "1", "3"]);
    let done = wait_all(procs, DEADLINE);
    every_rank_names_the_link(&c, &done, "run, cut while measuring");
}

#[test]
fn a_link_cut_before_the_ranks_connect_is_named_as_that_link_by_every_rank_in_run_pairwise_and_preflight() {
    let Some(_serial) = namespace_test() else { return };
    let c = up("setup");
    c.run(&["cut", "1", "3"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("preflight.json");
    let json_s = json.to_str().unwrap();
    let quick = ["-T", "5", "--connect-timeout", "10"];
    let runs: [(&str, Vec<&str>); 3] = [
        (
            "run",
            [
                &[
                    "run",
                    "--iface",
                    "eth0",
                    "--collective",
                    "alltoall",
                    "-b",
                    "8",
                    "-e",
                    "8",
                ][..],
                &quick,
            ]
            .concat(),
        ),
        (
            "pairwise",
            [&["pairwise", "--transport", "tcp@eth0"][..], &quick].concat(),
        ),
        (
            "preflight",
            [&["preflight", "--transport", "tcp@eth0", "-J", json_s][..], &quick].concat(),
        ),
    ];
    let mut preflight = Vec::new();
    for (what, args) in runs {
        let done = wait_all(start(&c, dir.path(), what, &args), DEADLINE);
        every_rank_names_the_link(&c, &done, &format!("{what}, cut before set-up"));
        preflight = done;
    }
    let code = preflight[0].status.code();
    let out = &preflight[0].stdout;
    assert!(
        out.contains("connection set-up of tcp@eth0") && out.contains("Preflight verdict: FAIL"),
        "{}",
        logs(&preflight)
    );
    // Nothing was measured, so nothing is said to pass.
    assert!(!out.contains("PASS") && !out.contains("wrong elements"), "{out}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["exit_code"].as_i64(), code.map(i64::from), "{v}");
    assert_eq!(v["verdict"], "fail", "{v}");
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 1, "{v}");
    assert_eq!(checks[0]["name"], "connection set-up of tcp@eth0", "{v}");
}
