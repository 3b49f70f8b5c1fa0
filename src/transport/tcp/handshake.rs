//! The data connection's wire formats: its opening (who is calling whom, then a mutual proof of the job's
//! token, [`crate::transport::auth`]), the answer to it, and the header before every message part. Decoding
//! never panics on any input; anything unexpected is an error naming what was wrong. The fuzz targets in
//! `fuzz/` call these decoders.
//!
//! The opening, version 3:
//! 1. connector: [`Hello`] (`CBTH`, version, from, to, stream, streams, its nonce), no secret in it;
//! 2. listener: a [`challenge`] (`CBTC`, version, its nonce, its proof over both nonces and the hello);
//! 3. connector: one byte, 1 then its own proof ([`answer_challenge`]), or 0 and zeros when the listener's proof
//!    failed (so the listener can say why it was left);
//! 4. listener: an ack.

use super::gate::Verdict;
use crate::transport::auth::{self, Binding, Nonce, Role, Token, NONCE_LEN, PROOF_LEN};

/// Magic that opens a data-connection hello.
pub const HELLO_MAGIC: [u8; 4] = *b"CBTH";
/// Magic that opens the accepting side's challenge.
pub const CHALLENGE_MAGIC: [u8; 4] = *b"CBTC";
/// Magic that opens the accepting side's answer.
pub const ACK_MAGIC: [u8; 4] = *b"CBTA";
/// Protocol version of the data path; ranks of different versions refuse each other. 3: the token is proved
/// with nonces and HMAC, never sent.
pub const VERSION: u16 = 3;
/// Encoded size of a [`Hello`].
pub const HELLO_LEN: usize = 4 + 2 + 4 + 4 + 2 + 2 + NONCE_LEN;
/// The part of a hello its proofs are bound to: everything but the nonce (bound on its own).
const CLAIMS_LEN: usize = HELLO_LEN - NONCE_LEN;
/// Encoded size of the listener's challenge.
pub const CHALLENGE_LEN: usize = 4 + 2 + NONCE_LEN + PROOF_LEN;
/// Encoded size of the connector's proof (a flag byte, then the proof).
pub const PROOF_MSG_LEN: usize = 1 + PROOF_LEN;
/// Everything the listener reads before it admits a connection.
pub const OPENING_LEN: usize = HELLO_LEN + PROOF_MSG_LEN;
/// Encoded size of an ack.
pub const ACK_LEN: usize = 4 + 2 + 1;

/// What a connecting rank says first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    pub from: u32,
    pub to: u32,
    pub stream: u16,
    pub nstreams: u16,
    /// The connector's fresh nonce.
    pub nonce: Nonce,
}

