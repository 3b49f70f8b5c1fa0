//! The rank table's way down a tree of ranks, so that the rendezvous's work and memory grow linearly with the
//! job, not with its square.
//!
//! The rendezvous serialises the table once, and sends it whole to the first [`FANOUT`] ranks only; every other
//! rank hears a small welcome naming its parent in the tree, the table's length and SHA-256, and a ticket. It
//! fetches the table from its parent's relay listener (presenting the ticket and its rank), checks the digest,
//! and then serves the same bytes to its own children. The table travels in frames of at most [`CHUNK`] bytes.
//! The depth is log4 of the job: 9 hops at 2^17 ranks.
//!
//! One concern: the tree's shape and the relay wire (hello, chunks, digest), both sides.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::transport::auth::Nonce;
use crate::transport::tcp::gate::{Event, Gate, Verdict};

/// Children per rank (and ranks the rendezvous itself sends the table to).
pub const FANOUT: usize = 4;
/// Largest frame of the table.
pub const CHUNK: usize = 64 << 10;
/// A child's hello to its parent: magic, ticket, rank (u32 LE).
const MAGIC: [u8; 4] = *b"CBRL";
const TICKET_LEN: usize = 16;
const HELLO_LEN: usize = 4 + TICKET_LEN + 4;
/// How long a connection to a relay listener may take to say its whole hello before it is dropped.
const HELLO_DEADLINE: Duration = Duration::from_secs(5);

/// Where a rank gets the table from, as the rendezvous tells it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Source {
    /// On the connection to the rendezvous, right after the welcome.
    Rendezvous,
    /// From this rank's relay listener.
    Parent { rank: usize, host: String, addr: String },
}

/// The small welcome every rank gets: what the table is and where it comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    pub size: usize,
    /// The table's length in bytes.
    pub bytes: u64,
    /// The table's SHA-256, hex.
    pub sha256: String,
    /// Proof, to a parent, that a connection comes from a rank of this job; hex.
    pub ticket: String,
    pub from: Source,
}

/// The serialised table with what proves it.
pub struct Table {
    pub bytes: Arc<Vec<u8>>,
    pub sha256: String,
    pub ticket: String,
}

impl Table {
    /// `bytes` with its digest and a fresh ticket.
    pub fn new(bytes: Vec<u8>) -> Table {
        let mut t = [0u8; TICKET_LEN];
        // A ticket that cannot be drawn is all zeros: the digest still proves the table.
        let _ = getrandom::getrandom(&mut t);
        Table {
            sha256: hex(&Sha256::digest(&bytes)),
            bytes: Arc::new(bytes),
            ticket: hex(&t),
        }
    }

    /// The welcome for a rank whose table comes `from` there.
    pub fn welcome(&self, size: usize, from: Source) -> Welcome {
        Welcome {
            size,
            bytes: self.bytes.len() as u64,
            sha256: self.sha256.clone(),
            ticket: self.ticket.clone(),
            from,
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; TICKET_LEN]> {
    let mut t = [0u8; TICKET_LEN];
    if s.len() != 2 * TICKET_LEN || !s.is_ascii() {
        return None;
    }
    for (i, b) in t.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(t)
}

/// Rank `rank`'s parent in a job of any size: `None` for the first [`FANOUT`] ranks, served by the rendezvous.
pub fn parent(rank: usize) -> Option<usize> {
    (rank >= FANOUT).then(|| rank / FANOUT - 1)
}

/// Rank `rank`'s children in a job of `size` ranks.
pub fn children(rank: usize, size: usize) -> Range<usize> {
    let first = (rank + 1).saturating_mul(FANOUT).min(size);
    first..first.saturating_add(FANOUT).min(size)
}

/// A relay listener on `ip` (the address this rank reaches the rendezvous from, so its parent's peers reach it).
pub fn listen(ip: IpAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(SocketAddr::new(ip, 0))
}

/// Writes `bytes` as length-prefixed frames of at most [`CHUNK`] bytes.
pub fn send(sock: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    for c in bytes.chunks(CHUNK) {
        sock.write_all(&(c.len() as u32).to_le_bytes())?;
        sock.write_all(c)?;
    }
    Ok(())
}

/// Reads the table the welcome `w` announces from `sock`, and checks it against the digest.
pub fn receive(sock: &mut TcpStream, w: &Welcome) -> Result<Vec<u8>, String> {
    // The announced length is not trusted with an allocation beyond what arrives.
    let mut out = Vec::with_capacity((w.bytes as usize).min(1 << 24));
    while (out.len() as u64) < w.bytes {
        let mut len = [0u8; 4];
        sock.read_exact(&mut len)
            .map_err(|e| format!("the table stopped after {} of {} bytes: {e}", out.len(), w.bytes))?;
        let len = u32::from_le_bytes(len) as usize;
        if len == 0 || len > CHUNK || out.len() as u64 + len as u64 > w.bytes {
            return Err(format!("a frame of the table of {len} bytes is out of bounds"));
        }
        let at = out.len();
        out.resize(at + len, 0);
        sock.read_exact(&mut out[at..])
            .map_err(|e| format!("the table stopped after {at} of {} bytes: {e}", w.bytes))?;
    }
    if hex(&Sha256::digest(&out)) != w.sha256 {
        return Err("the table's SHA-256 is not the one the rendezvous announced".into());
    }
    Ok(out)
}

/// Connects to `addr` (a parent's relay listener) as rank `rank` with `ticket`, until `deadline`.
pub fn fetch(addr: &str, rank: usize, w: &Welcome, deadline: Instant) -> Result<Vec<u8>, String> {
    let to: SocketAddr = addr.parse().map_err(|e| format!("relay address {addr:?}: {e}"))?;
    let ticket = unhex(&w.ticket).ok_or("the welcome's ticket is malformed")?;
    let left = || {
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    };
    let mut sock = loop {
        match TcpStream::connect_timeout(&to, left().min(Duration::from_secs(1))) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= deadline => return Err(format!("cannot connect to {addr}: {e}")),
            // A parent listens from before its join; a refusal now is a parent gone, said at once.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(format!(
                    "{addr} refused the connection ({e}): the rank has most likely exited"
                ))
            }
            Err(_) => {}
        }
    };
    let mut hello = Vec::with_capacity(HELLO_LEN);
    hello.extend_from_slice(&MAGIC);
    hello.extend_from_slice(&ticket);
    hello.extend_from_slice(&(rank as u32).to_le_bytes());
    sock.write_all(&hello)
        .map_err(|e| format!("saying hello to {addr}: {e}"))?;
    // The parent answers once it has the table itself: up to the deadline.
    sock.set_read_timeout(Some(left()))
        .map_err(|e| format!("configuring the connection to {addr}: {e}"))?;
    receive(&mut sock, w)
}

