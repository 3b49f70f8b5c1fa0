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
        let (ends, rest) = self.wait_for(ranks);
        for (_, mut c) in rest {
            let _ = c.kill();
            let _ = c.wait();
        }
        ends
    }

    /// Waits for the ranks in `ranks` and leaves every other rank running (or stopped) in the job.
    fn wait_leaving_the_rest(&mut self, ranks: &[usize]) -> Vec<End> {
        let (ends, rest) = self.wait_for(ranks);
        self.procs = rest;
        ends
    }

    /// Waits for the ranks in `ranks`; returns how they ended and the ranks not waited for.
    fn wait_for(&mut self, ranks: &[usize]) -> (Vec<End>, Vec<(usize, Child)>) {
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
                rest.push((r, c));
            }
        }
        let mut ends = Vec::new();
        for _ in ranks {
            let (r, status, at) = rx.recv_timeout(HANG).unwrap_or_else(|_| {
                for (_, c) in &mut rest {
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
        ends.sort_by_key(|e| e.rank);
        (ends, rest)
    }

    /// Sends `signal` to `rank`'s process.
    fn signal(&self, rank: usize, signal: &str) {
        let pid = self.procs.iter().find(|(r, _)| *r == rank).unwrap().1.id();
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{signal} {pid} failed");
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
fn a_rank_refusing_to_start_is_named_with_its_reason_by_every_rank() {
    // Rank 0's JSON file is already there and --force is not given: it refuses to start. It still serves the
    // rendezvous until ranks 1 and 2 were told, so they stop with its reason rather than wait out a bootstrap
    // deadline of ten minutes (the test's own hang guard ends first).
    let mut job = Job::start(3, &[], &[]);
    let json = job.path("r.json");
    std::fs::write(&json, "earlier results").unwrap();
    let json_s = json.to_str().unwrap().to_string();
    for r in 0..3 {
        job.spawn(r, &["-e", "8", "--bootstrap-timeout", "600", "-J", &json_s]);
    }
    let ends = job.wait(&[0, 1, 2]);
    let named = format!("rank 0 (host {}) refused to start: {json_s} exists", hostname());
    for e in &ends {
        assert_eq!(e.status.code(), Some(2), "rank {}:\n{}", e.rank, e.stderr);
        let line = e.error();
        assert!(line.contains("-J") && line.contains(&json_s), "rank {}: {line}", e.rank);
        assert!(
            !e.stderr.contains("did not join") && !e.stderr.contains("deadline"),
            "rank {}:\n{}",
            e.rank,
            e.stderr
        );
        if e.rank != 0 {
            assert!(line.contains(&named), "rank {}: {line}", e.rank);
        }
    }
    // Rank 0 says its own error, and only once.
    assert!(ends[0].error().contains("exists; use --force"), "{}", ends[0].stderr);
    assert_eq!(
        ends[0].stderr.matches("collbench: error").count(),
        1,
        "{}",
        ends[0].stderr
    );
    assert_eq!(text(&json), "earlier results");
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

/// Every rank failed as a peer failure naming `rank` (not a link), and `rank` says it stood still.
fn each_names_the_rank_that_stood_still(ends: &[End], rank: usize) {
    let culprit = format!("Culprit: rank {rank} (host {})", hostname());
    for e in ends {
        assert_eq!(e.status.code(), Some(3), "rank {}:\n{}", e.rank, e.stderr);
        let line = e.error();
        assert!(line.contains(&culprit), "rank {} names another culprit: {line}", e.rank);
        assert!(!line.contains("link between"), "rank {} blames a link: {line}", e.rank);
    }
    let own = ends.iter().find(|e| e.rank == rank).unwrap().error();
    assert!(own.contains("stood still"), "rank {rank} says why: {own}");
}

#[test]
fn a_stopped_rank_resumed_after_its_peers_gave_up_names_itself_like_them() {
    // Rank 2 stops at all_reduce; ranks 0 and 1 time out on it and leave. Resumed, rank 2 finds its peers
    // gone and their notes waiting: it was the one that stood still, so it names itself, as they did.
    let args = ["--collective", "all_reduce", "-b", "1M", "-e", "4M", "-T", "3"];
    let mut job = Job::start(
        3,
        &[0, 1, 2],
        &[&args[..], &["--fault", "2:all_reduce@4M:stop"]].concat(),
    );
    wait_until_stopped(&job, 2, "--fault:");
    let mut ends = job.wait_leaving_the_rest(&[0, 1]);
    job.signal(2, "CONT");
    ends.extend(job.wait(&[2]));
    each_names_the_rank_that_stood_still(&ends, 2);
}

#[test]
fn a_rank_stopped_from_outside_mid_sweep_and_resumed_names_itself_like_its_peers() {
    // As a user's SIGSTOP (or a debugger) would: wherever rank 2 is, waiting in poll(2) or between calls.
    let args = ["--collective", "all_reduce", "-b", "1M", "-e", "128M", "-T", "3"];
    let mut job = Job::start(3, &[0, 1, 2], &args);
    let started = Instant::now();
    while !text(&job.path("0.out")).contains("1048576") {
        assert!(
            started.elapsed() < HANG,
            "no point measured: {}",
            text(&job.path("0.err"))
        );
        std::thread::yield_now();
    }
    job.signal(2, "STOP");
    let mut ends = job.wait_leaving_the_rest(&[0, 1]);
    job.signal(2, "CONT");
    ends.extend(job.wait(&[2]));
    each_names_the_rank_that_stood_still(&ends, 2);
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
        relay: None,
        refused: None,
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

#[test]
fn a_failed_runs_files_say_they_are_incomplete_why_and_which_points_are_missing() {
    let mut job = Job::start(3, &[], &[]);
    let (json, csv, md) = (job.path("r.json"), job.path("r.csv"), job.path("r.md"));
    let mut args = SWEEP.to_vec();
    let files = [json.to_str().unwrap(), csv.to_str().unwrap(), md.to_str().unwrap()].map(String::from);
    args.extend(["--fault", "2:all_reduce@4M:kill", "-J", &files[0]]);
    args.extend(["--csv", &files[1], "--markdown", &files[2]]);
    for r in 0..3 {
        job.spawn(r, &args);
    }
    let ends = job.wait(&[0, 1, 2]);
    assert_eq!(ends[0].status.code(), Some(3), "{}", ends[0].stderr);
    let host = hostname();

    // JSON: not complete, and the error with its facts and the one point not measured.
    check_results_kept(&json);
    let v: Value = serde_json::from_str(&text(&json)).unwrap();
    assert_eq!(v["collbench"]["complete"], false, "{v}");
    let errors = v["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{v}");
    let e = &errors[0];
    assert_eq!(
        (&e["rank"], &e["host"], &e["culprit"]),
        (&2.into(), &host.as_str().into(), &true.into()),
        "{e}"
    );
    assert_eq!(e["exit_code"], 3, "{e}");
    assert!(
        e["phase"]
            .as_str()
            .unwrap_or_else(|| panic!("no phase: {e}"))
            .starts_with("all_reduce of 4 MiB"),
        "{e}"
    );
    assert!(
        ends[0].error().contains(e["message"].as_str().unwrap()),
        "{e}\n{}",
        ends[0].stderr
    );
    let missing = e["missing"].as_array().unwrap();
    assert_eq!(missing.len(), 1, "{e}");
    assert_eq!(
        (&missing[0]["collective"], &missing[0]["size"]),
        (&"all_reduce".into(), &(4u64 << 20).into())
    );

    // CSV: the rows measured, read by a parser that skips comments, then the one comment line.
    let body = text(&csv);
    let rows: Vec<csv::StringRecord> = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .from_reader(body.as_bytes())
        .records()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{e}:\n{body}"));
    assert_eq!(rows.len(), 4, "two points, two placements each:\n{body}");
    let last = body.lines().last().unwrap();
    assert!(last.starts_with("# incomplete: "), "{body}");
    for w in [
        &format!("Culprit: rank 2 (host {host})"),
        "1 planned point(s) not measured",
        "all_reduce of 4 MiB",
    ] {
        assert!(last.contains(w), "'{w}' missing: {last}");
    }

    // Markdown: the tables measured, then the section saying what is missing and why.
    let doc = text(&md);
    assert!(doc.contains("| 2097152 |"), "{doc}");
    let section = doc.split("## Incomplete run").nth(1).unwrap_or_else(|| panic!("{doc}"));
    for w in [
        &format!("- culprit: rank 2 (host {host})"),
        "- phase: all_reduce of 4 MiB",
        "- points not measured: 1",
        "all_reduce of 4 MiB (float sum)",
    ] {
        assert!(section.contains(w), "'{w}' missing: {section}");
    }
}

#[test]
fn with_a_timeout_shorter_than_the_work_every_rank_names_the_same_culprit() {
    // A -T of a few milliseconds fails the sweep with no rank stopped: every rank gives up waiting on
    // another at about the same moment. Whatever each saw first, all must end naming one culprit.
    let mut failed = 0;
    for t in ["0.001", "0.002", "0.004", "0.01"] {
        for _ in 0..2 {
            let mut job = Job::start(4, &[], &[]);
            for r in 0..4 {
                job.spawn(r, &["--collective", "all_reduce", "-b", "1M", "-e", "4M", "-T", t]);
            }
            let ends = job.wait(&[0, 1, 2, 3]);
            if ends.iter().all(|e| e.status.success()) {
                continue;
            }
            failed += 1;
            let culprits: Vec<&str> = ends
                .iter()
                .map(|e| {
                    assert_eq!(e.status.code(), Some(3), "-T {t}: rank {}:\n{}", e.rank, e.stderr);
                    let last = e.stderr.lines().last().unwrap_or_default();
                    assert_eq!(last, e.error(), "-T {t}: rank {}'s last line is its error", e.rank);
                    // A rank, or the link between two live ranks that each waited on the other: one answer.
                    let at = last
                        .rfind("Culprit: ")
                        .unwrap_or_else(|| panic!("-T {t}: rank {} names no culprit: {last}", e.rank));
                    &last[at..]
                })
                .collect();
            assert!(
                culprits.iter().all(|c| *c == culprits[0]),
                "-T {t}: the ranks name different culprits: {culprits:?}"
            );
        }
    }
    assert!(
        failed > 0,
        "no run failed, so nothing was checked: every -T was long enough here"
    );
}

/// Waits until `rank`'s stderr holds `line` and its process is stopped (state `T` in /proc): a fault that
/// stops a rank prints its line, then stops.
fn wait_until_stopped(job: &Job, rank: usize, line: &str) {
    let pid = job.procs.iter().find(|(r, _)| *r == rank).unwrap().1.id();
    let started = Instant::now();
    loop {
        let said = text(&job.path(&format!("{rank}.err"))).contains(line);
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state follows the command name, which ends at the last ')'.
        let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
        if said && state == Some(Some('T')) {
            return;
        }
        assert!(started.elapsed() < HANG, "rank {rank} never stopped: {stat}");
        std::thread::yield_now();
    }
}

#[test]
fn a_stalled_rendezvous_is_named_by_every_rank_that_joins_it() {
    // Rank 0 serves the rendezvous and stops (SIGSTOP) right after joining it itself; the kernel still takes
    // connections to it, so ranks 1 and 2, started only then, connect and hear nothing.
    let args = ["-e", "8", "--bootstrap-timeout", "3", "--fault", "0:bootstrap:stop"];
    let mut job = Job::start(3, &[0], &args);
    wait_until_stopped(&job, 0, "--fault: 0:bootstrap:stop");
    job.spawn(1, &args);
    job.spawn(2, &args);
    let root = job.root.clone();
    let ends = job.wait(&[1, 2]);
    for e in &ends {
        assert_eq!(e.status.code(), Some(3), "rank {}:\n{}", e.rank, e.stderr);
        let line = e.error();
        for w in [
            &format!("Culprit: the rendezvous at {root}, served by rank 0 (host 127.0.0.1)"),
            "during the bootstrap",
            "stopped, hung or starved",
            "kill -CONT",
        ] {
            assert!(line.contains(w), "rank {}: '{w}' missing from: {line}", e.rank);
        }
    }
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
