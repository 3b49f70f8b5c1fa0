//! `collbench preflight` with its defaults (no expectations file, no `--line-rate`) and a short `--budget` on a
//! cluster of four network-namespace hosts (`tests/netns/cluster.sh`), one rank each, every eth0 shaped to
//! 400 Mbit/s, with one fault at a time. Each test asserts the host or link named, that nothing else is
//! named, the cause given, that every output file was written, and that the preflight kept its budget:
//! - one host's rank under a CPU quota (cgroup v1 cpu controller): that host, cause CPU; the same with the
//!   cgroup mounts gone from the rank's view, as under a plain `ip netns exec`: the quota found through its
//!   launcher's view of the mounts and named; and with nothing to find (its own pid namespace and /proc as
//!   well): named from the starved rank's own wait for a CPU, throttling said to be unknown;
//! - one host dropping 10% of its packets (`cluster.sh loss`): that host, cause loss;
//! - one host dropping what it receives beyond 4 MB/s (`cluster.sh police`): that host, slow to receive,
//!   with one cause across the report;
//! - one host whose link goes down for a second every three (`cluster.sh flap`): that host's carrier losses
//!   fail by name, cause the link, and nothing else is blamed;
//! - one pair shaped to 100 Mbit/s between themselves (`cluster.sh shape-pair`): that link, cause the link;
//! - one host shaped to 100 Mbit/s (`cluster.sh shape`): that host, cause the link;
//! - every host dropping 1% of what it receives (`cluster.sh fabric-loss`): the fabric, cause loss, every host's
//!   evidence, and no single host or link named;
//! - one host with its TCP buffers at 4 KiB (`cluster.sh tcp-buffers`): that host, cause TCP buffers, with every
//!   host's buffer settings and the sockets' buffers as evidence;
//! - one host's switch port at MTU 1400 under the hosts' 1500 (`cluster.sh port-mtu`): that host, cause MTU,
//!   with the largest payload that passed, and the other hosts still measured;
//! - a clean cluster beside a CPU hog: nothing failed (PASS, or a WARN that says the hosts were busy).
//!
//! Every rank sees the cgroup v1 cpu hierarchy as a host would (the namespace's own /sys hides the
//! machine's), so its throttling is measured. These need root; where that is not possible they print why
//! and pass, except in CI (`CI=true`), where that is a failure.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::netns::{cannot_run, namespace_test, spawn, wait_all, Cluster, Done};
use serde_json::Value;

const HOSTS: usize = 4;
const RATE: &str = "400mbit";
const SLOW: &str = "100mbit";
/// The preflight's budget, seconds, and what the launch around it (namespaces, process start, exit) may add.
const BUDGET_S: u64 = 45;
const SLACK_S: f64 = 15.0;
/// Past this the ranks are killed and the test fails: a preflight that does not keep its budget.
const DEADLINE: Duration = Duration::from_secs(120);
const ROOT_PORT: &str = "29600";
/// The cgroup v1 cpu hierarchy, as this machine mounts it.
const CPU_CGROUPS: &str = "/sys/fs/cgroup/cpu";

/// The shell each rank starts in: the cgroup v1 cpu hierarchy mounted where a host has it (the namespace's
/// fresh /sys has none), the rank moved into `$CB_CGROUP` when set, the mounts taken away again when
/// `$CB_HIDE_CGROUPS` is set (as a plain `ip netns exec` leaves a rank), and with `$CB_HIDE_CGROUPS=all` the rank
/// in its own pid namespace with its own /proc too, so no other process's view of the mounts can be reached;
/// then collbench.
const WRAP: &str = "set -e; if ! mountpoint -q /sys/fs/cgroup/cpu; then mount -t tmpfs cgroups /sys/fs/cgroup; \
                    mkdir -p /sys/fs/cgroup/cpu; mount -t cgroup -o cpu cpu /sys/fs/cgroup/cpu; fi; \
                    if [ -n \"$CB_CGROUP\" ]; then echo $$ > /sys/fs/cgroup/cpu/$CB_CGROUP/cgroup.procs; fi; \
                    if [ -n \"$CB_HIDE_CGROUPS\" ]; then umount /sys/fs/cgroup/cpu; umount /sys/fs/cgroup; fi; \
                    if [ \"$CB_HIDE_CGROUPS\" = all ]; then \
                    exec unshare --pid --fork --kill-child --mount-proc \"$@\"; fi; \
                    exec \"$@\"";

/// What a rank can see of its cgroup.
#[derive(Clone, Copy, PartialEq)]
enum Sight {
    /// The cpu hierarchy mounted under /sys/fs/cgroup, as on a host.
    Mounted,
    /// Nothing mounted in its own view (a plain `ip netns exec`); its launcher's view still shows it.
    Unmounted,
    /// Nothing in any view it can reach.
    Nothing,
}

fn up(tag: &str) -> Cluster {
    Cluster::up("cbc", tag, HOSTS, &["--rate", RATE])
}

/// What rank 0 reported, and how long the whole preflight took.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    json: Value,
    elapsed_s: f64,
}