/// Serves `bytes` to rank `rank`'s children on `listener` before this rank goes on, until every child was served,
/// 30 s passed or `deadline`: a rank that then fails at once (a local limit, say) has still passed the
/// table on, so its children report their own error, not its absence. Connections without this job's ticket,
/// or from ranks that are not its children, are dropped.
///
/// Hellos are read through a [`Gate`], without blocking and each with its own deadline, so a connection that
/// trickles its hello (or says nothing) never holds up the children queued behind it.
pub fn serve_children(
    listener: TcpListener,
    rank: usize,
    size: usize,
    w: &Welcome,
    bytes: Arc<Vec<u8>>,
    deadline: Instant,
) {
    let mut todo: Vec<usize> = children(rank, size).collect();
    let Some(ticket) = unhex(&w.ticket) else { return };
    if todo.is_empty() || listener.set_nonblocking(true).is_err() {
        return;
    }
    let mut gate = Gate::new(|_: &Nonce, b: &[u8]| admit_hello(b, &ticket), HELLO_DEADLINE);
    // Children connect as soon as they hear their welcome, sent to all at once: they are queued by now.
    let until = deadline.min(Instant::now() + SERVE_FOR);
    while !todo.is_empty() && Instant::now() < until {
        let (res, mut events) = gate.accept_all(&listener);
        if res.is_err() {
            return;
        }
        events.extend(gate.drive());
        for ev in events {
            let Event::Admitted(mut sock, _, child) = ev else {
                continue;
            };
            if let Some(i) = todo.iter().position(|&c| c == child) {
                if send(&mut sock, &bytes).is_ok() {
                    todo.swap_remove(i);
                }
            }
        }
        if !todo.is_empty() {
            gate.wait(&listener, &[], until);
        }
    }
}

/// What the relay makes of the first bytes of a connection: the rank it claims, once a whole hello with this
/// job's ticket arrived. The magic is checked as it arrives (a stranger speaking another protocol goes at
/// once), the ticket only whole, so how long a guess is held says nothing about which of its bytes were right.
fn admit_hello(b: &[u8], ticket: &[u8; TICKET_LEN]) -> Verdict<usize> {
    if !MAGIC.starts_with(&b[..b.len().min(MAGIC.len())]) {
        return Verdict::reject("not a relay hello");
    }
    if b.len() < HELLO_LEN {
        return Verdict::Need(HELLO_LEN);
    }
    let diff = b[4..4 + TICKET_LEN]
        .iter()
        .zip(ticket)
        .fold(0u8, |d, (x, y)| d | (x ^ y));
    if diff != 0 {
        return Verdict::reject("another job's ticket");
    }
    Verdict::Admit(u32::from_le_bytes(b[4 + TICKET_LEN..HELLO_LEN].try_into().expect("four bytes")) as usize)
}