impl Hello {
    /// Wire form.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&HELLO_MAGIC);
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[6..10].copy_from_slice(&self.from.to_le_bytes());
        b[10..14].copy_from_slice(&self.to.to_le_bytes());
        b[14..16].copy_from_slice(&self.stream.to_le_bytes());
        b[16..18].copy_from_slice(&self.nstreams.to_le_bytes());
        b[18..HELLO_LEN].copy_from_slice(&self.nonce);
        b
    }

    fn binding<'a>(wire: &'a [u8; HELLO_LEN], listener: &'a Nonce) -> Binding<'a> {
        Binding {
            protocol: HELLO_MAGIC,
            connector: wire[CLAIMS_LEN..].try_into().expect("a nonce's length"),
            listener,
            claims: &wire[..CLAIMS_LEN],
        }
    }

    /// Judges the bytes a connection sent so far, `nonce` being this listener's for it: a stranger is refused as
    /// soon as a byte gives it away (the magic, then the version), a complete hello is answered with a
    /// [`challenge`], and the connection is admitted once the connector's proof checks out.
    pub fn admit(nonce: &Nonce, b: &[u8], token: &Token) -> Verdict<Hello> {
        let seen = b.len().min(HELLO_MAGIC.len());
        if b[..seen] != HELLO_MAGIC[..seen] {
            return Verdict::reject("bad magic (not a collbench data connection)");
        }
        if b.len() < HELLO_LEN {
            return Verdict::Need(HELLO_LEN);
        }
        let h = match Hello::decode(&b[..HELLO_LEN]) {
            Ok(h) => h,
            Err(why) => return Verdict::reject(why),
        };
        if b.len() == HELLO_LEN {
            return Verdict::Answer {
                send: challenge(token, &h, nonce).to_vec(),
                need: OPENING_LEN,
            };
        }
        if b.len() < OPENING_LEN {
            return Verdict::Need(OPENING_LEN);
        }
        if b.len() > OPENING_LEN {
            return Verdict::reject(format!("{} bytes where an opening has {OPENING_LEN}", b.len()));
        }
        let wire = h.encode();
        match b[HELLO_LEN] {
            1 if auth::verify(
                token,
                Role::Connector,
                &Hello::binding(&wire, nonce),
                &b[HELLO_LEN + 1..],
            ) =>
            {
                Verdict::Admit(h)
            }
            1 => Verdict::reject(format!(
                "wrong job token: the proof of the connection claiming to be rank {} does not check out (a rank \
                 of another job, or a stale one)",
                h.from
            )),
            0 => Verdict::reject(format!(
                "the connection claiming to be rank {} found this rank's proof wrong: it holds a different job token \
                 (a rank of another job, or a stale one)",
                h.from
            )),
            f => Verdict::reject(format!("bad proof flag {f}")),
        }
    }

    /// Parses a hello (no secret in it: authentication is the proofs' business).
    pub fn decode(b: &[u8]) -> Result<Hello, String> {
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
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&b[CLAIMS_LEN..]);
        Ok(Hello {
            from: u32_at(6),
            to: u32_at(10),
            stream: u16::from_le_bytes([b[14], b[15]]),
            nstreams: u16::from_le_bytes([b[16], b[17]]),
            nonce,
        })
    }
}

/// The listener's challenge to `hello`: its nonce and its proof, bound to the hello and both nonces.
pub fn challenge(token: &Token, hello: &Hello, nonce: &Nonce) -> [u8; CHALLENGE_LEN] {
    let wire = hello.encode();
    let proof = auth::prove(token, Role::Listener, &Hello::binding(&wire, nonce));
    let mut b = [0u8; CHALLENGE_LEN];
    b[0..4].copy_from_slice(&CHALLENGE_MAGIC);
    b[4..6].copy_from_slice(&VERSION.to_le_bytes());
    b[6..6 + NONCE_LEN].copy_from_slice(nonce);
    b[6 + NONCE_LEN..].copy_from_slice(&proof);
    b
}

/// The connector's side: checks the listener's challenge to `hello` and returns the proof to send; the error
/// says why the listener is not trusted (then send [`REFUSAL`] and close).
pub fn answer_challenge(token: &Token, hello: &Hello, ch: &[u8]) -> Result<[u8; PROOF_MSG_LEN], String> {
    if ch.len() != CHALLENGE_LEN || ch[0..4] != CHALLENGE_MAGIC {
        return Err("bad answer to hello (not a collbench rank)".into());
    }
    let version = u16::from_le_bytes([ch[4], ch[5]]);
    if version != VERSION {
        return Err(format!("peer speaks protocol version {version}, this rank {VERSION}"));
    }
    let listener: Nonce = ch[6..6 + NONCE_LEN].try_into().expect("a nonce's length");
    let wire = hello.encode();
    let bind = Hello::binding(&wire, &listener);
    if !auth::verify(token, Role::Listener, &bind, &ch[6 + NONCE_LEN..]) {
        return Err(
            "it could not prove it holds this job's token: a process of another job (or not collbench) listens at \
             that address, or the ranks were given different job tokens"
                .into(),
        );
    }
    let mut b = [1u8; PROOF_MSG_LEN];
    b[1..].copy_from_slice(&auth::prove(token, Role::Connector, &bind));
    Ok(b)
}

