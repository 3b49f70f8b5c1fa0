//! Output files: the pre-flight check that a file may be written, and the write itself, the one writer of
//! every output. `-` is standard output, whatever it is (a terminal, a pipe, a file opened with `>` or `>>`):
//! written in place through the process's own descriptor, never replaced or truncated. A regular file is
//! written to a temporary file and moved into place, so a complete file stays on disk whatever moment the
//! run dies at; a file that exists is never replaced unless the write says so (`--force`, or a rewrite of the
//! writer's own file), checked at the moment of the move, not only before the run. A character device or FIFO
//! (`/dev/null`, a pipe) is written in place; a symbolic link is followed to what it names; a directory,
//! socket or block device is refused.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// What an output path names, once symbolic links are followed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    /// Nothing yet: the file will be created at this path (a dangling link's target).
    Absent(PathBuf),
    /// A regular file, at this path (the link's target), replaced atomically.
    Regular(PathBuf),
    /// A character device or FIFO, written in place through the path given.
    Stream,
    /// `-`: this process's standard output, written in place through its descriptor.
    Stdout,
    /// What no output may be written to: a directory, socket or block device (its kind, for the message).
    Refused(&'static str),
}

/// How many links a chain may hold before it is called a loop (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// What `path` names. The kernel follows the links where the target exists (so `/dev/stdout` through
/// `/proc/self/fd/1` reaches the real pipe or terminal); a dangling link is followed by hand to where
/// the file will be created.
fn target(path: &Path) -> std::io::Result<Target> {
    if path.as_os_str() == "-" {
        return Ok(Target::Stdout);
    }
    match fs::metadata(path) {
        Ok(m) => {
            let t = m.file_type();
            Ok(if t.is_file() {
                Target::Regular(fs::canonicalize(path)?)
            } else if t.is_char_device() || t.is_fifo() {
                Target::Stream
            } else if t.is_dir() {
                Target::Refused("a directory")
            } else if t.is_socket() {
                Target::Refused("a socket")
            } else {
                Target::Refused("a block device")
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => dangling(path).map(Target::Absent),
        Err(e) => Err(e),
    }
}

/// `-` as an output means standard output.
fn dash(path: &Path) -> &Path {
    if path.as_os_str() == "-" {
        Path::new("/dev/stdout")
    } else {
        path
    }
}

/// Where a path that does not resolve to anything will be created: itself, or the end of its link chain.
fn dangling(path: &Path) -> std::io::Result<PathBuf> {
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let next = fs::read_link(&at)?;
                at = if next.is_absolute() {
                    next
                } else {
                    parent_dir(&at).join(next)
                };
            }
            _ => return Ok(at),
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::ELOOP))
}

/// Whether `path` is written in place as a stream (a character device or FIFO) rather than replaced:
/// reporters that rewrite their whole file after every point write such a path once, at the end.
pub fn is_stream(path: &Path) -> bool {
    matches!(target(path), Ok(Target::Stream | Target::Stdout))
}

/// Whether a write may replace a file that is already at its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replace {
    /// No: a file there (one that appeared since the run's check included) is left alone, and the write fails
    /// saying where its bytes were kept.
    Never,
    /// Yes: `--force`, or the writer's own file rewritten.
    Allowed,
}

impl Replace {
    /// What `--force` allows.
    pub fn from_force(force: bool) -> Replace {
        if force {
            Replace::Allowed
        } else {
            Replace::Never
        }
    }
}

