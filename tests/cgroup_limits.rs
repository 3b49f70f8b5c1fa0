//! `collbench run` inside a cgroup whose limits its ranks would exceed: a memory limit of 120 MiB under
//! `--np 2 -e 64M` (about 129 MiB per rank), and a pids.max below the processes and threads two ranks start.
//! Each is refused before any rank starts, exit 2, naming the limit, the cgroup and what to do; the ranks are
//! not left to be killed by the kernel. The same cgroups with a run that fits let it pass, so the check does
//! not refuse everything. The cgroups are made here (v1 controllers where this machine has them, else cgroup
//! v2) and removed afterwards; that needs root, and without it these print why and pass, except in CI
//! (`CI=true`), where that is a failure.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use common::netns::cannot_run;

/// A cgroup made for one test under the hierarchy that has `controller`; its processes moved out and the
/// folder removed on drop.
struct Group {
    dir: PathBuf,
    /// The hierarchy's top folder, where stray processes go back to.
    top: PathBuf,
    /// The cgroup's path as /proc/self/cgroup names paths (the mounts used here show their hierarchy's root).
    path: String,
    v2: bool,
}

impl Group {
    /// Makes `name` under the mount of `controller`'s hierarchy; `None` (after saying why) where it cannot.
    fn new(controller: &str, name: &str) -> Option<Group> {
        // SAFETY: geteuid has no preconditions and only returns a number.
        if unsafe { libc::geteuid() } != 0 {
            cannot_run("making a cgroup needs root");
            return None;
        }
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        // A v1 hierarchy with the controller, mounted with its whole hierarchy shown (root field "/").
        let v1 = mountinfo.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split_whitespace().collect();
            let r: Vec<&str> = right.split_whitespace().collect();
            (r.first() == Some(&"cgroup") && f.get(3) == Some(&"/") && r.get(2)?.split(',').any(|o| o == controller))
                .then(|| PathBuf::from(f[4]))
        });
        let v2 = mountinfo.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split_whitespace().collect();
            (right.starts_with("cgroup2 ") && f.get(3) == Some(&"/")).then(|| PathBuf::from(f[4]))
        });
        let (top, is_v2) = match (v1, v2) {
            (Some(t), _) => (t, false),
            (None, Some(t)) => {
                // The controller must be given to the children of the top.
                let _ = std::fs::write(t.join("cgroup.subtree_control"), format!("+{controller}"));
                (t, true)
            }
            (None, None) => {
                cannot_run(&format!(
                    "no cgroup hierarchy with the {controller} controller is mounted"
                ));
                return None;
            }
        };
        let dir = top.join(name);
        if let Err(e) = std::fs::create_dir(&dir) {
            cannot_run(&format!("cannot make the cgroup {}: {e}", dir.display()));
            return None;
        }
        Some(Group {
            dir,
            top,
            path: format!("/{name}"),
            v2: is_v2,
        })
    }

    fn set(&self, file: &str, value: &str) {
        std::fs::write(self.dir.join(file), value).unwrap_or_else(|e| panic!("{}/{file}: {e}", self.dir.display()));
    }

    /// collbench with `args`, started by a shell that first moves itself into this cgroup.
    fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, &[])
    }

    /// [`Group::run`] with `env` set.
    fn run_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let procs = self.dir.join("cgroup.procs");
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(&procs)
            .arg(assert_cmd::cargo::cargo_bin("collbench"))
            .args(args);
        common::netns::clean_env(&mut c);
        c.envs(env.iter().copied()).output().unwrap()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // The runs have ended; anything still listed (a process the kernel has not reaped yet) goes back to
        // the top so the folder can go.
        if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for p in procs.lines() {
                let _ = std::fs::write(self.top.join("cgroup.procs"), p);
            }
        }
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!(
                "could not remove the cgroup {}: {e}; remove it by hand",
                self.dir.display()
            );
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_run_that_exceeds_its_memory_cgroup_is_refused_up_front() {
    let Some(g) = Group::new("memory", &format!("cbmem{}", std::process::id())) else {
        return;
    };
    let limit = 120u64 << 20;
    g.set(
        if g.v2 { "memory.max" } else { "memory.limit_in_bytes" },
        &limit.to_string(),
    );
    let out = g.run(&["run", "--np", "2", "-e", "64M", "-n", "2", "-w", "1"]);
    let err = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "not refused up front (a signal shows as None): {:?}\n{err}",
        out.status
    );
    let file = if g.v2 { "memory.max" } else { "memory.limit_in_bytes" };
    for part in [
        "-e/--maxbytes".to_string(),
        "x 2 local ranks".into(),
        format!("the memory cgroup {} leaves", g.path),
        format!("({file} 120 MiB, "),
        format!("lower -e or --np, or raise {file} of cgroup {}", g.path),
    ] {
        assert!(err.contains(&part), "{part}: {err}");
    }
    assert!(out.stdout.is_empty(), "nothing measured: {}", text(&out.stdout));
    // A rank started by another launcher (torchrun's variables) checks the same before it allocates or joins
    // (it joins only to tell the other ranks, until the short bootstrap deadline: rank 1 never starts here).
    let launched = g.run_with(
        &["run", "-e", "64M", "-n", "2", "-w", "1", "--bootstrap-timeout", "1"],
        &[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29771"),
            ("COLLBENCH_JOB_ID", "cgroup-limits"),
        ],
    );
    let lerr = text(&launched.stderr);
    assert_eq!(launched.status.code(), Some(2), "{:?}\n{lerr}", launched.status);
    assert!(
        lerr.contains("-e/--maxbytes") && lerr.contains(&format!("the memory cgroup {} leaves", g.path)),
        "{lerr}"
    );
    // What fits under the same limit runs to the end.
    let small = g.run(&["run", "--np", "2", "-e", "1M", "-n", "2", "-w", "1"]);
    assert_eq!(small.status.code(), Some(0), "{}", text(&small.stderr));
    assert!(
        text(&small.stdout).contains("Total wrong elements : 0"),
        "{}",
        text(&small.stdout)
    );
}

