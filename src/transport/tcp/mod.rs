//! collbench's own TCP transport: one or more streams per peer, a progress engine over non-blocking
//! sockets driven from `wait` (no threads, no async runtime, no allocation per message), receives straight
//! into place.
//!
//! Wire format per stream: every message part is a 16-byte header (part length, sequence number, both
//! little-endian u32, then 8 zero bytes that keep payloads aligned: see [`handshake::FRAME_HEADER_LEN`])
//! followed by the payload. The receiver knows what it expects (the transport contract
//! fixes order and length), so the header only guards against ranks that disagree on the schedule.
//! A message of at least [`TcpConfig::stripe_min`] bytes is split across all streams of the peer; smaller
//! ones go round-robin, one stream each.
//!
//! Failure: a rank that gives up ([`TcpTransport::abort`]) completes any part it had started to send with
//! zeros, then sends an abort frame (a header whose length field is `u32::MAX`, then a JSON [`AbortNote`]:
//! who gave up, whom it blames, and why) on a stream to every peer, relays the notes it hears, and waits a
//! moment for more. A rank that reads an abort frame while waiting stops at once and does the same. Every
//! rank then names one culprit: starting from its own note (or the first it heard), it follows the notes of
//! the ranks blamed, so a rank that was only waiting on a stuck rank is not blamed for it.

pub mod congestion;
pub mod connect;
pub mod gate;
pub mod handshake;
mod progress;

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use connect::{connect_all, TcpListenerBound};
use progress::{Op, Stream, MAX_ABORT_BODY};

use crate::error::{Error, Result};
use crate::transport::requests::Requests;
use crate::transport::{Request, Transport};

/// Tuning of the TCP transport.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// Connections per peer.
    pub streams: usize,
    /// Messages at least this long are striped across all streams.
    pub stripe_min: usize,
    /// Deadline of any single wait.
    pub timeout: Duration,
    /// Deadline of connection set-up.
    pub connect_timeout: Duration,
    /// How long a wait polls the sockets (yielding the CPU between polls) before it sleeps in poll(2).
    pub spin: Duration,
    /// SO_SNDBUF of every data socket; `None` keeps the kernel's autotuning.
    pub sndbuf: Option<usize>,
    /// TCP congestion control of every data socket; `None` keeps the host's default.
    pub congestion: Option<String>,
}

/// The polling phase of a wait: a peer's next bytes often arrive within microseconds, sooner than a sleeping
/// rank would be woken and scheduled again, so a wait first polls for `budget`, yielding the CPU between polls
/// so ranks sharing cores still run, and only then sleeps in poll(2).
struct Spin {
    budget: Duration,
    since: Option<Instant>,
}

impl Spin {
    fn new(budget: Duration) -> Self {
        Spin { budget, since: None }
    }

    /// Nothing moved: whether to poll again (after yielding) rather than sleep.
    fn keep_spinning(&mut self) -> bool {
        if self.budget.is_zero() {
            return false;
        }
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        if now.duration_since(since) < self.budget {
            std::thread::yield_now();
            true
        } else {
            false
        }
    }
}

/// How long a rank that gave up keeps sending and hearing abort notes, at most, before it reports.
const LINGER: Duration = Duration::from_secs(1);

/// What a rank that gave up tells every other: who it is, whom it blames, and its own message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AbortNote {
    pub origin: usize,
    pub origin_host: String,
    /// The rank it was waiting on (and its host), if its failure was about one peer.
    pub culprit: Option<(usize, String)>,
    /// Its error, with the phase it was in.
    pub text: String,
}

impl AbortNote {
    /// The rank this note blames: its culprit, else its origin itself.
    fn blamed(&self) -> (usize, &str) {
        match &self.culprit {
            Some((r, h)) => (*r, h),
            None => (self.origin, &self.origin_host),
        }
    }
}

/// Where a peer is, for connecting and for naming it in errors.
#[derive(Clone, Debug)]
pub struct PeerAddr {
    pub rank: usize,
    pub host: String,
    pub addr: SocketAddr,
}

impl std::fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {} (host {}, {})", self.rank, self.host, self.addr)
    }
}

struct Peer {
    addr: PeerAddr,
    streams: Vec<Stream>,
    /// When bytes last moved to or from this peer: the peer that made no progress for longest is blamed.
    last_progress: Instant,
    /// How many of the transport's notes were queued to this peer.
    notes_sent: usize,
    /// Whether an abort frame arrived from this peer.
    heard: bool,
    /// Messages posted to / from this peer so far: picks the stream of small messages.
    sent_msgs: u64,
    recv_msgs: u64,
}

