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
    /// A peer, a connection or a deadline failed; its facts (phase, culprit, peer, operation) are typed.
    #[error("{0}")]
    Peer(Box<PeerFailure>),
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

    /// A peer, connection or deadline failure saying `message`; [`Error::during`], [`Error::blaming`] and
    /// [`Error::with_peer`] add the facts it is about.
    pub fn peer(message: impl Into<String>) -> Self {
        Error::Peer(Box::new(PeerFailure {
            message: message.into(),
            ..PeerFailure::default()
        }))
    }

    /// The same error with the phase it happened in (`all_reduce of 4 MiB`), which its message then opens
    /// with (`during all_reduce of 4 MiB: `); only peer failures, whose messages are about the run, say where
    /// they happened, and the first phase given is kept.
    pub fn during(mut self, phase: &str) -> Error {
        if let Error::Peer(f) = &mut self {
            f.phase.get_or_insert_with(|| phase.to_string());
        }
        self
    }

    /// The same error naming `rank` on `host` as the culprit, which its message then ends with
    /// (`. Culprit: rank R (host H)`); other errors are returned unchanged.
    pub fn blaming(mut self, rank: usize, host: impl Into<String>) -> Error {
        if let Error::Peer(f) = &mut self {
            f.culprit = Some(Culprit::Rank(Party::new(rank, host)));
        }
        self
    }

    /// The same error noting `rank` on `host` as the peer this rank was dealing with (its message already
    /// says so in words); other errors are returned unchanged.
    pub fn with_peer(mut self, rank: usize, host: impl Into<String>) -> Error {
        if let Error::Peer(f) = &mut self {
            f.peer = Some(Party::new(rank, host));
        }
        self
    }

    /// The same error with `server` as the process serving the rendezvous it blames, where it blames one.
    pub fn served_by(mut self, server: impl Into<String>) -> Error {
        if let Error::Peer(f) = &mut self {
            if let Some(Culprit::RendezvousAt { server: s, .. }) = &mut f.culprit {
                *s = server.into();
            }
        }
        self
    }

    /// The same error noting what was being done or waited for (its message already says so in words).
    pub fn waiting_for(mut self, operation: impl Into<String>) -> Error {
        if let Error::Peer(f) = &mut self {
            f.operation = Some(operation.into());
        }
        self
    }

    /// The phase a peer failure happened in (`all_reduce of 4 MiB`), as [`Error::during`] set it.
    pub fn phase(&self) -> Option<&str> {
        self.failure().and_then(|f| f.phase.as_deref())
    }

    /// The culprit a peer failure names, if it names one.
    pub fn culprit(&self) -> Option<&Culprit> {
        self.failure().and_then(|f| f.culprit.as_ref())
    }

    /// The facts of a peer failure; `None` for usage and I/O errors.
    pub fn failure(&self) -> Option<&PeerFailure> {
        match self {
            Error::Peer(f) => Some(f.as_ref()),
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

/// A rank and the host it runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Party {
    /// The rank.
    pub rank: usize,
    /// Its host name.
    pub host: String,
}

impl Party {
    /// `rank` on `host`.
    pub fn new(rank: usize, host: impl Into<String>) -> Self {
        Party {
            rank,
            host: host.into(),
        }
    }
}

impl std::fmt::Display for Party {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {} (host {})", self.rank, self.host)
    }
}

/// Whom a failure is blamed on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Culprit {
    /// One rank of the job.
    Rank(Party),
    /// The process serving the rendezvous, which could not serve it (stopped or starved), not any rank.
    Rendezvous,
    /// The rendezvous at `root`, as a rank that joined it saw it: it accepted the connection but never
    /// answered (its process stopped, hung or starved). `server` names that process (`rank 0 (host H)`).
    RendezvousAt { root: String, server: String },
    /// The link between two ranks that each gave up waiting on the other (both alive): `a` the lower rank.
    Link { a: Party, b: Party },
}

impl std::fmt::Display for Culprit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Culprit::Rank(p) => p.fmt(f),
            Culprit::Rendezvous => f.write_str("this process (the rendezvous), not the ranks"),
            Culprit::RendezvousAt { root, server } => write!(f, "the rendezvous at {root}, served by {server}"),
            Culprit::Link { a, b } => write!(f, "the link between {a} and {b}"),
        }
    }
}