/// A cgroup under the v1 cpu controller limited to `cores` CPUs; removed on drop.
struct Quota(PathBuf);

impl Quota {
    fn new(name: &str, cores: f64) -> Option<Quota> {
        let root = Path::new(CPU_CGROUPS);
        if !root.join("cpu.cfs_quota_us").is_file() {
            cannot_run(&format!(
                "no cgroup v1 cpu controller at {CPU_CGROUPS} (cpu.cfs_quota_us) to put a host's ranks under a quota"
            ));
            return None;
        }
        let dir = root.join(name);
        let _ = std::fs::create_dir(&dir);
        std::fs::write(dir.join("cpu.cfs_period_us"), "100000").unwrap();
        std::fs::write(dir.join("cpu.cfs_quota_us"), format!("{}", (cores * 100_000.0) as u64)).unwrap();
        Some(Quota(dir))
    }

    fn name(&self) -> String {
        self.0.file_name().unwrap().to_string_lossy().into_owned()
    }
}

impl Drop for Quota {
    fn drop(&mut self) {
        // Its processes are gone (the ranks exited or the cluster's teardown killed them); move any stray one
        // out so the folder can go.
        if let Ok(procs) = std::fs::read_to_string(self.0.join("cgroup.procs")) {
            for p in procs.lines() {
                let _ = std::fs::write(Path::new(CPU_CGROUPS).join("cgroup.procs"), p);
            }
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Runs the default preflight over eth0 with `--budget BUDGET_S`, one rank per host, host `quota.0`'s rank in
/// cgroup `quota.1`; checks every rank exited with rank 0's verdict and every output file was written.
fn preflight(c: &Cluster, dir: &Path, label: &str, quota: Option<(usize, &Quota)>) -> Outcome {
    preflight_seeing(c, dir, label, quota, Sight::Mounted)
}

/// [`preflight`], with the ranks seeing of their cgroups what `sight` says (the quota binds in every case).
fn preflight_seeing(c: &Cluster, dir: &Path, label: &str, quota: Option<(usize, &Quota)>, sight: Sight) -> Outcome {
    preflight_with(c, dir, label, quota, sight, "tcp@eth0", &[])
}

/// [`preflight_seeing`] over `path` with `extra` flags.
fn preflight_with(
    c: &Cluster,
    dir: &Path,
    label: &str,
    quota: Option<(usize, &Quota)>,
    sight: Sight,
    path: &str,
    extra: &[&str],
) -> Outcome {
    let json = dir.join(format!("{label}.json"));
    let junit = dir.join(format!("{label}.xml"));
    let md = dir.join(format!("{label}.md"));
    let budget = BUDGET_S.to_string();
    let args = [
        "-c",
        WRAP,
        "sh",
        assert_cmd::cargo::cargo_bin("collbench").to_str().unwrap(),
        "preflight",
        "--transport",
        path,
        "--budget",
        &budget,
        "--no-progress",
        "-J",
        json.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]
    .map(String::from);
    let args: Vec<&str> = args.iter().map(String::as_str).chain(extra.iter().copied()).collect();
    let master = c.addr(0, "eth0");
    let t0 = Instant::now();
    let procs = (0..HOSTS)
        .map(|h| {
            let mut cmd = c.exec_rank(h, &master, ROOT_PORT, Path::new("/bin/sh"), &args);
            match quota {
                Some((q, g)) if q == h => cmd.env("CB_CGROUP", g.name()),
                _ => cmd.env_remove("CB_CGROUP"),
            };
            match sight {
                Sight::Mounted => cmd.env_remove("CB_HIDE_CGROUPS"),
                Sight::Unmounted => cmd.env("CB_HIDE_CGROUPS", "1"),
                Sight::Nothing => cmd.env("CB_HIDE_CGROUPS", "all"),
            };
            spawn(cmd, &format!("{label}{h}"), dir)
        })
        .collect();
    let done = wait_all(procs, DEADLINE);
    let elapsed_s = t0.elapsed().as_secs_f64();
    // For the accuracy table in a test log (--nocapture); no assertion rests on speed but the budget's.
    eprintln!("{label}: preflight took {elapsed_s:.1} s with --budget {BUDGET_S}");
    // Every rank exits with the verdict rank 0 reached.
    for (h, d) in done.iter().enumerate().skip(1) {
        assert_eq!(
            d.status.code(),
            done[0].status.code(),
            "{label}: rank {h}:\n{}",
            logs(&done)
        );
    }
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{label}: no JSON ({e}):\n{}", logs(&done)));
    for f in [&junit, &md] {
        assert!(
            f.is_file(),
            "{label}: {} was not written:\n{}",
            f.display(),
            logs(&done)
        );
    }
    let json: Value = serde_json::from_str(&text).unwrap();
    // A soak runs beyond the budget, by its own length.
    let soak_s: u64 = extra
        .windows(2)
        .find(|w| w[0] == "--soak")
        .and_then(|w| w[1].trim_end_matches('s').parse().ok())
        .unwrap_or(0);
    keep_outcome(c, label, done[0].status.code(), elapsed_s, BUDGET_S + soak_s, &json);
    Outcome {
        code: done[0].status.code(),
        stdout: done[0].stdout.clone(),
        json,
        elapsed_s,
    }
}

/// For the accuracy table (tests/bench/preflight-accuracy.sh): with `COLLBENCH_PREFLIGHT_OUTCOMES=DIR` each
/// preflight's report, exit status, time and the cluster's host names are kept in DIR, one file per run,
/// before any assertion, so a failed run is counted too.
fn keep_outcome(c: &Cluster, label: &str, code: Option<i32>, elapsed_s: f64, budget_s: u64, json: &Value) {
    let Some(dir) = std::env::var_os("COLLBENCH_PREFLIGHT_OUTCOMES") else {
        return;
    };
    let hosts: Vec<String> = (0..HOSTS).map(|h| c.host(h)).collect();
    let kept = serde_json::json!({
        "scenario": label,
        "hosts": hosts,
        "code": code,
        "elapsed_s": elapsed_s,
        "budget_s": budget_s,
        "report": json,
    });
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let path = Path::new(&dir).join(format!("{label}-{stamp}.json"));
    std::fs::write(&path, kept.to_string()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn logs(done: &[Done]) -> String {
    done.iter()
        .enumerate()
        .map(|(h, d)| format!("--- rank {h} stdout:\n{}\n--- rank {h} stderr:\n{}", d.stdout, d.stderr))
        .collect()
}

/// The checks that failed or warned.
fn bad(o: &Outcome) -> Vec<&Value> {
    o.json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"] != "pass")
        .collect()
}

/// The pairwise findings' checks (failed or warned).
fn findings(o: &Outcome) -> Vec<&Value> {
    bad(o)
        .into_iter()
        .filter(|c| c["name"].as_str().unwrap().contains(" pairwise: "))
        .collect()
}

/// Whether `text` names host `h` of `c` (as a whole name: h1 is not h10).
fn names(c: &Cluster, text: &str, h: usize) -> bool {
    let host = c.host(h);
    text.match_indices(&host)
        .any(|(i, _)| !text[i + host.len()..].starts_with(|ch: char| ch.is_ascii_digit()))
}

/// Each `FAIL: ` line of the summary with the lines it wraps onto (indented deeper), joined: the summary fits
/// 100 columns, so one failure may take several lines.
fn failure_lines(stdout: &str) -> Vec<String> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for l in stdout.lines() {
        match out.last_mut() {
            Some((at, text)) if open && indent(l) > *at && !l.trim().is_empty() => {
                text.push(' ');
                text.push_str(l.trim());
                continue;
            }
            _ => open = false,
        }
        if l.trim_start().starts_with("FAIL: ") {
            out.push((indent(l), l.trim().to_string()));
            open = true;
        }
    }
    out.into_iter().map(|(_, t)| t).collect()
}

#[test]
fn failure_lines_are_joined_with_what_they_wrap_onto() {
    let s = "  FAIL: a: 5 stalled\n      vs 3 typical (built in)\n  PASS: b\n  FAIL: c vs d (e)\n";
    assert_eq!(
        failure_lines(s),
        ["FAIL: a: 5 stalled vs 3 typical (built in)", "FAIL: c vs d (e)"]
    );
}

/// Checks the preflight kept its budget.
fn within_budget(o: &Outcome) {
    assert!(
        o.elapsed_s <= BUDGET_S as f64 + SLACK_S,
        "took {:.0} s with --budget {BUDGET_S}:\n{}",
        o.elapsed_s,
        o.stdout
    );
}

/// Checks that exactly one finding failed, `name`, with `cause`, carrying evidence, and that no failed check
/// names a host outside `hosts`.
fn named_only(c: &Cluster, o: &Outcome, name: &str, cause: &str, hosts: &[usize]) {
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    // Blame is a failed finding; a warning that says the hosts were busy blames nothing.
    let f: Vec<&Value> = findings(o).into_iter().filter(|x| x["verdict"] == "fail").collect();
    let got: Vec<&str> = f.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(got, [name], "{}", o.stdout);
    assert_eq!(f[0]["verdict"], "fail", "{}", o.stdout);
    assert_eq!(f[0]["cause"], cause, "{}", f[0]);
    assert!(
        !f[0]["evidence"].as_array().unwrap().is_empty(),
        "a finding without evidence: {}",
        f[0]
    );
    for x in bad(o).into_iter().filter(|x| x["verdict"] == "fail") {
        let text = x.to_string();
        for h in (0..HOSTS).filter(|h| !hosts.contains(h)) {
            let about: String = format!("{} {} {}", x["name"], x["measured"], x["detail"]);
            assert!(!names(c, &about, h), "{} is named: {text}\n{}", c.host(h), o.stdout);
        }
    }
    // Every failure line gives the value, the threshold and where it came from.
    for line in failure_lines(&o.stdout) {
        assert!(line.contains(" vs ") && line.contains(" ("), "{line}");
    }
    within_budget(o);
}

#[test]
fn a_host_under_a_cpu_quota_is_named_with_the_cpu_as_cause() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let Some(q) = Quota::new(&format!("cbq{}", std::process::id()), 0.02) else {
        return;
    };
    let c = up("q");
    let dir = tempfile::tempdir().unwrap();
    let o = preflight(&c, dir.path(), "quota", Some((1, &q)));
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let failed: Vec<&Value> = bad(&o).into_iter().filter(|x| x["verdict"] == "fail").collect();
    for x in &failed {
        let about = format!("{} {} {}", x["name"], x["measured"], x["detail"]);
        for h in [0, 2, 3] {
            assert!(!names(&c, &about, h), "{} is named: {x}\n{}", c.host(h), o.stdout);
        }
    }
    // h1 is blamed on its CPU, with its throttling as evidence: by the pairwise finding where the quota slowed
    // its links, or by the collectives' checks (the quota binds every phase; which one shows it depends on
    // how the budget sized the plan on this machine's load).
    let throttled = |x: &Value| {
        x["evidence"].as_array().is_some_and(|ev| {
            ev.iter()
                .any(|e| e["host"] == c.host(1).as_str() && e["throttled_periods"].as_u64() > Some(0))
        })
    };
    // Where the quota bound too little to slow a measurement, the configuration check (info's warning about
    // that host's quota) is what names it.
    let quota = |x: &Value| format!("{} {}", x["measured"], x["detail"]).contains("CPU quota");
    assert!(
        failed
            .iter()
            .any(|x| names(&c, &x.to_string(), 1) && ((x["cause"] == "cpu" && throttled(x)) || quota(x))),
        "no failed check blames {} on its CPU quota:\n{}",
        c.host(1),
        o.stdout
    );
    // A pairwise finding, when there is one, is that host's, with the CPU as cause.
    for f in findings(&o).into_iter().filter(|x| x["verdict"] == "fail") {
        assert_eq!(
            f["name"],
            format!("tcp@eth0 pairwise: slow host {}", c.host(1)),
            "{}",
            o.stdout
        );
        assert_eq!(f["cause"], "cpu", "{f}");
    }
    for line in failure_lines(&o.stdout) {
        assert!(line.contains(" vs ") && line.contains(" ("), "{line}");
    }
    within_budget(&o);
}

/// The same quota with nothing mounted under the ranks' /sys/fs/cgroup, as a rank started by a plain
/// `ip netns exec` sees it: the rank finds its cgroup through its launcher's view of the mounts, so its quota
/// and throttling are read, and the host is blamed on that quota, named with its size.
#[test]
fn a_host_under_a_cpu_quota_behind_ip_netns_exec_is_named_with_its_quota() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let Some(q) = Quota::new(&format!("cbn{}", std::process::id()), 0.02) else {
        return;
    };
    let c = up("n");
    let dir = tempfile::tempdir().unwrap();
    let o = preflight_seeing(&c, dir.path(), "netns-quota", Some((1, &q)), Sight::Unmounted);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let failed: Vec<&Value> = bad(&o).into_iter().filter(|x| x["verdict"] == "fail").collect();
    for x in &failed {
        let about = format!("{} {} {}", x["name"], x["measured"], x["detail"]);
        for h in [0, 2, 3] {
            assert!(!names(&c, &about, h), "{} is named: {x}\n{}", c.host(h), o.stdout);
        }
    }
    // The quota was found, not guessed from the wait: h1's evidence carries it and its throttling, the other
    // hosts' their (nil) throttling, read the same way.
    let all: Vec<&Value> = o.json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|x| x["evidence"].as_array().into_iter().flatten())
        .collect();
    assert!(!all.is_empty(), "no evidence at all:\n{}", o.stdout);
    let h1 = c.host(1);
    assert!(
        all.iter().any(|e| e["host"] == h1.as_str()
            && e["quota_cores"].as_f64() == Some(0.02)
            && e["throttled_periods"].as_u64() > Some(0)),
        "{h1}'s evidence lacks its quota or throttling:\n{}",
        o.stdout
    );
    assert!(
        all.iter()
            .filter(|e| e["host"] != h1.as_str())
            .all(|e| !e["throttled_s"].is_null()),
        "another host's throttling was not read:\n{}",
        o.stdout
    );
    // A failed check blames h1 and names its quota: the CPU cause ("throttled by their CPU quota of 0.02
    // cores"), or the configuration check's warning about that host's quota.
    assert!(
        failed
            .iter()
            .any(|x| names(&c, &x.to_string(), 1) && x.to_string().contains("CPU quota of 0.02 cores")),
        "no failed check names {h1}'s CPU quota:\n{}",
        o.stdout
    );
    within_budget(&o);
}

/// The same quota where the ranks can reach no view of any cgroup (nothing mounted, their own pid namespace
/// and /proc): the starved rank's own run-queue wait names its host, and throttling is said to be unknown.
#[test]
fn a_host_under_a_cpu_quota_it_cannot_see_is_named_from_its_wait_for_a_cpu() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let Some(q) = Quota::new(&format!("cbh{}", std::process::id()), 0.02) else {
        return;
    };
    let c = up("h");
    let dir = tempfile::tempdir().unwrap();
    let o = preflight_seeing(&c, dir.path(), "hidden-quota", Some((1, &q)), Sight::Nothing);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let failed: Vec<&Value> = bad(&o).into_iter().filter(|x| x["verdict"] == "fail").collect();
    for x in &failed {
        let about = format!("{} {} {}", x["name"], x["measured"], x["detail"]);
        for h in [0, 2, 3] {
            assert!(!names(&c, &about, h), "{} is named: {x}\n{}", c.host(h), o.stdout);
        }
    }
    // Throttling cannot be read anywhere; h1's rank waited for a CPU, and that is the evidence.
    let waited = |x: &Value| {
        x["evidence"].as_array().is_some_and(|ev| {
            ev.iter().any(|e| {
                e["host"] == c.host(1).as_str() && e["throttled_s"].is_null() && e["waited_s"].as_f64() > Some(0.0)
            })
        })
    };
    assert!(
        failed
            .iter()
            .any(|x| names(&c, &x.to_string(), 1) && x["cause"] == "cpu" && waited(x)),
        "no failed check blames {} on its CPU from its wait:\n{}",
        c.host(1),
        o.stdout
    );
    assert!(!o.stdout.contains("no host was throttled"), "{}", o.stdout);
    within_budget(&o);
}

