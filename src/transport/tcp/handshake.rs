//! The data connection's wire formats: its first bytes (magic, protocol version, the job's token, who is calling
//! whom), the answer to them, and the header before every message part. Decoding never panics on any input;
//! anything unexpected is an error naming what was wrong. The fuzz targets in `fuzz/` call these decoders.

use super::gate::Verdict;

/// Magic that opens a data-connection hello.
pub const HELLO_MAGIC: [u8; 4] = *b"CBTH";
/// Magic that opens the accepting side's answer.
pub const ACK_MAGIC: [u8; 4] = *b"CBTA";
/// Protocol version of the data path; ranks of different versions refuse each other.
pub const VERSION: u16 = 2;
/// Encoded size of a [`Hello`].
pub const HELLO_LEN: usize = 4 + 2 + 16 + 4 + 4 + 2 + 2;
/// Encoded size of an ack.
pub const ACK_LEN: usize = 4 + 2 + 1;

/// A per-job secret every connection must present.
pub type Token = [u8; 16];

/// What a connecting rank says first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    pub token: Token,
    pub from: u32,
    pub to: u32,
    pub stream: u16,
    pub nstreams: u16,
}

impl Hello {
    /// Wire form.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&HELLO_MAGIC);
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[6..22].copy_from_slice(&self.token);
        b[22..26].copy_from_slice(&self.from.to_le_bytes());
        b[26..30].copy_from_slice(&self.to.to_le_bytes());
        b[30..32].copy_from_slice(&self.stream.to_le_bytes());
        b[32..34].copy_from_slice(&self.nstreams.to_le_bytes());
        b
    }

    /// Judges the first bytes a connection sent: a stranger is refused as soon as a byte gives it away (the
    /// magic, then the version, then the token), so a port scanner is dropped without waiting for more.
    pub fn admit(b: &[u8], token: &Token) -> Verdict<Hello> {
        let seen = b.len().min(HELLO_MAGIC.len());
        if b[..seen] != HELLO_MAGIC[..seen] {
            return Verdict::reject("bad magic (not a collbench data connection)");
        }
        if b.len() < HELLO_LEN {
            return Verdict::Need(HELLO_LEN);
        }
        match Hello::decode(&b[..HELLO_LEN], token) {
            Ok(h) if b.len() == HELLO_LEN => Verdict::Admit(h),
            Ok(_) => Verdict::reject(format!("{} bytes where a hello has {HELLO_LEN}", b.len())),
            Err(why) => Verdict::reject(why),
        }
    }

    /// Parses and authenticates a hello; the error says what was wrong (never echoes the token).
    pub fn decode(b: &[u8], token: &Token) -> Result<Hello, String> {
        if b.len() != HELLO_LEN {
            return Err(format!("short hello ({} of {HELLO_LEN} bytes)", b.len()));
        }
        if b[0..4] != HELLO_MAGIC {
            return Err("bad magic (not a collbench data connection)".into());
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if version != VERSION {
            return Err(format!("protocol version {version}, this rank speaks {VERSION}"));
        }
        if !constant_time_eq(&b[6..22], token) {
            return Err("wrong job token (a rank of another job, or a stale one)".into());
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut tok = [0u8; 16];
        tok.copy_from_slice(&b[6..22]);
        Ok(Hello {
            token: tok,
            from: u32_at(22),
            to: u32_at(26),
            stream: u16::from_le_bytes([b[30], b[31]]),
            nstreams: u16::from_le_bytes([b[32], b[33]]),
        })
    }
}

/// The accepting side's answer: accepted.
pub fn encode_ack() -> [u8; ACK_LEN] {
    let mut b = [0u8; ACK_LEN];
    b[0..4].copy_from_slice(&ACK_MAGIC);
    b[4..6].copy_from_slice(&VERSION.to_le_bytes());
    b
}

/// Checks an ack.
pub fn decode_ack(b: &[u8]) -> Result<(), String> {
    if b.len() != ACK_LEN || b[0..4] != ACK_MAGIC {
        return Err("bad answer to hello (not a collbench rank)".into());
    }
    let version = u16::from_le_bytes([b[4], b[5]]);
    if version != VERSION {
        return Err(format!("peer speaks protocol version {version}, this rank {VERSION}"));
    }
    if b[6] != 0 {
        return Err(format!("peer refused the connection (status {})", b[6]));
    }
    Ok(())
}

/// Length of the header before every message part on a data connection.
///
/// 16, not the 8 its two fields need: the kernel copies a send into socket memory that often starts at a page
/// boundary, and x86 `rep movsb` (the kernel's copy) runs about 13x slower when the destination lies 1-15
/// bytes past the source modulo 4 KiB. With an 8-byte header every page-aligned buffer hit that case; with
/// 16 the payload keeps its source's alignment (measured on this project's machines: 3.4 vs 45 GB/s).
pub const FRAME_HEADER_LEN: usize = 16;

/// The header before every message part: its payload length and its sequence number on the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload bytes that follow.
    pub len: u32,
    /// Position of the part on its stream, from 0, wrapping.
    pub seq: u32,
}

