//! The RDMA transport's protocol engine, written against [`Fabric`] (what the verbs layer does: write with
//! immediate, poll completions), so message matching, fragmenting, credits and deadlines are tested in the
//! default build with an in-memory fabric.
//!
//! Per peer: a send queue of messages cut into fragments of the peer's slot size, written while credits
//! last and spread round-robin over the peer's queue pairs; a receive queue fed in order from the window,
//! each fragment copied out of its slot into the posted buffer, after which the slot's credit goes back to
//! the sender. Completions are ordered within one queue pair only, so arrivals are matched by slot (fragment
//! k of a peer's stream is in slot k % slots) and copied out in stream order whatever order they came in.
//! Send work requests in flight per queue pair are bounded, so no send queue overflows; receive work
//! requests are reposted as they complete, and credits bound how many can be consumed at once, so a write
//! never finds none.
//!
//! Failure: a rank whose transport fails writes an abort immediate ([`Imm::Abort`]) to every peer, best
//! effort, before it stops its queue pairs; a rank that reads one stops at once with an error naming that
//! rank instead of waiting out its deadline. The reason travels over the control path (see `run`).
//!
//! Liveness: a rank that only waits to receive posts no work request, so a peer that died (its process
//! killed, its host gone) would go unnoticed until the deadline, and the rank that gives up would name
//! itself. A wait in which nothing moved for [`PROBE_EVERY`] therefore probes each peer it waits on with a
//! zero-length RDMA WRITE without immediate ([`Fabric::probe`]): it consumes nothing at a live peer, and
//! against a dead one its retries run out and the failed completion names that peer.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::credit::{RecvCredits, SendCredits};
use super::error::RdmaError;
use super::window::{Imm, WindowShape};
use crate::error::{Error, Result};
use crate::transport::requests::Requests;
use crate::transport::{Request, Transport};

/// Marks the work-request id of a credit return (data writes carry their request slot).
const CREDIT_WR: u64 = 1 << 63;
/// Work-request id of an abort immediate.
const ABORT_WR: u64 = CREDIT_WR | 1;
/// Work-request id of a liveness probe.
const PROBE_WR: u64 = CREDIT_WR | 2;
/// How long a wait lets nothing move before it probes the peers it waits on (a quarter of the deadline
/// when that is shorter). A probe against a dead peer fails after the queue pair's retries (about 0.5 s
/// at the default timeout and retry count), so a dead peer is named within about 1.5 s.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long a failing rank waits, at most, for its abort immediates to leave before it stops its queue
/// pairs (stopping flushes whatever is still queued).
const ABORT_LINGER: Duration = Duration::from_millis(200);

/// What the protocol engine needs from the hardware layer.
pub trait Fabric {
    /// Writes fragment `w` into its slot of the window `w.peer` keeps for this rank, on queue pair `w.qp`
    /// of that peer; a [`Completion::Sent`] with `w.wr_id` follows once its bytes may be reused.
    ///
    /// # Safety
    /// The whole message `w.msg..w.msg+w.msg_len` must stay valid and unmodified until that completion, or
    /// until [`Fabric::shutdown`].
    unsafe fn write_data(&mut self, w: &Write) -> Result<(), RdmaError>;
    /// Sends immediate `imm` alone (a credit return or an abort) to `peer` on its queue pair `qp`.
    fn write_imm(&mut self, peer: usize, qp: usize, wr_id: u64, imm: u32) -> Result<(), RdmaError>;
    /// Writes nothing to `peer` on its queue pair `qp`, as a liveness probe: no immediate, so the peer's
    /// software sees nothing; a [`Completion::Sent`] follows once the peer acknowledged it, a
    /// [`Completion::Failed`] naming the peer once the retries ran out.
    fn probe(&mut self, peer: usize, qp: usize, wr_id: u64) -> Result<(), RdmaError>;
    /// Appends the completions that are ready to `out`.
    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<(), RdmaError>;
    /// Start of `slot` of the window this rank keeps for `peer`.
    fn slot(&self, peer: usize, slot: u32) -> *const u8;
    /// Nothing moved: give the CPU away briefly before polling again.
    fn idle(&mut self) {
        std::thread::yield_now();
    }
    /// Stops all hardware access to posted memory (the transport is poisoned).
    fn shutdown(&mut self) {}
    /// Buffers handed to earlier sends may be freed: drop any cached registration of them.
    fn forget_memory(&mut self) {}
}

