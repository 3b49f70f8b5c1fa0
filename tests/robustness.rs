//! The binary against what a careless user or a hostile neighbour does to it: output paths that are not
//! plain files, a launcher killed by pid, bad counts, a usage error every rank sees, a terminal shared with
//! the progress bar, a stderr closed under it, an IPv6 rendezvous address, an edited preflight file. Each test runs `collbench` as users do (local ranks on
//! loopback) and asserts the exit status, what reached the files and what was printed.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// A run that is not over by then has hung: the test fails and kills what is left.
const HANG: Duration = Duration::from_secs(120);

fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("collbench")
}

/// A short two-rank sweep: one collective, four sizes, one iteration.
const SHORT: [&str; 13] = [
    "run",
    "--np",
    "2",
    "-b",
    "8",
    "-e",
    "64",
    "-n",
    "1",
    "-w",
    "0",
    "--collective",
    "all_reduce",
];

fn run(extra: &[&str]) -> Output {
    Command::new(bin())
        .args(SHORT)
        .arg("--no-progress")
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn link(dir: &Path, name: &str, to: &str) -> PathBuf {
    let l = dir.join(name);
    std::os::unix::fs::symlink(to, &l).unwrap();
    l
}

fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).unwrap().file_type().is_symlink()
}

// --- item 1: --force and output paths that are not regular files --------------------------------------

#[test]
fn a_character_device_is_written_in_place_without_force() {
    let dir = tempfile::tempdir().unwrap();
    // A link to /dev/null: on a build that replaced what it wrote to, only the link would be lost.
    let null = link(dir.path(), "null.json", "/dev/null");
    let o = run(&["-J", s(&null)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(is_link(&null));
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
}

#[test]
fn a_full_device_is_an_io_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let full = link(dir.path(), "full.md", "/dev/full");
    let o = run(&["--markdown", s(&full), "--force"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(
        err.contains("full.md") && err.contains("No space left on device"),
        "{err}"
    );
    assert!(is_link(&full), "the link to /dev/full was replaced");
}

#[test]
fn a_fifo_gets_one_complete_document() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("results.json");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let o = run(&["-J", s(&fifo)]);
    // A reader still waiting (the run never opened the FIFO) is let go, so the test fails rather than hangs.
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo);
    }
    let got = reader.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&got).unwrap_or_else(|e| panic!("not one JSON document ({e}):\n{got}"));
    assert_eq!(v["collbench"]["complete"], true);
    assert_eq!(v["results"].as_array().unwrap().len(), 4);
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn a_link_to_a_regular_file_is_followed_only_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.json");
    std::fs::write(&real, "old\n").unwrap();
    let l = link(dir.path(), "out.json", "real.json");
    let o = run(&["-J", s(&l)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    let o = run(&["-J", s(&l), "--force"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(is_link(&l), "the link was replaced instead of followed");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
    assert_eq!(v["collbench"]["complete"], true);
}

#[test]
fn a_socket_or_directory_is_refused_even_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("s.json");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    for (flag, path, what) in [
        ("-J", &sock, "is a socket"),
        ("--markdown", &dir.path().to_path_buf(), "is a directory"),
    ] {
        let o = run(&[flag, s(path), "--force"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(what) && stderr(&o).contains(flag), "{}", stderr(&o));
        assert!(o.stdout.is_empty(), "measured before refusing");
    }
    assert!(std::fs::symlink_metadata(&sock).unwrap().file_type().is_socket());
}

// --- item 6: the local launcher killed by pid ----------------------------------------------------------

/// Starts `run --np 2` with rank 0 stopping itself (SIGSTOP) at all_gather, so the run stands still with
/// every all_reduce point (and the all_gather points that round to 0 bytes) in its JSON file; sends `sig` to the launcher's pid only; every rank must end
/// (their end closes the stderr they share), the file must keep the four points, marked incomplete.
fn launcher_killed_by(sig: libc::c_int) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let (mut c, mut said, rx) =
        started_until_fault(&[&stopping_at_all_gather("0:all_gather@8:stop")[..], &["-J", s(&json)]].concat());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let pids: Vec<i32> = v["collbench"]["run"]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["pid"].as_i64().unwrap() as i32)
        .collect();
    assert_eq!(pids.len(), 2, "{v}");
    // SAFETY: kill has no memory-safety preconditions; the pid is our child, not yet reaped.
    unsafe { libc::kill(c.id() as i32, sig) };
    let ended = loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Some(l)) => said.push(l),
            Ok(None) => break true,
            Err(_) => break false,
        }
    };
    if !ended {
        for &p in &pids {
            // SAFETY: as above; these are the ranks this test started, left running by the bug under test.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
    let status = c.wait().unwrap();
    assert!(
        ended,
        "ranks {pids:?} still running 60 s after the launcher got signal {sig}:\n{}",
        said.join("\n")
    );
    match sig {
        libc::SIGKILL => assert_eq!(status.signal(), Some(libc::SIGKILL)),
        _ => {
            assert_eq!(status.code(), Some(128 + sig), "{}", said.join("\n"));
            assert!(
                said.iter().any(|l| l.contains("the launcher got SIG")),
                "{}",
                said.join("\n")
            );
        }
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["collbench"]["complete"], false, "{v}");
    let all_reduce = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["collective"] == "all_reduce")
        .count();
    assert_eq!(all_reduce, 4, "{v}");
}

