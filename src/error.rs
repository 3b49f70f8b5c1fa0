//! Errors a user can hit, and the exit code each maps to.

use thiserror::Error;

/// Exit status: data was measured and is right.
pub const EXIT_OK: i32 = 0;
/// Exit status: wrong data in at least one point (or, later, a failed verdict).
pub const EXIT_WRONG: i32 = 1;
/// Exit status: bad command line or environment; nothing was run.
pub const EXIT_USAGE: i32 = 2;
/// Exit status: a peer, the transport or a deadline failed.
pub const EXIT_PEER: i32 = 3;
/// Exit status: a local I/O failure, such as an output file that cannot be written.
pub const EXIT_IO: i32 = 4;

/// Everything that can end a run early.
#[derive(Debug, Error)]
pub enum Error {
    /// A flag or environment variable has a bad value. `flag` names it (`-b`, `--np`, `COLLBENCH_RANK`).
    #[error("{flag}: {message}")]
    Usage { flag: String, message: String },
    /// A peer, a connection or a deadline failed; the message names rank, host, peer and operation.
    #[error("{0}")]
    Peer(String),
    /// A local I/O failure with what was being done.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// A usage error naming `flag`.
    pub fn usage(flag: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Usage {
            flag: flag.into(),
            message: message.into(),
        }
    }

    /// An I/O error with what was being done when it happened.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// The same error, its message prefixed with the phase it happened in (`during all_reduce of 4 MiB`);
    /// only peer failures, whose messages are about the run, say where they happened.
    pub fn during(self, phase: &str) -> Error {
        match self {
            Error::Peer(m) if !m.starts_with("during ") => Error::Peer(format!("during {phase}: {m}")),
            other => other,
        }
    }

    /// The phase a peer failure happened in (`during all_reduce of 4 MiB`), as [`Error::during`] added it.
    pub fn phase(&self) -> Option<&str> {
        match self {
            Error::Peer(m) if m.starts_with("during ") => m.split_once(": ").map(|(p, _)| p),
            _ => None,
        }
    }

    /// The process exit status for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage { .. } => EXIT_USAGE,
            Error::Peer(_) => EXIT_PEER,
            Error::Io { .. } => EXIT_IO,
        }
    }
}

/// Writes one line to stderr and ignores a failure: a closed stderr (`2>&1 >/dev/null | head -2`) or a
/// full one must not end a run that still has results to measure and write. Use the crate's `stderr!` macro.
pub fn stderr_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{args}");
}

/// `eprintln!` that never panics (std's does when stderr is a closed pipe): one line through
/// [`stderr_line`].
macro_rules! stderr {
    ($($arg:tt)*) => {
        $crate::error::stderr_line(format_args!($($arg)*))
    };
}
pub(crate) use stderr;

/// Result with collbench's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Text from a peer or a file (a host name, an abort note, a path), made safe to print: control characters
/// (escape sequences that clear a terminal or set its title, carriage returns that overwrite a line) are shown
/// escaped (`\u{1b}`), the rest as it is. Use it wherever such text reaches a terminal.
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod escape_tests {
    #[test]
    fn control_characters_from_peers_are_shown_escaped_and_plain_text_is_untouched() {
        assert_eq!(super::escape("h1.example, ok: 3 µs"), "h1.example, ok: 3 µs");
        let hostile = "h\u{1b}[2J\u{1b}]0;owned\u{7}\r\nx\u{9b}y";
        let shown = super::escape(hostile);
        assert!(!shown.chars().any(char::is_control), "{shown}");
        assert_eq!(shown, "h\\u{1b}[2J\\u{1b}]0;owned\\u{7}\\r\\nx\\u{9b}y");
    }
}
