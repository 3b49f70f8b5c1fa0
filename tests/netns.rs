//! Multi-host runs for real on one machine: hosts are network namespaces on a software switch, with a
//! VXLAN overlay on top, built by `tests/netns/cluster.sh` (see `tests/netns/README.md`).
//!
//! - mpirun (OpenMPI) starts one rank per host; collbench's TCP path (and, in a build with the `mpi`
//!   feature, MPI's own collectives) runs over the hosts' `eth0`;
//! - ranks started in each host by hand with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (no MPI);
//! - the same over the VXLAN overlay (`--iface 'vx*|eth0'`).
//!
//! Every run must report `#wrong` 0 and exit 0, and the hosts' interface byte counters must have grown by
//! at least what the sweep has to move (see [`LowerBound`]). No timing is asserted.
//!
//! These tests need root (network namespaces) and, for the first, OpenMPI's mpirun. Where that is not
//! possible they print why and pass, except in CI (`CI=true`), where that is a failure.

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::netns::{cannot_run, clean_env, harness, namespace_test, spawn, text, wait_all, Cluster, Done, Proc};

/// Hosts of every cluster (one rank each).
const HOSTS: usize = 4;
/// How long any one run may take before it is killed and the test fails (a sweep takes seconds).
const RUN_DEADLINE: Duration = Duration::from_secs(240);
/// The sweep each test runs; small, so a run takes seconds on two cores.
const SWEEP: [&str; 4] = ["--collective", "all_reduce,all_gather", "-e", "4M"];
/// The rendezvous port (each cluster is its own set of namespaces, so no port can collide).
const ROOT_PORT: &str = "29500";
/// Names of this file's clusters start with it (and the test process's pid).
const PREFIX: &str = "cbt";

/// A cluster of [`HOSTS`] hosts for one test, `tag` unique to it, with more `cluster.sh up` flags.
fn up(tag: &str, flags: &[&str]) -> Cluster {
    Cluster::up(PREFIX, tag, HOSTS, flags)
}

/// Whether OpenMPI's mpirun is here (see [`cannot_run`]).
fn mpirun_available() -> bool {
    let ok = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success() && text(&o.stdout).contains("Open MPI"));
    if !ok {
        cannot_run("OpenMPI's mpirun is not installed (Debian: apt-get install openmpi-bin)");
    }
    ok
}

/// One table of collbench's output: `# all_reduce on tcp@eth0, 4 ranks` and its rows.
struct Table {
    collective: String,
    path: String,
    nranks: usize,
    rows: Vec<Vec<String>>,
}

fn tables(stdout: &str) -> Vec<Table> {
    let mut out: Vec<Table> = Vec::new();
    for l in stdout.lines() {
        if let Some(title) = l.strip_prefix("# ").and_then(|r| r.strip_suffix(" ranks")) {
            if let Some((coll, rest)) = title.split_once(" on ") {
                if let Some((path, n)) = rest.split_once(", ") {
                    out.push(Table {
                        collective: coll.to_string(),
                        path: path.to_string(),
                        nranks: n.parse().expect("rank count in a table title"),
                        rows: Vec::new(),
                    });
                    continue;
                }
            }
        }
        if !l.starts_with('#') && !l.trim().is_empty() {
            let row: Vec<String> = l.split_whitespace().map(str::to_string).collect();
            out.last_mut()
                .unwrap_or_else(|| panic!("a row before any table title: {l}\n{stdout}"))
                .rows
                .push(row);
        }
    }
    out
}

/// The timed iterations per point, from the header (`... warmup iters: 5 iters: 20 validation: 1`).
fn timed_iters(stdout: &str) -> u64 {
    stdout
        .lines()
        .filter(|l| l.starts_with("# nRanks"))
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            // "iters:" that is not "warmup iters:".
            let i = (1..w.len()).find(|&i| w[i] == "iters:" && w[i - 1] != "warmup")?;
            w.get(i + 1)?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no 'iters: N' in the header:\n{stdout}"))
}

/// (host, interface, data address) of each rank, from the header lines
/// `#  Rank  0 Pid   4074 on      t1-h0 iface eth0 addr 10.213.1.10:42061`.
fn ranks(stdout: &str) -> Vec<(String, String, String)> {
    stdout
        .lines()
        .filter(|l| l.starts_with("#  Rank"))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let after = |key: &str| {
                let i = w
                    .iter()
                    .position(|x| *x == key)
                    .unwrap_or_else(|| panic!("no '{key}' in {l}"));
                w[i + 1].to_string()
            };
            let addr = after("addr");
            let ip = addr.rsplit_once(':').map_or(addr.clone(), |(ip, _)| ip.to_string());
            (after("on"), after("iface"), ip)
        })
        .collect()
}

