//! The limits of a located cgroup and its ancestors, in either version: the CPU quota (v2 `cpu.max`, v1
//! `cpu.cfs_quota_us` / `cpu.cfs_period_us`), the memory left (v2 `memory.max` less `memory.current`, v1
//! `memory.limit_in_bytes` less `memory.usage_in_bytes`, page cache the kernel can drop not counted as used),
//! the tasks left (`pids.max` less `pids.current`), and the folders whose `cpu.stat` counts throttling.
//! The tightest level binds, so each is the smallest over the levels.

use std::path::{Path, PathBuf};

use super::{Fs, Level, Located, Version};

/// A v1 limit at or above this is the kernel's "no limit" (page-counter maximum, rounded to pages).
const V1_UNLIMITED: u64 = 1 << 62;

fn read_trim(fs: &Fs, dir: &Path, file: &str) -> Option<String> {
    (fs.read)(&dir.join(file)).map(|s| s.trim().to_string())
}

/// The CFS quota in cores (quota / period), the tightest over the levels; `None` when no level has one.
pub fn cpu_quota(fs: &Fs, loc: &Located) -> Option<f64> {
    loc.levels
        .iter()
        .filter_map(|l| match loc.version {
            Version::V1 => {
                let quota: i64 = read_trim(fs, &l.dir, "cpu.cfs_quota_us")?.parse().ok()?;
                let period: i64 = read_trim(fs, &l.dir, "cpu.cfs_period_us")
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(100_000);
                (quota > 0 && period > 0).then(|| quota as f64 / period as f64)
            }
            Version::V2 => {
                let max = read_trim(fs, &l.dir, "cpu.max")?;
                let mut f = max.split_whitespace();
                let quota: f64 = f.next()?.parse().ok()?; // "max" fails to parse: no quota
                let period: f64 = f.next().unwrap_or("100000").parse().ok()?;
                (quota > 0.0 && period > 0.0).then_some(quota / period)
            }
        })
        .reduce(f64::min)
}

/// The folders among the levels that have a `cpu.stat` with throttling counters to read (the cgroup's own,
/// then its ancestors': a quota set on a pod throttles the containers below it).
pub fn cpu_stat_dirs(fs: &Fs, loc: &Located) -> Vec<PathBuf> {
    loc.levels
        .iter()
        .filter(|l| (fs.read)(&l.dir.join("cpu.stat")).is_some())
        .map(|l| l.dir.clone())
        .collect()
}

/// How much more of a resource a cgroup level allows, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Room {
    /// The level whose limit binds, as `/proc/self/cgroup` names it.
    pub cgroup: String,
    /// The file the limit was read from ("memory.max", "memory.limit_in_bytes", "pids.max").
    pub file: &'static str,
    /// The limit (bytes, or tasks).
    pub limit: u64,
    /// What is in use now, in the same unit.
    pub used: u64,
}

impl Room {
    /// What is left under the limit.
    pub fn free(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }
}

/// The level with the least room, where any level has a limit.
fn tightest(levels: &[Level], room: impl Fn(&Level) -> Option<Room>) -> Option<Room> {
    levels.iter().filter_map(room).min_by_key(Room::free)
}

