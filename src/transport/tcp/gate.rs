//! Admission of accepted connections. Every connection must prove itself (magic, protocol version, job token)
//! before it is handed on; until then it waits here, read without blocking, so a stranger that connects and says
//! nothing, or half a hello, never holds up the real peers queued behind it. Each candidate gets its own deadline.
//!
//! The gate only moves bytes and keeps time; what a valid opening looks like is a decoder's business
//! ([`crate::transport::tcp::handshake::Hello::admit`], [`crate::world::rendezvous::admit_join`]). A decoder
//! sees the bytes received so far and answers with a [`Verdict`]; it is a pure function, which is what the
//! fuzz targets exercise.
//!
//! An opening may be a conversation: a decoder can answer part of it ([`Verdict::Answer`], the challenge of
//! [`crate::transport::auth`]) and wait for more. Each candidate gets a fresh nonce of its own, which the decoder
//! sees beside the bytes, so the decoder stays a pure function of both.
//!
//! A flood of strangers costs the ranks nothing: the gate holds at most [`MAX_PENDING`] candidates (fewer when
//! the descriptor limit is low), and when full it drops the oldest candidate of the source address holding the
//! most, never turning the newcomer away; a rank that lost its connection that way connects again (the
//! callers retry until their deadline). The bytes held for candidates are bounded in total too
//! ([`MAX_PENDING_BYTES`]): past it the oldest candidates are dropped first. Each newcomer is read as soon as it
//! is accepted, so a rank whose opening is already there is admitted before anything else happens.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::transport::auth::{nonce, Nonce};

/// Most candidates held at once; beyond this the oldest of the busiest source is dropped, so a flood of
/// connections cannot exhaust this process's file descriptors. Far above what a job needs (one per stream of each
/// higher rank).
pub const MAX_PENDING: usize = 4096;

/// Most bytes held for all candidates together (openings received so far); past it the oldest candidates are
/// dropped first. A join is a few KiB, a data hello under a hundred bytes.
pub const MAX_PENDING_BYTES: usize = 32 << 20;

/// Most bytes read from one candidate at a time.
const READ_CHUNK: usize = 16 << 10;

/// Most connections accepted in one [`Gate::accept_all`], so the candidates already held are read in between.
const ACCEPT_BATCH: usize = 256;

/// What a decoder makes of the bytes a connection sent so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<T> {
    /// Nothing wrong yet; the opening is this many bytes long in total (as far as is known so far), always
    /// more than were given.
    Need(usize),
    /// A complete, authenticated opening.
    Admit(T),
    /// So far so good: send these bytes (once for this many bytes received), then the opening is `need` bytes
    /// long in total, more than were given.
    Answer { send: Vec<u8>, need: usize },
    /// Not a rank of this job: why (never echoing a secret), and bytes to send back before closing (may be empty).
    Reject { why: String, answer: Vec<u8> },
}

impl<T> Verdict<T> {
    /// A rejection with nothing to answer.
    pub fn reject(why: impl Into<String>) -> Self {
        Verdict::Reject {
            why: why.into(),
            answer: Vec::new(),
        }
    }
}

/// What happened to a candidate.
pub enum Event<T> {
    /// It presented a valid opening; the socket is back in blocking mode, with no read timeout.
    Admitted(TcpStream, SocketAddr, T),
    /// It was dropped: who it was and why.
    Rejected(SocketAddr, String),
}

struct Candidate {
    sock: TcpStream,
    from: SocketAddr,
    buf: Vec<u8>,
    deadline: Instant,
    /// This connection's own nonce, for the decoder.
    nonce: Nonce,
    /// How many bytes had been received when the last answer was sent: each answer goes out once.
    answered_at: Option<usize>,
}

/// Connections accepted but not yet authenticated.
pub struct Gate<T, D: FnMut(&Nonce, &[u8]) -> Verdict<T>> {
    decode: D,
    limit: Duration,
    /// Oldest first.
    pending: Vec<Candidate>,
    /// How many of `pending` come from each source address.
    per_source: HashMap<IpAddr, usize>,
    capacity: usize,
    /// Bytes received and held for `pending`, and the most allowed.
    bytes: usize,
    max_bytes: usize,
}

