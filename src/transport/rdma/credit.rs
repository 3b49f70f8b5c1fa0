//! Credit accounting for writes into a peer's receive window.
//!
//! A sender starts with one credit per slot of the peer's window and spends one per fragment, so it can
//! never overwrite a slot the receiver has not consumed. The receiver gives credits back once it has copied
//! slots out; a return of more credits than were spent means the ranks disagree on the protocol.

use super::error::RdmaError;

/// The sender's side, per peer.
#[derive(Clone, Debug)]
pub struct SendCredits {
    slots: u32,
    available: u32,
    /// Fragments written so far: the next one's slot is `written % slots`.
    written: u64,
}

impl SendCredits {
    /// Full credit for a window of `slots` slots.
    pub fn new(slots: u32) -> Self {
        SendCredits {
            slots,
            available: slots,
            written: 0,
        }
    }

    /// Credits in hand.
    pub fn available(&self) -> u32 {
        self.available
    }

    /// Spends one credit and returns the slot the next fragment goes to, or `None` when the window is full.
    pub fn take(&mut self) -> Option<u32> {
        if self.available == 0 {
            return None;
        }
        self.available -= 1;
        let slot = (self.written % self.slots as u64) as u32;
        self.written += 1;
        Some(slot)
    }

    /// Takes back `count` credits the receiver returned; refuses more than are outstanding.
    pub fn give_back(&mut self, count: u32) -> Result<(), RdmaError> {
        let outstanding = self.slots - self.available;
        if count == 0 || count > outstanding {
            return Err(RdmaError::refused(format!(
                "protocol error: the peer returned {count} credit(s) while {outstanding} were outstanding"
            )));
        }
        self.available += count;
        Ok(())
    }
}

/// The receiver's side, per peer: which slot comes next and how many consumed slots are owed back.
#[derive(Clone, Debug)]
pub struct RecvCredits {
    slots: u32,
    /// Fragments consumed so far: the next one must arrive in slot `consumed % slots`.
    consumed: u64,
    owed: u32,
}

impl RecvCredits {
    /// A receiver of a window with `slots` slots.
    pub fn new(slots: u32) -> Self {
        RecvCredits {
            slots,
            consumed: 0,
            owed: 0,
        }
    }

    /// The slot the next fragment must be in.
    pub fn next_slot(&self) -> u32 {
        (self.consumed % self.slots as u64) as u32
    }

    /// Records that the next slot was copied out; its credit is now owed to the sender.
    pub fn consume(&mut self) {
        self.consumed += 1;
        self.owed += 1;
    }

    /// Credits to send back now (and forgets them).
    pub fn take_owed(&mut self) -> u32 {
        std::mem::take(&mut self.owed)
    }

    /// Credits consumed but not yet sent back.
    pub fn owed(&self) -> u32 {
        self.owed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sender_never_gets_more_slots_than_the_window_has() {
        let mut c = SendCredits::new(3);
        assert_eq!((c.take(), c.take(), c.take()), (Some(0), Some(1), Some(2)));
        assert_eq!(c.take(), None, "window full: no fourth write");
        c.give_back(2).unwrap();
        assert_eq!(c.available(), 2);
        assert_eq!((c.take(), c.take(), c.take()), (Some(0), Some(1), None));
    }

    #[test]
    fn returning_more_than_outstanding_is_a_protocol_error() {
        let mut c = SendCredits::new(4);
        assert!(c.give_back(1).unwrap_err().to_string().contains("0 were outstanding"));
        c.take();
        assert!(c.give_back(2).unwrap_err().to_string().contains("returned 2"));
        assert!(c.give_back(0).is_err());
        c.give_back(1).unwrap();
        assert_eq!(c.available(), 4);
    }

    #[test]
    fn receiver_walks_slots_in_order_and_owes_what_it_consumed() {
        let mut r = RecvCredits::new(2);
        assert_eq!(r.next_slot(), 0);
        r.consume();
        assert_eq!(r.next_slot(), 1);
        r.consume();
        assert_eq!(r.next_slot(), 0);
        assert_eq!(r.owed(), 2);
        assert_eq!(r.take_owed(), 2);
        assert_eq!(r.take_owed(), 0);
    }

    #[test]
    fn sender_and_receiver_agree_on_every_slot() {
        let (mut s, mut r) = (SendCredits::new(5), RecvCredits::new(5));
        for _ in 0..23 {
            let slot = s.take().expect("credits are returned after each fragment");
            assert_eq!(slot, r.next_slot());
            r.consume();
            s.give_back(r.take_owed()).unwrap();
        }
    }
}