/// One fragment to write.
#[derive(Clone, Copy, Debug)]
pub struct Write {
    pub peer: usize,
    /// Which of the peer's queue pairs (0 to [`RdmaConfig::qps`] - 1) carries it.
    pub qp: usize,
    pub wr_id: u64,
    /// The whole message the fragment belongs to (what a registration should cover).
    pub msg: *const u8,
    pub msg_len: usize,
    /// The fragment: bytes `off..off+len` of the message.
    pub off: usize,
    pub len: usize,
    /// Window slot it goes to.
    pub slot: u32,
    /// Immediate data (host order).
    pub imm: u32,
}

/// One completed (or failed) work request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    /// A write posted to `peer` on its queue pair `qp` with `wr_id` completed locally.
    Sent { peer: usize, qp: usize, wr_id: u64 },
    /// `peer` wrote into our window (or returned credits), with immediate `imm`, on any of its queue pairs.
    Received { peer: usize, imm: u32 },
    /// A work request failed; `msg` says how and what to check.
    Failed { peer: Option<usize>, msg: String },
}

/// Tuning of the RDMA transport.
#[derive(Clone, Debug)]
pub struct RdmaConfig {
    /// The window this rank keeps for each peer.
    pub window: WindowShape,
    /// Send work requests in flight per queue pair.
    pub sq_depth: u32,
    /// Queue pairs per peer (`--rdma-qps`); at least 1.
    pub qps: usize,
    /// Deadline of any single wait.
    pub timeout: Duration,
}

struct Msg {
    slot: usize,
    ptr: *mut u8,
    len: usize,
    /// Fragments posted (sends) or copied out (receives) so far.
    done: usize,
    nfrags: usize,
}

/// Per-peer protocol state.
struct Peer {
    name: String,
    remote: WindowShape,
    sendq: VecDeque<Msg>,
    recvq: VecDeque<Msg>,
    credits: SendCredits,
    rcredits: RecvCredits,
    /// Per slot of our window: the length of the fragment that arrived there and waits to be copied out.
    arrived: Vec<Option<u32>>,
    /// Send work requests in flight, per queue pair.
    sq_in_flight: Vec<u32>,
    /// The queue pair the next fragment goes on.
    next_qp: usize,
    /// A liveness probe to this peer is in flight.
    probing: bool,
}

/// A connected RDMA transport over fabric `F`.
pub struct RdmaTransport<F: Fabric> {
    rank: usize,
    host: String,
    path: String,
    fabric: F,
    peers: Vec<Option<Peer>>,
    local: WindowShape,
    cfg: RdmaConfig,
    /// Per request: fragments still outstanding.
    requests: Requests,
    poisoned: Option<String>,
    /// The rank whose abort immediate stopped this transport, if one did.
    aborted_by: Option<usize>,
    /// The first peer a work completion failed with: the culprit this rank names.
    failed_with: Option<usize>,
    completions: Vec<Completion>,
}

impl<F: Fabric> RdmaTransport<F> {
    /// A transport for `rank` over a fabric already connected to every peer; `peers[r]` is rank r's name
    /// for messages and the window shape it advertised (`None` for this rank).
    pub fn new(
        rank: usize,
        host: String,
        path: String,
        fabric: F,
        peers: Vec<Option<(String, WindowShape)>>,
        cfg: RdmaConfig,
    ) -> Self {
        let local = cfg.window;
        let qps = cfg.qps.max(1);
        let peers = peers
            .into_iter()
            .map(|p| {
                p.map(|(name, remote)| Peer {
                    name,
                    remote,
                    sendq: VecDeque::new(),
                    recvq: VecDeque::new(),
                    credits: SendCredits::new(remote.slots),
                    rcredits: RecvCredits::new(local.slots),
                    arrived: vec![None; local.slots as usize],
                    sq_in_flight: vec![0; qps],
                    next_qp: 0,
                    probing: false,
                })
            })
            .collect();
        RdmaTransport {
            rank,
            host,
            path,
            fabric,
            peers,
            local,
            cfg,
            requests: Requests::default(),
            poisoned: None,
            aborted_by: None,
            failed_with: None,
            completions: Vec::new(),
        }
    }

