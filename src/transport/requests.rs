//! The request table both transports keep: one slot per posted operation, counting the parts (TCP stream
//! parts, RDMA fragments) still in flight, with a generation per slot so a handle whose slot was released
//! and reused is recognised as completed, never mistaken for the new request.

use super::Request;

/// One slot: parts still in flight, and the generation its current handle carries.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    parts: u32,
    generation: u32,
}

/// Posted requests of one transport, by slot; freed slots are reused, so the table grows only to the most
/// requests ever in flight at once.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    slots: Vec<Slot>,
    free: Vec<usize>,
}

impl Requests {
    /// Opens a request of `parts` parts and returns its handle.
    pub fn open(&mut self, parts: u32) -> Request {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot::default());
            self.slots.len() - 1
        });
        self.slots[slot].parts = parts;
        Request(slot, self.slots[slot].generation)
    }

    /// One part of the request in `slot` completed; `false` when there is no such slot.
    pub fn part_done(&mut self, slot: usize) -> bool {
        match self.slots.get_mut(slot) {
            Some(s) => {
                s.parts = s.parts.saturating_sub(1);
                true
            }
            None => false,
        }
    }

    /// Whether `req` has completed: all its parts are done, or its slot was released since.
    pub fn done(&self, req: &Request) -> bool {
        let s = self.slots[req.0];
        s.generation != req.1 || s.parts == 0
    }

    /// Whether `req` has completed; the first time it is seen complete its slot is released.
    pub fn finish(&mut self, req: &Request) -> bool {
        let s = self.slots[req.0];
        if s.generation != req.1 {
            return true; // completed and released by release_all
        }
        if s.parts == 0 {
            self.slots[req.0].generation = s.generation.wrapping_add(1);
            self.free.push(req.0);
            return true;
        }
        false
    }

    /// Whether some open request still has parts in flight.
    pub fn busy(&self) -> bool {
        self.slots.len() != self.free.len() && self.slots.iter().any(|s| s.parts != 0)
    }

    /// Releases every slot at once, once everything has completed: outstanding handles see a new generation.
    pub fn release_all(&mut self) {
        for s in &mut self.slots {
            s.generation = s.generation.wrapping_add(1);
        }
        self.free.clear();
        self.free.extend(0..self.slots.len());
    }

    /// Requests opened and not yet finished or released.
    pub fn pending(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_completes_when_its_last_part_does_and_its_slot_is_reused() {
        let mut t = Requests::default();
        let a = t.open(2);
        assert!(!t.done(&a) && t.busy() && t.pending() == 1);
        assert!(t.part_done(a.0));
        assert!(!t.finish(&a));
        assert!(t.part_done(a.0));
        assert!(t.finish(&a) && t.pending() == 0 && !t.busy());
        let b = t.open(1);
        assert_eq!(b.0, a.0, "the freed slot is reused");
        assert!(t.done(&a), "the old handle is stale, so complete");
        assert!(!t.done(&b));
        assert!(!t.part_done(7), "an unknown slot is reported");
    }

    #[test]
    fn release_all_completes_every_outstanding_handle() {
        let mut t = Requests::default();
        let (a, b) = (t.open(1), t.open(1));
        t.part_done(a.0);
        t.part_done(b.0);
        t.release_all();
        assert_eq!(t.pending(), 0);
        assert!(t.finish(&a) && t.finish(&b));
        assert_eq!(t.pending(), 0, "a stale handle frees nothing twice");
    }
}