impl<T, D: FnMut(&Nonce, &[u8]) -> Verdict<T>> Gate<T, D> {
    /// A gate giving each connection `limit` to present a complete opening that `decode` admits.
    pub fn new(decode: D, limit: Duration) -> Self {
        Self::with_capacity(decode, limit, capacity_for_descriptors())
    }

    /// A gate holding at most `capacity` candidates (at least one).
    pub fn with_capacity(decode: D, limit: Duration, capacity: usize) -> Self {
        Gate {
            decode,
            limit,
            pending: Vec::new(),
            per_source: HashMap::new(),
            capacity: capacity.max(1),
            bytes: 0,
            max_bytes: MAX_PENDING_BYTES,
        }
    }

    /// The same gate holding at most `max_bytes` of openings for all candidates together.
    pub fn with_byte_limit(self, max_bytes: usize) -> Self {
        Gate { max_bytes, ..self }
    }

    /// Bytes held for the candidates waiting.
    pub fn bytes_held(&self) -> usize {
        self.bytes
    }

    /// Drops the oldest candidates while the bytes held are over the limit.
    fn shed_bytes(&mut self, events: &mut Vec<Event<T>>) {
        while self.bytes > self.max_bytes && !self.pending.is_empty() {
            let c = self.remove(0);
            events.push(Event::Rejected(
                c.from,
                format!(
                    "dropped unauthenticated to make room: the openings waiting held more than {} bytes, and the \
                     oldest goes first (this one had sent {})",
                    self.max_bytes,
                    c.buf.len()
                ),
            ));
        }
    }

    /// Accepts every connection waiting on `listener` (which must be non-blocking) into the gate; returns the
    /// accept error that is not "nothing waiting", if any, and the candidates dropped on the way.
    pub fn accept_all(&mut self, listener: &TcpListener) -> (std::io::Result<()>, Vec<Event<T>>) {
        let mut events = Vec::new();
        for _ in 0..ACCEPT_BATCH {
            match listener.accept() {
                Ok((sock, from)) => self.add(sock, from, &mut events),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return (Ok(()), events),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // The connection died before it was accepted, or the process is out of descriptors for a moment:
                // neither stops the job.
                Err(e) if transient_accept_error(&e) => return (Ok(()), events),
                Err(e) => return (Err(e), events),
            }
        }
        (Ok(()), events)
    }

    /// Takes a freshly accepted connection in, making room first by dropping the oldest candidate of the source
    /// holding the most, then reads what it already sent.
    fn add(&mut self, sock: TcpStream, from: SocketAddr, events: &mut Vec<Event<T>>) {
        if let Err(e) = sock.set_nonblocking(true) {
            events.push(Event::Rejected(from, format!("cannot configure the socket: {e}")));
            return;
        }
        while self.pending.len() >= self.capacity {
            events.push(self.evict());
        }
        *self.per_source.entry(from.ip()).or_default() += 1;
        self.pending.push(Candidate {
            sock,
            from,
            buf: Vec::new(),
            deadline: Instant::now() + self.limit,
            nonce: nonce(),
            answered_at: None,
        });
        let last = self.pending.len() - 1;
        if let Some(outcome) = self.step(last, Instant::now()) {
            let c = self.remove(last);
            events.push(settle(c, outcome));
        }
        self.shed_bytes(events);
    }

    /// Drops the oldest candidate of the source address with the most candidates waiting.
    fn evict(&mut self) -> Event<T> {
        let (&busiest, &n) = self
            .per_source
            .iter()
            .max_by_key(|(_, &n)| n)
            .expect("a full gate holds candidates");
        let i = self
            .pending
            .iter()
            .position(|c| c.from.ip() == busiest)
            .expect("a counted source has a candidate");
        let c = self.remove(i);
        Event::Rejected(
            c.from,
            format!(
                "dropped unauthenticated to make room: {} connections were waiting, {n} of them from {busiest}, and \
                 the oldest of the busiest source goes first",
                self.capacity
            ),
        )
    }

