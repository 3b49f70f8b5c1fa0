//! Connection set-up: every rank listens on its interface's address, the bootstrap publishes the
//! addresses, then for each pair the run needs ([`Links`]: what the algorithms and control exchanges talk
//! over, not every pair) the higher rank connects `streams` times and says [`Hello`]; the lower rank
//! challenges it, both prove they hold the job's token (see [`super::handshake`]), and the lower rank acks.
//! Strangers (wrong magic, version or proof) and ranks that are not this rank's peers are logged and dropped,
//! and set-up goes on.
//!
//! The higher rank answers its lower peers' challenges before it accepts its own higher peers: a rank's lower
//! peers never wait on it, so the chain of waits ends at rank 0, which accepts at once.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use super::drops::Drops;
use super::gate::{Event, Gate};
use super::handshake::{
    answer_challenge, decode_ack, encode_ack, Hello, ACK_LEN, CHALLENGE_LEN, FRAME_HEADER_LEN, REFUSAL,
};
use super::progress::ABORT_MARK;
use super::{PeerAddr, TcpConfig, TcpTransport};
use crate::error::{stderr, Error, Result};
use crate::transport::auth::Token;
use crate::transport::{Links, Transport};

/// How long an accepted connection may take to say hello before it is dropped.
const HELLO_DEADLINE: Duration = Duration::from_secs(5);

/// A bound data listener, created before the bootstrap so its address can be published.
pub struct TcpListenerBound {
    listener: TcpListener,
    /// The address peers connect to.
    pub addr: SocketAddr,
    /// The interface the address belongs to.
    pub iface: String,
    /// The path's name (`tcp@SPEC`); `tcp@IFACE` when not given.
    pub label: Option<String>,
}

impl TcpListenerBound {
    /// Listens on `ip` (an address of `iface`), on a port the kernel picks.
    pub fn bind(ip: IpAddr, iface: &str) -> Result<Self> {
        let ctx = |what: &str| format!("{what} data listener on {ip} ({iface})");
        let sock = Socket::new(
            Domain::for_address(SocketAddr::new(ip, 0)),
            Type::STREAM,
            Some(Protocol::TCP),
        )
        .map_err(|e| Error::io(ctx("creating"), e))?;
        sock.set_reuse_address(true)
            .map_err(|e| Error::io(ctx("configuring"), e))?;
        sock.bind(&SocketAddr::new(ip, 0).into())
            .map_err(|e| Error::io(ctx("binding"), e))?;
        // Deep backlog: every higher rank connects all its streams at once.
        sock.listen(4096).map_err(|e| Error::io(ctx("listening on"), e))?;
        let listener: TcpListener = sock.into();
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io(ctx("reading the address of"), e))?;
        Ok(TcpListenerBound {
            listener,
            addr,
            iface: iface.to_string(),
            label: None,
        })
    }

    /// Names the path `label` (the same on every host) rather than after this host's interface.
    pub fn labelled(self, label: String) -> Self {
        TcpListenerBound {
            label: Some(label),
            ..self
        }
    }
}