/// A connected TCP transport for one rank.
pub struct TcpTransport {
    rank: usize,
    host: String,
    iface: String,
    /// The path's name, as [`Transport::path`] gives it.
    path: String,
    peers: Vec<Option<Peer>>,
    requests: Requests,
    cfg: TcpConfig,
    poisoned: Option<String>,
    /// The peer this rank's own failure was about (a timeout or a broken connection).
    suspect: Option<usize>,
    /// Abort notes: this rank's own (once it gave up on its own) and every one heard, one per origin.
    notes: Vec<AbortNote>,
    /// Whom this rank was waiting on when it was poisoned, to answer a note blaming it afterwards.
    answer: Option<AbortNote>,
    /// The phase this rank gave up in (`during all_reduce of 4 MiB`), once it did.
    phase: Option<String>,
    pollfds: Vec<libc::pollfd>,
    /// (peer, stream) of each entry of `pollfds`.
    pollmap: Vec<(usize, usize)>,
}

impl TcpTransport {
    pub(crate) fn new(
        rank: usize,
        host: String,
        iface: String,
        path: String,
        peers: Vec<Option<(PeerAddr, Vec<TcpStream>)>>,
        cfg: TcpConfig,
    ) -> Self {
        let peers = peers
            .into_iter()
            .map(|p| {
                p.map(|(addr, socks)| Peer {
                    addr,
                    streams: socks.into_iter().map(Stream::new).collect(),
                    last_progress: Instant::now(),
                    notes_sent: 0,
                    heard: false,
                    sent_msgs: 0,
                    recv_msgs: 0,
                })
            })
            .collect();
        TcpTransport {
            rank,
            host,
            iface,
            path,
            peers,
            requests: Requests::default(),
            cfg,
            poisoned: None,
            suspect: None,
            notes: Vec::new(),
            answer: None,
            phase: None,
            pollfds: Vec::new(),
            pollmap: Vec::new(),
        }
    }

    /// The congestion control of this rank's first data socket, as the kernel reports it; `None` without
    /// peers or where it cannot be read.
    pub fn congestion(&self) -> Option<String> {
        let s = self.peers.iter().flatten().flat_map(|p| p.streams.first()).next()?;
        congestion::get(&s.sock).ok()
    }

    /// The interface this rank's listener is bound to (it may differ between hosts; the path name does not).
    pub fn iface(&self) -> &str {
        &self.iface
    }

    fn me(&self) -> String {
        format!("rank {} (host {})", self.rank, self.host)
    }

    /// Records the first error, drops every queued operation (their memory is never touched again) and
    /// returns the error.
    fn poison(&mut self, msg: String) -> Error {
        if self.poisoned.is_none() {
            self.answer = self.waiting_note();
            for p in self.peers.iter_mut().flatten() {
                for s in &mut p.streams {
                    // A part cut short is completed (with zeros) or skipped, so abort frames stay framed.
                    s.open_outbox();
                    s.switch_to_control();
                    s.sendq.clear();
                    s.recvq.clear();
                }
            }
            self.poisoned = Some(msg.clone());
        }
        Error::Peer(msg)
    }

    /// Takes the abort frames read on every stream into `notes`; returns whether a new one arrived.
    fn collect_notes(&mut self) -> bool {
        let mut new = false;
        for p in self.peers.iter_mut().flatten() {
            for s in &mut p.streams {
                let Some(c) = s.control.as_mut() else { continue };
                for body in c.bodies.drain(..) {
                    p.heard = true;
                    match serde_json::from_slice::<AbortNote>(&body) {
                        Ok(n) if n.origin != self.rank && !self.notes.iter().any(|m| m.origin == n.origin) => {
                            self.notes.push(n);
                            new = true;
                        }
                        Ok(_) => {}
                        Err(e) => eprintln!(
                            "collbench: {}: unreadable abort note from {} ignored: {e}",
                            format_args!("rank {} (host {})", self.rank, self.host),
                            p.addr
                        ),
                    }
                }
            }
        }
        new
    }

    /// The note that names the culprit: from this rank's own note (or the first heard), follow the note of
    /// each blamed rank as long as there is one; a rank that sent none is the culprit.
    fn verdict(&self) -> Option<&AbortNote> {
        let mut note = self
            .notes
            .iter()
            .find(|n| n.origin == self.rank)
            .or_else(|| self.notes.first())?;
        let mut seen = vec![note.origin];
        loop {
            let (blamed, _) = note.blamed();
            match self.notes.iter().find(|n| n.origin == blamed) {
                Some(next) if !seen.contains(&next.origin) => {
                    seen.push(next.origin);
                    note = next;
                }
                _ => return Some(note),
            }
        }
    }

    /// This rank's own note, if it gave up on its own or answered a note blaming it.
    fn own_note(&self) -> Option<&AbortNote> {
        self.notes.iter().find(|n| n.origin == self.rank)
    }