/// Refuses, before anything runs, an output `path` that names a directory, socket or block device, a
/// regular file that exists (unless `force`), or a file whose directory does not exist or cannot be
/// written; a character device or FIFO must be writable. `flag` names the option in the error.
pub fn check_writable(path: &Path, force: bool, flag: &str) -> Result<()> {
    let shown = path.display();
    let what = target(path).map_err(|e| Error::usage(flag, format!("cannot use {shown}: {e}")))?;
    let file = match what {
        Target::Refused(kind) => {
            return Err(Error::usage(
                flag,
                format!("{shown} is {kind}; give a file, a FIFO or a character device such as /dev/stdout"),
            ))
        }
        Target::Stream => return check_stream(path, flag),
        Target::Stdout => return Ok(()),
        Target::Regular(_) if !force => {
            return Err(Error::usage(flag, format!("{shown} exists; use --force to overwrite")));
        }
        Target::Regular(p) | Target::Absent(p) => p,
    };
    let dir = parent_dir(&file);
    if !dir.is_dir() {
        return Err(Error::usage(
            flag,
            format!("directory {} of {shown} does not exist", dir.display()),
        ));
    }
    probe_dir(&dir, &file, flag)
}

/// Refuses, before anything runs, a chart directory (`--plot DIR`) that cannot be created or written in.
pub fn check_dir_writable(dir: &Path, flag: &str) -> Result<()> {
    fs::create_dir_all(dir)
        .map_err(|e| Error::usage(flag, format!("cannot create the directory {}: {e}", dir.display())))?;
    probe_dir(dir, &dir.join("chart"), flag)
}

/// Creates and removes a file next to `file` in `dir`: permission bits alone do not tell (root,
/// read-only mounts, ACLs).
fn probe_dir(dir: &Path, file: &Path, flag: &str) -> Result<()> {
    let probe = temp_path(file);
    let created = OpenOptions::new().write(true).create_new(true).open(&probe);
    match created {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(Error::usage(flag, format!("cannot write in {}: {e}", dir.display()))),
    }
}

/// A character device or FIFO must allow writing. Opening would block on a FIFO without a reader, so
/// the permission is asked instead.
fn check_stream(path: &Path, flag: &str) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = dash(path);
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::usage(flag, format!("{} holds a NUL byte", path.display())))?;
    // SAFETY: access() only reads the NUL-terminated path, which `c` owns for the whole call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    Err(Error::usage(flag, format!("cannot write to {}: {e}", path.display())))
}

/// Writes `bytes` to `path`: `-` to standard output in place; a regular file (or a new one) through a
/// temporary file in the same directory moved into place, so a reader (or a crash) never sees half a file, and
/// a file already there is replaced only as `replace` allows; a link is followed, so the link stays and its
/// target is written; a character device or FIFO is written in place. A failed write (a full disk,
/// `/dev/full`) is an I/O error naming the path.
pub fn write_atomic(path: &Path, bytes: &[u8], replace: Replace) -> Result<()> {
    let failed = |e| Error::io(format!("writing {}", path.display()), e);
    let file = match target(path).map_err(failed)? {
        Target::Stdout => return write_stdout(bytes).map_err(failed),
        Target::Stream => return write_stream(path, bytes, STREAM_STALL).map_err(failed),
        Target::Refused(kind) => {
            let msg = format!("{} is {kind}", path.display());
            return Err(failed(std::io::Error::new(std::io::ErrorKind::InvalidInput, msg)));
        }
        Target::Regular(p) | Target::Absent(p) => p,
    };
    let tmp = temp_path(&file);
    let written = (|| {
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        f.write_all(bytes)?;
        // No fsync: this guards against the process dying mid-write, not against power loss, and an
        // fsync per point would add milliseconds to every point of a sweep.
        drop(f);
        match replace {
            Replace::Allowed => fs::rename(&tmp, &file),
            Replace::Never => rename_new(&tmp, &file),
        }
    })();
    written.map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            // Another writer put a file there while this one ran: its bytes stay, and so do these.
            let kept = kept_path(&file);
            if fs::rename(&tmp, &kept).is_ok() {
                return failed(appeared(&kept));
            }
        }
        let _ = fs::remove_file(&tmp);
        failed(e)
    })
}

