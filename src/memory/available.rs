//! How much memory this host can give the ranks' buffers, as the kernel says (`MemAvailable`).

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
        }
    }
}
