//! The RDMA transport's protocol engine, written against [`Fabric`] (what the verbs layer does: write with
//! immediate, poll completions), so message matching, fragmenting, credits and deadlines are tested in the
//! default build with an in-memory fabric.
//!
//! Per peer: a send queue of messages cut into fragments of the peer's slot size, written while credits
//! last; a receive queue matched in order against arriving fragments, each copied out of its window slot
//! into the posted buffer, after which the slot's credit goes back to the sender. Send work requests in
//! flight per queue pair are bounded, so the send queue never overflows; receive work requests are reposted
//! as they complete, and credits bound how many can be consumed at once, so a write never finds none.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::credit::{RecvCredits, SendCredits};
use super::window::{Imm, WindowShape};
use crate::error::{Error, Result};
use crate::transport::{Request, Transport};

/// Marks the work-request id of a credit return (data writes carry their request slot).
const CREDIT_WR: u64 = 1 << 63;

/// What the protocol engine needs from the hardware layer.
pub trait Fabric {
    /// Writes fragment `w` into its slot of the window `w.peer` keeps for this rank; a
    /// [`Completion::Sent`] with `w.wr_id` follows once its bytes may be reused.
    ///
    /// # Safety
    /// The whole message `w.msg..w.msg+w.msg_len` must stay valid and unmodified until that completion, or
    /// until [`Fabric::shutdown`].
    unsafe fn write_data(&mut self, w: &Write) -> Result<(), String>;
    /// Sends immediate `imm` alone (a credit return) to `peer`.
    fn write_imm(&mut self, peer: usize, wr_id: u64, imm: u32) -> Result<(), String>;
    /// Appends the completions that are ready to `out`.
    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<(), String>;
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
    /// A write posted to `peer` with `wr_id` completed locally.
    Sent { peer: usize, wr_id: u64 },
    /// `peer` wrote into our window (or returned credits), with immediate `imm`.
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
    /// Lengths of fragments that arrived and wait to be copied out, in slot order.
    arrived: VecDeque<u32>,
    arrivals: u64,
    sq_in_flight: u32,
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
    /// Per request slot: fragments still outstanding and a generation that invalidates stale handles.
    slots: Vec<(u32, u32)>,
    free: Vec<usize>,
    poisoned: Option<String>,
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
                    arrived: VecDeque::with_capacity(local.slots as usize),
                    arrivals: 0,
                    sq_in_flight: 0,
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
            slots: Vec::new(),
            free: Vec::new(),
            poisoned: None,
            completions: Vec::new(),
        }
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

    fn poison(&mut self, msg: String) -> Error {
        self.fabric.shutdown();
        for p in self.peers.iter_mut().flatten() {
            p.sendq.clear();
            p.recvq.clear();
        }
        self.poisoned = Some(msg.clone());
        Error::Peer(msg)
    }

    fn unusable(&self) -> Option<Error> {
        self.poisoned
            .as_ref()
            .map(|m| Error::Peer(format!("transport unusable after an earlier error: {m}")))
    }

    fn alloc_slot(&mut self, parts: u32) -> Request {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push((0, 0));
            self.slots.len() - 1
        });
        self.slots[slot].0 = parts;
        Request(slot, self.slots[slot].1)
    }

    fn release(&mut self, slot: usize) {
        self.slots[slot].1 = self.slots[slot].1.wrapping_add(1);
        self.free.push(slot);
    }

    unsafe fn post(&mut self, peer: usize, ptr: *mut u8, len: usize, send: bool) -> Result<Request> {
        if let Some(e) = self.unusable() {
            return Err(e);
        }
        let shape = match self.peers.get(peer) {
            Some(Some(p)) if send => p.remote,
            Some(Some(_)) => self.local,
            _ => {
                return Err(Error::Peer(format!(
                    "{}: internal error: no queue pair to rank {peer} (world size {})",
                    self.me(),
                    self.peers.len()
                )))
            }
        };
        let nfrags = shape.fragments(len);
        let parts = u32::try_from(nfrags)
            .map_err(|_| Error::Peer(format!("{}: message of {len} bytes has too many fragments", self.me())))?;
        let req = self.alloc_slot(parts);
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
            .map_err(|e| format!("{}: polling the completion queue: {e}", self.me()))
            .and_then(|_| {
                let mut moved = !completions.is_empty();
                for c in completions.drain(..) {
                    self.complete(c)?;
                }
                for peer in 0..self.peers.len() {
                    moved |= self.drive_peer(peer)?;
                }
                Ok(moved)
            });
        self.completions = completions;
        r.map_err(|m| self.poison(m))
    }

    fn complete(&mut self, c: Completion) -> std::result::Result<(), String> {
        let me = self.me();
        match c {
            Completion::Sent { peer, wr_id } => {
                let Some(Some(p)) = self.peers.get_mut(peer) else {
                    return Err(format!("{me}: completion for unknown peer {peer}"));
                };
                p.sq_in_flight = p.sq_in_flight.saturating_sub(1);
                if wr_id & CREDIT_WR == 0 {
                    let s = &mut self.slots[wr_id as usize].0;
                    *s = s.saturating_sub(1);
                }
                Ok(())
            }
            Completion::Received { peer, imm } => {
                let local = self.local;
                let Some(Some(p)) = self.peers.get_mut(peer) else {
                    return Err(format!("{me}: a write from unknown peer {peer}"));
                };
                match Imm::decode(imm) {
                    Imm::Credit { count } => p.credits.give_back(count).map_err(|e| format!("{me}: {} {e}", p.name)),
                    Imm::Data { slot, len } => {
                        let want = local.slot_of(p.arrivals);
                        if slot != want || len > local.slot_bytes || p.arrived.len() >= local.slots as usize {
                            return Err(format!(
                                "{me}: protocol error: {} wrote {len} bytes into slot {slot}, expected slot {want} of a \
                                 window of {local} with {} unread; were all ranks started with the same version?",
                                p.name,
                                p.arrived.len()
                            ));
                        }
                        p.arrivals += 1;
                        p.arrived.push_back(len);
                        Ok(())
                    }
                }
            }
            Completion::Failed { peer, msg } => Err(match peer.and_then(|r| self.peers.get(r)?.as_ref()) {
                Some(p) => format!("{me}: with {}: {msg}", p.name),
                None => format!("{me}: {msg}"),
            }),
        }
    }

    fn drive_peer(&mut self, peer: usize) -> std::result::Result<bool, String> {
        let me = self.me();
        let local = self.local;
        let sq_depth = self.cfg.sq_depth;
        let Some(p) = self.peers[peer].as_mut() else {
            return Ok(false);
        };
        let mut moved = false;
        // Copy arrived fragments into the posted receives, in order.
        while let (Some(m), Some(&got)) = (p.recvq.front_mut(), p.arrived.front()) {
            let (off, want) = local.fragment(m.len, m.done);
            if got as usize != want {
                return Err(format!(
                    "{me}: protocol error: {} sent a fragment of {got} bytes where this rank expected {want} (fragment \
                     {} of a {}-byte message); the ranks disagree on the schedule: were they all started with the same \
                     options and version?",
                    p.name, m.done, m.len
                ));
            }
            let src = self.fabric.slot(peer, p.rcredits.next_slot());
            // SAFETY: the slot holds `got` bytes the peer wrote (its completion was polled); the destination is
            // inside the posted receive, which the caller keeps valid until the request completes.
            unsafe { std::ptr::copy_nonoverlapping(src, m.ptr.add(off), want) };
            p.arrived.pop_front();
            p.rcredits.consume();
            m.done += 1;
            let s = &mut self.slots[m.slot].0;
            *s = s.saturating_sub(1);
            if m.done == m.nfrags {
                p.recvq.pop_front();
            }
            moved = true;
        }
        // Return the consumed slots in one immediate.
        if p.rcredits.owed() > 0 && p.sq_in_flight < sq_depth {
            let count = p.rcredits.take_owed();
            self.fabric
                .write_imm(peer, CREDIT_WR, Imm::Credit { count }.encode())
                .map_err(|e| format!("{me}: returning credits to {}: {e}", p.name))?;
            p.sq_in_flight += 1;
            moved = true;
        }
        // Write fragments while the peer's window and our send queue have room.
        while let Some(m) = p.sendq.front_mut() {
            if p.sq_in_flight >= sq_depth {
                break;
            }
            let Some(slot) = p.credits.take() else { break };
            let (off, len) = p.remote.fragment(m.len, m.done);
            let imm = Imm::Data { slot, len: len as u32 }.encode();
            // SAFETY: inside the posted send, which the caller keeps valid until its request completes.
            let w = Write {
                peer,
                wr_id: m.slot as u64,
                msg: m.ptr,
                msg_len: m.len,
                off,
                len,
                slot,
                imm,
            };
            unsafe {
                self.fabric
                    .write_data(&w)
                    .map_err(|e| format!("{me}: writing to {}: {e}", p.name))?;
            }
            p.sq_in_flight += 1;
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
        self.slots.len() != self.free.len() && self.slots.iter().any(|s| s.0 != 0)
    }
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
        let Request(slot, gen) = req;
        let mut deadline = Instant::now() + self.cfg.timeout;
        loop {
            if let Some(e) = self.unusable() {
                return Err(e);
            }
            if self.slots[slot].1 != gen {
                return Ok(()); // completed and released by wait_all
            }
            if self.slots[slot].0 == 0 {
                self.release(slot);
                return Ok(());
            }
            if self.progress()? {
                deadline = Instant::now() + self.cfg.timeout;
            } else if Instant::now() >= deadline {
                return Err(self.timeout_error());
            } else {
                self.fabric.idle();
            }
        }
    }

    fn wait_all(&mut self) -> Result<()> {
        let mut deadline = Instant::now() + self.cfg.timeout;
        loop {
            if let Some(e) = self.unusable() {
                return Err(e);
            }
            if !self.busy() {
                for s in &mut self.slots {
                    s.1 = s.1.wrapping_add(1);
                }
                self.free.clear();
                self.free.extend(0..self.slots.len());
                return Ok(());
            }
            if self.progress()? {
                deadline = Instant::now() + self.cfg.timeout;
            } else if Instant::now() >= deadline {
                return Err(self.timeout_error());
            } else {
                self.fabric.idle();
            }
        }
    }

    fn pending(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    fn forget_memory(&mut self) {
        self.fabric.forget_memory();
    }
}
