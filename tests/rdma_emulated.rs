//! collbench's rdma@ path end to end on the software verbs provider of tests/verbs/ (a libibverbs.so.1
//! acting as a RoCE v2 NIC on one interface, built here with cc against the real <infiniband/verbs.h> and
//! loaded first with LD_LIBRARY_PATH). Every verbs call of the transport runs: discovery, PD/CQ/QP
//! creation, the RESET->INIT->RTR->RTS transitions with their attribute masks, registration, RDMA WRITE WITH
//! IMM, completions and the error paths; the provider refuses what hardware refuses and says why on stderr.
//! Emulated: its timings say nothing about hardware (tests/rdma.rs runs on a real NIC). Needs the `rdma`
//! feature and cc (failed, not skipped, without cc when CI=true); the namespace-host test also needs root
//! (tests/netns/cluster.sh), as tests/netns.rs does.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use common::netns::{namespace_test, spawn, wait_all, Cluster};

/// The provider's device name.
const DEV: &str = "emu_roce0";

/// The folder holding the provider, built once per test binary; None (and why, printed) where it cannot
/// be built.
fn provider() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        if !cfg!(feature = "rdma") {
            eprintln!("skipped: built without the rdma feature (cargo test --features rdma)");
            return None;
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/verbs");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-verbs");
        std::fs::create_dir_all(&dir).unwrap();
        let out = Command::new("cc")
            .args([
                "-O2",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-shared",
                "-fPIC",
                "-Wl,-soname,libibverbs.so.1",
            ])
            .arg(format!("-Wl,--version-script={}", src.join("libibverbs.map").display()))
            .arg("-o")
            .arg(dir.join("libibverbs.so.1"))
            .arg(src.join("provider.c"))
            .arg("-lpthread")
            .output();
        match out {
            Ok(o) if o.status.success() => Some(dir),
            Ok(o) => panic!(
                "cc could not build the verbs provider:\n{}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
                eprintln!("skipped: cc not runnable ({e}); apt-get install gcc libibverbs-dev");
                None
            }
            Err(e) => panic!("cc not runnable ({e}); CI needs it (apt-get install gcc libibverbs-dev)"),
        }
    })
    .as_deref()
}