/// What every host's interface must at least have sent and received during a run, in bytes.
///
/// Per iteration of one point of size S (the table's `size` column) over n ranks, assuming only that
/// payload is not compressed (every element travels as at least its own bytes):
/// - all_reduce: every rank's output depends on every element of every other rank's input, so each rank
///   must receive at least one element-sized value per element (>= S bytes) and must send at least one
///   value carrying its own contribution per element (>= S bytes), whatever the algorithm (a ring moves
///   2(n-1)/n x S each way, recursive doubling log2(n) x S, a tree S..2S).
/// - all_gather: S is the whole output; each rank must receive the n-1 blocks it does not hold
///   (>= (n-1)/n x S) and send its own block at least once (>= S/n).
///
/// Only the timed iterations (-n) of the placements that report a time count; warm-up and check
/// iterations, the rendezvous, the connection set-up, TCP/IP and Ethernet headers (and VXLAN
/// encapsulation on eth0) all add to the counters, never subtract, so the bound holds with a margin
/// (measured: about 2x).
#[derive(Debug, Default, Clone, Copy)]
struct LowerBound {
    tx: u64,
    rx: u64,
}

fn lower_bound(tables: &[Table], iters: u64) -> LowerBound {
    let mut b = LowerBound::default();
    for t in tables {
        let n = t.nranks as u64;
        for r in &t.rows {
            let size: u64 = r[0].parse().unwrap_or_else(|_| panic!("size column of {r:?}"));
            // Out-of-place and in-place times are columns 5 and 9; a placement that did not run has none.
            let placements = [5, 9].iter().filter(|&&i| r[i].parse::<f64>().is_ok()).count() as u64;
            let (tx, rx) = match t.collective.as_str() {
                "all_reduce" => (size, size),
                "all_gather" => (size / n, size / n * (n - 1)),
                other => panic!("no traffic bound for {other}"),
            };
            b.tx += tx * iters * placements;
            b.rx += rx * iters * placements;
        }
    }
    b
}