#[test]
fn sigkill_to_the_launcher_stops_its_ranks() {
    launcher_killed_by(libc::SIGKILL);
}

#[test]
fn sigterm_to_the_launcher_stops_its_ranks() {
    launcher_killed_by(libc::SIGTERM);
}

#[test]
fn sigint_to_the_launcher_stops_its_ranks() {
    launcher_killed_by(libc::SIGINT);
}

// --- item 7: rough edges --------------------------------------------------------------------------------

#[test]
fn an_unwritable_chart_directory_is_a_usage_error_before_measuring() {
    // /proc/self exists and takes no new files, for root too.
    for dir in ["/proc/self", "/proc/self/charts"] {
        let o = run(&["--plot", dir]);
        assert_eq!(o.status.code(), Some(2), "{dir}: {}", stderr(&o));
        assert!(stderr(&o).contains("--plot"), "{}", stderr(&o));
        assert!(o.stdout.is_empty(), "measured before refusing --plot {dir}");
    }
}

#[test]
fn compare_says_n_a_where_a_zero_byte_point_has_no_change() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("a.json");
    // Sizes 0, 32 and 64: -f cannot grow from 0, so -i steps by bytes.
    let o = Command::new(bin())
        .args([
            "run", "--np", "2", "-b", "0", "-i", "32", "-e", "64", "-n", "1", "-w", "0",
        ])
        .args(["--collective", "all_reduce", "--no-progress", "-J", s(&json)])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = Command::new(bin())
        .args(["compare", s(&json), s(&json)])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.to_lowercase().contains("nan"), "{out}");
    assert!(out.contains("n/a"), "{out}");
}

#[test]
fn negative_counts_are_refused_naming_the_flag() {
    for (flag, long) in [
        ("-w", "--warmup_iters"),
        ("-n", "--iters"),
        ("--np", "--np"),
        ("-r", "--root"),
    ] {
        let o = Command::new(bin()).args(["run", flag, "-1"]).output().unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(long) && err.contains("negative"), "{flag}: {err}");
    }
}

/// One rank started by hand as a launcher would, with the rendezvous at `root`.
fn lone_rank(rank: usize, root: &str) -> Output {
    Command::new(bin())
        .args(["run", "--no-progress", "-e", "8", "--bootstrap-timeout", "1"])
        .env("COLLBENCH_RANK", rank.to_string())
        .env("COLLBENCH_WORLD_SIZE", "2")
        .env("COLLBENCH_ROOT", root)
        .env("COLLBENCH_JOB_TOKEN", "00112233445566778899aabbccddeeff")
        .env_remove("COLLBENCH_JOB_TOKEN_FILE")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn bootstrap_deadlines_name_the_right_flag_and_count() {
    // Nothing listens on port 1: the rank gives up at its bootstrap deadline.
    let o = lone_rank(1, "127.0.0.1:1");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("--bootstrap-timeout") && !err.contains("-T/--timeout"),
        "{err}"
    );
    // Rank 0 serves the rendezvous; rank 1 never comes. The port was free a moment ago; another test's
    // listener may take it first, so a port found in use is tried again.
    let o = (0..5)
        .map(|_| {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            lone_rank(0, &format!("127.0.0.1:{port}"))
        })
        .find(|o| !stderr(o).contains("in use"))
        .expect("five free ports taken at once");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("rank 1 did not join") && err.contains("did it start"),
        "{err}"
    );
}

/// One rank of a 3-rank job started by hand, rendezvous at `root`, a 3 s bootstrap deadline; `extra` last.
fn job_rank(rank: usize, root: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(["run", "--no-progress", "-e", "8", "-T", "5", "--bootstrap-timeout", "3"])
        .args(["--connect-timeout", "3"])
        .args(extra)
        .env("COLLBENCH_RANK", rank.to_string())
        .env("COLLBENCH_WORLD_SIZE", "3")
        .env("COLLBENCH_ROOT", root)
        .env("COLLBENCH_JOB_TOKEN", "00112233445566778899aabbccddeeff")
        .env_remove("COLLBENCH_JOB_TOKEN_FILE")
        .stdin(Stdio::null());
    c
}