    /// The peer this rank is waiting on: of those with work pending, the one that moved nothing for longest.
    /// One that gave up too is not skipped: its own note carries the blame on.
    fn waiting_on(&self) -> Option<&Peer> {
        self.peers
            .iter()
            .flatten()
            .filter(|p| p.streams.iter().any(Stream::busy))
            .min_by_key(|p| p.last_progress)
    }

    /// What this rank would answer a note blaming it: whom it is waiting on, with what pending, since when.
    fn waiting_note(&self) -> Option<AbortNote> {
        let p = self.waiting_on()?;
        let addr = p.addr.to_string();
        let pending = self
            .pending_list(None)
            .into_iter()
            .filter(|x| x.contains(&addr))
            .collect::<Vec<_>>()
            .join(", ");
        Some(AbortNote {
            origin: self.rank,
            origin_host: self.host.clone(),
            culprit: Some((p.addr.rank, p.addr.host.clone())),
            text: format!(
                "{}: was itself waiting on {addr}, with {pending}; nothing had moved to or from it for {:.1} s",
                self.me(),
                p.last_progress.elapsed().as_secs_f64()
            ),
        })
    }

    /// A note blaming this rank arrived, and this rank has none of its own (it had not given up, or stopped
    /// on another rank's note): a rank that timed out on it only saw it waiting. It adds its own note naming
    /// the peer it was waiting on in turn, so the blame moves down the chain of waits to the rank that really
    /// stopped (which sends no note), whichever rank's timer fired first.
    fn answer_blame(&mut self) {
        if self.own_note().is_some() || !self.notes.iter().any(|n| n.blamed().0 == self.rank) {
            return;
        }
        // Once poisoned the queues are gone: the answer is what they held then.
        let answer = if self.poisoned.is_some() {
            self.answer.clone()
        } else {
            self.waiting_note()
        };
        let Some(mut note) = answer else { return };
        if let Some(ph) = &self.phase {
            note.text = format!("{ph}: {}", note.text);
        }
        self.suspect = note.culprit.as_ref().map(|c| c.0);
        // Appended: queue_notes sends each peer the notes past those it was sent, by position.
        self.notes.push(note);
    }

    /// The message of the verdict as this rank reports it; `own` is this rank's error ("" for its note's).
    fn verdict_message(&self, own: &str) -> Option<String> {
        let v = self.verdict()?;
        let (c, ch) = v.blamed();
        let own_note = self.own_note();
        let own = match own_note {
            Some(n) if own.is_empty() => n.text.as_str(),
            _ => own,
        };
        Some(if v.origin == self.rank {
            format!("{own}. Culprit: rank {c} (host {ch})")
        } else if own_note.is_some() {
            // This rank gave up (or answered) on its own: its observation first, then where the waits lead.
            format!(
                "{own}; following whom each rank waited on leads to rank {} (host {}): {}. Culprit: rank {c} (host {ch})",
                v.origin, v.origin_host, v.text
            )
        } else {
            format!(
                "{}: stopped because rank {} (host {}) gave up: {}. Culprit: rank {c} (host {ch})",
                self.me(),
                v.origin,
                v.origin_host,
                v.text
            )
        })
    }

    /// Poisons the transport with what the notes heard say.
    fn poison_from_notes(&mut self) -> Error {
        let msg = self.verdict_message("").unwrap_or_default();
        self.poison(msg)
    }

    /// Gives up: tells every peer (an abort frame with `err`, or the notes this rank heard, relayed), hears
    /// their notes for a moment, and returns the error to report, naming the one culprit every rank names.
    /// Best effort and non-blocking throughout: a peer that is gone or stopped is skipped.
    pub fn abort(&mut self, err: Error) -> Error {
        if matches!(err, Error::Usage { .. }) {
            // Every rank checks the same options and stops alike; there is nobody to tell.
            return err;
        }
        let err_text = err.to_string();
        self.phase = err.phase().map(str::to_string);
        // A note answered before giving up learns the phase now.
        let (rank, phase) = (self.rank, self.phase.clone());
        if let Some(n) = self.notes.iter_mut().find(|n| n.origin == rank) {
            if let Some(ph) = phase.filter(|_| !n.text.starts_with("during ")) {
                n.text = format!("{ph}: {}", n.text);
            }
        }
        let heard_first = self.poisoned.is_some() && self.suspect.is_none() && !self.notes.is_empty();
        if !heard_first && !self.notes.iter().any(|n| n.origin == self.rank) {
            let culprit = self
                .suspect
                .and_then(|s| self.peers[s].as_ref())
                .map(|p| (p.addr.rank, p.addr.host.clone()));
            let mut text = err_text.clone();
            text.truncate(MAX_ABORT_BODY / 2);
            self.notes.push(AbortNote {
                origin: self.rank,
                origin_host: self.host.clone(),
                culprit,
                text,
            });
        }
        self.poison(err_text.clone());
        self.linger();
        // A rank that answered a note blaming it reports its answer, not the error that answer caused.
        let own = match self.own_note() {
            Some(n) => n.text.clone(),
            None => err_text,
        };
        let msg = match self.verdict_message(&own) {
            Some(m) => m,
            None => own,
        };
        match err {
            // A local failure stays one (its exit status says so); its peers hear it as a peer failure.
            Error::Io { context, source } => Error::Io {
                context: format!("{context} (culprit: rank {} (host {}))", self.rank, self.host),
                source,
            },
            _ => Error::Peer(msg),
        }
    }

