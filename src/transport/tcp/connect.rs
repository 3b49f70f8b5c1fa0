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
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use super::drops::Drops;
use super::gate::{Event, Gate};
use super::handshake::{answer_challenge, decode_ack, encode_ack, Hello, Token, ACK_LEN, CHALLENGE_LEN, REFUSAL};
use super::{PeerAddr, TcpConfig, TcpTransport};
use crate::error::{stderr, Error, Result};
use crate::transport::Links;

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
    let mut socks: Vec<Vec<Option<TcpStream>>> = (0..n).map(|_| (0..ns).map(|_| None).collect()).collect();

    // 1. Connect to every lower peer and say hello; the kernel completes these through the peer's
    //    backlog, so no rank waits on another's accept loop here. Then answer each peer's challenge as it
    //    comes (a lower rank challenges from its accept loop, which it reaches without waiting on this one).
    let mut outgoing = Vec::new();
    let hello = |p: &PeerAddr, s: usize| Hello {
        from: rank as u32,
        to: p.rank as u32,
        stream: s as u16,
        nstreams: ns as u16,
        nonce: crate::transport::auth::nonce(),
    };
    for p in mine.iter().filter(|&&p| p < rank).map(|&p| &peers[p]) {
        for s in 0..ns {
            let mut sock = match connect_retry(p, deadline, &me) {
                Ok(sock) => sock,
                Err(e) => {
                    // The peers already reached only learn who is giving up from a proved connection that then
                    // closes (an unproved one is a stranger to them): prove to them first, briefly, so their
                    // set-up ends now rather than at the connect deadline.
                    let brief = deadline.min(Instant::now() + PROVE_BEFORE_LEAVING);
                    let _ = prove_all(outgoing, peers, &token, brief, &me, &hello);
                    return Err(e);
                }
            };
            let h = hello(p, s);
            // A failed send shows when the challenge is read, and is retried there.
            let _ = sock.write_all(&h.encode());
            outgoing.push((p.rank, s, sock, h));
        }
    }
    let mut outgoing = prove_all(outgoing, peers, &token, deadline, &me, &hello)?;

    // 2. Accept every higher peer's streams. Hellos are read through a gate, without blocking, so a stranger
    //    that connects and stays silent cannot delay the ranks queued behind it.
    let expected = mine.iter().filter(|&&p| p > rank).count() * ns;
    let mut accepted = 0;
    bound
        .listener
        .set_nonblocking(true)
        .map_err(|e| Error::io(format!("{me}: configuring the data listener"), e))?;
    let mut gate = Gate::new(|n: &_, b: &[u8]| Hello::admit(n, b, &token), HELLO_DEADLINE);
    let mut drops = Drops::new(me.clone());
    while accepted < expected {
        let (res, mut events) = gate.accept_all(&bound.listener);
        res.map_err(|e| Error::io(format!("{me}: accepting on {}", bound.addr), e))?;
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
            if let Err(e) = sock.write_all(&encode_ack()) {
                return Err(Error::peer(format!(
                    "{me}: acking {} failed: {e}",
                    peers[h.from as usize]
                )));
            }
            socks[h.from as usize][h.stream as usize] = Some(sock);
            accepted += 1;
        }
        if accepted == expected {
            break;
        }
        let missing = || -> Vec<String> {
            mine.iter()
                .copied()
                .filter(|&r| r > rank && socks[r].iter().any(Option::is_none))
                .map(|r| peers[r].to_string())
                .collect()
        };
        // A peer that hangs up before set-up is over gave up, most likely because a rank it connects to failed:
        // waiting for the missing ones until the deadline would only delay the same failure.
        if let Some(gone) = (0..n).find(|&r| socks[r].iter().flatten().any(hung_up)) {
            return Err(Error::peer(format!(
                "{me}: {} closed its data connection during set-up, so it gave up (see its own error); still \
                 missing connections from {}, the first of which most likely failed",
                peers[gone],
                missing().join(", ")
            )));
        }
        if Instant::now() >= deadline {
            drops.finish();
            let missing = missing();
            return Err(Error::peer(format!(
                "{me}: timed out after {:.1} s waiting for connections from {}; are those ranks running \
                 and able to reach {}? Raise --connect-timeout if they start slowly",
                cfg.connect_timeout.as_secs_f64(),
                missing.join(", "),
                bound.addr
            )));
        }
        let admitted: Vec<RawFd> = socks.iter().flatten().flatten().map(|s| s.as_raw_fd()).collect();
        gate.wait(&bound.listener, &admitted, deadline);
    }
    for (from, why) in gate.close() {
        drops.note(from, &why);
    }
    drops.finish();

    // 3. Collect the acks of our own connections. One closed before its ack was dropped unauthenticated (the
    //    peer's listener makes room that way when strangers flood it) or reset: connect and say hello again.
    let mut said = false;
    for (peer, s, sock) in outgoing.iter_mut() {
        let (peer, s) = (*peer, *s);
        let p = &peers[peer];
        loop {
            match read_ack(sock, deadline) {
                Ok(ack) => {
                    decode_ack(&ack).map_err(|why| Error::peer(format!("{me}: {p} refused us: {why}")))?;
                    break;
                }
                Err(e) if closed_early(&e) && Instant::now() < deadline => {
                    if !said {
                        said = true;
                        stderr!(
                            "collbench: {me}: {p} closed a data connection before acking it ({e}; a listener drops \
                             the oldest unauthenticated connections when strangers flood it); connecting again"
                        );
                    }
                    *sock = open_proved(p, &hello(p, s), &token, deadline, &me)?;
                }
                Err(e) => return Err(Error::peer(format!("{me}: no answer to hello from {p}: {e}"))),
            }
        }
    }
    for (peer, s, sock) in outgoing {
        socks[peer][s] = Some(sock);
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
    let path = bound.label.unwrap_or_else(|| format!("tcp@{}", bound.iface));
    Ok(TcpTransport::new(rank, host.to_string(), bound.iface, path, conns, cfg))
}

