//! What a TCP rank does once it gives up, and how every rank comes to name the same culprit.
//!
//! A rank that gives up ([`TcpTransport::abort`]) completes any part it had started to send with zeros,
//! then sends an abort frame (a header whose length field is `u32::MAX`, then a JSON [`AbortNote`]: who
//! gave up, whom it blames, and why) on a stream to every peer, relays the notes it hears, and waits a
//! moment for more. A rank that reads an abort frame while waiting stops at once and does the same. Every
//! rank then names one culprit: starting from its own note (or the first it heard), it follows the notes of
//! the ranks blamed, so a rank that was only waiting on a stuck rank is not blamed for it.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::progress::MAX_ABORT_BODY;
use super::TcpTransport;
use crate::error::{stderr, Culprit, Error, Party, PeerFailure};
use crate::transport::requests::Requests;

/// How long a rank that gave up keeps sending and hearing abort notes, at most, before it reports.
pub(super) const LINGER: Duration = Duration::from_secs(1);

/// What a rank that gave up tells every other: who it is, whom it blames, and its own message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AbortNote {
    /// The rank that gave up.
    pub origin: usize,
    /// Its host.
    pub origin_host: String,
    /// The rank it was waiting on (and its host), if its failure was about one peer.
    pub culprit: Option<(usize, String)>,
    /// The phase it gave up in (`all_reduce of 4 MiB`), if it knew one.
    #[serde(default)]
    pub phase: Option<String>,
    /// Its error, without the phase.
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

    /// What it said, as a message opens: its phase (`during all_reduce of 4 MiB: `), then its text.
    fn said(&self) -> String {
        match &self.phase {
            Some(p) => format!("during {p}: {}", self.text),
            None => self.text.clone(),
        }
    }
}

impl TcpTransport {
    /// Takes the abort frames read on every stream into `notes`; returns whether a new one arrived.
    pub(super) fn collect_notes(&mut self) -> bool {
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
                        Err(e) => stderr!(
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

    /// What this rank would answer a note blaming it: whom it is waiting on, with what pending, since when.
    pub(super) fn waiting_note(&self) -> Option<AbortNote> {
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
            phase: None,
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
    pub(super) fn answer_blame(&mut self) {
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
        note.phase.clone_from(&self.phase);
        self.suspect = note.culprit.as_ref().map(|c| c.0);
        // Appended: queue_notes sends each peer the notes past those it was sent, by position.
        self.notes.push(note);
    }

    /// The failure of the verdict as this rank reports it; `own` is this rank's error (its phase and the
    /// rest of its message), which its own note replaces when it has one.
    fn verdict_failure(&self, own: (Option<String>, String)) -> Option<PeerFailure> {
        let v = self.verdict()?;
        let (c, ch) = v.blamed();
        let own_note = self.own_note();
        let (phase, own) = match own_note {
            Some(n) => (n.phase.clone(), n.text.clone()),
            None => own,
        };
        let (phase, message) = if v.origin == self.rank {
            (phase, own)
        } else if own_note.is_some() {
            // This rank gave up (or answered) on its own: its observation first, then where the waits lead.
            let message = format!(
                "{own}; following whom each rank waited on leads to rank {} (host {}): {}",
                v.origin,
                v.origin_host,
                v.said()
            );
            (phase, message)
        } else {
            let message = format!(
                "{}: stopped because rank {} (host {}) gave up: {}",
                self.me(),
                v.origin,
                v.origin_host,
                v.said()
            );
            (None, message)
        };
        Some(PeerFailure {
            phase,
            culprit: Some(Culprit::Rank(Party::new(c, ch))),
            peer: Some(Party::new(v.origin, v.origin_host.clone())),
            message,
            ..PeerFailure::default()
        })
    }

    /// Poisons the transport with what the notes heard say.
    pub(super) fn poison_from_notes(&mut self) -> Error {
        let failure = self.verdict_failure((None, String::new())).unwrap_or_default();
        self.poison(failure.to_string());
        Error::Peer(Box::new(failure))
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
        // This rank's error apart from its phase, which notes carry on their own.
        let unphased = err.failure().map_or_else(|| err_text.clone(), PeerFailure::unphased);
        // A note answered before giving up learns the phase now.
        let (rank, phase) = (self.rank, self.phase.clone());
        if let Some(n) = self.notes.iter_mut().find(|n| n.origin == rank) {
            if n.phase.is_none() {
                n.phase = phase;
            }
        }
        let heard_first = self.poisoned.is_some() && self.suspect.is_none() && !self.notes.is_empty();
        if !heard_first && !self.notes.iter().any(|n| n.origin == self.rank) {
            let culprit = self
                .suspect
                .and_then(|s| self.peers[s].as_ref())
                .map(|p| (p.addr.rank, p.addr.host.clone()))
                .or_else(|| self.blamed_elsewhere.clone());
            let mut text = unphased.clone();
            text.truncate(MAX_ABORT_BODY / 2);
            self.notes.push(AbortNote {
                origin: self.rank,
                origin_host: self.host.clone(),
                culprit,
                phase: self.phase.clone(),
                text,
            });
        }
        self.poison(err_text.clone());
        self.linger();
        if self.lost_every_peer() {
            self.blame_self_for_isolation();
        }
        // A rank that answered a note blaming it reports its answer, not the error that answer caused.
        let own = (self.phase.clone(), unphased);
        let failure = self.verdict_failure(own.clone()).unwrap_or_else(|| PeerFailure {
            phase: own.0,
            message: own.1,
            ..PeerFailure::default()
        });
        match err {
            // A local failure stays one (its exit status says so); its peers hear it as a peer failure.
            Error::Io { context, source } => Error::Io {
                context: format!("{context} (culprit: rank {} (host {}))", self.rank, self.host),
                source,
            },
            _ => Error::Peer(Box::new(failure)),
        }
    }

    /// Names `rank` (on `host`) as the peer another path of this run failed with (an RDMA work completion that
    /// failed with it), for the abort note this transport sends next: without it the note would blame this rank.
    pub fn blame_peer(&mut self, rank: usize, host: String) {
        self.blamed_elsewhere = Some((rank, host));
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
}

#[cfg(test)]
mod tests {
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::sync::mpsc;

    use super::*;
    use crate::transport::tcp::{PeerAddr, TcpConfig};
    use crate::transport::Transport;
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
        let _ = t0.abort(Error::peer("rank 0 (host h0): rank 1 (host h1) is unresponsive"));
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
