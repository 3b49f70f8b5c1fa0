//! An in-memory fabric for testing the protocol engine: ranks are threads, windows are shared vectors, and
//! each rank has `lanes` queue pairs to each peer. Like a reliable-connected queue pair, a lane delivers
//! its immediates in order; across lanes the receiver sees a seeded random interleaving, and each poll
//! takes only some of what is on its way, so fragments of one peer overtake each other as they may on
//! hardware. Data lands in the window when written (the credits, not the delivery, must keep it from
//! overwriting a slot not yet copied out). `hold_credits` delays credit returns to force the sender to
//! stall on a full window. [`run_ranks`] and [`run_lanes`] run a closure on n such ranks, each with its
//! transport; the transport's tests and the engine's tests over it share them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::error::RdmaError;
use super::proto::{Completion, Fabric, RdmaConfig, RdmaTransport, Write};
use super::window::{Imm, WindowShape};

/// One lane's immediates on their way, each with its sender's write count, delivered front first.
type Lane = VecDeque<(u64, u32)>;

struct Hub {
    /// windows[receiver][sender]
    windows: Vec<Vec<Vec<u8>>>,
    /// Local (send) completions per rank.
    cqs: Vec<VecDeque<Completion>>,
    /// Immediates on their way: lanes[receiver][sender][lane].
    lanes: Vec<Vec<Vec<Lane>>>,
    /// Ranks that left (as a killed process): writes to them fail as exhausted retries do.
    gone: Vec<bool>,
}

impl Hub {
    /// The completion of a write to `peer` on its lane `qp` that took `wr_id`: failed when the peer left.
    fn completion(&self, peer: usize, qp: usize, wr_id: u64) -> Completion {
        if self.gone[peer] {
            Completion::Failed {
                peer: Some(peer),
                msg: "transport retry counter exceeded: the peer no longer answers (it left the in-memory fabric)"
                    .into(),
            }
        } else {
            Completion::Sent { peer, qp, wr_id }
        }
    }
}

/// One rank's end of a shared in-memory fabric.
pub struct MemFabric {
    rank: usize,
    hub: Arc<Mutex<Hub>>,
    /// Window base pointers this rank keeps, per sender (stable: the vectors are never resized).
    bases: Vec<*const u8>,
    shape: WindowShape,
    lanes: usize,
    /// Credit immediates are queued here for this many polls before being delivered.
    pub hold_credits: usize,
    held: VecDeque<(usize, usize, usize, u32)>,
    polls: usize,
    /// Immediates this rank has written, numbering them so overtaking can be counted.
    written: u64,
    rng: u64,
    /// Times the transport told this fabric to forget its cached memory.
    pub forgotten: usize,
    /// Immediates delivered to this rank ahead of one its sender wrote earlier on another lane.
    pub overtaken: usize,
    /// Abort immediates this rank wrote.
    pub aborts_sent: usize,
    /// Liveness probes this rank wrote.
    pub probes: usize,
    /// Data writes this rank posted, per lane.
    pub data_per_lane: Vec<usize>,
    /// Whether the transport stopped this fabric.
    pub shut: bool,
}

// SAFETY: the base pointers point into vectors owned by the shared hub, which outlives every fabric.
unsafe impl Send for MemFabric {}