/// Checks one finished run: exit 0, every table of `paths` present for both collectives, 14 columns and
/// `#wrong` 0 everywhere. Returns the tables.
fn check_run(d: &Done, paths: &[&str]) -> Vec<Table> {
    let (stdout, stderr) = (&d.stdout, &d.stderr);
    assert_eq!(
        d.status.code(),
        Some(0),
        "collbench failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let ts = tables(stdout);
    let mut want: Vec<(String, String)> = Vec::new();
    for p in paths {
        for c in ["all_reduce", "all_gather"] {
            want.push((c.to_string(), p.to_string()));
        }
    }
    let mut have: Vec<(String, String)> = ts.iter().map(|t| (t.collective.clone(), t.path.clone())).collect();
    have.sort();
    want.sort();
    assert_eq!(have, want, "tables (collective, path):\n{stdout}");
    for t in &ts {
        assert_eq!(t.nranks, HOSTS, "{} on {}", t.collective, t.path);
        // 8 B .. 4 MiB by factors of 2.
        assert_eq!(t.rows.len(), 20, "{} on {}:\n{stdout}", t.collective, t.path);
        for r in &t.rows {
            assert_eq!(r.len(), 14, "row of {} on {}: {r:?}", t.collective, t.path);
            assert_eq!(
                (r[8].as_str(), r[12].as_str()),
                ("0", "0"),
                "#wrong of {} on {}: {r:?}\n{stdout}",
                t.collective,
                t.path
            );
        }
    }
    ts
}

/// Asserts that every host's counters grew by at least `b`; prints the growth.
fn check_growth(label: &str, before: &[(u64, u64)], after: &[(u64, u64)], b: LowerBound) -> Vec<(u64, u64)> {
    let grown: Vec<(u64, u64)> = before.iter().zip(after).map(|(x, y)| (y.0 - x.0, y.1 - x.1)).collect();
    eprintln!(
        "{label}: per host (rx, tx) grew by {grown:?}; lower bound rx {} tx {}",
        b.rx, b.tx
    );
    for (h, (rx, tx)) in grown.iter().enumerate() {
        assert!(
            *tx >= b.tx && *rx >= b.rx,
            "{label}: host {h} moved rx {rx} tx {tx} bytes, less than the sweep must move (rx {} tx {}); \
             did the data go another way?",
            b.rx,
            b.tx
        );
    }
    grown
}

/// The hosts and data addresses in the header are the cluster's own, one rank per host, on `iface`.
fn check_ranks(stdout: &str, cluster: &Cluster, iface: &str) {
    let rs = ranks(stdout);
    assert_eq!(rs.len(), HOSTS, "rank lines:\n{stdout}");
    let hosts: BTreeSet<&str> = rs.iter().map(|r| r.0.as_str()).collect();
    let want: BTreeSet<String> = (0..HOSTS).map(|h| cluster.host(h)).collect();
    assert_eq!(
        hosts,
        want.iter().map(String::as_str).collect(),
        "each rank on its own host:\n{stdout}"
    );
    for (host, ifc, ip) in &rs {
        let h: usize = host.rsplit_once("-h").unwrap().1.parse().unwrap();
        assert_eq!(
            (ifc.as_str(), ip.as_str()),
            (iface, cluster.addr(h, iface).as_str()),
            "{host}"
        );
    }
}

/// [`check_run`] and [`check_ranks`] of rank 0's output `d` over `iface`; what its tables must have moved.
fn check_sweep(d: &Done, cluster: &Cluster, iface: &str, paths: &[&str]) -> LowerBound {
    let ts = check_run(d, paths);
    check_ranks(&d.stdout, cluster, iface);
    lower_bound(&ts, timed_iters(&d.stdout))
}

fn collbench() -> PathBuf {
    assert_cmd::cargo::cargo_bin("collbench")
}

/// Whether the binary under test can run the mpi path. Asked of the binary itself, not of this test's
/// features: target/release/collbench is whichever build linked it last, and a build with other features
/// in the same target folder replaces it. In CI (nothing else builds there) the two must agree.
fn binary_has_mpi() -> bool {
    let bin = collbench();
    let help = Command::new(&bin)
        .args(["run", "--help"])
        .output()
        .expect("collbench runs");
    let has = text(&help.stdout).contains("--transport") && {
        // Outside a launcher this stops at option checking either way; only a build without MPI says so.
        let mut probe = Command::new(&bin);
        clean_env(&mut probe).args(["run", "--transport", "tcp,mpi", "-e", "8"]);
        let out = probe.output().expect("collbench runs");
        !text(&out.stderr).contains("without MPI")
    };
    if has != cfg!(feature = "mpi") {
        let msg = format!(
            "{} {} MPI but this test was built {} the mpi feature: another build with other features replaced it",
            bin.display(),
            if has { "has" } else { "has no" },
            if cfg!(feature = "mpi") { "with" } else { "without" }
        );
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{msg}");
        }
        let _ = writeln!(std::io::stderr(), "note: {msg}; testing what the binary can do");
    }
    has
}

