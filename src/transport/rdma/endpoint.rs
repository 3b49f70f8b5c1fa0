//! What one rank tells a peer so the peer can connect its queue pairs to it and write into its window.
//! Exchanged as JSON over the job's already-authenticated control path; every field is checked before use.

use serde::{Deserialize, Serialize};

use super::error::RdmaError;
use super::window::WindowShape;

/// Version of the record; ranks of different versions refuse each other.
pub const ENDPOINT_VERSION: u32 = 2;
/// Most queue pairs per peer (`--rdma-qps`).
pub const MAX_QPS: usize = 16;

/// The receive window a peer may write into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteWindow {
    /// Virtual address of slot 0.
    pub addr: u64,
    /// Remote key of its memory region.
    pub rkey: u32,
    /// Slots and slot size.
    pub shape: WindowShape,
}

/// The numbers of one queue pair that its peer connects to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpNumbers {
    /// Queue pair number (24 bits).
    pub qpn: u32,
    /// First packet sequence number (24 bits).
    pub psn: u32,
}

/// One rank's endpoint for its peer `to`: its port, its queue pairs for that peer (lane i connects to the
/// peer's lane i) and the window the peer writes into.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpEndpoint {
    /// Record version ([`ENDPOINT_VERSION`]).
    pub version: u32,
    /// Rank that owns the queue pair.
    pub from: usize,
    /// Rank it is meant for.
    pub to: usize,
    /// Local identifier of the port (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// Global identifier, as 32 hex digits (RoCE, or routed InfiniBand).
    #[serde(with = "gid_hex")]
    pub gid: [u8; 16],
    /// The queue pairs, one per lane, in lane order.
    pub qps: Vec<QpNumbers>,
    /// Active MTU of the port in bytes (256 to 4096).
    pub mtu: u32,
    /// The window the peer writes into.
    pub window: RemoteWindow,
}

/// Largest queue pair number or packet sequence number: both are 24-bit fields on the wire.
const MAX_24: u32 = (1 << 24) - 1;

impl QpEndpoint {
    /// Checks the record is usable by rank `me` connecting `qps` queue pairs to rank `peer`; the error says
    /// which field is wrong.
    pub fn validate(&self, me: usize, peer: usize, qps: usize) -> Result<(), RdmaError> {
        let who = format!("rank {peer}'s RDMA endpoint");
        if self.version != ENDPOINT_VERSION {
            return Err(RdmaError::refused(format!(
                "{who} has version {}, this rank speaks {ENDPOINT_VERSION}: mixed collbench versions?",
                self.version
            )));
        }
        if self.from != peer || self.to != me {
            return Err(RdmaError::refused(format!(
                "{who} is addressed from rank {} to rank {} (expected from {peer} to {me}): the ranks disagree on \
                 the exchange order",
                self.from, self.to
            )));
        }
        if self.qps.len() != qps {
            return Err(RdmaError::refused(format!(
                "{who} has {} queue pair(s), this rank {qps}: were all ranks started with the same --rdma-qps?",
                self.qps.len()
            )));
        }
        for (lane, q) in self.qps.iter().enumerate() {
            if q.qpn == 0 || q.qpn > MAX_24 {
                return Err(RdmaError::refused(format!(
                    "{who} has queue pair number {} for lane {lane} (must be 1 to {MAX_24})",
                    q.qpn
                )));
            }
            if q.psn > MAX_24 {
                return Err(RdmaError::refused(format!(
                    "{who} has packet sequence number {} for lane {lane} (must fit 24 bits)",
                    q.psn
                )));
            }
        }
        if !matches!(self.mtu, 256 | 512 | 1024 | 2048 | 4096) {
            return Err(RdmaError::refused(format!(
                "{who} has MTU {} (must be 256, 512, 1024, 2048 or 4096)",
                self.mtu
            )));
        }
        if self.lid == 0 && self.gid == [0; 16] {
            return Err(RdmaError::refused(format!(
                "{who} has neither a LID nor a GID: its port is not addressable (down, or no subnet manager?)"
            )));
        }
        let w = &self.window;
        WindowShape::new(w.shape.slots, w.shape.slot_bytes).map_err(|e| e.at(who.as_str()))?;
        if w.addr == 0 || w.addr.checked_add(w.shape.bytes() as u64).is_none() {
            return Err(RdmaError::refused(format!(
                "{who} has an unusable window address {:#x}",
                w.addr
            )));
        }
        Ok(())
    }
}

/// The path MTU of two ports: the smaller, as both ends must agree.
pub fn path_mtu(a: u32, b: u32) -> u32 {
    a.min(b)
}

/// A GID as 32 lowercase hex digits.
pub fn gid_to_hex(gid: &[u8; 16]) -> String {
    gid.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses 32 hex digits, with or without the colons sysfs writes between groups.
pub fn gid_from_hex(s: &str) -> Result<[u8; 16], RdmaError> {
    let digits: String = s.trim().chars().filter(|c| *c != ':').collect();
    if digits.len() != 32 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(RdmaError::refused(format!(
            "'{}' is not a GID (32 hex digits)",
            s.trim()
        )));
    }
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16).map_err(|e| RdmaError::refused(e.to_string()))?;
    }
    Ok(out)
}