#[test]
fn a_host_dropping_packets_is_named_with_loss_as_cause() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("l");
    let dir = tempfile::tempdir().unwrap();
    c.run(&["loss", "2", "0.1"]);
    let o = preflight(&c, dir.path(), "loss", None);
    named_only(
        &c,
        &o,
        &format!("tcp@eth0 pairwise: slow host {}", c.host(2)),
        "loss",
        &[2],
    );
}

#[test]
fn a_host_whose_link_goes_down_now_and_then_is_named_with_the_link_as_cause() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("f");
    let dir = tempfile::tempdir().unwrap();
    // h2's switch port goes down for a second every three: its eth0 loses its carrier over and over.
    c.run(&["flap", "2", "1", "3"]);
    let o = preflight(&c, dir.path(), "flap", None);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let failed: Vec<&Value> = bad(&o).into_iter().filter(|x| x["verdict"] == "fail").collect();
    let carrier: Vec<&&Value> = failed
        .iter()
        .filter(|x| x["name"].as_str().unwrap().contains(" link of "))
        .collect();
    assert!(!carrier.is_empty(), "no carrier finding:\n{}", o.stdout);
    for x in &carrier {
        assert!(
            x["name"]
                .as_str()
                .unwrap()
                .starts_with(&format!("tcp@eth0 link of {} during ", c.host(2))),
            "{x}\n{}",
            o.stdout
        );
        assert_eq!(x["cause"], "link", "{x}");
        assert!(
            x["measured"].as_str().unwrap().starts_with("eth0 lost its carrier "),
            "{x}"
        );
    }
    // Nothing healthy is blamed: every failure that names a host names h2.
    for x in &failed {
        let about = format!("{} {} {}", x["name"], x["measured"], x["detail"]);
        for h in [0, 1, 3] {
            assert!(!names(&c, &about, h), "{} is named: {x}\n{}", c.host(h), o.stdout);
        }
    }
    within_budget(&o);
}

