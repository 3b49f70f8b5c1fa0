//! This process's cgroup for one controller, found the way the kernel states it: `/proc/self/cgroup` says
//! which cgroup (v1 `N:CONTROLLERS:PATH`, v2 `0::PATH`, both on a hybrid host), `/proc/PID/mountinfo` says
//! where its hierarchy is mounted (anywhere, not only under /sys/fs/cgroup) and which part the mount shows
//! (its root field: a container's mount shows only its own cgroup). A process started by `ip netns exec` sees
//! a fresh /sys with no cgroup mounted; then the mounts of its ancestors, and of pid 1, are read through
//! `/proc/PID/root`, which still leads into their view of the filesystem. Where none of these shows the cgroup
//! it is [`Unknown`], never "no limit".
//!
//! Every file is read through [`Fs`], so tests hand in text fixtures. [`limits`] reads the limits and
//! counters of a located cgroup and its ancestors.

pub mod limits;
mod mountinfo;

use std::fmt;
use std::path::{Path, PathBuf};

use mountinfo::{below, cgroup_mounts, memberships, parent_pid};

/// How this module reads the machine: injected, so tests hand in fixtures.
pub struct Fs<'a> {
    /// A whole file's text; `None` when it cannot be read.
    pub read: &'a dyn Fn(&Path) -> Option<String>,
    /// Whether a folder exists and can be entered.
    pub is_dir: &'a dyn Fn(&Path) -> bool,
}

fn real_read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

fn real_is_dir(p: &Path) -> bool {
    p.is_dir()
}

impl Fs<'static> {
    /// The machine's own files.
    pub fn real() -> Fs<'static> {
        Fs {
            read: &real_read,
            is_dir: &real_is_dir,
        }
    }
}

/// Processes whose view of the filesystem is tried after this process's own: its ancestors up to pid 1.
const MAX_ANCESTORS: usize = 64;

/// The cgroup version a controller is bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// One level of a located cgroup: its path in the hierarchy and the folder its files are read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Level {
    /// The cgroup's path, as `/proc/self/cgroup` names paths ("/kubepods/pod1").
    pub path: String,
    /// The folder holding its files (through `/proc/PID/root/...` where this process's own view lacks it).
    pub dir: PathBuf,
}

/// A controller's cgroup of this process, found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    pub version: Version,
    /// The process's own cgroup first, then each ancestor up to the top the mount shows: a limit on any of
    /// them binds this process.
    pub levels: Vec<Level>,
    /// Whose view of the filesystem showed it: "this process", or "pid N" (an ancestor's or pid 1's mounts).
    pub seen_by: String,
}

impl Located {
    /// The process's own cgroup path.
    pub fn path(&self) -> &str {
        &self.levels[0].path
    }
}

/// Why a controller's cgroup could not be found: its limits are then unknown, not absent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unknown {
    pub controller: String,
    pub why: String,
}

impl fmt::Display for Unknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the {} cgroup is unknown: {}", self.controller, self.why)
    }
}

/// One process's view of the mounts: `prefix` leads into its filesystem from this process.
struct View {
    prefix: PathBuf,
    mountinfo: String,
    who: String,
}

/// This process's own view, then (only where that fails) the views to try after it: its ancestors' (a rank
/// started by `ip netns exec` has lost the cgroup mounts its launcher still sees), then pid 1's.
fn own_view(fs: &Fs) -> Option<View> {
    Some(View {
        prefix: PathBuf::from("/"),
        mountinfo: (fs.read)(Path::new("/proc/self/mountinfo"))?,
        who: "this process".into(),
    })
}

/// The ancestors' and pid 1's views, nearest first.
fn other_views(fs: &Fs) -> Vec<View> {
    let mut pids = Vec::new();
    let mut status = (fs.read)(Path::new("/proc/self/status"));
    while let Some(p) = status.as_deref().and_then(parent_pid).filter(|&p| p > 0) {
        if pids.contains(&p) || pids.len() >= MAX_ANCESTORS {
            break;
        }
        pids.push(p);
        status = (fs.read)(&PathBuf::from(format!("/proc/{p}/status")));
    }
    if !pids.contains(&1) {
        pids.push(1);
    }
    pids.into_iter()
        .filter_map(|p| {
            Some(View {
                mountinfo: (fs.read)(&PathBuf::from(format!("/proc/{p}/mountinfo")))?,
                prefix: PathBuf::from(format!("/proc/{p}/root")),
                who: format!("pid {p}"),
            })
        })
        .collect()
}