/// Opens `path` to be written as rows come (the CSV file): `-` is standard output; a character device or
/// FIFO is opened in place; a regular file is created, and one already there is truncated only as `replace`
/// allows (else the open fails, the file left alone).
pub fn open_appending(path: &Path, replace: Replace) -> std::io::Result<Box<dyn Write + Send>> {
    match target(path)? {
        Target::Stdout => Ok(Box::new(std::io::stdout())),
        Target::Stream => Ok(Box::new(OpenOptions::new().write(true).open(path)?)),
        Target::Refused(kind) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is {kind}", path.display()),
        )),
        Target::Regular(p) | Target::Absent(p) => {
            let mut o = OpenOptions::new();
            o.write(true);
            match replace {
                Replace::Allowed => o.create(true).truncate(true),
                Replace::Never => o.create_new(true),
            };
            let f = o.open(p).map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    std::io::Error::new(
                        e.kind(),
                        "a file is there that this run did not write (created since the run checked its outputs: \
                         another run writing the same file?); it is not replaced without --force",
                    )
                } else {
                    e
                }
            })?;
            Ok(Box::new(f))
        }
    }
}

/// The error of a write that found a file at its path where it may not replace one.
fn appeared(kept: &Path) -> std::io::Error {
    let kept = format!("; these results are kept in {}", kept.display());
    std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!(
            "a file is there that this run did not write (created since the run checked its outputs: another run \
             writing the same file?); it is not replaced without --force{kept}"
        ),
    )
}

/// Moves `from` to `to` only if nothing is at `to`, atomically: renameat2's RENAME_NOREPLACE, or where the
/// filesystem lacks it a hard link, which is exclusive too.
fn rename_new(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: renameat2 only reads the two NUL-terminated paths, which live for the whole call.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    if !matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
        return Err(e);
    }
    fs::hard_link(from, to)?;
    fs::remove_file(from)
}

/// Standard output, written in place through the process's descriptor: a file the shell opened (`>` or
/// `>>`) keeps what was there before, a pipe or terminal gets the bytes as they come.
fn write_stdout(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

/// How long a FIFO (or a terminal) may go without a reader, or without taking a byte, before its write fails:
/// a FIFO nobody reads would otherwise hold the run at its end for ever.
pub const STREAM_STALL: std::time::Duration = std::time::Duration::from_secs(10);

/// Writes `bytes` in place to a character device or FIFO, never blocking longer than `stall` without
/// progress: opened non-blocking (a FIFO without a reader is ENXIO, tried again until `stall`), then written
/// as fast as the reader takes it, each wait bounded by `stall`.
fn write_stream(path: &Path, bytes: &[u8], stall: std::time::Duration) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    use std::time::Instant;
    let path = dash(path);
    let open = || OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(path);
    let since = Instant::now();
    let mut f = loop {
        match open() {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && since.elapsed() < stall => {
                // No reader yet: one may be starting (a `cat FIFO &` launched beside the run).
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!(
                        "no process read it for {} s (a FIFO needs its reader running, e.g. `cat {} &`)",
                        stall.as_secs(),
                        path.display()
                    ),
                ))
            }
            Err(e) => return Err(e),
        }
    };
    let mut left = bytes;
    while !left.is_empty() {
        match f.write(left) {
            Ok(n) => left = &left[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut pfd = libc::pollfd {
                    fd: f.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                let ms = i32::try_from(stall.as_millis()).unwrap_or(i32::MAX);
                // SAFETY: poll reads and writes the one pollfd it is given, which lives for the call.
                let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
                if ready == 0 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "its reader took nothing for {} s ({} of {} bytes written)",
                            stall.as_secs(),
                            bytes.len() - left.len(),
                            bytes.len()
                        ),
                    ));
                }
                if ready < 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// What identifies the file an output path ends at: (device, inode) of the file where it exists (links
