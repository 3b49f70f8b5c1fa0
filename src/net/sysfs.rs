//! The two reads every sysfs and procfs scan here makes: a one-value file, and a directory's entries.

use std::fs;
use std::path::Path;

/// The file's text without surrounding white space; None when it cannot be read or holds nothing.
pub fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The names in a directory, sorted; empty when it is missing or unreadable.
pub fn sorted_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_trimmed_and_empty_or_missing_ones_are_none() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("state"), "4: ACTIVE\n").unwrap();
        std::fs::write(d.path().join("blank"), " \n").unwrap();
        assert_eq!(read_trim(&d.path().join("state")).as_deref(), Some("4: ACTIVE"));
        assert_eq!(read_trim(&d.path().join("blank")), None);
        assert_eq!(read_trim(&d.path().join("gone")), None);
        assert_eq!(sorted_names(d.path()), ["blank", "state"]);
        assert!(sorted_names(&d.path().join("gone")).is_empty());
    }
}
