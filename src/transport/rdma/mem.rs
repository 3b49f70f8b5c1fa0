//! An in-memory fabric for testing the protocol engine: ranks are threads, windows are shared vectors,
//! and completions are delivered through per-rank queues. `hold_credits` delays credit returns to force
//! the sender to stall on a full window.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::proto::{Completion, Fabric, Write};
use super::window::{Imm, WindowShape};

struct Hub {
    /// windows[receiver][sender]
    windows: Vec<Vec<Vec<u8>>>,
    cqs: Vec<VecDeque<Completion>>,
}

/// One rank's end of a shared in-memory fabric.
pub struct MemFabric {
    rank: usize,
    hub: Arc<Mutex<Hub>>,
    /// Window base pointers this rank keeps, per sender (stable: the vectors are never resized).
    bases: Vec<*const u8>,
    shape: WindowShape,
    /// Credit immediates are queued here for this many polls before being delivered.
    pub hold_credits: usize,
    held: VecDeque<(usize, usize, u32)>,
    polls: usize,
    /// Times the transport told this fabric to forget its cached memory.
    pub forgotten: usize,
}

// SAFETY: the base pointers point into vectors owned by the shared hub, which outlives every fabric.
unsafe impl Send for MemFabric {}

/// Fabrics for `n` ranks whose windows all have `shape`.
pub fn fabrics(n: usize, shape: WindowShape) -> Vec<MemFabric> {
    let windows: Vec<Vec<Vec<u8>>> = (0..n)
        .map(|_| (0..n).map(|_| vec![0; shape.bytes()]).collect())
        .collect();
    let bases: Vec<Vec<*const u8>> = windows.iter().map(|w| w.iter().map(|v| v.as_ptr()).collect()).collect();
    let hub = Arc::new(Mutex::new(Hub {
        windows,
        cqs: (0..n).map(|_| VecDeque::new()).collect(),
    }));
    bases
        .into_iter()
        .enumerate()
        .map(|(rank, bases)| MemFabric {
            rank,
            hub: hub.clone(),
            bases,
            shape,
            hold_credits: 0,
            held: VecDeque::new(),
            polls: 0,
            forgotten: 0,
        })
        .collect()
}

impl Fabric for MemFabric {
    fn forget_memory(&mut self) {
        self.forgotten += 1;
    }

    unsafe fn write_data(&mut self, w: &Write) -> Result<(), String> {
        let Write {
            peer,
            wr_id,
            len,
            slot,
            imm,
            ..
        } = *w;
        // SAFETY: off + len <= msg_len, inside the message the caller keeps valid.
        let src = unsafe { w.msg.add(w.off) };
        let mut hub = self.hub.lock().unwrap();
        let off = self.shape.offset(slot);
        let dst = &mut hub.windows[peer][self.rank][off..off + len];
        // SAFETY: the caller keeps src..src+len valid until the completion queued below is polled.
        dst.copy_from_slice(unsafe { std::slice::from_raw_parts(src, len) });
        hub.cqs[peer].push_back(Completion::Received { peer: self.rank, imm });
        hub.cqs[self.rank].push_back(Completion::Sent { peer, wr_id });
        Ok(())
    }

    fn write_imm(&mut self, peer: usize, wr_id: u64, imm: u32) -> Result<(), String> {
        if matches!(Imm::decode(imm), Imm::Credit { .. }) && self.hold_credits > 0 {
            self.held.push_back((self.polls + self.hold_credits, peer, imm));
        } else {
            self.hub.lock().unwrap().cqs[peer].push_back(Completion::Received { peer: self.rank, imm });
        }
        self.hub.lock().unwrap().cqs[self.rank].push_back(Completion::Sent { peer, wr_id });
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> Result<(), String> {
        self.polls += 1;
        let mut hub = self.hub.lock().unwrap();
        while self.held.front().is_some_and(|h| h.0 <= self.polls) {
            let (_, peer, imm) = self.held.pop_front().unwrap();
            hub.cqs[peer].push_back(Completion::Received { peer: self.rank, imm });
        }
        out.extend(hub.cqs[self.rank].drain(..));
        Ok(())
    }

    fn slot(&self, peer: usize, slot: u32) -> *const u8 {
        // SAFETY: slot < shape.slots, so the offset is inside the window.
        unsafe { self.bases[peer].add(self.shape.offset(slot)) }
    }
}