/// How long a rank that cannot reach one peer spends proving itself to the peers it did reach, before it
/// gives up: their challenges come from accept loops that are already running.
const PROVE_BEFORE_LEAVING: Duration = Duration::from_secs(2);

/// Outgoing connections with their hellos sent: one per (peer, stream).
type Outgoing = Vec<(usize, usize, TcpStream, Hello)>;

/// Reads each lower peer's challenge as it arrives, checks its proof and sends this rank's; a connection closed
/// before its challenge (a flooded listener drops the oldest unauthenticated ones) is opened again. Returns the
/// connections, proved, awaiting their acks.
fn prove_all(
    outgoing: Outgoing,
    peers: &[PeerAddr],
    token: &Token,
    deadline: Instant,
    me: &str,
    hello: &dyn Fn(&PeerAddr, usize) -> Hello,
) -> Result<Vec<(usize, usize, TcpStream)>> {
    let mut waiting: Vec<(usize, usize, TcpStream, Hello, Vec<u8>)> = outgoing
        .into_iter()
        .map(|(p, s, sock, h)| (p, s, sock, h, Vec::new()))
        .collect();
    for w in &waiting {
        w.2.set_nonblocking(true)
            .map_err(|e| Error::io(format!("{me}: configuring a data socket"), e))?;
    }
    let mut done = Vec::with_capacity(waiting.len());
    let mut said = false;
    while !waiting.is_empty() {
        let mut i = 0;
        while i < waiting.len() {
            let (peer, s, sock, h, got) = &mut waiting[i];
            let p = &peers[*peer];
            let mut buf = [0u8; CHALLENGE_LEN];
            let closed = match sock.read(&mut buf[..CHALLENGE_LEN - got.len()]) {
                Ok(0) => Some("closed".to_string()),
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    None
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) =>
                {
                    None
                }
                Err(e) if closed_early(&e) => Some(e.to_string()),
                Err(e) => return Err(Error::peer(format!("{me}: no answer to hello from {p}: {e}"))),
            };
            if let Some(why) = closed {
                if !said {
                    said = true;
                    stderr!(
                        "collbench: {me}: {p} closed a data connection before challenging it ({why}; a listener drops \
                         the oldest unauthenticated connections when strangers flood it); connecting again"
                    );
                }
                let fresh = open_proved(p, &hello(p, *s), token, deadline, me)?;
                let (peer, s) = (*peer, *s);
                waiting.swap_remove(i);
                done.push((peer, s, fresh));
                continue;
            }
            if got.len() < CHALLENGE_LEN {
                i += 1;
                continue;
            }
            let proof = match answer_challenge(token, h, got) {
                Ok(proof) => proof,
                Err(why) => {
                    let _ = sock.set_nonblocking(false).and_then(|()| sock.write_all(&REFUSAL));
                    return Err(Error::peer(format!("{me}: {p}: {why}")));
                }
            };
            sock.set_nonblocking(false)
                .and_then(|()| sock.write_all(&proof))
                .map_err(|e| Error::peer(format!("{me}: proving the job token to {p} failed: {e}")))?;
            let (peer, s, sock, _, _) = waiting.swap_remove(i);
            done.push((peer, s, sock));
        }
        if waiting.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            let who: Vec<String> = waiting.iter().map(|w| peers[w.0].to_string()).collect();
            return Err(Error::peer(format!(
                "{me}: no answer to hello from {} before the connect deadline; are those ranks running?",
                who.join(", ")
            )));
        }
        let mut fds: Vec<libc::pollfd> = waiting
            .iter()
            .map(|w| libc::pollfd {
                fd: w.2.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let ms = deadline
            .saturating_duration_since(Instant::now())
            .as_millis()
            .clamp(1, i32::MAX as u128) as i32;
        // SAFETY: fds is a valid array of pollfd of its length.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    }
    Ok(done)
}

/// Opens one connection to `p` and goes through the proofs, blocking until `deadline` (for the rare connection
/// opened again).
fn open_proved(p: &PeerAddr, h: &Hello, token: &Token, deadline: Instant, me: &str) -> Result<TcpStream> {
    loop {
        let mut sock = connect_retry(p, deadline, me)?;
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let mut ch = [0u8; CHALLENGE_LEN];
        let got = sock
            .write_all(&h.encode())
            .and_then(|()| sock.set_read_timeout(Some(left)))
            .and_then(|()| sock.read_exact(&mut ch));
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

/// Reads the ack of a hello sent over `sock`, waiting until `deadline`.
fn read_ack(sock: &mut TcpStream, deadline: Instant) -> std::io::Result<[u8; ACK_LEN]> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    sock.set_read_timeout(Some(left))?;
    let mut ack = [0u8; ACK_LEN];
    sock.read_exact(&mut ack)?;
    Ok(ack)
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

/// Whether the peer of `sock` has closed it (or reset it): nothing is read, only peeked at.
fn hung_up(sock: &TcpStream) -> bool {
    let mut byte = 0u8;
    // SAFETY: recv writes at most one byte into `byte`; MSG_PEEK leaves it in the socket.
    let got = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match got {
        0 => true,
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
fn connect_retry(p: &PeerAddr, deadline: Instant, me: &str) -> Result<TcpStream> {
    let mut refused_since = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let e = match TcpStream::connect_timeout(&p.addr, left.max(Duration::from_millis(1))) {
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
        if Instant::now() >= deadline {
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
        let e = connect_retry(&p, Instant::now() + Duration::from_secs(120), "rank 2 (host h2)").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!(
                "rank 2 (host h2): rank 1 (host h1, {addr}) refused the data connection"
            )) && msg.contains("has most likely exited"),
            "{msg}"
        );
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
            let mut s = open_proved(&p, &hello, &token, deadline, "rank 2 (host h2)").unwrap();
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