/// Opens and authenticates the connections of this rank's pairs in `links` and returns the ready transport;
/// a send to a rank outside them is an error naming both ranks.
///
/// `peers[r]` is rank r's published address (including this rank's own); every rank passes the same `links`.
pub fn connect_all(
    bound: TcpListenerBound,
    rank: usize,
    host: &str,
    peers: &[PeerAddr],
    links: &Links,
    token: Token,
    cfg: TcpConfig,
) -> Result<TcpTransport> {
    let n = peers.len();
    let ns = cfg.streams;
    let deadline = Instant::now() + cfg.connect_timeout;
    let me = format!("rank {rank} (host {host})");
    if links.size() != n {
        return Err(Error::peer(format!(
            "{me}: internal error: a connection plan for {} ranks in a job of {n}",
            links.size()
        )));
    }
    let mine = links.peers(rank);
    ensure_fd_room(mine.len() * ns, &me, mine.len(), ns)?;

    // 1. Open every lower peer's streams (connected, proved and acked), on a few threads at once, while this thread accepts the higher
    //    peers': a peer that cannot be reached (each attempt then waits for the deadline) holds up neither
    //    the other connections nor the peers waiting on this rank's challenges.
    let hello = |p: &PeerAddr, s: usize| Hello {
        from: rank as u32,
        to: p.rank as u32,
        stream: s as u16,
        nstreams: ns as u16,
        nonce: crate::transport::auth::nonce(),
    };
    let jobs: Vec<(usize, usize)> = mine
        .iter()
        .filter(|&&p| p < rank)
        .flat_map(|&p| (0..ns).map(move |s| (p, s)))
        .collect();
    let give_up = AtomicBool::new(false);
    let said = AtomicBool::new(false);
    let next = AtomicUsize::new(0);
    let (incoming, outgoing) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs.len().min(CONNECTORS))
            .map(|_| {
                scope.spawn(|| {
                    let mut got = Vec::new();
                    while let Some(&(p, s)) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let peer = &peers[p];
                        let r = open_acked(peer, &|| hello(peer, s), &token, deadline, &me, &give_up, &said);
                        // Stopped because the accepting side failed: that failure is the one to report.
                        if r.is_ok() || !give_up.load(Ordering::Relaxed) {
                            got.push((p, s, r));
                        }
                    }
                    got
                })
            })
            .collect();
        // 2. Accept every higher peer's streams.
        let incoming = accept_higher(
            &bound,
            rank,
            peers,
            links,
            &token,
            ns,
            deadline,
            &me,
            cfg.connect_timeout,
        );
        if incoming.failure.is_some() {
            give_up.store(true, Ordering::Relaxed);
        }
        let outgoing: Vec<_> = workers.into_iter().flat_map(|w| w.join().unwrap_or_default()).collect();
        (incoming, outgoing)
    });
    let Incoming {
        mut socks,
        failure: accept_failure,
    } = incoming;
    let mut proved = Vec::with_capacity(outgoing.len());
    let mut unreached = None;
    for (p, s, r) in outgoing {
        match r {
            Ok(sock) => proved.push((p, s, sock)),
            // The lowest peer this rank could not reach: direct evidence, reported before what the accepting
            // side saw (a higher peer that gave up on it too).
            Err(e) if unreached.as_ref().map_or(true, |(_, q)| p < *q) => unreached = Some((e, p)),
            Err(_) => {}
        }
    }
    let failure = unreached.map(|(e, p)| (e, Some(p))).or(accept_failure);

    for (peer, s, sock) in proved {
        socks[peer][s] = Some(sock);
    }
    let path = bound.label.unwrap_or_else(|| format!("tcp@{}", bound.iface));

    if let Some((err, blame)) = failure {
        // Give up through the connections that came up: the ranks at their other ends hear this rank's note
        // (and relay it), so every rank names one culprit (a link, where two ranks cannot reach each other)
        // rather than each its own view.
        let conns = socks
            .into_iter()
            .enumerate()
            .map(|(r, streams)| {
                let v: Vec<TcpStream> = streams.into_iter().flatten().collect();
                (!v.is_empty()).then(|| (peers[r].clone(), v))
            })
            .collect();
        let mut t = TcpTransport::new(rank, host.to_string(), bound.iface, path, conns, cfg);
        t.linger = SETTLE_AFTER;
        if let Some(b) = blame {
            t.blame_peer(b, peers[b].host.clone());
        }
        return Err(t.abort(err));
    }

    let mut conns = Vec::with_capacity(n);
    for (r, streams) in socks.into_iter().enumerate() {
        if r == rank || !links.connected(rank, r) {
            conns.push(None);
            continue;
        }
        let mut v = Vec::with_capacity(ns);
        for sock in streams {
            let sock = sock.expect("every stream is connected by now");
            configure_data_socket(&sock, cfg.sndbuf, cfg.congestion.as_deref()).map_err(|e| {
                Error::io(
                    format!(
                        "{me}: configuring the data socket to {} (--sndbuf, --tcp-congestion)",
                        peers[r]
                    ),
                    e,
                )
            })?;
            v.push(sock);
        }
        conns.push(Some((peers[r].clone(), v)));
    }
    // 3. Hear from every peer once before leaving set-up, waiting past the connect deadline rather than for
    //    the first operation's -T: a peer still setting up may yet fail, and its note must reach this rank.
    TcpTransport::new(rank, host.to_string(), bound.iface, path, conns, cfg).settle(deadline + SETTLE_AFTER)
}

