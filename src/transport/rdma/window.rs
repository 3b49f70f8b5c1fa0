//! Receive-window arithmetic and the immediate-data encoding.
//!
//! Each rank keeps, per peer, a registered receive window of `slots` slots of `slot_bytes` each. A message
//! is cut into fragments of at most `slot_bytes`; fragment k of the whole stream from one peer lands in slot
//! `k % slots` by an RDMA WRITE WITH IMMEDIATE whose 32-bit immediate says which slot and how many bytes,
//! so the receiver can place it without any other header. The receiver copies the slot into the posted
//! receive buffer and returns the slot to the sender as a credit (an immediate with the credit bit set).
//! A credit immediate with the abort bit set too says the sender gave up (see [`Imm::Abort`]).

use super::error::RdmaError;

use std::fmt;

/// Most slots a window may have: the slot index has 7 bits in the immediate.
pub const MAX_SLOTS: u32 = 1 << 7;
/// Largest slot: the fragment length has 24 bits in the immediate.
pub const MAX_SLOT_BYTES: u32 = (1 << 24) - 1;

const CREDIT_BIT: u32 = 1 << 31;
/// Inside the credit space: a credit count never comes near it (it is at most [`MAX_SLOTS`]).
const ABORT_BIT: u32 = 1 << 30;
/// Largest rank an abort immediate can name.
pub const MAX_ABORT_RANK: u32 = ABORT_BIT - 1;
const LEN_BITS: u32 = 24;
const LEN_MASK: u32 = (1 << LEN_BITS) - 1;

/// What one immediate carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Imm {
    /// A fragment of `len` bytes was written into slot `slot` of the receiver's window.
    Data { slot: u32, len: u32 },
    /// The receiver consumed `count` slots; the sender may reuse them.
    Credit { count: u32 },
    /// The writer's transport failed and it stops; `origin` is its rank (its reason goes over the control
    /// path, which an immediate has no room for).
    Abort { origin: u32 },
}

impl Imm {
    /// The 32-bit immediate (host order; the verbs layer converts to network order).
    pub fn encode(self) -> u32 {
        match self {
            Imm::Data { slot, len } => {
                debug_assert!(slot < MAX_SLOTS && len <= MAX_SLOT_BYTES);
                (slot << LEN_BITS) | (len & LEN_MASK)
            }
            Imm::Credit { count } => {
                debug_assert!(count < ABORT_BIT);
                CREDIT_BIT | count
            }
            Imm::Abort { origin } => CREDIT_BIT | ABORT_BIT | origin.min(MAX_ABORT_RANK),
        }
    }

    /// Reads an immediate; every 32-bit value decodes (validation against the window happens on use).
    pub fn decode(v: u32) -> Imm {
        if v & CREDIT_BIT != 0 && v & ABORT_BIT != 0 {
            Imm::Abort {
                origin: v & MAX_ABORT_RANK,
            }
        } else if v & CREDIT_BIT != 0 {
            Imm::Credit { count: v & !CREDIT_BIT }
        } else {
            Imm::Data {
                slot: v >> LEN_BITS,
                len: v & LEN_MASK,
            }
        }
    }
}

/// Shape of one receive window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WindowShape {
    /// Number of slots (credits a sender starts with).
    pub slots: u32,
    /// Bytes per slot: the largest fragment.
    pub slot_bytes: u32,
}

impl fmt::Display for WindowShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} slots of {} bytes", self.slots, self.slot_bytes)
    }
}

impl WindowShape {
    /// A shape, refused (with the reason) when it cannot be encoded in an immediate.
    pub fn new(slots: u32, slot_bytes: u32) -> Result<Self, RdmaError> {
        if !(1..=MAX_SLOTS).contains(&slots) {
            return Err(RdmaError::refused(format!(
                "a receive window needs 1 to {MAX_SLOTS} slots (got {slots})"
            )));
        }
        if !(1..=MAX_SLOT_BYTES).contains(&slot_bytes) {
            return Err(RdmaError::refused(format!(
                "a window slot must hold 1 to {MAX_SLOT_BYTES} bytes (got {slot_bytes})"
            )));
        }
        Ok(WindowShape { slots, slot_bytes })
    }

