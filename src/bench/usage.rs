//! What a sweep costs its host: this rank's CPU time and the CPU throttling of its cgroups, sampled at
//! the start and the end of the sweep.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Throttling counters of one cgroup (v1 `cpu.stat`: `throttled_time` in ns; v2: `throttled_usec`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Throttling {
    /// Enforcement periods in which the group was throttled.
    pub periods: u64,
    /// Time the group's tasks were held back, microseconds.
    pub us: u64,
}

/// Parses a `cpu.stat` file of either cgroup version; `None` when it has no throttling counters.
pub fn parse_cpu_stat(text: &str) -> Option<Throttling> {
    let mut periods = None;
    let mut us = None;
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(key), Some(value)) = (f.next(), f.next().and_then(|v| v.parse::<u64>().ok())) else {
            continue;
        };
        match key {
            "nr_throttled" => periods = Some(value),
            "throttled_usec" => us = Some(value),
            "throttled_time" => us = Some(value / 1000),
            _ => {}
        }
    }
    Some(Throttling {
        periods: periods?,
        us: us?,
    })
}

/// Busy and total time of all of this host's CPUs from `/proc/stat`'s `cpu` line (clock ticks): busy is
/// everything but idle and iowait. `None` when the line is missing or malformed.
pub fn parse_proc_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal [guest guest_nice, already inside user and nice]
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

fn host_cpu_ticks() -> Option<(u64, u64)> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// CPU seconds (user + system) this process has used so far.
pub fn cpu_seconds() -> f64 {
    // SAFETY: rusage is plain integers, for which all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct it is given.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Nanoseconds a task waited on a run queue, ready to run but not running (the second field of
/// `/proc/<pid>/task/<tid>/schedstat`); `None` when the text is not that file's.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    let mut f = text.split_whitespace();
    let (_on_cpu, waited, _slices) = (f.next()?, f.next()?, f.next()?);
    waited.parse().ok()
}

/// Nanoseconds each of this process's threads has waited for a CPU so far, by thread id, from
/// `/proc/self/task`: a rank starved by a CPU quota or by other work shows it here, without any cgroup visible.
/// `None` where the kernel keeps no scheduler statistics.
pub fn thread_waits() -> Option<HashMap<u64, u64>> {
    let mut waits = complete_listing(list_thread_waits)?;
    // The calling thread is the one whose sweep is measured: counted even if every listing missed it.
    let own = std::fs::read_to_string("/proc/thread-self/schedstat").ok();
    let tid = std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|l| l.file_name()?.to_str()?.parse().ok());
    if let (Some(tid), Some(w)) = (tid, own.as_deref().and_then(parse_schedstat)) {
        waits.entry(tid).or_insert(w);
    }
    Some(waits)
}

/// One listing of `/proc/self/task`, each thread's wait; `None` when nothing could be read.
fn list_thread_waits() -> Option<HashMap<u64, u64>> {
    let mut waits = HashMap::new();
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let tid = task.file_name().to_str().and_then(|t| t.parse().ok());
        let waited = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .and_then(|t| parse_schedstat(&t));
        if let (Some(tid), Some(w)) = (tid, waited) {
            waits.insert(tid, w);
        }
    }
    (!waits.is_empty()).then_some(waits)
}

/// Listings most taken to make one sample whole.
const LISTINGS: usize = 4;

/// The union of listings taken until one adds no thread (at most [`LISTINGS`]). The kernel ends a
/// `/proc/PID/task` listing early when the thread at its cursor exits mid-walk, so one listing can miss
/// live threads; a thread missed by the first sample would count its whole life as waited in between.
fn complete_listing(mut list: impl FnMut() -> Option<HashMap<u64, u64>>) -> Option<HashMap<u64, u64>> {
    let mut waits = list()?;
    for _ in 1..LISTINGS {
        let Some(more) = list() else { break };
        let before = waits.len();
        for (tid, w) in more {
            waits.entry(tid).or_insert(w);
        }
        if waits.len() == before {
            break;
        }
    }
    Some(waits)
}

/// Seconds the thread that waited longest for a CPU between two [`thread_waits`] samples waited; a thread
/// born in between counts from zero. The longest wait of one thread, not the sum over threads: a rank with
/// many threads (a transport's helpers) would otherwise wait longer than the time that passed, and its share
/// of the wall time would mean nothing.
pub fn longest_wait_s(start: &HashMap<u64, u64>, end: &HashMap<u64, u64>) -> f64 {
    let ns = end
        .iter()
        .map(|(tid, &w)| w.saturating_sub(start.get(tid).copied().unwrap_or(0)))
        .max()
        .unwrap_or(0);
    ns as f64 / 1e9
}

/// One sample of this rank's counters.
pub struct Sample {
    at: Instant,
    cpu_s: f64,
    /// Nanoseconds each of this rank's threads waited for a CPU so far.
    waits: Option<HashMap<u64, u64>>,
    /// Per cgroup folder, its counters (same order as `dirs`).
    throttling: Vec<Option<Throttling>>,
    dirs: Vec<PathBuf>,
    /// The host's CPU ticks (busy, total), by every process.
    host: Option<(u64, u64)>,
}

