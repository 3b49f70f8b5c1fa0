//! What a rank tells the rendezvous when it joins (its endpoints, its options, its launcher's job ids), and
//! what every rank learns of it.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::world::rank_info::{Endpoint, RankInfo};

/// What a rank tells the rendezvous.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Join {
    pub rank: usize,
    pub size: usize,
    pub host: String,
    pub pid: u32,
    /// One data listener per TCP path, in `--transport` order.
    pub endpoints: Vec<Endpoint>,
    /// collbench version.
    pub version: String,
    /// The options every rank must agree on.
    pub consensus: serde_json::Value,
    /// The launcher's job identifiers (`NAME=value`), empty where it sets none: ranks of two jobs that share
    /// a token are told apart by these.
    #[serde(default)]
    pub job: Vec<String>,
    /// Where this rank's relay listener serves the table to its children (`ip:port`); none where it has none,
    /// and then its children get the table from the rendezvous.
    #[serde(default)]
    pub relay: Option<String>,
    /// Set where this rank refuses to start (its own checks failed): it joins only so that the rendezvous tells
    /// every rank at once, rather than leave them waiting for it until their deadline. Left out of the join
    /// when not set, so a join reads the same as before to a service that does not know it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Refusal>,
}

/// Why a rank refuses to start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The flag or variable to fix, where the rank's error is a usage error naming one (`-J`).
    #[serde(default)]
    pub flag: Option<String>,
    /// What the rank found wrong, without the flag.
    pub reason: String,
}

impl Refusal {
    /// The refusal a rank sends for its error `e`.
    pub fn of(e: &Error) -> Refusal {
        match e {
            Error::Usage { flag, message } => Refusal {
                flag: Some(flag.clone()),
                reason: message.clone(),
            },
            other => Refusal {
                flag: None,
                reason: other.to_string(),
            },
        }
    }
}

/// The longest refusal reason passed on whole: an error message is a few lines at most.
const MAX_REASON: usize = 4096;

impl Join {
    /// The same join with the text it carries (host, interface and address names) made safe to print: a peer's
    /// escape sequences must not reach any rank's terminal, nor its megabyte of a name.
    pub fn printable(mut self) -> Join {
        use crate::world::rank_info::{printable, MAX_HOST, MAX_NAME};
        self.host = printable(&self.host, MAX_HOST);
        self.version = printable(&self.version, MAX_NAME);
        for e in &mut self.endpoints {
            e.make_printable();
        }
        for j in &mut self.job {
            *j = printable(j, MAX_NAME);
        }
        if let Some(r) = self.relay.as_mut() {
            *r = printable(r, MAX_NAME);
        }
        if let Some(r) = self.refused.as_mut() {
            r.flag = r.flag.as_deref().map(|f| printable(f, MAX_NAME));
            r.reason = printable(&r.reason, MAX_REASON);
        }
        self
    }

    /// What every rank learns about this one.
    pub fn info(&self) -> RankInfo {
        let first = self.endpoints.first().cloned().unwrap_or(Endpoint {
            iface: "-".into(),
            addr: "-".into(),
            reason: None,
        });
        RankInfo {
            rank: self.rank,
            pid: self.pid,
            host: self.host.clone(),
            iface: first.iface,
            addr: first.addr,
            endpoints: self.endpoints.clone(),
            device: None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A join of `rank` in a job of 2 with these consensus fields (shared with `disagreement`'s tests).
    pub(crate) fn join_msg(rank: usize, consensus: serde_json::Value) -> Join {
        Join {
            rank,
            size: 2,
            host: "h".into(),
            pid: 1,
            endpoints: vec![Endpoint {
                iface: "lo".into(),
                addr: "127.0.0.1:1".into(),
                reason: None,
            }],
            version: "0.1.0".into(),
            consensus,
            job: Vec::new(),
            relay: None,
            refused: None,
        }
    }

    #[test]
    fn a_refusal_travels_in_the_join_and_an_ordinary_join_reads_as_before() {
        let e = Error::usage("-J", "r.json exists; use --force to overwrite");
        let j = Join {
            refused: Some(Refusal::of(&e)),
            ..join_msg(0, serde_json::json!({}))
        };
        let back: Join = serde_json::from_slice(&serde_json::to_vec(&j).unwrap()).unwrap();
        assert_eq!(
            back.refused,
            Some(Refusal {
                flag: Some("-J".into()),
                reason: "r.json exists; use --force to overwrite".into(),
            })
        );
        // A join without a refusal carries no such field, and one written without it reads as none.
        let plain = serde_json::to_value(join_msg(1, serde_json::json!({}))).unwrap();
        assert!(plain.get("refused").is_none(), "{plain}");
        let back: Join = serde_json::from_value(plain).unwrap();
        assert_eq!(back.refused, None);
        // An error that names no flag is passed on whole; text a peer sent is made safe to print.
        let io = Error::io("reading x", std::io::Error::other("gone"));
        assert_eq!(Refusal::of(&io).flag, None);
        assert_eq!(Refusal::of(&io).reason, "reading x: gone");
        let hostile = Join {
            refused: Some(Refusal {
                flag: Some("-J\u{1b}[2J".into()),
                reason: format!("x\u{1b}]0;pwned\u{7}{}", "y".repeat(1 << 20)),
            }),
            ..join_msg(1, serde_json::json!({}))
        }
        .printable();
        let r = hostile.refused.unwrap();
        assert!(
            !r.reason.chars().any(char::is_control) && r.reason.len() < MAX_REASON + 64,
            "{}",
            r.reason.len()
        );
        assert!(!r.flag.unwrap().chars().any(char::is_control));
    }
}