impl TcpTransport {
    /// Exchanges one byte with every connected peer by `deadline`; on failure (a peer's abort note, a time-out)
    /// gives up through the transport, so the note this rank sends and those it hears name one culprit.
    fn settle(mut self, deadline: Instant) -> Result<Self> {
        let peers: Vec<usize> = (0..self.peers.len()).filter(|&r| self.peers[r].is_some()).collect();
        let out = [1u8];
        // Outlives every operation posted on it, the abort's included: dropped after `self` is done with.
        let mut inb = vec![0u8; peers.len()];
        let timeout = self.cfg.timeout;
        // The wait's time-out message states how long it waited, and that the deadline was set-up's.
        self.cfg.timeout = deadline.saturating_duration_since(Instant::now());
        self.deadline_setting = Some((
            format!(
                "--connect-timeout {:.1} s, and {:.1} s for the peers to settle",
                self.cfg.connect_timeout.as_secs_f64(),
                SETTLE_AFTER.as_secs_f64()
            ),
            "--connect-timeout",
        ));
        let r = self.exchange_once(&peers, &out, &mut inb);
        self.cfg.timeout = timeout;
        self.deadline_setting = None;
        match r {
            Ok(()) => Ok(self),
            Err(e) => {
                self.linger = SETTLE_AFTER;
                Err(self.abort(e))
            }
        }
    }

    fn exchange_once(&mut self, peers: &[usize], out: &[u8; 1], inb: &mut [u8]) -> Result<()> {
        for (&r, slot) in peers.iter().zip(inb.iter_mut()) {
            // SAFETY: `out` and `inb` outlive the operations (see settle); a send only reads through its pointer.
            // Their requests are not kept: wait_all waits until no stream is busy.
            unsafe {
                let _ = self.post(r, out.as_ptr() as *mut u8, 1, true)?;
                let _ = self.post(r, slot, 1, false)?;
            }
        }
        // settle set the time-out so that this wait ends at its deadline.
        self.wait_all()
    }
}

/// Threads opening a rank's outgoing connections at once: a peer that cannot be reached holds one of them until
/// the connect deadline, the others go on.
const CONNECTORS: usize = 16;

/// How long past its connect deadline a rank whose set-up is complete waits to hear from a peer still setting
/// up: enough for that peer to give up at its own deadline (set a little later, or earlier) and be heard. Also
/// how long a rank that gives up during set-up keeps relaying notes: the two ends of a broken link may give up
/// seconds apart, and each hears the other only through the ranks between them.
const SETTLE_AFTER: Duration = Duration::from_secs(5);

/// What accepting the higher peers' streams ended with: the streams (indexed by rank, then stream), and
/// the failure, if any, with the peer it is about.
struct Incoming {
    socks: Vec<Vec<Option<TcpStream>>>,
    failure: Option<(Error, Option<usize>)>,
}