#[test]
fn a_host_dropping_what_it_receives_is_named_as_slow_to_receive() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("r");
    let dir = tempfile::tempdir().unwrap();
    // An ingress policer on h2: what arrives beyond 4 MB/s is dropped; what it sends is not limited.
    c.run(&["police", "2", "4mb/s"]);
    let o = preflight(&c, dir.path(), "police", None);
    let name = format!("tcp@eth0 pairwise: slow host {}", c.host(2));
    let f: Vec<&Value> = findings(&o).into_iter().filter(|x| x["verdict"] == "fail").collect();
    let mine = f
        .iter()
        .find(|x| x["name"] == name.as_str())
        .unwrap_or_else(|| panic!("{name} not failed:\n{}", o.stdout));
    let detail = mine["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("{} is slow to receive", c.host(2))),
        "{detail}"
    );
    // Loss on its way in, or the way in itself: never a neighbour's retransmissions.
    assert!(["loss", "link"].contains(&mine["cause"].as_str().unwrap()), "{mine}");
    named_only(&c, &o, &name, mine["cause"].as_str().unwrap(), &[2]);
    // One cause for one fault: every failed check that gives a cause gives the finding's.
    for x in bad(&o)
        .into_iter()
        .filter(|x| x["verdict"] == "fail" && !x["cause"].is_null())
    {
        assert_eq!(x["cause"], mine["cause"], "{x}\n{}", o.stdout);
    }
}