    /// Queues every note a peer has not been sent, except its own.
    fn queue_notes(&mut self) {
        let bodies: Vec<(usize, Vec<u8>)> = self
            .notes
            .iter()
            .map(|n| (n.origin, serde_json::to_vec(n).expect("a note serialises")))
            .collect();
        for p in self.peers.iter_mut().flatten() {
            let Some(s) = p.streams.iter_mut().find(|s| !s.closed) else {
                continue;
            };
            for (origin, body) in &bodies[p.notes_sent..] {
                if *origin != p.addr.rank {
                    s.out.get_or_insert_with(Default::default).push_frame(body);
                }
            }
            p.notes_sent = bodies.len();
        }
    }

    /// Sends and hears abort notes until every peer was told and has told (or is gone), or [`LINGER`] passed.
    fn linger(&mut self) {
        let end = Instant::now() + LINGER.min(self.cfg.timeout);
        loop {
            self.queue_notes();
            let mut drained = true;
            for p in self.peers.iter_mut().flatten() {
                for s in &mut p.streams {
                    drained &= s.push_out();
                    if !s.closed {
                        let _ = s.drive(&mut Requests::default());
                    }
                }
            }
            if self.collect_notes() {
                self.answer_blame();
                continue;
            }
            let settled = self
                .peers
                .iter()
                .flatten()
                .all(|p| p.heard || p.streams.iter().all(|s| s.closed));
            let now = Instant::now();
            if (drained && settled) || now >= end {
                return;
            }
            self.pollfds.clear();
            for p in self.peers.iter().flatten() {
                for s in &p.streams {
                    let mut events = 0;
                    if !s.closed {
                        events |= libc::POLLIN;
                    }
                    if s.out.as_ref().is_some_and(|o| !o.drained()) {
                        events |= libc::POLLOUT;
                    }
                    if events != 0 {
                        self.pollfds.push(libc::pollfd {
                            fd: s.sock.as_raw_fd(),
                            events,
                            revents: 0,
                        });
                    }
                }
            }
            let ms = (end - now).as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: pollfds is a valid array of pollfd of the given length.
            unsafe { libc::poll(self.pollfds.as_mut_ptr(), self.pollfds.len() as libc::nfds_t, ms) };
        }
    }

    fn check_usable(&self, peer: usize) -> Result<()> {
        if let Some(msg) = &self.poisoned {
            return Err(Error::Peer(format!("transport unusable after an earlier error: {msg}")));
        }
        match self.peers.get(peer) {
            Some(Some(_)) => Ok(()),
            Some(None) if peer != self.rank => Err(Error::Peer(format!(
                "{}: internal error: no connection to rank {peer}: the run connects only the rank pairs its \
                 algorithms and control exchanges need, and this pair is not one of them; please report it with the \
                 command line",
                self.me()
            ))),
            _ => Err(Error::Peer(format!(
                "{}: internal error: no connection to rank {peer} (world size {})",
                self.me(),
                self.peers.len()
            ))),
        }
    }

    /// Splits a message into (stream, offset, length) parts, identically on sender and receiver.
    fn plan_parts(&self, msg_index: u64, len: usize, nstreams: usize, mut f: impl FnMut(usize, usize, usize)) -> u32 {
        if nstreams > 1 && len >= self.cfg.stripe_min {
            let base = len / nstreams;
            let mut off = 0;
            for s in 0..nstreams {
                let l = if s == nstreams - 1 { len - off } else { base };
                f(s, off, l);
                off += l;
            }
            nstreams as u32
        } else {
            f((msg_index % nstreams as u64) as usize, 0, len);
            1
        }
    }