/// The cgroup at `path` of `version`'s hierarchy as `view` shows it, if it does.
fn find_in(fs: &Fs, view: &View, version: Version, controller: &str, path: &str) -> Option<Located> {
    for mount in cgroup_mounts(&view.mountinfo) {
        let right_kind = match version {
            Version::V2 => mount.v2,
            Version::V1 => !mount.v2 && mount.options.iter().any(|o| o == controller),
        };
        let Some(rel) = right_kind.then(|| below(path, &mount.root)).flatten() else {
            continue;
        };
        let top = view.prefix.join(mount.point.trim_start_matches('/'));
        let dir = rel.iter().fold(top.clone(), |d, c| d.join(c));
        if !(fs.is_dir)(&dir) {
            continue;
        }
        let root = mount.root.trim_end_matches('/');
        let levels = (0..=rel.len())
            .rev()
            .map(|n| Level {
                path: match (root, n) {
                    ("", 0) => "/".to_string(),
                    _ => format!("{root}/{}", rel[..n].join("/"))
                        .trim_end_matches('/')
                        .to_string(),
                },
                dir: rel[..n].iter().fold(top.clone(), |d, c| d.join(c)),
            })
            .collect();
        return Some(Located {
            version,
            levels,
            seen_by: view.who.clone(),
        });
    }
    None
}