/// mpirun started in the first host, reaching the others through cluster.sh's rsh agent.
fn mpirun(cluster: &Cluster, env: &[(&str, String)], args: &[&str]) -> Command {
    let hostfile = cluster.run(&["hostfile"]).trim().to_string();
    let agent = cluster.run(&["rsh-agent"]).trim().to_string();
    let cidr = cluster.cidr("eth0");
    let mut a: Vec<String> = [
        "--allow-run-as-root",
        "--oversubscribe",
        // Every "host" sees the same 2 cores; binding would pin all ranks to core 0.
        "--bind-to",
        "none",
        "-np",
        &HOSTS.to_string(),
        "--hostfile",
        &hostfile,
        "--mca",
        "plm_rsh_agent",
        &agent,
        "--mca",
        "btl",
        "tcp,self",
        "--mca",
        "btl_tcp_if_include",
        &cidr,
        "--mca",
        "oob_tcp_if_include",
        &cidr,
        "--mca",
        "pml",
        "ob1",
        "--mca",
        "mpi_yield_when_idle",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (k, v) in env {
        a.push("-x".into());
        a.push(format!("{k}={v}"));
    }
    a.push(collbench().display().to_string());
    a.push("run".into());
    a.extend(args.iter().map(|s| s.to_string()));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    cluster.exec(0, Path::new("mpirun"), &a)
}

/// Runs one mpirun job and checks its tables, its ranks and the growth of the hosts' eth0 counters.
fn mpirun_sweep(cluster: &Cluster, dir: &Path, label: &str, env: &[(&str, String)], extra: &[&str], paths: &[&str]) {
    let mut args: Vec<&str> = SWEEP.to_vec();
    args.extend(["--iface", "eth0"]);
    args.extend(extra);
    let before = cluster.counters("eth0");
    let done = wait_all(vec![spawn(mpirun(cluster, env, &args), label, dir)], RUN_DEADLINE);
    let after = cluster.counters("eth0");
    let d = &done[0];
    check_growth(label, &before, &after, check_sweep(d, cluster, "eth0", paths));
}

#[test]
fn mpirun_one_rank_per_namespace_host() {
    let Some(_one) = namespace_test() else {
        return;
    };
    if !mpirun_available() {
        return;
    }
    let cluster = up("m", &[]);
    let dir = tempfile::tempdir().unwrap();
    let root = format!("{}:{ROOT_PORT}", cluster.addr(0, "eth0"));
    let env = [("COLLBENCH_ROOT", root)];
    if binary_has_mpi() {
        mpirun_sweep(
            &cluster,
            dir.path(),
            "mpirun tcp",
            &env,
            &["--transport", "tcp"],
            &["tcp@eth0"],
        );
        mpirun_sweep(
            &cluster,
            dir.path(),
            "mpirun tcp,mpi",
            &env,
            &["--transport", "tcp,mpi"],
            &["tcp@eth0", "mpi"],
        );
        // No rendezvous address: the endpoints are exchanged through MPI, --iface picks the data path.
        mpirun_sweep(
            &cluster,
            dir.path(),
            "mpirun tcp,mpi (MPI bootstrap)",
            &[],
            &["--transport", "tcp,mpi"],
            &["tcp@eth0", "mpi"],
        );
    } else {
        let _ = writeln!(
            std::io::stderr(),
            "note: {} has no MPI: only the tcp path (cargo test --features mpi adds mpi)",
            collbench().display()
        );
        mpirun_sweep(&cluster, dir.path(), "mpirun tcp", &env, &[], &["tcp@eth0"]);
    }
}

#[test]
fn underlay_and_overlay_measured_in_one_run() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let cluster = up("m", &[]);
    let dir = tempfile::tempdir().unwrap();
    let (eth_before, vx_before) = (cluster.counters("eth0"), cluster.counters("vxlan0"));
    // Both paths in one invocation: the same ranks sweep tcp@eth0, then tcp@vxlan0.
    let mut args: Vec<&str> = SWEEP.to_vec();
    args.extend(["--transport", "tcp@eth0,tcp@vxlan0", "--reference", "tcp@eth0"]);
    let done = env_ranks(&cluster, dir.path(), &cluster.addr(0, "eth0"), &args);
    let (eth_after, vx_after) = (cluster.counters("eth0"), cluster.counters("vxlan0"));
    let d = &done[0];
    let ts = check_run(d, &["tcp@eth0", "tcp@vxlan0"]);
    // Every rank lists an endpoint on each path, on its own host's interfaces.
    check_ranks(&d.stdout, &cluster, "eth0");
    for h in 0..HOSTS {
        let want = format!("+ iface vxlan0 addr {}:", cluster.addr(h, "vxlan0"));
        assert!(d.stdout.contains(&want), "no {want} in the header:\n{}", d.stdout);
    }
    // The paths side by side, against the underlay as the reference.
    let cmp: Vec<&str> = d.stdout.lines().skip_while(|l| !l.contains("Paths compared")).collect();
    for path in ["tcp@eth0", "tcp@vxlan0"] {
        assert!(
            cmp.iter().any(|l| l.contains(path) && l.contains("all_reduce")),
            "{path} not compared:\n{}",
            d.stdout
        );
    }
    assert!(cmp.iter().any(|l| l.contains("vs ref")), "{}", d.stdout);
    let iters = timed_iters(&d.stdout);
    let overlay: Vec<Table> = ts.into_iter().filter(|t| t.path == "tcp@vxlan0").collect();
    let b = lower_bound(&overlay, iters);
    let vx = check_growth("one run, vxlan0", &vx_before, &vx_after, b);
    // eth0 carries its own path and the encapsulated overlay: the same sweep twice, so well over vxlan0 alone.
    let eth = check_growth("one run, eth0", &eth_before, &eth_after, b);
    for (h, (v, e)) in vx.iter().zip(&eth).enumerate() {
        assert!(
            e.1 > v.1 + v.1 / 2 && e.0 > v.0 + v.0 / 2,
            "host {h}: eth0 grew {e:?}, vxlan0 {v:?}"
        );
    }
}