    /// The first peer a work completion failed with (retries exhausted, a remote access error...), if one did
    /// before any abort was heard: the rank to name as the culprit.
    pub fn failed_with(&self) -> Option<usize> {
        self.failed_with
    }

    /// The rank whose abort immediate stopped this transport, if one did: its reason is on the control path.
    pub fn aborted_by(&self) -> Option<usize> {
        self.aborted_by
    }

    /// The fabric, e.g. for its statistics.
    pub fn fabric(&self) -> &F {
        &self.fabric
    }

    /// Buffers handed to earlier sends may be freed from now on: drops cached registrations of them.
    pub fn forget_memory(&mut self) {
        self.fabric.forget_memory();
    }

    fn me(&self) -> String {
        format!("rank {} (host {}, {})", self.rank, self.host, self.path)
    }

    /// Records the first error, tells every peer (unless a peer's abort caused it), stops the fabric and drops
    /// every queued operation.
    fn poison(&mut self, msg: String) -> Error {
        if self.poisoned.is_none() && self.aborted_by.is_none() {
            self.tell_peers();
        }
        self.fabric.shutdown();
        for p in self.peers.iter_mut().flatten() {
            p.sendq.clear();
            p.recvq.clear();
        }
        self.poisoned = Some(msg.clone());
        Error::peer(msg)
    }

    /// Writes an abort immediate to every peer on its least busy queue pair (a peer whose send queues are
    /// all full is skipped) and waits briefly for them to leave. Best effort: failures are ignored, the
    /// peer then finds out by its own deadline.
    fn tell_peers(&mut self) {
        let imm = Imm::Abort {
            origin: self.rank as u32,
        }
        .encode();
        let mut told = 0usize;
        for peer in 0..self.peers.len() {
            let Some(p) = self.peers[peer].as_ref() else { continue };
            let (qp, busy) = least_busy(&p.sq_in_flight);
            if busy < self.cfg.sq_depth && self.fabric.write_imm(peer, qp, ABORT_WR, imm).is_ok() {
                told += 1;
            }
        }
        let end = Instant::now() + ABORT_LINGER.min(self.cfg.timeout);
        let mut seen = Vec::new();
        while told > 0 && Instant::now() < end {
            seen.clear();
            if self.fabric.poll(&mut seen).is_err() {
                return;
            }
            for c in &seen {
                match c {
                    Completion::Sent { wr_id: ABORT_WR, .. } | Completion::Failed { .. } => {
                        told = told.saturating_sub(1)
                    }
                    _ => {}
                }
                if told == 0 {
                    return;
                }
            }
            if seen.is_empty() {
                self.fabric.idle();
            }
        }
    }

    fn unusable(&self) -> Option<Error> {
        self.poisoned
            .as_ref()
            .map(|m| Error::peer(format!("transport unusable after an earlier error: {m}")))
    }

    unsafe fn post(&mut self, peer: usize, ptr: *mut u8, len: usize, send: bool) -> Result<Request> {
        if let Some(e) = self.unusable() {
            return Err(e);
        }
        let shape = match self.peers.get(peer) {
            Some(Some(p)) if send => p.remote,
            Some(Some(_)) => self.local,
            _ => {
                return Err(Error::peer(format!(
                    "{}: internal error: no queue pair to rank {peer} (world size {})",
                    self.me(),
                    self.peers.len()
                )))
            }
        };
        let nfrags = shape.fragments(len);
        let parts = u32::try_from(nfrags)
            .map_err(|_| Error::peer(format!("{}: message of {len} bytes has too many fragments", self.me())))?;
        let req = self.requests.open(parts);
        let msg = Msg {
            slot: req.0,
            ptr,
            len,
            done: 0,
            nfrags,
        };
        let p = self.peers[peer].as_mut().expect("checked above");
        if send {
            p.sendq.push_back(msg);
        } else {
            p.recvq.push_back(msg);
        }
        Ok(req)
    }