/// Accepts every higher peer's streams until all came or `deadline`. Hellos are read through a gate, without
/// blocking, so a stranger that connects and stays silent cannot delay the ranks queued behind it.
#[allow(clippy::too_many_arguments)]
fn accept_higher(
    bound: &TcpListenerBound,
    rank: usize,
    peers: &[PeerAddr],
    links: &Links,
    token: &Token,
    ns: usize,
    deadline: Instant,
    me: &str,
    connect_timeout: Duration,
) -> Incoming {
    let n = peers.len();
    let mine = links.peers(rank);
    let mut socks: Vec<Vec<Option<TcpStream>>> = (0..n).map(|_| (0..ns).map(|_| None).collect()).collect();
    let expected = mine.iter().filter(|&&p| p > rank).count() * ns;
    let mut accepted = 0;
    let fail = |socks, e, blame| Incoming {
        socks,
        failure: Some((e, blame)),
    };
    if let Err(e) = bound.listener.set_nonblocking(true) {
        return fail(
            socks,
            Error::io(format!("{me}: configuring the data listener"), e),
            None,
        );
    }
    let mut gate = Gate::new(|n: &_, b: &[u8]| Hello::admit(n, b, token), HELLO_DEADLINE);
    let mut drops = Drops::new(me.to_string());
    while accepted < expected {
        let (res, mut events) = gate.accept_all(&bound.listener);
        if let Err(e) = res {
            return fail(socks, Error::io(format!("{me}: accepting on {}", bound.addr), e), None);
        }
        events.extend(gate.drive());
        for ev in events {
            let (mut sock, from_addr, h) = match ev {
                Event::Admitted(sock, from, h) => (sock, from, h),
                Event::Rejected(from, why) => {
                    drops.note(from, &why);
                    continue;
                }
            };
            let fits = (h.from as usize) > rank
                && (h.from as usize) < n
                && links.connected(rank, h.from as usize)
                && h.to as usize == rank
                && (h.stream as usize) < ns
                && h.nstreams as usize == ns
                && socks[h.from as usize][h.stream as usize].is_none();
            if !fits {
                drops.note(
                    from_addr,
                    &format!(
                        "unexpected hello (from rank {}, to rank {}, stream {} of {}; this job has {n} ranks, {ns} \
                         streams per peer, and pairs this rank with ranks {mine:?})",
                        h.from, h.to, h.stream, h.nstreams
                    ),
                );
                continue;
            }
            let from = h.from as usize;
            if let Err(e) = sock.write_all(&encode_ack()) {
                let e = Error::peer(format!("{me}: acking {} failed: {e}", peers[from]));
                return fail(socks, e, Some(from));
            }
            socks[from][h.stream as usize] = Some(sock);
            accepted += 1;
        }
        if accepted == expected {
            break;
        }
        let missing = |socks: &[Vec<Option<TcpStream>>]| -> Vec<usize> {
            mine.iter()
                .copied()
                .filter(|&r| r > rank && socks[r].iter().any(Option::is_none))
                .collect()
        };
        let named = |rs: &[usize]| rs.iter().map(|&r| peers[r].to_string()).collect::<Vec<_>>().join(", ");
        // A peer that hangs up before set-up is over gave up, most likely because a rank it connects to failed:
        // waiting for the missing ones until the deadline would only delay the same failure.
        if let Some(gone) = (0..n).find(|&r| socks[r].iter().flatten().any(gave_up)) {
            let e = Error::peer(format!(
                "{me}: {} closed its data connection during set-up, so it gave up (see its own error); still \
                 missing connections from {}, the first of which most likely failed",
                peers[gone],
                named(&missing(&socks))
            ));
            return fail(socks, e, Some(gone));
        }
        if Instant::now() >= deadline {
            drops.finish();
            let missing = missing(&socks);
            let e = Error::peer(format!(
                "{me}: timed out after {:.1} s waiting for connections from {}; are those ranks running \
                 and able to reach {}? Raise --connect-timeout if they start slowly",
                connect_timeout.as_secs_f64(),
                named(&missing),
                bound.addr
            ));
            let first = missing.first().copied();
            return fail(socks, e, first);
        }
        let admitted: Vec<RawFd> = socks.iter().flatten().flatten().map(|s| s.as_raw_fd()).collect();
        gate.wait(&bound.listener, &admitted, deadline);
    }
    for (from, why) in gate.close() {
        drops.note(from, &why);
    }
    drops.finish();
    Incoming { socks, failure: None }
}

/// Opens one connection to `p` and goes through the proofs, blocking until `deadline` or until `give_up` is
/// set (checked at least every [`ATTEMPT`]).
fn open_proved(
    p: &PeerAddr,
    h: &Hello,
    token: &Token,
    deadline: Instant,
    me: &str,
    give_up: &AtomicBool,
) -> Result<TcpStream> {
    loop {
        let mut sock = connect_retry(p, deadline, me, give_up)?;
        let mut ch = [0u8; CHALLENGE_LEN];
        let got = sock
            .write_all(&h.encode())
            .and_then(|()| read_until(&mut sock, &mut ch, deadline, give_up));
        match got {
            Ok(()) => {}
            Err(e) if closed_early(&e) && Instant::now() < deadline => continue,
            Err(e) => return Err(Error::peer(format!("{me}: no answer to hello from {p}: {e}"))),
        }
        return match answer_challenge(token, h, &ch) {
            Ok(proof) => {
                sock.write_all(&proof)
                    .map_err(|e| Error::peer(format!("{me}: proving the job token to {p} failed: {e}")))?;
                Ok(sock)
            }
            Err(why) => {
                let _ = sock.write_all(&REFUSAL);
                Err(Error::peer(format!("{me}: {p}: {why}")))
            }
        };
    }
}