#[test]
fn a_pair_shaped_is_named_as_that_link_with_the_link_as_cause() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("p");
    let dir = tempfile::tempdir().unwrap();
    c.run(&["shape-pair", "1", "3", SLOW]);
    c.run(&["shape-pair", "3", "1", SLOW]);
    let o = preflight(&c, dir.path(), "pair", None);
    named_only(
        &c,
        &o,
        &format!("tcp@eth0 pairwise: slow link {} <-> {}", c.host(1), c.host(3)),
        "link",
        &[1, 3],
    );
}

#[test]
fn a_host_shaped_is_named_with_the_link_as_cause() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("s");
    let dir = tempfile::tempdir().unwrap();
    c.run(&["shape", "2", SLOW]);
    let o = preflight(&c, dir.path(), "host", None);
    named_only(
        &c,
        &o,
        &format!("tcp@eth0 pairwise: slow host {}", c.host(2)),
        "link",
        &[2],
    );
    // Without an expectations file the collectives are judged too, against the cluster's own links.
    let checks = o.json["checks"].as_array().unwrap();
    let busbw: Vec<&Value> = checks
        .iter()
        .filter(|x| x["name"].as_str().unwrap().ends_with("busbw"))
        .collect();
    assert!(!busbw.is_empty(), "{}", o.stdout);
    assert!(
        busbw.iter().all(|x| x["source"]
            .as_str()
            .unwrap()
            .contains("median of the cluster's own links")),
        "{busbw:?}"
    );
}