/// How a run ended.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `collbench run` with local ranks on loopback over the provider, with `env` set.
fn run(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut c = Command::new(env!("CARGO_BIN_EXE_collbench"));
    c.env("LD_LIBRARY_PATH", dir)
        .env("FAKEVERBS_NETDEV", "lo")
        .env_remove("COLLBENCH_RANK")
        .env_remove("FAKEVERBS_FAULT")
        .arg("run")
        .args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().expect("collbench runs");
    Run {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn transport() -> String {
    format!("rdma@{DEV}")
}

/// A clean run: exit 0, no wrong element, and the data rows of every size present.
fn assert_clean(r: &Run, rows_at_least: usize) {
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("# Total wrong elements : 0 "), "{}", r.stdout);
    assert!(
        !r.stderr.contains("fakeverbs:"),
        "the provider refused something:\n{}",
        r.stderr
    );
    let rows = r
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .count();
    assert!(rows >= rows_at_least, "{rows} rows:\n{}", r.stdout);
}

#[test]
fn every_collective_and_type_on_four_local_ranks_has_no_wrong_element() {
    let Some(dir) = provider() else { return };
    let t = transport();
    let r = run(
        dir,
        &[],
        &[
            "--np",
            "4",
            "-b",
            "8",
            "-e",
            "1M",
            "-f",
            "8",
            "-n",
            "2",
            "-w",
            "1",
            "--collective",
            "all",
            "-d",
            "float,half,int32",
            "--transport",
            &t,
        ],
    );
    // 8 B .. 1 MiB by 8: 7 sizes, for every collective and the three types.
    assert_clean(&r, 7 * 3);
    for c in [
        "all_reduce",
        "all_gather",
        "broadcast",
        "reduce",
        "reduce_scatter",
        "alltoall",
        "sendrecv",
    ] {
        assert!(r.stdout.contains(c), "{c} did not run:\n{}", r.stdout);
    }
}

#[test]
fn four_queue_pairs_per_peer_carry_large_messages_intact() {
    let Some(dir) = provider() else { return };
    let t = transport();
    let r = run(
        dir,
        &[],
        &[
            "--np",
            "2",
            "-b",
            "1M",
            "-e",
            "16M",
            "-f",
            "4",
            "-n",
            "2",
            "-w",
            "1",
            "--rdma-qps",
            "4",
            "--transport",
            &t,
        ],
    );
    assert_clean(&r, 3);
}

#[test]
fn tcp_and_rdma_in_one_run_are_compared() {
    let Some(dir) = provider() else { return };
    let paths = format!("tcp@lo,{}", transport());
    let r = run(
        dir,
        &[],
        &[
            "--np",
            "2",
            "-b",
            "8",
            "-e",
            "64K",
            "-f",
            "16",
            "-n",
            "2",
            "-w",
            "1",
            "--transport",
            &paths,
        ],
    );
    assert_clean(&r, 4);
    let costs: Vec<&str> = r.stdout.lines().skip_while(|l| !l.contains("Path costs")).collect();
    assert!(
        costs.iter().any(|l| l.contains("tcp@lo")) && costs.iter().any(|l| l.contains("rdma@emu_roce0:1")),
        "{}",
        r.stdout
    );
}

#[test]
fn queue_pairs_are_set_up_once_per_run_however_many_sweeps() {
    let Some(dir) = provider() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let created = |sweeps: &[&str], name: &str| {
        let log = tmp.path().join(name);
        let mut args = vec![
            "--np",
            "2",
            "--collective",
            "all_reduce,all_gather",
            "-n",
            "2",
            "-w",
            "1",
        ];
        args.extend_from_slice(sweeps);
        let paths = format!("tcp@lo,{}", transport());
        args.extend(["--transport", &paths]);
        let r = run(dir, &[("FAKE_CALL_LOG", log.to_str().unwrap())], &args);
        assert_clean(&r, 1);
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == "ibv_create_qp")
            .count()
    };
    // Three repeats with every point its own turn: 3 x 4 points x 2 collectives sweeps of the rdma path.
    let many = created(
        &[
            "-b",
            "8",
            "-e",
            "4K",
            "-f",
            "8",
            "--repeat",
            "3",
            "--interleave",
            "point",
        ],
        "many",
    );
    let once = created(&["-b", "8", "-e", "8"], "once");
    // Two ranks, one queue pair each way per rank.
    assert_eq!(once, 2, "one queue pair per rank and peer");
    assert_eq!(many, once, "queue pairs must not be made again per sweep");
}