/// A `memory.stat` field (bytes).
fn stat_field(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Memory the cgroup and its ancestors leave this process: the level with the least room. What is in use is
/// the usage less the inactive page cache (the kernel reclaims that before it kills), as a working set.
pub fn memory_room(fs: &Fs, loc: &Located) -> Option<Room> {
    tightest(&loc.levels, |l| {
        let (file, usage, inactive) = match loc.version {
            Version::V1 => ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"),
            Version::V2 => ("memory.max", "memory.current", "inactive_file"),
        };
        let limit: u64 = read_trim(fs, &l.dir, file)?.parse().ok()?; // v2 "max": no limit
        if limit >= V1_UNLIMITED {
            return None;
        }
        let usage: u64 = read_trim(fs, &l.dir, usage).and_then(|u| u.parse().ok()).unwrap_or(0);
        let cache = (fs.read)(&l.dir.join("memory.stat"))
            .and_then(|s| stat_field(&s, inactive))
            .unwrap_or(0);
        Some(Room {
            cgroup: l.path.clone(),
            file,
            limit,
            used: usage.saturating_sub(cache),
        })
    })
}

/// Tasks (processes and threads) the cgroup and its ancestors leave room for: the level with the least.
pub fn pids_room(fs: &Fs, loc: &Located) -> Option<Room> {
    tightest(&loc.levels, |l| {
        let limit: u64 = read_trim(fs, &l.dir, "pids.max")?.parse().ok()?; // "max": no limit
        let used: u64 = read_trim(fs, &l.dir, "pids.current")
            .and_then(|u| u.parse().ok())
            .unwrap_or(0);
        Some(Room {
            cgroup: l.path.clone(),
            file: "pids.max",
            limit,
            used,
        })
    })
}

/// [`pids_room`] of this process on this machine; `None` when no level limits tasks or the pids cgroup cannot
/// be found.
pub fn pids_room_here() -> Option<Room> {
    let fs = Fs::real();
    pids_room(&fs, &super::locate(&fs, "pids").ok()?)
}

#[cfg(test)]
mod tests {
    use super::super::locate;
    use super::super::tests::{hybrid, Fixture};
    use super::*;

    fn v2(path: &str) -> Fixture {
        Fixture::default()
            .with("/proc/self/cgroup", &format!("0::{path}\n"))
            .with(
                "/proc/self/mountinfo",
                "41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
            )
            .with(&format!("/sys/fs/cgroup{path}/cgroup.procs"), "1\n")
    }

    #[test]
    fn v2_quota_is_the_tightest_along_the_path() {
        let mut f = v2("/kubepods/pod1/ctr");
        f.set("/sys/fs/cgroup/kubepods/cpu.max", "max 100000\n");
        f.set("/sys/fs/cgroup/kubepods/pod1/cpu.max", "300000 100000\n");
        f.set("/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n");
        let q = |f: &Fixture| f.run(|fs| cpu_quota(fs, &locate(fs, "cpu").unwrap()));
        assert_eq!(q(&f), Some(3.0), "the pod's limit binds its container");
        f.set("/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "150000 100000\n");
        assert_eq!(q(&f), Some(1.5));
        let none = v2("/user.slice").with("/sys/fs/cgroup/user.slice/cpu.max", "max 100000\n");
        assert_eq!(q(&none), None, "no quota anywhere");
    }

    #[test]
    fn v1_quota_comes_from_the_cpu_controller() {
        let mut f = hybrid();
        f.set("/sys/fs/cgroup/cpu/q/cpu.cfs_period_us", "100000\n");
        f.set("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
        let q = |f: &Fixture| f.run(|fs| cpu_quota(fs, &locate(fs, "cpu").unwrap()));
        assert_eq!(q(&f), Some(0.1));
        f.set("/sys/fs/cgroup/cpu/q/cpu.cfs_quota_us", "-1\n");
        assert_eq!(q(&f), None);
    }

    #[test]
    fn throttling_is_read_from_every_level_that_counts_it() {
        let mut f = v2("/a/b");
        f.set("/sys/fs/cgroup/a/cpu.stat", "nr_throttled 1\nthrottled_usec 1000\n");
        f.set("/sys/fs/cgroup/a/b/cpu.stat", "nr_throttled 0\nthrottled_usec 0\n");
        let dirs = f.run(|fs| cpu_stat_dirs(fs, &locate(fs, "cpu").unwrap()));
        assert_eq!(
            dirs,
            [PathBuf::from("/sys/fs/cgroup/a/b"), PathBuf::from("/sys/fs/cgroup/a")]
        );
    }

    #[test]
    fn memory_room_is_the_least_left_over_the_levels_less_reclaimable_cache() {
        let mut f = hybrid();
        let j1 = "/sys/fs/cgroup/memory/jobs/j1";
        f.set(&format!("{j1}/memory.usage_in_bytes"), "20971520\n");
        f.set(
            &format!("{j1}/memory.stat"),
            "cache 10485760\ntotal_inactive_file 10485760\n",
        );
        f.set(
            "/sys/fs/cgroup/memory/jobs/memory.limit_in_bytes",
            "9223372036854771712\n",
        );
        f.set("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
        let room = f.run(|fs| memory_room(fs, &locate(fs, "memory").unwrap())).unwrap();
        assert_eq!(
            room,
            Room {
                cgroup: "/jobs/j1".into(),
                file: "memory.limit_in_bytes",
                limit: 120 << 20,
                used: 10 << 20,
            }
        );
        assert_eq!(room.free(), 110 << 20);
        // A parent with less room left binds instead.
        f.set("/sys/fs/cgroup/memory/jobs/memory.limit_in_bytes", "209715200\n");
        f.set("/sys/fs/cgroup/memory/jobs/memory.usage_in_bytes", "157286400\n");
        let room = f.run(|fs| memory_room(fs, &locate(fs, "memory").unwrap())).unwrap();
        assert_eq!((room.cgroup.as_str(), room.free()), ("/jobs", 50 << 20));
    }

    #[test]
    fn v2_memory_max_and_no_limit() {
        let mut f = v2("/job");
        f.set("/sys/fs/cgroup/job/memory.max", "max\n");
        let room = |f: &Fixture| f.run(|fs| memory_room(fs, &locate(fs, "memory").unwrap()));
        assert_eq!(room(&f), None);
        f.set("/sys/fs/cgroup/job/memory.max", "104857600\n");
        f.set("/sys/fs/cgroup/job/memory.current", "1048576\n");
        let r = room(&f).unwrap();
        assert_eq!((r.file, r.limit, r.used), ("memory.max", 100 << 20, 1 << 20));
        // Usage above the limit (the kernel is reclaiming): no room, not an overflow.
        f.set("/sys/fs/cgroup/job/memory.current", "209715200\n");
        assert_eq!(room(&f).unwrap().free(), 0);
    }

    #[test]
    fn pids_room_in_either_version() {
        let mut f = hybrid();
        let r = |f: &Fixture| f.run(|fs| pids_room(fs, &locate(fs, "pids").unwrap()));
        assert_eq!(r(&f), None, "pids.max is max");
        f.set("/sys/fs/cgroup/pids/pids.max", "8\n");
        f.set("/sys/fs/cgroup/pids/pids.current", "6\n");
        let got = r(&f).unwrap();
        assert_eq!((got.cgroup.as_str(), got.file, got.free()), ("/", "pids.max", 2));
        let mut g = v2("/svc");
        g.set("/sys/fs/cgroup/svc/pids.max", "100\n");
        g.set("/sys/fs/cgroup/svc/pids.current", "3\n");
        assert_eq!(r(&g).unwrap().free(), 97);
    }
}
