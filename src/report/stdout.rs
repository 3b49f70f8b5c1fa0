//! Standard output as every command writes it: a reader that went away (`| head`, `| true`) is no error and
//! stops nothing (what was not printed is in the files asked for), while a device that cannot take the text
//! (`> /dev/full`, a full disk) is exit 4 naming standard output. Rust's `print!` would panic on both.

use std::io::{ErrorKind, Write};

use crate::error::{Error, Result};

/// Writes `text` to standard output and flushes it; see the module for what a failure means.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != ErrorKind::BrokenPipe => Err(Error::io("writing to standard output", e)),
        _ => Ok(()),
    }
}

/// [`print()`], or to standard error where an output file took standard output (`-J -`, `-J /dev/stdout`), so
/// the file's text stays whole for its reader (`| jq`).
pub fn print_beside(text: &str, stdout_taken: bool) -> Result<()> {
    if stdout_taken {
        // A closed stderr loses the human text only; the file is on stdout.
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
        return Ok(());
    }
    print(text)
}

/// A `Write` on standard output for reporters that stream (the run's table): once its reader is gone it
/// discards what follows, so the run goes on measuring and writing its files; other errors are returned.
pub struct Stdout<W: Write = std::io::Stdout> {
    out: W,
    reader_gone: bool,
}

impl Stdout {
    /// On the process's standard output.
    pub fn new() -> Stdout {
        Stdout::over(std::io::stdout())
    }
}

impl Default for Stdout {
    fn default() -> Self {
        Stdout::new()
    }
}

impl<W: Write> Stdout<W> {
    /// Over any writer (tests give one that fails).
    pub fn over(out: W) -> Stdout<W> {
        Stdout {
            out,
            reader_gone: false,
        }
    }

    fn gone(&mut self, e: &std::io::Error) -> bool {
        if e.kind() == ErrorKind::BrokenPipe {
            if !self.reader_gone {
                crate::error::stderr!(
                    "collbench: standard output was closed by its reader; the run goes on, and the files asked for \
                     keep every point"
                );
            }
            self.reader_gone = true;
        }
        self.reader_gone
    }
}

impl<W: Write> Write for Stdout<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.reader_gone {
            return Ok(buf.len());
        }
        match self.out.write(buf) {
            Err(e) if self.gone(&e) => Ok(buf.len()),
            other => other,
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.reader_gone {
            return Ok(());
        }
        match self.out.flush() {
            Err(e) if self.gone(&e) => Ok(()),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails every write with `kind`.
    struct Failing(ErrorKind, usize);

    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            self.1 += 1;
            Err(std::io::Error::from(self.0))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_reader_is_discarded_from_then_on_and_a_full_device_is_an_error() {
        let mut s = Stdout::over(Failing(ErrorKind::BrokenPipe, 0));
        assert_eq!(s.write(b"row 1\n").unwrap(), 6);
        assert_eq!(s.write(b"row 2\n").unwrap(), 6);
        assert!(s.flush().is_ok());
        assert_eq!(s.out.1, 1, "after the reader went away nothing more is tried");
        let mut s = Stdout::over(Failing(ErrorKind::StorageFull, 0));
        assert_eq!(s.write(b"row\n").unwrap_err().kind(), ErrorKind::StorageFull);
    }
}