#[test]
fn info_lists_the_emulated_device_with_its_whole_gid_table_through_verbs() {
    let Some(dir) = provider() else { return };
    if Path::new("/sys/class/infiniband")
        .read_dir()
        .is_ok_and(|mut d| d.next().is_some())
    {
        eprintln!("skipped: this host has RDMA devices in sysfs, which info lists first");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("info.json");
    let o = Command::new(env!("CARGO_BIN_EXE_collbench"))
        .env("LD_LIBRARY_PATH", dir)
        .env("FAKEVERBS_NETDEV", "lo")
        .env_remove("COLLBENCH_RANK")
        .args(["info", "-J"])
        .arg(&json)
        .output()
        .expect("collbench runs");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let row = out
        .lines()
        .find(|l| l.contains(DEV))
        .unwrap_or_else(|| panic!("no {DEV} row:\n{out}"));
    assert!(
        row.contains("ACTIVE") && row.contains("Ethernet") && row.contains("100 Gb/sec") && row.contains(" lo "),
        "{row}"
    );
    // The provider's table: link-local v1 and v2 entries, then lo's IPv4 address as v1 and v2 entries.
    let want = [
        ("0", "fe80::200:ff:7f00:1", "RoCE v1"),
        ("1", "fe80::200:ff:7f00:1", "RoCE v2"),
        ("2", "::ffff:127.0.0.1", "RoCE v1"),
        ("3", "::ffff:127.0.0.1", "RoCE v2"),
    ];
    let gid_rows: Vec<Vec<&str>> = out
        .lines()
        .skip_while(|l| !(l.contains(" gid ") && l.contains("address")))
        .skip(1)
        .take_while(|l| l.contains(DEV))
        .map(|l| l.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect())
        .collect();
    assert_eq!(gid_rows.len(), want.len(), "{out}");
    for (r, (index, addr, kind)) in gid_rows.iter().zip(want) {
        assert_eq!(&r[3..], [index, addr, kind, "lo"], "{out}");
    }
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    common::validate_info_against_schema(&v);
    let gids = v["hosts"][0]["rdma"][0]["ports"][0]["gids"].as_array().unwrap();
    let kinds: Vec<(u64, &str)> = gids
        .iter()
        .map(|g| (g["index"].as_u64().unwrap(), g["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [(0, "RoCE v1"), (1, "RoCE v2"), (2, "RoCE v1"), (3, "RoCE v2")],
        "{v:#}"
    );
    assert_eq!(gids[3]["gid"], "0000:0000:0000:0000:0000:ffff:7f00:0001");
}

/// The last `collbench: error:` lines.
fn errors(r: &Run) -> String {
    r.stderr
        .lines()
        .filter(|l| l.starts_with("collbench: error:"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_rank_killed_mid_run_is_named_from_the_verbs_errors() {
    let Some(dir) = provider() else { return };
    let t = transport();
    let r = run(
        dir,
        &[],
        &[
            "--np",
            "4",
            "-b",
            "1M",
            "-e",
            "4M",
            "-n",
            "2",
            "-w",
            "1",
            "--transport",
            &t,
            "--fault",
            "2:all_reduce@4M:kill",
        ],
    );
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    let e = errors(&r);
    assert!(
        e.contains("with rank 2") && e.contains("transport retry counter exceeded"),
        "{}",
        r.stderr
    );
    // Every survivor names the killed rank, not a survivor that gave up first and blamed itself.
    let culprits: Vec<&str> = e.lines().filter_map(|l| l.split("Culprit: ").nth(1)).collect();
    assert!(!culprits.is_empty(), "no culprit named:\n{}", r.stderr);
    for c in culprits {
        assert!(c.starts_with("rank 2 (host "), "Culprit: {c}\n{}", r.stderr);
    }
    assert!(
        r.stderr.contains("fakeverbs: QP") && r.stderr.contains("after 7 retries"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_wrong_rkey_fails_the_run_naming_the_peer_and_the_access_error() {
    let Some(dir) = provider() else { return };
    let t = transport();
    let r = run(
        dir,
        &[("FAKEVERBS_FAULT", "1:bad_rkey:20")],
        &[
            "--np",
            "4",
            "-b",
            "8",
            "-e",
            "64K",
            "-n",
            "2",
            "-w",
            "1",
            "--transport",
            &t,
        ],
    );
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    let e = errors(&r);
    assert!(
        e.contains("rank 1 (host") && e.contains("remote access error"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("no MR has this rkey"), "{}", r.stderr);
}

#[test]
fn a_peer_queue_pair_forced_to_the_error_state_fails_the_run_without_a_hang() {
    let Some(dir) = provider() else { return };
    let t = transport();
    let r = run(
        dir,
        &[("FAKEVERBS_FAULT", "2:qp_error:40")],
        &[
            "--np",
            "4",
            "-b",
            "8",
            "-e",
            "64K",
            "-n",
            "2",
            "-w",
            "1",
            "--transport",
            &t,
        ],
    );
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    let e = errors(&r);
    assert!(
        e.contains("rank 2") && (e.contains("flushed") || e.contains("retry counter exceeded")),
        "{}",
        r.stderr
    );
}

#[test]
fn a_receiver_slow_to_drain_its_window_holds_senders_to_their_credits() {
    let Some(dir) = provider() else { return };
    let t = transport();
    // Rank 1 sees every receive completion 5 ms late, so it copies slots out and reposts receives late.
    // Each 16 MiB message is 32 fragments through a window of 8 slots of 512 KiB: every sender runs out of
    // credits after 8 fragments and must wait for the slow receiver's returns, again and again. A sender
    // that wrote past its credits would overwrite unread slots (wrong data, or the receiver's "slot still
    // full" protocol error) and exhaust the receiver's posted receives (the provider's RNR NAK).
    let r = run(
        dir,
        &[("FAKEVERBS_FAULT", "1:slow_recv:5")],
        &[
            "--np",
            "2",
            "--collective",
            "sendrecv,all_reduce",
            "-b",
            "16M",
            "-e",
            "16M",
            "-n",
            "1",
            "-w",
            "1",
            "--transport",
            &t,
        ],
    );
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("# Total wrong elements : 0 "), "{}", r.stdout);
    assert!(
        r.stderr
            .contains("FAKEVERBS_FAULT: receive completions are polled 5 ms late"),
        "the slow receiver did not happen:\n{}",
        r.stderr
    );
    let refusals: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("fakeverbs:") && !l.starts_with("fakeverbs: FAKEVERBS_FAULT:"))
        .collect();
    assert!(
        refusals.is_empty(),
        "credits did not hold (RNR NAK, overrun or overflow):\n{}",
        r.stderr
    );
    assert!(!r.stderr.contains("protocol error"), "{}", r.stderr);
    let rows = r
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("16777216 "))
        .count();
    assert_eq!(rows, 2, "sendrecv and all_reduce at 16 MiB:\n{}", r.stdout);
}

/// Hosts of the namespace cluster, one rank each.
const HOSTS: usize = 4;

/// `collbench run ARGS` as one rank per namespace host over the provider on each host's eth0 (the GID is
/// eth0's IPv4 address, so queue pairs talk over the switch between the hosts); every rank must exit 0.
fn on_hosts(cluster: &Cluster, dir: &Path, args: &[&str]) -> Vec<common::netns::Done> {
    on_hosts_cmd(cluster, dir, "run", args, &[0])
}

/// [`on_hosts`] for any subcommand `cmd`, rank 0 exiting with one of `rank0_codes` and every other rank with
/// rank 0's code (a verdict rank 0 reaches is every rank's exit status).
fn on_hosts_cmd(
    cluster: &Cluster,
    dir: &Path,
    cmd: &str,
    args: &[&str],
    rank0_codes: &[i32],
) -> Vec<common::netns::Done> {
    let lib = provider().expect("built");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_collbench"));
    let master = cluster.addr(0, "eth0");
    let mut run_args = vec![cmd];
    run_args.extend(args);
    let procs = (0..HOSTS)
        .map(|h| {
            let mut c = cluster.exec_rank(h, &master, "29500", &bin, &run_args);
            c.env("LD_LIBRARY_PATH", lib).env("FAKEVERBS_NETDEV", "eth0");
            spawn(c, &format!("rank{h}"), dir)
        })
        .collect();
    let done = wait_all(procs, Duration::from_secs(600));
    let rank0 = done[0].status.code();
    for (h, d) in done.iter().enumerate() {
        let ok = if h == 0 {
            rank0.is_some_and(|c| rank0_codes.contains(&c))
        } else {
            d.status.code() == rank0
        };
        assert!(
            ok,
            "rank {h} failed ({:?})\nstdout:\n{}\nstderr:\n{}",
            d.status.code(),
            d.stdout,
            d.stderr
        );
        assert!(
            !d.stderr.contains("fakeverbs:"),
            "rank {h}: the provider refused something:\n{}",
            d.stderr
        );
    }
    done
}

#[test]
fn every_collective_on_four_namespace_hosts_over_the_emulated_nic() {
    if provider().is_none() {
        return;
    }
    let Some(_one) = namespace_test() else {
        return;
    };
    let cluster = Cluster::up("cbv", "r", HOSTS, &[]);
    let dir = tempfile::tempdir().unwrap();
    let t = transport();
    // 8 B to 64 MiB by 16 (8 sizes), every collective, three types, in and out of place.
    let done = on_hosts(
        &cluster,
        dir.path(),
        &[
            "--collective",
            "all",
            "-d",
            "float,half,int32",
            "-b",
            "8",
            "-e",
            "64M",
            "-f",
            "16",
            "-n",
            "1",
            "-w",
            "1",
            "--transport",
            &t,
        ],
    );
    let out = &done[0].stdout;
    assert!(out.contains("# Total wrong elements : 0 "), "{out}");
    let rows = out
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .count();
    assert!(rows >= 8 * 3, "{rows} rows:\n{out}");
    // Mixed with the TCP path in one run, with four queue pairs per peer, up to 64 MiB (16 KiB, 1 MiB,
    // 64 MiB: a message spread over the four queue pairs, up to 128 fragments of each window's 512 KiB slots).
    let paths = format!("tcp@eth0,{t}");
    let done = on_hosts(
        &cluster,
        dir.path(),
        &[
            "-b",
            "16K",
            "-e",
            "64M",
            "-f",
            "64",
            "-n",
            "1",
            "-w",
            "1",
            "--rdma-qps",
            "4",
            "--transport",
            &paths,
        ],
    );
    let out = &done[0].stdout;
    assert!(out.contains("# Total wrong elements : 0 "), "{out}");
    assert!(out.contains("tcp@eth0") && out.contains("rdma@emu_roce0:1"), "{out}");
    let rows_64m = out.lines().filter(|l| l.trim_start().starts_with("67108864 ")).count();
    assert!(rows_64m >= 2, "64 MiB on both paths:\n{out}");

    // The pairwise link test over the rdma path: every pair of hosts over its own queue pairs. Whether it
    // names a slow host or link (exit 1) depends on this shared machine's load, not on the path: either
    // exit is a measured matrix.
    let json = dir.path().join("pairwise.json");
    let json_arg = json.to_str().unwrap().to_string();
    let done = on_hosts_cmd(
        &cluster,
        dir.path(),
        "pairwise",
        &[
            "--transport",
            &t,
            "--bytes",
            "8M",
            "-n",
            "2",
            "--lat-iters",
            "20",
            "--no-confirm",
            "-J",
            &json_arg,
        ],
        &[0, 1],
    );
    let out = &done[0].stdout;
    assert!(out.contains("4 hosts over rdma@emu_roce0:1"), "{out}");
    let rep: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        (rep["path"].as_str(), rep["unit"].as_str()),
        (Some("rdma@emu_roce0:1"), Some("hosts"))
    );
    let links = rep["links"].as_array().unwrap();
    assert_eq!(links.len(), HOSTS * (HOSTS - 1) / 2, "{rep:#}");
    for l in links {
        assert!(
            l["bw_ab_gbs"].as_f64().unwrap() > 0.0
                && l["bw_ba_gbs"].as_f64().unwrap() > 0.0
                && l["latency_us"].as_f64().unwrap() > 0.0,
            "every link measured both ways: {l}"
        );
    }

    // Preflight with the rdma path: its collective phases sweep over the queue pairs. Its pairwise link
    // test runs over the TCP control path, not this one, and its findings there follow this shared
    // machine's load: --no-pairwise (the rdma pairs were measured above). The emulated port says 100 Gb/s,
    // which no software NIC reaches: the expectations ask only that data moves (1 MB/s), so the verdict
    // rests on connectivity and the data checks.
    let expect = dir.path().join("expect.toml");
    std::fs::write(&expect, "[[expect]]\npath = \"*\"\nmin_busbw = \"0.001 GB/s\"\n").unwrap();
    let done = on_hosts_cmd(
        &cluster,
        dir.path(),
        "preflight",
        &[
            "--transport",
            &t,
            "--repeat",
            "1",
            "--bandwidth-bytes",
            "4M",
            "--expect",
            expect.to_str().unwrap(),
            "--no-pairwise",
            "--no-progress",
        ],
        &[0, 1],
    );
    let out = &done[0].stdout;
    let row = |name: &str| out.lines().find(|l| l.contains(name)).unwrap_or_default();
    for name in ["rdma@emu_roce0:1 connectivity", "rdma@emu_roce0:1 data"] {
        assert!(
            row(name).trim_end().ends_with("PASS"),
            "{name}:
{out}"
        );
    }
    // The hosts' CPU checks judge this shared machine's load (4 ranks and the software NIC on its cores,
    // beside whatever else runs), as the pairwise test would: a FAIL may come only from them.
    let failed: Vec<&str> = out.lines().filter(|l| l.trim_end().ends_with("FAIL")).collect();
    assert!(
        failed.iter().all(|l| l.contains(" CPU of ")),
        "{failed:?}:
{out}"
    );
    assert!(out.contains("Preflight verdict: PASS") || !failed.is_empty(), "{out}");
}

/// The provider's enforcement seen through collbench's own verbs wrappers, in a child process of this test
/// binary started with the provider on the loader's path (this process has already loaded rdma-core).
#[cfg(feature = "rdma")]
mod enforcement {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use collbench::transport::rdma::qp::{QpOps, RtrParams, RtsParams};
    use collbench::transport::rdma::sysfs::{select_gid, LinkLayer};
    use collbench::transport::rdma::verbs::{Context, Cq, Mr, Pd, QpCaps, RcQp};
    use rdma_sys::ibv_wc_status as st;

    /// Set in the child, which runs [`in_child`]'s body.
    const CHILD: &str = "FAKEVERBS_CHILD";

    #[test]
    fn the_provider_refuses_what_hardware_refuses() {
        let Some(dir) = super::provider() else { return };
        let o = Command::new(std::env::current_exe().unwrap())
            .args(["enforcement::in_child", "--exact", "--nocapture", "--test-threads=1"])
            .env("LD_LIBRARY_PATH", dir)
            .env("FAKEVERBS_NETDEV", "lo")
            .env(CHILD, "1")
            .output()
            .expect("the test binary runs");
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success() && out.contains("1 passed"), "{out}\n{err}");
        for why in [
            "ibv_post_send on QP",
            "the QP is not in RTS",
            "ibv_post_recv on QP",
            "the QP is in RESET",
            "the receive queue is full",
            "receiver not ready after 1 RNR retries",
            "local protection error: no MR has this lkey",
        ] {
            assert!(err.contains(why), "the provider did not say '{why}':\n{err}");
        }
    }

    /// Polls `cq` until `n` completions arrived: (wr_id, status, imm) each.
    fn completions(cq: &Cq, n: usize) -> Vec<(u64, u32, u32)> {
        // SAFETY: zeroed is a valid ibv_wc (plain data).
        let mut wc: Vec<rdma_sys::ibv_wc> = (0..8).map(|_| unsafe { std::mem::zeroed() }).collect();
        let mut got = Vec::new();
        let give_up = Instant::now() + Duration::from_secs(60);
        while got.len() < n {
            assert!(Instant::now() < give_up, "only {got:?} of {n} completions");
            let k = cq.poll(&mut wc).unwrap();
            for w in &wc[..k] {
                // SAFETY: the union's immediate view; zero where none came.
                let imm = u32::from_be(unsafe { w.imm_data_invalidated_rkey_union.imm_data });
                got.push((w.wr_id, w.status, imm));
            }
        }
        got
    }

    #[test]
    fn in_child() {
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        let ctx = Context::open("emu_roce0").unwrap();
        let port = ctx.query_port(1).unwrap();
        assert!(port.active && port.link_layer == LinkLayer::Ethernet, "{port:?}");
        assert!(ctx.query_port(2).is_err(), "the device has one port");
        let g = select_gid(&ctx.gid_table(1, port.gid_tbl_len), port.link_layer, None).unwrap();
        assert_eq!(
            (g.index, &g.gid[10..]),
            (3, &[0xff, 0xff, 127, 0, 0, 1][..]),
            "lo's IPv4 as RoCE v2"
        );
        let pd = Pd::new(&ctx).unwrap();
        let cq = Cq::new(&ctx, 16).unwrap();
        let caps = QpCaps {
            send_wr: 2,
            recv_wr: 1,
            inline: 64,
        };
        let (mut a, mut b) = (RcQp::new(&pd, &cq, caps).unwrap(), RcQp::new(&pd, &cq, caps).unwrap());
        // SAFETY: a zero-length write reads no memory.
        let e = unsafe { a.post_write(1, std::ptr::null(), 0, Some(0), (8, 0), Some(0)) }
            .unwrap_err()
            .to_string();
        assert!(e.contains("ibv_post_send"), "{e}");
        assert!(b.post_recv(1).is_err(), "a QP in RESET takes no receive");
        let rtr = |dest_qpn| RtrParams {
            dest_qpn,
            rq_psn: 0,
            path_mtu: 1024,
            dlid: 0,
            grh: Some((g.gid, g.index)),
            port: 1,
            min_rnr_timer: 1,
            max_dest_rd_atomic: 1,
        };
        let rts = RtsParams {
            sq_psn: 0,
            timeout: 10,
            retry_cnt: 2,
            rnr_retry: 1,
            max_rd_atomic: 1,
        };
        let (qa, qb) = (a.qpn(), b.qpn());
        for (qp, peer) in [(&mut a, qb), (&mut b, qa)] {
            qp.modify_to_init(1).unwrap();
            qp.modify_to_rtr(&rtr(peer)).unwrap();
            qp.modify_to_rts(&rts).unwrap();
        }
        b.post_recv(7).unwrap();
        assert!(b.post_recv(8).is_err(), "max_recv_wr 1 as created");
        let mut win = vec![0u8; 64];
        // SAFETY: win outlives its registration (dropped after it, at the end).
        let wmr = unsafe { Mr::register(&pd, win.as_mut_ptr(), win.len()) }.unwrap();
        let remote = (win.as_ptr() as u64, wmr.rkey());
        let src = [5u8; 16];
        // SAFETY: inline: copied during the call.
        unsafe { a.post_write(10, src.as_ptr(), 16, None, remote, Some(42)) }.unwrap();
        let mut got = completions(&cq, 2);
        got.sort_unstable();
        assert_eq!(got, [(7, st::IBV_WC_SUCCESS, 42), (10, st::IBV_WC_SUCCESS, 0)]);
        assert_eq!(win[..16], [5; 16]);
        // The transport's liveness probe: a zero-length write without immediate completes once acknowledged
        // and takes no receive (none is posted now: one WITH IMM would be RNR NAKed, as below).
        // SAFETY: a zero-length write reads no memory.
        unsafe { a.post_write(14, std::ptr::null(), 0, Some(0), remote, None) }.unwrap();
        assert_eq!(completions(&cq, 1), [(14, st::IBV_WC_SUCCESS, 0)]);
        // No receive posted: RNR NAKs, one retry, then the error and the next request flushed.
        // SAFETY: inline, as above.
        unsafe { a.post_write(11, src.as_ptr(), 16, None, remote, Some(1)) }.unwrap();
        // SAFETY: inline, as above.
        unsafe { a.post_write(12, src.as_ptr(), 16, None, remote, Some(2)) }.unwrap();
        let got = completions(&cq, 2);
        assert_eq!(
            got,
            [(11, st::IBV_WC_RNR_RETRY_EXC_ERR, 0), (12, st::IBV_WC_WR_FLUSH_ERR, 0)]
        );
        // A fresh pair: an lkey no MR has fails the write with a local protection error.
        let (mut c, mut d) = (RcQp::new(&pd, &cq, caps).unwrap(), RcQp::new(&pd, &cq, caps).unwrap());
        let (qc, qd) = (c.qpn(), d.qpn());
        for (qp, peer) in [(&mut c, qd), (&mut d, qc)] {
            qp.modify_to_init(1).unwrap();
            qp.modify_to_rtr(&rtr(peer)).unwrap();
            qp.modify_to_rts(&rts).unwrap();
        }
        d.post_recv(9).unwrap();
        // SAFETY: the provider checks the lkey before reading anything.
        unsafe { c.post_write(13, src.as_ptr(), 16, Some(0xdead), remote, Some(3)) }.unwrap();
        assert_eq!(completions(&cq, 1), [(13, st::IBV_WC_LOC_PROT_ERR, 0)]);
    }

    /// Runs `test` (a child test of this module) in a child process with the provider; returns its stderr.
    fn child(test: &str) -> Option<String> {
        let dir = super::provider()?;
        let o = Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env("LD_LIBRARY_PATH", dir)
            .env("FAKEVERBS_NETDEV", "lo")
            .env(CHILD, "1")
            .output()
            .expect("the test binary runs");
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success() && out.contains("1 passed"), "{out}\n{err}");
        Some(err.into_owned())
    }

    /// Freeing a parent before its children is refused, as by hardware (EBUSY), and said on stderr; the
    /// wrappers, whose objects keep their parents, free children first whatever order their handles drop in.
    #[test]
    fn objects_are_freed_children_first_whatever_order_their_handles_drop_in() {
        let Some(err) = child("enforcement::teardown_in_child") else {
            return;
        };
        // Each line once: from the raw verbs called out of order, none from the wrappers dropped out of order.
        for why in [
            "fakeverbs: ibv_close_device: 1 PD(s) and 1 CQ(s) made from this context are still allocated",
            "fakeverbs: ibv_dealloc_pd: MRs or QPs still use this PD",
            "fakeverbs: ibv_destroy_cq: QPs still use this CQ",
        ] {
            assert_eq!(err.matches(why).count(), 1, "'{why}' once:\n{err}");
        }
        assert!(!err.contains("collbench: ibv_"), "a wrapper's free was refused:\n{err}");
    }

    #[test]
    fn teardown_in_child() {
        use rdma_sys as sys;
        if std::env::var_os(CHILD).is_none() {
            return;
        }
        // The provider's rule, with the raw verbs: no parent is freed while a child of it is left.
        let mut n = 0;
        // SAFETY: n is a valid out-pointer; the provider has one device.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        assert!(!list.is_null() && n == 1);
        // SAFETY: the list has one valid device; the context stays valid after the list is freed.
        let raw = unsafe { sys::ibv_open_device(*list) };
        // SAFETY: from ibv_get_device_list.
        unsafe { sys::ibv_free_device_list(list) };
        assert!(!raw.is_null());
        let mut buf = [0u8; 64];
        let local = sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as i32;
        // SAFETY: each call gets the objects made just before it, all still allocated; buf outlives its MR.
        let (pd, mr, cq) = unsafe {
            let pd = sys::ibv_alloc_pd(raw);
            let mr = sys::ibv_reg_mr(pd, buf.as_mut_ptr().cast(), buf.len(), local);
            let cq = sys::ibv_create_cq(raw, 4, std::ptr::null_mut(), std::ptr::null_mut(), 0);
            (pd, mr, cq)
        };
        assert!(!pd.is_null() && !mr.is_null() && !cq.is_null());
        // SAFETY: zeroed is a valid init attr; fields set below.
        let mut a: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        a.send_cq = cq;
        a.recv_cq = cq;
        a.qp_type = sys::ibv_qp_type::IBV_QPT_RC;
        a.cap.max_send_wr = 1;
        a.cap.max_recv_wr = 1;
        a.cap.max_send_sge = 1;
        a.cap.max_recv_sge = 1;
        // SAFETY: pd and cq are allocated; a is initialised.
        let qp = unsafe { sys::ibv_create_qp(pd, &mut a) };
        assert!(!qp.is_null());
        // SAFETY: every object is still allocated; a refused free leaves it so.
        unsafe {
            assert_eq!(sys::ibv_close_device(raw), libc::EBUSY, "the context has a PD and a CQ");
            assert_eq!(sys::ibv_dealloc_pd(pd), libc::EBUSY, "the PD has an MR and a QP");
            assert_eq!(sys::ibv_destroy_cq(cq), libc::EBUSY, "the CQ has a QP");
        }
        // SAFETY: children first: each object is freed once, after everything made from it.
        unsafe {
            assert_eq!(sys::ibv_destroy_qp(qp), 0);
            assert_eq!(sys::ibv_dereg_mr(mr), 0);
            assert_eq!(sys::ibv_destroy_cq(cq), 0);
            assert_eq!(sys::ibv_dealloc_pd(pd), 0);
            assert_eq!(sys::ibv_close_device(raw), 0);
        }

        // The wrappers, their handles dropped parents first: each object still goes after its children.
        let ctx = Context::open("emu_roce0").unwrap();
        let pd = Pd::new(&ctx).unwrap();
        let cq = Cq::new(&ctx, 16).unwrap();
        let caps = QpCaps {
            send_wr: 1,
            recv_wr: 1,
            inline: 0,
        };
        let qp = RcQp::new(&pd, &cq, caps).unwrap();
        // SAFETY: buf outlives the region (dropped below, before the end of this function).
        let mr = unsafe { Mr::register(&pd, buf.as_mut_ptr(), buf.len()) }.unwrap();
        drop(ctx);
        drop(pd);
        drop(cq);
        drop(qp);
        drop(mr);
    }
}
