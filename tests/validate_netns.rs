//! `collbench pairwise`, `collbench preflight` and `collbench compare` on a cluster of network-namespace
//! hosts (`tests/netns/cluster.sh`) with faults injected, one rank per host, every host's eth0 shaped to
//! 400 Mbit/s so a clean matrix is even. pairwise:
//! - one host shaped to 100 Mbit/s: exit 1, that host named, no link;
//! - one pair shaped to 100 Mbit/s only between themselves: that link named, neither host;
//! - random packet loss (10%) on one host (iptables statistic): that host named, nothing else;
//! - a clean cluster, three runs: no finding, exit 0 (no false alarm);
//! - one host's eth0 at MTU 1280: a set-up warning naming that host (the matrix cannot show it);
//! - one host's link down half a second every two: that host's carrier losses named, exit 1.
//!
//! preflight (collectives' plan, then the pairwise test, judged): one host at a quarter of the rate FAILs
//! naming that host; one slow pair FAILs naming that link and neither host; a lossy host is named; a clean
//! cluster PASSes five runs out of five. compare: a run with one host shaped against a clean baseline is a
//! significant regression (exit 1); two clean runs are not (exit 0).
//!
//! These need root (network namespaces, tc, iptables). Where that is not possible they print why and pass,
//! except in CI (`CI=true`), where that is a failure.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use collbench::results::record::CPU_LIMITED_PCT;
use common::netns::{cannot_run, namespace_test, spawn, wait_all, Cluster, Done};
use serde_json::Value;

const HOSTS: usize = 4;
/// Every host's egress rate, and the rates faults bring a host or a pair down to.
const RATE: &str = "400mbit";
const SLOW: &str = "100mbit";
/// 400 Mbit/s in GB/s.
const RATE_GBS: f64 = 0.05;
/// A run takes seconds; a lossy one up to half a minute. Past this it is killed and the test fails.
const DEADLINE: Duration = Duration::from_secs(180);
const ROOT_PORT: &str = "29500";

/// Whether `tool` is on the PATH (see [`cannot_run`]); `package` is the Debian package that has it.
fn tool_available(tool: &str, package: &str) -> bool {
    let ok = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        cannot_run(&format!(
            "'{tool}' is not installed (Debian: apt-get install {package})"
        ));
    }
    ok
}

/// A cluster of [`HOSTS`] hosts shaped to [`RATE`], `tag` unique to the test.
fn up(tag: &str) -> Cluster {
    Cluster::up("cbp", tag, HOSTS, &["--rate", RATE])
}

/// What rank 0 reported.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    json: Value,
}

/// Runs `collbench pairwise` with one rank per host (RANK/WORLD_SIZE/MASTER_ADDR); every rank must exit with
/// rank 0's status; returns rank 0's exit status, output and JSON.
fn pairwise(c: &Cluster, dir: &Path, label: &str, iters: &str) -> Outcome {
    let json = dir.join(format!("{label}.json"));
    let args = [
        "pairwise",
        "--transport",
        "tcp@eth0",
        "--bytes",
        "2M",
        "-n",
        iters,
        "--lat-iters",
        "50",
        "-J",
        json.to_str().unwrap(),
    ];
    ranks(c, dir, label, &args, &json)
}

/// Runs `collbench ARGS` as one rank per host (RANK/WORLD_SIZE/MASTER_ADDR); every rank must exit with rank
/// 0's status; returns rank 0's exit status, output and the JSON it wrote to `json`.
fn ranks(c: &Cluster, dir: &Path, label: &str, args: &[&str], json: &Path) -> Outcome {
    let bin = assert_cmd::cargo::cargo_bin("collbench");
    let master = c.addr(0, "eth0");
    let procs = (0..HOSTS)
        .map(|h| {
            spawn(
                c.exec_rank(h, &master, ROOT_PORT, &bin, args),
                &format!("{label}{h}"),
                dir,
            )
        })
        .collect();
    let done = wait_all(procs, DEADLINE);
    // Every rank exits with the verdict rank 0 reached.
    for (h, d) in done.iter().enumerate().skip(1) {
        assert_eq!(
            d.status.code(),
            done[0].status.code(),
            "{label}: rank {h}:\n{}",
            logs(&done)
        );
    }
    let text = std::fs::read_to_string(json).unwrap_or_else(|e| panic!("{label}: no JSON ({e}):\n{}", logs(&done)));
    Outcome {
        code: done[0].status.code(),
        stdout: done[0].stdout.clone(),
        json: serde_json::from_str(&text).unwrap(),
    }
}

