//! Faults on local ranks: every rank is its own process started as a launcher would (COLLBENCH_RANK,
//! COLLBENCH_WORLD_SIZE, COLLBENCH_ROOT, COLLBENCH_JOB_TOKEN), so each survivor's exit status, exit time
//! and message can be checked. Faults are placed with the hidden `--fault RANK:PHASE:ACTION` aid, so they
//! land exactly in the phase under test.
//!
//! The only time asserted is the promise: every surviving rank exits within the phase's timeout + 5 s,
//! counted from its start (so the bound also covers the work before the fault).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use collbench::world::{env, hostname, new_token, token_to_hex};
use serde_json::Value;

mod common;

/// A run that is not over by then has hung: the test fails and kills what is left.
const HANG: Duration = Duration::from_secs(120);

fn text(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// A port that was free a moment ago, for rank 0's rendezvous.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One job of `size` ranks on loopback; only the ranks in `start` are started.
struct Job {
    dir: tempfile::TempDir,
    root: String,
    token: String,
    size: usize,
    started: Instant,
    procs: Vec<(usize, Child)>,
}

/// How one rank ended.
struct End {
    rank: usize,
    status: ExitStatus,
    after: Duration,
    stdout: String,
    stderr: String,
}

impl End {
    /// The final `collbench: error:` line.
    fn error(&self) -> &str {
        self.stderr
            .lines()
            .rev()
            .find(|l| l.starts_with("collbench: error:"))
            .unwrap_or_else(|| panic!("rank {} printed no error:\n{}", self.rank, self.stderr))
    }
}

impl Job {
    fn start(size: usize, start: &[usize], args: &[&str]) -> Job {
        let dir = tempfile::tempdir().unwrap();
        let mut job = Job {
            root: format!("127.0.0.1:{}", free_port()),
            token: token_to_hex(&new_token()),
            size,
            dir,
            started: Instant::now(),
            procs: Vec::new(),
        };
        for &r in start {
            job.spawn(r, args);
        }
        job
    }

    fn spawn(&mut self, rank: usize, args: &[&str]) {
        let out = std::fs::File::create(self.dir.path().join(format!("{rank}.out"))).unwrap();
        let err = std::fs::File::create(self.dir.path().join(format!("{rank}.err"))).unwrap();
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("collbench"));
        c.arg("run")
            .args(["--no-progress", "-w", "1", "-n", "3"])
            .args(args)
            .env(env::RANK, rank.to_string())
            .env(env::WORLD_SIZE, self.size.to_string())
            .env(env::ROOT, &self.root)
            .env(env::JOB_TOKEN, &self.token)
            .env_remove(env::JOB_TOKEN_FILE)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        self.procs.push((rank, c.spawn().unwrap()));
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Waits for the ranks in `ranks` (each in its own thread, so each exit time is its own), then kills
    /// and reaps any other rank still there (a stopped one).
    fn wait(&mut self, ranks: &[usize]) -> Vec<End> {
        let (tx, rx) = mpsc::channel();
        let mut rest = Vec::new();
        for (r, mut c) in std::mem::take(&mut self.procs) {
            if ranks.contains(&r) {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let s = c.wait().unwrap();
                    let _ = tx.send((r, s, Instant::now()));
                });
            } else {
                rest.push(c);
            }
        }
        let mut ends = Vec::new();
        for _ in ranks {
            let (r, status, at) = rx.recv_timeout(HANG).unwrap_or_else(|_| {
                for c in &mut rest {
                    let _ = c.kill();
                }
                panic!("ranks {ranks:?} did not all exit within {HANG:?}: a hang")
            });
            ends.push(End {
                rank: r,
                status,
                after: at - self.started,
                stdout: text(&self.path(&format!("{r}.out"))),
                stderr: text(&self.path(&format!("{r}.err"))),
            });
        }
        for mut c in rest {
            let _ = c.kill();
            let _ = c.wait();
        }
        ends.sort_by_key(|e| e.rank);
        ends
    }
}

/// Every survivor failed as a peer failure (exit 3) within `bound`, and says `what`.
fn check_survivors(ends: &[End], bound: Duration, what: &[&str]) {
    for e in ends {
        assert_eq!(e.status.code(), Some(3), "rank {}:\n{}", e.rank, e.stderr);
        assert!(
            e.after <= bound,
            "rank {} took {:?}, more than {bound:?}:\n{}",
            e.rank,
            e.after,
            e.stderr
        );
        let line = e.error();
        for w in what {
            assert!(line.contains(w), "rank {}: '{w}' missing from: {line}", e.rank);
        }
    }
}

