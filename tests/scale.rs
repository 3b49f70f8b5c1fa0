//! Scale and resources: 64 local ranks on a small machine, connections only where the algorithms need
//! them, descriptors and memory flat over 10,000 collectives, peak memory within its bound.

use std::sync::Mutex;

use assert_cmd::Command;
use collbench::algorithm::{control, Algo, Args};
use collbench::bench::memory;
use collbench::collective::Collective;
use collbench::engine::{Engine, Native};
use collbench::options::{AlgoChoice, Options};
use collbench::reduce::{Dtype, Op};
use collbench::session::{self, Pairs};
use collbench::transport;
use serde_json::Value;

/// The tests of this file one at a time: the resource test counts this process's descriptors and memory,
/// which a test running alongside (spawning collbench, holding pipes) would disturb.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn collbench() -> Command {
    let mut c = Command::cargo_bin("collbench").expect("binary built");
    c.env_remove("COLLBENCH_RANK")
        .timeout(std::time::Duration::from_secs(300));
    c
}

/// Runs `collbench run ARGS -J FILE` and returns stdout, stderr, the exit code and the JSON file.
fn run_json(args: &[&str]) -> (String, String, Option<i32>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let out = collbench()
        .arg("run")
        .args(args)
        .args(["--no-progress", "-J"])
        .arg(&json)
        .output()
        .expect("collbench runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    let v = std::fs::read(&json)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| panic!("no JSON results\nstdout:\n{stdout}\nstderr:\n{stderr}"));
    (stdout, stderr, out.status.code(), v)
}

#[test]
fn sixty_four_local_ranks_sweep_correctly_over_a_ring_and_a_tree_of_connections() {
    let _one = serial();
    let (stdout, stderr, code, v) = run_json(&[
        "--np",
        "64",
        "-b",
        "8",
        "-e",
        "4K",
        "-f",
        "8",
        "-n",
        "2",
        "-w",
        "1",
        "--algo",
        "ring",
        "--collective",
        "all_reduce,all_gather",
    ]);
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let cb = &v["collbench"];
    assert_eq!(cb["complete"], true);
    assert_eq!(cb["summary"]["wrong"], 0, "{stdout}");
    assert_eq!(cb["run"]["nranks"], 64);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 8, "4 sizes x 2 collectives");
    assert!(results.iter().all(|r| r["algo"] == "ring"), "{stdout}");
    // The header says how long the bootstrap and the connections took, and how many there are.
    let launcher = stdout.lines().find(|l| l.starts_with("# Launcher:")).unwrap();
    assert!(
        launcher.contains(" bootstrap: ") && launcher.contains(" connect: "),
        "{launcher}"
    );
    assert!(cb["run"]["bootstrap_s"].as_f64().unwrap() > 0.0);
    assert!(cb["run"]["connect_s"].as_f64().unwrap() > 0.0);
    // Ring pairs (r, r+1 mod 64): 64; control tree pairs (v, v + 2^k), v a multiple of 2^(k+1): 63; the tree's
    // 32 pairs at distance one (even v) are ring pairs too, and 63 is not a power of two so the ring's
    // closing pair (63, 0) is not a tree pair: 64 + 63 - 32 = 95 of the 64*63/2 = 2016 pairs.
    let c = &cb["run"]["connections"];
    assert_eq!(c["pairs"], 95, "{c}");
    assert_eq!(c["all_pairs"], 64 * 63 / 2);
    assert_eq!(c["sockets"], 95, "one stream, one path");
    assert!(stdout.contains("# Connections: 95 of 2016 rank pairs"), "{stdout}");
}

#[test]
fn a_send_to_an_unconnected_peer_is_an_error_naming_both_ranks() {
    let _one = serial();
    let mut opts = Options::default();
    opts.algorithm.algo = AlgoChoice::Ring;
    opts.sweep.collectives = vec![Collective::AllReduce];
    let out = session::run_threads_with(8, &opts, Pairs::Needed, |s| {
        // No rank leaves (closing its sockets) before every rank has finished connecting: rank 0 would
        // otherwise see a finished peer's hang-up while it still waits for a slower one, and rightly give up.
        if let Err(e) = control::barrier(&mut s.transports[0]) {
            return Some(Err(e));
        }
        if s.world.rank != 0 {
            return None;
        }
        // Rank 0 of 8 on a ring and the control tree talks to 1, 2, 4 and 7: never to 3, 5 or 6.
        let stranger = (1..8)
            .find(|&p| !s.links.connected(0, p))
            .expect("a rank that is not a peer");
        Some(Ok((stranger, transport::send(&mut s.transports[0], stranger, b"x"))))
    });
    let (stranger, res) = match &out[0] {
        Ok(Some(Ok(x))) => x,
        other => panic!("rank 0 connected and passed the barrier: {other:?}"),
    };
    assert_eq!(*stranger, 3);
    let e = res.as_ref().expect_err("not connected").to_string();
    assert!(e.contains("rank 0 (host") && e.contains("rank 3"), "{e}");
    for r in &out[1..] {
        assert!(
            matches!(r, Ok(None)),
            "the other ranks connected, passed the barrier and returned: {r:?}"
        );
    }
}