/// This process's cgroup for `controller` ("cpu", "memory", "pids"): the v1 hierarchy that controller is
/// bound to where there is one (hybrid hosts keep it there), else the v2 hierarchy.
pub fn locate(fs: &Fs, controller: &str) -> Result<Located, Unknown> {
    let unknown = |why: String| Unknown {
        controller: controller.to_string(),
        why,
    };
    let table =
        (fs.read)(Path::new("/proc/self/cgroup")).ok_or_else(|| unknown("/proc/self/cgroup cannot be read".into()))?;
    let all = memberships(&table);
    let (version, path) = match all.iter().find(|m| m.controllers.iter().any(|c| c == controller)) {
        Some(m) => (Version::V1, m.path.clone()),
        None => match all.iter().find(|m| m.id == 0 && m.controllers.is_empty()) {
            Some(m) => (Version::V2, m.path.clone()),
            None => {
                return Err(unknown(format!(
                    "/proc/self/cgroup lists neither a {controller} hierarchy nor cgroup v2"
                )))
            }
        },
    };
    let own = own_view(fs);
    if let Some(found) = own.as_ref().and_then(|v| find_in(fs, v, version, controller, &path)) {
        return Ok(found);
    }
    let others = other_views(fs);
    if let Some(found) = others.iter().find_map(|v| find_in(fs, v, version, controller, &path)) {
        return Ok(found);
    }
    let tables = usize::from(own.is_some()) + others.len();
    let kind = match version {
        Version::V1 => format!("cgroup v1 {controller}"),
        Version::V2 => "cgroup2".to_string(),
    };
    Err(unknown(format!(
        "no {kind} mount showing {path} is visible to this process, its ancestors or pid 1 ({tables} mount tables \
         read)"
    )))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A machine made of text: files by path; a folder exists where some file lies below it.
    #[derive(Default)]
    pub struct Fixture(pub BTreeMap<PathBuf, String>);

    impl Fixture {
        pub fn with(mut self, path: &str, text: &str) -> Self {
            self.0.insert(PathBuf::from(path), text.to_string());
            self
        }

        pub fn set(&mut self, path: &str, text: &str) {
            self.0.insert(PathBuf::from(path), text.to_string());
        }

        pub fn run<T>(&self, f: impl FnOnce(&Fs) -> T) -> T {
            let read = |p: &Path| self.0.get(p).cloned();
            let is_dir = |p: &Path| self.0.keys().any(|k| k != p && k.starts_with(p));
            f(&Fs {
                read: &read,
                is_dir: &is_dir,
            })
        }
    }

    const HYBRID_MOUNTS: &str = "\
23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    /// This machine's kind: hybrid, the memory controller in a nested group.
    pub fn hybrid() -> Fixture {
        Fixture::default()
            .with("/proc/self/cgroup", "8:pids:/\n4:memory:/jobs/j1\n1:cpu:/q\n0::/\n")
            .with("/proc/self/mountinfo", HYBRID_MOUNTS)
            .with("/sys/fs/cgroup/cpu/q/cpu.cfs_quota_us", "10000\n")
            .with("/sys/fs/cgroup/memory/jobs/j1/memory.limit_in_bytes", "125829120\n")
            .with("/sys/fs/cgroup/pids/pids.max", "max\n")
            .with("/sys/fs/cgroup/unified/cgroup.procs", "1\n")
    }

    #[test]
    fn hybrid_hosts_use_the_v1_hierarchy_of_the_controller() {
        let f = hybrid();
        let cpu = f.run(|fs| locate(fs, "cpu")).unwrap();
        assert_eq!(cpu.version, Version::V1);
        assert_eq!(cpu.seen_by, "this process");
        let levels: Vec<(&str, &Path)> = cpu.levels.iter().map(|l| (l.path.as_str(), l.dir.as_path())).collect();
        assert_eq!(
            levels,
            [
                ("/q", Path::new("/sys/fs/cgroup/cpu/q")),
                ("/", Path::new("/sys/fs/cgroup/cpu"))
            ]
        );
        let mem = f.run(|fs| locate(fs, "memory")).unwrap();
        assert_eq!(mem.path(), "/jobs/j1");
        assert_eq!(mem.levels.len(), 3);
        assert_eq!(mem.levels[1].dir, Path::new("/sys/fs/cgroup/memory/jobs"));
        // io is bound to no v1 hierarchy here: cgroup v2 is where it would be.
        let io = f.run(|fs| locate(fs, "io")).unwrap();
        assert_eq!((io.version, io.path()), (Version::V2, "/"));
        assert_eq!(io.levels[0].dir, Path::new("/sys/fs/cgroup/unified"));
    }

    #[test]
    fn pure_v2_mounted_anywhere_with_a_nested_path() {
        let f = Fixture::default()
            .with("/proc/self/cgroup", "0::/kubepods/pod1/ctr\n")
            .with(
                "/proc/self/mountinfo",
                "40 1 0:30 / /run/my\\040cg rw - cgroup2 none rw,nsdelegate\n",
            )
            .with("/run/my cg/kubepods/pod1/ctr/cpu.max", "max 100000\n");
        let loc = f.run(|fs| locate(fs, "cpu")).unwrap();
        assert_eq!(loc.version, Version::V2);
        let paths: Vec<&str> = loc.levels.iter().map(|l| l.path.as_str()).collect();
        assert_eq!(paths, ["/kubepods/pod1/ctr", "/kubepods/pod1", "/kubepods", "/"]);
        assert_eq!(loc.levels[0].dir, Path::new("/run/my cg/kubepods/pod1/ctr"));
        assert_eq!(loc.levels[3].dir, Path::new("/run/my cg"));
    }

    #[test]
    fn a_namespaced_mount_shows_from_its_root_field_down() {
        // Docker on v1 without a cgroup namespace: the table names the host's path, the mount shows only the
        // container's cgroup, its root field saying which.
        let f = Fixture::default()
            .with("/proc/self/cgroup", "3:cpu,cpuacct:/docker/abc/sub\n")
            .with(
                "/proc/self/mountinfo",
                "50 31 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct\n",
            )
            .with("/sys/fs/cgroup/cpu,cpuacct/sub/cpu.stat", "nr_throttled 0\n");
        let loc = f.run(|fs| locate(fs, "cpu")).unwrap();
        let levels: Vec<(&str, &Path)> = loc.levels.iter().map(|l| (l.path.as_str(), l.dir.as_path())).collect();
        assert_eq!(
            levels,
            [
                ("/docker/abc/sub", Path::new("/sys/fs/cgroup/cpu,cpuacct/sub")),
                ("/docker/abc", Path::new("/sys/fs/cgroup/cpu,cpuacct")),
            ]
        );
        // A mount of some other container's cgroup does not show this one.
        let other = Fixture::default()
            .with("/proc/self/cgroup", "3:cpu:/docker/abc\n")
            .with(
                "/proc/self/mountinfo",
                "50 31 0:29 /docker/xyz /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu\n",
            )
            .with("/sys/fs/cgroup/cpu/cpu.stat", "");
        assert!(other.run(|fs| locate(fs, "cpu")).is_err());
    }

    #[test]
    fn behind_ip_netns_exec_the_launchers_view_is_used() {
        // Own mounts: a fresh sysfs and nothing else; the parent (pid 700) still has the hierarchy.
        let f = Fixture::default()
            .with("/proc/self/cgroup", "1:cpu:/q\n0::/\n")
            .with("/proc/self/mountinfo", "23 27 0:50 / /sys rw - sysfs sysfs rw\n")
            .with("/proc/self/status", "Name:\tcollbench\nPPid:\t700\n")
            .with("/proc/700/status", "PPid:\t1\n")
            .with("/proc/700/mountinfo", HYBRID_MOUNTS)
            .with("/proc/700/root/sys/fs/cgroup/cpu/q/cpu.stat", "");
        let loc = f.run(|fs| locate(fs, "cpu")).unwrap();
        assert_eq!(loc.seen_by, "pid 700");
        assert_eq!(loc.levels[0].dir, Path::new("/proc/700/root/sys/fs/cgroup/cpu/q"));
        assert_eq!(loc.levels[1].dir, Path::new("/proc/700/root/sys/fs/cgroup/cpu"));
        // With the parent's root not reachable (it is not ours to enter), pid 1's is tried.
        let mut g = Fixture::default()
            .with("/proc/self/cgroup", "1:cpu:/q\n0::/\n")
            .with("/proc/self/mountinfo", "23 27 0:50 / /sys rw - sysfs sysfs rw\n")
            .with("/proc/self/status", "PPid:\t700\n")
            .with("/proc/700/status", "PPid:\t1\n")
            .with("/proc/700/mountinfo", HYBRID_MOUNTS)
            .with("/proc/1/mountinfo", HYBRID_MOUNTS)
            .with("/proc/1/root/sys/fs/cgroup/cpu/q/cpu.stat", "");
        assert_eq!(g.run(|fs| locate(fs, "cpu")).unwrap().seen_by, "pid 1");
        // Nobody's view shows it: unknown, saying what was tried.
        g.0.retain(|k, _| !k.starts_with("/proc/1/root"));
        let err = g.run(|fs| locate(fs, "cpu")).unwrap_err();
        assert_eq!(err.controller, "cpu");
        assert!(err.why.contains("no cgroup v1 cpu mount showing /q"), "{err}");
        assert!(err.why.contains("3 mount tables read"), "{err}");
    }

    #[test]
    fn missing_tables_are_unknown_with_the_reason() {
        let none = Fixture::default();
        let e = none.run(|fs| locate(fs, "memory")).unwrap_err();
        assert!(
            e.to_string()
                .contains("memory cgroup is unknown: /proc/self/cgroup cannot be read"),
            "{e}"
        );
        let v1_only = Fixture::default().with("/proc/self/cgroup", "1:cpu:/\n");
        let e = v1_only.run(|fs| locate(fs, "memory")).unwrap_err();
        assert!(e.why.contains("neither a memory hierarchy nor cgroup v2"), "{e}");
        // An ancestor loop (a bad fixture, or pids reused while walking) ends the walk.
        let looped = Fixture::default()
            .with("/proc/self/cgroup", "0::/\n")
            .with("/proc/self/status", "PPid:\t5\n")
            .with("/proc/5/status", "PPid:\t6\n")
            .with("/proc/6/status", "PPid:\t5\n");
        assert!(looped.run(|fs| locate(fs, "pids")).is_err());
    }

    #[test]
    fn this_machine_states_its_cgroups() {
        // Where /proc/self/cgroup exists, at least one controller's cgroup is found or said to be unknown with
        // a reason; the cpu controller's levels end at a mount's top.
        if !Path::new("/proc/self/cgroup").exists() {
            return;
        }
        match locate(&Fs::real(), "cpu") {
            Ok(l) => {
                assert!(!l.levels.is_empty());
                assert!(l.levels.iter().all(|x| x.dir.is_dir()), "{l:?}");
            }
            Err(e) => assert!(!e.why.is_empty()),
        }
    }
}