#[test]
fn a_rank_killed_during_the_bootstrap_is_named_at_once() {
    // Rank 1 is never started, so the bootstrap is still open when rank 2 joins and dies.
    let mut job = Job::start(
        3,
        &[0, 2],
        &["-e", "8", "--bootstrap-timeout", "60", "--fault", "2:bootstrap:kill"],
    );
    let ends = job.wait(&[0]);
    let culprit = format!("rank 2 (host {}", hostname());
    // Named long before the bootstrap deadline: the rendezvous saw the connection drop.
    check_survivors(
        &ends,
        Duration::from_secs(5),
        &[&culprit, "bootstrap", "had not joined"],
    );
}

#[test]
fn a_rank_killed_during_connection_set_up_is_named_by_every_survivor_long_before_the_deadline() {
    // Rank 2 finds rank 1's listener gone and gives up; rank 0, waiting for rank 1's connection, sees rank 2
    // hang up and gives up too, naming rank 1 as the one still missing. Neither waits for the minute.
    let mut job = Job::start(
        3,
        &[0, 1, 2],
        &["-e", "8", "--connect-timeout", "60", "--fault", "1:connect:kill"],
    );
    let ends = job.wait(&[0, 2]);
    let culprit = format!("rank 1 (host {}", hostname());
    check_survivors(&ends, Duration::from_secs(30), &[&culprit, "connection set-up"]);
}

/// The sweep of the mid-collective tests: three all_reduce points, the fault at the last.
const SWEEP: [&str; 8] = ["--collective", "all_reduce", "-b", "1M", "-e", "4M", "-T", "5"];

/// Rank 0 wrote the points measured before the fault to its JSON file.
fn check_results_kept(json: &Path) {
    let v: Value = serde_json::from_str(&text(json)).expect("rank 0 left a readable JSON file");
    let sizes: Vec<u64> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [1 << 20, 2 << 20], "{v}");
}

#[test]
fn a_rank_killed_in_a_large_all_reduce_is_named_and_earlier_results_are_kept() {
    let mut args = SWEEP.to_vec();
    args.extend(["--fault", "2:all_reduce@4M:kill", "-J"]);
    let mut job = Job::start(4, &[], &[]);
    let json = job.path("r.json");
    let json_s = json.to_str().unwrap().to_string();
    args.push(&json_s);
    for r in 0..4 {
        job.spawn(r, &args);
    }
    let ends = job.wait(&[0, 1, 2, 3]);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&ends[2].status),
        Some(9),
        "{}",
        ends[2].stderr
    );
    let survivors: Vec<End> = ends.into_iter().filter(|e| e.rank != 2).collect();
    let culprit = format!("Culprit: rank 2 (host {})", hostname());
    check_survivors(
        &survivors,
        Duration::from_secs(5 + 5),
        &[&culprit, "all_reduce of 4 MiB"],
    );
    check_results_kept(&json);
    assert!(survivors[0].stdout.contains("2097152"), "{}", survivors[0].stdout);
}

#[test]
fn a_stopped_rank_is_named_as_unresponsive_by_every_rank_alike() {
    let mut args = SWEEP.to_vec();
    args.extend(["--fault", "2:all_reduce@4M:stop"]);
    let mut job = Job::start(4, &[0, 1, 2, 3], &args);
    let ends = job.wait(&[0, 1, 3]);
    // The ranks waiting on rank 2 directly and those waiting on them all name rank 2, not a neighbour.
    let culprit = format!("Culprit: rank 2 (host {})", hostname());
    check_survivors(&ends, Duration::from_secs(5 + 5), &[&culprit, "all_reduce of 4 MiB"]);
    assert!(
        ends.iter().any(|e| e.error().contains("unresponsive")),
        "someone says why: {}",
        ends[0].error()
    );
}

#[test]
fn ranks_with_different_sizes_dtypes_and_collectives_are_refused_naming_the_fields() {
    let mut job = Job::start(2, &[], &[]);
    job.spawn(0, &["-b", "8", "-e", "1K", "-d", "float", "--collective", "all_reduce"]);
    job.spawn(
        1,
        &["-b", "16", "-e", "2K", "-d", "int32", "--collective", "all_gather"],
    );
    let ends = job.wait(&[0, 1]);
    for e in &ends {
        assert_eq!(e.status.code(), Some(2), "{}", e.stderr);
        let line = e.error();
        for field in ["rank 1", "sizes", "dtypes", "collectives"] {
            assert!(line.contains(field), "'{field}' missing: {line}");
        }
        assert!(!e.stdout.contains("# all_reduce"), "no data may move: {}", e.stdout);
    }
}