/// Fabrics for `n` ranks whose windows all have `shape`, with `lanes` queue pairs per peer interleaved by
/// a random order drawn from `seed`.
pub fn fabrics(n: usize, shape: WindowShape, lanes: usize, seed: u64) -> Vec<MemFabric> {
    let windows: Vec<Vec<Vec<u8>>> = (0..n)
        .map(|_| (0..n).map(|_| vec![0; shape.bytes()]).collect())
        .collect();
    let bases: Vec<Vec<*const u8>> = windows.iter().map(|w| w.iter().map(|v| v.as_ptr()).collect()).collect();
    let hub = Arc::new(Mutex::new(Hub {
        windows,
        cqs: (0..n).map(|_| VecDeque::new()).collect(),
        lanes: (0..n)
            .map(|_| (0..n).map(|_| (0..lanes).map(|_| VecDeque::new()).collect()).collect())
            .collect(),
        gone: vec![false; n],
    }));
    bases
        .into_iter()
        .enumerate()
        .map(|(rank, bases)| MemFabric {
            rank,
            hub: hub.clone(),
            bases,
            shape,
            lanes,
            hold_credits: 0,
            held: VecDeque::new(),
            polls: 0,
            written: 0,
            // Never zero: xorshift would stay there.
            rng: (seed ^ (rank as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1,
            forgotten: 0,
            overtaken: 0,
            aborts_sent: 0,
            probes: 0,
            data_per_lane: vec![0; lanes],
            shut: false,
        })
        .collect()
}

impl MemFabric {
    fn random(&mut self, below: usize) -> usize {
        // xorshift64: plenty for picking lanes.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % below as u64) as usize
    }

    fn check(&self, peer: usize, qp: usize) -> Result<(), RdmaError> {
        if qp >= self.lanes || peer >= self.bases.len() || peer == self.rank {
            return Err(RdmaError::refused(format!("no queue pair {qp} to rank {peer}")));
        }
        Ok(())
    }

    /// This rank leaves the fabric as a killed process would: its queue pairs stop answering, so every later
    /// write to it, probes included, fails as exhausted retries do.
    pub fn leave(&self) {
        self.hub.lock().unwrap().gone[self.rank] = true;
    }

    fn queue(&mut self, hub: &mut Hub, peer: usize, lane: usize, imm: u32) {
        self.written += 1;
        hub.lanes[peer][self.rank][lane].push_back((self.written, imm));
    }
}

impl Fabric for MemFabric {
    fn forget_memory(&mut self) {
        self.forgotten += 1;
    }

    fn shutdown(&mut self) {
        self.shut = true;
    }

    unsafe fn write_data(&mut self, w: &Write) -> Result<(), RdmaError> {
        let Write {
            peer,
            qp,
            wr_id,
            len,
            slot,
            imm,
            ..
        } = *w;
        self.check(peer, qp)?;
        // SAFETY: off + len <= msg_len, inside the message the caller keeps valid.
        let src = unsafe { w.msg.add(w.off) };
        let hub = self.hub.clone();
        let mut hub = hub.lock().unwrap();
        let off = self.shape.offset(slot);
        let dst = &mut hub.windows[peer][self.rank][off..off + len];
        // SAFETY: the caller keeps src..src+len valid until the completion queued below is polled.
        dst.copy_from_slice(unsafe { std::slice::from_raw_parts(src, len) });
        self.queue(&mut hub, peer, qp, imm);
        self.data_per_lane[qp] += 1;
        let done = hub.completion(peer, qp, wr_id);
        hub.cqs[self.rank].push_back(done);
        Ok(())
    }

    fn write_imm(&mut self, peer: usize, qp: usize, wr_id: u64, imm: u32) -> Result<(), RdmaError> {
        self.check(peer, qp)?;
        let hub = self.hub.clone();
        let mut hub = hub.lock().unwrap();
        match Imm::decode(imm) {
            Imm::Credit { .. } if self.hold_credits > 0 => {
                self.held.push_back((self.polls + self.hold_credits, peer, qp, imm))
            }
            Imm::Abort { .. } => {
                self.aborts_sent += 1;
                self.queue(&mut hub, peer, qp, imm);
            }
            _ => self.queue(&mut hub, peer, qp, imm),
        }
        let done = hub.completion(peer, qp, wr_id);
        hub.cqs[self.rank].push_back(done);
        Ok(())
    }

    fn probe(&mut self, peer: usize, qp: usize, wr_id: u64) -> Result<(), RdmaError> {
        self.check(peer, qp)?;
        self.probes += 1;
        let mut hub = self.hub.lock().unwrap();
        let done = hub.completion(peer, qp, wr_id);
        hub.cqs[self.rank].push_back(done);
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<(), RdmaError> {
        self.polls += 1;
        let hub = self.hub.clone();
        let mut hub = hub.lock().unwrap();
        while self.held.front().is_some_and(|h| h.0 <= self.polls) {
            let (_, peer, lane, imm) = self.held.pop_front().unwrap();
            self.queue(&mut hub, peer, lane, imm);
        }
        out.extend(hub.cqs[self.rank].drain(..));
        // Some of what is on its way, each from a random lane that has any: in order within a lane only.
        let waiting: usize = hub.lanes[self.rank].iter().flatten().map(VecDeque::len).sum();
        if waiting == 0 {
            return Ok(());
        }
        for _ in 0..1 + self.random(waiting) {
            let full: Vec<(usize, usize)> = hub.lanes[self.rank]
                .iter()
                .enumerate()
                .flat_map(|(s, ls)| ls.iter().enumerate().filter(|l| !l.1.is_empty()).map(move |l| (s, l.0)))
                .collect();
            let (sender, lane) = full[self.random(full.len())];
            let lanes = &mut hub.lanes[self.rank][sender];
            let (seq, imm) = lanes[lane].pop_front().expect("picked among lanes with something");
            if lanes.iter().any(|l| l.front().is_some_and(|f| f.0 < seq)) {
                self.overtaken += 1;
            }
            out.push(Completion::Received { peer: sender, imm });
        }
        Ok(())
    }

    fn slot(&self, peer: usize, slot: u32) -> *const u8 {
        // SAFETY: slot < shape.slots, so the offset is inside the window.
        unsafe { self.bases[peer].add(self.shape.offset(slot)) }
    }
}

/// The protocol settings of the tests: `shape` windows, `qps` queue pairs per peer, 4 writes in flight per pair.
pub(crate) fn cfg(shape: WindowShape, qps: usize, timeout: Duration) -> RdmaConfig {
    RdmaConfig {
        window: shape,
        sq_depth: 4,
        qps,
        timeout,
    }
}

/// Runs `f` on `n` ranks, each with an RDMA transport over the shared in-memory fabric, one queue pair per
/// peer.
pub(crate) fn run_ranks<R: Send>(
    n: usize,
    shape: WindowShape,
    hold_credits: usize,
    timeout: Duration,
    f: impl Fn(&mut RdmaTransport<MemFabric>) -> R + Sync,
) -> Vec<R> {
    run_lanes(n, shape, (1, 0), hold_credits, timeout, f)
}

/// As [`run_ranks`] with `qps.0` queue pairs per peer, interleaved as seed `qps.1` draws it.
pub(crate) fn run_lanes<R: Send>(
    n: usize,
    shape: WindowShape,
    qps: (usize, u64),
    hold_credits: usize,
    timeout: Duration,
    f: impl Fn(&mut RdmaTransport<MemFabric>) -> R + Sync,
) -> Vec<R> {
    let (lanes, seed) = qps;
    std::thread::scope(|s| {
        let handles: Vec<_> = fabrics(n, shape, lanes, seed)
            .into_iter()
            .enumerate()
            .map(|(rank, mut fab)| {
                fab.hold_credits = hold_credits;
                let f = &f;
                s.spawn(move || {
                    let peers = (0..n)
                        .map(|r| (r != rank).then(|| (format!("rank {r}"), shape)))
                        .collect();
                    let mut t = RdmaTransport::new(
                        rank,
                        "h".into(),
                        "rdma@mem".into(),
                        fab,
                        peers,
                        cfg(shape, lanes, timeout),
                    );
                    f(&mut t)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("rank panicked")).collect()
    })
}