/// The longest one blocking step of opening a connection (a connect attempt, a read) waits before `give_up`
/// is looked at again.
const ATTEMPT: Duration = Duration::from_millis(500);

/// Fills `buf` from `sock` by `deadline`, in steps of at most [`ATTEMPT`], stopping when `give_up` is set.
fn read_until(sock: &mut TcpStream, buf: &mut [u8], deadline: Instant, give_up: &AtomicBool) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || give_up.load(Ordering::Relaxed) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no answer before the connect deadline",
            ));
        }
        sock.set_read_timeout(Some(left.min(ATTEMPT).max(Duration::from_millis(1))))?;
        match sock.read(&mut buf[got..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(k) => got += k,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Opens one connection to `p`, goes through the proofs and reads `p`'s ack. One closed before its ack was
/// dropped unauthenticated (the peer's listener makes room that way when strangers flood it) or reset: it is
/// opened again (said once per rank, through `said`).
fn open_acked(
    p: &PeerAddr,
    hello: &dyn Fn() -> Hello,
    token: &Token,
    deadline: Instant,
    me: &str,
    give_up: &AtomicBool,
    said: &AtomicBool,
) -> Result<TcpStream> {
    loop {
        let mut sock = open_proved(p, &hello(), token, deadline, me, give_up)?;
        let mut ack = [0u8; ACK_LEN];
        match read_until(&mut sock, &mut ack, deadline, give_up) {
            Ok(()) => {
                return decode_ack(&ack)
                    .map(|()| sock)
                    .map_err(|why| Error::peer(format!("{me}: {p} refused us: {why}")))
            }
            Err(e) if closed_early(&e) && Instant::now() < deadline => {
                if !said.swap(true, Ordering::Relaxed) {
                    stderr!(
                        "collbench: {me}: {p} closed a data connection before acking it ({e}; a listener drops the \
                         oldest unauthenticated connections when strangers flood it); connecting again"
                    );
                }
            }
            Err(e) => return Err(Error::peer(format!("{me}: no answer to hello from {p}: {e}"))),
        }
    }
}

/// Whether a failed ack read means the connection was closed or reset (worth a new one), not that the deadline
/// passed.
fn closed_early(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe
    )
}

/// Whether the peer of an accepted `sock` gave up during set-up: it closed or reset the connection (seen even
/// behind data not yet read), or what it sent first is an abort frame. Nothing is read, only peeked at.
fn gave_up(sock: &TcpStream) -> bool {
    let mut pfd = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd; a timeout of 0 only looks.
    let ready = unsafe { libc::poll(&mut pfd, 1, 0) };
    if ready > 0 && pfd.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
        return true;
    }
    let mut head = [0u8; FRAME_HEADER_LEN];
    // SAFETY: recv writes at most head.len() bytes into `head`; MSG_PEEK leaves them in the socket.
    let got = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            head.as_mut_ptr().cast(),
            head.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match got {
        0 => true,
        n if n >= 4 => u32::from_le_bytes([head[0], head[1], head[2], head[3]]) == ABORT_MARK,
        n if n > 0 => false,
        _ => matches!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ECONNRESET | libc::EPIPE | libc::ENOTCONN)
        ),
    }
}

/// Makes room for `sockets` more descriptors (the peers' streams): raises the soft `RLIMIT_NOFILE` towards
/// the hard limit when needed, and fails naming the numbers when even that is too few.
fn ensure_fd_room(sockets: usize, me: &str, npeers: usize, ns: usize) -> Result<()> {
    let Err(short) = raise_fd_limit(sockets) else {
        return Ok(());
    };
    // The user's limit, not the network: a local error (exit 2).
    Err(Error::usage(
        "ulimit -n",
        format!(
            "{me}: needs {} file descriptors ({npeers} peers x {ns} streams, {} already open, {FD_MARGIN} spare) \
             but the limit is {} and the hard limit {}, so it could not be raised; raise it (ulimit -n {}) or use \
             fewer --streams",
            short.need, short.open, short.soft, short.hard, short.need
        ),
    ))
}