/// The state letter of process `pid` (`T` when stopped), from /proc.
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next())
}

/// Starts rank 0 of a 3-rank job on a free port with `--fault 0:bootstrap:stop` and reads its stderr up to
/// the fault line; None when the port was taken meanwhile. Gives the rendezvous address, the stopped rank,
/// its stderr and what it said so far.
fn stopped_rank0() -> Option<(
    String,
    std::process::Child,
    BufReader<std::process::ChildStderr>,
    String,
)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let root = format!("127.0.0.1:{port}");
    let mut r0 = job_rank(0, &root, &["--fault", "0:bootstrap:stop"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err0 = BufReader::new(r0.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("--fault") {
        let mut l = String::new();
        if err0.read_line(&mut l).unwrap() == 0 {
            r0.wait().unwrap();
            assert!(said.contains("in use"), "rank 0 ended before its fault:\n{said}");
            return None;
        }
        said.push_str(&l);
    }
    Some((root, r0, err0, said))
}

#[test]
fn a_rendezvous_stopped_through_its_deadline_blames_itself_not_the_ranks() {
    // Rank 0 serves the rendezvous, sends its own join and stops itself (SIGSTOP). The port was free a moment
    // ago; another test's listener may take it first, so a port found in use is tried again.
    let (root, mut r0, mut err0, mut said) = (0..5)
        .find_map(|_| stopped_rank0())
        .expect("five free ports taken at once");
    // Ranks 1 and 2 come while it stands still, and give up at their deadline naming it.
    for r in [1, 2] {
        let o = job_rank(r, &root, &[]).output().unwrap();
        assert_eq!(o.status.code(), Some(3), "rank {r}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("Culprit: the rendezvous at {root}, served by rank 0")),
            "rank {r}: {}",
            stderr(&o)
        );
    }
    let pid = r0.id();
    assert_eq!(proc_state(pid), Some('T'), "rank 0 should still be stopped");
    // SAFETY: kill has no memory-safety preconditions; the pid is our child, not yet reaped.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGCONT) }, 0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err0, &mut rest).unwrap();
    said.push_str(&rest);
    let status = r0.wait().unwrap();
    assert_eq!(status.code(), Some(3), "{said}");
    assert!(
        said.contains("did not run for") && said.contains("Culprit: this process (the rendezvous), not the ranks"),
        "{said}"
    );
    assert!(
        !said.contains("did they start"),
        "rank 0 blamed the ranks that came: {said}"
    );
}

#[test]
fn a_usage_error_every_rank_sees_is_printed_once() {
    for args in [
        &["--transport", "tcp,tcp@lo"][..],
        &["-r", "5", "--collective", "broadcast"][..],
    ] {
        let o = Command::new(bin())
            .args(["run", "--np", "3", "-e", "8", "-n", "1", "-w", "0", "--no-progress"])
            .args(args)
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.matches("collbench: error:").count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

// --- item 8: terminals and pipes ------------------------------------------------------------------------

/// The lines a terminal shows after `raw`: carriage return, line feed, erase in line (`ESC[K`, `ESC[2K`),
/// erase below (`ESC[J`) and cursor up (`ESC[nA`) are applied; other escape sequences are dropped.
fn screen(raw: &str) -> Vec<String> {
    let mut lines: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut col) = (0usize, 0usize);
    let mut it = raw.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\r' => col = 0,
            '\n' => {
                row += 1;
                col = 0;
                if row == lines.len() {
                    lines.push(Vec::new());
                }
            }
            '\x1b' => {
                if it.peek() != Some(&'[') {
                    continue;
                }
                it.next();
                let mut param = String::new();
                let mut end = ' ';
                for d in it.by_ref() {
                    if d.is_ascii_alphabetic() || d == '~' {
                        end = d;
                        break;
                    }
                    param.push(d);
                }
                match end {
                    'K' if param == "2" => lines[row].clear(),
                    'K' => lines[row].truncate(col),
                    'J' => {
                        lines[row].truncate(col);
                        lines.truncate(row + 1);
                    }
                    'A' => row = row.saturating_sub(param.parse().unwrap_or(1)),
                    _ => {}
                }
            }
            c => {
                let line = &mut lines[row];
                while line.len() < col {
                    line.push(' ');
                }
                if col < line.len() {
                    line[col] = c;
                } else {
                    line.push(c);
                }
                col += 1;
            }
        }
    }
    lines
        .into_iter()
        .map(|l| l.into_iter().collect::<String>().trim_end().to_string())
        .collect()
}

#[test]
fn the_screen_model_applies_what_a_terminal_does() {
    assert_eq!(screen("bar 1/8\r\x1b[2Krow\r\nnext"), ["row", "next"]);
    assert_eq!(screen("a\nbar\x1b[1A\r\x1b[2K"), ["", "bar"]);
    assert_eq!(screen("bar 1/8   row\n"), ["bar 1/8   row", ""]);
}

#[test]
fn on_a_terminal_the_progress_bar_leaves_no_line_between_table_rows() {
    // `script` runs the command on a pseudo-terminal and copies what it shows.
    let cmd = format!("{} run --np 2 -b 8 -e 1K -n 1 -w 0 --collective all_reduce", s(&bin()));
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .expect("script (util-linux) runs a command on a pseudo-terminal");
    let raw = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{raw}");
    assert!(
        raw.contains('\u{2591}') || raw.contains('\u{2588}'),
        "no progress bar was drawn:\n{raw}"
    );
    let shown = screen(&raw);
    let rows = shown.iter().filter(|l| l.trim_end().ends_with("rec_doubling")).count();
    assert_eq!(rows, 8, "{}", shown.join("\n"));
    let stale: Vec<&String> = shown
        .iter()
        .filter(|l| l.contains('\u{2591}') || l.contains('\u{2588}') || l.contains("/8 all_reduce"))
        .collect();
    assert!(
        stale.is_empty(),
        "progress text left on screen: {stale:#?}\n{}",
        shown.join("\n")
    );
}

#[test]
fn a_closed_stderr_neither_panics_nor_loses_results() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let charts = dir.path().join("charts");
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the two-element array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just made by pipe and are owned here alone.
    let (read, write) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    // As `2>&1 >/dev/null | head -2` ends up: nobody reads stderr any more, so every write to it fails.
    drop(read);
    let o = Command::new(bin())
        .args(SHORT)
        .args(["-J", s(&json), "--plot", s(&charts)])
        .stdin(Stdio::null())
        .stderr(Stdio::from(write))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["collbench"]["complete"], true);
    assert!(std::fs::read_dir(&charts).unwrap().count() > 0, "no chart written");
}