/// The shaped rate of [`shaped_links_bound_both_paths_and_the_overlay_is_compared_with_intervals`], GB/s.
const SHAPED_GBS: f64 = 0.125;

#[test]
fn shaped_links_bound_both_paths_and_the_overlay_is_compared_with_intervals() {
    let Some(_one) = namespace_test() else {
        return;
    };
    // Every host's eth0 egress shaped to 1 Gbit/s; the overlay rides on it, so both paths are bounded by it.
    let cluster = up("s", &["--rate", "1gbit"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("shaped.json");
    let json_arg = json.to_str().unwrap();
    let args = [
        "--collective",
        "all_reduce,all_gather",
        "-b",
        "1M",
        "-e",
        "4M",
        "-n",
        "3",
        "-w",
        "1",
        "--repeat",
        "2",
        "--transport",
        "tcp@eth0,tcp@vxlan0",
        "--reference",
        "tcp@eth0",
        "--line-rate",
        "1",
        "-J",
        json_arg,
    ];
    let done = env_ranks(&cluster, dir.path(), &cluster.addr(0, "eth0"), &args);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("rank 0 wrote the JSON")).unwrap();
    let results = v["results"].as_array().unwrap();
    // Both paths, both collectives, sizes 1..4 MiB, two whole sweeps each.
    for path in ["tcp@eth0", "tcp@vxlan0"] {
        for repeat in 0..2 {
            let n = results
                .iter()
                .filter(|r| r["path"] == path && r["repeat"] == repeat)
                .count();
            assert_eq!(n, 2 * 3, "{path} sweep {repeat}: {n} records\n{}", done[0].stdout);
        }
    }
    for r in results {
        assert_eq!(r["out_of_place"]["nwrong"], 0.0, "{r}");
        // Physics: no collective moves more per rank than the shaped wire carries. TBF's 256 KB burst is
        // a few percent of the 3 x 6 MiB a rank sends at 4 MiB, and TCP headers take more than that back.
        if r["size"].as_u64().unwrap() >= 4 << 20 {
            for placement in ["out_of_place", "in_place"] {
                let busbw = r[placement]["bus_bw"].as_f64().unwrap();
                assert!(
                    busbw > 0.0 && busbw <= SHAPED_GBS,
                    "{} {placement} busbw {busbw} GB/s over a 1 Gbit/s link: {r}",
                    r["path"]
                );
            }
        }
    }
    let summary = &v["collbench"]["summary"];
    let cmp = summary["comparison"].as_array().unwrap();
    assert_eq!(cmp.len(), 2 * 3, "every collective and size compared: {summary}");
    for c in cmp {
        let paths = c["paths"].as_array().unwrap();
        let names: BTreeSet<&str> = paths.iter().map(|p| p["path"].as_str().unwrap()).collect();
        assert_eq!(names, BTreeSet::from(["tcp@eth0", "tcp@vxlan0"]), "{c}");
        for p in paths {
            assert_eq!(p["repeats"], 2, "both sweeps combined: {p}");
            let (t, ci) = (p["time_us"].as_f64().unwrap(), p["ci95_us"].as_f64().unwrap());
            assert!(t > 0.0 && ci.is_finite() && ci >= 0.0, "{p}");
            assert!(p["significant"].is_boolean() && p["vs_reference"].is_number(), "{p}");
            let pct = p["line_rate_pct"].as_f64().unwrap();
            assert!(
                (pct - 100.0 * p["busbw"].as_f64().unwrap() / SHAPED_GBS).abs() < 1e-6,
                "{p}"
            );
        }
        // Best first; its ratio to itself is 1.
        assert_eq!(paths[0]["vs_best"], 1.0, "{c}");
    }
    let costs = summary["paths"].as_array().unwrap();
    assert_eq!(costs.len(), 2, "{summary}");
    for c in costs {
        assert_eq!(c["line_rate_gbs"], SHAPED_GBS, "{c}");
        assert!(
            c["connect_s"].as_f64().unwrap() > 0.0 && c["cpu_s_per_gb"].as_f64().unwrap() > 0.0,
            "{c}"
        );
    }
    let text = &done[0].stdout;
    assert!(
        text.contains("# Paths compared") && text.contains("% line") && text.contains("# Path costs"),
        "{text}"
    );
}

#[test]
fn info_gathers_every_host_and_names_a_mismatched_mtu() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let cluster = up("i", &[]);
    let dir = tempfile::tempdir().unwrap();
    // One host's link is misconfigured: the advice must name it.
    let ip = Path::new("/usr/sbin/ip");
    let ip = if ip.exists() {
        ip.to_path_buf()
    } else {
        PathBuf::from("/sbin/ip")
    };
    let st = cluster
        .exec(2, &ip, &["link", "set", "eth0", "mtu", "1400"])
        .status()
        .unwrap();
    assert!(st.success());
    let master = cluster.addr(0, "eth0");
    let procs = start_ranks(&cluster, dir.path(), &master, "info", &["info", "--iface", "eth0"]);
    let done = wait_all(procs, RUN_DEADLINE);
    for d in &done {
        assert_eq!(d.status.code(), Some(0), "stdout:\n{}\nstderr:\n{}", d.stdout, d.stderr);
    }
    let out = &done[0].stdout;
    for h in 0..HOSTS {
        let host = cluster.host(h);
        assert!(
            out.lines().any(|l| l.starts_with(&host) && l.contains("eth0")),
            "no eth0 row for {host}:\n{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.starts_with(&host) && l.contains("vxlan0") && l.contains("vxlan")),
            "{out}"
        );
    }
    let warning = out
        .lines()
        .find(|l| l.contains("MTU") && l.contains("1400"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        warning.contains(&cluster.host(2)),
        "the warning names the odd host: {warning}"
    );
    // Only rank 0 prints.
    assert!(done[1..].iter().all(|d| d.stdout.trim().is_empty()));
}

/// Starts `collbench ARGS` in every host, one rank each (RANK/WORLD_SIZE/MASTER_ADDR), its output in
/// `dir/LABEL<host>.out` and `.err`, without waiting.
fn start_ranks(cluster: &Cluster, dir: &Path, master: &str, label: &str, args: &[&str]) -> Vec<Proc> {
    let bin = collbench();
    (0..HOSTS)
        .map(|h| {
            let c = cluster.exec_rank(h, master, ROOT_PORT, &bin, args);
            spawn(c, &format!("{label}{h}"), dir)
        })
        .collect()
}

/// Runs `collbench run ARGS` as one rank per host with the torchrun-style variables, waits for all of them
/// and checks that each exited 0.
fn env_ranks(cluster: &Cluster, dir: &Path, master: &str, args: &[&str]) -> Vec<Done> {
    let mut run_args = vec!["run"];
    run_args.extend(args);
    let done = wait_all(start_ranks(cluster, dir, master, "rank", &run_args), RUN_DEADLINE);
    for (h, d) in done.iter().enumerate() {
        assert_eq!(
            d.status.code(),
            Some(0),
            "rank {h} failed\nstdout:\n{}\nstderr:\n{}",
            d.stdout,
            d.stderr
        );
    }
    done
}

#[test]
fn ranks_started_in_each_host_with_rank_and_world_size() {
    let Some(_one) = namespace_test() else {
        return;
    };
    // Hosts whose default congestion control is reno: the report reads back what the sockets use.
    let cluster = up("e", &["--cc", "reno"]);
    let dir = tempfile::tempdir().unwrap();
    let before = cluster.counters("eth0");
    // No --iface: the data path is the interface that reaches MASTER_ADDR, eth0 in every host.
    let done = env_ranks(&cluster, dir.path(), &cluster.addr(0, "eth0"), &SWEEP);
    let after = cluster.counters("eth0");
    let d = &done[0];
    assert!(d.stdout.contains("# Launcher: RANK/WORLD_SIZE"), "{}", d.stdout);
    assert!(
        d.stdout.contains("TCP connections, congestion control reno"),
        "{}",
        d.stdout
    );
    let b = check_sweep(d, &cluster, "eth0", &["tcp@eth0"]);
    assert!(
        d.stderr
            .contains("collbench: tcp path: interface eth0 on every host (reaches the rendezvous)"),
        "{}",
        d.stderr
    );
    check_growth("env eth0", &before, &after, b);
}

#[test]
fn ranks_over_the_vxlan_overlay() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let cluster = up("v", &[]);
    let dir = tempfile::tempdir().unwrap();
    let (eth_before, vx_before) = (cluster.counters("eth0"), cluster.counters("vxlan0"));
    // Rendezvous and data both on the overlay, as pods on a Flannel network see it.
    let mut args: Vec<&str> = SWEEP.to_vec();
    // A SPEC as a user writes one for hosts whose overlay names differ: the first match on each host.
    args.extend(["--iface", "vx*|eth0"]);
    let done = env_ranks(&cluster, dir.path(), &cluster.addr(0, "vxlan0"), &args);
    let (eth_after, vx_after) = (cluster.counters("eth0"), cluster.counters("vxlan0"));
    let d = &done[0];
    assert!(
        d.stderr
            .contains("interface vxlan0 on every host (chosen by --iface vx*|eth0)"),
        "{}",
        d.stderr
    );
    let b = check_sweep(d, &cluster, "vxlan0", &["tcp@vxlan0"]);
    let vx = check_growth("overlay vxlan0", &vx_before, &vx_after, b);
    let eth = check_growth("overlay eth0", &eth_before, &eth_after, b);
    // The underlay carried the encapsulated overlay: at least as many bytes as vxlan0 itself.
    for (h, (v, e)) in vx.iter().zip(&eth).enumerate() {
        assert!(e.1 >= v.1 && e.0 >= v.0, "host {h}: eth0 grew {e:?} < vxlan0 {v:?}");
    }
}

