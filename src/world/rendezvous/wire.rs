//! The rendezvous's wire format, version 3: the rank sends `CBRV`, the protocol version (u16 LE) and its nonce;
//! the service answers `CBRC`, the version, its nonce and its proof of the job token; the rank checks that
//! proof and only then sends its own (a flag byte 1 and the proof; 0 and zeros when the service's proof
//! failed), followed by its join; then length-prefixed (u32 LE) JSON frames. The token itself never travels,
//! so a process squatting on the rendezvous address learns nothing it can use (see
//! [`crate::transport::auth`]). The fuzz targets in `fuzz/` call [`admit_join`] and [`decode_reply`].

use std::io::{Read, Write};
use std::net::TcpStream;

use serde::{Deserialize, Serialize};

use super::join_message::{Join, Refusal};
use crate::error::{Error, Result};
use crate::transport::auth::{self, Binding, Nonce, Role, Token, NONCE_LEN, PROOF_LEN};
use crate::transport::tcp::gate::Verdict;
use crate::world::relay::Welcome;

/// Magic that opens a rank's hello.
pub(in crate::world) const MAGIC: [u8; 4] = *b"CBRV";
/// Magic that opens the service's challenge.
pub(super) const CHALLENGE_MAGIC: [u8; 4] = *b"CBRC";
/// 2: the token is proved with nonces and HMAC, never sent. 3: the table travels down a tree of ranks.
pub(super) const VERSION: u16 = 3;
/// The rank's hello: magic, version, nonce.
pub(super) const PREAMBLE_LEN: usize = 4 + 2 + NONCE_LEN;
/// The service's challenge: magic, version, nonce, proof.
pub(in crate::world) const CHALLENGE_LEN: usize = 4 + 2 + NONCE_LEN + PROOF_LEN;
/// The rank's proof: a flag byte, then the proof.
pub(super) const PROOF_MSG_LEN: usize = 1 + PROOF_LEN;
/// Where the join's frame starts.
const JOIN_AT: usize = PREAMBLE_LEN + PROOF_MSG_LEN;
/// Largest frame accepted: a hello with its options is a few KiB.
const MAX_FRAME: usize = 1 << 20;

/// The service's answer to a join: sent once every rank joined, or once the job cannot start.
#[derive(Serialize, Deserialize)]
pub(super) enum Reply {
    /// Every rank agrees: where the table is, and what proves it.
    Welcome(Welcome),
    /// The ranks disagree on how the job is set up (options, versions, size): a usage error everywhere.
    Refused(String),
    /// A rank did not turn up: a peer failure everywhere.
    Failed(String),
    /// A rank refused to start (its own checks failed): every rank stops with its reason, naming it.
    Declined {
        rank: usize,
        host: String,
        refusal: Refusal,
    },
}

/// What a rank hears when rank `rank` on `host` refused to start, `who` being the rank that hears it: a usage
/// error naming the refusing rank's flag where it named one (the job was started with input it cannot run),
/// else a peer failure blaming that rank.
fn declined(who: &str, rank: usize, host: &str, refusal: &Refusal) -> Error {
    let host = crate::error::escape(host);
    let msg = format!(
        "{who}: rank {rank} (host {host}) refused to start: {}; no rank of the job started",
        crate::error::escape(&refusal.reason)
    );
    match &refusal.flag {
        Some(flag) => Error::usage(crate::error::escape(flag), msg),
        None => Error::peer(msg).during("the bootstrap").blaming(rank, host),
    }
}

/// What both proofs of one connection are bound to.
pub(super) fn binding<'a>(connector: &'a Nonce, listener: &'a Nonce) -> Binding<'a> {
    Binding {
        protocol: MAGIC,
        connector,
        listener,
        claims: &VERSION_BYTES,
    }
}

/// [`VERSION`] as it travels.
pub(in crate::world) const VERSION_BYTES: [u8; 2] = VERSION.to_le_bytes();

