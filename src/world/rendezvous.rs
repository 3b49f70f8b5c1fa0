//! The rendezvous service: every rank connects, presents the job token, its endpoint and the options it
//! was started with; when all have arrived the service checks they agree and sends every rank the full
//! table, or a refusal that names the ranks and fields that differ. The table goes down a tree of ranks (see
//! [`super::relay`]): each rank hears a small welcome, and the rendezvous sends the table itself to four ranks.
//!
//! Wire, version 2: the rank sends `CBRV`, the protocol version (u16 LE) and its nonce; the service answers
//! `CBRC`, the version, its nonce and its proof of the job token; the rank checks that proof and only then
//! sends its own (a flag byte 1 and the proof; 0 and zeros when the service's proof failed), followed by its
//! join; then length-prefixed (u32 LE) JSON frames. The token itself never travels, so a process squatting on
//! the rendezvous address learns nothing it can use (see [`crate::transport::auth`]).
//!
//! One concern, the rendezvous protocol (both sides); its tests are a third of the file.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::rank_info::{Endpoint, RankInfo};
use super::relay::{self, Source, Table, Welcome};
use crate::error::{stderr, Culprit, Error, PeerFailure, Result};
use crate::transport::auth::Token;
use crate::transport::auth::{self, Binding, Nonce, Role, NONCE_LEN, PROOF_LEN};
use crate::transport::tcp::drops::Drops;
use crate::transport::tcp::gate::{Event, Gate, Verdict};
pub(crate) use crate::world::disagreement::disagreement;
use crate::world::missing::missing_ranks;