/// Every rank's output, for a failure message.
fn logs(done: &[Done]) -> String {
    done.iter()
        .enumerate()
        .map(|(h, d)| format!("--- rank {h} stdout:\n{}\n--- rank {h} stderr:\n{}", d.stdout, d.stderr))
        .collect()
}

/// (slow hosts, slow links) named by the findings, whatever the metric.
fn named(o: &Outcome) -> (Vec<String>, Vec<(String, String)>) {
    let (mut hosts, mut links) = (Vec::new(), Vec::new());
    for f in o.json["findings"].as_array().unwrap() {
        match f["kind"].as_str().unwrap() {
            "slow_host" => hosts.push(f["host"].as_str().unwrap().to_string()),
            "slow_link" => links.push((
                f["a"].as_str().unwrap().to_string(),
                f["b"].as_str().unwrap().to_string(),
            )),
            other => panic!("unknown finding {other}: {f}"),
        }
    }
    (hosts, links)
}

/// Checks that every link `blamed(a, b)` (host indices) was measured a second time before it was blamed.
fn check_remeasured(o: &Outcome, blamed: impl Fn(usize, usize) -> bool) {
    assert_eq!(o.json["config"]["confirm"], true, "{}", o.stdout);
    for l in o.json["links"].as_array().unwrap() {
        let (a, b) = (l["a"].as_u64().unwrap() as usize, l["b"].as_u64().unwrap() as usize);
        if blamed(a, b) {
            assert_eq!(l["remeasured"], true, "a blamed link measured once: {l}\n{}", o.stdout);
        }
    }
    assert!(o.stdout.contains("re-measuring"), "{}", o.stdout);
}

/// Checks the matrix: every pair of the cluster's hosts, one rank each, no direction above the shaped rate.
fn check_matrix(c: &Cluster, o: &Outcome) {
    assert_eq!(o.json["unit"], "hosts", "{}", o.stdout);
    let hosts: Vec<&str> = o.json["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (0..HOSTS).map(|h| c.host(h)).collect();
    assert_eq!(hosts, want, "{}", o.stdout);
    let links = o.json["links"].as_array().unwrap();
    assert_eq!(links.len(), HOSTS * (HOSTS - 1) / 2, "{}", o.stdout);
    for l in links {
        for k in ["bw_ab_gbs", "bw_ba_gbs"] {
            let v = l[k].as_f64().unwrap();
            // TBF's 256 KB bucket refills while a host waits for its partner to finish, so each 2 MiB
            // exchange may start with 256 KB at wire speed: at most 2 / (2 - 0.25) = 1.14 x the rate.
            assert!(
                v > 0.0 && v < RATE_GBS * 1.15,
                "{k} {v} GB/s over {RATE} links: {l}\n{}",
                o.stdout
            );
        }
    }
}

#[test]
fn a_host_shaped_to_a_quarter_is_named_and_no_link() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("a");
    let dir = tempfile::tempdir().unwrap();
    c.run(&["shape", "2", SLOW]);
    let o = pairwise(&c, dir.path(), "slowhost", "5");
    check_matrix(&c, &o);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    assert_eq!(named(&o), (vec![c.host(2)], vec![]), "{}", o.stdout);
    assert!(
        o.stdout.contains(&format!("SLOW HOST {}: bandwidth", c.host(2))),
        "{}",
        o.stdout
    );
    check_remeasured(&o, |a, b| a == 2 || b == 2);
}

