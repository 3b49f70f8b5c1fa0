//! Files a user names, read with a bound: a regular file no larger than the bound, or an error that says the
//! file's size (or kind) and the bound. Nothing here waits on a FIFO with no writer or reads a device
//! without end.

use std::io::Read;
use std::path::Path;

/// Why a bounded read refused or failed; rendered as one sentence that names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("cannot read '{path}': {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Not a regular file (a FIFO, a device, a directory, a socket): such a file can block or never end.
    #[error("'{path}' is {kind}, not a regular file; give the path of a file")]
    NotAFile { path: String, kind: &'static str },
    /// Larger than the bound.
    #[error("'{path}' holds more than {limit} bytes, the most this file may hold")]
    TooLarge { path: String, limit: u64 },
}

/// What kind of file `meta` describes, in words, when it is not a regular file.
fn kind_of(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a plain file")
    }
}

/// Reads `path` (links followed) as UTF-8 text of at most `limit` bytes.
pub fn read_to_string(path: &Path, limit: u64) -> Result<String, ReadError> {
    use std::os::unix::fs::OpenOptionsExt;
    let shown = || path.display().to_string();
    let io = |source| ReadError::Io { path: shown(), source };
    // Opened non-blocking (a FIFO with no writer opens at once) and judged by what was opened, so nothing swapped
    // in between a check and the open can block the read.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if let Some(kind) = kind_of(&meta) {
        return Err(ReadError::NotAFile { path: shown(), kind });
    }
    if meta.len() > limit {
        return Err(ReadError::TooLarge { path: shown(), limit });
    }
    // The file may have grown since: never read past the bound.
    let mut text = String::new();
    file.take(limit + 1).read_to_string(&mut text).map_err(io)?;
    if text.len() as u64 > limit {
        return Err(ReadError::TooLarge { path: shown(), limit });
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_within_the_bound_is_read_and_one_beyond_it_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "12345").unwrap();
        assert_eq!(read_to_string(&p, 5).unwrap(), "12345");
        let e = read_to_string(&p, 4).unwrap_err().to_string();
        assert!(
            e.contains("more than 4 bytes") && e.contains(&p.display().to_string()),
            "{e}"
        );
    }

    #[test]
    fn a_directory_a_device_and_a_fifo_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_to_string(dir.path(), 10).unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        let e = read_to_string(Path::new("/dev/zero"), 10).unwrap_err().to_string();
        assert!(e.contains("a device"), "{e}");
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Opening it for reading would block with no writer: refused before that.
        let e = read_to_string(&fifo, 10).unwrap_err().to_string();
        assert!(e.contains("a FIFO"), "{e}");
    }
}
