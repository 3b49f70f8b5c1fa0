//! Who am I, how many are we, how do I reach the others.
//!
//! A rank learns its identity from its launcher ([`env`](mod@env)), binds its data listener, then joins the
//! rendezvous ([`rendezvous`]), which checks that every rank runs the same options and version and hands
//! back every rank's endpoint. With no launcher, [`local`] spawns the ranks itself.

mod disagreement;
pub mod env;
pub mod launcher_abort;
pub mod launcher_stop;
pub mod local;
mod missing;
pub mod options;
pub mod rank_info;
pub mod relay;
pub mod rendezvous;
mod stalled;

pub use crate::transport::auth::Token;
use rank_info::RankInfo;

/// What a launcher tells a rank about itself.
#[derive(Clone, Debug)]
pub struct Identity {
    pub rank: usize,
    pub size: usize,
    /// `host:port` of the rendezvous service (resolved when used: in Kubernetes, names appear late);
    /// `None` under an MPI launcher that sets none, where MPI exchanges the endpoints.
    pub root: Option<String>,
    pub token: Token,
    /// Where the token came from, for the header.
    pub token_from: String,
    /// Which launcher started the rank ("local", "mpirun (OpenMPI)", ...).
    pub launcher: String,
    /// Whether this rank serves the rendezvous (rank 0, unless collbench's own launcher does).
    pub serves_root: bool,
}

/// Everything a rank knows about the job after the bootstrap.
#[derive(Clone, Debug)]
pub struct World {
    pub rank: usize,
    pub size: usize,
    pub host: String,
    pub launcher: String,
    pub token: Token,
    /// Where the token came from, for the header.
    pub token_from: String,
    /// Every rank's pid, host, interface and data address, indexed by rank.
    pub ranks: Vec<RankInfo>,
    /// Seconds from process start of the bootstrap to knowing every peer.
    pub bootstrap_s: f64,
}

pub use crate::net::hostname;

/// A fresh random job token.
pub fn new_token() -> Token {
    let mut t = [0u8; 16];
    getrandom::getrandom(&mut t).expect("the OS random source is available");
    t
}

/// Token as hex, for environment variables.
pub fn token_to_hex(t: &Token) -> String {
    t.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a 32-digit hex token.
pub fn token_from_hex(s: &str) -> Option<Token> {
    if s.len() != 32 || !s.is_ascii() {
        return None;
    }
    let mut t = [0u8; 16];
    for (i, b) in t.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(t)
}

/// This rank's join: who it is, on `host`, with its data `endpoints`, its options' `consensus`, and `refused`
/// where it joins only to say it cannot start.
fn own_join(
    id: &Identity,
    host: String,
    endpoints: Vec<rank_info::Endpoint>,
    consensus: serde_json::Value,
    refused: Option<rendezvous::Refusal>,
) -> rendezvous::Join {
    rendezvous::Join {
        rank: id.rank,
        size: id.size,
        host,
        pid: std::process::id(),
        endpoints,
        version: env!("CARGO_PKG_VERSION").to_string(),
        consensus,
        job: env::job_ids(|k| std::env::var(k).ok()),
        relay: None,
        refused,
    }
}

/// Joins the rendezvous over `sock` (already connected to `id.root`) with this rank's data endpoints.
pub fn bootstrap(
    id: &Identity,
    sock: std::net::TcpStream,
    endpoints: Vec<rank_info::Endpoint>,
    consensus: serde_json::Value,
    deadline: std::time::Instant,
    fault: Option<&crate::fault::Fault>,
) -> crate::error::Result<World> {
    let started = std::time::Instant::now();
    let host = crate::net::hostname();
    let me = own_join(id, host.clone(), endpoints, consensus, None);
    let root = id.root.as_deref().unwrap_or("?");
    let mut sock = sock;
    let (me, relay) = rendezvous::with_relay(&sock, &me);
    match rendezvous::send_join(&mut sock, root, &id.token, &me, deadline) {
        // Closed before the challenge (a flooded service drops the oldest unproved connections): the wait
        // below connects again. A service that took the connection and stayed silent is named at once.
        Err(e) if e.exit_code() != crate::error::EXIT_USAGE && e.culprit().is_none() => {}
        r => r.map_err(|e| served_by(e, id, root))?,
    }
    crate::fault::Fault::check(fault, id.rank, &crate::fault::Phase::Bootstrap);
    let ranks =
        rendezvous::await_welcome(sock, root, &id.token, &me, relay, deadline).map_err(|e| served_by(e, id, root))?;
    Ok(World {
        rank: id.rank,
        size: id.size,
        host,
        launcher: id.launcher.clone(),
        token: id.token,
        token_from: id.token_from.clone(),
        ranks,
        bootstrap_s: started.elapsed().as_secs_f64(),
    })
}

/// Joins the rendezvous over `sock` (already connected to `id.root`) only to say this rank refuses to start,
/// for `refusal`; returns once the rendezvous answered (it tells the ranks that joined at once, those still to
/// come as they join, and rank 0 last). An error says the join could not be sent.
pub fn refuse(
    id: &Identity,
    sock: std::net::TcpStream,
    refusal: rendezvous::Refusal,
    deadline: std::time::Instant,
) -> crate::error::Result<()> {
    let me = own_join(
        id,
        crate::net::hostname(),
        Vec::new(),
        serde_json::Value::Null,
        Some(refusal),
    );
    let root = id.root.as_deref().unwrap_or("?");
    let mut sock = sock;
    rendezvous::send_join(&mut sock, root, &id.token, &me, deadline)?;
    // The answer is this refusal or another rank's: either way the job was told, and this rank's own error is
    // what it reports.
    let _ = rendezvous::await_welcome(sock, root, &id.token, &me, None, deadline);
    Ok(())
}

/// `e`, naming collbench's own launcher rather than rank 0 as the process serving a silent rendezvous where
/// that launcher serves it (`run --np`).
fn served_by(e: crate::error::Error, id: &Identity, root: &str) -> crate::error::Error {
    if id.launcher == "local" {
        let host = stalled::host_of(root);
        return e.served_by(format!(
            "collbench's launcher (the `collbench run --np` process, host {host})"
        ));
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_through_hex() {
        let t = new_token();
        assert_eq!(token_from_hex(&token_to_hex(&t)), Some(t));
        assert_eq!(token_from_hex("zz"), None);
        assert_eq!(token_from_hex(&"g".repeat(32)), None);
        assert_ne!(new_token(), new_token());
    }
}
