//! `collbench install-aliases DIR`: a link per nccl-tests program name (`all_reduce_perf`, ...) to this
//! executable, so scripts that run nccl-tests run collbench.

use std::path::{Path, PathBuf};

use crate::error::{stderr, Error, Result};
use crate::report::nccl_table::PROGRAMS;

/// The links to `exe` made in `dir`.
pub fn links(dir: &Path, exe: &Path, force: bool) -> Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        if dir.exists() {
            return Err(Error::usage(
                "install-aliases",
                format!("{} is not a directory", dir.display()),
            ));
        }
        // One missing level is made (a new bin/); more is more likely a typo than a wish.
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(Error::usage(
                "install-aliases",
                format!(
                    "{} does not exist, nor does {}; give an existing directory (one on the PATH, such as \
                     /usr/local/bin), or create it first: mkdir -p {}",
                    dir.display(),
                    parent.display(),
                    dir.display()
                ),
            ));
        }
        std::fs::create_dir(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_every_program_and_replaces_only_its_own_or_with_force() {
        let d = tempfile::tempdir().unwrap();
        let exe = d.path().join("collbench");
        std::fs::write(&exe, "").unwrap();
        let bin = d.path().join("bin");
        assert_eq!(links(&bin, &exe, false).unwrap().len(), 7);
        assert_eq!(std::fs::read_link(bin.join("sendrecv_perf")).unwrap(), exe);
        // Again: the links are ours, so they are simply made again.
        assert_eq!(links(&bin, &exe, false).unwrap().len(), 7);
        std::fs::remove_file(bin.join("reduce_perf")).unwrap();
        std::fs::write(bin.join("reduce_perf"), "nccl-tests' own").unwrap();
        let e = links(&bin, &exe, false).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("--force"), "{e}");
        links(&bin, &exe, true).unwrap();
        assert_eq!(std::fs::read_link(bin.join("reduce_perf")).unwrap(), exe);
    }
}