    /// One pass: completions, copies out of the window, credit returns, new writes. Returns whether
    /// anything moved.
    fn progress(&mut self) -> Result<bool> {
        let mut completions = std::mem::take(&mut self.completions);
        completions.clear();
        let polled = self.fabric.poll(&mut completions);
        let r = polled
            .map_err(|e| e.at(format!("{}: polling the completion queue", self.me())))
            .and_then(|_| {
                // A probe's completion says the peer is alive, not that anything moved.
                let mut moved = completions
                    .iter()
                    .any(|c| !matches!(c, Completion::Sent { wr_id: PROBE_WR, .. }));
                for c in completions.drain(..) {
                    self.complete(c)?;
                }
                for peer in 0..self.peers.len() {
                    moved |= self.drive_peer(peer)?;
                }
                Ok(moved)
            });
        self.completions = completions;
        r.map_err(|m| self.poison(m.to_string()))
    }

    fn complete(&mut self, c: Completion) -> std::result::Result<(), RdmaError> {
        let me = self.me();
        match c {
            Completion::Sent { peer, qp, wr_id } => {
                let Some(Some(p)) = self.peers.get_mut(peer) else {
                    return Err(RdmaError::refused(format!("{me}: completion for unknown peer {peer}")));
                };
                let Some(busy) = p.sq_in_flight.get_mut(qp) else {
                    return Err(RdmaError::refused(format!(
                        "{me}: completion for queue pair {qp} of {}, which has {}",
                        p.name,
                        p.sq_in_flight.len()
                    )));
                };
                *busy = busy.saturating_sub(1);
                if wr_id == PROBE_WR {
                    p.probing = false;
                }
                if wr_id & CREDIT_WR == 0 && !self.requests.part_done(wr_id as usize) {
                    return Err(RdmaError::refused(format!(
                        "{me}: completion of an unknown write {wr_id} to {}",
                        p.name
                    )));
                }
                Ok(())
            }
            Completion::Received { peer, imm } => {
                let local = self.local;
                let Some(Some(p)) = self.peers.get_mut(peer) else {
                    return Err(RdmaError::refused(format!("{me}: a write from unknown peer {peer}")));
                };
                match Imm::decode(imm) {
                    Imm::Credit { count } => p
                        .credits
                        .give_back(count)
                        .map_err(|e| RdmaError::refused(format!("{me}: {} {e}", p.name))),
                    Imm::Abort { origin } => {
                        self.aborted_by = Some(peer);
                        let via = if origin as usize == peer {
                            String::new()
                        } else {
                            format!(" on behalf of rank {origin}")
                        };
                        Err(RdmaError::refused(format!(
                            "{me}: {} gave up{via}: its transport failed and it told this rank so; it reports why \
                             over the control path",
                            p.name
                        )))
                    }
                    Imm::Data { slot, len } => {
                        // Fragments may come in any order across queue pairs, but credits keep each in a slot of
                        // its own until it is copied out: a slot that is still full means the peer overran it.
                        let unread = p.arrived.iter().flatten().count();
                        match p.arrived.get_mut(slot as usize) {
                            Some(s @ None) if len <= local.slot_bytes => {
                                *s = Some(len);
                                Ok(())
                            }
                            _ => Err(RdmaError::refused(format!(
                                "{me}: protocol error: {} wrote {len} bytes into slot {slot} of a window of {local} with \
                                 {unread} unread (slot {} is next); were all ranks started with the same version?",
                                p.name,
                                p.rcredits.next_slot()
                            ))),
                        }
                    }
                }
            }
            Completion::Failed { peer, msg } => Err(RdmaError::Refused(
                match peer.and_then(|r| self.peers.get(r)?.as_ref()) {
                    Some(p) if self.aborted_by.is_none() && self.failed_with.is_none() => {
                        self.failed_with = peer;
                        format!("{me}: with {}: {msg}", p.name)
                    }
                    Some(p) => format!("{me}: with {}: {msg}", p.name),
                    None => format!("{me}: {msg}"),
                },
            )),
        }
    }