/// The service's challenge to a rank whose nonce is `connector`: its own nonce and proof.
pub(super) fn challenge(token: &Token, connector: &Nonce, listener: &Nonce) -> Vec<u8> {
    let mut b = Vec::with_capacity(CHALLENGE_LEN);
    b.extend_from_slice(&CHALLENGE_MAGIC);
    b.extend_from_slice(&VERSION_BYTES);
    b.extend_from_slice(listener);
    b.extend_from_slice(&auth::prove(token, Role::Listener, &binding(connector, listener)));
    b
}

/// Judges the bytes a connection to the rendezvous sent so far, `nonce` being the service's for it: the hello
/// (magic, version, the rank's nonce), answered with a challenge; the rank's proof; then one length-prefixed
/// JSON [`Join`]. A stranger is refused as soon as a byte gives it away, and holds at most the few bytes before
/// its proof; a collbench rank of another job (wrong token) is told so, so it stops at once instead of waiting
/// out its deadline.
pub fn admit_join(nonce: &Nonce, b: &[u8], token: &Token) -> Verdict<Join> {
    let seen = b.len().min(MAGIC.len());
    if b[..seen] != MAGIC[..seen] {
        return Verdict::reject("bad magic (not a collbench rank)");
    }
    if b.len() < PREAMBLE_LEN {
        return Verdict::Need(PREAMBLE_LEN);
    }
    let v = u16::from_le_bytes([b[4], b[5]]);
    if v != VERSION {
        return Verdict::reject(format!(
            "rendezvous protocol version {v}, this service speaks {VERSION}"
        ));
    }
    let connector: Nonce = b[6..PREAMBLE_LEN].try_into().expect("a nonce's length");
    if b.len() == PREAMBLE_LEN {
        return Verdict::Answer {
            send: challenge(token, &connector, nonce),
            need: JOIN_AT + 4,
        };
    }
    if b[PREAMBLE_LEN] == 0 {
        return Verdict::reject(
            "the rank found this service's proof wrong: it holds a different job token (a rank of another job \
             using this address, or a different COLLBENCH_JOB_TOKEN)",
        );
    }
    if b[PREAMBLE_LEN] != 1 {
        return Verdict::reject(format!("bad proof flag {}", b[PREAMBLE_LEN]));
    }
    if b.len() < JOIN_AT + 4 {
        return Verdict::Need(JOIN_AT + 4);
    }
    if !auth::verify(
        token,
        Role::Connector,
        &binding(&connector, nonce),
        &b[PREAMBLE_LEN + 1..JOIN_AT],
    ) {
        // The answer reveals nothing about the right token.
        let answer = frame_bytes(&Reply::Refused(
            "this rendezvous belongs to another job: wrong job token; every rank needs the same \
             COLLBENCH_JOB_TOKEN (or token file), and two jobs need different ones (or different rendezvous \
             addresses)"
                .into(),
        ))
        .unwrap_or_default();
        return Verdict::Reject {
            why: "wrong job token (its proof does not check out)".into(),
            answer,
        };
    }
    let len = u32::from_le_bytes([b[JOIN_AT], b[JOIN_AT + 1], b[JOIN_AT + 2], b[JOIN_AT + 3]]) as usize;
    if len > MAX_FRAME {
        return Verdict::reject(format!("frame of {len} bytes is larger than the {MAX_FRAME} limit"));
    }
    let total = JOIN_AT + 4 + len;
    if b.len() < total {
        return Verdict::Need(total);
    }
    if b.len() > total {
        return Verdict::reject(format!("{} bytes where the join has {total}", b.len()));
    }
    match serde_json::from_slice(&b[JOIN_AT + 4..]) {
        Ok(j) => Verdict::Admit(j),
        Err(e) => Verdict::reject(format!("malformed join: {e}")),
    }
}

/// Decodes the rendezvous's answer to a join: where the table is, or the reason the job cannot start.
pub fn decode_reply(frame: &[u8], who: &str, root: &str) -> Result<Welcome> {
    match serde_json::from_slice::<Reply>(frame) {
        Ok(Reply::Welcome(w)) => Ok(w),
        Ok(Reply::Refused(msg)) => Err(Error::usage(
            "options",
            format!("{who}: the rendezvous refused the job: {}", crate::error::escape(&msg)),
        )),
        Ok(Reply::Failed(msg)) => Err(Error::peer(format!(
            "{who}: the job could not start: {}",
            crate::error::escape(&msg)
        ))),
        Ok(Reply::Declined { rank, host, refusal }) => Err(declined(who, rank, &host, &refusal)),
        Err(e) => Err(Error::peer(format!(
            "{who}: malformed answer from the rendezvous at {root}: {e}"
        ))),
    }
}