#[test]
fn the_harness_removes_everything_it_builds() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let name = {
        let c = Cluster::up(PREFIX, "d", 2, &["--cc", "reno"]);
        let netns = text(&Command::new("ip").args(["netns", "list"]).output().unwrap().stdout);
        for h in 0..2 {
            let cc = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &c.host(h),
                    "cat",
                    "/proc/sys/net/ipv4/tcp_congestion_control",
                ])
                .output()
                .unwrap();
            assert_eq!(text(&cc.stdout).trim(), "reno", "host {h}: --cc reno");
        }
        // Receive packet steering on both ends of every host's veth: without it a flow arrives out of order
        // whenever its sender moves between CPUs, and TCP reads a clean link as slow.
        let masks = |ns: &str, devs: &str| {
            let out = Command::new("ip")
                .args(["netns", "exec", ns, "sh", "-c"])
                .arg(format!("cat /sys/class/net/{devs}/queues/rx-0/rps_cpus"))
                .output()
                .unwrap();
            assert!(out.status.success(), "{ns} {devs}: {}", text(&out.stderr));
            text(&out.stdout)
        };
        let hosts: String = (0..2).map(|h| masks(&c.host(h), "eth0")).collect();
        let switch = masks(&format!("{}-sw", c.name), "v*");
        for (at, found) in [("hosts' eth0", hosts), ("switch ports", switch)] {
            let steered = found
                .lines()
                .filter(|m| m.chars().any(|x| x.is_ascii_hexdigit() && x != '0'));
            assert_eq!(
                steered.count(),
                2,
                "{at}: no receive packet steering (rps_cpus {found:?})"
            );
        }
        for ns in [format!("{}-sw", c.name), c.host(0), c.host(1)] {
            assert!(
                netns.lines().any(|l| l.split_whitespace().next() == Some(&ns)),
                "{ns} in {netns}"
            );
        }
        assert_eq!(c.addr(1, "eth0").rsplit('.').next(), Some("11"));
        assert_eq!(c.addr(1, "vxlan0").rsplit('.').next(), Some("11"));
        c.name.clone()
    };
    let netns = text(&Command::new("ip").args(["netns", "list"]).output().unwrap().stdout);
    assert!(!netns.contains(&format!("{name}-")), "left behind: {netns}");
    // Down again is a no-op.
    let again = Command::new("bash")
        .arg(harness())
        .args(["down", &name])
        .status()
        .unwrap();
    assert!(again.success());
}