    fn drive_peer(&mut self, peer: usize) -> std::result::Result<bool, RdmaError> {
        let me = self.me();
        let local = self.local;
        let sq_depth = self.cfg.sq_depth;
        let Some(p) = self.peers[peer].as_mut() else {
            return Ok(false);
        };
        let mut moved = false;
        // Copy arrived fragments into the posted receives, in stream order: stop at the first slot still empty.
        while let Some(m) = p.recvq.front_mut() {
            let next = p.rcredits.next_slot();
            let Some(got) = p.arrived[next as usize] else { break };
            let (off, want) = local.fragment(m.len, m.done);
            if got as usize != want {
                return Err(RdmaError::refused(format!(
                    "{me}: protocol error: {} sent a fragment of {got} bytes where this rank expected {want} (fragment \
                     {} of a {}-byte message); the ranks disagree on the schedule: were they all started with the same \
                     options and version?",
                    p.name, m.done, m.len
                )));
            }
            let src = self.fabric.slot(peer, next);
            // SAFETY: the slot holds `got` bytes the peer wrote (its completion was polled); the destination is
            // inside the posted receive, which the caller keeps valid until the request completes.
            unsafe { std::ptr::copy_nonoverlapping(src, m.ptr.add(off), want) };
            p.arrived[next as usize] = None;
            p.rcredits.consume();
            m.done += 1;
            self.requests.part_done(m.slot);
            if m.done == m.nfrags {
                p.recvq.pop_front();
            }
            moved = true;
        }
        // Return the consumed slots in one immediate, on the least busy queue pair.
        let (qp, busy) = least_busy(&p.sq_in_flight);
        if p.rcredits.owed() > 0 && busy < sq_depth {
            let count = p.rcredits.take_owed();
            self.fabric
                .write_imm(peer, qp, CREDIT_WR, Imm::Credit { count }.encode())
                .map_err(|e| e.at(format!("{me}: returning credits to {}", p.name)))?;
            p.sq_in_flight[qp] += 1;
            moved = true;
        }
        // Write fragments while the peer's window and the next queue pair's send queue have room.
        while let Some(m) = p.sendq.front_mut() {
            let qp = p.next_qp;
            if p.sq_in_flight[qp] >= sq_depth {
                break;
            }
            let Some(slot) = p.credits.take() else { break };
            let (off, len) = p.remote.fragment(m.len, m.done);
            let imm = Imm::Data { slot, len: len as u32 }.encode();
            // SAFETY: inside the posted send, which the caller keeps valid until its request completes.
            let w = Write {
                peer,
                qp,
                wr_id: m.slot as u64,
                msg: m.ptr,
                msg_len: m.len,
                off,
                len,
                slot,
                imm,
            };
            // SAFETY: `w` describes a posted message's bytes (valid until its request completes) and a free
            // slot of the peer's window, as write_data requires.
            unsafe {
                self.fabric
                    .write_data(&w)
                    .map_err(|e| e.at(format!("{me}: writing to {}", p.name)))?;
            }
            p.sq_in_flight[qp] += 1;
            p.next_qp = (qp + 1) % p.sq_in_flight.len();
            m.done += 1;
            if m.done == m.nfrags {
                p.sendq.pop_front();
            }
            moved = true;
        }
        Ok(moved)
    }

    fn timeout_error(&mut self) -> Error {
        let mut pending = Vec::new();
        for p in self.peers.iter().flatten() {
            if !p.recvq.is_empty() {
                pending.push(format!("{} receive(s) from {}", p.recvq.len(), p.name));
            }
            if !p.sendq.is_empty() {
                pending.push(format!(
                    "{} send(s) to {} ({} credit(s) in hand)",
                    p.sendq.len(),
                    p.name,
                    p.credits.available()
                ));
            }
        }
        let msg = format!(
            "{}: timed out after {:.1} s without progress; still pending: {}. The peer may have died, stopped or \
             be unreachable; if the network is just slow, raise -T/--timeout",
            self.me(),
            self.cfg.timeout.as_secs_f64(),
            if pending.is_empty() {
                "writes awaiting their completion".to_string()
            } else {
                pending.join(", ")
            }
        );
        self.poison(msg)
    }