pub(super) const MAGIC: [u8; 4] = *b"CBRV";
const CHALLENGE_MAGIC: [u8; 4] = *b"CBRC";
/// 2: the token is proved with nonces and HMAC, never sent. 3: the table travels down a tree of ranks.
const VERSION: u16 = 3;
/// The rank's hello: magic, version, nonce.
const PREAMBLE_LEN: usize = 4 + 2 + NONCE_LEN;
/// The service's challenge: magic, version, nonce, proof.
pub(super) const CHALLENGE_LEN: usize = 4 + 2 + NONCE_LEN + PROOF_LEN;
/// The rank's proof: a flag byte, then the proof.
const PROOF_MSG_LEN: usize = 1 + PROOF_LEN;
/// Where the join's frame starts.
const JOIN_AT: usize = PREAMBLE_LEN + PROOF_MSG_LEN;
/// How long a connection may take to present its preamble and join before it is dropped.
const OPENING_DEADLINE: Duration = Duration::from_secs(5);
/// Largest frame accepted: a hello with its options is a few KiB.
const MAX_FRAME: usize = 1 << 20;

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
    /// escape sequences must not reach any rank's terminal.
    pub fn printable(mut self) -> Join {
        let esc = |s: &mut String| *s = crate::error::escape(s).into_owned();
        esc(&mut self.host);
        esc(&mut self.version);
        for e in &mut self.endpoints {
            esc(&mut e.iface);
            esc(&mut e.addr);
            if let Some(r) = e.reason.as_mut() {
                esc(r);
            }
        }
        for j in &mut self.job {
            esc(j);
        }
        if let Some(r) = self.relay.as_mut() {
            esc(r);
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

#[derive(Serialize, Deserialize)]
enum Reply {
    /// Every rank agrees: where the table is, and what proves it.
    Welcome(Welcome),
    /// The ranks disagree on how the job is set up (options, versions, size): a usage error everywhere.
    Refused(String),
    /// A rank did not turn up: a peer failure everywhere.
    Failed(String),
}

/// Makes room for the rendezvous of a job of `size` ranks, which holds one connection per rank until all joined:
/// raises the soft descriptor limit where needed, and is a usage error naming the numbers where the hard limit
/// is too low (said at once, not after the ranks came and were dropped).
pub fn make_room(size: usize, root: &str) -> Result<()> {
    crate::transport::tcp::connect::raise_fd_limit(size).map_err(|s| {
        Error::usage(
            "ulimit -n",
            format!(
                "the rendezvous at {root} holds one connection per rank until all joined: a job of {size} ranks \
                 needs {} file descriptors ({} already open) but the limit is {} and the hard limit {}, so it \
                 could not be raised; raise it for rank 0 (ulimit -n {})",
                s.need, s.open, s.soft, s.hard, s.need
            ),
        )
    })
}

/// Serves one job's rendezvous on `listener` until all `size` ranks joined or `timeout` passed.
pub fn serve(listener: TcpListener, size: usize, token: Token, timeout: Duration) -> Result<Vec<RankInfo>> {
    let deadline = Instant::now() + timeout;
    let where_ = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("configuring the rendezvous listener", e))?;
    // Keyed by rank and filled as ranks join: the announced size is not trusted with an allocation.
    let mut joined: Joined = BTreeMap::new();
    // Connections refused on the way, counted, so a rank that never joined can be explained in a line.
    let mut drops = Drops::new(format!("rendezvous at {where_}"));
    let mut count = 0;
    // Openings are read through a gate, without blocking: a silent stranger cannot hold up the ranks behind it.
    let mut gate = Gate::new(|n: &Nonce, b: &[u8]| admit_join(n, b, &token), OPENING_DEADLINE);
    let mut unserved = Unserved::new();
    let mut looked = Instant::now();
    while count < size {
        unserved.tick();
        let (res, mut events) = gate.accept_all(&listener);
        res.map_err(|e| Error::io(format!("rendezvous at {where_}: accept"), e))?;
        events.extend(gate.drive());
        // Stopped or starved through the deadline: joins queued meanwhile may be from ranks that gave up
        // waiting, so they are read (each joined rank hears the verdict) but do not start the job.
        unserved.tick();
        let stood_still = Instant::now() >= deadline && unserved.blames_itself(timeout);
        for ev in events {
            let (mut sock, j) = match ev {
                Event::Admitted(sock, _, j) => (sock, j.printable()),
                Event::Rejected(from, why) => {
                    drops.note(from, &why);
                    continue;
                }
            };
            if let Some(msg) = clash(&joined, &j, size, &where_) {
                // Two jobs meet here: whichever ranks joined may belong to either, so none may start. Every rank
                // hears it now; newcomers too while they keep coming, then rank 0 (it serves this, usually in
                // its own process, which ends once it hears).
                let reply = Reply::Refused(msg.clone());
                let _ = write_frame(&mut sock, &reply);
                let first = joined.remove(&0);
                tell_all(&mut joined, &reply);
                let mut held: Vec<TcpStream> = first.into_iter().map(|(_, s)| s).collect();
                refuse_newcomers(&listener, gate, &reply, deadline, &mut held);
                for mut s in held {
                    let _ = write_frame(&mut s, &reply);
                }
                return Err(Error::usage(super::env::JOB_TOKEN, msg));
            }
            joined.insert(j.rank, (j, sock));
            count += 1;
        }
        if count == size && !stood_still {
            break;
        }
        unserved.tick();
        if Instant::now() >= deadline {
            let missing = missing_ranks(size, &joined);
            for (from, why) in gate.close() {
                drops.note(from, &why);
            }
            drops.finish();
            let unjoined = (0..size).filter(|r| !joined.contains_key(r)).count();
            let they = if unjoined == 1 { "it" } else { "they" };
            let ranks = if unjoined == 1 { "rank" } else { "ranks" };
            let (head, culprit) = if unserved.blames_itself(timeout) {
                // This process was stopped or starved while the ranks tried: they are not the ones to blame.
                let had_not = if unjoined == 0 {
                    String::new()
                } else {
                    format!("; {ranks} {missing} had not joined")
                };
                let head = format!(
                    "this process, which serves the rendezvous, did not run for {:.1} s while its {:.1} s bootstrap \
                     deadline ran (stopped, or starved of CPU), so ranks that came meanwhile may have given up \
                     unanswered{had_not}",
                    unserved.total.as_secs_f64(),
                    timeout.as_secs_f64()
                );
                (head, Some(Culprit::Rendezvous))
            } else {
                let head = format!(
                    "{ranks} {missing} did not join within {:.1} s; did {they} start, and can {they} reach this \
                     address?",
                    timeout.as_secs_f64()
                );
                (head, None)
            };
            let failure = PeerFailure {
                message: format!("rendezvous at {where_}: {head}"),
                culprit,
                operation: Some("the ranks' joins".into()),
                after: if drops.total() == 0 {
                    String::new()
                } else {
                    format!(
                        " Refused on the way: {} connection(s): {}",
                        drops.total(),
                        drops.summary()
                    )
                },
                ..PeerFailure::default()
            };
            tell_all(&mut joined, &Reply::Failed(failure.to_string()));
            return Err(Error::Peer(Box::new(failure)));
        }
        // A joined rank says nothing until the answer, so a readable joined socket means it went away: look
        // between waits (a short tick, since the gate's wait does not watch joined ranks).
        gate.wait(&listener, &[], deadline.min(Instant::now() + NEWS_TICK));
        // Looked at once a tick, not once a join: a poll over every joined rank per join is quadratic in the job.
        if looked.elapsed() < NEWS_TICK {
            continue;
        }
        looked = Instant::now();
        if let Some(r) = closed_rank(&joined) {
            let j = &joined[&r].0;
            let missing = missing_ranks(size, &joined);
            let err = Error::peer(format!(
                "rank {r} (host {}, pid {}) dropped its connection to the rendezvous at {where_} after joining (it \
                 exited or was killed) while ranks {} had not joined yet",
                j.host, j.pid, missing
            ))
            .during("the bootstrap")
            .blaming(r, j.host.clone());
            joined.remove(&r);
            let reply = Reply::Failed(err.to_string());
            tell_all(&mut joined, &reply);
            // Ranks still on their way (rank 0 itself, maybe) hear the same when they arrive.
            let mut late = joined.keys().copied().collect::<BTreeSet<usize>>();
            late.insert(r);
            tell_latecomers(&listener, gate, size, late, &reply, deadline);
            return Err(err);
        }
    }
    for (from, why) in gate.close() {
        drops.note(from, &why);
    }
    drops.finish();
    let joins: Vec<&Join> = joined.values().map(|(j, _)| j).collect();
    let answer = match answer(&joins, size) {
        Ok(a) => a,
        Err(msg) => {
            refuse_all(&mut joined, &msg);
            return Err(Error::usage("options", msg));
        }
    };
    for ((j, sock), w) in joined.values_mut().zip(answer.welcomes) {
        let direct = w.from == Source::Rendezvous;
        let sent = write_frame(sock, &Reply::Welcome(w)).and_then(|()| {
            if direct {
                relay::send(sock, &answer.table.bytes)
            } else {
                Ok(())
            }
        });
        if let Err(e) = sent {
            stderr!(
                "collbench: rendezvous at {where_}: could not answer rank {} (host {}): {e}",
                j.rank,
                j.host
            );
        }
    }
    Ok(answer.infos)
}

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

/// Why `j` cannot join the ranks `joined` so far, if it cannot: it is a rank of another job (another size,
/// other job ids, or a rank already held by another process).
fn clash(joined: &Joined, j: &Join, size: usize, where_: &str) -> Option<String> {
    let fix = "Two jobs use one rendezvous address: give each job its own (MASTER_PORT or COLLBENCH_ROOT), or \
               each its own COLLBENCH_JOB_TOKEN";
    let them = |j: &Join| format!("rank {} (host {}, pid {})", j.rank, j.host, j.pid);
    if j.size != size {
        return Some(format!(
            "rendezvous at {where_}: {} thinks the job has {} ranks, this rendezvous serves a job of {size}. {fix}",
            them(j),
            j.size
        ));
    }
    if j.rank >= size {
        return Some(format!(
            "rendezvous at {where_}: {} is out of range for a job of {size} ranks",
            them(j)
        ));
    }
    // Two jobs' identities, where they differ, say more than which rank came twice: named first, whichever
    // rank of the other job happened to arrive first.
    if let Some((first, _)) = joined.values().next().filter(|(first, _)| first.job != j.job) {
        return Some(format!(
            "rendezvous at {where_}: {} belongs to job [{}], {} to job [{}]. {fix}",
            them(first),
            first.job.join(", "),
            them(j),
            j.job.join(", ")
        ));
    }
    joined.get(&j.rank).map(|(held, _)| {
        format!(
            "rendezvous at {where_}: two processes joined as rank {}: {} and {}; they belong to two jobs started \
             with the same job token. {fix}",
            j.rank,
            them(held),
            them(j)
        )
    })
}

/// How long a rendezvous that found two jobs at its address keeps refusing newcomers after the last one came.
const CLASH_QUIET: Duration = Duration::from_secs(2);

/// Refuses every join that arrives until none came for [`CLASH_QUIET`] (or `deadline`): the ranks of both jobs
/// then end at once, not at their deadline. Joins of rank 0 are kept in `held`, answered by the caller last.
fn refuse_newcomers<D: FnMut(&Nonce, &[u8]) -> Verdict<Join>>(
    listener: &TcpListener,
    mut gate: Gate<Join, D>,
    reply: &Reply,
    deadline: Instant,
    held: &mut Vec<TcpStream>,
) {
    let mut quiet_from = Instant::now();
    loop {
        let until = deadline.min(quiet_from + CLASH_QUIET);
        if Instant::now() >= until {
            return;
        }
        let (res, mut events) = gate.accept_all(listener);
        if res.is_err() {
            return;
        }
        events.extend(gate.drive());
        for ev in events {
            if let Event::Admitted(mut sock, _, j) = ev {
                quiet_from = Instant::now();
                if j.rank == 0 {
                    held.push(sock);
                } else {
                    let _ = write_frame(&mut sock, reply);
                }
            }
        }
        if !gate.is_empty() {
            quiet_from = Instant::now();
        }
        gate.wait(listener, &[], deadline.min(quiet_from + CLASH_QUIET));
    }
}

/// Answers `reply` to every rank below `size` not in `told` that arrives before `deadline`.
///
/// `gate` is the service's own: a rank whose connection it already holds (connected, join not yet read) is
/// among them.
fn tell_latecomers<D: FnMut(&Nonce, &[u8]) -> Verdict<Join>>(
    listener: &TcpListener,
    mut gate: Gate<Join, D>,
    size: usize,
    mut told: BTreeSet<usize>,
    reply: &Reply,
    deadline: Instant,
) {
    while told.len() < size && Instant::now() < deadline {
        let (res, mut events) = gate.accept_all(listener);
        if res.is_err() {
            return;
        }
        events.extend(gate.drive());
        for ev in events {
            if let Event::Admitted(mut sock, _, j) = ev {
                if j.rank < size {
                    told.insert(j.rank);
                }
                let _ = write_frame(&mut sock, reply);
            }
        }
        if told.len() >= size {
            return;
        }
        gate.wait(listener, &[], deadline);
    }
}

/// The ranks that joined so far, with their connections, by rank.
type Joined = BTreeMap<usize, (Join, TcpStream)>;

fn refuse_all(joined: &mut Joined, msg: &str) {
    tell_all(joined, &Reply::Refused(msg.to_string()));
}

fn tell_all(joined: &mut Joined, reply: &Reply) {
    // Rank 0 last: it usually runs this service, and once it hears a refusal its process exits, taking the
    // service with it before the others were told.
    for (_, sock) in joined.values_mut().rev() {
        let _ = write_frame(sock, reply);
    }
}

/// What both proofs of one connection are bound to.
fn binding<'a>(connector: &'a Nonce, listener: &'a Nonce) -> Binding<'a> {
    Binding {
        protocol: MAGIC,
        connector,
        listener,
        claims: &VERSION_BYTES,
    }
}

pub(super) const VERSION_BYTES: [u8; 2] = VERSION.to_le_bytes();

/// The service's challenge to a rank whose nonce is `connector`: its own nonce and proof.
fn challenge(token: &Token, connector: &Nonce, listener: &Nonce) -> Vec<u8> {
    let mut b = Vec::with_capacity(CHALLENGE_LEN);
    b.extend_from_slice(&CHALLENGE_MAGIC);
    b.extend_from_slice(&VERSION_BYTES);
    b.extend_from_slice(listener);
    b.extend_from_slice(&auth::prove(token, Role::Listener, &binding(connector, listener)));
    b
}

/// Judges the bytes a connection to the rendezvous sent so far, `nonce` being the service's for it: the hello
/// (magic, version, the rank's nonce), answered with a challenge; the rank's proof; then one length-prefixed
/// JSON [`Join`]. A stranger is refused as soon as a byte gives it away, and holds at most the few bytes before
/// its proof; a collbench rank of another job (wrong token) is told so, so it stops at once instead of waiting
/// out its deadline.
pub fn admit_join(nonce: &Nonce, b: &[u8], token: &Token) -> Verdict<Join> {
    let seen = b.len().min(MAGIC.len());
    if b[..seen] != MAGIC[..seen] {
        return Verdict::reject("bad magic (not a collbench rank)");
    }
    if b.len() < PREAMBLE_LEN {
        return Verdict::Need(PREAMBLE_LEN);
    }
    let v = u16::from_le_bytes([b[4], b[5]]);
    if v != VERSION {
        return Verdict::reject(format!(
            "rendezvous protocol version {v}, this service speaks {VERSION}"
        ));
    }
    let connector: Nonce = b[6..PREAMBLE_LEN].try_into().expect("a nonce's length");
    if b.len() == PREAMBLE_LEN {
        return Verdict::Answer {
            send: challenge(token, &connector, nonce),
            need: JOIN_AT + 4,
        };
    }
    if b[PREAMBLE_LEN] == 0 {
        return Verdict::reject(
            "the rank found this service's proof wrong: it holds a different job token (a rank of another job \
             using this address, or a different COLLBENCH_JOB_TOKEN)",
        );
    }
    if b[PREAMBLE_LEN] != 1 {
        return Verdict::reject(format!("bad proof flag {}", b[PREAMBLE_LEN]));
    }
    if b.len() < JOIN_AT + 4 {
        return Verdict::Need(JOIN_AT + 4);
    }
    if !auth::verify(
        token,
        Role::Connector,
        &binding(&connector, nonce),
        &b[PREAMBLE_LEN + 1..JOIN_AT],
    ) {
        // The answer reveals nothing about the right token.
        let answer = frame_bytes(&Reply::Refused(
            "this rendezvous belongs to another job: wrong job token; every rank needs the same \
             COLLBENCH_JOB_TOKEN (or token file), and two jobs need different ones (or different rendezvous \
             addresses)"
                .into(),
        ))
        .unwrap_or_default();
        return Verdict::Reject {
            why: "wrong job token (its proof does not check out)".into(),
            answer,
        };
    }
    let len = u32::from_le_bytes([b[JOIN_AT], b[JOIN_AT + 1], b[JOIN_AT + 2], b[JOIN_AT + 3]]) as usize;
    if len > MAX_FRAME {
        return Verdict::reject(format!("frame of {len} bytes is larger than the {MAX_FRAME} limit"));
    }
    let total = JOIN_AT + 4 + len;
    if b.len() < total {
        return Verdict::Need(total);
    }
    if b.len() > total {
        return Verdict::reject(format!("{} bytes where the join has {total}", b.len()));
    }
    match serde_json::from_slice(&b[JOIN_AT + 4..]) {
        Ok(j) => Verdict::Admit(j),
        Err(e) => Verdict::reject(format!("malformed join: {e}")),
    }
}

/// Decodes the rendezvous's answer to a join: where the table is, or the reason the job cannot start.
pub fn decode_reply(frame: &[u8], who: &str, root: &str) -> Result<Welcome> {
    match serde_json::from_slice::<Reply>(frame) {
        Ok(Reply::Welcome(w)) => Ok(w),
        Ok(Reply::Refused(msg)) => Err(Error::usage(
            "options",
            format!("{who}: the rendezvous refused the job: {}", crate::error::escape(&msg)),
        )),
        Ok(Reply::Failed(msg)) => Err(Error::peer(format!(
            "{who}: the job could not start: {}",
            crate::error::escape(&msg)
        ))),
        Err(e) => Err(Error::peer(format!(
            "{who}: malformed answer from the rendezvous at {root}: {e}"
        ))),
    }
}

/// The rank table from its bytes, with the text it carries made safe to print (it reaches the terminal).
fn decode_table(bytes: &[u8], who: &str) -> Result<Vec<RankInfo>> {
    let mut t: Vec<RankInfo> = serde_json::from_slice(bytes)
        .map_err(|e| Error::peer(format!("{who}: the rank table from the rendezvous is malformed: {e}")))?;
    for r in &mut t {
        for s in [&mut r.host, &mut r.iface, &mut r.addr] {
            *s = crate::error::escape(s).into_owned();
        }
    }
    Ok(t)
}

/// Gets the table the welcome `w` announces (from `sock`, the connection to the rendezvous, or from this rank's
/// parent), then serves it to this rank's children on `relay` before returning.
fn fetch_table(
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

fn frame_bytes<T: Serialize>(v: &T) -> serde_json::Result<Vec<u8>> {
    let body = serde_json::to_vec(v)?;
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&body);
    Ok(out)
}

fn write_frame<T: Serialize>(sock: &mut TcpStream, v: &T) -> std::io::Result<()> {
    sock.write_all(&frame_bytes(v).map_err(std::io::Error::other)?)
}

/// Why no frame was read.
enum Heard {
    /// The connection ended before the first byte of an answer.
    Closed(String),
    /// No answer before the deadline, on a connection still open.
    Silent(String),
    /// Anything else: a broken answer.
    Failed(String),
}

fn read_frame(sock: &mut TcpStream) -> std::result::Result<Vec<u8>, Heard> {
    use std::io::ErrorKind::*;
    let mut len = [0u8; 4];
    // Byte by byte until the first arrives, so a connection closed mid-length is not taken for one closed
    // before any answer.
    let mut got = 0;
    while got < len.len() {
        match sock.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Err(Heard::Closed("the connection was closed without an answer".into())),
            Ok(0) => return Err(Heard::Failed("truncated frame length".into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == Interrupted => {}
            Err(e) if matches!(e.kind(), WouldBlock | TimedOut) => {
                return Err(Heard::Silent("no answer before the deadline".into()))
            }
            Err(e) if got == 0 && matches!(e.kind(), ConnectionReset | ConnectionAborted | BrokenPipe) => {
                return Err(Heard::Closed(format!(
                    "the connection was reset without an answer: {e}"
                )))
            }
            Err(e) => return Err(Heard::Failed(format!("no frame length: {e}"))),
        }
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(Heard::Failed(format!(
            "frame of {len} bytes is larger than the {MAX_FRAME} limit"
        )));
    }
    let mut body = vec![0u8; len];
    sock.read_exact(&mut body)
        .map_err(|e| Heard::Failed(format!("truncated frame: {e}")))?;
    Ok(body)
}

/// How often the rendezvous looks at joined ranks while it waits for the others.
const NEWS_TICK: Duration = Duration::from_millis(100);

/// How long the rendezvous loop did not come round (the process stopped, or starved of CPU): the loop
/// wakes at least every [`NEWS_TICK`], so a longer gap is time in which no rank could be answered.
struct Unserved {
    last: Instant,
    total: Duration,
}

impl Unserved {
    /// A gap past the tick by more than this is counted (a busy machine's scheduling delays are not).
    const SLACK: Duration = Duration::from_millis(500);

    fn new() -> Unserved {
        Unserved {
            last: Instant::now(),
            total: Duration::ZERO,
        }
    }

    /// Called between the steps of each pass of the loop: a process stops wherever it is.
    fn tick(&mut self) {
        self.count(Instant::now());
    }

    fn count(&mut self, now: Instant) {
        let gap = now.saturating_duration_since(self.last);
        if gap > NEWS_TICK + Self::SLACK {
            self.total += gap - NEWS_TICK;
        }
        self.last = now;
    }

    /// Whether the ranks that did not join are more likely missing because nobody answered them: the loop
    /// stood still for at least a quarter of the deadline (and a second).
    fn blames_itself(&self, timeout: Duration) -> bool {
        self.total >= Duration::from_secs(1).max(timeout / 4)
    }
}

/// A joined rank whose connection was closed (a rank says nothing after its join, so anything readable is
/// its end, or bytes no collbench rank sends), without waiting.
fn closed_rank(joined: &Joined) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let ranks: Vec<usize> = joined.keys().copied().collect();
    let mut fds: Vec<libc::pollfd> = joined
        .values()
        .map(|(_, sock)| libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    if fds.is_empty() {
        return None;
    }
    // SAFETY: fds is a valid array of pollfd of its length.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    for (fd, &r) in fds.iter().zip(&ranks) {
        if fd.revents == 0 {
            continue;
        }
        let mut b = [0u8; 1];
        // SAFETY: b is writable for its length.
        let rc = unsafe { libc::recv(fd.fd, b.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        let gone = rc >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock;
        if gone {
            return Some(r);
        }
    }
    None
}

/// Resolves `root` (`host:port`) to socket addresses; names may take a while to appear (Kubernetes DNS).
fn resolve(root: &str) -> std::io::Result<Vec<SocketAddr>> {
    std::net::ToSocketAddrs::to_socket_addrs(root).map(|a| a.collect())
}

/// [`resolve`], giving up at `deadline`: the system resolver can block for many seconds on a name that
/// does not exist yet (a pod or container still starting), which must not overrun `-T`.
fn resolve_until(root: &str, deadline: Instant) -> std::io::Result<Vec<SocketAddr>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let name = root.to_string();
    // A lookup still blocked at the deadline finishes on its own later; its answer is simply dropped.
    std::thread::spawn(move || {
        let _ = tx.send(resolve(&name));
    });
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    rx.recv_timeout(left).unwrap_or_else(|_| {
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "name lookup did not finish before the deadline",
        ))
    })
}

