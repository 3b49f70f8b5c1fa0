//! How much memory this host can give the ranks' buffers: what the kernel says can be allocated
//! (`MemAvailable`), or less where the memory cgroup the process runs in (or one of its ancestors) leaves less.

use crate::cgroup::{self, limits::Room};
use crate::sizes::format_size;

/// Memory the ranks' buffers can take, and what bounds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Available {
    /// Bytes that can be allocated.
    pub bytes: u64,
    /// The memory cgroup level whose limit leaves less than the machine has available, where one does.
    pub cgroup: Option<Room>,
}

impl Available {
    /// The machine's figure, no cgroup binding.
    pub fn host(bytes: u64) -> Available {
        Available { bytes, cgroup: None }
    }

    /// The smaller of the machine's `MemAvailable` and a cgroup's room; `None` when neither is known.
    pub fn of(mem_available: Option<u64>, room: Option<Room>) -> Option<Available> {
        match (mem_available, room) {
            (Some(m), Some(r)) if r.free() < m => Some(Available {
                bytes: r.free(),
                cgroup: Some(r),
            }),
            (None, Some(r)) => Some(Available {
                bytes: r.free(),
                cgroup: Some(r),
            }),
            (Some(m), _) => Some(Available::host(m)),
            (None, None) => None,
        }
    }

    /// Where the figure comes from, for a message: "the machine has 3 GiB available", or the cgroup, its limit
    /// and its use.
    pub fn describe(&self) -> String {
        match &self.cgroup {
            None => format!("the machine has {} available", format_size(self.bytes)),
            Some(r) => format!(
                "the memory cgroup {} leaves {} ({} {}, {} in use)",
                r.cgroup,
                format_size(self.bytes),
                r.file,
                format_size(r.limit),
                format_size(r.used)
            ),
        }
    }

    /// What to do besides asking for less: raise the binding cgroup's limit, where one binds.
    pub fn remedy(&self) -> String {
        match &self.cgroup {
            None => String::new(),
            Some(r) => format!(", or raise {} of cgroup {} (the job's memory limit)", r.file, r.cgroup),
        }
    }
}

/// Memory this host can give the ranks now: `MemAvailable`, bounded by the memory cgroup's room where the
/// cgroup can be found.
pub fn available() -> Option<Available> {
    let fs = cgroup::Fs::real();
    let room = cgroup::locate(&fs, "memory")
        .ok()
        .and_then(|loc| cgroup::limits::memory_room(&fs, &loc));
    Available::of(mem_available(), room)
}

/// Memory the kernel says can be allocated without swapping (`MemAvailable` in /proc/meminfo).
pub fn mem_available() -> Option<u64> {
    parse_meminfo(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

/// `MemAvailable` from the text of /proc/meminfo, in bytes.
fn parse_meminfo(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let value: u64 = words.next()?.parse().ok()?;
    // The kernel always prints kB (meaning KiB); anything else is not a meminfo we understand.
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_parses_mem_available() {
        let text = "MemTotal:       16318412 kB\nMemFree:  1 kB\nMemAvailable:   12345678 kB\n";
        assert_eq!(parse_meminfo(text), Some(12_345_678 * 1024));
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n"), None);
        assert_eq!(parse_meminfo("MemAvailable: x kB\n"), None);
        assert_eq!(parse_meminfo("MemAvailable: 5 MB\n"), None);
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(mem_available().is_some_and(|b| b > 0));
            assert!(available().is_some_and(|a| a.bytes > 0 && a.bytes <= mem_available().unwrap()));
        }
    }

    #[test]
    fn the_cgroup_binds_where_it_leaves_less() {
        let room = Room {
            cgroup: "/jobs/j1".into(),
            file: "memory.limit_in_bytes",
            limit: 120 << 20,
            used: 10 << 20,
        };
        let a = Available::of(Some(1 << 30), Some(room.clone())).unwrap();
        assert_eq!(a.bytes, 110 << 20);
        assert_eq!(
            a.describe(),
            "the memory cgroup /jobs/j1 leaves 110 MiB (memory.limit_in_bytes 120 MiB, 10 MiB in use)"
        );
        assert!(a.remedy().contains("raise memory.limit_in_bytes of cgroup /jobs/j1"));
        let host = Available::of(Some(64 << 20), Some(room.clone())).unwrap();
        assert_eq!((host.bytes, host.cgroup.is_none()), (64 << 20, true));
        assert_eq!(host.describe(), "the machine has 64 MiB available");
        assert_eq!(host.remedy(), "");
        assert_eq!(Available::of(None, Some(room)).unwrap().bytes, 110 << 20);
        assert_eq!(Available::of(None, None), None);
    }
}