    /// Removes candidate `i`, keeping the others in arrival order.
    fn remove(&mut self, i: usize) -> Candidate {
        let c = self.pending.remove(i);
        self.bytes -= c.buf.len();
        if let Some(n) = self.per_source.get_mut(&c.from.ip()) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&c.from.ip());
            }
        }
        c
    }

    /// Reads what each candidate sent, without blocking, and settles those that are complete, wrong, closed
    /// or out of time.
    pub fn drive(&mut self) -> Vec<Event<T>> {
        let now = Instant::now();
        let mut outcomes = Vec::new();
        for i in 0..self.pending.len() {
            if let Some(o) = self.step(i, now) {
                outcomes.push((i, o));
            }
        }
        let mut events = Vec::with_capacity(outcomes.len());
        // From the back, so the indices of those still to remove stay valid.
        for (i, o) in outcomes.into_iter().rev() {
            let c = self.remove(i);
            events.push(settle(c, o));
        }
        events.reverse();
        self.shed_bytes(&mut events);
        events
    }

    /// Advances candidate `i`: `None` while it may still complete, else its outcome (the caller removes it).
    fn step(&mut self, i: usize, now: Instant) -> Option<Result<T, String>> {
        let c = &mut self.pending[i];
        loop {
            let need = match (self.decode)(&c.nonce, &c.buf) {
                Verdict::Need(n) if n > c.buf.len() => n,
                Verdict::Answer { send, need } if need > c.buf.len() => {
                    if c.answered_at != Some(c.buf.len()) {
                        c.answered_at = Some(c.buf.len());
                        // The socket's buffer is empty (the peer waits for this answer) and the answer small; a
                        // short write leaves the peer waiting until this candidate's deadline drops it.
                        if let Err(e) = c.sock.write_all(&send) {
                            return Some(Err(format!("answer failed: {e}")));
                        }
                    }
                    need
                }
                // A decoder bug must not spin here: treat it as a refusal naming the numbers.
                Verdict::Need(n) | Verdict::Answer { need: n, .. } => {
                    return Some(Err(format!(
                        "internal error: decoder asked for {n} bytes after {}",
                        c.buf.len()
                    )))
                }
                Verdict::Admit(v) => return Some(Ok(v)),
                Verdict::Reject { why, answer } => {
                    if !answer.is_empty() {
                        // Best effort: the answer is small and the socket's buffer empty; a stranger that does not
                        // read it loses nothing.
                        let _ = c.sock.write(&answer);
                    }
                    return Some(Err(why));
                }
            };
            // Read no further than the opening: what follows it belongs to whoever takes the socket next. Into a
            // small scratch buffer, so what is held grows only with what arrived.
            let have = c.buf.len();
            let mut chunk = [0u8; READ_CHUNK];
            let want = (need - have).min(READ_CHUNK);
            let got = c.sock.read(&mut chunk[..want]);
            match got {
                Ok(0) => return Some(Err(format!("closed after {have} of {need} opening bytes"))),
                Ok(n) => {
                    c.buf.extend_from_slice(&chunk[..n]);
                    self.bytes += n;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if now < c.deadline {
                        return None;
                    }
                    return Some(Err(format!(
                        "sent {have} of {need} opening bytes within {:.1} s (half-open or too slow)",
                        self.limit.as_secs_f64()
                    )));
                }
                Err(e) => return Some(Err(format!("read failed: {e}"))),
            }
        }
    }

    /// Waits until `listener` or a candidate has something to read, a candidate's deadline passes, the peer of
    /// an `admitted` connection hangs up, or `until`.
    pub fn wait(&self, listener: &TcpListener, admitted: &[std::os::fd::RawFd], until: Instant) {
        let mut fds = Vec::with_capacity(1 + self.pending.len() + admitted.len());
        fds.push(libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        // Admitted connections wake the wait only when their peer hangs up: their data is not read here.
        fds.extend(admitted.iter().map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLRDHUP,
            revents: 0,
        }));
        let mut wake = until;
        for c in &self.pending {
            fds.push(libc::pollfd {
                fd: c.sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            });
            wake = wake.min(c.deadline);
        }
        let left = wake.saturating_duration_since(Instant::now());
        // Round up, so a deadline a fraction of a millisecond away is not polled for zero time over and over.
        let ms = (left.as_micros().div_ceil(1000)).min(i32::MAX as u128) as i32;
        // SAFETY: fds is a valid array of pollfd of the given length.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    }

    /// Drops every candidate still waiting (set-up is over) and says who they were and how far each got.
    pub fn close(self) -> Vec<(SocketAddr, String)> {
        let Gate {
            mut decode, pending, ..
        } = self;
        pending
            .into_iter()
            .map(|c| {
                let need = match decode(&c.nonce, &c.buf) {
                    Verdict::Need(n) | Verdict::Answer { need: n, .. } => n.to_string(),
                    _ => "?".into(),
                };
                (
                    c.from,
                    format!(
                        "still unauthenticated when set-up finished ({} of {need} opening bytes)",
                        c.buf.len()
                    ),
                )
            })
            .collect()
    }

    /// How many candidates are waiting.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no candidate is waiting.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