#[test]
fn a_pair_slow_only_between_themselves_is_named_as_that_link() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("b");
    let dir = tempfile::tempdir().unwrap();
    // Each of the two shapes only what it sends to the other; both keep 400 Mbit/s to everyone else.
    c.run(&["shape-pair", "1", "3", SLOW]);
    c.run(&["shape-pair", "3", "1", SLOW]);
    let o = pairwise(&c, dir.path(), "slowlink", "5");
    check_matrix(&c, &o);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    assert_eq!(named(&o), (vec![], vec![(c.host(1), c.host(3))]), "{}", o.stdout);
    assert!(o.stdout.contains("SLOW LINK"), "{}", o.stdout);
    check_remeasured(&o, |a, b| (a, b) == (1, 3));
}

#[test]
fn a_host_losing_packets_is_named() {
    let Some(_one) = namespace_test() else {
        return;
    };
    if !tool_available("iptables", "iptables") || !tool_available("ethtool", "ethtool") {
        return;
    }
    let c = up("c");
    let dir = tempfile::tempdir().unwrap();
    // TCP recovers bulk transfers from loss quickly on a 0.1 ms path, so bandwidth may hardly drop; the
    // 8-byte round trips that lose a packet wait out a retransmission timeout: at 10% loss, several of 50.
    c.run(&["loss", "2", "0.1"]);
    let o = pairwise(&c, dir.path(), "lossy", "5");
    check_matrix(&c, &o);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let (hosts, links) = named(&o);
    assert_eq!((hosts, links), (vec![c.host(2)], vec![]), "{}", o.stdout);
}

#[test]
fn a_host_with_a_smaller_mtu_is_named_as_a_set_up_warning() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("m");
    let dir = tempfile::tempdir().unwrap();
    c.run(&["exec", "2", "ip", "link", "set", "dev", "eth0", "mtu", "1280"]);
    let o = pairwise(&c, dir.path(), "mtu", "3");
    let warned: Vec<&str> = o.json["host_config"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["what"].as_str().unwrap())
        .collect();
    let (mtu, others): (Vec<&str>, Vec<&str>) = warned.iter().partition(|w| w.starts_with("the MTU differs"));
    assert_eq!(mtu.len(), 1, "{}", o.stdout);
    // The hosts at 1280 are h2 alone.
    let small = mtu[0].split("MTU 1280 on ").nth(1).and_then(|g| g.split(';').next());
    assert_eq!(small, Some(format!("{} (eth0)", c.host(2)).as_str()), "{}", o.stdout);
    // Anything else (h2's overlay no longer fitting its smaller underlay) is about h2 too, and only h2.
    for w in others {
        assert!(w.contains(&c.host(2)), "{w}\n{}", o.stdout);
        for h in [0, 1, 3] {
            assert!(!w.contains(&c.host(h)), "{w}\n{}", o.stdout);
        }
    }
    assert!(
        o.stdout.contains("WARN the MTU differs between hosts on the same path"),
        "{}",
        o.stdout
    );
    // A set-up warning is a warning: exit 0 on every rank (checked in `ranks`), unless the matrix fails too.
    if named(&o) == (vec![], vec![]) {
        assert_eq!(o.code, Some(0), "{}", o.stdout);
    }
}

#[test]
fn a_host_whose_link_goes_down_between_rounds_is_named() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("f");
    let dir = tempfile::tempdir().unwrap();
    // h1's switch port goes down for half a second every two: the rounds may fall between outages, its
    // carrier counter cannot.
    c.run(&["flap", "1", "0.5", "2"]);
    let o = pairwise(&c, dir.path(), "flap", "20");
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let downs = o.json["link_downs"].as_array().unwrap();
    assert_eq!(downs.len(), 1, "{}", o.stdout);
    assert_eq!(downs[0]["host"], c.host(1), "{}", o.stdout);
    assert_eq!(downs[0]["iface"], "eth0", "{}", o.stdout);
    assert!(
        o.stdout
            .contains(&format!("LINK DOWN {}: eth0 lost its carrier", c.host(1))),
        "{}",
        o.stdout
    );
    // No other host is blamed for it.
    let (hosts, links) = named(&o);
    assert!(hosts.iter().all(|h| *h == c.host(1)), "{}", o.stdout);
    assert!(
        links.iter().all(|(a, b)| *a == c.host(1) || *b == c.host(1)),
        "{}",
        o.stdout
    );
}