    /// Moves bytes on every stream with queued work; returns whether anything moved.
    fn progress(&mut self) -> Result<bool> {
        let mut moved = false;
        let mut failure = None;
        'peers: for p in self.peers.iter_mut().flatten() {
            for (si, s) in p.streams.iter_mut().enumerate() {
                match s.drive(&mut self.requests) {
                    Ok(true) => {
                        moved = true;
                        p.last_progress = Instant::now();
                    }
                    Ok(false) => {}
                    Err(e) => {
                        failure = Some((p.addr.rank, format!("{} on stream {si} with {}", e, p.addr)));
                        break 'peers;
                    }
                }
            }
        }
        if self.collect_notes() {
            self.answer_blame();
            return Err(self.poison_from_notes());
        }
        match failure {
            Some((peer, f)) => {
                self.suspect = Some(peer);
                Err(self.poison(format!("rank {} (host {}): {f}", self.rank, self.host)))
            }
            None => Ok(moved),
        }
    }

    /// Blocks in poll(2) until a stream with queued work is ready or the deadline passes.
    ///
    /// Idle streams are watched too, so an abort frame from any peer ends the wait at once.
    fn block(&mut self, deadline: Instant) -> Result<()> {
        self.pollfds.clear();
        self.pollmap.clear();
        for (pi, p) in self.peers.iter().enumerate() {
            let Some(p) = p else { continue };
            for (si, s) in p.streams.iter().enumerate() {
                let mut events = 0;
                if !s.sendq.is_empty() {
                    events |= libc::POLLOUT;
                }
                if !s.recvq.is_empty() || s.idle_watch() || (s.control.is_some() && !s.closed) {
                    events |= libc::POLLIN;
                }
                if events != 0 {
                    self.pollfds.push(libc::pollfd {
                        fd: s.sock.as_raw_fd(),
                        events,
                        revents: 0,
                    });
                    self.pollmap.push((pi, si));
                }
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(self.timeout_error());
        }
        let ms = (deadline - now).as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: pollfds is a valid array of pollfd of the given length.
        let rc = unsafe { libc::poll(self.pollfds.as_mut_ptr(), self.pollfds.len() as libc::nfds_t, ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(self.poison(format!("{}: poll failed: {e}", self.me())));
            }
        }
        if rc > 0 {
            for (fd, &(pi, si)) in self.pollfds.iter().zip(&self.pollmap) {
                if fd.revents == 0 {
                    continue;
                }
                if let Some(s) = self.peers[pi].as_mut().map(|p| &mut p.streams[si]) {
                    if s.idle_watch() && s.control.is_none() {
                        s.peek();
                    }
                }
            }
        }
        if rc == 0 && Instant::now() >= deadline {
            return Err(self.timeout_error());
        }
        Ok(())
    }

    fn timeout_error(&mut self) -> Error {
        // The peer with work pending that moved nothing for longest is the one this rank was waiting on.
        let stuck = self.waiting_on();
        // This host's own link being down explains every silent peer at once: then this rank is the culprit.
        let own_link = std::fs::read_to_string(format!("/sys/class/net/{}/operstate", self.iface));
        if own_link.is_ok_and(|s| s.trim() == "down") {
            let msg = format!(
                "{}: timed out after {:.1} s with {} pending: this host's interface {} is down, so no peer can be \
                 reached; bring the link up (ip link set {} up) or check its cable and switch port",
                self.me(),
                self.cfg.timeout.as_secs_f64(),
                self.pending_list(None).join(", "),
                self.iface,
                self.iface
            );
            return self.poison(msg);
        }
        if let Some(p) = stuck {
            let silent = p.last_progress.elapsed().as_secs_f64();
            let (rank, addr) = (p.addr.rank, p.addr.to_string());
            self.suspect = Some(rank);
            let others = self.pending_list(Some(rank));
            let msg = format!(
                "{}: {addr} is unresponsive: nothing moved to or from it for {silent:.1} s (timeout -T {:.1} s), \
                 with {} pending; it may be stopped, hung, overloaded or unreachable{}. If the network is merely \
                 slow, raise -T/--timeout",
                self.me(),
                self.cfg.timeout.as_secs_f64(),
                self.pending_list(None)
                    .into_iter()
                    .filter(|x| x.contains(&addr))
                    .collect::<Vec<_>>()
                    .join(", "),
                if others.is_empty() {
                    String::new()
                } else {
                    format!(" (also pending: {})", others.join(", "))
                }
            );
            return self.poison(msg);
        }
        let mut pending = Vec::new();
        for p in self.peers.iter().flatten() {
            let sends: usize = p.streams.iter().map(|s| s.sendq.len()).sum();
            let recvs: usize = p.streams.iter().map(|s| s.recvq.len()).sum();
            if recvs > 0 {
                pending.push(format!("{recvs} receive(s) from {}", p.addr));
            }
            if sends > 0 {
                pending.push(format!("{sends} send(s) to {}", p.addr));
            }
        }
        let msg = format!(
            "{}: timed out after {:.1} s with no completion; still pending: {}. The peer may have died, \
             stopped or be unreachable; if the network is just slow, raise -T/--timeout",
            self.me(),
            self.cfg.timeout.as_secs_f64(),
            if pending.is_empty() {
                "nothing".to_string()
            } else {
                pending.join(", ")
            }
        );
        self.poison(msg)
    }

    /// "N receive(s) from PEER" and "N send(s) to PEER" for each peer with work pending, but `skip`.
    fn pending_list(&self, skip: Option<usize>) -> Vec<String> {
        let mut pending = Vec::new();
        for p in self.peers.iter().flatten().filter(|p| Some(p.addr.rank) != skip) {
            let sends: usize = p.streams.iter().map(|s| s.sendq.len()).sum();
            let recvs: usize = p.streams.iter().map(|s| s.recvq.len()).sum();
            if recvs > 0 {
                pending.push(format!("{recvs} receive(s) from {}", p.addr));
            }
            if sends > 0 {
                pending.push(format!("{sends} send(s) to {}", p.addr));
            }
        }
        pending
    }

    unsafe fn post(&mut self, peer: usize, ptr: *mut u8, len: usize, is_send: bool) -> Result<Request> {
        self.check_usable(peer)?;
        // u32::MAX itself marks abort frames.
        if len >= u32::MAX as usize {
            return Err(Error::Peer(format!(
                "{}: message of {len} bytes exceeds the 4 GiB frame limit",
                self.me()
            )));
        }
        let p = self.peers[peer].as_ref().expect("checked");
        let nstreams = p.streams.len();
        let index = if is_send { p.sent_msgs } else { p.recv_msgs };
        let mut parts: [(usize, usize, usize); 16] = [(0, 0, 0); 16];
        let mut n = 0;
        let nparts = self.plan_parts(index, len, nstreams, |s, off, l| {
            parts[n] = (s, off, l);
            n += 1;
        });
        let req = self.requests.open(nparts);
        let p = self.peers[peer].as_mut().expect("checked");
        if is_send {
            p.sent_msgs += 1;
        } else {
            p.recv_msgs += 1;
        }
        for &(s, off, l) in &parts[..n] {
            let st = &mut p.streams[s];
            // SAFETY: off + l <= len, inside the caller's region.
            let op_ptr = unsafe { ptr.add(off) };
            if is_send {
                let op = Op::new(req.0, op_ptr, l, st.send_seq);
                st.send_seq = st.send_seq.wrapping_add(1);
                st.sendq.push_back(op);
            } else {
                let op = Op::new(req.0, op_ptr, l, st.recv_seq);
                st.recv_seq = st.recv_seq.wrapping_add(1);
                st.recvq.push_back(op);
            }
        }
        Ok(req)
    }
}