impl Sample {
    /// Samples now, reading the throttling of this process's cpu cgroup and its ancestors wherever the cgroup
    /// is found (`crate::cgroup`: under a rank started by `ip netns exec`, through its launcher's view); none
    /// read when it is not found, so throttling is unknown rather than nil.
    pub fn now() -> Sample {
        let fs = crate::cgroup::Fs::real();
        let dirs = crate::cgroup::locate(&fs, "cpu")
            .map(|loc| crate::cgroup::limits::cpu_stat_dirs(&fs, &loc))
            .unwrap_or_default();
        Sample::with_dirs(dirs)
    }

    fn with_dirs(dirs: Vec<PathBuf>) -> Sample {
        let throttling = dirs
            .iter()
            .map(|d| {
                std::fs::read_to_string(d.join("cpu.stat"))
                    .ok()
                    .and_then(|t| parse_cpu_stat(&t))
            })
            .collect();
        Sample {
            at: Instant::now(),
            cpu_s: cpu_seconds(),
            waits: thread_waits(),
            throttling,
            dirs,
            host: host_cpu_ticks(),
        }
    }

    /// What happened since `self`, with `bytes` moved by this rank and its first collective's time.
    pub fn usage_since(&self, host: &str, bytes: f64, first_us: f64) -> Usage {
        let end = Sample::with_dirs(self.dirs.clone());
        // The most-throttled level is the one that held this rank back.
        let throttled = self
            .throttling
            .iter()
            .zip(&end.throttling)
            .filter_map(|(a, b)| {
                let (a, b) = ((*a)?, (*b)?);
                Some((b.periods.saturating_sub(a.periods), b.us.saturating_sub(a.us)))
            })
            .max_by_key(|&(_, us)| us);
        Usage {
            host: host.to_string(),
            wall_s: end.at.duration_since(self.at).as_secs_f64(),
            cpu_s: (end.cpu_s - self.cpu_s).max(0.0),
            // A thread that ended in between takes its wait with it: a lower bound.
            waited_s: match (&self.waits, &end.waits) {
                (Some(a), Some(b)) => Some(longest_wait_s(a, b)),
                _ => None,
            },
            cpus: std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64),
            bytes,
            first_us,
            throttled_periods: throttled.map(|t| t.0),
            throttled_s: throttled.map(|t| t.1 as f64 / 1e6),
            peak_rss: super::memory::peak_rss(),
            host_busy_pct: busy_pct(self.host, end.host),
            runtime_bytes: 0,
        }
    }
}

/// How busy the host's CPUs were between two `/proc/stat` samples, by every process (%).
fn busy_pct(start: Option<(u64, u64)>, end: Option<(u64, u64)>) -> Option<f64> {
    let ((b0, t0), (b1, t1)) = (start?, end?);
    let total = t1.checked_sub(t0).filter(|&t| t > 0)?;
    Some(100.0 * b1.saturating_sub(b0) as f64 / total as f64)
}

