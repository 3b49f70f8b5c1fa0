//! What a rank tells the rendezvous when it joins (its endpoints, its options, its launcher's job ids), and
//! what every rank learns of it.

use serde::{Deserialize, Serialize};

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
}

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
        }
    }
}
