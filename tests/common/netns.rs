//! The network-namespace cluster of `tests/netns/cluster.sh` as the multi-host tests use it: root/CI
//! checks, a [`Cluster`] torn down on drop, a one-test-at-a-time lock, and ranks started as processes whose
//! output goes to files.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Serialises the namespace tests of one test binary: each starts four busy ranks, and on two cores
/// concurrent runs only make each slower and skew what is timed (names are unique per test, so they would
/// not collide).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Holds the one-test-at-a-time lock until dropped; a test that panicked before does not poison it.
pub fn serial() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The cluster script.
pub fn harness() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/netns/cluster.sh")
}

/// Bytes a process printed, as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Says why a test cannot run here: a skip on a developer's machine, a failure in CI.
pub fn cannot_run(reason: &str) {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{reason} (CI=true: these tests must run in CI)");
    }
    // Straight to stderr, past the test harness's capture: a skip should be seen without --nocapture.
    let _ = writeln!(std::io::stderr(), "skipped: {reason}");
}

/// Whether this machine can build namespace clusters (root, iproute2, util-linux, kernel support); asked
/// once per test binary.
pub fn namespaces_available() -> bool {
    static CHECK: OnceLock<Result<(), String>> = OnceLock::new();
    let check = CHECK.get_or_init(|| match Command::new("bash").arg(harness()).arg("check").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "network-namespace hosts are not available: {}",
            text(&o.stderr).trim()
        )),
        Err(e) => Err(format!("cannot run bash {}: {e}", harness().display())),
    });
    check.as_ref().map_err(|r| cannot_run(r)).is_ok()
}

/// The lock of [`serial`] when namespace clusters can be built here; `None` (after [`cannot_run`]) when not.
pub fn namespace_test() -> Option<MutexGuard<'static, ()>> {
    let one = serial();
    namespaces_available().then_some(one)
}

pub use super::clean_env;

/// One cluster of namespace hosts; `Drop` tears it down, also when the test panics.
pub struct Cluster {
    /// The cluster's name; its hosts are `NAME-h0`, `NAME-h1`, ...
    pub name: String,
    hosts: usize,
}

impl Cluster {
    /// Builds `hosts` hosts named `PREFIX<pid>TAG`, so no two runs share a name, with more `cluster.sh up`
    /// flags (such as `--rate 1gbit`).
    pub fn up(prefix: &str, tag: &str, hosts: usize, flags: &[&str]) -> Cluster {
        let name = format!("{prefix}{}{tag}", std::process::id());
        // Clusters left behind by test processes that were killed before their teardown.
        let _ = Command::new("bash").arg(harness()).arg("gc").status();
        let c = Cluster { name, hosts };
        // Only a dead process with our pid could have left a cluster of this name; remove it.
        c.run(&["down"]);
        let pid = std::process::id().to_string();
        let n = hosts.to_string();
        let mut args = vec!["up", n.as_str(), "--owner", &pid];
        args.extend(flags);
        let out = c.run(&args);
        eprintln!("{}", out.trim());
        c
    }

