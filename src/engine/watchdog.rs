//! The watchdog of the library paths (MPI, NCCL): `-T` held on calls that block inside a library.
//!
//! A library call cannot be given a deadline, so a thread per rank watches it. Each rank counts the library
//! calls it has entered and serves that count, whether it is inside one and the culprit it settled on, on a
//! small listener of its own (addresses exchanged when the path opens). When one call has not returned
//! after `-T`, the rank asks every other rank for its count: a rank that does not answer within the deadline
//! (stopped, starved) is the culprit, else the lowest rank whose count lags (it never entered the call the
//! others wait in); every rank applies the same rule to the same answers, so all name the same culprit. The
//! rank then waits (bounded) for every rank that answered to have settled too, so the launcher's tear-down
//! does not cut off their messages, prints the failure and exits with the peer status, which makes the
//! launcher end the job. Answers prove the job token (`transport::auth`, protocol `CBWD`) over the rank and
//! what they claim, so a stranger on the network can neither pose as a rank nor forge a count.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{stderr, Error, Result, EXIT_PEER};
use crate::transport::auth::Token;
use crate::transport::auth::{self, Binding, Nonce, Role, NONCE_LEN, PROOF_LEN};
use crate::transport::path::Traits;
use crate::transport::tcp::gate::{Event, Gate, Verdict};

const PROTOCOL: [u8; 4] = *b"CBWD";
/// Bytes of an answer's claims: rank (u64), calls entered (u64), inside a call (u8), settled (u8), the
/// culprit (u64, `u64::MAX` for none).
const CLAIMS_LEN: usize = 8 + 8 + 1 + 1 + 8;
const NONE: u64 = u64::MAX;

/// One rank of the job as the watchdog reaches it.
#[derive(Clone, Debug)]
pub struct Peer {
    /// Its host name.
    pub host: String,
    /// Its watchdog listener.
    pub addr: SocketAddr,
}

/// Every rank's watchdog peer from the addresses they published, `published[r]` being rank r's (`None`:
/// nothing arrived); an address that does not parse names its rank, host and `path`.
pub fn peers<'a>(
    published: impl Iterator<Item = Option<&'a [u8]>>,
    ranks: &[crate::results::RankInfo],
    path: &str,
) -> crate::error::Result<Vec<Peer>> {
    published
        .chain(std::iter::repeat(None))
        .zip(ranks)
        .map(|(a, ri)| {
            let addr = a
                .and_then(|a| std::str::from_utf8(a).ok())
                .and_then(|a| a.parse().ok())
                .ok_or_else(|| {
                    crate::error::Error::peer(format!(
                        "rank {} (host {}) published an unusable watchdog address for the {path} path",
                        ri.rank, ri.host
                    ))
                })?;
            Ok(Peer {
                host: ri.host.clone(),
                addr,
            })
        })
        .collect()
}

/// What one rank said about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct State {
    /// Library calls it has entered.
    pub calls: u64,
    /// Whether it is inside one now.
    pub in_call: bool,
    /// Whether it has given up on a call and said so.
    pub settled: bool,
    /// The culprit it settled on, if it named one.
    pub culprit: Option<usize>,
}

/// The call being watched: what it is and when it began.
struct Current {
    call: &'static str,
    bytes: Option<u64>,
    since: Instant,
}

/// What the serving and watching threads share with the rank.
struct Shared {
    calls: AtomicU64,
    current: Mutex<Option<Current>>,
    culprit: Mutex<Option<usize>>,
    settled: AtomicBool,
    stop: AtomicBool,
}

impl Shared {
    fn state(&self) -> State {
        State {
            calls: self.calls.load(Ordering::SeqCst),
            in_call: self.current.lock().map(|c| c.is_some()).unwrap_or(false),
            settled: self.settled.load(Ordering::SeqCst),
            culprit: self.culprit.lock().ok().and_then(|c| *c),
        }
    }
}