/// Every line of src/ outside unit tests (before `#[cfg(test)]`, and not in a `tests.rs`) that `hit` matches,
/// as `file:line`.
fn code_lines_matching(hit: impl Fn(&str) -> bool) -> Vec<String> {
    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("tests.rs") {
                out.push(p);
            }
        }
    }
    let mut all = Vec::new();
    files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut all);
    let mut found = Vec::new();
    for f in all {
        let text = std::fs::read_to_string(&f).unwrap();
        // Unit tests (after `#[cfg(test)]`) may print as they like.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, line) in code.lines().enumerate() {
            if hit(line) {
                found.push(format!("{}:{}", f.display(), i + 1));
            }
        }
    }
    found
}

/// `eprintln!` panics when stderr is a closed pipe; the code writes to stderr through `error::stderr!`.
#[test]
fn no_eprintln_is_left_outside_tests() {
    let found = code_lines_matching(|l| l.contains("eprintln!(") || l.contains("eprint!("));
    assert!(found.is_empty(), "use crate::error::stderr! instead at {found:#?}");
}

/// A pipe whose reader is gone: every write to it fails with EPIPE, as `| head` or `| true` leave it.
fn closed_pipe() -> std::os::fd::OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: pipe writes two descriptors into the two-element array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just made by pipe and are owned here alone.
    let (read, write) = unsafe {
        use std::os::fd::FromRawFd;
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    drop(read);
    write
}

/// `run -J f | head`: the reader going away stops nothing; the file keeps every point.
#[test]
fn a_closed_stdout_neither_stops_the_run_nor_loses_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = Command::new(bin())
        .args(SHORT)
        .args(["--no-progress", "-J", s(&json)])
        .stdin(Stdio::null())
        .stdout(Stdio::from(closed_pipe()))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("standard output was closed by its reader"),
        "{}",
        stderr(&o)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["collbench"]["complete"], true);
    // 8, 16, 32 and 64 bytes.
    assert_eq!(v["results"].as_array().unwrap().len(), 4);
}