/// `v` as one frame: its length (u32 LE), then its JSON.
pub(super) fn frame_bytes<T: Serialize>(v: &T) -> serde_json::Result<Vec<u8>> {
    let body = serde_json::to_vec(v)?;
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&body);
    Ok(out)
}

/// Sends `v` as one frame.
pub(super) fn write_frame<T: Serialize>(sock: &mut TcpStream, v: &T) -> std::io::Result<()> {
    sock.write_all(&frame_bytes(v).map_err(std::io::Error::other)?)
}

/// Why no frame was read.
pub(super) enum Heard {
    /// The connection ended before the first byte of an answer.
    Closed(String),
    /// No answer before the deadline, on a connection still open.
    Silent(String),
    /// Anything else: a broken answer.
    Failed(String),
}

/// Reads one frame; where none came, why.
pub(super) fn read_frame(sock: &mut TcpStream) -> std::result::Result<Vec<u8>, Heard> {
    use std::io::ErrorKind::*;
    let mut len = [0u8; 4];
    // Byte by byte until the first arrives, so a connection closed mid-length is not taken for one closed
    // before any answer.
    let mut got = 0;
    while got < len.len() {
        match sock.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Err(Heard::Closed("the connection was closed without an answer".into())),
            Ok(0) => return Err(Heard::Failed("truncated frame length".into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == Interrupted => {}
            Err(e) if matches!(e.kind(), WouldBlock | TimedOut) => {
                return Err(Heard::Silent("no answer before the deadline".into()))
            }
            Err(e) if got == 0 && matches!(e.kind(), ConnectionReset | ConnectionAborted | BrokenPipe) => {
                return Err(Heard::Closed(format!(
                    "the connection was reset without an answer: {e}"
                )))
            }
            Err(e) => return Err(Heard::Failed(format!("no frame length: {e}"))),
        }
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(Heard::Failed(format!(
            "frame of {len} bytes is larger than the {MAX_FRAME} limit"
        )));
    }
    let mut body = vec![0u8; len];
    sock.read_exact(&mut body)
        .map_err(|e| Heard::Failed(format!("truncated frame: {e}")))?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reply `r` as it travels, decoded by rank 1.
    fn heard(r: &Reply) -> Error {
        match decode_reply(&serde_json::to_vec(r).unwrap(), "rank 1 (host b)", "a:1") {
            Err(e) => e,
            Ok(_) => panic!("a refusal decoded as a welcome"),
        }
    }

    #[test]
    fn a_refusal_names_the_rank_its_host_and_its_reason_on_every_rank() {
        let usage = heard(&Reply::Declined {
            rank: 0,
            host: "a".into(),
            refusal: Refusal {
                flag: Some("-J".into()),
                reason: "r.json exists; use --force to overwrite".into(),
            },
        });
        assert_eq!(usage.exit_code(), crate::error::EXIT_USAGE, "{usage}");
        assert_eq!(
            usage.to_string(),
            "-J: rank 1 (host b): rank 0 (host a) refused to start: r.json exists; use --force to overwrite; no \
             rank of the job started"
        );
        // Without a flag to fix, the refusing rank is the culprit of a peer failure.
        let other = heard(&Reply::Declined {
            rank: 2,
            host: "c\u{1b}[2J".into(),
            refusal: Refusal {
                flag: None,
                reason: "cannot read /sys/fs/cgroup: gone".into(),
            },
        });
        assert_eq!(other.exit_code(), crate::error::EXIT_PEER, "{other}");
        assert_eq!(
            other.culprit().map(|c| c.to_string()).as_deref(),
            Some("rank 2 (host c\\u{1b}[2J)")
        );
        let text = other.to_string();
        assert!(
            text.contains("refused to start: cannot read /sys/fs/cgroup: gone"),
            "{text}"
        );
        assert!(!text.chars().any(char::is_control), "{text:?}");
    }
}
