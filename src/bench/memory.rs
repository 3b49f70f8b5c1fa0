//! This process's memory and descriptors, from /proc: peak and current resident memory, open descriptors.
//! `None` where /proc is not there to read (not Linux).

/// A `kB` field of /proc/self/status (`VmHWM`, `VmRSS`, ...) in bytes.
pub fn status_field(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        let mut f = rest.split_whitespace();
        let kb: u64 = f.next()?.parse().ok()?;
        (f.next() == Some("kB")).then_some(kb * 1024)
    })
}

fn own_status(key: &str) -> Option<u64> {
    status_field(&std::fs::read_to_string("/proc/self/status").ok()?, key)
}

/// Peak resident memory of this process so far (`VmHWM`), bytes.
pub fn peak_rss() -> Option<u64> {
    own_status("VmHWM")
}

/// Resident memory of this process now (`VmRSS`), bytes.
pub fn rss() -> Option<u64> {
    own_status("VmRSS")
}

/// Bytes this process's resident memory grew by since it was `before` (a [`rss`] reading); 0 where either
/// reading is missing: what opening a GPU's context, or NCCL's communicator, cost the host.
pub fn grown_since(before: Option<u64>) -> u64 {
    rss().zip(before).map_or(0, |(now, then)| now.saturating_sub(then))
}

/// Descriptors this process has open now (entries of /proc/self/fd, less the one reading it).
pub fn open_fds() -> Option<usize> {
    let n = std::fs::read_dir("/proc/self/fd").ok()?.count();
    Some(n.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_in_bytes() {
        let s = "Name:\tcollbench\nVmPeak:\t  300000 kB\nVmHWM:\t   20480 kB\nVmRSS:\t    1024 kB\nThreads:\t3\n";
        assert_eq!(status_field(s, "VmHWM"), Some(20 << 20));
        assert_eq!(status_field(s, "VmRSS"), Some(1 << 20));
        assert_eq!(status_field(s, "VmSwap"), None);
        assert_eq!(status_field(s, "Threads"), None, "not a kB field");
        assert_eq!(status_field("VmHWMx:\t1 kB\n", "VmHWM"), None);
    }

    #[test]
    fn this_process_is_measured_where_proc_exists() {
        if !std::path::Path::new("/proc/self/status").exists() {
            return;
        }
        // Other tests run alongside in this process, so only what holds whatever they do is asserted here;
        // tests/scale.rs checks that descriptors and memory stay flat.
        // The resident size first: the high-water mark read after it can only be as large or larger, even while
        // other threads allocate.
        let now = rss().unwrap();
        let peak = peak_rss().unwrap();
        assert!(peak >= now && now > 0, "peak {peak} now {now}");
        assert!(open_fds().unwrap() >= 3, "stdin, stdout and stderr at least");
    }
}