#[test]
fn a_clean_cluster_has_no_finding_in_three_runs() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("d");
    let dir = tempfile::tempdir().unwrap();
    for run in 0..3 {
        let o = pairwise(&c, dir.path(), &format!("clean{run}"), "5");
        check_matrix(&c, &o);
        assert_eq!(named(&o), (vec![], vec![]), "run {run}: {}", o.stdout);
        assert_eq!(o.code, Some(0), "run {run}: {}", o.stdout);
        assert!(o.stdout.contains("# No finding"), "{}", o.stdout);
    }
}

/// Expectations for the shaped cluster: busbw at least half the 400 Mbit/s line rate (`--line-rate 0.4`),
/// loose enough for a loaded two-core machine, tight enough that a host at a quarter of the rate fails.
const EXPECT: &str = "[[expect]]\npath = \"*\"\nmin_busbw = \"50%\"\n";

/// Runs `collbench preflight` over eth0, one rank per host, with [`EXPECT`]; rank 0's outcome.
fn preflight(c: &Cluster, dir: &Path, label: &str) -> Outcome {
    let json = dir.join(format!("{label}.json"));
    let expect = dir.join("expect.toml");
    std::fs::write(&expect, EXPECT).unwrap();
    let args = [
        "preflight",
        "--transport",
        "tcp@eth0",
        "--line-rate",
        "0.4",
        "--bandwidth-bytes",
        "4M",
        "--repeat",
        "2",
        "--no-progress",
        "--expect",
        expect.to_str().unwrap(),
        "-J",
        json.to_str().unwrap(),
    ];
    ranks(c, dir, label, &args, &json)
}

/// (name, verdict) of every check of a preflight.
fn checks(o: &Outcome) -> Vec<(String, String)> {
    o.json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The failed checks' names.
fn failed(o: &Outcome) -> Vec<String> {
    checks(o)
        .into_iter()
        .filter(|(_, v)| v == "fail")
        .map(|(n, _)| n)
        .collect()
}

#[test]
fn preflight_fails_naming_a_host_shaped_to_a_quarter() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("e");
    let dir = tempfile::tempdir().unwrap();
    c.run(&["shape", "2", SLOW]);
    let o = preflight(&c, dir.path(), "pf-slowhost");
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    assert_eq!(o.json["verdict"], "fail", "{}", o.stdout);
    let f = failed(&o);
    assert!(
        f.contains(&format!("tcp@eth0 pairwise: slow host {}", c.host(2))),
        "{f:?}\n{}",
        o.stdout
    );
    assert!(!f.iter().any(|n| n.contains("slow link")), "{f:?}\n{}", o.stdout);
    // The ring through the slow host holds every collective back too.
    assert!(f.iter().any(|n| n.contains("busbw")), "{f:?}\n{}", o.stdout);
    assert!(o.stdout.contains("Preflight verdict: FAIL"), "{}", o.stdout);
}

#[test]
fn preflight_fails_naming_a_slow_pair_as_that_link_and_neither_host() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("f");
    let dir = tempfile::tempdir().unwrap();
    c.run(&["shape-pair", "1", "3", SLOW]);
    c.run(&["shape-pair", "3", "1", SLOW]);
    let o = preflight(&c, dir.path(), "pf-slowlink");
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let f = failed(&o);
    assert!(
        f.contains(&format!("tcp@eth0 pairwise: slow link {} <-> {}", c.host(1), c.host(3))),
        "{f:?}\n{}",
        o.stdout
    );
    assert!(!f.iter().any(|n| n.contains("slow host")), "{f:?}\n{}", o.stdout);
}