/// The event of a candidate whose opening was judged.
fn settle<T>(c: Candidate, outcome: Result<T, String>) -> Event<T> {
    match outcome {
        Ok(v) => match c.sock.set_nonblocking(false) {
            Ok(()) => Event::Admitted(c.sock, c.from, v),
            Err(e) => Event::Rejected(c.from, format!("cannot configure the socket: {e}")),
        },
        Err(why) => Event::Rejected(c.from, why),
    }
}

/// How many candidates a gate may hold: [`MAX_PENDING`], or a quarter of the descriptors this process may
/// still open if that is fewer, so a flood leaves the rank descriptors for its own files and peers.
fn capacity_for_descriptors() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return MAX_PENDING;
    }
    let open = std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count()) as u64;
    let room = lim.rlim_cur.saturating_sub(open) / 4;
    (room.min(MAX_PENDING as u64) as usize).max(16)
}

/// Accept errors that concern one connection or a passing shortage, not the listener.
fn transient_accept_error(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNABORTED | libc::EPROTO | libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// Admits the 4 bytes "ping"; rejects anything else as soon as it differs.
    fn ping(_: &Nonce, b: &[u8]) -> Verdict<()> {
        if !b"ping".starts_with(&b[..b.len().min(4)]) {
            return Verdict::Reject {
                why: "not ping".into(),
                answer: b"no".to_vec(),
            };
        }
        if b.len() < 4 {
            Verdict::Need(4)
        } else {
            Verdict::Admit(())
        }
    }

    fn listener() -> (TcpListener, SocketAddr) {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        l.set_nonblocking(true).unwrap();
        let a = l.local_addr().unwrap();
        (l, a)
    }

    /// Drives the gate until `n` candidates are settled, waiting on sockets, never on a clock.
    fn settle<D: FnMut(&Nonce, &[u8]) -> Verdict<()>>(
        g: &mut Gate<(), D>,
        l: &TcpListener,
        n: usize,
    ) -> Vec<Event<()>> {
        let until = Instant::now() + Duration::from_secs(30);
        let mut out = Vec::new();
        while out.len() < n && Instant::now() < until {
            let (r, evs) = g.accept_all(l);
            r.unwrap();
            out.extend(evs);
            out.extend(g.drive());
            if out.len() < n {
                g.wait(l, &[], until);
            }
        }
        out
    }

    #[test]
    fn a_silent_stranger_does_not_hold_up_a_real_peer_behind_it() {
        let (l, addr) = listener();
        let mut g = Gate::new(ping, Duration::from_secs(600));
        let silent = TcpStream::connect(addr).unwrap();
        let mut half = TcpStream::connect(addr).unwrap();
        half.write_all(b"pi").unwrap();
        let mut real = TcpStream::connect(addr).unwrap();
        real.write_all(b"ping").unwrap();
        let evs = settle(&mut g, &l, 1);
        let who: Vec<SocketAddr> = evs
            .iter()
            .map(|e| match e {
                Event::Admitted(_, from, ()) => *from,
                Event::Rejected(from, why) => panic!("{from} rejected: {why}"),
            })
            .collect();
        assert_eq!(who, vec![real.local_addr().unwrap()]);
        assert_eq!(g.len(), 2, "the two strangers still wait");
        let left = g.close();
        let addrs: Vec<SocketAddr> = left.iter().map(|(a, _)| *a).collect();
        assert!(addrs.contains(&silent.local_addr().unwrap()) && addrs.contains(&half.local_addr().unwrap()));
        assert!(left.iter().any(|(_, why)| why.contains("2 of 4")), "{left:?}");
    }

    #[test]
    fn garbage_is_refused_with_the_answer_and_a_closed_connection_is_named() {
        let (l, addr) = listener();
        let mut g = Gate::new(ping, Duration::from_secs(600));
        let mut junk = TcpStream::connect(addr).unwrap();
        junk.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut gone = TcpStream::connect(addr).unwrap();
        gone.write_all(b"p").unwrap();
        let gone_addr = gone.local_addr().unwrap();
        drop(gone);
        let evs = settle(&mut g, &l, 2);
        let mut whys: Vec<(SocketAddr, String)> = evs
            .into_iter()
            .map(|e| match e {
                Event::Rejected(a, why) => (a, why),
                Event::Admitted(_, a, ()) => panic!("{a} admitted"),
            })
            .collect();
        whys.sort_by_key(|(_, w)| w.clone());
        assert!(whys[0].1.contains("closed after 1 of 4"), "{whys:?}");
        assert_eq!(whys[0].0, gone_addr);
        assert_eq!(whys[1].1, "not ping");
        // The unread rest of the junk makes the close a reset, so read just the answer (it arrived before).
        let mut answer = [0u8; 2];
        junk.read_exact(&mut answer).unwrap();
        assert_eq!(&answer, b"no");
    }

    #[test]
    fn a_half_open_connection_is_dropped_at_its_own_deadline() {
        let (l, addr) = listener();
        let mut g = Gate::new(ping, Duration::ZERO);
        let mut half = TcpStream::connect(addr).unwrap();
        half.write_all(b"pin").unwrap();
        let evs = settle(&mut g, &l, 1);
        match &evs[..] {
            [Event::Rejected(a, why)] => {
                assert_eq!(*a, half.local_addr().unwrap());
                assert!(why.contains("half-open"), "{why}");
            }
            _ => panic!("expected one rejection"),
        }
    }

    /// A connection to `to` from the loopback address `src` (any of 127.0.0.0/8), that sends `bytes`.
    fn from(src: [u8; 4], to: SocketAddr, bytes: &[u8]) -> TcpStream {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&SocketAddr::from((src, 0)).into()).unwrap();
        s.connect(&to.into()).unwrap();
        let mut s: TcpStream = s.into();
        s.write_all(bytes).unwrap();
        s
    }

    #[test]
    fn a_full_gate_drops_the_oldest_of_the_busiest_source_and_never_the_newcomer() {
        let (l, addr) = listener();
        let mut g = Gate::with_capacity(ping, Duration::from_secs(600), 3);
        let a = from([127, 0, 0, 2], addr, b"");
        let b = from([127, 0, 0, 2], addr, b"");
        let c = from([127, 0, 0, 1], addr, b"");
        assert!(settle(&mut g, &l, 0).is_empty());
        while g.len() < 3 {
            let (r, evs) = g.accept_all(&l);
            r.unwrap();
            assert!(evs.is_empty());
        }
        // A real peer arriving at a full gate: the oldest stranger of 127.0.0.2 (two waiting) makes room.
        let d = from([127, 0, 0, 1], addr, b"ping");
        let evs = settle(&mut g, &l, 2);
        let mut dropped = Vec::new();
        let mut admitted = Vec::new();
        for e in evs {
            match e {
                Event::Rejected(from, why) => dropped.push((from, why)),
                Event::Admitted(_, from, ()) => admitted.push(from),
            }
        }
        assert_eq!(admitted, vec![d.local_addr().unwrap()]);
        assert_eq!(dropped.len(), 1, "{dropped:?}");
        assert_eq!(dropped[0].0, a.local_addr().unwrap());
        assert!(dropped[0].1.contains("to make room") && dropped[0].1.contains("2 of them from 127.0.0.2"));
        // Now b (127.0.0.2), c and e (127.0.0.1) wait; f finds the gate full, and 127.0.0.1 is the busiest.
        let e = from([127, 0, 0, 1], addr, b"");
        while g.len() < 3 {
            let (r, evs) = g.accept_all(&l);
            r.unwrap();
            assert!(evs.is_empty());
        }
        let _f = from([127, 0, 0, 1], addr, b"");
        let evs = settle(&mut g, &l, 1);
        match &evs[..] {
            [Event::Rejected(who, _)] => assert_eq!(*who, c.local_addr().unwrap()),
            _ => panic!("expected one drop"),
        }
        assert_eq!(g.len(), 3);
        drop((b, e));
    }

    /// Asks for 1 MiB and admits nothing: a partial join that never completes.
    fn big(_: &Nonce, b: &[u8]) -> Verdict<()> {
        Verdict::Need((b.len() + 1).max(1 << 20))
    }

    #[test]
    fn the_bytes_held_for_partial_openings_are_bounded_in_total_and_the_oldest_go_first() {
        let (l, addr) = listener();
        let limit = 100 << 10;
        let mut g = Gate::new(big, Duration::from_secs(600)).with_byte_limit(limit);
        // Ten connections each sending 30 KiB of a 1 MiB opening: 300 KiB would be held without the bound.
        let chunk = vec![7u8; 30 << 10];
        let socks: Vec<TcpStream> = (0..10)
            .map(|_| {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(&chunk).unwrap();
                s
            })
            .collect();
        let evs = settle(&mut g, &l, 7);
        let dropped: Vec<SocketAddr> = evs
            .iter()
            .map(|e| match e {
                Event::Rejected(a, why) => {
                    assert!(why.contains("held more than"), "{why}");
                    *a
                }
                Event::Admitted(..) => panic!("nothing is admitted"),
            })
            .collect();
        assert!(g.bytes_held() <= limit, "{} bytes held", g.bytes_held());
        // The first seven connected are the ones dropped, oldest first; the last three are still held.
        let first: Vec<SocketAddr> = socks[..7].iter().map(|s| s.local_addr().unwrap()).collect();
        assert_eq!(dropped, first);
        assert_eq!(g.len(), 3);
    }

    #[test]
    fn an_answer_is_sent_once_and_the_rest_of_the_opening_read_after_it() {
        // "hi" is answered with "?" and a nonce of the gate's own, then "ok" completes it.
        let mut seen = Vec::new();
        let (l, addr) = listener();
        let mut g = Gate::new(
            |n: &Nonce, b: &[u8]| {
                seen.push(*n);
                match b.len() {
                    0 | 1 => Verdict::Need(2),
                    2 => Verdict::Answer {
                        send: b"?".to_vec(),
                        need: 4,
                    },
                    3 => Verdict::Need(4),
                    _ if b == b"hiok" => Verdict::Admit(()),
                    _ => Verdict::reject("no"),
                }
            },
            Duration::from_secs(600),
        );
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"hi").unwrap();
        while g.is_empty() {
            let (r, evs) = g.accept_all(&l);
            r.unwrap();
            assert!(evs.is_empty());
        }
        let mut q = [0u8; 1];
        s.read_exact(&mut q).unwrap();
        assert_eq!(&q, b"?");
        // Driven again before the rest came: no second answer.
        assert!(g.drive().is_empty());
        s.write_all(b"ok").unwrap();
        let evs = settle(&mut g, &l, 1);
        assert!(matches!(evs[..], [Event::Admitted(..)]));
        s.set_nonblocking(true).unwrap();
        assert!(s.read(&mut q).is_err(), "one answer only");
        drop(g);
        assert!(seen.windows(2).all(|w| w[0] == w[1]), "one nonce per connection");
    }

    #[test]
    fn reads_stop_at_the_end_of_the_opening() {
        let (l, addr) = listener();
        let mut g = Gate::new(ping, Duration::from_secs(600));
        let mut real = TcpStream::connect(addr).unwrap();
        real.write_all(b"pingPAYLOAD").unwrap();
        let mut evs = settle(&mut g, &l, 1);
        let Some(Event::Admitted(mut sock, _, ())) = evs.pop() else {
            panic!("not admitted")
        };
        drop(real);
        let mut rest = Vec::new();
        sock.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"PAYLOAD", "bytes after the opening stay in the socket");
    }
}