/// What a peer, connection or deadline failure is about, and what happened. Its message is rendered from
/// these facts: `during PHASE: MESSAGE. Culprit: CULPRIT AFTER`, each part present when its fact is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PeerFailure {
    /// The phase of the run it happened in (`all_reduce of 4 MiB`, `connection set-up of tcp@lo`).
    pub phase: Option<String>,
    /// The one party every rank names as the cause, when one is named.
    pub culprit: Option<Culprit>,
    /// The peer this rank was dealing with (waiting on, connecting to) when it failed, if one.
    pub peer: Option<Party>,
    /// What was being done or waited for, if known.
    pub operation: Option<String>,
    /// What happened: the message without its phase and culprit.
    pub message: String,
    /// Facts told after the culprit (connections refused meanwhile), with their leading space.
    pub after: String,
}

impl PeerFailure {
    /// The message without its phase: what happened, the culprit and what follows it.
    pub fn unphased(&self) -> String {
        let mut s = self.message.clone();
        if let Some(c) = &self.culprit {
            s.push_str(&format!(". Culprit: {c}"));
        }
        s.push_str(&self.after);
        s
    }
}

impl std::fmt::Display for PeerFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(p) = &self.phase {
            write!(f, "during {p}: ")?;
        }
        f.write_str(&self.unphased())
    }
}

/// Writes one line to stderr and ignores a failure: a closed stderr (`2>&1 >/dev/null | head -2`) or a
/// full one must not end a run that still has results to measure and write. Use the crate's `stderr!` macro.
pub fn stderr_line(args: std::fmt::Arguments<'_>) {
    let _ = line_to(&mut std::io::stderr().lock(), args);
}

/// `args` and a newline to `w` in one write: stderr is unbuffered, so `writeln!` would make a write per
/// piece of the format, and local ranks sharing the launcher's stderr would cut into each other's lines.
/// (A pipe keeps a write of up to 4 KiB whole.)
fn line_to(w: &mut impl std::io::Write, args: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    w.write_all(format!("{args}\n").as_bytes())
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
mod tests {
    use super::*;

    /// A writer that keeps each write apart.
    struct Writes(Vec<Vec<u8>>);

    impl std::io::Write for Writes {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.push(b.to_vec());
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_to_stderr_is_one_write() {
        let mut w = Writes(Vec::new());
        let (rank, what) = (2, "the nccl path");
        line_to(
            &mut w,
            format_args!("collbench: error: during {what}: rank {rank} (host vm)"),
        )
        .unwrap();
        assert_eq!(
            w.0,
            [b"collbench: error: during the nccl path: rank 2 (host vm)\n".to_vec()]
        );
    }

    #[test]
    fn a_peer_failure_renders_its_phase_message_and_culprit() {
        let e = Error::peer("rank 1 (host h1): rank 2 (host h2) is unresponsive")
            .during("all_reduce of 4 MiB")
            .blaming(2, "h2");
        assert_eq!(
            e.to_string(),
            "during all_reduce of 4 MiB: rank 1 (host h1): rank 2 (host h2) is unresponsive. Culprit: rank 2 (host h2)"
        );
        assert_eq!(e.phase(), Some("all_reduce of 4 MiB"));
        assert_eq!(e.culprit(), Some(&Culprit::Rank(Party::new(2, "h2"))));
        assert_eq!(e.exit_code(), EXIT_PEER);
    }

    #[test]
    fn the_first_phase_stays_and_a_message_that_reads_like_one_is_not_one() {
        let e = Error::peer("lost")
            .during("connection set-up of tcp@lo")
            .during("the pairwise test");
        assert_eq!(e.phase(), Some("connection set-up of tcp@lo"));
        assert_eq!(e.to_string(), "during connection set-up of tcp@lo: lost");
        // Text is never parsed back: only `during` sets the phase.
        let quoted = Error::peer("during the bootstrap: rank 2 dropped its connection");
        assert_eq!(quoted.phase(), None);
    }

    #[test]
    fn usage_and_io_errors_take_no_peer_facts() {
        let u = Error::usage("--np", "must be at least 1").during("x").blaming(1, "h");
        assert_eq!(u.to_string(), "--np: must be at least 1");
        assert!(u.phase().is_none() && u.culprit().is_none() && u.failure().is_none());
    }

    #[test]
    fn facts_told_after_the_culprit_follow_it() {
        let f = PeerFailure {
            message: "rendezvous at x: the service stood still".into(),
            culprit: Some(Culprit::Rendezvous),
            after: " Refused on the way: 1 connection(s): wrong job token".into(),
            ..PeerFailure::default()
        };
        assert_eq!(
            f.to_string(),
            "rendezvous at x: the service stood still. Culprit: this process (the rendezvous), not the ranks \
             Refused on the way: 1 connection(s): wrong job token"
        );
    }
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