/// Two faults at once: h2 shaped, and h1's rank under a CPU quota it cannot see (behind `ip netns exec`, no
/// cgroup mounted). Each is named with its own cause, neither hides the other, and no healthy host is named.
#[test]
fn two_faults_at_once_are_each_named_with_their_own_cause() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let Some(q) = Quota::new(&format!("cbt{}", std::process::id()), 0.02) else {
        return;
    };
    let c = up("t");
    let dir = tempfile::tempdir().unwrap();
    c.run(&["shape", "2", SLOW]);
    let o = preflight_seeing(&c, dir.path(), "two", Some((1, &q)), Sight::Unmounted);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let failed: Vec<&Value> = bad(&o).into_iter().filter(|x| x["verdict"] == "fail").collect();
    for x in &failed {
        let about = format!("{} {} {}", x["name"], x["measured"], x["detail"]);
        for h in [0, 3] {
            assert!(!names(&c, &about, h), "{} is named: {x}\n{}", c.host(h), o.stdout);
        }
    }
    // A failed check naming only `h` (by its name or its evidence), with `cause`.
    let blames = |h: usize, cause: &str| {
        failed.iter().any(|x| {
            // A configuration warning is numbered: the host is in what it measured.
            let name = format!(
                "{} {}",
                x["name"].as_str().unwrap(),
                x["measured"].as_str().unwrap_or_default()
            );
            let only = names(&c, &name, h) && !names(&c, &name, 3 - h);
            only && x["cause"] == cause
        })
    };
    assert!(
        blames(2, "link"),
        "the shaped {} is not blamed on its link:\n{}",
        c.host(2),
        o.stdout
    );
    assert!(
        blames(1, "cpu"),
        "the starved {} is not blamed on its CPU:\n{}",
        c.host(1),
        o.stdout
    );
    // Throttling was read where it is visible; nowhere does the report claim no host was throttled.
    assert!(!o.stdout.contains("no host was throttled"), "{}", o.stdout);
    within_budget(&o);
}

/// A switch port that is slow now and then, its carrier up (20 Mbit/s for 3 s in every 6 s toward h2): the
/// plan's phases may fall between its spells; `--soak` passes again and again and names h2 as intermittent,
/// cause the link, and no healthy host.
#[test]
fn a_port_slow_now_and_then_is_named_by_the_soak() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("k");
    let dir = tempfile::tempdir().unwrap();
    c.run(&["blink", "2", "20mbit", "3", "6"]);
    let soak_s = 30;
    let soak = format!("{soak_s}s");
    let o = preflight_with(
        &c,
        dir.path(),
        "soak",
        None,
        Sight::Mounted,
        "tcp@eth0",
        &["--soak", &soak],
    );
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let failed: Vec<&Value> = bad(&o).into_iter().filter(|x| x["verdict"] == "fail").collect();
    // h2 itself, or one of its links: the blink is periodic, and when the passes keep its phase (a loaded
    // machine paces them evenly) every slow spell falls on the same round, so the evidence shows one link of
    // h2 bad now and then and its others never; naming that link is what the evidence supports.
    let host = format!("tcp@eth0 soak: intermittent host {}", c.host(2));
    let h2_link = |n: &str| n.starts_with("tcp@eth0 soak: intermittent link ") && names(&c, n, 2);
    let s = failed
        .iter()
        .find(|x| x["name"] == host.as_str() || h2_link(x["name"].as_str().unwrap()))
        .unwrap_or_else(|| panic!("no {host} nor a link of it:\n{}", o.stdout));
    assert_eq!(s["cause"], "link", "{s}");
    let why = if s["name"] == host.as_str() {
        "carrier held"
    } else {
        "comes and goes"
    };
    assert!(s["detail"].as_str().unwrap().contains(why), "{s}");
    // Nothing healthy is blamed: every failure names h2, or none of the other hosts. A link of h2 is h2's
    // port too: the plan's pairwise test may catch one slow spell on the one round h2 spent with one partner.
    let h2_pair = |n: &str| n.starts_with("tcp@eth0 pairwise: slow link ") && names(&c, n, 2);
    for x in &failed {
        let about = format!("{} {} {}", x["name"], x["measured"], x["detail"]);
        let name = x["name"].as_str().unwrap();
        if h2_link(name) || h2_pair(name) {
            continue;
        }
        for h in [0, 1, 3] {
            assert!(!names(&c, &about, h), "{} is named: {x}\n{}", c.host(h), o.stdout);
        }
    }
    assert!(
        o.elapsed_s <= (BUDGET_S + soak_s) as f64 + SLACK_S,
        "took {:.0} s with --budget {BUDGET_S} and --soak {soak}:\n{}",
        o.elapsed_s,
        o.stdout
    );
}