/// Starts one rank per host (RANK/WORLD_SIZE/MASTER_ADDR) with `args`, without waiting.
fn start_env_ranks(cluster: &Cluster, dir: &Path, args: &[&str]) -> Vec<Proc> {
    let master = cluster.addr(0, "eth0");
    let mut run_args = vec!["run", "--no-progress"];
    run_args.extend(args);
    start_ranks(cluster, dir, &master, "rank", &run_args)
}

/// The fault tests' sweep: all_reduce from 1 MiB to `end` with a 5 s timeout (-T), `extra`, JSON to `json`.
fn fault_sweep<'a>(end: &'a str, extra: &[&'a str], json: &'a Path) -> Vec<&'a str> {
    let mut args = vec!["--collective", "all_reduce", "-b", "1M", "-e", end, "-T", "5"];
    args.extend(extra);
    args.extend(["-J", json.to_str().unwrap()]);
    args
}

/// The final `collbench: error:` line of a rank.
fn error_line(d: &Done) -> &str {
    d.stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("collbench: error:"))
        .unwrap_or_else(|| panic!("no error line:\n{}", d.stderr))
}

#[test]
fn a_rank_killed_mid_all_reduce_is_named_with_its_host_by_every_other_host() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let cluster = up("k", &[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let args = fault_sweep("4M", &["--fault", "2:all_reduce@4M:kill"], &json);
    // Every survivor ends (RUN_DEADLINE guards against a hang: how fast is a benchmark's business, and a busy
    // CI host stretches start-up) naming the dead rank, its host and the collective.
    let done = wait_all(start_env_ranks(&cluster, dir.path(), &args), RUN_DEADLINE);
    let culprit = format!("Culprit: rank 2 (host {})", cluster.host(2));
    for h in [0, 1, 3] {
        assert_eq!(done[h].status.code(), Some(3), "rank {h}:\n{}", done[h].stderr);
        let line = error_line(&done[h]);
        assert!(
            line.contains(&culprit) && line.contains("all_reduce of 4 MiB"),
            "rank {h}: {line}"
        );
    }
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        v["results"].as_array().map(Vec::len),
        Some(2),
        "points before the fault are kept: {v}"
    );
}