/// followed, so `./x`, `x` and a link to it are one), else of its directory with the file's name.
fn identity(path: &Path) -> Option<(u64, u64, Option<std::ffi::OsString>)> {
    use std::os::unix::fs::MetadataExt;
    let path = dash(path);
    if let Ok(m) = fs::metadata(path) {
        return Some((m.dev(), m.ino(), None));
    }
    let at = dangling(path).ok()?;
    let dir = fs::metadata(parent_dir(&at)).ok()?;
    Some((dir.dev(), dir.ino(), at.file_name().map(|n| n.to_os_string())))
}

/// Refuses two outputs that end at one file (the same path spelled two ways, a link, `-` and
/// `/dev/stdout`): the second writer would destroy the first's results. `outputs` are (path, flag).
pub fn refuse_same_file(outputs: &[(&Path, &str)]) -> Result<()> {
    for (i, (a, fa)) in outputs.iter().enumerate() {
        for (b, fb) in &outputs[i + 1..] {
            if a.as_os_str() == b.as_os_str() || identity(a).is_some_and(|x| identity(b) == Some(x)) {
                return Err(Error::usage(
                    *fb,
                    format!(
                        "'{}' is the same file as {fa} '{}'; give each output its own file",
                        b.display(),
                        a.display()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Whether `path` is this process's standard output: `-`, `/dev/stdout`, or any path to the same pipe, file or
/// terminal. The human table then goes to stderr, so the file's text stays whole on stdout.
pub fn is_stdout(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if path.as_os_str() == "-" {
        return true;
    }
    // SAFETY: fstat writes only the stat struct it is given; all-zero bytes are a valid stat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd 1 is queried, not used; the struct outlives the call.
    if unsafe { libc::fstat(1, &mut st) } != 0 {
        return false;
    }
    fs::metadata(path).is_ok_and(|m| m.dev() == st.st_dev as u64 && m.ino() == st.st_ino as u64)
}

/// The directory a file lands in (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// At most this many characters of an output's name go into the names of its temporary and kept files, so a
/// long name (up to the filesystem's 255 bytes) still leaves room for what is added.
const NAME_KEPT: usize = 40;

/// The start of `path`'s file name, cut to [`NAME_KEPT`] characters.
fn short_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    name.chars().take(NAME_KEPT).collect()
}

/// A hidden sibling of `path`, unique to this process; same directory so the move stays atomic.
fn temp_path(path: &Path) -> PathBuf {
    parent_dir(path).join(format!(".{}.tmp.{}", short_name(path), std::process::id()))
}

/// Where a write that may not replace the file at `path` keeps its bytes: a visible sibling, unique to this
/// process.
fn kept_path(path: &Path) -> PathBuf {
    parent_dir(path).join(format!("{}.kept-{}", short_name(path), std::process::id()))
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
        write_atomic(&path, b"one", Replace::Allowed).unwrap();
        write_atomic(&path, b"two", Replace::Allowed).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        let err = write_atomic(&dir.path().join("missing/r.json"), b"x", Replace::Allowed).unwrap_err();
        assert!(matches!(err, Error::Io { .. }));
    }

    #[test]
    fn a_file_that_appeared_is_never_replaced_without_force_and_the_results_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        write_atomic(&path, b"mine", Replace::Never).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "mine");
        // Another run's file, there before this write.
        fs::write(&path, "theirs").unwrap();
        let err = write_atomic(&path, b"ours", Replace::Never).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::EXIT_IO);
        let msg = err.to_string();
        assert!(msg.contains("--force") && msg.contains("kept in"), "{msg}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "theirs");
        let kept = dir.path().join(format!("r.json.kept-{}", std::process::id()));
        assert!(msg.contains(&kept.display().to_string()), "{msg}");
        assert_eq!(fs::read_to_string(&kept).unwrap(), "ours");
        // Allowed (--force, or the writer's own file) replaces.
        write_atomic(&path, b"forced", Replace::Allowed).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "forced");
    }

    #[test]
    fn the_longest_file_name_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n".repeat(255));
        check_writable(&path, false, "-J").unwrap();
        write_atomic(&path, b"x", Replace::Never).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "x");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn dash_is_standard_output_whatever_it_is() {
        assert_eq!(target(Path::new("-")).unwrap(), Target::Stdout);
        assert!(is_stream(Path::new("-")) && is_stdout(Path::new("-")));
        // Even where a file named `-` exists: it is not what `-` means.
        check_writable(Path::new("-"), false, "-J").unwrap();
    }

    fn link(dir: &Path, name: &str, to: &str) -> PathBuf {
        let l = dir.join(name);
        std::os::unix::fs::symlink(to, &l).unwrap();
        l
    }

    #[test]
    fn character_device_is_written_in_place_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let l = link(dir.path(), "null", "/dev/null");
        check_writable(&l, false, "-J").unwrap();
        assert!(is_stream(&l));
        write_atomic(&l, b"{}", Replace::Allowed).unwrap();
        assert!(fs::symlink_metadata(&l).unwrap().file_type().is_symlink());
        assert!(fs::metadata("/dev/null").unwrap().file_type().is_char_device());
    }

    #[test]
    fn full_device_is_an_io_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let l = link(dir.path(), "full", "/dev/full");
        check_writable(&l, true, "--markdown").unwrap();
        match write_atomic(&l, b"x", Replace::Allowed) {
            Err(e @ Error::Io { .. }) => {
                assert_eq!(e.exit_code(), crate::error::EXIT_IO);
                assert!(
                    e.to_string().contains("full") && e.to_string().contains("No space left"),
                    "{e}"
                );
            }
            other => panic!("expected an I/O error, got {other:?}"),
        }
        assert!(fs::symlink_metadata(&l).unwrap().file_type().is_symlink());
    }

    #[test]
    fn fifo_is_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo only reads the NUL-terminated path owned by `c`.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        check_writable(&fifo, false, "--csv").unwrap();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(fifo).unwrap())
        };
        write_atomic(&fifo, b"row\n", Replace::Allowed).unwrap();
        assert_eq!(reader.join().unwrap(), b"row\n");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn link_to_a_regular_file_is_followed_and_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.json");
        fs::write(&target, "old").unwrap();
        let l = link(dir.path(), "out.json", "real.json");
        usage_message(check_writable(&l, false, "-J"));
        check_writable(&l, true, "-J").unwrap();
        write_atomic(&l, b"new", Replace::Allowed).unwrap();
        assert!(fs::symlink_metadata(&l).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
        // A dangling link is followed to where its target will be created.
        let dangling = link(dir.path(), "later.json", "made.json");
        check_writable(&dangling, false, "-J").unwrap();
        write_atomic(&dangling, b"made", Replace::Allowed).unwrap();
        assert_eq!(fs::read_to_string(dir.path().join("made.json")).unwrap(), "made");
    }

    #[test]
    fn socket_is_refused_even_with_force() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let (flag, msg) = usage_message(check_writable(&sock, true, "--junit"));
        assert_eq!(flag, "--junit");
        assert!(msg.contains("is a socket"), "{msg}");
        assert!(write_atomic(&sock, b"x", Replace::Allowed).is_err());
        assert!(fs::symlink_metadata(&sock).unwrap().file_type().is_socket());
    }

    #[test]
    fn chart_directory_must_be_writable() {
        let dir = tempfile::tempdir().unwrap();
        check_dir_writable(&dir.path().join("charts/run1"), "--plot").unwrap();
        assert!(dir.path().join("charts/run1").is_dir());
        let file = dir.path().join("plain");
        fs::write(&file, "").unwrap();
        let (flag, msg) = usage_message(check_dir_writable(&file.join("charts"), "--plot"));
        assert_eq!(flag, "--plot");
        assert!(msg.contains("cannot create"), "{msg}");
        // /proc/self exists but takes no new files, whoever runs the test.
        let (_, msg) = usage_message(check_dir_writable(Path::new("/proc/self"), "--plot"));
        assert!(msg.contains("cannot write in /proc/self"), "{msg}");
    }
}
