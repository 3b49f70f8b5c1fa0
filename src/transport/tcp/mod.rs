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
//! This file is the transport itself: posting, progress and waiting. What a rank does once it gives up
//! (abort frames and naming one culprit) is in `blame` ([`TcpTransport::abort`]); why a wait timed out
//! (whom it waited on, with what pending) is in `diagnose`. Connection set-up is in [`connect`],
//! one stream's I/O in `progress`.

mod blame;
pub mod congestion;
pub mod connect;
mod diagnose;
pub mod drops;
pub mod gate;
pub mod handshake;
mod isolation;
pub mod options;
mod progress;
mod spin;
mod standstill;
mod stuck;

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

pub use blame::AbortNote;
pub use connect::{connect_all, TcpListenerBound};
use progress::{Op, Stream};

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
    /// How long a wait polls the sockets (yielding the CPU between polls) before it sleeps in poll(2), at most
    /// (the transport's spin budget shortens it while waits sleep anyway).
    pub spin: Duration,
    /// SO_SNDBUF of every data socket; `None` keeps the kernel's autotuning.
    pub sndbuf: Option<usize>,
    /// TCP congestion control of every data socket; `None` keeps the host's default.
    pub congestion: Option<String>,
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
    /// Abort bodies read from this peer (bounded: see `blame`).
    bodies_heard: usize,
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
    /// The peer another path found at fault, with its host ([`TcpTransport::blame_peer`]).
    blamed_elsewhere: Option<(usize, String)>,
    /// Abort notes: this rank's own (once it gave up on its own) and every one heard, one per origin.
    notes: Vec<AbortNote>,
    /// Relays of notes from neighbours, held aside: a neighbour speaks for itself, unless this rank gave up
    /// waiting on it (a cut link carries its words no more), and then its relayed note counts. One per origin.
    unheard: Vec<AbortNote>,
    /// The wire form of each of `notes` as this rank sends it, made once (`notes` only grows at the end).
    note_wire: Vec<Vec<u8>>,
    /// Abort bodies refused: unreadable, or a claim the connection they came on does not back.
    notes_refused: usize,
    /// Whom this rank was waiting on when it was poisoned, to answer a note blaming it afterwards.
    answer: Option<AbortNote>,
    /// The phase this rank gave up in (`all_reduce of 4 MiB`), once it did.
    phase: Option<String>,
    /// How long a rank that gave up keeps sending and hearing notes, at most: [`blame::LINGER`] once set up.
    linger: Duration,
    /// The setting whose deadline the waits run to, as a time-out names it, and the flag that raises it: `-T`,
    /// except while set-up settles (`--connect-timeout`).
    deadline_setting: Option<(String, &'static str)>,
    pollfds: Vec<libc::pollfd>,
    /// (peer, stream) of each entry of `pollfds`.
    pollmap: Vec<(usize, usize)>,
    /// This rank's own pauses, to tell a rank that stood still from a broken link once it resumes.
    standstill: standstill::Standstill,
    /// How long the next wait polls before it sleeps (`--spin`, adapted to what the waits meet).
    spin: spin::SpinBudget,
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
                    bodies_heard: 0,
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
            spin: spin::SpinBudget::new(cfg.spin),
            poisoned: None,
            suspect: None,
            blamed_elsewhere: None,
            notes: Vec::new(),
            unheard: Vec::new(),
            note_wire: Vec::new(),
            notes_refused: 0,
            answer: None,
            phase: None,
            linger: blame::LINGER,
            deadline_setting: None,
            pollfds: Vec::new(),
            pollmap: Vec::new(),
            standstill: standstill::Standstill::new(),
            cfg,
        }
    }

    /// The congestion control of this rank's first data socket, as the kernel reports it; `None` without
    /// peers or where it cannot be read.
    pub fn congestion(&self) -> Option<String> {
        let s = self.peers.iter().flatten().flat_map(|p| p.streams.first()).next()?;
        congestion::get(&s.sock).ok()
    }

    /// The largest receive and send buffers of this rank's data sockets (SO_RCVBUF, SO_SNDBUF) as the kernel
    /// reports them now: what autotuning grew them to within the host's limits; `None` without peers.
    pub fn socket_buffers(&self) -> Option<(u64, u64)> {
        let mut got: Option<(u64, u64)> = None;
        for s in self.peers.iter().flatten().flat_map(|p| p.streams.iter()) {
            let r = socket2::SockRef::from(&s.sock);
            if let (Ok(rx), Ok(tx)) = (r.recv_buffer_size(), r.send_buffer_size()) {
                let (a, b) = got.unwrap_or((0, 0));
                got = Some((a.max(rx as u64), b.max(tx as u64)));
            }
        }
        got
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
        Error::peer(msg)
    }

    fn check_usable(&self, peer: usize) -> Result<()> {
        if let Some(msg) = &self.poisoned {
            return Err(Error::peer(format!("transport unusable after an earlier error: {msg}")));
        }
        match self.peers.get(peer) {
            Some(Some(_)) => Ok(()),
            Some(None) if peer != self.rank => Err(Error::peer(format!(
                "{}: internal error: no connection to rank {peer}: the run connects only the rank pairs its \
                 algorithms and control exchanges need, and this pair is not one of them; please report it with the \
                 command line",
                self.me()
            ))),
            _ => Err(Error::peer(format!(
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
        // A stop that landed while bytes were being copied shows here, before any note is answered: the
        // next poll or call may come only after this rank has already answered its peers' blame.
        self.standstill.resumed(Duration::ZERO);
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
        // In slices, so a stop inside a poll shows (the caller loops back until its deadline).
        let timeout = standstill::poll_timeout(deadline, now);
        let ms = timeout.as_millis() as i32;
        self.standstill.alive();
        // SAFETY: pollfds is a valid array of pollfd of the given length.
        let rc = unsafe { libc::poll(self.pollfds.as_mut_ptr(), self.pollfds.len() as libc::nfds_t, ms) };
        // A poll that returns long after its timeout: this process was stopped or starved meanwhile.
        self.standstill.resumed(timeout);
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

    unsafe fn post(&mut self, peer: usize, ptr: *mut u8, len: usize, is_send: bool) -> Result<Request> {
        self.standstill.resumed(Duration::ZERO);
        self.check_usable(peer)?;
        // u32::MAX itself marks abort frames.
        if len >= u32::MAX as usize {
            return Err(Error::peer(format!(
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
        self.standstill.alive();
        Ok(req)
    }

    unsafe fn post_recv(&mut self, peer: usize, ptr: *mut u8, len: usize) -> Result<Request> {
        // SAFETY: forwarded contract.
        let req = unsafe { self.post(peer, ptr, len, false) };
        self.standstill.alive();
        req
    }

    fn wait(&mut self, req: Request) -> Result<()> {
        self.standstill.resumed(Duration::ZERO);
        let deadline = Instant::now() + self.cfg.timeout;
        let mut spin = spin::Spin::new(self.spin.current());
        loop {
            if let Some(msg) = &self.poisoned {
                return Err(Error::peer(format!("transport unusable after an earlier error: {msg}")));
            }
            if self.requests.finish(&req) {
                self.standstill.alive();
                self.spin.record(spin.ended());
                return Ok(());
            }
            if !self.progress()? && !self.requests.done(&req) && !spin.keep_spinning() {
                self.block(deadline)?;
            }
        }
    }

    fn wait_all(&mut self) -> Result<()> {
        self.standstill.resumed(Duration::ZERO);
        let deadline = Instant::now() + self.cfg.timeout;
        let mut spin = spin::Spin::new(self.spin.current());
        loop {
            if let Some(msg) = &self.poisoned {
                return Err(Error::peer(format!("transport unusable after an earlier error: {msg}")));
            }
            let busy = self.peers.iter().flatten().any(|p| p.streams.iter().any(|s| s.busy()));
            if !busy {
                // Everything has completed: release every slot at once (stale handles see a new generation).
                self.requests.release_all();
                self.standstill.alive();
                self.spin.record(spin.ended());
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