mod gid_hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(gid: &[u8; 16], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::gid_to_hex(gid))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 16], D::Error> {
        let s = String::deserialize(d)?;
        super::gid_from_hex(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> QpEndpoint {
        QpEndpoint {
            version: ENDPOINT_VERSION,
            from: 1,
            to: 0,
            lid: 0,
            gid: gid_from_hex("0000:0000:0000:0000:0000:ffff:c0a8:0102").unwrap(),
            qps: vec![
                QpNumbers {
                    qpn: 0x1234,
                    psn: 0xabcdef,
                },
                QpNumbers { qpn: 0x1235, psn: 7 },
                QpNumbers { qpn: 0x1236, psn: 0 },
            ],
            mtu: 4096,
            window: RemoteWindow {
                addr: 0x7f00_0000_0000,
                rkey: 77,
                shape: WindowShape::new(8, 1 << 20).unwrap(),
            },
        }
    }

    #[test]
    fn endpoint_round_trips_through_json() {
        let e = sample();
        let json = serde_json::to_string(&e).unwrap();
        assert!(json.contains("\"gid\":\"00000000000000000000ffffc0a80102\""), "{json}");
        let back: QpEndpoint = serde_json::from_str(&json).unwrap();
        assert_eq!(back, e);
        back.validate(0, 1, 3).unwrap();
        assert_eq!(back.qps[1], QpNumbers { qpn: 0x1235, psn: 7 }, "lanes keep their order");
    }

    #[test]
    fn a_queue_pair_count_other_than_this_ranks_is_refused() {
        let e = sample();
        for qps in [1, 2, 4] {
            let err = e.validate(0, 1, qps).unwrap_err().to_string();
            assert!(
                err.contains("has 3 queue pair(s), this rank") && err.contains("--rdma-qps"),
                "{err}"
            );
        }
        let mut none = sample();
        none.qps.clear();
        assert!(none
            .validate(0, 1, 1)
            .unwrap_err()
            .to_string()
            .contains("has 0 queue pair(s)"));
        // A version-1 record (one qpn/psn, no list) is refused, not misread.
        let old = serde_json::to_string(&e)
            .unwrap()
            .replace("\"version\":2", "\"version\":1");
        let old: QpEndpoint = serde_json::from_str(&old).unwrap();
        assert!(old.validate(0, 1, 3).unwrap_err().to_string().contains("version 1"));
    }

    #[test]
    fn malformed_records_are_refused_naming_the_field() {
        let bad_gid = serde_json::to_string(&sample())
            .unwrap()
            .replace("ffffc0a8", "zzzzc0a8");
        assert!(serde_json::from_str::<QpEndpoint>(&bad_gid)
            .unwrap_err()
            .to_string()
            .contains("not a GID"));
        type Breaker = Box<dyn Fn(&mut QpEndpoint)>;
        let cases: Vec<(Breaker, &str)> = vec![
            (Box::new(|e| e.version = 9), "version 9"),
            (Box::new(|e| e.to = 2), "disagree on the exchange order"),
            (Box::new(|e| e.qps[0].qpn = 0), "queue pair number 0 for lane 0"),
            (Box::new(|e| e.qps[2].qpn = 1 << 24), "for lane 2"),
            (
                Box::new(|e| e.qps[1].psn = 1 << 24),
                "packet sequence number 16777216 for lane 1",
            ),
            (Box::new(|e| e.mtu = 1500), "MTU 1500"),
            (Box::new(|e| e.gid = [0; 16]), "neither a LID nor a GID"),
            (Box::new(|e| e.window.shape.slots = 0), "slots"),
            (Box::new(|e| e.window.addr = 0), "window address"),
            (Box::new(|e| e.window.addr = u64::MAX - 10), "window address"),
        ];
        for (break_it, want) in cases {
            let mut e = sample();
            break_it(&mut e);
            let err = e.validate(0, 1, 3).unwrap_err().to_string();
            assert!(err.contains(want) && err.contains("rank 1"), "{err} (wanted {want})");
        }
        let mut ib = sample();
        ib.gid = [0; 16];
        ib.lid = 5;
        ib.validate(0, 1, 3)
            .expect("an InfiniBand port with a LID needs no GID");
    }

    #[test]
    fn gid_text_forms() {
        let g = gid_from_hex("fe80:0000:0000:0000:0202:c9ff:fe00:0001").unwrap();
        assert_eq!(g[0], 0xfe);
        assert_eq!(g[15], 1);
        assert_eq!(gid_to_hex(&g), "fe800000000000000202c9fffe000001");
        assert!(gid_from_hex("fe80::1").is_err());
        assert_eq!(path_mtu(4096, 1024), 1024);
    }
}
