//! Output files: the pre-flight check that a file may be written, and the atomic rewrite that keeps a
//! complete file on disk whatever moment the run dies at.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Refuses, before anything runs, an output `path` that exists (unless `force`), is a directory, or
/// whose directory does not exist or cannot be written. `flag` names the option in the error.
pub fn check_writable(path: &Path, force: bool, flag: &str) -> Result<()> {
    let shown = path.display();
    if path.is_dir() {
        return Err(Error::usage(flag, format!("{shown} is a directory")));
    }
    // symlink_metadata also catches a dangling link, which exists() would call absent.
    if fs::symlink_metadata(path).is_ok() && !force {
        return Err(Error::usage(flag, format!("{shown} exists; use --force to overwrite")));
    }
    let dir = parent_dir(path);
    if !dir.is_dir() {
        return Err(Error::usage(
            flag,
            format!("directory {} of {shown} does not exist", dir.display()),
        ));
    }
    // Probe with a real file: permission bits alone do not tell (root, read-only mounts, ACLs).
    let probe = temp_path(path);
    let created = OpenOptions::new().write(true).create_new(true).open(&probe);
    match created {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(Error::usage(flag, format!("cannot write in {}: {e}", dir.display()))),
    }
}

/// Replaces `path` with `bytes` atomically: written to a temporary file in the same directory, then
/// renamed over it, so a reader (or a crash) never sees half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = temp_path(path);
    let written = (|| {
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        f.write_all(bytes)?;
        // No fsync: this guards against the process dying mid-write, not against power loss, and an
        // fsync per point would add milliseconds to every point of a sweep.
        drop(f);
        fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        Error::io(format!("writing {}", path.display()), e)
    })
}

/// The directory a file lands in (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A hidden sibling of `path`, unique to this process; same directory so the rename stays atomic.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    parent_dir(path).join(format!(".{name}.tmp.{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage_message(r: Result<()>) -> (String, String) {
        match r {
            Err(Error::Usage { flag, message }) => (flag, message),
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn existing_file_is_refused_unless_forced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        fs::write(&path, "old").unwrap();
        let (flag, msg) = usage_message(check_writable(&path, false, "-J"));
        assert_eq!(flag, "-J");
        assert!(
            msg.contains("exists") && msg.contains("use --force to overwrite"),
            "{msg}"
        );
        check_writable(&path, true, "-J").unwrap();
        // The check leaves the old file alone and no probe behind.
        assert_eq!(fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn new_file_in_existing_directory_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        check_writable(&dir.path().join("new.csv"), false, "--csv").unwrap();
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn missing_directory_is_refused_even_with_force() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no/such/dir/out.json");
        for force in [false, true] {
            let (flag, msg) = usage_message(check_writable(&path, force, "--csv"));
            assert_eq!(flag, "--csv");
            assert!(msg.contains("does not exist"), "{msg}");
        }
    }

    #[test]
    fn directory_as_output_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (_, msg) = usage_message(check_writable(dir.path(), true, "-J"));
        assert!(msg.contains("is a directory"), "{msg}");
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        let err = write_atomic(&dir.path().join("missing/r.json"), b"x").unwrap_err();
        assert!(matches!(err, Error::Io { .. }));
    }
}