#[test]
fn preflight_names_a_host_losing_packets() {
    let Some(_one) = namespace_test() else {
        return;
    };
    if !tool_available("iptables", "iptables") || !tool_available("ethtool", "ethtool") {
        return;
    }
    let c = up("g");
    let dir = tempfile::tempdir().unwrap();
    c.run(&["loss", "2", "0.1"]);
    let o = preflight(&c, dir.path(), "pf-lossy");
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let f = failed(&o);
    assert!(
        f.contains(&format!("tcp@eth0 pairwise: slow host {}", c.host(2))),
        "{f:?}\n{}",
        o.stdout
    );
}

#[test]
fn preflight_passes_a_clean_cluster_five_runs_out_of_five() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("h");
    let dir = tempfile::tempdir().unwrap();
    for run in 0..5 {
        let o = preflight(&c, dir.path(), &format!("pf-clean{run}"));
        assert_eq!(o.code, Some(0), "run {run}: {}", o.stdout);
        // Every check passes. Where every host's CPUs were busy with other work (a loaded machine), a link
        // slower than the rest is the busy-hosts warning, which names nobody and is said as the cores'.
        let busy = "tcp@eth0 pairwise: busy hosts";
        let all_busy = o.json["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["busy_pct"].as_f64().is_some_and(|b| b >= CPU_LIMITED_PCT));
        for (name, verdict) in checks(&o) {
            let excused = all_busy && name == busy && verdict == "warn";
            assert!(
                verdict == "pass" || excused,
                "run {run}: {name} {verdict}\n{}",
                o.stdout
            );
        }
        let names: Vec<String> = checks(&o).into_iter().map(|(n, _)| n).collect();
        // The collectives and the pairwise test were both judged, not skipped.
        assert!(names.iter().any(|n| n.contains("all_reduce busbw")), "{names:?}");
        assert!(
            names.contains(&"tcp@eth0 pairwise links".to_string()) || names.contains(&busy.to_string()),
            "{names:?}"
        );
    }
}

/// Runs a short `collbench run` sweep over eth0 (1..4 MiB all_reduce, interleaved repeats) to `label`.json.
fn sweep(c: &Cluster, dir: &Path, label: &str) -> PathBuf {
    let json = dir.join(format!("{label}.json"));
    let args = [
        "run",
        "--transport",
        "tcp@eth0",
        "--collective",
        "all_reduce",
        "-b",
        "1M",
        "-e",
        "4M",
        "-n",
        "5",
        "--repeat",
        "2",
        "--no-progress",
        "-J",
        json.to_str().unwrap(),
    ];
    let o = ranks(c, dir, label, &args, &json);
    assert_eq!(o.code, Some(0), "{}", o.stdout);
    json
}

/// `collbench compare OLD NEW`: exit status and output.
fn compare(old: &Path, new: &Path) -> (Option<i32>, String) {
    let out = Command::new(assert_cmd::cargo::cargo_bin("collbench"))
        .arg("compare")
        .args([old, new])
        .output()
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn compare_reports_a_shaped_host_against_a_clean_baseline_and_not_two_clean_runs() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("i");
    let dir = tempfile::tempdir().unwrap();
    let clean1 = sweep(&c, dir.path(), "clean1");
    let clean2 = sweep(&c, dir.path(), "clean2");
    let (code, out) = compare(&clean1, &clean2);
    assert_eq!(code, Some(0), "two clean runs: {out}");
    c.run(&["shape", "2", SLOW]);
    let shaped = sweep(&c, dir.path(), "shaped");
    let (code, out) = compare(&clean1, &shaped);
    assert_eq!(code, Some(1), "shaped vs clean: {out}");
    assert!(out.to_lowercase().contains("regress"), "{out}");
}