/// One rank's cost of one sweep, sent to rank 0.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Usage {
    pub host: String,
    /// Wall-clock seconds of the sweep.
    pub wall_s: f64,
    /// CPU seconds this rank used during the sweep.
    pub cpu_s: f64,
    /// CPUs this rank may use (affinity and cgroup quota).
    pub cpus: f64,
    /// Bytes this rank moved, by the collectives' bus-bandwidth definition.
    pub bytes: f64,
    /// Time of the first collective of the sweep, microseconds.
    pub first_us: f64,
    /// Throttled periods and seconds of this rank's cgroup during the sweep; `None` when unreadable.
    pub throttled_periods: Option<u64>,
    pub throttled_s: Option<f64>,
    /// Peak resident memory of this rank's process so far (VmHWM), bytes; `None` when unreadable.
    #[serde(default)]
    pub peak_rss: Option<u64>,
    /// How busy the host's CPUs were during the sweep, by every process (%); `None` when unreadable.
    #[serde(default)]
    pub host_busy_pct: Option<f64>,
    /// Seconds this rank's most delayed thread waited for a CPU during the sweep (scheduler statistics);
    /// `None` when unreadable.
    #[serde(default)]
    pub waited_s: Option<f64>,
    /// Host memory this rank's device runtime (CUDA context, NCCL communicator) took when the path opened,
    /// bytes; 0 on host memory. The peak memory's bound counts it.
    #[serde(default)]
    pub runtime_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn write(root: &Path, rel: &str, body: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }

    #[test]
    fn both_cgroup_versions_give_throttling_in_microseconds() {
        let v2 = "usage_usec 100\nuser_usec 60\nsystem_usec 40\nnr_periods 9\nnr_throttled 3\nthrottled_usec 4500\n";
        assert_eq!(parse_cpu_stat(v2), Some(Throttling { periods: 3, us: 4500 }));
        let v1 = "nr_periods 9\nnr_throttled 2\nthrottled_time 7000000\n";
        assert_eq!(parse_cpu_stat(v1), Some(Throttling { periods: 2, us: 7000 }));
        assert_eq!(parse_cpu_stat("usage_usec 5\n"), None, "no cpu controller: no counters");
        assert_eq!(parse_cpu_stat("nr_throttled x\nthrottled_usec 1\n"), None);
    }

    #[test]
    fn the_run_queue_wait_is_the_second_schedstat_field() {
        assert_eq!(parse_schedstat("1234567 89000 42\n"), Some(89000));
        assert_eq!(parse_schedstat("1 2\n"), None, "not schedstat's three fields");
        assert_eq!(parse_schedstat("a b c"), None);
        // This process has threads and the kernel here keeps the statistics: a figure, not an error. Other
        // tests' threads end meanwhile, so a listing may be cut short; the calling thread is still counted.
        if Path::new("/proc/self/schedstat").exists() {
            let tid = this_thread_id();
            assert!(
                thread_waits().is_some_and(|w| w.contains_key(&tid)),
                "this thread ({tid}) is counted"
            );
        }
    }

    #[test]
    fn listings_cut_short_are_joined_until_one_adds_no_thread() {
        // The first listing stopped after thread 1, the second after 2; the third is whole, the fourth adds
        // nothing and ends the walk.
        let passes = [
            vec![(1, 10)],
            vec![(1, 11), (2, 20)],
            vec![(1, 12), (2, 21), (3, 30)],
            vec![(3, 31)],
        ];
        let mut taken = 0;
        let waits = complete_listing(|| {
            taken += 1;
            passes.get(taken - 1).map(|p| p.iter().copied().collect())
        })
        .unwrap();
        // Each thread keeps its first reading, so a sample is one moment's as nearly as the kernel allows.
        assert_eq!(waits, HashMap::from([(1, 10), (2, 20), (3, 30)]));
        assert_eq!(taken, 4, "the fourth listing added nothing and was the last");
        // A listing that adds nothing at once ends it; no statistics at all is `None`.
        let mut taken = 0;
        let once = complete_listing(|| {
            taken += 1;
            Some(HashMap::from([(7, 1)]))
        });
        assert_eq!((once, taken), (Some(HashMap::from([(7, 1)])), 2));
        assert_eq!(complete_listing(|| None), None);
        // Listings that keep finding threads stop at the bound.
        let mut taken = 0;
        complete_listing(|| {
            taken += 1;
            Some(HashMap::from([(taken, 1)]))
        });
        assert_eq!(taken as usize, LISTINGS);
    }

    /// This thread's id, from `/proc/thread-self` (a link to `PID/task/TID`).
    fn this_thread_id() -> u64 {
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        link.file_name().unwrap().to_str().unwrap().parse().unwrap()
    }

    #[test]
    fn the_wait_is_the_longest_one_threads_not_their_sum() {
        let start = HashMap::from([(1, 1_000_000_000), (2, 0), (3, 5_000_000_000)]);
        // Thread 1 waited 0.5 s more, 2 waited 0.75 s, 3 ended, 4 was born and waited 0.25 s: the sum would be
        // 1.5 s, the longest is 0.75 s.
        let end = HashMap::from([(1, 1_500_000_000), (2, 750_000_000), (4, 250_000_000)]);
        assert_eq!(longest_wait_s(&start, &end), 0.75);
        assert_eq!(longest_wait_s(&end, &end), 0.0);
        assert_eq!(longest_wait_s(&start, &HashMap::new()), 0.0, "every thread ended");
    }

    #[test]
    fn host_busy_counts_everything_but_idle_and_iowait() {
        let a = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n";
        assert_eq!(parse_proc_stat(a), Some((150, 1000)));
        let b = "cpu  400 0 150 850 100 0 0 0 0 0\n";
        assert_eq!(parse_proc_stat(b), Some((550, 1500)));
        // 400 busy ticks of 500: 80%.
        assert_eq!(busy_pct(parse_proc_stat(a), parse_proc_stat(b)), Some(80.0));
        assert_eq!(busy_pct(parse_proc_stat(a), parse_proc_stat(a)), None, "no time passed");
        assert_eq!(parse_proc_stat("cpu0 1 2 3 4\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 x 3 4\n"), None);
    }

    #[test]
    fn usage_counts_the_throttling_of_the_most_throttled_level() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        write(root, "a/cpu.stat", "nr_throttled 1\nthrottled_usec 1000\n");
        write(root, "a/b/cpu.stat", "nr_throttled 0\nthrottled_usec 0\n");
        let start = Sample::with_dirs(vec![root.join("a/b"), root.join("a")]);
        write(root, "a/cpu.stat", "nr_throttled 4\nthrottled_usec 251000\n");
        write(root, "a/b/cpu.stat", "nr_throttled 2\nthrottled_usec 5000\n");
        let u = start.usage_since("h0", 1e9, 12.0);
        assert_eq!(u.throttled_periods, Some(3));
        assert_eq!(u.throttled_s, Some(0.25));
        assert_eq!((u.host.as_str(), u.bytes, u.first_us), ("h0", 1e9, 12.0));
        assert!(u.cpu_s >= 0.0 && u.cpus >= 1.0);
    }
}