/// An overlay that no longer fits its underlay on one host: h2's eth0 lowered to MTU 1400 under its VXLAN at
/// 1450 (the overlay's own traffic to h2 would be black-holed, so the check runs over the underlay). preflight
/// names h2 and says why, the overlay's MTU plus its 50-byte header over the underlay's, cause configuration,
/// not merely that an MTU differs between hosts; nothing healthy is named.
#[test]
fn an_overlay_that_no_longer_fits_its_underlay_is_named_with_the_reason() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("o");
    let dir = tempfile::tempdir().unwrap();
    let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
        .expect("iproute2's ip");
    let st = c.exec(2, ip, &["link", "set", "eth0", "mtu", "1400"]).status().unwrap();
    assert!(st.success());
    let o = preflight(&c, dir.path(), "overlay-mtu", None);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let failed: Vec<&Value> = bad(&o).into_iter().filter(|x| x["verdict"] == "fail").collect();
    let why = failed
        .iter()
        .find(|x| {
            let about = format!("{} {}", x["measured"], x["detail"]);
            names(&c, &about, 2)
                && about.contains("vxlan0")
                && about.contains("MTU 1450")
                && about.contains("fragmented or dropped")
        })
        .unwrap_or_else(|| panic!("no failed check says h2's overlay no longer fits:\n{}", o.stdout));
    assert_eq!(why["cause"], "configuration", "{why}");
    for x in &failed {
        let about = format!("{} {} {}", x["name"], x["measured"], x["detail"]);
        for h in [0, 1, 3] {
            assert!(!names(&c, &about, h), "{} is named: {x}\n{}", c.host(h), o.stdout);
        }
    }
    within_budget(&o);
}

/// Loss on the whole fabric: every host drops 1% of what it receives. One failed check says it is the fabric's,
/// cause loss, with every host's evidence; no failed check names a single host (nor any link: a link names two).
#[test]
fn loss_on_the_whole_fabric_is_said_as_the_fabric_naming_no_single_host() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("w");
    let dir = tempfile::tempdir().unwrap();
    c.run(&["fabric-loss", "0.01"]);
    let o = preflight(&c, dir.path(), "fabric", None);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let failed: Vec<&Value> = bad(&o).into_iter().filter(|x| x["verdict"] == "fail").collect();
    let fabric = failed
        .iter()
        .find(|x| x["name"] == "tcp@eth0 fabric: loss on every host")
        .unwrap_or_else(|| panic!("the fabric's loss is not said:\n{}", o.stdout));
    assert_eq!(fabric["cause"], "loss", "{fabric}");
    let ev = fabric["evidence"].as_array().unwrap();
    assert_eq!(ev.len(), HOSTS, "{fabric}");
    for e in ev {
        assert!(e["tcp"]["retrans_segs"].as_u64() > Some(0), "{e}");
    }
    for x in &failed {
        let about = format!("{} {} {}", x["name"], x["measured"], x["detail"]);
        let named: Vec<usize> = (0..HOSTS).filter(|&h| names(&c, &about, h)).collect();
        assert!(named.is_empty(), "{named:?} named: {x}\n{}", o.stdout);
    }
    assert!(
        findings(&o).iter().all(|f| f["verdict"] != "fail"),
        "a single host or link failed:\n{}",
        o.stdout
    );
    within_budget(&o);
}

/// One host's TCP buffers at 4 KiB (its tcp_rmem and tcp_wmem): that host, cause TCP buffers, not its switch
/// port; every host's buffer settings and what its sockets got are in the evidence.
#[test]
fn a_host_with_small_tcp_buffers_is_named_with_tcp_buffers_as_cause() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("b");
    let dir = tempfile::tempdir().unwrap();
    c.run(&["tcp-buffers", "2", "4096"]);
    let o = preflight(&c, dir.path(), "buffers", None);
    let name = format!("tcp@eth0 pairwise: slow host {}", c.host(2));
    named_only(&c, &o, &name, "tcp_buffers", &[2]);
    let f = findings(&o).into_iter().find(|x| x["name"] == name.as_str()).unwrap();
    assert!(
        f["detail"]
            .as_str()
            .unwrap()
            .contains("tcp_rmem 4096 4096 4096 (others "),
        "{f}"
    );
    // Every host's evidence: the collectives' (the report's own), and the checks'.
    let all: Vec<&Value> = o.json["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(
            o.json["checks"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|x| x["evidence"].as_array().into_iter().flatten()),
        )
        .filter(|e| e["config"]["iface"] == "eth0")
        .collect();
    for h in 0..HOSTS {
        let e = all
            .iter()
            .find(|e| e["host"] == c.host(h).as_str())
            .unwrap_or_else(|| panic!("no evidence of {}:\n{}", c.host(h), o.stdout));
        let t = &e["config"]["tuning"];
        for k in [
            "tcp_rmem",
            "tcp_wmem",
            "rmem_max",
            "wmem_max",
            "window_scaling",
            "rcvbuf",
            "sndbuf",
        ] {
            assert!(!t[k].is_null(), "{}'s {k} not collected: {e}", c.host(h));
        }
        assert_eq!(t["tcp_rmem"] == "4096 4096 4096", h == 2, "{e}");
    }
}