    fn busy(&self) -> bool {
        self.requests.busy()
    }

    /// Drives the protocol until `done`, failing at the deadline when nothing moved for `cfg.timeout`, and
    /// probing the peers it waits on whenever nothing moved for a while.
    fn wait_until(&mut self, mut done: impl FnMut(&mut Self) -> bool) -> Result<()> {
        let probe_every = PROBE_EVERY.min(self.cfg.timeout / 4);
        let start = Instant::now();
        let (mut deadline, mut probe_at) = (start + self.cfg.timeout, start + probe_every);
        loop {
            if let Some(e) = self.unusable() {
                return Err(e);
            }
            if done(self) {
                return Ok(());
            }
            let moved = self.progress()?;
            let now = Instant::now();
            if moved {
                (deadline, probe_at) = (now + self.cfg.timeout, now + probe_every);
                continue;
            }
            if now >= deadline {
                return Err(self.timeout_error());
            }
            if now >= probe_at {
                self.probe_waited_on()?;
                probe_at = now + probe_every;
            }
            self.fabric.idle();
        }
    }

    /// Probes every peer this rank waits on (a receive or a send queued) that has no probe in flight, on its
    /// least busy queue pair when that has room.
    fn probe_waited_on(&mut self) -> Result<()> {
        let sq_depth = self.cfg.sq_depth;
        for peer in 0..self.peers.len() {
            let qp = match self.peers[peer].as_ref() {
                Some(p) if !p.probing && (!p.recvq.is_empty() || !p.sendq.is_empty()) => {
                    match least_busy(&p.sq_in_flight) {
                        (qp, busy) if busy < sq_depth => qp,
                        _ => continue,
                    }
                }
                _ => continue,
            };
            if let Err(e) = self.fabric.probe(peer, qp, PROBE_WR) {
                let name = self.peers[peer].as_ref().map(|p| p.name.clone()).unwrap_or_default();
                let msg = e.at(format!("{}: probing {name}", self.me())).to_string();
                return Err(self.poison(msg));
            }
            let p = self.peers[peer].as_mut().expect("matched above");
            p.sq_in_flight[qp] += 1;
            p.probing = true;
        }
        Ok(())
    }
}

/// The queue pair with the fewest send work requests in flight, and that number.
fn least_busy(in_flight: &[u32]) -> (usize, u32) {
    in_flight
        .iter()
        .copied()
        .enumerate()
        .min_by_key(|q| q.1)
        .unwrap_or((0, u32::MAX))
}

impl<F: Fabric> Transport for RdmaTransport<F> {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.peers.len()
    }

    fn path(&self) -> String {
        self.path.clone()
    }

    unsafe fn post_send(&mut self, peer: usize, ptr: *const u8, len: usize) -> Result<Request> {
        // SAFETY: forwarded contract; sends only read through the pointer.
        let req = unsafe { self.post(peer, ptr as *mut u8, len, true)? };
        // Start writing at once, so small messages leave before the next wait.
        self.progress()?;
        Ok(req)
    }

    unsafe fn post_recv(&mut self, peer: usize, ptr: *mut u8, len: usize) -> Result<Request> {
        // SAFETY: forwarded contract.
        unsafe { self.post(peer, ptr, len, false) }
    }

    fn wait(&mut self, req: Request) -> Result<()> {
        self.wait_until(|t| t.requests.finish(&req))
    }

    fn wait_all(&mut self) -> Result<()> {
        self.wait_until(|t| {
            let done = !t.busy();
            if done {
                t.requests.release_all();
            }
            done
        })
    }

    fn pending(&self) -> usize {
        self.requests.pending()
    }

    fn forget_memory(&mut self) {
        self.fabric.forget_memory();
    }
}