#[test]
fn a_run_that_exceeds_its_pids_cgroup_is_refused_up_front() {
    let Some(g) = Group::new("pids", &format!("cbpids{}", std::process::id())) else {
        return;
    };
    // The shell that moves itself in is one task; two TCP ranks and the launcher need seven.
    g.set("pids.max", "4");
    let out = g.run(&["run", "--np", "2", "-e", "1M", "-n", "2", "-w", "1"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{:?}\n{err}", out.status);
    for part in [
        "--np: 2 local ranks start up to 7 processes and threads".to_string(),
        format!("the pids cgroup {} leaves room for", g.path),
        "(pids.max 4, ".into(),
        format!("lower --np, or raise pids.max of cgroup {}", g.path),
    ] {
        assert!(err.contains(&part), "{part}: {err}");
    }
    g.set("pids.max", "64");
    let ok = g.run(&["run", "--np", "2", "-e", "1M", "-n", "2", "-w", "1"]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
}

/// pairwise and p2p launch their ranks through the same driver as run, so the same pids limit refuses them up
/// front, naming the cgroup, rather than letting the kernel refuse a rank's thread mid-measurement.
#[test]
fn pairwise_and_p2p_are_refused_by_the_pids_cgroup_as_run_is() {
    let Some(g) = Group::new("pids", &format!("cbpidsv{}", std::process::id())) else {
        return;
    };
    g.set("pids.max", "4");
    for args in [
        &["pairwise", "--np", "2", "-n", "1"][..],
        &["p2p", "--np", "2", "-e", "1K", "-n", "1", "-w", "0"][..],
    ] {
        let out = g.run(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {:?}\n{err}", out.status);
        for part in [
            "--np: 2 local ranks start up to ".to_string(),
            format!("the pids cgroup {} leaves room for", g.path),
            "(pids.max 4, ".into(),
            format!("lower --np, or raise pids.max of cgroup {}", g.path),
        ] {
            assert!(err.contains(&part), "{args:?}: {part}: {err}");
        }
    }
}

/// The locator itself on this machine: a process in a made cgroup finds it, whatever is mounted where (the
/// memory check above rests on it). Reads `info -J`'s CPU entry for the cpu controller's cgroup.
#[test]
fn info_names_the_cpu_cgroup_it_runs_in_and_its_quota() {
    let Some(g) = Group::new("cpu", &format!("cbcpu{}", std::process::id())) else {
        return;
    };
    if g.v2 {
        g.set("cpu.max", "10000 100000");
    } else {
        g.set("cpu.cfs_period_us", "100000");
        g.set("cpu.cfs_quota_us", "10000");
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("info.json");
    let out = g.run(&["info", "-J", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let cpu = &v["hosts"][0]["cpu"];
    assert_eq!(cpu["cgroup"], g.path.as_str(), "{v:#}");
    assert_eq!(cpu["quota_cores"], 0.1, "{v:#}");
    assert!(text(&out.stdout).contains("0.1 cores"), "{}", text(&out.stdout));
}
