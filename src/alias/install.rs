//! `collbench install-aliases DIR`: a link per nccl-tests program name (`all_reduce_perf`, ...) to this
//! executable, so scripts that run nccl-tests run collbench.

use std::path::{Path, PathBuf};

use crate::error::{stderr, Error, Result};
use crate::report::nccl_table::PROGRAMS;

/// The links to `exe` made in `dir`; a missing `dir` is refused (a typo would otherwise make a directory
/// anywhere, `/nonexistent` at the root) unless `mkdir`, which creates it and its missing parents.
pub fn links(dir: &Path, exe: &Path, force: bool, mkdir: bool) -> Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        if dir.exists() {
            return Err(Error::usage(
                "install-aliases",
                format!("{} is not a directory", dir.display()),
            ));
        }
        if !mkdir {
            let missing = first_missing(dir);
            let nor = if missing == dir {
                String::new()
            } else {
                format!(", nor does {}", missing.display())
            };
            return Err(Error::usage(
                "install-aliases",
                format!(
                    "{} does not exist{nor}; give an existing directory (one on the PATH, such as \
                     /usr/local/bin), or create it: mkdir -p {}, or give --mkdir",
                    dir.display(),
                    dir.display()
                ),
            ));
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        stderr!("collbench: created {}", dir.display());
    }
    let mut made = Vec::new();
    for (program, _) in PROGRAMS {
        let link = dir.join(program);
        if let Ok(meta) = std::fs::symlink_metadata(&link) {
            let same = meta.file_type().is_symlink() && std::fs::read_link(&link).is_ok_and(|t| t == exe);
            if !same && !force {
                return Err(Error::usage(
                    "install-aliases",
                    format!(
                        "{} exists (nccl-tests itself?); move it away, or give --force to replace it",
                        link.display()
                    ),
                ));
            }
            std::fs::remove_file(&link).map_err(|e| Error::io(format!("replacing {}", link.display()), e))?;
        }
        std::os::unix::fs::symlink(exe, &link)
            .map_err(|e| Error::io(format!("linking {} to {}", link.display(), exe.display()), e))?;
        made.push(link);
    }
    Ok(made)
}

/// The outermost directory of `dir` that does not exist (`dir` itself when only it is missing).
fn first_missing(dir: &Path) -> &Path {
    let mut missing = dir;
    while let Some(parent) = missing.parent().filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
        missing = parent;
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_every_program_and_replaces_only_its_own_or_with_force() {
        let d = tempfile::tempdir().unwrap();
        let exe = d.path().join("collbench");
        std::fs::write(&exe, "").unwrap();
        let bin = d.path().join("bin");
        // A missing directory is refused, naming what is missing and what to do; --mkdir makes it.
        let e = links(&bin, &exe, false, false).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains("mkdir -p") && e.to_string().contains("--mkdir"),
            "{e}"
        );
        assert!(!bin.exists());
        assert_eq!(links(&bin, &exe, false, true).unwrap().len(), 7);
        assert_eq!(std::fs::read_link(bin.join("sendrecv_perf")).unwrap(), exe);
        // Again: the links are ours, so they are simply made again.
        assert_eq!(links(&bin, &exe, false, false).unwrap().len(), 7);
        std::fs::remove_file(bin.join("reduce_perf")).unwrap();
        std::fs::write(bin.join("reduce_perf"), "nccl-tests' own").unwrap();
        let e = links(&bin, &exe, false, false).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--force"), "{e}");
        links(&bin, &exe, true, false).unwrap();
        assert_eq!(std::fs::read_link(bin.join("reduce_perf")).unwrap(), exe);
    }

    #[test]
    fn a_missing_directory_names_its_outermost_missing_level() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("a/b/c");
        let e = links(&deep, Path::new("/bin/true"), false, false).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("c does not exist, nor does {};", d.path().join("a").display())),
            "{e}"
        );
        assert!(!d.path().join("a").exists(), "nothing is created");
        assert_eq!(
            first_missing(Path::new("/nonexistent-collbench-dir")),
            Path::new("/nonexistent-collbench-dir")
        );
    }
}