/// One rank's descriptor and memory samples around the 10,000 collectives (rank 0 only).
struct Flat {
    fds: (usize, usize),
    rss: (u64, u64),
}

#[test]
fn ten_thousand_small_collectives_keep_descriptors_and_memory_flat() {
    let _one = serial();
    const CALLS: usize = 10_000;
    let opts = Options::default();
    let out = session::run_threads_with(4, &opts, Pairs::Needed, |s| {
        let mut e = Native::new(&mut s.transports[0], &opts.algorithm);
        let (dtype, op) = (Dtype::Float, Op::Sum);
        let send = [1u8; 8];
        let mut recv = [0u8; 8];
        let algo = e.algo(Collective::AllReduce, 8);
        assert_eq!(algo, Algo::RecDoubling);
        let mut call = |e: &mut Native<_>| {
            let args = Args {
                coll: Collective::AllReduce,
                dtype,
                op,
                root: 0,
                count: 2,
                send: Some(&send),
                recv: &mut recv,
            };
            e.run(algo, args)
        };
        // Warm-up: the workspace, the request slots and the allocator reach their steady size.
        for _ in 0..200 {
            call(&mut e)?;
        }
        // All ranks share this process, so only rank 0 samples: a sample reads /proc/self, and a
        // second rank reading it at the same moment would hold one more descriptor open.
        let sample = |rank: usize| (rank == 0).then(|| (memory::open_fds(), memory::rss()));
        e.barrier()?;
        let before = sample(s.world.rank);
        for _ in 0..CALLS {
            call(&mut e)?;
        }
        // Every rank is done before rank 0 samples again.
        e.barrier()?;
        let after = sample(s.world.rank);
        Ok::<_, collbench::error::Error>(before.zip(after).map(|(before, after)| Flat {
            fds: (before.0.expect("/proc/self/fd"), after.0.expect("/proc/self/fd")),
            rss: (before.1.expect("VmRSS"), after.1.expect("VmRSS")),
        }))
    });
    let mut flat: Vec<Option<Flat>> = out
        .into_iter()
        .map(|r| r.expect("connected").expect("10,000 all-reduces"))
        .collect();
    // Rank 0's samples are taken after every rank's warm-up and after every rank's last call, so
    // they cover the whole steady state.
    let f = flat[0].take().expect("rank 0 sampled");
    eprintln!(
        "rank 0 around {CALLS} all-reduces: descriptors {:?}, resident bytes {:?}",
        f.fds, f.rss
    );
    // Not one more descriptor (the bootstrap's may close meanwhile, so fewer is fine).
    assert!(
        f.fds.1 <= f.fds.0,
        "open descriptors grew from {} to {} over {CALLS} all-reduces",
        f.fds.0,
        f.fds.1
    );
    let allowance = 4 << 20;
    assert!(
        f.rss.1 <= f.rss.0 + allowance,
        "resident memory grew from {} to {} bytes over {CALLS} all-reduces (allowance {allowance})",
        f.rss.0,
        f.rss.1
    );
}

#[test]
fn peak_memory_per_rank_stays_within_three_messages_and_64_mib() {
    let _one = serial();
    let (stdout, stderr, code, v) = run_json(&["--np", "2", "-b", "1M", "-e", "16M", "-f", "4", "-n", "2", "-w", "1"]);
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let m = &v["collbench"]["summary"]["peak_memory"];
    let largest = 16u64 << 20;
    assert_eq!(m["largest_message"], largest);
    let bound = 3 * largest + (64 << 20);
    assert_eq!(m["bound_bytes"], bound);
    let per_rank: Vec<u64> = m["per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().expect("every rank read its peak"))
        .collect();
    assert_eq!(per_rank.len(), 2);
    let max = m["max_bytes"].as_u64().unwrap();
    assert_eq!(max, *per_rank.iter().max().unwrap());
    // The receive buffer alone holds the largest message, so a real peak is above it.
    assert!(max > largest, "peak {max} below the 16 MiB buffer: not measured");
    assert!(max <= bound, "peak {max} bytes exceeds 3 x 16 MiB + 64 MiB = {bound}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("# Peak memory per rank"))
        .unwrap();
    assert!(line.ends_with("= 112.0 MiB OK"), "{line}");
}