    /// Total bytes of the window.
    pub fn bytes(&self) -> usize {
        self.slots as usize * self.slot_bytes as usize
    }

    /// Byte offset of `slot` in the window.
    pub fn offset(&self, slot: u32) -> usize {
        slot as usize * self.slot_bytes as usize
    }

    /// The slot the `k`-th fragment of a peer's stream uses.
    pub fn slot_of(&self, k: u64) -> u32 {
        (k % self.slots as u64) as u32
    }

    /// Fragments a message of `len` bytes is cut into. An empty message is one empty fragment, so it is
    /// still matched in order.
    pub fn fragments(&self, len: usize) -> usize {
        len.div_ceil(self.slot_bytes as usize).max(1)
    }

    /// `(offset in the message, length)` of fragment `i` of a `len`-byte message.
    pub fn fragment(&self, len: usize, i: usize) -> (usize, usize) {
        let sb = self.slot_bytes as usize;
        let off = i * sb;
        (off, sb.min(len.saturating_sub(off)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn immediates_round_trip_and_keep_kinds_apart() {
        for imm in [
            Imm::Data { slot: 0, len: 0 },
            Imm::Data {
                slot: MAX_SLOTS - 1,
                len: MAX_SLOT_BYTES,
            },
            Imm::Data { slot: 5, len: 4096 },
            Imm::Credit { count: 1 },
            Imm::Credit { count: 1000 },
            Imm::Abort { origin: 0 },
            Imm::Abort { origin: 4095 },
        ] {
            assert_eq!(Imm::decode(imm.encode()), imm);
        }
        assert_ne!(
            Imm::Data { slot: 0, len: 1 }.encode(),
            Imm::Credit { count: 1 }.encode()
        );
        // An abort is never read as a credit (nor a data write), whatever rank it names.
        for origin in [0, 1, MAX_ABORT_RANK] {
            let v = Imm::Abort { origin }.encode();
            assert_eq!(Imm::decode(v), Imm::Abort { origin });
            assert_ne!(v, Imm::Credit { count: origin & 0xff }.encode());
        }
    }

    #[test]
    fn shapes_that_do_not_fit_an_immediate_are_refused() {
        assert!(WindowShape::new(0, 64).unwrap_err().to_string().contains("slots"));
        assert!(WindowShape::new(MAX_SLOTS + 1, 64)
            .unwrap_err()
            .to_string()
            .contains("slots"));
        assert!(WindowShape::new(8, 0)
            .unwrap_err()
            .to_string()
            .contains("slot must hold"));
        assert!(WindowShape::new(8, MAX_SLOT_BYTES + 1).is_err());
        let w = WindowShape::new(8, 1 << 20).unwrap();
        assert_eq!(w.bytes(), 8 << 20);
        assert_eq!(w.offset(3), 3 << 20);
    }

    #[test]
    fn messages_split_into_fragments_that_cover_them_exactly() {
        let w = WindowShape::new(4, 100).unwrap();
        for len in [0usize, 1, 99, 100, 101, 250, 400, 401, 1000] {
            let n = w.fragments(len);
            let mut next = 0;
            for i in 0..n {
                let (off, l) = w.fragment(len, i);
                assert_eq!(off, next, "len {len} fragment {i}");
                assert!(l <= 100);
                assert!(l > 0 || len == 0, "only an empty message has an empty fragment");
                next += l;
            }
            assert_eq!(next, len);
        }
        assert_eq!(w.fragments(0), 1);
        assert_eq!(w.fragments(401), 5);
        assert_eq!(
            (0..9).map(|k| w.slot_of(k)).collect::<Vec<_>>(),
            [0, 1, 2, 3, 0, 1, 2, 3, 0]
        );
    }
}