/// A listener bound for the watchdog, before the addresses are exchanged.
pub struct Bound {
    listener: TcpListener,
}

impl Bound {
    /// Binds a listener on `ip` (the control path's address), any port.
    pub fn new(ip: IpAddr) -> Result<Bound> {
        let listener = TcpListener::bind((ip, 0))
            .map_err(|e| Error::io(format!("binding the library watchdog's listener on {ip}"), e))?;
        Ok(Bound { listener })
    }

    /// The address to publish to the other ranks.
    pub fn addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| Error::io("reading the library watchdog's address", e))
    }
}

/// A running watchdog; its threads end when it is dropped.
pub struct Watchdog {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    wake: SocketAddr,
}

/// Who the job is, for the watchdog.
pub struct Job {
    /// This rank.
    pub rank: usize,
    /// Every rank, in rank order.
    pub peers: Vec<Peer>,
    /// The job token answers prove.
    pub token: Token,
    /// `-T`: how long one library call may take.
    pub timeout: Duration,
    /// The path watched (`mpi`, `nccl`), for messages.
    pub path: String,
}

impl Watchdog {
    /// Starts serving on `bound` and watching this rank's calls.
    pub fn start(bound: Bound, job: Job) -> Result<Watchdog> {
        let wake = bound.addr()?;
        let shared = Arc::new(Shared {
            calls: AtomicU64::new(0),
            current: Mutex::new(None),
            culprit: Mutex::new(None),
            settled: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let job = Arc::new(job);
        let serve = {
            let (shared, job) = (shared.clone(), job.clone());
            std::thread::Builder::new()
                .name("watchdog-serve".into())
                .spawn(move || serve(bound.listener, &shared, &job))
                .map_err(|e| Error::io("starting the library watchdog", e))?
        };
        let watch = {
            let (shared, job) = (shared.clone(), job.clone());
            std::thread::Builder::new()
                .name("watchdog".into())
                .spawn(move || watch(&shared, &job))
                .map_err(|e| Error::io("starting the library watchdog", e))?
        };
        Ok(Watchdog {
            shared,
            threads: vec![serve, watch],
            wake,
        })
    }

    /// Marks a library call (`call`, e.g. `MPI_Allreduce`, on a message of `bytes`) as entered until the
    /// guard drops. Allocates nothing: it runs around every timed call.
    pub fn call(&self, call: &'static str, bytes: Option<u64>) -> CallGuard<'_> {
        let g = self.enter(call, bytes);
        g.launched();
        g
    }

    /// Watches a library call from its start, counting it only once [`CallGuard::launched`] says the library
    /// took it (NCCL: queued on the stream, whose wait is the part that meets the peers): a rank stuck inside
    /// the launch itself then lags the ranks waiting for it, and is named.
    pub fn enter(&self, call: &'static str, bytes: Option<u64>) -> CallGuard<'_> {
        if let Ok(mut c) = self.shared.current.lock() {
            *c = Some(Current {
                call,
                bytes,
                since: Instant::now(),
            });
        }
        CallGuard { shared: &self.shared }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wakes the serving thread out of accept.
        let _ = TcpStream::connect_timeout(&self.wake, Duration::from_secs(1));
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A library call in progress; dropping it marks the call returned.
pub struct CallGuard<'a> {
    shared: &'a Shared,
}

impl CallGuard<'_> {
    /// Counts the call as entered: the library has it, and the peers can meet this rank in it.
    pub fn launched(&self) {
        self.shared.calls.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut c) = self.shared.current.lock() {
            *c = None;
        }
    }
}

fn claims(rank: usize, s: State) -> [u8; CLAIMS_LEN] {
    let mut b = [0u8; CLAIMS_LEN];
    b[..8].copy_from_slice(&(rank as u64).to_le_bytes());
    b[8..16].copy_from_slice(&s.calls.to_le_bytes());
    b[16] = u8::from(s.in_call);
    b[17] = u8::from(s.settled);
    b[18..].copy_from_slice(&s.culprit.map_or(NONE, |c| c as u64).to_le_bytes());
    b
}

/// How long a connection to the watchdog may take to send its whole nonce before it is dropped. Generous: a
/// connection waiting costs a slot in the gate, never another rank's answer.
const OPENING_DEADLINE: Duration = Duration::from_secs(10);

/// How often the serving thread looks whether the watchdog was dropped, at the latest.
const STOP_TICK: Duration = Duration::from_millis(100);

/// Answers every connection that sends a nonce with this rank's claims and their proof. Nonces are read through
/// a [`Gate`], without blocking and each connection with its own deadline, so a stranger that trickles its
/// bytes cannot delay the answers the other ranks wait for (they would blame this rank for its silence).
fn serve(listener: TcpListener, shared: &Shared, job: &Job) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let mut gate = Gate::new(
        |_: &Nonce, b: &[u8]| match b.try_into() {
            Ok(n) => Verdict::Admit(n),
            Err(_) => Verdict::<Nonce>::Need(NONCE_LEN),
        },
        OPENING_DEADLINE,
    );
    while !shared.stop.load(Ordering::SeqCst) {
        let (res, mut events) = gate.accept_all(&listener);
        if res.is_err() {
            return;
        }
        events.extend(gate.drive());
        for ev in events {
            if let Event::Admitted(mut s, _, theirs) = ev {
                // The answer is small enough for an empty socket buffer; a peer that does not read it costs
                // at most this long.
                let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                let _ = s.write_all(&answer(shared, job, &theirs));
            }
        }
        gate.wait(&listener, &[], Instant::now() + STOP_TICK);
    }
}

/// This rank's answer to the nonce `theirs`: a nonce of its own, its claims, and the proof over both.
fn answer(shared: &Shared, job: &Job, theirs: &Nonce) -> Vec<u8> {
    let ours = auth::nonce();
    let c = claims(job.rank, shared.state());
    let proof = auth::prove(
        &job.token,
        Role::Listener,
        &Binding {
            protocol: PROTOCOL,
            connector: theirs,
            listener: &ours,
            claims: &c,
        },
    );
    let mut answer = Vec::with_capacity(NONCE_LEN + CLAIMS_LEN + PROOF_LEN);
    answer.extend_from_slice(&ours);
    answer.extend_from_slice(&c);
    answer.extend_from_slice(&proof);
    answer
}

/// Asks `rank` at `addr` for its state, within `deadline`; `None` when it did not answer with a valid proof.
pub fn ask(rank: usize, addr: SocketAddr, token: &Token, deadline: Duration) -> Option<State> {
    let mut s = TcpStream::connect_timeout(&addr, deadline).ok()?;
    s.set_read_timeout(Some(deadline)).ok()?;
    s.set_write_timeout(Some(deadline)).ok()?;
    let ours = auth::nonce();
    s.write_all(&ours).ok()?;
    let mut b = [0u8; NONCE_LEN + CLAIMS_LEN + PROOF_LEN];
    s.read_exact(&mut b).ok()?;
    let (theirs, rest) = b.split_at(NONCE_LEN);
    let (c, proof) = rest.split_at(CLAIMS_LEN);
    let theirs: Nonce = theirs.try_into().ok()?;
    let bind = Binding {
        protocol: PROTOCOL,
        connector: &ours,
        listener: &theirs,
        claims: c,
    };
    if !auth::verify(token, Role::Listener, &bind, proof) {
        return None;
    }
    let word = |r: std::ops::Range<usize>| u64::from_le_bytes(c[r].try_into().expect("8 bytes"));
    if word(0..8) != rank as u64 {
        return None;
    }
    let culprit = word(18..26);
    Some(State {
        calls: word(8..16),
        in_call: c[16] == 1,
        settled: c[17] == 1,
        culprit: (culprit != NONE).then_some(culprit as usize),
    })
}

/// The culprit by the watchdog's rule, from every rank's answer in rank order (`None`: no answer): the
/// lowest rank that did not answer, else the lowest whose count of calls is the smallest when counts
/// differ, else none (every rank is inside the same call: the library itself is slow or stuck).
pub fn culprit(answers: &[Option<State>]) -> Option<usize> {
    if let Some(r) = answers.iter().position(Option::is_none) {
        return Some(r);
    }
    let counts: Vec<(u64, usize)> = answers
        .iter()
        .enumerate()
        .filter_map(|(r, s)| s.map(|s| (s.calls, r)))
        .collect();
    let max = counts.iter().map(|c| c.0).max()?;
    counts.iter().filter(|c| c.0 < max).min().map(|c| c.1)
}

fn watch(shared: &Shared, job: &Job) {
    let tick = (job.timeout / 10).clamp(Duration::from_millis(1), Duration::from_millis(100));
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let overdue = shared.current.lock().ok().and_then(|c| {
            c.as_ref().filter(|c| c.since.elapsed() > job.timeout).map(|c| {
                let what = match c.bytes {
                    Some(b) => format!("{} of {}", c.call, crate::sizes::format_size(b)),
                    None => c.call.to_string(),
                };
                (what, c.since.elapsed())
            })
        });
        if let Some((what, waited)) = overdue {
            give_up(shared, job, &what, waited);
        }
        std::thread::sleep(tick);
    }
}

/// Every rank's answer; this rank's own state is read directly.
fn ask_all(shared: &Shared, job: &Job, deadline: Duration) -> Vec<Option<State>> {
    std::thread::scope(|s| {
        let asks: Vec<_> = job
            .peers
            .iter()
            .enumerate()
            .map(|(r, p)| {
                s.spawn(move || {
                    if r == job.rank {
                        Some(shared.state())
                    } else {
                        ask(r, p.addr, &job.token, deadline)
                    }
                })
            })
            .collect();
        asks.into_iter().map(|h| h.join().ok().flatten()).collect()
    })
}

/// Names the culprit, prints the failure, waits (bounded) for the ranks that answered to have said theirs
/// too, so the launcher's tear-down after this rank's exit does not cut them off, and exits.
fn give_up(shared: &Shared, job: &Job, what: &str, waited: Duration) -> ! {
    let deadline = job.timeout.clamp(Duration::from_secs(1), Duration::from_secs(10));
    let answers = ask_all(shared, job, deadline);
    let culprit = culprit(&answers);
    if let Ok(mut c) = shared.culprit.lock() {
        *c = culprit;
    }
    stderr!(
        "collbench: error: {}",
        failure(job, what, waited, deadline, &answers, culprit)
    );
    shared.settled.store(true, Ordering::SeqCst);
    // Bounded: every rank that answered gives up within its own -T of the same call, plus its questions.
    let until = Instant::now() + deadline + job.timeout;
    while Instant::now() < until {
        let again = ask_all(shared, job, deadline);
        let settled = again
            .iter()
            .zip(&answers)
            .all(|(now, before)| before.is_none() || now.map_or(true, |s| s.settled || !s.in_call));
        if settled {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: _exit ends the process at once; nothing is left to unwind, and skipping atexit handlers keeps
    // the library (stuck in the call on the main thread) from being entered again from here.
    unsafe { libc::_exit(EXIT_PEER) }
}

/// The failure this rank reports: the call, how long it waited, and the culprit with why it was named.
fn failure(
    job: &Job,
    what: &str,
    waited: Duration,
    deadline: Duration,
    answers: &[Option<State>],
    culprit: Option<usize>,
) -> Error {
    let me = &job.peers[job.rank];
    let why = match culprit {
        Some(c) if answers[c].is_none() => format!(
            "; rank {c} (host {}) did not answer the watchdog within {:.3} s (stopped or starved?)",
            job.peers[c].host,
            deadline.as_secs_f64()
        ),
        Some(c) => format!(
            "; rank {c} (host {}) never {} the call the others wait in (it is stuck before it, or inside the \
             library's launch of it)",
            job.peers[c].host,
            if Traits::named(&job.path).is_some_and(|k| k.on_device_stream) {
                "launched"
            } else {
                "entered"
            }
        ),
        None => "; every rank is inside the same call, so no rank can be named: the library or the network is \
                 stuck (raise -T if the call is only slow)"
            .to_string(),
    };
    let e = Error::peer(format!(
        "rank {} (host {}): {what} has not returned after {:.3} s (-T {} s){why}",
        job.rank,
        me.host,
        waited.as_secs_f64(),
        job.timeout.as_secs_f64()
    ))
    .during(&format!("the {} path", job.path))
    .waiting_for(what.to_string());
    match culprit {
        Some(c) => e.blaming(c, job.peers[c].host.clone()),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(calls: u64, in_call: bool) -> Option<State> {
        Some(State {
            calls,
            in_call,
            settled: false,
            culprit: None,
        })
    }

    #[test]
    fn the_culprit_is_the_silent_rank_else_the_one_behind_else_none() {
        assert_eq!(culprit(&[st(5, true), None, st(5, true), None]), Some(1));
        assert_eq!(culprit(&[st(5, true), st(5, true), st(4, false), st(5, true)]), Some(2));
        assert_eq!(culprit(&[st(5, true), st(3, false), st(4, false)]), Some(1));
        assert_eq!(culprit(&[st(5, true), st(5, true)]), None);
    }

    /// A watchdog of rank `rank` with no peers, holding `token`, on loopback; and its address.
    fn started(rank: usize, token: [u8; 16]) -> (Watchdog, std::net::SocketAddr) {
        let bound = Bound::new("127.0.0.1".parse().unwrap()).unwrap();
        let addr = bound.addr().unwrap();
        let job = Job {
            rank,
            peers: vec![],
            token,
            timeout: Duration::from_secs(3600),
            path: "mpi".into(),
        };
        (Watchdog::start(bound, job).unwrap(), addr)
    }

    #[test]
    fn answers_prove_the_token_and_the_rank() {
        let token = [7u8; 16];
        let (wd, addr) = started(1, token);
        let _g = wd.call("MPI_Barrier", None);
        let d = Duration::from_secs(5);
        assert_eq!(
            ask(1, addr, &token, d),
            Some(State {
                calls: 1,
                in_call: true,
                settled: false,
                culprit: None
            })
        );
        drop(_g);
        // A call entered but not yet taken by the library (NCCL's launch) is watched but not counted, so a
        // rank stuck in a launch lags the ranks that launched.
        let g = wd.enter("ncclAllReduce", Some(8));
        assert_eq!(ask(1, addr, &token, d).map(|s| (s.calls, s.in_call)), Some((1, true)));
        g.launched();
        assert_eq!(ask(1, addr, &token, d).map(|s| (s.calls, s.in_call)), Some((2, true)));
        drop(g);
        assert_eq!(ask(1, addr, &[8u8; 16], d), None, "another job's token");
        assert_eq!(ask(2, addr, &token, d), None, "posing as another rank");
    }

    #[test]
    fn a_stranger_trickling_its_nonce_does_not_delay_the_answers() {
        let token = [7u8; 16];
        let (wd, addr) = started(0, token);
        // First in the queue: a connection that sent one byte of its nonce and waits to send the next.
        let mut stranger = TcpStream::connect(addr).unwrap();
        stranger.write_all(&[1]).unwrap();
        let d = Duration::from_secs(30);
        for _ in 0..3 {
            assert_eq!(ask(0, addr, &token, d).map(|s| s.calls), Some(0));
        }
        // Answered while the stranger's nonce was still pending, not after it was given up on.
        stranger.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        let pending = matches!(stranger.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        assert!(pending, "the watchdog dropped the stranger before answering the ranks");
        drop(wd);
    }
}