/// Binds the rendezvous service on `root` for rank 0: the address must belong to this host. A name that
/// does not resolve yet (a headless Service's DNS record appears after the pod starts) is looked up again
/// until `deadline`, the bootstrap's, as the other ranks retry their connect; the first miss is said once
/// on stderr, so a user sees why rank 0 waits. An address that resolves but is not this host's fails at
/// once.
/// `source` names the variable(s) `root` came from ([`super::env::root_source`]), for the error.
pub fn bind_root(root: &str, source: &str, deadline: Instant) -> Result<TcpListener> {
    let started = Instant::now();
    let mut said = false;
    loop {
        let (err, retry) = match resolve_until(root, deadline) {
            Ok(addrs) => match bind_any(&addrs) {
                Ok(l) => return Ok(l),
                Err(e) => (e, false),
            },
            Err(e) => (format!("cannot resolve it: {e}"), true),
        };
        if !retry || Instant::now() >= deadline {
            return Err(Error::usage(
                source,
                format!(
                    "rank 0 (host {}) serves the rendezvous but cannot listen on '{root}' after trying for {:.1} s \
                     ({err}); it must name an address of rank 0's own host and a free port (raise --bootstrap-timeout \
                     if its DNS record appears later)",
                    crate::net::hostname(),
                    started.elapsed().as_secs_f64()
                ),
            ));
        }
        if !said {
            said = true;
            stderr!(
                "collbench: rank 0 (host {}): the rendezvous address '{root}' is not usable yet ({err}); retrying \
                 until the bootstrap deadline",
                crate::net::hostname()
            );
        }
        // A DNS record or an address still appearing: look again shortly.
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Binds the first of `addrs` that this host can listen on; else the last failure.
fn bind_any(addrs: &[SocketAddr]) -> std::result::Result<TcpListener, String> {
    let mut last = "it resolves to no address".to_string();
    for a in addrs {
        match TcpListener::bind(a) {
            Ok(l) => return Ok(l),
            Err(e) => last = format!("{a}: {e}"),
        }
    }
    Err(last)
}

/// Connects to the rendezvous at `root`, retrying (it may not be up yet, or its name not yet resolvable)
/// until `deadline`.
pub fn connect(root: &str, deadline: Instant, who: &str) -> Result<TcpStream> {
    let started = Instant::now();
    loop {
        let err = match resolve_until(root, deadline) {
            Ok(addrs) => match addrs
                .iter()
                .find_map(|a| TcpStream::connect_timeout(a, Duration::from_secs(1)).ok())
            {
                Some(s) => return Ok(s),
                None => format!("no answer at {addrs:?}"),
            },
            Err(e) => format!("cannot resolve it: {e}"),
        };
        if Instant::now() >= deadline {
            return Err(Error::peer(format!(
                "{who}: cannot reach the rendezvous at {root} after trying for {:.1} s ({err}); is rank 0 (or the \
                 launcher) running, and is the address right? Raise --bootstrap-timeout if ranks start far apart",
                started.elapsed().as_secs_f64()
            ))
            .waiting_for("a connection to the rendezvous"));
        }
        // The service may not be listening yet; try again shortly.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Presents `me` over `sock` (connected to the rendezvous at `root`) and returns every rank's info.
pub fn exchange(mut sock: TcpStream, root: &str, token: &Token, me: &Join, deadline: Instant) -> Result<Vec<RankInfo>> {
    let (me, relay) = with_relay(&sock, me);
    match send_join(&mut sock, root, token, &me, deadline) {
        // Closed before the challenge: the wait below connects again. A silent service is named at once.
        Err(e) if e.exit_code() != crate::error::EXIT_USAGE && e.culprit().is_none() => {}
        r => r?,
    }
    await_welcome(sock, root, token, &me, relay, deadline)
}

/// Says hello to the rendezvous at `root` over `sock`, checks its proof, then sends this rank's proof and
/// `me`. Nothing derived from the token is sent before the service proved it holds it.
pub fn send_join(sock: &mut TcpStream, root: &str, token: &Token, me: &Join, deadline: Instant) -> Result<()> {
    let who = format!("rank {} (host {})", me.rank, me.host);
    let io_err = |e: std::io::Error| Error::peer(format!("{who}: talking to the rendezvous at {root} failed: {e}"));
    let mine = auth::nonce();
    let mut hello = Vec::with_capacity(PREAMBLE_LEN);
    hello.extend_from_slice(&MAGIC);
    hello.extend_from_slice(&VERSION_BYTES);
    hello.extend_from_slice(&mine);
    sock.write_all(&hello).map_err(io_err)?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    sock.set_read_timeout(Some(left)).map_err(io_err)?;
    let mut ch = [0u8; CHALLENGE_LEN];
    let asked = Instant::now();
    if let Err(e) = sock.read_exact(&mut ch) {
        // Connected, yet no challenge: a service that is not running (stopped, hung) is blamed by name.
        if super::stalled::timed_out(&e) {
            if let Some(stall) = super::stalled::blame_if_silent(&who, root, "challenge", asked) {
                return Err(stall);
            }
        }
        return Err(io_err(e));
    }
    let version = u16::from_le_bytes([ch[4], ch[5]]);
    let proved = ch[..4] == CHALLENGE_MAGIC
        && version == VERSION
        && auth::verify(
            token,
            Role::Listener,
            &binding(&mine, ch[6..PREAMBLE_LEN].try_into().expect("a nonce's length")),
            &ch[PREAMBLE_LEN..],
        );
    if !proved {
        let _ = sock.write_all(&[0u8; PROOF_MSG_LEN]);
        let what = if ch[..4] != CHALLENGE_MAGIC {
            "is not a collbench rendezvous (bad answer)".to_string()
        } else if version != VERSION {
            format!("speaks rendezvous protocol version {version}, this rank {VERSION} (mixed collbench versions?)")
        } else {
            "could not prove it holds this rank's job token: it serves another job (two jobs use one rendezvous \
             address: give each its own MASTER_PORT or COLLBENCH_ROOT), or the ranks were given different \
             COLLBENCH_JOB_TOKEN"
                .to_string()
        };
        return Err(Error::usage(
            super::env::JOB_TOKEN,
            format!("{who}: the rendezvous at {root} {what}"),
        ));
    }
    let mut out = Vec::with_capacity(PROOF_MSG_LEN + 256);
    out.push(1);
    out.extend_from_slice(&auth::prove(
        token,
        Role::Connector,
        &binding(&mine, ch[6..PREAMBLE_LEN].try_into().expect("a nonce's length")),
    ));
    out.extend_from_slice(&frame_bytes(me).map_err(|e| io_err(std::io::Error::other(e)))?);
    sock.write_all(&out).map_err(io_err)
}

/// Waits until `deadline` for the rendezvous's answer to `me` (already sent over `sock`): every rank's info, or
/// why the job cannot start. `relay` is the listener `me` names, where this rank then serves its children.
///
/// A connection closed before any answer was dropped unauthenticated (the service makes room that way when
/// strangers flood it) or reset: the rank connects again and sends its join again, until `deadline`. Refusals
/// for a second mean the service is gone, and end the wait at once.
pub fn await_welcome(
    mut sock: TcpStream,
    root: &str,
    token: &Token,
    me: &Join,
    relay: Option<TcpListener>,
    deadline: Instant,
) -> Result<Vec<RankInfo>> {
    let who = format!("rank {} (host {})", me.rank, me.host);
    let io_err = |e: std::io::Error| Error::peer(format!("{who}: talking to the rendezvous at {root} failed: {e}"));
    let mut said = false;
    let since = Instant::now();
    loop {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        sock.set_read_timeout(Some(left)).map_err(io_err)?;
        let why = match read_frame(&mut sock) {
            Ok(frame) => {
                let w = decode_reply(&frame, &who, root)?;
                return fetch_table(&w, &mut sock, relay, me, &who, root, deadline);
            }
            Err(Heard::Silent(why)) => match super::stalled::blame_if_silent(&who, root, "verdict", since) {
                Some(stall) => return Err(stall),
                None => why,
            },
            Err(Heard::Failed(why)) => why,
            Err(Heard::Closed(why)) if Instant::now() < deadline => {
                if !said {
                    said = true;
                    stderr!(
                        "collbench: {who}: the rendezvous at {root} closed the connection before answering ({why}; \
                         it drops the oldest unauthenticated connections when strangers flood it); joining again"
                    );
                }
                sock = reconnect(root, deadline, &who)?;
                // A failed hello shows as a closed connection on the next read, and is retried the same way; a
                // refusal is final.
                match send_join(&mut sock, root, token, me, deadline) {
                    Err(e) if e.exit_code() == crate::error::EXIT_USAGE => return Err(e),
                    _ => {}
                }
                continue;
            }
            Err(Heard::Closed(why)) => why,
        };
        return Err(Error::peer(format!(
            "{who}: no welcome from the rendezvous at {root} ({why}); are all {} ranks running, with the same \
             job token and collbench version?",
            me.size
        ))
        .waiting_for("the rendezvous's welcome"));
    }
}

/// Connects to the rendezvous at `root` again after it closed a connection: retries until `deadline`, but a
/// refusal that lasts [`REFUSED_FOR`] means nothing listens there any more.
fn reconnect(root: &str, deadline: Instant, who: &str) -> Result<TcpStream> {
    let mut refused_since: Option<Instant> = None;
    loop {
        let addrs = resolve_until(root, deadline).unwrap_or_default();
        let mut refused = false;
        for a in &addrs {
            match TcpStream::connect_timeout(a, Duration::from_secs(1)) {
                Ok(s) => return Ok(s),
                Err(e) => refused |= e.kind() == std::io::ErrorKind::ConnectionRefused,
            }
        }
        let since = if refused {
            *refused_since.get_or_insert_with(Instant::now)
        } else {
            refused_since = None;
            Instant::now()
        };
        if since.elapsed() >= REFUSED_FOR || Instant::now() >= deadline {
            return Err(Error::peer(format!(
                "{who}: the rendezvous at {root} closed the connection without an answer and {}; rank 0 (or the \
                 launcher) serving it has most likely exited (see its own error)",
                if refused {
                    "now refuses connections"
                } else {
                    "cannot be reached again before the bootstrap deadline"
                }
            )));
        }
        // The service is busy or going away: look again shortly.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long a rank that lost its connection to the rendezvous accepts refusals before concluding it is gone.
const REFUSED_FOR: Duration = Duration::from_secs(1);

/// Connects and joins in one go (tests and simple callers).
pub fn join(root: &str, token: &Token, me: &Join, timeout: Duration) -> Result<Vec<RankInfo>> {
    let deadline = Instant::now() + timeout;
    let who = format!("rank {} (host {})", me.rank, me.host);
    let sock = connect(root, deadline, &who)?;
    exchange(sock, root, token, me, deadline)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_loop_that_stood_still_for_a_quarter_of_the_deadline_blames_itself() {
        let t0 = Instant::now();
        let mut u = Unserved {
            last: t0,
            total: Duration::ZERO,
        };
        // Passes 400 ms apart, as on a busy machine: within the slack, nothing counted.
        for i in 1..=20 {
            u.count(t0 + Duration::from_millis(400 * i));
        }
        assert_eq!(u.total, Duration::ZERO);
        assert!(!u.blames_itself(Duration::from_secs(4)));
        // Stopped for 14 s: that gap, less the tick, is time nobody was answered.
        u.count(u.last + Duration::from_secs(14));
        assert_eq!(u.total, Duration::from_secs(14) - NEWS_TICK);
        assert!(u.blames_itself(Duration::from_secs(6)));
        // The same stall in a 2-minute deadline leaves the ranks plenty of time: they are to blame.
        assert!(!u.blames_itself(Duration::from_secs(120)));
    }

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

    #[test]
    fn a_joined_rank_that_drops_fails_the_job_naming_it_also_for_latecomers() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [7u8; 16];
        let server = std::thread::spawn(move || serve(l, 3, token, Duration::from_secs(60)));
        let mut s = connect(&root, Instant::now() + Duration::from_secs(20), "rank 2").unwrap();
        send_join(
            &mut s,
            &root,
            &token,
            &Join {
                size: 3,
                ..join_msg(2, json!({}))
            },
            Instant::now() + Duration::from_secs(20),
        )
        .unwrap();
        drop(s);
        // Whether they join before the service notices the drop or after, ranks 0 and 1 hear it.
        for r in [0, 1] {
            let e = join(
                &root,
                &token,
                &Join {
                    size: 3,
                    ..join_msg(r, json!({}))
                },
                Duration::from_secs(20),
            )
            .unwrap_err();
            assert_eq!(e.exit_code(), crate::error::EXIT_PEER, "{e}");
            assert!(e.to_string().contains("rank 2 (host h"), "{e}");
        }
        let e = server.join().unwrap().unwrap_err().to_string();
        assert!(
            e.contains("rank 2 (host h") && e.contains("dropped") && e.contains("bootstrap"),
            "{e}"
        );
        assert!(e.contains("had not joined"), "{e}");
    }

    #[test]
    fn a_rank_connected_but_not_yet_joined_when_a_drop_is_seen_hears_it_too() {
        // Rank 0 connects first and is slow to send its join (it binds its interfaces in between), so the
        // service holds its connection, unauthenticated, when rank 2's drop is noticed.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [7u8; 16];
        let server = std::thread::spawn(move || serve(l, 3, token, Duration::from_secs(60)));
        let msg = |r| Join {
            size: 3,
            ..join_msg(r, json!({}))
        };
        let deadline = || Instant::now() + Duration::from_secs(20);
        let mut slow = connect(&root, deadline(), "rank 0").unwrap();
        let mut s1 = connect(&root, deadline(), "rank 1").unwrap();
        send_join(&mut s1, &root, &token, &msg(1), deadline()).unwrap();
        let mut s2 = connect(&root, deadline(), "rank 2").unwrap();
        send_join(&mut s2, &root, &token, &msg(2), deadline()).unwrap();
        drop(s2);
        // Rank 1 hearing of the drop means the service saw it, with rank 0's connection already accepted.
        let e1 = await_welcome(s1, &root, &token, &msg(1), None, deadline())
            .unwrap_err()
            .to_string();
        assert!(e1.contains("rank 2 (host h"), "{e1}");
        send_join(&mut slow, &root, &token, &msg(0), deadline()).unwrap();
        let e0 = await_welcome(slow, &root, &token, &msg(0), None, deadline())
            .unwrap_err()
            .to_string();
        assert!(e0.contains("rank 2 (host h") && e0.contains("dropped"), "{e0}");
        assert!(server.join().unwrap().is_err());
    }

    #[test]
    fn a_join_dropped_before_any_answer_is_sent_again_on_a_new_connection() {
        // A full gate drops the oldest unauthenticated connection, which may be a real rank's: the service
        // below closes the first connection unread, as the gate does, and answers the second.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [4u8; 16];
        let server = std::thread::spawn(move || {
            let (first, _) = l.accept().unwrap();
            drop(first);
            let (mut second, _) = l.accept().unwrap();
            let mut pre = [0u8; PREAMBLE_LEN];
            second.read_exact(&mut pre).unwrap();
            let mine = auth::nonce();
            second
                .write_all(&challenge(&token, pre[6..].try_into().unwrap(), &mine))
                .unwrap();
            let mut proof = [0u8; PROOF_MSG_LEN];
            second.read_exact(&mut proof).unwrap();
            let j: Join = serde_json::from_slice(&read_frame(&mut second).ok().expect("a join")).unwrap();
            let t = Table::new(serde_json::to_vec(&vec![j.info()]).unwrap());
            write_frame(&mut second, &Reply::Welcome(t.welcome(1, Source::Rendezvous))).unwrap();
            relay::send(&mut second, &t.bytes).unwrap();
        });
        let me = Join {
            size: 1,
            ..join_msg(0, json!({}))
        };
        let got = join(&root, &token, &me, Duration::from_secs(20)).unwrap();
        assert_eq!(got.len(), 1);
        server.join().unwrap();
    }

    /// Joins of a job of 4 from process `pid` of job `job`, on its own thread.
    fn join_as(
        root: &str,
        token: Token,
        rank: usize,
        pid: u32,
        job: &[&str],
    ) -> std::thread::JoinHandle<Result<Vec<RankInfo>>> {
        let root = root.to_string();
        let me = Join {
            size: 4,
            pid,
            job: job.iter().map(|s| s.to_string()).collect(),
            ..join_msg(rank, json!({}))
        };
        std::thread::spawn(move || join(&root, &token, &me, Duration::from_secs(30)))
    }

    /// Connects and sends the join of `rank` (process `pid` of job `job`); returns once it went through the
    /// proofs and was sent, before any answer.
    fn joined(root: &str, token: Token, rank: usize, pid: u32, job: &[&str]) -> TcpStream {
        let me = Join {
            size: 4,
            pid,
            job: job.iter().map(|s| s.to_string()).collect(),
            ..join_msg(rank, json!({}))
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut s = connect(root, deadline, "test").unwrap();
        send_join(&mut s, root, &token, &me, deadline).unwrap();
        s
    }

    #[test]
    fn two_jobs_with_one_token_at_one_rendezvous_are_refused_at_once_never_merged() {
        // Job A's ranks 0-2 join; then job B's rank 2 (another process, same token, no launcher id) claims rank 2
        // too. Neither job may start; every rank hears why at once, and so does A's rank 3 arriving afterwards
        // (not at a deadline: its own is 30 s, the service's 10 minutes).
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [6u8; 16];
        let server = std::thread::spawn(move || serve(l, 4, token, Duration::from_secs(600)));
        let a: Vec<TcpStream> = (0..3).map(|r| joined(&root, token, r, 100 + r as u32, &[])).collect();
        // A's rank 3 is already connected (not yet joined) when the clash happens.
        let mut a3 = connect(&root, Instant::now() + Duration::from_secs(30), "rank 3").unwrap();
        let b2 = join_as(&root, token, 2, 202, &[]);
        let e = b2.join().unwrap().unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
        let e = e.to_string();
        assert!(
            e.contains("two processes joined as rank 2") && e.contains("pid 102") && e.contains("pid 202"),
            "{e}"
        );
        assert!(e.contains("MASTER_PORT") && e.contains("COLLBENCH_JOB_TOKEN"), "{e}");
        let me3 = Join {
            size: 4,
            pid: 103,
            ..join_msg(3, json!({}))
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        send_join(&mut a3, &root, &token, &me3, deadline).unwrap();
        let a3 = await_welcome(a3, &root, &token, &me3, None, deadline)
            .unwrap_err()
            .to_string();
        assert!(a3.contains("two processes joined as rank 2"), "{a3}");
        for (r, s) in a.into_iter().enumerate() {
            let me = Join {
                size: 4,
                pid: 100 + r as u32,
                ..join_msg(r, json!({}))
            };
            let e = await_welcome(s, &root, &token, &me, None, Instant::now() + Duration::from_secs(30))
                .unwrap_err()
                .to_string();
            assert!(e.contains("two processes joined as rank 2"), "rank {r}: {e}");
        }
        let e = server.join().unwrap().unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
    }

    #[test]
    fn ranks_of_two_jobs_told_apart_by_their_launcher_ids_are_refused_at_once() {
        // Same token, different Slurm jobs: the second job's first rank is refused with both ids named.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [6u8; 16];
        let server = std::thread::spawn(move || serve(l, 4, token, Duration::from_secs(600)));
        let a0 = joined(&root, token, 0, 100, &["SLURM_JOB_ID=7"]);
        let e = join_as(&root, token, 1, 201, &["SLURM_JOB_ID=8"])
            .join()
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("SLURM_JOB_ID=7") && e.contains("SLURM_JOB_ID=8") && e.contains("one rendezvous address"),
            "{e}"
        );
        drop(a0);
        assert!(server.join().unwrap().is_err());
    }

    #[test]
    fn a_squatter_on_the_rendezvous_address_learns_nothing_it_can_replay() {
        // A process listening where rank 0 should, without the token: it records what a rank sends, answers with
        // a challenge of the right shape (it cannot make a proof), and records the rest.
        let squat = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = squat.local_addr().unwrap().to_string();
        let token = crate::world::new_token();
        let recorder = std::thread::spawn(move || {
            let (mut s, _) = squat.accept().unwrap();
            let mut heard = vec![0u8; PREAMBLE_LEN];
            s.read_exact(&mut heard).unwrap();
            let mut fake = CHALLENGE_MAGIC.to_vec();
            fake.extend_from_slice(&VERSION_BYTES);
            fake.extend_from_slice(&auth::nonce());
            fake.extend_from_slice(&[0x42; PROOF_LEN]);
            s.write_all(&fake).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let _ = s.read_to_end(&mut heard);
            heard
        });
        let me = Join {
            size: 2,
            ..join_msg(1, json!({}))
        };
        let e = join(&root, &token, &me, Duration::from_secs(30)).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
        assert!(e.to_string().contains("could not prove"), "{e}");
        let heard = recorder.join().unwrap();
        // The hello (magic, version, a fresh nonce), then the refusal: no token, no proof, no join.
        assert_eq!(heard.len(), PREAMBLE_LEN + PROOF_MSG_LEN, "{heard:?}");
        assert_eq!(&heard[..6], b"CBRV\x03\x00");
        assert!(heard[PREAMBLE_LEN..].iter().all(|&b| b == 0), "{heard:?}");
        let hex = crate::world::token_to_hex(&token);
        assert!(!heard.windows(16).any(|w| w == token) && !heard.windows(32).any(|w| w == hex.as_bytes()));
        // Replayed to the real rendezvous, what it recorded gets nowhere.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let real = l.local_addr().unwrap();
        let server = std::thread::spawn(move || serve(l, 1, token, Duration::from_secs(2)));
        let mut s = TcpStream::connect(real).unwrap();
        s.write_all(&heard).unwrap();
        let e = server.join().unwrap().unwrap_err().to_string();
        assert!(e.contains("did not join") && e.contains("different job token"), "{e}");
    }

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

    #[test]
    fn rank_0_retries_a_rendezvous_name_until_the_deadline_and_then_names_it() {
        // .invalid never resolves (RFC 6761): the lookup is retried, then the error names the address.
        let root = "collbench-rendezvous.invalid:29500";
        let e = bind_root(
            root,
            crate::world::env::ROOT,
            Instant::now() + Duration::from_millis(300),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(root) && e.contains("after trying for") && e.contains("--bootstrap-timeout"),
            "{e}"
        );
        // An address that resolves but is not this host's fails without waiting for the deadline.
        let t = Instant::now() + Duration::from_secs(3600);
        let e = bind_root("192.0.2.1:29500", "MASTER_ADDR", t).unwrap_err().to_string();
        assert!(e.contains("192.0.2.1:29500") && e.contains("own host"), "{e}");
        assert!(e.starts_with("MASTER_ADDR:"), "the variable the address came from: {e}");
    }

    #[test]
    fn an_unreachable_rendezvous_names_the_address_and_the_time_tried() {
        let root = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let e = connect(&root, Instant::now() + Duration::from_millis(300), "rank 1 (host h)")
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("rendezvous at {root} after trying for 0.")), "{e}");
        assert!(e.starts_with("rank 1 (host h)"), "{e}");
    }

    #[test]
    fn ranks_meet_and_strangers_are_dropped() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [9u8; 16];
        let server = std::thread::spawn(move || serve(l, 2, token, Duration::from_secs(20)));
        // A port scanner first: garbage, then a wrong token.
        let mut s = TcpStream::connect(&root).unwrap();
        s.write_all(b"GET / HTTP/1.0\r\n\r\n-------").unwrap();
        drop(s);
        let r2 = root.clone();
        let wrong = std::thread::spawn(move || join(&r2, &[1u8; 16], &join_msg(1, json!({})), Duration::from_secs(2)));
        assert!(wrong.join().unwrap().is_err());
        let r1 = root.clone();
        let t1 = std::thread::spawn(move || join(&r1, &token, &join_msg(1, json!({"a": 1})), Duration::from_secs(20)));
        let t0 = join(&root, &token, &join_msg(0, json!({"a": 1})), Duration::from_secs(20)).unwrap();
        let t1 = t1.join().unwrap().unwrap();
        assert_eq!(t0, t1);
        assert_eq!(t0.len(), 2);
        assert_eq!(server.join().unwrap().unwrap().len(), 2);
    }

    #[test]
    fn differing_options_are_refused_before_any_data_moves() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [3u8; 16];
        let server = std::thread::spawn(move || serve(l, 2, token, Duration::from_secs(20)));
        let r1 = root.clone();
        let t1 =
            std::thread::spawn(move || join(&r1, &token, &join_msg(1, json!({"iters": 5})), Duration::from_secs(20)));
        let e0 = join(
            &root,
            &token,
            &join_msg(0, json!({"iters": 20})),
            Duration::from_secs(20),
        )
        .unwrap_err();
        let e1 = t1.join().unwrap().unwrap_err();
        for e in [e0.to_string(), e1.to_string()] {
            assert!(e.contains("iters") && e.contains("rank 1"), "{e}");
        }
        assert_eq!(e0.exit_code(), crate::error::EXIT_USAGE);
        assert!(server.join().unwrap().is_err());
    }

    #[test]
    fn a_rank_that_never_joins_is_a_peer_failure_naming_it() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [5u8; 16];
        let server = std::thread::spawn(move || serve(l, 3, token, Duration::from_millis(300)));
        let me = Join {
            size: 3,
            ..join_msg(0, json!({}))
        };
        let e = join(&root, &token, &me, Duration::from_secs(20)).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_PEER, "{e}");
        assert!(e.to_string().contains("ranks 1, 2 did not join"), "{e}");
        assert!(server.join().unwrap().is_err());
    }

    #[test]
    fn a_wrong_token_is_told_at_once_and_named_when_the_job_fails() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || serve(l, 1, [1u8; 16], Duration::from_millis(500)));
        let e = join(
            &root,
            &[2u8; 16],
            &Join {
                size: 1,
                ..join_msg(0, json!({}))
            },
            Duration::from_secs(20),
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
        let e = e.to_string();
        assert!(
            e.contains("could not prove") && e.contains("COLLBENCH_JOB_TOKEN"),
            "{e}"
        );
        let e = server.join().unwrap().unwrap_err().to_string();
        assert!(
            e.contains("did not join") && e.contains("Refused on the way") && e.contains("different job token"),
            "{e}"
        );
    }
}