/// Why `sockets` more descriptors do not fit: what is needed, open, and the limits.
#[derive(Debug)]
pub struct FdShort {
    pub need: u64,
    pub open: usize,
    pub soft: u64,
    pub hard: u64,
}

/// Raises the soft `RLIMIT_NOFILE` (towards the hard limit) so that `sockets` more descriptors fit beside those
/// open and a margin spare; the numbers where even the hard limit is too low.
pub fn raise_fd_limit(sockets: usize) -> std::result::Result<(), FdShort> {
    // Descriptors already open (listeners, rendezvous, output files, earlier paths, stdio), the sockets to
    // come, and a few for what a rank opens after connecting (/proc and /sys reads, one at a time).
    let open = std::fs::read_dir("/proc/self/fd").map_or(64, |d| d.count());
    let need = (open + sockets + FD_MARGIN) as libc::rlim_t;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 || lim.rlim_cur >= need {
        return Ok(());
    }
    if lim.rlim_max >= need {
        let raised = libc::rlimit {
            rlim_cur: need,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads only the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(());
        }
    }
    Err(FdShort {
        need,
        open,
        soft: lim.rlim_cur,
        hard: lim.rlim_max,
    })
}

/// Descriptors kept spare beyond the sockets, for the files a rank opens after connecting.
const FD_MARGIN: usize = 16;

/// Readies a connected data socket: blocking reads off, Nagle off, the send buffer and congestion control asked
/// for, then non-blocking.
fn configure_data_socket(sock: &TcpStream, sndbuf: Option<usize>, congestion: Option<&str>) -> std::io::Result<()> {
    sock.set_read_timeout(None)?;
    sock.set_nodelay(true)?;
    if let Some(name) = congestion {
        // Probed when the options were read, so a refusal here is unexpected; the error still names the flag.
        super::congestion::set(sock, name)?;
    }
    if let Some(bytes) = sndbuf {
        // A fixed send buffer turns off the kernel's autotuning, which grows it to megabytes; see
        // `Options::sndbuf` for what was measured.
        socket2::SockRef::from(sock).set_send_buffer_size(bytes)?;
    }
    sock.set_nonblocking(true)
}

/// How long a refused connection is retried. Every rank binds its listeners before the endpoints are
/// exchanged, so a refusal after that means nothing listens there any more; the retries only cover a
/// transient refusal, and the error comes long before the connect deadline.
const REFUSED_FOR: Duration = Duration::from_secs(1);

