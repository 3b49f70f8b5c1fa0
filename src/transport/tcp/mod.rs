//! collbench's own TCP transport: one or more streams per peer, a progress engine over non-blocking
//! sockets driven from `wait` (no threads, no async runtime, no allocation per message), receives straight
//! into place.
//!
//! Wire format per stream: every message part is an 8-byte header (part length, sequence number, both
//! little-endian u32) followed by the payload. The receiver knows what it expects (the transport contract
//! fixes order and length), so the header only guards against ranks that disagree on the schedule.
//! A message of at least [`TcpConfig::stripe_min`] bytes is split across all streams of the peer; smaller
//! ones go round-robin, one stream each.

pub mod connect;
pub mod gate;
pub mod handshake;
mod progress;

use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

pub use connect::{connect_all, TcpListenerBound};
use progress::{Op, Stream};

use crate::error::{Error, Result};
use crate::transport::{Request, Transport};

/// Tuning of the TCP transport.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// Connections per peer.
    pub streams: usize,
    /// Messages at least this long are striped across all streams.
    pub stripe_min: usize,
    /// Deadline of any single wait, and of connection set-up.
    pub timeout: Duration,
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
    /// Per request slot: parts still in flight and a generation that invalidates stale handles.
    slots: Vec<(u32, u32)>,
    free: Vec<usize>,
    cfg: TcpConfig,
    poisoned: Option<String>,
    pollfds: Vec<libc::pollfd>,
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
            slots: Vec::new(),
            free: Vec::new(),
            cfg,
            poisoned: None,
            pollfds: Vec::new(),
        }
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
        for p in self.peers.iter_mut().flatten() {
            for s in &mut p.streams {
                s.sendq.clear();
                s.recvq.clear();
            }
        }
        self.poisoned = Some(msg.clone());
        Error::Peer(msg)
    }

    fn check_usable(&self, peer: usize) -> Result<()> {
        if let Some(msg) = &self.poisoned {
            return Err(Error::Peer(format!("transport unusable after an earlier error: {msg}")));
        }
        match self.peers.get(peer) {
            Some(Some(_)) => Ok(()),
            _ => Err(Error::Peer(format!(
                "{}: internal error: no connection to rank {peer} (world size {})",
                self.me(),
                self.peers.len()
            ))),
        }
    }

    fn alloc_slot(&mut self, parts: u32) -> Request {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push((0, 0));
                self.slots.len() - 1
            }
        };
        self.slots[slot].0 = parts;
        Request(slot, self.slots[slot].1)
    }

    fn release(&mut self, slot: usize) {
        self.slots[slot].1 = self.slots[slot].1.wrapping_add(1);
        self.free.push(slot);
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
                match s.drive(&mut self.slots) {
                    Ok(m) => moved |= m,
                    Err(e) => {
                        failure = Some(format!("{} on stream {si} with {}", e, p.addr));
                        break 'peers;
                    }
                }
            }
        }
        match failure {
            Some(f) => Err(self.poison(format!("rank {} (host {}): {f}", self.rank, self.host))),
            None => Ok(moved),
        }
    }

    /// Blocks in poll(2) until a stream with queued work is ready or the deadline passes.
    fn block(&mut self, deadline: Instant) -> Result<()> {
        self.pollfds.clear();
        for p in self.peers.iter().flatten() {
            for s in &p.streams {
                let mut events = 0;
                if !s.sendq.is_empty() {
                    events |= libc::POLLOUT;
                }
                if !s.recvq.is_empty() {
                    events |= libc::POLLIN;
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
        if rc == 0 && Instant::now() >= deadline {
            return Err(self.timeout_error());
        }
        Ok(())
    }

    fn timeout_error(&mut self) -> Error {
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

    unsafe fn post(&mut self, peer: usize, ptr: *mut u8, len: usize, is_send: bool) -> Result<Request> {
        self.check_usable(peer)?;
        if len > u32::MAX as usize {
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
        let req = self.alloc_slot(nparts);
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
        let Request(slot, gen) = req;
        let deadline = Instant::now() + self.cfg.timeout;
        loop {
            if let Some(msg) = &self.poisoned {
                return Err(Error::Peer(format!("transport unusable after an earlier error: {msg}")));
            }
            if self.slots[slot].1 != gen {
                return Ok(()); // completed and released by wait_all
            }
            if self.slots[slot].0 == 0 {
                self.release(slot);
                return Ok(());
            }
            if !self.progress()? && self.slots[slot].0 != 0 {
                self.block(deadline)?;
            }
        }
    }

    fn wait_all(&mut self) -> Result<()> {
        let deadline = Instant::now() + self.cfg.timeout;
        loop {
            if let Some(msg) = &self.poisoned {
                return Err(Error::Peer(format!("transport unusable after an earlier error: {msg}")));
            }
            let busy = self.peers.iter().flatten().any(|p| p.streams.iter().any(|s| s.busy()));
            if !busy {
                // Everything has completed: release every slot at once (stale handles see a new generation).
                for s in &mut self.slots {
                    s.1 = s.1.wrapping_add(1);
                }
                self.free.clear();
                self.free.extend(0..self.slots.len());
                return Ok(());
            }
            if !self.progress()? {
                self.block(deadline)?;
            }
        }
    }

    fn pending(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}