#[test]
fn a_host_that_loses_every_packet_mid_run_is_named_by_every_rank_itself_included() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let cluster = up("x", &[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let args = fault_sweep("256M", &["-n", "20"], &json);
    let procs = start_env_ranks(&cluster, dir.path(), &args);
    let first_point = Instant::now() + RUN_DEADLINE;
    loop {
        let v: Option<serde_json::Value> = std::fs::read_to_string(&json)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        if v.is_some_and(|v| v["results"].as_array().is_some_and(|r| !r.is_empty())) {
            break;
        }
        assert!(Instant::now() < first_point, "no point finished");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Host 2 drops everything it receives or sends on eth0 (100% loss, its link still up).
    for chain in [["-A", "INPUT", "-i"], ["-A", "OUTPUT", "-o"]] {
        let mut a: Vec<&str> = chain.to_vec();
        a.extend(["eth0", "-j", "DROP"]);
        let ok = cluster.exec(2, Path::new("iptables"), &a).status().unwrap();
        assert!(ok.success(), "iptables {a:?}");
    }
    let done = wait_all(procs, RUN_DEADLINE);
    let culprit = format!("Culprit: rank 2 (host {})", cluster.host(2));
    for (h, d) in done.iter().enumerate() {
        assert_eq!(d.status.code(), Some(3), "rank {h}:\n{}", d.stderr);
        let line = error_line(d);
        assert!(line.contains(&culprit), "rank {h}: {line}");
    }
    // Rank 2 heard from no peer and none acknowledged it: it says so, rather than blaming one of them.
    assert!(
        error_line(&done[2]).contains("lost every peer at once"),
        "{}",
        done[2].stderr
    );
}

#[test]
fn a_host_whose_link_goes_down_mid_run_is_named() {
    let Some(_one) = namespace_test() else {
        return;
    };
    let cluster = up("l", &[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    // Long enough that the sweep is still running when the link goes down after its first point.
    let args = fault_sweep("256M", &["-n", "20"], &json);
    let procs = start_env_ranks(&cluster, dir.path(), &args);
    // Rank 0 rewrites the JSON file after every point: the first one there means data is moving.
    let first_point = Instant::now() + RUN_DEADLINE;
    loop {
        let v: Option<serde_json::Value> = std::fs::read_to_string(&json)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        if v.is_some_and(|v| v["results"].as_array().is_some_and(|r| !r.is_empty())) {
            break;
        }
        assert!(Instant::now() < first_point, "no point finished");
        std::thread::sleep(Duration::from_millis(50));
    }
    let down = cluster
        .exec(2, Path::new("ip"), &["link", "set", "eth0", "down"])
        .status()
        .unwrap();
    assert!(down.success());
    // -T 5 ends every wait; RUN_DEADLINE guards against a hang (a time bound here would measure the CI host).
    let done = wait_all(procs, RUN_DEADLINE);
    let host = cluster.host(2);
    for (h, d) in done.iter().enumerate() {
        assert_eq!(d.status.code(), Some(3), "rank {h}:\n{}", d.stderr);
        let line = error_line(d);
        assert!(
            line.contains(&format!("Culprit: rank 2 (host {host})")),
            "rank {h}: {line}"
        );
    }
    // The rank on that host knows why: its own interface is down.
    assert!(
        error_line(&done[2]).contains("interface eth0 is down"),
        "{}",
        done[2].stderr
    );
}