/// How long a rank waits for its children to fetch the table, at most (a child that died after joining).
const SERVE_FOR: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_but_the_first_four_has_one_parent_whose_children_it_is() {
        let size = 1000;
        let mut seen = vec![0; size];
        for r in 0..size {
            for c in children(r, size) {
                assert_eq!(parent(c), Some(r));
                seen[c] += 1;
            }
        }
        for (r, n) in seen.iter().enumerate() {
            assert_eq!(*n, usize::from(r >= FANOUT), "rank {r}");
        }
        assert_eq!(children(0, 3), 3..3);
        assert_eq!(children(0, 6), 4..6);
    }

    #[test]
    fn the_tree_is_shallow_at_the_bound() {
        let size = crate::world::env::MAX_WORLD_SIZE;
        let (mut r, mut hops) = (size - 1, 1);
        while let Some(p) = parent(r) {
            r = p;
            hops += 1;
        }
        assert!(hops <= 9, "{hops} hops");
    }

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (a, l.accept().unwrap().0)
    }

    #[test]
    fn a_table_arrives_in_chunks_and_is_checked_against_its_digest() {
        let t = Table::new((0..200_000u32).flat_map(|x| x.to_le_bytes()).collect());
        let w = t.welcome(9, Source::Rendezvous);
        let (mut a, mut b) = pair();
        let bytes = t.bytes.clone();
        let h = std::thread::spawn(move || send(&mut a, &bytes));
        assert_eq!(receive(&mut b, &w).unwrap(), *t.bytes);
        h.join().unwrap().unwrap();
        // Another digest: refused.
        let (mut a, mut b) = pair();
        send(&mut a, &t.bytes).unwrap_or(());
        let wrong = Welcome {
            sha256: "00".repeat(32),
            ..w.clone()
        };
        let bytes = t.bytes.clone();
        let h = std::thread::spawn(move || send(&mut a, &bytes));
        assert!(receive(&mut b, &wrong).unwrap_err().contains("SHA-256"));
        drop(b);
        let _ = h.join();
    }

    #[test]
    fn a_parent_serves_its_children_and_nobody_else() {
        let t = Table::new(b"[1,2,3]".repeat(30_000));
        let size = 8;
        let w = t.welcome(size, Source::Rendezvous);
        let l = listen("127.0.0.1".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let deadline = Instant::now() + Duration::from_secs(20);
        // A stranger without the ticket, then rank 1 (not a child of rank 0): neither is served.
        let stranger = Welcome {
            ticket: "11".repeat(16),
            ..w.clone()
        };
        let bytes = t.bytes.clone();
        let w2 = w.clone();
        let parent = std::thread::spawn(move || serve_children(l, 0, size, &w2, bytes, deadline));
        let short = Instant::now() + Duration::from_millis(300);
        assert!(fetch(&addr, 4, &stranger, short).is_err());
        assert!(fetch(&addr, 1, &w, short).is_err());
        for c in children(0, size) {
            assert_eq!(fetch(&addr, c, &w, deadline).unwrap(), *t.bytes, "child {c}");
        }
        parent.join().unwrap();
    }

    /// Whether the other end still holds `s` open: nothing to read yet, and no end of stream.
    fn held(s: &TcpStream) -> bool {
        s.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        matches!((&*s).read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    #[test]
    fn a_stranger_trickling_its_hello_does_not_hold_up_the_children_behind_it() {
        let t = Table::new(b"[4,5,6]".repeat(1000));
        let size = 8;
        let w = t.welcome(size, Source::Rendezvous);
        let l = listen("127.0.0.1".parse().unwrap()).unwrap();
        let addr = l.local_addr().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        // First in the queue: a connection that sent one byte of a hello and waits to send the next.
        let mut stranger = TcpStream::connect(addr).unwrap();
        stranger.write_all(&MAGIC[..1]).unwrap();
        let (bytes, w2) = (t.bytes.clone(), w.clone());
        let parent = std::thread::spawn(move || serve_children(l, 0, size, &w2, bytes, deadline));
        let addr = addr.to_string();
        for c in 4..7 {
            assert_eq!(fetch(&addr, c, &w, deadline).unwrap(), *t.bytes, "child {c}");
        }
        // Served while the stranger's hello was still pending, not after it was given up on.
        assert!(
            held(&stranger),
            "the relay dropped the stranger before serving the children"
        );
        assert_eq!(fetch(&addr, 7, &w, deadline).unwrap(), *t.bytes);
        parent.join().unwrap();
    }

    #[test]
    fn a_hello_is_admitted_whole_and_only_with_the_ticket() {
        let ticket = [5u8; TICKET_LEN];
        let mut hello = MAGIC.to_vec();
        hello.extend_from_slice(&ticket);
        hello.extend_from_slice(&6u32.to_le_bytes());
        assert_eq!(admit_hello(&hello, &ticket), Verdict::Admit(6));
        for n in 0..HELLO_LEN {
            assert_eq!(admit_hello(&hello[..n], &ticket), Verdict::Need(HELLO_LEN), "{n} bytes");
        }
        // A wrong ticket byte is noticed only once the hello is whole.
        hello[5] ^= 1;
        assert_eq!(admit_hello(&hello[..HELLO_LEN - 1], &ticket), Verdict::Need(HELLO_LEN));
        assert!(matches!(admit_hello(&hello, &ticket), Verdict::Reject { .. }));
        assert!(matches!(admit_hello(b"GET", &ticket), Verdict::Reject { .. }));
    }
}