/// What a connector sends instead of its proof when the listener's failed.
pub const REFUSAL: [u8; PROOF_MSG_LEN] = [0; PROOF_MSG_LEN];

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

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: Token = [7; 16];

    fn hello(from: u32) -> Hello {
        Hello {
            from,
            to: 0,
            stream: 0,
            nstreams: 1,
            nonce: auth::nonce(),
        }
    }

    #[test]
    fn hello_round_trips_and_rejects_strangers() {
        let h = Hello {
            to: 1,
            stream: 2,
            nstreams: 4,
            ..hello(3)
        };
        let wire = h.encode();
        assert_eq!(Hello::decode(&wire).unwrap(), h);
        assert!(Hello::decode(&wire[..10]).unwrap_err().contains("short"));
        let mut bad = wire;
        bad[0] = b'X';
        assert!(Hello::decode(&bad).unwrap_err().contains("magic"));
        let mut old = wire;
        old[4] = 99;
        assert!(Hello::decode(&old).unwrap_err().contains("version"));
        assert!(Hello::decode(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n\0\0\0\0\0\0\0").is_err());
    }

    #[test]
    fn the_opening_is_a_mutual_proof_and_neither_side_sends_the_token() {
        let ns = auth::nonce();
        let h = hello(1);
        let wire = h.encode();
        assert!(!wire.windows(16).any(|w| w == TOKEN), "the hello holds no token");
        assert_eq!(Hello::admit(&ns, &[], &TOKEN), Verdict::Need(HELLO_LEN));
        assert_eq!(Hello::admit(&ns, &wire[..10], &TOKEN), Verdict::Need(HELLO_LEN));
        let Verdict::Answer { send, need } = Hello::admit(&ns, &wire, &TOKEN) else {
            panic!("a hello is answered with a challenge")
        };
        assert_eq!((send.len(), need), (CHALLENGE_LEN, OPENING_LEN));
        assert!(!send.windows(16).any(|w| w == TOKEN), "the challenge holds no token");
        // The connector checks the listener's proof; one of another token fails.
        let proof = answer_challenge(&TOKEN, &h, &send).unwrap();
        let other = challenge(&[8; 16], &h, &ns);
        assert!(answer_challenge(&TOKEN, &h, &other)
            .unwrap_err()
            .contains("could not prove"));
        // A challenge made for another hello (another nonce or rank) is no proof for this one.
        assert!(answer_challenge(&TOKEN, &hello(1), &send).is_err());
        let mut opening = wire.to_vec();
        opening.extend_from_slice(&proof);
        assert_eq!(
            Hello::admit(&ns, &opening[..HELLO_LEN + 5], &TOKEN),
            Verdict::Need(OPENING_LEN)
        );
        assert!(matches!(Hello::admit(&ns, &opening, &TOKEN), Verdict::Admit(x) if x == h));
        // Replayed against another listener nonce, or under another token, the same bytes fail.
        assert!(
            matches!(Hello::admit(&auth::nonce(), &opening, &TOKEN), Verdict::Reject { why, .. } if why.contains("wrong job token"))
        );
        assert!(matches!(Hello::admit(&ns, &opening, &[0; 16]), Verdict::Reject { .. }));
        // A connector that did not trust the listener says so.
        let mut refused = wire.to_vec();
        refused.extend_from_slice(&REFUSAL);
        assert!(
            matches!(Hello::admit(&ns, &refused, &TOKEN), Verdict::Reject { why, .. } if why.contains("different job token"))
        );
        assert!(matches!(Hello::admit(&ns, b"G", &TOKEN), Verdict::Reject { why, .. } if why.contains("magic")));
        opening.push(0);
        assert!(matches!(Hello::admit(&ns, &opening, &TOKEN), Verdict::Reject { .. }));
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