    /// Runs `cluster.sh SUBCOMMAND NAME ARGS...` and returns its stdout; panics on failure.
    pub fn run(&self, args: &[&str]) -> String {
        let (sub, rest) = args.split_first().expect("a subcommand");
        let out = Command::new("bash")
            .arg(harness())
            .arg(sub)
            .arg(&self.name)
            .args(rest)
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "cluster.sh {sub} {} {rest:?}: {}",
            self.name,
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// The name of host `i`.
    pub fn host(&self, i: usize) -> String {
        format!("{}-h{i}", self.name)
    }

    /// The address of `iface` in host `host`.
    pub fn addr(&self, host: usize, iface: &str) -> String {
        self.run(&["addr", &host.to_string(), iface]).trim().to_string()
    }

    /// The subnet of `iface` across the hosts.
    pub fn cidr(&self, iface: &str) -> String {
        self.run(&["cidr", iface]).trim().to_string()
    }

    /// (rx, tx) bytes of `iface` in every host.
    pub fn counters(&self, iface: &str) -> Vec<(u64, u64)> {
        (0..self.hosts)
            .map(|h| {
                let s = self.run(&["bytes", &h.to_string(), iface]);
                let v: Vec<u64> = s.split_whitespace().map(|x| x.parse().expect("a byte count")).collect();
                assert_eq!(v.len(), 2, "cluster.sh bytes: {s}");
                (v[0], v[1])
            })
            .collect()
    }

    /// A command that runs `program args` inside host `host`, with the host's name as hostname and no
    /// launcher variables of ours.
    pub fn exec(&self, host: usize, program: &Path, args: &[&str]) -> Command {
        let mut c = Command::new("bash");
        c.arg(harness())
            .args(["exec", &self.name, &host.to_string()])
            .arg(program)
            .args(args);
        clean_env(&mut c);
        c
    }

    /// [`Cluster::exec`] of `program args` as rank `host` of one per host, torchrun style
    /// (RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT), with the cluster's name as the job id that keeps it apart
    /// from any other job.
    pub fn exec_rank(&self, host: usize, master: &str, port: &str, program: &Path, args: &[&str]) -> Command {
        let mut c = self.exec(host, program, args);
        c.env("RANK", host.to_string())
            .env("WORLD_SIZE", self.hosts.to_string())
            .env("MASTER_ADDR", master)
            .env("MASTER_PORT", port)
            .env("COLLBENCH_JOB_ID", &self.name);
        c
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let ok = Command::new("bash")
            .arg(harness())
            .args(["down", &self.name])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("cluster.sh down {} failed; remove it by hand", self.name);
        }
    }
}

/// A started process whose stdout and stderr go to files (no pipe can fill up and stall it).
pub struct Proc {
    what: String,
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

/// Starts `c` as `what`, its output in `dir/WHAT.out` and `dir/WHAT.err`.
pub fn spawn(mut c: Command, what: &str, dir: &Path) -> Proc {
    let out = dir.join(format!("{what}.out"));
    let err = dir.join(format!("{what}.err"));
    let child = c
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    Proc {
        what: what.to_string(),
        child,
        out,
        err,
    }
}

/// A finished process: how it ended and what it printed.
pub struct Done {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Waits for every process (a bounded poll) up to `deadline` from now; on the deadline kills the ones still
/// running and panics with what they printed. The cluster's teardown kills anything they left inside its
/// hosts.
pub fn wait_all(mut procs: Vec<Proc>, deadline: Duration) -> Vec<Done> {
    let until = Instant::now() + deadline;
    let mut status: Vec<Option<ExitStatus>> = vec![None; procs.len()];
    while status.iter().any(Option::is_none) {
        for (p, s) in procs.iter_mut().zip(status.iter_mut()) {
            if s.is_none() {
                *s = p.child.try_wait().expect("wait for a child");
            }
        }
        if Instant::now() > until && status.iter().any(Option::is_none) {
            let mut report = String::new();
            for (p, s) in procs.iter_mut().zip(&status) {
                if s.is_none() {
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                }
                let out = std::fs::read_to_string(&p.out).unwrap_or_default();
                let err = std::fs::read_to_string(&p.err).unwrap_or_default();
                report += &format!("--- {} ({s:?})\nstdout:\n{out}\nstderr:\n{err}\n", p.what);
            }
            panic!("runs did not finish within {deadline:?}:\n{report}");
        }
        // A bounded poll of child processes, not synchronisation between them.
        std::thread::sleep(Duration::from_millis(50));
    }
    procs
        .iter()
        .zip(status)
        .map(|(p, s)| Done {
            status: s.unwrap(),
            stdout: std::fs::read_to_string(&p.out).unwrap_or_default(),
            stderr: std::fs::read_to_string(&p.err).unwrap_or_default(),
        })
        .collect()
}
