//! A testing aid (`--fault RANK:PHASE:ACTION`, hidden): one rank kills (SIGKILL) or stops (SIGSTOP) itself
//! at a named phase, so tests can put a fault exactly where they need it without racing the run.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::collective::Collective;
use crate::error::stderr;
use crate::sizes::{format_size, parse_size};

/// Where a fault fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Right after this rank sent its join to the rendezvous.
    Bootstrap,
    /// After the bootstrap, before this rank opens or accepts any data connection.
    Connect,
    /// Before the first timed iteration of the first point of `coll` with at least `min_bytes`.
    Collective { coll: Collective, min_bytes: u64 },
}

/// What the faulty rank does to itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// SIGKILL: the process dies and the kernel closes its sockets.
    Kill,
    /// SIGSTOP: the process stays alive at the socket level but makes no progress.
    Stop,
    /// Every timed iteration of the one point of exactly the phase's size waits [`SLOW`] first, as a spell
    /// of loss on the link would slow that point alone.
    Slow,
}

/// How much `slow` adds to each timed iteration of its point.
pub const SLOW: std::time::Duration = std::time::Duration::from_millis(20);

/// One planned fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub rank: usize,
    pub phase: Phase,
    pub action: Action,
}

/// The hidden testing aids of `run` and `preflight` (`--corrupt-rank`, `--fault`). Every rank must agree on them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TestAids {
    /// `--corrupt-rank`: this rank corrupts one output element in every data check.
    pub corrupt_rank: Option<usize>,
    /// `--fault`: one rank kills or stops itself at a named phase.
    pub fault: Option<Fault>,
}

impl TestAids {
    /// Validates `--corrupt-rank` and the `--fault` text, naming `--fault` in its error.
    pub fn from_cli(corrupt_rank: Option<usize>, fault: Option<&str>) -> crate::error::Result<TestAids> {
        Ok(TestAids {
            corrupt_rank,
            fault: fault
                .map(|f| f.parse().map_err(|e| crate::error::Error::usage("--fault", e)))
                .transpose()?,
        })
    }
}

impl Fault {
    /// Fires the fault when `rank` is the faulty rank and `here` is its phase.
    pub fn check(fault: Option<&Fault>, rank: usize, here: &Phase) {
        if let Some(f) = fault {
            if f.rank == rank && f.phase == *here {
                f.fire();
            }
        }
    }

    /// Fires the fault when `rank` runs `coll` at `bytes` and that reaches the planned point.
    pub fn check_point(fault: Option<&Fault>, rank: usize, coll: Collective, bytes: u64) {
        if let Some(
            f @ Fault {
                phase: Phase::Collective { coll: c, min_bytes },
                ..
            },
        ) = fault
        {
            if f.rank == rank && *c == coll && bytes >= *min_bytes && f.action != Action::Slow {
                f.fire();
            }
        }
    }

    /// What `slow` adds to each timed iteration when `rank` runs `coll` at `bytes`: [`SLOW`] at the point of
    /// exactly the planned size, nothing elsewhere.
    pub fn slow_at(fault: Option<&Fault>, rank: usize, coll: Collective, bytes: u64) -> Option<std::time::Duration> {
        match fault? {
            Fault {
                rank: r,
                phase: Phase::Collective { coll: c, min_bytes },
                action: Action::Slow,
            } if *r == rank && *c == coll && bytes == *min_bytes => Some(SLOW),
            _ => None,
        }
    }

    fn fire(&self) {
        let sig = match self.action {
            Action::Kill => libc::SIGKILL,
            Action::Stop => libc::SIGSTOP,
            Action::Slow => return,
        };
        stderr!("collbench: rank {}: --fault: {self}", self.rank);
        // SAFETY: raise has no memory-safety preconditions.
        unsafe { libc::raise(sig) };
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Bootstrap => f.write_str("bootstrap"),
            Phase::Connect => f.write_str("connect"),
            Phase::Collective { coll, min_bytes } => write!(f, "{coll}@{}", format_size(*min_bytes)),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let action = match self.action {
            Action::Kill => "kill",
            Action::Stop => "stop",
            Action::Slow => "slow",
        };
        write!(f, "{}:{}:{action}", self.rank, self.phase)
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let [rank, phase, action] = parts[..] else {
            return Err(format!(
                "'{s}' is not RANK:PHASE:ACTION (e.g. 2:all_reduce@4M:kill, 1:connect:stop)"
            ));
        };
        let rank = rank
            .parse()
            .map_err(|_| format!("'{rank}' in '{s}' is not a rank number"))?;
        let phase = match phase {
            "bootstrap" => Phase::Bootstrap,
            "connect" => Phase::Connect,
            p => match p.split_once('@') {
                Some((c, size)) => Phase::Collective {
                    coll: c.parse().map_err(|e| format!("phase '{p}': {e}"))?,
                    min_bytes: parse_size(size).map_err(|e| format!("phase '{p}': {e}"))?,
                },
                None => {
                    return Err(format!(
                        "unknown phase '{p}': use bootstrap, connect or COLLECTIVE@SIZE"
                    ))
                }
            },
        };
        let action = match action {
            "kill" => Action::Kill,
            "stop" => Action::Stop,
            "slow" => Action::Slow,
            a => return Err(format!("unknown action '{a}': use kill, stop or slow")),
        };
        Ok(Fault { rank, phase, action })
    }
}

impl Serialize for Fault {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_and_print_back() {
        for s in ["2:bootstrap:kill", "0:connect:stop", "3:all_reduce@4MiB:kill"] {
            let f: Fault = s.parse().unwrap();
            assert_eq!(f.to_string().parse::<Fault>().unwrap(), f, "{s}");
        }
        let f: Fault = "1:all_gather@1K:stop".parse().unwrap();
        assert_eq!(
            f.phase,
            Phase::Collective {
                coll: Collective::AllGather,
                min_bytes: 1024
            }
        );
        assert_eq!(f.action, Action::Stop);
        for bad in [
            "1:boot:kill",
            "x:connect:kill",
            "1:connect:nap",
            "1:connect",
            "1:all_reduce@7Q:kill",
        ] {
            assert!(bad.parse::<Fault>().is_err(), "{bad}");
        }
    }
}