/// One host's switch port at MTU 1400 under the hosts' 1500, offloads off (`cluster.sh port-mtu`): frames over
/// 1400 bytes to or from h2 vanish, so TCP stalls on its first full-sized segment. The preflight's path MTU
/// check names h2 (not a link, not a partner) with cause MTU and the largest payload that passed (1372 B, a
/// 1400-byte frame), then goes on measuring the other three hosts, each with measured evidence, and ends
/// within its budget; every rank exits with the failing verdict.
#[test]
fn a_host_behind_a_port_with_a_smaller_mtu_is_named_with_mtu_as_cause_and_the_rest_measured() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("m");
    c.run(&["port-mtu", "2", "1400"]);
    let dir = tempfile::tempdir().unwrap();
    let o = preflight(&c, dir.path(), "port-mtu", None);
    assert_eq!(o.code, Some(1), "{}", o.stdout);
    let failed: Vec<&Value> = bad(&o).into_iter().filter(|x| x["verdict"] == "fail").collect();
    let got: Vec<&str> = failed.iter().map(|x| x["name"].as_str().unwrap()).collect();
    assert_eq!(got, [format!("tcp@eth0 mtu: host {}", c.host(2))], "{}", o.stdout);
    let f = failed[0];
    assert_eq!(f["cause"], "mtu", "{f}");
    assert!(
        f["measured"].as_str().unwrap().contains("1372 B") && f["threshold"].as_str().unwrap().contains("1472 B"),
        "{f}"
    );
    for h in [0, 1, 3] {
        let about = format!("{} {}", f["name"], f["measured"]);
        assert!(!names(&c, &about, h), "{} is named: {f}", c.host(h));
    }
    // The other hosts were measured: the pairwise test's links between them (on hosts whose CPUs are busy
    // with other work, a link slower than the rest is the busy-hosts warning, which names nobody), and their
    // evidence.
    let checks = o.json["checks"].as_array().unwrap();
    let links = checks.iter().find(|x| x["name"] == "tcp@eth0 pairwise links");
    let busy = checks.iter().find(|x| x["name"] == "tcp@eth0 pairwise: busy hosts");
    match (links, busy) {
        (Some(links), None) => assert!(links["measured"].as_str().unwrap().starts_with("3 links"), "{links}"),
        (None, Some(busy)) => assert_eq!((&busy["verdict"], &busy["cause"]), (&"warn".into(), &"cpu".into())),
        _ => panic!("the other hosts were not measured:\n{}", o.stdout),
    }
    assert!(
        o.stdout.contains("pairwise: 3 hosts over tcp@eth0"),
        "the pairwise test was not over the 3 other hosts:\n{}",
        o.stdout
    );
    let seen = o.json["evidence"].as_array().unwrap();
    for h in [0, 1, 3] {
        let e = seen
            .iter()
            .find(|e| e["host"] == c.host(h).as_str())
            .unwrap_or_else(|| panic!("no evidence of {}:\n{}", c.host(h), o.stdout));
        assert!(e["tcp"]["out_segs"].as_u64() > Some(0), "{e}");
    }
    assert!(!seen.iter().any(|e| e["host"] == c.host(2).as_str()), "{seen:?}");
    for line in failure_lines(&o.stdout) {
        assert!(line.contains(" vs ") && line.contains(" ("), "{line}");
    }
    within_budget(&o);
}

/// Busy loops beside the cluster, stopped on drop.
struct Hog(Vec<Child>);

impl Drop for Hog {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn a_clean_cluster_beside_a_cpu_hog_names_nothing() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let c = up("c");
    let dir = tempfile::tempdir().unwrap();
    // One busy loop per core: the hosts' CPUs are as busy as a shared machine's.
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let _hog = Hog((0..cores)
        .map(|_| {
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect());
    for run in 0..2 {
        let o = preflight(&c, dir.path(), &format!("hog{run}"), None);
        // A slow round trip on hosts this busy may be named only as a warning that says so.
        for f in findings(&o) {
            assert_eq!(f["verdict"], "warn", "run {run}: {f}\n{}", o.stdout);
            assert!(f["detail"].as_str().unwrap().contains("busy"), "run {run}: {f}");
        }
        let failed: Vec<&Value> = bad(&o).into_iter().filter(|x| x["verdict"] == "fail").collect();
        assert!(failed.is_empty(), "run {run}: {failed:?}\n{}", o.stdout);
        assert_eq!(o.code, Some(0), "run {run}: {}", o.stdout);
        within_budget(&o);
    }
}