#[test]
fn a_rank_of_another_collbench_version_is_refused_naming_the_version() {
    use collbench::world::rendezvous::{join, Join};
    let mut job = Job::start(2, &[0], &["-e", "8"]);
    let token = collbench::world::token_from_hex(&job.token).unwrap();
    let me = Join {
        rank: 1,
        size: 2,
        host: hostname(),
        pid: std::process::id(),
        endpoints: vec![],
        version: "0.0.1-other".into(),
        consensus: serde_json::json!({}),
        job: vec![],
    };
    let e = join(&job.root, &token, &me, Duration::from_secs(60))
        .unwrap_err()
        .to_string();
    assert!(e.contains("version (0.0.1-other vs "), "{e}");
    let ends = job.wait(&[0]);
    assert_eq!(ends[0].status.code(), Some(2), "{}", ends[0].stderr);
    assert!(
        ends[0].error().contains("rank 1") && ends[0].error().contains("version"),
        "{}",
        ends[0].stderr
    );
}

#[test]
fn an_unreachable_rendezvous_says_which_address_and_how_long() {
    // Rank 1 alone: rank 0, which would serve the rendezvous, never starts.
    let mut job = Job::start(2, &[1], &["-e", "8", "--bootstrap-timeout", "2"]);
    let root = job.root.clone();
    let ends = job.wait(&[1]);
    let e = &ends[0];
    assert_eq!(e.status.code(), Some(3), "{}", e.stderr);
    let line = e.error();
    assert!(line.contains(&format!("rendezvous at {root}")), "{line}");
    assert!(line.contains("after trying for 2."), "{line}");
    assert!(e.after <= Duration::from_secs(2 + 5), "{:?}", e.after);
}

#[test]
fn the_header_prints_every_timeout() {
    let mut job = Job::start(1, &[], &[]);
    job.spawn(
        0,
        &[
            "-e",
            "8",
            "-T",
            "7",
            "--bootstrap-timeout",
            "9",
            "--connect-timeout",
            "8",
        ],
    );
    let ends = job.wait(&[0]);
    assert_eq!(ends[0].status.code(), Some(0), "{}", ends[0].stderr);
    assert!(
        ends[0]
            .stdout
            .contains("# Timeouts: bootstrap 9 s connect 8 s collective wait 7 s"),
        "{}",
        ends[0].stdout
    );
}

/// One point made slow on one rank (every iteration, as a loss spell would) is flagged in the table under
/// its sweep, in a `#` line parsers pass over, and warned of on stderr; the run still passes.
#[test]
fn a_point_slowed_on_one_rank_is_flagged_off_the_curve() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_collbench"))
        .env_remove("COLLBENCH_RANK")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("MASTER_ADDR")
        .args([
            "run",
            "--np",
            "2",
            "--collective",
            "all_reduce",
            "-b",
            "1K",
            "-e",
            "256K",
            "-n",
            "5",
            "-w",
            "1",
        ])
        .args(["--fault", "1:all_reduce@32K:slow", "-J"])
        .arg(&json)
        .output()
        .unwrap();
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{so}\n{se}");
    let flagged = "OFF CURVE: tcp@lo all_reduce 32768 B";
    assert!(se.contains(&format!("collbench: warning: {flagged}")), "{se}");
    let lines: Vec<&str> = so.lines().filter(|l| l.contains("OFF CURVE")).collect();
    assert_eq!(lines.len(), 1, "{so}");
    assert!(lines[0].starts_with(&format!("# {flagged}")), "{so}");
    // Only that point: its neighbours are on the curve.
    assert_eq!(se.matches("OFF CURVE").count(), 1, "{se}");
    // The JSON says so at that point alone, in the entry's collbench object the schema describes.
    let v: Value = serde_json::from_str(&text(&json)).unwrap();
    common::validate_against_schema(&v);
    for e in v["results"].as_array().unwrap() {
        let f = e["collbench"].get("off_curve");
        if e["size"] == 32768 {
            assert!(f.and_then(Value::as_f64).is_some_and(|f| f > 3.0), "{e}");
        } else {
            assert!(f.is_none(), "{e}");
        }
    }
}
