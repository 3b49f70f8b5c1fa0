//! The rank table: built once by the service when every rank joined (serialised once, with each rank's welcome
//! saying where to get it: from the rendezvous, or from its parent in the relay tree), then fetched by each
//! rank, checked, and served on to its children.

use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use super::join_message::Join;
use crate::error::{Error, Result};
use crate::world::disagreement::disagreement;
use crate::world::rank_info::RankInfo;
use crate::world::relay::{self, Source, Table, Welcome};

/// The rendezvous's answer once every rank joined.
pub struct Answer {
    /// Every rank's info, by rank.
    pub infos: Vec<RankInfo>,
    /// The same, serialised once, with its digest.
    pub table: Table,
    /// Each rank's welcome, by rank.
    pub welcomes: Vec<Welcome>,
}

/// The answer to `joins` (one per rank of a job of `size`, in rank order), or the message naming the ranks whose
/// options differ. Linear in the job: the table is serialised once, and sent whole only to the ranks without
/// a parent (or whose parent cannot relay); the others get a welcome of a few hundred bytes.
pub fn answer(joins: &[&Join], size: usize) -> std::result::Result<Answer, String> {
    if let Some(msg) = disagreement(joins) {
        return Err(msg);
    }
    let infos: Vec<RankInfo> = joins.iter().map(|j| j.info()).collect();
    let table = Table::new(serde_json::to_vec(&infos).map_err(|e| format!("serialising the rank table: {e}"))?);
    let welcomes = joins
        .iter()
        .map(|j| table.welcome(size, source(j.rank, |p| joins.get(p).copied())))
        .collect();
    Ok(Answer { infos, table, welcomes })
}

/// Where rank `r` gets the table: from its parent (looked up by rank) where the parent has a relay listener,
/// else from the rendezvous.
fn source<'a>(r: usize, join_of: impl Fn(usize) -> Option<&'a Join>) -> Source {
    match relay::parent(r).and_then(join_of) {
        Some(Join {
            rank,
            host,
            relay: Some(addr),
            ..
        }) => Source::Parent {
            rank: *rank,
            host: host.clone(),
            addr: addr.clone(),
        },
        _ => Source::Rendezvous,
    }
}

/// The rank table from its bytes, with the text it carries made safe to print (it reaches the terminal).
fn decode_table(bytes: &[u8], who: &str) -> Result<Vec<RankInfo>> {
    let t: Vec<RankInfo> = serde_json::from_slice(bytes)
        .map_err(|e| Error::peer(format!("{who}: the rank table from the rendezvous is malformed: {e}")))?;
    // Made printable on arrival too (the rendezvous did so on admission): every name printed from here on is safe.
    Ok(t.into_iter().map(RankInfo::printable).collect())
}

/// Gets the table the welcome `w` announces (from `sock`, the connection to the rendezvous, or from this rank's
/// parent), then serves it to this rank's children on `relay` before returning.
pub(super) fn fetch_table(
    w: &Welcome,
    sock: &mut TcpStream,
    relay: Option<TcpListener>,
    me: &Join,
    who: &str,
    root: &str,
    deadline: Instant,
) -> Result<Vec<RankInfo>> {
    let bytes = match &w.from {
        Source::Rendezvous => relay::receive(sock, w).map_err(|why| {
            Error::peer(format!(
                "{who}: the rank table from the rendezvous at {root} did not arrive whole: {why}"
            ))
            .waiting_for("the rank table")
        })?,
        Source::Parent { rank, host, addr } => {
            let host = crate::error::escape(host).into_owned();
            relay::fetch(addr, me.rank, w, deadline).map_err(|why| {
                Error::peer(format!(
                    "{who}: no rank table from rank {rank} (host {host}, {}), which relays it to this rank: {}; see \
                     that rank's own error, and check that this host reaches it at that address (a firewall must \
                     admit its relay port, as it does its data port)",
                    crate::error::escape(addr),
                    crate::error::escape(&why)
                ))
                .during("the bootstrap")
                .blaming(*rank, host.clone())
            })?
        }
    };
    let table = decode_table(&bytes, who)?;
    if table.len() != w.size {
        return Err(Error::peer(format!(
            "{who}: the rank table holds {} ranks, the job {}",
            table.len(),
            w.size
        )));
    }
    if let Some(l) = relay {
        relay::serve_children(l, me.rank, w.size, w, std::sync::Arc::new(bytes), deadline);
    }
    Ok(table)
}

/// This rank's join with a relay listener, bound on the address `sock` reaches the rendezvous from (so the
/// rank's children reach it too); without one where none can be bound (its children then get the table from
/// the rendezvous).
pub fn with_relay(sock: &TcpStream, me: &Join) -> (Join, Option<TcpListener>) {
    let mut me = me.clone();
    let l = sock.local_addr().and_then(|a| relay::listen(a.ip())).ok();
    me.relay = l.as_ref().and_then(|l| l.local_addr().ok()).map(|a| a.to_string());
    let relay = l.filter(|_| me.relay.is_some());
    (me, relay)
}

#[cfg(test)]
mod tests {
    use super::super::join_message::tests::join_msg;
    use super::super::wire::{decode_reply, Reply};
    use super::*;
    use serde_json::json;

    #[test]
    fn text_in_a_welcome_is_made_safe_to_print() {
        let mut j = join_msg(0, json!({}));
        j.host = "h\u{1b}]0;pwned\u{7}\u{1b}[2J".into();
        let got = decode_table(&serde_json::to_vec(&vec![j.info()]).unwrap(), "rank 1").unwrap();
        assert!(!got[0].host.chars().any(char::is_control), "{:?}", got[0].host);
        assert!(got[0].host.contains("\\u{1b}]0;pwned"), "{:?}", got[0].host);
        let refused = serde_json::to_vec(&Reply::Refused("x\u{1b}[2Jy".into())).unwrap();
        let e = decode_reply(&refused, "rank 1", "r").unwrap_err().to_string();
        assert!(!e.chars().any(char::is_control), "{e:?}");
        assert!(!j.printable().host.chars().any(char::is_control));
    }
}