impl Transport for TcpTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.peers.len()
    }

    fn path(&self) -> String {
        self.path.clone()
    }

    unsafe fn post_send(&mut self, peer: usize, ptr: *const u8, len: usize) -> Result<Request> {
        // SAFETY: forwarded contract; sends only read through the pointer.
        let req = unsafe { self.post(peer, ptr as *mut u8, len, true)? };
        // Start writing at once: small messages then leave without waiting for the next wait().
        self.progress()?;
        Ok(req)
    }

    unsafe fn post_recv(&mut self, peer: usize, ptr: *mut u8, len: usize) -> Result<Request> {
        // SAFETY: forwarded contract.
        unsafe { self.post(peer, ptr, len, false) }
    }

    fn wait(&mut self, req: Request) -> Result<()> {
        let deadline = Instant::now() + self.cfg.timeout;
        let mut spin = Spin::new(self.cfg.spin);
        loop {
            if let Some(msg) = &self.poisoned {
                return Err(Error::Peer(format!("transport unusable after an earlier error: {msg}")));
            }
            if self.requests.finish(&req) {
                return Ok(());
            }
            if !self.progress()? && !self.requests.done(&req) && !spin.keep_spinning() {
                self.block(deadline)?;
            }
        }
    }

    fn wait_all(&mut self) -> Result<()> {
        let deadline = Instant::now() + self.cfg.timeout;
        let mut spin = Spin::new(self.cfg.spin);
        loop {
            if let Some(msg) = &self.poisoned {
                return Err(Error::Peer(format!("transport unusable after an earlier error: {msg}")));
            }
            let busy = self.peers.iter().flatten().any(|p| p.streams.iter().any(|s| s.busy()));
            if !busy {
                // Everything has completed: release every slot at once (stale handles see a new generation).
                self.requests.release_all();
                return Ok(());
            }
            if !self.progress()? && !spin.keep_spinning() {
                self.block(deadline)?;
            }
        }
    }

    fn pending(&self) -> usize {
        self.requests.pending()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::mpsc;

    type Links = Vec<Option<(PeerAddr, Vec<TcpStream>)>>;

    /// The connections of `n` ranks, every pair joined by one loopback connection (Send, unlike a transport).
    fn mesh(n: usize) -> Vec<Links> {
        let addr = |r: usize, a: SocketAddr| PeerAddr {
            rank: r,
            host: format!("h{r}"),
            addr: a,
        };
        let mut peers: Vec<Links> = (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
        let pairs = (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j)));
        for (i, j) in pairs {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let a = l.local_addr().unwrap();
            let c = TcpStream::connect(a).unwrap();
            let (s, _) = l.accept().unwrap();
            for x in [&c, &s] {
                x.set_nonblocking(true).unwrap();
            }
            peers[i][j] = Some((addr(j, c.local_addr().unwrap()), vec![s]));
            peers[j][i] = Some((addr(i, a), vec![c]));
        }
        peers
    }

    /// Rank `r`'s transport over `links`, timing out after `timeout`.
    fn transport(r: usize, links: Links, timeout: Duration) -> TcpTransport {
        let cfg = TcpConfig {
            streams: 1,
            stripe_min: 1 << 20,
            timeout,
            connect_timeout: Duration::from_secs(5),
            spin: Duration::ZERO,
            sndbuf: None,
            congestion: None,
        };
        TcpTransport::new(r, format!("h{r}"), "lo".into(), "tcp".into(), links, cfg)
    }

    /// Rank `r` posts a receive from `from` and waits for it; on failure it gives up as a run does.
    fn wait_on(r: usize, links: Links, timeout: Duration, from: usize) -> String {
        let mut t = transport(r, links, timeout);
        let mut buf = [0u8; 64];
        // SAFETY: buf outlives the request: the wait below ends it (the transport drops it on failure).
        let req = unsafe { t.post_recv(from, buf.as_mut_ptr(), buf.len()) }.unwrap();
        let err = t.wait(req).expect_err("nobody sends");
        t.abort(err.during("all_reduce of 64 B")).to_string()
    }

    #[test]
    fn a_rank_blamed_for_waiting_passes_the_blame_to_the_stopped_rank_it_waits_on() {
        // Rank 0 waits on rank 1, which waits on rank 2, which is stopped (never drives its transport). Rank
        // 0's timer fires long before rank 1's: rank 1 only learns from rank 0's note that it is blamed.
        let mut links = mesh(3);
        let stopped = links.pop().unwrap();
        let l1 = links.pop().unwrap();
        let l0 = links.pop().unwrap();
        let (tx, rx) = mpsc::channel();
        let tx1 = tx.clone();
        let h1 = std::thread::spawn(move || tx1.send((1, wait_on(1, l1, Duration::from_secs(60), 2))).unwrap());
        let h0 = std::thread::spawn(move || tx.send((0, wait_on(0, l0, Duration::from_millis(300), 1))).unwrap());
        let mut msgs = [String::new(), String::new()];
        for _ in 0..2 {
            let (r, m) = rx.recv_timeout(Duration::from_secs(30)).expect("both ranks give up");
            msgs[r] = m;
        }
        h0.join().unwrap();
        h1.join().unwrap();
        drop(stopped);
        for (r, m) in msgs.iter().enumerate() {
            assert!(m.ends_with("Culprit: rank 2 (host h2)"), "rank {r}: {m}");
            assert!(m.contains("during all_reduce of 64 B"), "rank {r}: {m}");
        }
        assert!(
            msgs[0].contains("rank 1 (host h1") && msgs[0].contains("is unresponsive"),
            "{}",
            msgs[0]
        );
        assert!(msgs[1].contains("was itself waiting on rank 2 (host h2"), "{}", msgs[1]);
    }

    #[test]
    fn a_rank_blamed_while_the_rank_it_waits_on_gave_up_too_follows_that_ranks_note() {
        // Rank 0 waits on rank 1, rank 1 on rank 2, rank 2 on rank 3 (stopped). Ranks 0 and 2 give up before
        // rank 1 looks: their notes (0 blames 1, 2 blames 3) reach rank 1 together. Ranks 0 and 2 are not
        // connected, so neither stops on the other's note instead of giving up on its own.
        let mut links = mesh(4);
        links[0][2] = None;
        links[2][0] = None;
        let stopped = links.pop().unwrap();
        let l2 = links.pop().unwrap();
        let l1 = links.pop().unwrap();
        let l0 = links.pop().unwrap();
        let short = Duration::from_millis(200);
        let (ready_tx, ready_rx) = mpsc::channel();
        let h1 = std::thread::spawn(move || {
            let mut t = transport(1, l1, Duration::from_secs(60));
            let mut buf = [0u8; 64];
            // SAFETY: buf outlives the request, which the wait below ends.
            let req = unsafe { t.post_recv(2, buf.as_mut_ptr(), buf.len()) }.unwrap();
            ready_rx.recv().unwrap();
            let err = t.wait(req).expect_err("nobody sends");
            t.abort(err).to_string()
        });
        let h0 = std::thread::spawn(move || wait_on(0, l0, short, 1));
        let h2 = std::thread::spawn(move || wait_on(2, l2, short, 3));
        h0.join().unwrap();
        h2.join().unwrap();
        ready_tx.send(()).unwrap();
        let m = h1.join().unwrap();
        drop(stopped);
        assert!(m.ends_with("Culprit: rank 3 (host h3)"), "{m}");
        assert!(m.contains("was itself waiting on rank 2 (host h2"), "{m}");
    }

    #[test]
    fn a_rank_blamed_after_it_stopped_on_another_note_answers_with_whom_it_was_waiting_on() {
        // Rank 1 waits on rank 2, which waits on rank 3 (stopped). Rank 2 gives up and rank 1 stops on its
        // note (not blamed, so no answer yet); only then does rank 0, waiting on rank 1, blame rank 1.
        let mut links = mesh(4);
        let stopped = links.pop().unwrap();
        let l2 = links.pop().unwrap();
        let mut t1 = transport(1, links.pop().unwrap(), Duration::from_secs(60));
        let mut t0 = transport(0, links.pop().unwrap(), Duration::from_secs(60));
        let h2 = std::thread::spawn(move || wait_on(2, l2, Duration::from_millis(200), 3));
        let mut buf = [0u8; 64];
        // SAFETY: buf outlives the request, which the wait below ends.
        let req = unsafe { t1.post_recv(2, buf.as_mut_ptr(), buf.len()) }.unwrap();
        let err1 = t1.wait(req).expect_err("rank 2's note stops rank 1");
        assert!(err1.to_string().contains("Culprit: rank 3 (host h3)"), "{err1}");
        t0.suspect = Some(1);
        let _ = t0.abort(Error::Peer("rank 0 (host h0): rank 1 (host h1) is unresponsive".into()));
        let m = t1.abort(err1.during("all_reduce of 64 B")).to_string();
        h2.join().unwrap();
        drop(stopped);
        assert!(m.ends_with("Culprit: rank 3 (host h3)"), "{m}");
        assert!(
            t1.own_note()
                .is_some_and(|n| n.text.contains("was itself waiting on rank 2 (host h2")),
            "rank 1 answered rank 0: {:?}",
            t1.notes
        );
    }

    #[test]
    fn an_answer_given_after_relaying_a_note_still_reaches_the_blaming_rank() {
        // Rank 1 waits on rank 2, which waits on rank 3 (stopped). Rank 1 stops on rank 2's note and relays it
        // to rank 0; only then does rank 0 blame rank 1. Rank 1's answer comes after a note it already sent
        // rank 0, and must still be sent, or rank 0 would name rank 1.
        let mut links = mesh(4);
        let stopped = links.pop().unwrap();
        let l2 = links.pop().unwrap();
        let l1 = links.pop().unwrap();
        let mut t0 = transport(0, links.pop().unwrap(), Duration::from_secs(60));
        let h2 = std::thread::spawn(move || wait_on(2, l2, Duration::from_millis(200), 3));
        let h1 = std::thread::spawn(move || wait_on(1, l1, Duration::from_secs(60), 2));
        let mut buf = [0u8; 64];
        // SAFETY: buf outlives the request, which the wait below ends.
        let req = unsafe { t0.post_recv(1, buf.as_mut_ptr(), buf.len()) }.unwrap();
        let err0 = t0.wait(req).expect_err("rank 1 relays rank 2's note");
        t0.suspect = Some(1);
        let m0 = t0.abort(err0.during("all_reduce of 64 B")).to_string();
        let m1 = h1.join().unwrap();
        h2.join().unwrap();
        drop(stopped);
        assert!(m1.ends_with("Culprit: rank 3 (host h3)"), "{m1}");
        assert!(m0.ends_with("Culprit: rank 3 (host h3)"), "{m0}");
    }

    #[test]
    fn a_rank_blamed_while_waiting_on_nobody_stays_the_culprit() {
        // Rank 1 waits on rank 0, which is stopped: it is blamed, and sends no note passing the blame on.
        let mut links = mesh(2);
        let l1 = links.pop().unwrap();
        let stopped = links.pop().unwrap();
        let m = wait_on(1, l1, Duration::from_millis(300), 0);
        drop(stopped);
        assert!(m.ends_with("Culprit: rank 0 (host h0)"), "{m}");
    }
}
