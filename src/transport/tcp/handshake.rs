//! The first bytes of every data connection: magic, protocol version, the job's token, who is calling whom.
//! Decoding never panics on any input; anything unexpected is an error naming what was wrong.

/// Magic that opens a data-connection hello.
pub const HELLO_MAGIC: [u8; 4] = *b"CBTH";
/// Magic that opens the accepting side's answer.
pub const ACK_MAGIC: [u8; 4] = *b"CBTA";
/// Protocol version of the data path; ranks of different versions refuse each other.
pub const VERSION: u16 = 1;
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
    fn ack_checks_magic_version_and_status() {
        assert!(decode_ack(&encode_ack()).is_ok());
        let mut refused = encode_ack();
        refused[6] = 1;
        assert!(decode_ack(&refused).unwrap_err().contains("refused"));
        assert!(decode_ack(b"nope").is_err());
    }
}