impl FrameHeader {
    /// Wire form: both fields little-endian, then 8 zero bytes (alignment, see [`FRAME_HEADER_LEN`]).
    pub fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let mut b = [0u8; FRAME_HEADER_LEN];
        b[..4].copy_from_slice(&self.len.to_le_bytes());
        b[4..8].copy_from_slice(&self.seq.to_le_bytes());
        b
    }

    /// Reads a header's fields; every 16 bytes hold some fields, so this cannot fail ([`FrameHeader::check`]
    /// also requires the padding to be zero).
    pub fn decode(b: &[u8; FRAME_HEADER_LEN]) -> FrameHeader {
        FrameHeader {
            len: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            seq: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    /// Checks a received header against the part the receiver expects (order and length are fixed by the
    /// transport contract, so any difference means the ranks disagree on the schedule, or a stranger got in).
    pub fn check(b: &[u8; FRAME_HEADER_LEN], expected: FrameHeader) -> Result<(), String> {
        let got = FrameHeader::decode(b);
        if b[8..].iter().any(|&x| x != 0) {
            return Err(format!(
                "protocol error: the header of part #{} has non-zero padding; the peer is not a collbench rank \
                 of this protocol version",
                expected.seq
            ));
        }
        if got != expected {
            return Err(format!(
                "protocol error: expected part #{} of {} bytes, the peer sent part #{} of {} bytes; the ranks \
                 disagree on the schedule: were they all started with the same options and version?",
                expected.seq, expected.len, got.seq, got.len
            ));
        }
        Ok(())
    }
}

/// Compares secrets without an early exit, so timing does not leak how much of a token matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: Token = [7; 16];

    #[test]
    fn hello_round_trips_and_rejects_strangers() {
        let h = Hello {
            token: TOKEN,
            from: 3,
            to: 1,
            stream: 2,
            nstreams: 4,
        };
        let wire = h.encode();
        assert_eq!(Hello::decode(&wire, &TOKEN).unwrap(), h);
        assert!(Hello::decode(&wire, &[8; 16]).unwrap_err().contains("token"));
        assert!(Hello::decode(&wire[..10], &TOKEN).unwrap_err().contains("short"));
        let mut bad = wire;
        bad[0] = b'X';
        assert!(Hello::decode(&bad, &TOKEN).unwrap_err().contains("magic"));
        let mut old = wire;
        old[4] = 99;
        assert!(Hello::decode(&old, &TOKEN).unwrap_err().contains("version"));
        assert!(Hello::decode(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n\0\0\0\0\0\0\0\0", &TOKEN).is_err());
    }

    #[test]
    fn admit_refuses_a_stranger_at_the_first_wrong_byte_and_waits_for_the_rest() {
        let wire = Hello {
            token: TOKEN,
            from: 1,
            to: 0,
            stream: 0,
            nstreams: 1,
        }
        .encode();
        assert_eq!(Hello::admit(&[], &TOKEN), Verdict::Need(HELLO_LEN));
        assert_eq!(Hello::admit(&wire[..10], &TOKEN), Verdict::Need(HELLO_LEN));
        assert!(matches!(Hello::admit(&wire, &TOKEN), Verdict::Admit(h) if h.from == 1));
        assert!(matches!(Hello::admit(b"G", &TOKEN), Verdict::Reject { why, .. } if why.contains("magic")));
        assert!(matches!(Hello::admit(&wire, &[0; 16]), Verdict::Reject { why, .. } if why.contains("token")));
        let mut long = wire.to_vec();
        long.push(0);
        assert!(matches!(Hello::admit(&long, &TOKEN), Verdict::Reject { .. }));
    }

    #[test]
    fn frame_headers_round_trip_and_a_mismatch_names_both_parts() {
        let h = FrameHeader { len: 4096, seq: 7 };
        assert_eq!(FrameHeader::decode(&h.encode()), h);
        assert!(FrameHeader::check(&h.encode(), h).is_ok());
        let e = FrameHeader::check(&FrameHeader { len: 8, seq: 7 }.encode(), h).unwrap_err();
        assert!(
            e.contains("part #7 of 4096 bytes") && e.contains("part #7 of 8 bytes"),
            "{e}"
        );
        let mut padded = h.encode();
        padded[FRAME_HEADER_LEN - 1] = 1;
        assert_eq!(FrameHeader::decode(&padded), h);
        let e = FrameHeader::check(&padded, h).unwrap_err();
        assert!(e.contains("non-zero padding"), "{e}");
    }

    #[test]
    fn a_payload_starts_16_bytes_after_its_header_so_aligned_buffers_stay_aligned_on_the_wire() {
        // The kernel's copy into socket memory is slow when the destination is 1-15 bytes past the source
        // (mod 4 KiB); a header of a multiple of 16 keeps a page-aligned buffer's payload clear of that.
        assert_eq!(FRAME_HEADER_LEN % 16, 0);
        assert_eq!(FrameHeader { len: 1, seq: 2 }.encode().len(), FRAME_HEADER_LEN);
    }

    #[test]
    fn ack_checks_magic_version_and_status() {
        assert!(decode_ack(&encode_ack()).is_ok());
        let mut refused = encode_ack();
        refused[6] = 1;
        assert!(decode_ack(&refused).unwrap_err().contains("refused"));
        assert!(decode_ack(b"nope").is_err());
    }
}