/// Every command's stdout: a closed pipe is no failure (no panic, exit 101), a full device is exit 4 naming
/// standard output.
#[test]
fn every_command_survives_a_closed_stdout_and_names_a_full_one() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = run(&["-J", s(&json)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let pre = dir.path().join("p.json");
    let o = Command::new(bin())
        .args([
            "preflight",
            "--np",
            "2",
            "--bandwidth-bytes",
            "1M",
            "--repeat",
            "1",
            "--no-pairwise",
            "-J",
        ])
        .arg(&pre)
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let charts = dir.path().join("charts");
    let commands: Vec<Vec<&str>> = vec![
        vec!["compare", s(&json), s(&json)],
        vec!["info"],
        vec!["model", s(&json), "--target-ranks", "8"],
        vec!["plot", s(&json), "--out", s(&charts)],
        vec!["selftest", "--bytes", "64K", "--iters", "1"],
        vec!["pairwise", "--np", "2", "--bytes", "64K", "-n", "1", "--lat-iters", "5"],
        vec!["preflight", "--from-results", s(&pre)],
    ];
    for args in &commands {
        let o = Command::new(bin())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(closed_pipe()))
            .output()
            .unwrap();
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{args:?} with a closed stdout: {:?}\n{}",
            o.status,
            stderr(&o)
        );
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let o = Command::new(bin())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(full))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(4), "{args:?} into /dev/full: {}", stderr(&o));
        assert!(
            stderr(&o).contains("writing to standard output"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}

/// `print!` panics on a closed or full stdout; the code writes it through `report::stdout`.
#[test]
fn no_print_is_left_outside_tests() {
    let found = code_lines_matching(|line| {
        let l = line.replace("eprint", "");
        l.contains("print!(") || l.contains("println!(")
    });
    assert!(
        found.is_empty(),
        "use crate::report::stdout::print instead at {found:#?}"
    );
}

/// `-J FIFO` with nobody reading it: the run ends (exit 4, naming the FIFO and the missing reader) instead
/// of waiting at its end for ever, `--force` or not.
#[test]
fn a_fifo_nobody_reads_ends_the_run_instead_of_blocking_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("results.fifo");
    let c = std::ffi::CString::new(s(&fifo)).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path, which `c` owns for the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for force in [false, true] {
        let mut args = vec!["-J", s(&fifo)];
        if force {
            args.push("--force");
        }
        let o = assert_cmd::Command::new(bin())
            .args(SHORT)
            .arg("--no-progress")
            .args(&args)
            .timeout(HANG)
            .output()
            .expect("the run ended");
        assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("results.fifo") && stderr(&o).contains("no process read it"),
            "{}",
            stderr(&o)
        );
        // The table was printed: what was measured is not lost.
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("all_reduce"),
            "force {force}"
        );
    }
}

/// Two outputs that are one file however spelled (`./x`, a link to it, `-` and `/dev/stdout`) are refused
/// before anything runs.
#[test]
fn two_outputs_to_one_file_are_refused_however_spelled() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x");
    let dotted = format!("{}/./x", dir.path().display());
    let l = link(dir.path(), "l", s(&x));
    for (a, b, flag) in [
        (s(&x), dotted.as_str(), "--markdown"),
        (s(&x), s(&l), "--csv"),
        ("-", "/dev/stdout", "--csv"),
    ] {
        let o = run(&["-J", a, flag, b]);
        assert_eq!(o.status.code(), Some(2), "{a} {b}: {}", stderr(&o));
        assert!(stderr(&o).contains("same file as -J"), "{a} {b}: {}", stderr(&o));
        assert!(stderr(&o).contains(flag), "{a} {b}: {}", stderr(&o));
        assert!(!x.exists(), "nothing ran");
    }
}

/// `-J -` and `-J /dev/stdout` put the whole JSON document alone on stdout (for `| jq`), the table on stderr,
/// and no file named `-`.
#[test]
fn json_on_stdout_is_alone_there_and_the_table_goes_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    for target in ["-", "/dev/stdout"] {
        let o = Command::new(bin())
            .args(SHORT)
            .args(["--no-progress", "-J", target])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{target}: {}", stderr(&o));
        let v: Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{target}: stdout is not one JSON document ({e})"));
        assert_eq!(v["results"].as_array().unwrap().len(), 4, "{target}");
        assert!(stderr(&o).contains("all_reduce"), "{target}: the table is on stderr");
        assert!(!dir.path().join("-").exists(), "{target}: a file named '-' was made");
    }
}