/// Connects, retrying failures until the deadline, and refusals for [`REFUSED_FOR`].
fn connect_retry(p: &PeerAddr, deadline: Instant, me: &str, give_up: &AtomicBool) -> Result<TcpStream> {
    let mut refused_since = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let e = match TcpStream::connect_timeout(&p.addr, left.min(ATTEMPT).max(Duration::from_millis(1))) {
            Ok(s) => return Ok(s),
            Err(e) => e,
        };
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            let since = *refused_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= REFUSED_FOR {
                return Err(Error::peer(format!(
                    "{me}: {p} refused the data connection ({e}): nothing listens at the address it published, \
                     so that rank has most likely exited (see its own error), or a firewall on its host rejects \
                     the port"
                )));
            }
        } else {
            refused_since = None;
        }
        if Instant::now() >= deadline || give_up.load(Ordering::Relaxed) {
            return Err(Error::peer(format!(
                "{me}: cannot connect to {p}: {e}; is it running and reachable from this host?"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn a_peer_whose_listener_is_gone_is_named_long_before_the_deadline() {
        let gone = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = gone.local_addr().unwrap();
        drop(gone);
        let p = PeerAddr {
            rank: 1,
            host: "h1".into(),
            addr,
        };
        // Were the refusal rule gone, the call would end only at this deadline, with a different message.
        let e = connect_retry(
            &p,
            Instant::now() + Duration::from_secs(120),
            "rank 2 (host h2)",
            &AtomicBool::new(false),
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!(
                "rank 2 (host h2): rank 1 (host h1, {addr}) refused the data connection"
            )) && msg.contains("has most likely exited"),
            "{msg}"
        );
    }

    #[test]
    fn a_peer_silent_after_its_ack_is_reported_against_the_connect_deadline_not_t() {
        // Set-up's last step waits to the connect deadline (and a settling margin), not -T: the message must
        // name the setting that expired, with its own value, and the flag that raises it.
        let (a, b) = pair();
        a.set_nonblocking(true).unwrap();
        let peer = PeerAddr {
            rank: 1,
            host: "h1".into(),
            addr: b.local_addr().unwrap(),
        };
        let cfg = TcpConfig {
            streams: 1,
            stripe_min: 1 << 20,
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(8),
            spin: Duration::ZERO,
            sndbuf: None,
            congestion: None,
        };
        let t = TcpTransport::new(
            0,
            "h0".into(),
            "lo".into(),
            "tcp".into(),
            vec![None, Some((peer, vec![a]))],
            cfg,
        );
        // A deadline already passed: the silent peer (b is held, never written) times the wait out at once.
        let e = t.settle(Instant::now()).err().expect("rank 1 says nothing").to_string();
        assert!(
            e.contains("--connect-timeout 8.0 s, and 5.0 s for the peers to settle")
                && e.contains("raise --connect-timeout"),
            "{e}"
        );
        assert!(!e.contains("-T 5.0") && !e.contains("raise -T"), "{e}");
        drop(b);
    }

    #[test]
    fn a_peer_that_hangs_up_during_set_up_ends_the_wait_naming_the_ranks_still_missing() {
        // Rank 0 of 3 waits for ranks 1 and 2. Rank 2 connects, is acked, then hangs up (as a rank does that
        // gave up on rank 1); rank 1 never comes. Were the hang-up not watched, the call would end only at the
        // two-minute deadline, with the time-out message.
        let bound = TcpListenerBound::bind("127.0.0.1".parse().unwrap(), "lo").unwrap();
        let token: Token = [7; 16];
        let nobody = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let peer = |rank: usize, addr| PeerAddr {
            rank,
            host: format!("h{rank}"),
            addr,
        };
        let peers = vec![peer(0, bound.addr), peer(1, nobody), peer(2, nobody)];
        let to = bound.addr;
        let quitter = std::thread::spawn(move || {
            let p = PeerAddr {
                rank: 0,
                host: "h0".into(),
                addr: to,
            };
            let hello = Hello {
                from: 2,
                to: 0,
                stream: 0,
                nstreams: 1,
                nonce: crate::transport::auth::nonce(),
            };
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut s = open_proved(
                &p,
                &hello,
                &token,
                deadline,
                "rank 2 (host h2)",
                &AtomicBool::new(false),
            )
            .unwrap();
            let mut ack = [0u8; ACK_LEN];
            s.read_exact(&mut ack).unwrap();
            decode_ack(&ack).unwrap();
        });
        let cfg = TcpConfig {
            streams: 1,
            stripe_min: 1 << 20,
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(120),
            spin: Duration::ZERO,
            sndbuf: None,
            congestion: None,
        };
        let links = Links::full(3, "test");
        let e = connect_all(bound, 0, "h0", &peers, &links, token, cfg)
            .err()
            .expect("set-up fails");
        quitter.join().unwrap();
        let msg = e.to_string();
        assert!(
            msg.starts_with("rank 0 (host h0): rank 2 (host h2, ")
                && msg.contains("closed its data connection during set-up")
                && msg.contains("still missing connections from rank 1 (host h1, "),
            "{msg}"
        );
    }

    #[test]
    fn a_data_socket_gets_the_requested_send_buffer_and_congestion_control_or_keeps_the_defaults() {
        let (a, b) = pair();
        let before = socket2::SockRef::from(&b).send_buffer_size().unwrap();
        let cc_before = super::super::congestion::get(&b).unwrap();
        configure_data_socket(&b, None, None).unwrap();
        assert_eq!(socket2::SockRef::from(&b).send_buffer_size().unwrap(), before);
        assert_eq!(super::super::congestion::get(&b).unwrap(), cc_before);
        // Linux doubles the value for its bookkeeping; a request below wmem_max is honoured.
        let want = 96 << 10;
        configure_data_socket(&a, Some(want), Some("reno")).unwrap();
        assert_eq!(super::super::congestion::get(&a).unwrap(), "reno");
        let got = socket2::SockRef::from(&a).send_buffer_size().unwrap();
        assert!((want..=4 * want).contains(&got), "asked {want}, got {got}");
        assert!(a.nodelay().unwrap());
    }
}
