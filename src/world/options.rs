//! The deadlines of a job (`-T`, `--bootstrap-timeout`, `--connect-timeout`), shared by `run`, `preflight`
//! and `pairwise`. Validated here, naming the flag in every error.

use std::time::Duration;

use serde::Serialize;

use crate::cli::DeadlineArgs;
use crate::defaults;
use crate::error::Result;
use crate::flags::timeout;

/// Every wait's deadline. Every rank must agree on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Deadlines {
    /// Deadline for any single wait in a collective (`-T`, seconds).
    pub timeout: Duration,
    /// Deadline of the bootstrap: reaching the rendezvous and every rank joining (`--bootstrap-timeout`).
    pub bootstrap_timeout: Duration,
    /// Deadline of opening and authenticating the data connections (`--connect-timeout`).
    pub connect_timeout: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            timeout: Duration::from_secs(defaults::TIMEOUT_S),
            bootstrap_timeout: Duration::from_secs(defaults::BOOTSTRAP_TIMEOUT_S),
            connect_timeout: Duration::from_secs(defaults::CONNECT_TIMEOUT_S),
        }
    }
}

impl Deadlines {
    /// Validates the deadline flags: positive, finite, at most a week.
    pub fn from_cli(args: &DeadlineArgs) -> Result<Deadlines> {
        Ok(Deadlines {
            timeout: timeout("-T/--timeout", args.timeout)?,
            bootstrap_timeout: timeout("--bootstrap-timeout", args.bootstrap_timeout)?,
            connect_timeout: timeout("--connect-timeout", args.connect_timeout)?,
        })
    }
}