/// The short run on `np` ranks (plus `extra`) under `ulimit -n` soft and hard limits as given.
fn run_with_nofile(soft: u64, hard: u64, np: &str, extra: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(bin());
    // SHORT is `run --np 2 ...`: its rank count replaced.
    c.args(["run", "--np", np])
        .args(&SHORT[3..])
        .arg("--no-progress")
        .args(extra)
        .stdin(Stdio::null());
    // SAFETY: setrlimit is async-signal-safe and changes only the child's own limits.
    unsafe {
        c.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().unwrap()
}

#[test]
fn two_ranks_run_under_ulimit_n_64_and_a_run_that_cannot_fit_is_a_local_error() {
    // A soft limit of 64 under a higher hard one is raised as far as the run needs.
    let out = run_with_nofile(64, 4096, "2", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // 64 for both: two ranks need fewer than that.
    let out = run_with_nofile(64, 64, "2", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Eight ranks of 16 streams per peer cannot fit in 64 descriptors: exit 2, naming the limit and the need.
    let out = run_with_nofile(64, 64, "8", &["--streams", "16"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ulimit -n")
            && err.contains(" x 16 streams")
            && err.contains("but the limit is 64 and the hard limit 64"),
        "{err}"
    );
}

/// `-` is standard output whatever it is: a file the shell opened with `>` gets the whole document (no
/// "exists" refusal, no truncation by a rename over it), one opened with `>>` keeps its earlier lines, and
/// `--csv -` and `--markdown -` write there too rather than files named `-`. Each is valid for its reader.
#[test]
fn dash_writes_to_a_redirected_or_appended_stdout_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let into = |name: &str, append: bool, extra: &[&str]| {
        let path = dir.path().join(name);
        if append {
            std::fs::write(&path, "earlier line\n").unwrap();
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(&path)
            .unwrap();
        let o = Command::new(bin())
            .args(SHORT)
            .arg("--no-progress")
            .args(extra)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(file)
            .output()
            .unwrap();
        (o, std::fs::read_to_string(&path).unwrap())
    };
    let (o, text) = into("out.json", false, &["-J", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not one JSON document ({e}): {text}"));
    assert_eq!(v["results"].as_array().unwrap().len(), 4);
    // --force changes nothing for standard output.
    let (o, text) = into("forced.json", false, &["-J", "-", "--force"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(serde_json::from_str::<Value>(&text).is_ok(), "{text}");
    let (o, text) = into("app.log", true, &["-J", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rest = text
        .strip_prefix("earlier line\n")
        .unwrap_or_else(|| panic!("the log lost its line: {text}"));
    assert!(serde_json::from_str::<Value>(rest).is_ok(), "{rest}");
    let (o, text) = into("out.csv", false, &["--csv", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    assert_eq!(rows.records().count(), 8, "{text}");
    assert!(stderr(&o).contains("all_reduce"), "the table goes to stderr");
    let (o, text) = into("out.md", false, &["--markdown", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(text.contains("| size"), "{text}");
    assert!(!dir.path().join("-").exists(), "a file named '-' was made");
}

/// A file that appears at `-J`'s path after the run checked its outputs (another run, a hand) is never
/// replaced without --force: the run exits 4 naming it and keeps its own results under a name it gives.
#[test]
fn an_output_file_that_appears_during_the_run_is_kept_and_so_are_the_results() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let root = format!("127.0.0.1:{port}");
    let rank = |r: usize| {
        let mut c = Command::new(bin());
        c.args(["run", "--no-progress", "-b", "8", "-e", "64", "-n", "1", "-w", "0"])
            .args([
                "--collective",
                "all_reduce",
                "--bootstrap-timeout",
                "60",
                "-J",
                s(&json),
            ])
            .env("COLLBENCH_RANK", r.to_string())
            .env("COLLBENCH_WORLD_SIZE", "2")
            .env("COLLBENCH_ROOT", &root)
            .env("COLLBENCH_JOB_TOKEN", "00112233445566778899aabbccddeeff")
            .env_remove("COLLBENCH_JOB_TOKEN_FILE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    };
    // Rank 0 checks its outputs, then serves the rendezvous and waits there for rank 1.
    let rank0 = rank(0).spawn().unwrap();
    let deadline = std::time::Instant::now() + HANG;
    while std::net::TcpStream::connect(&root).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "rank 0 never served its rendezvous"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(&json, "another run's results").unwrap();
    let o1 = rank(1).output().unwrap();
    let o0 = rank0.wait_with_output().unwrap();
    assert_eq!(o0.status.code(), Some(4), "{}", stderr(&o0));
    let err = stderr(&o0);
    assert!(err.contains("--force") && err.contains("kept in"), "{err}");
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "another run's results");
    let kept_path = err
        .split("kept in ")
        .nth(1)
        .map(|t| t.split_whitespace().next().unwrap().trim_end_matches([')', ';', '.']))
        .unwrap();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(kept_path).unwrap()).unwrap();
    assert!(v["results"].is_array(), "{v}");
    // Rank 1 learns that rank 0 gave up.
    assert_ne!(o1.status.code(), Some(0), "{}", stderr(&o1));
}

// --- hardening: inputs read from the environment and from files ---------------------------------------

/// One rank of a 2-rank job started by hand, the rendezvous address given by `vars` (with the token).
fn rank_with(rank: usize, vars: &[(&str, String)]) -> std::process::Child {
    let mut c = Command::new(bin());
    c.args(["run", "--no-progress", "-e", "8", "-n", "1", "-w", "0", "--iface", "lo"])
        .args(["--bootstrap-timeout", "20"])
        .env("COLLBENCH_RANK", rank.to_string())
        .env("COLLBENCH_WORLD_SIZE", "2")
        .env("COLLBENCH_JOB_TOKEN", "00112233445566778899aabbccddeeff")
        .env_remove("COLLBENCH_ROOT")
        .env_remove("MASTER_ADDR")
        .env_remove("MASTER_PORT")
        .env_remove("COLLBENCH_JOB_TOKEN_FILE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

#[test]
fn an_ipv6_rendezvous_address_works_in_brackets_and_bare() {
    // `::1` was read as host ":" and port 1, and the rank waited out its whole bootstrap; so was an address
    // with its bracket left open. That one is refused at once now, naming the variable.
    let o = rank_with(0, &[("COLLBENCH_ROOT", "[::1".to_string())])
        .wait_with_output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("COLLBENCH_ROOT: '[::1' opens a bracket it does not close"),
        "{}",
        stderr(&o)
    );
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("skipped the run: this host has no IPv6 loopback (::1)");
        return;
    }
    // The port was free a moment ago; another test's listener may take it first, so one found in use is
    // tried again.
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("[::1]:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // Rank 0 is given the address in brackets with its port, rank 1 bare with the port apart, as torchrun
        // sets MASTER_ADDR and MASTER_PORT.
        let r0 = rank_with(0, &[("COLLBENCH_ROOT", format!("[::1]:{port}"))]);
        let r1 = rank_with(
            1,
            &[("MASTER_ADDR", "::1".to_string()), ("MASTER_PORT", port.to_string())],
        );
        let (o0, o1) = (r0.wait_with_output().unwrap(), r1.wait_with_output().unwrap());
        if stderr(&o0).contains("in use") {
            continue;
        }
        assert_eq!(o0.status.code(), Some(0), "rank 0: {}", stderr(&o0));
        assert_eq!(o1.status.code(), Some(0), "rank 1: {}", stderr(&o1));
        assert!(
            String::from_utf8_lossy(&o0.stdout).contains("all_reduce"),
            "rank 0 printed no table:\n{}",
            String::from_utf8_lossy(&o0.stdout)
        );
        return;
    }
    panic!("five free ports taken at once");
}

#[test]
fn preflight_from_results_refuses_a_negative_time_naming_the_file_and_the_point() {
    // It judged the file as read and printed "inf GB/s".
    let dir = tempfile::tempdir().unwrap();
    let pre = dir.path().join("p.json");
    let o = Command::new(bin())
        .args([
            "preflight",
            "--np",
            "2",
            "--bandwidth-bytes",
            "1M",
            "--repeat",
            "1",
            "--no-pairwise",
            "-J",
        ])
        .arg(&pre)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", stderr(&o));
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&pre).unwrap()).unwrap();
    let last = v["results"].as_array().unwrap().len() - 1;
    v["results"][last]["out_of_place"]["time"] = serde_json::json!(-5.0);
    let edited = dir.path().join("edited.json");
    std::fs::write(&edited, serde_json::to_string(&v).unwrap()).unwrap();
    let o = Command::new(bin())
        .args(["preflight", "--from-results", s(&edited)])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{err}\n{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        err.contains(&format!("--from-results {}", s(&edited)))
            && err.contains(&format!("results[{last}] ("))
            && err.contains("out_of_place.time = -5"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains("inf GB/s"));
}

// --- a signal leaves every output complete or marked ---------------------------------------------------

/// `run --np 2` over two small sizes with `fault` placed (a rank stopping itself, `R:all_gather@8:stop`).
fn stopping_at_all_gather(fault: &'static str) -> Vec<&'static str> {
    vec![
        "run",
        "--np",
        "2",
        "-b",
        "8",
        "-e",
        "64",
        "-n",
        "1",
        "-w",
        "0",
        "--no-progress",
        "--collective",
        "all_reduce,all_gather",
        "-T",
        "600",
        "--fault",
        fault,
    ]
}

/// Starts `collbench ARGS` in a process group of its own, its stderr read line by line, and waits for the
/// `--fault` line (a rank stopped itself, so the job stands still mid-run). Gives the child, the lines so far
/// and the receiver of the rest.
fn started_until_fault(args: &[&str]) -> (std::process::Child, Vec<String>, mpsc::Receiver<Option<String>>) {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(bin())
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let err = c.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines() {
            let _ = tx.send(Some(l.unwrap_or_default()));
        }
        let _ = tx.send(None);
    });
    let mut said = Vec::new();
    loop {
        match rx.recv_timeout(HANG) {
            Ok(Some(l)) => {
                let fault = l.contains("--fault");
                said.push(l);
                if fault {
                    return (c, said, rx);
                }
            }
            other => {
                let _ = c.kill();
                let _ = c.wait();
                panic!("no fault line ({other:?}):\n{}", said.join("\n"));
            }
        }
    }
}

/// Reads the rest of the child's stderr and its status; kills the group if it outlives `HANG`.
fn ended(mut c: std::process::Child, mut said: Vec<String>, rx: mpsc::Receiver<Option<String>>) -> (i32, String) {
    loop {
        match rx.recv_timeout(HANG) {
            Ok(Some(l)) => said.push(l),
            Ok(None) => break,
            Err(_) => {
                // SAFETY: kill has no memory-safety preconditions; the group is the one this test started.
                unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
                panic!("still running {HANG:?} after the signal:\n{}", said.join("\n"));
            }
        }
    }
    let status = c.wait().unwrap();
    (status.code().unwrap_or(-1), said.join("\n"))
}

/// Ctrl-C in a terminal (SIGINT to the whole process group) while a run stands mid-sweep: it exits 130 and every
/// output file is marked incomplete naming the signal: the JSON `complete: false` with the error and the points
/// not measured, the CSV's `# incomplete:` line, the Markdown's section.
#[test]
fn ctrl_c_marks_every_output_of_a_run_incomplete_naming_the_signal() {
    let dir = tempfile::tempdir().unwrap();
    let (json, csv, md) = (
        dir.path().join("r.json"),
        dir.path().join("r.csv"),
        dir.path().join("r.md"),
    );
    let (c, said, rx) = started_until_fault(
        &[
            &stopping_at_all_gather("1:all_gather@8:stop")[..],
            &["-J", s(&json), "--csv", s(&csv), "--markdown", s(&md)],
        ]
        .concat(),
    );
    // SAFETY: kill has no memory-safety preconditions; the group is the one this test started.
    unsafe { libc::kill(-(c.id() as i32), libc::SIGINT) };
    let (code, err) = ended(c, said, rx);
    assert_eq!(code, 130, "{err}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["collbench"]["complete"], false, "{v}");
    let e = &v["errors"][0];
    assert!(e["message"].as_str().unwrap_or("").contains("SIGINT"), "{v}");
    assert!(!e["missing"].as_array().unwrap().is_empty(), "{v}");
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    let last = csv_text.lines().last().unwrap();
    assert!(
        last.starts_with("# incomplete:") && last.contains("SIGINT"),
        "{csv_text}"
    );
    let md_text = std::fs::read_to_string(&md).unwrap();
    assert!(
        md_text.contains("## Incomplete run") && md_text.contains("SIGINT"),
        "{md_text}"
    );
}

/// A Kubernetes eviction (SIGTERM) of a preflight mid-run: it exits 143 and still writes its JSON, JUnit and
/// metrics, the interruption as a failed check, so a gate reading them sees a failure, not a missing file.
#[test]
fn sigterm_to_a_preflight_writes_every_output_with_the_interruption() {
    let dir = tempfile::tempdir().unwrap();
    let (json, junit, prom) = (
        dir.path().join("p.json"),
        dir.path().join("p.xml"),
        dir.path().join("p.prom"),
    );
    let (c, said, rx) = started_until_fault(&[
        "preflight",
        "--np",
        "2",
        "--no-pairwise",
        "--bandwidth-bytes",
        "1M",
        "-T",
        "600",
        "--fault",
        "1:all_reduce@8:stop",
        "-J",
        s(&json),
        "--junit",
        s(&junit),
        "--metrics",
        s(&prom),
    ]);
    // The launcher only, as a pod's main process is signalled.
    // SAFETY: kill has no memory-safety preconditions; the pid is this test's child, not yet reaped.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    let (code, err) = ended(c, said, rx);
    assert_eq!(code, 143, "{err}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["exit_code"], 143, "{v}");
    let checks = v["checks"].as_array().unwrap();
    assert!(
        checks
            .iter()
            .any(|c| c["name"] == "interrupted" && c["detail"].as_str().unwrap_or("").contains("SIGTERM")),
        "{v}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("interrupted") && xml.contains("<failure"), "{xml}");
    let metrics = std::fs::read_to_string(&prom).unwrap();
    assert!(metrics.contains("# EOF"), "{metrics}");
}

/// A full stdout (`> /dev/full`) ends the run on rank 0 with exit 4; the other rank says rank 0's own reason,
/// not a broken link to it (a second, wrong culprit).
#[test]
fn a_full_stdout_is_one_failure_every_rank_names_the_same_way() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let o = Command::new(bin())
        .args(SHORT)
        .arg("--no-progress")
        .stdin(Stdio::null())
        .stdout(full)
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    let rank1: Vec<&str> = err.lines().filter(|l| l.contains("rank 1 (host")).collect();
    assert!(
        rank1
            .iter()
            .all(|l| l.contains("No space left") && !l.contains("connection closed")),
        "{err}"
    );
}
