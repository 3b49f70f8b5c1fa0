//! What a TCP rank does once it gives up, and how every rank comes to name the same culprit.
//!
//! A rank that gives up ([`TcpTransport::abort`]) completes any part it had started to send with zeros,
//! then sends an abort frame (a header whose length field is `u32::MAX`, then a JSON [`AbortNote`]: who
//! gave up, whom it blames, and why) on a stream to every peer, relays the notes it hears, and waits a
//! moment for more. A rank that reads an abort frame while waiting stops at once and does the same. Every
//! rank then names one culprit: starting from its own note (or the first it heard), it follows the notes of
//! the ranks blamed, so a rank that was only waiting on a stuck rank is not blamed for it.
//!
//! # Whose word a note is
//! A note is trusted only as far as the authenticated connection it came on (its peer proved the job token
//! and its rank when the connection opened):
//! - A note a peer sends as its own (`relayed_by` empty) must name that peer as its origin; one claiming any
//!   other origin is refused and counted.
//! - A peer may relay notes it heard (`relayed_by` = that peer, `origin` = the rank that wrote it), because not
//!   every pair of ranks is connected. A relayed note whose origin is a rank this rank is connected to is
//!   set aside: that rank speaks for itself on its own connection, so no peer can put words in a neighbour's
//!   mouth. The one exception is the rank this rank gave up waiting on: where the link between them is broken
//!   its words come no other way, so its note relayed counts (marked with its relayer). A relayed note from a rank this rank cannot hear directly is kept, marked with its relayer, and
//!   any verdict resting on it says so ("relayed by rank R"), so a lie is traceable to the rank that told it;
//!   its origin and culprit must be ranks of this job, else it is refused and counted.
//! - Each peer's notes are bounded: at most [`MAX_NOTES_PER_PEER`] bodies are read from one, each cut to
//!   [`MAX_NOTE_TEXT`] bytes of text, and one note per origin is kept, so a stream of notes costs a bounded
//!   amount of memory; [`TcpTransport::abort`]'s wait for notes keeps its deadline however many arrive.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::progress::MAX_ABORT_BODY;
use super::TcpTransport;
use crate::error::{stderr, Culprit, Error, Party, PeerFailure};
use crate::transport::requests::Requests;

/// How long a rank that gave up keeps sending and hearing abort notes, at most, before it reports.
pub(super) const LINGER: Duration = Duration::from_secs(1);

/// Most abort bodies read from one peer: its own note and its relays of others' (one per rank, in practice far
/// fewer); the rest are refused and counted.
pub const MAX_NOTES_PER_PEER: usize = 256;

/// Most bytes of a note's text kept (and of its origin's host name); the rest is cut.
pub const MAX_NOTE_TEXT: usize = 4096;

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
    /// The rank that passed this note on, when it is not the origin's own sending; as kept by a receiver, the
    /// peer it came from.
    #[serde(default)]
    pub relayed_by: Option<usize>,
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

/// Whom the notes blame.
#[derive(Debug)]
enum Verdict<'a> {
    /// One rank; the note blaming it.
    Rank(&'a AbortNote),
    /// The link between two ranks that each gave up waiting on the other: their notes, the lower rank's first.
    Link(&'a AbortNote, &'a AbortNote),
}

impl TcpTransport {
    /// Takes the abort frames read on every stream into `notes`, judged by the connection they came on (see the
    /// module doc); returns whether a new one arrived.
    pub(super) fn collect_notes(&mut self) -> bool {
        let mut new = false;
        let n = self.peers.len();
        let me = format!("rank {} (host {})", self.rank, self.host);
        let connected: Vec<bool> = self.peers.iter().map(Option::is_some).collect();
        for p in self.peers.iter_mut().flatten() {
            for s in &mut p.streams {
                let Some(c) = s.control.as_mut() else { continue };
                for body in c.bodies.drain(..) {
                    p.heard = true;
                    p.bodies_heard += 1;
                    if p.bodies_heard > MAX_NOTES_PER_PEER {
                        self.notes_refused += 1;
                        if p.bodies_heard == MAX_NOTES_PER_PEER + 1 {
                            stderr!(
                                "collbench: {me}: {} sent more than {MAX_NOTES_PER_PEER} abort notes; the rest are \
                                 refused",
                                p.addr
                            );
                        }
                        continue;
                    }
                    let note = match serde_json::from_slice::<AbortNote>(&body) {
                        Ok(note) => note,
                        Err(e) => {
                            self.notes_refused += 1;
                            stderr!(
                                "collbench: {me}: unreadable abort note from {} refused: {}",
                                p.addr,
                                crate::error::escape(&e.to_string())
                            );
                            continue;
                        }
                    };
                    let from = p.addr.rank;
                    let refuse = match note.relayed_by {
                        None if note.origin != from => Some(format!("claims to come from rank {}", note.origin)),
                        Some(r) if r != from => Some(format!("claims to be relayed by rank {r}")),
                        Some(_) if note.origin == from => Some("relays its own note".to_string()),
                        _ if note.origin >= n => Some(format!("names rank {}, not a rank of this job", note.origin)),
                        _ => match &note.culprit {
                            Some((c, _)) if *c >= n => Some(format!("blames rank {c}, not a rank of this job")),
                            _ => None,
                        },
                    };
                    if let Some(why) = refuse {
                        self.notes_refused += 1;
                        stderr!("collbench: {me}: refused an abort note from {}: it {why}", p.addr);
                        continue;
                    }
                    if note.origin == self.rank || self.notes.iter().any(|m| m.origin == note.origin) {
                        continue;
                    }
                    let mut note = note;
                    cut(&mut note.text, MAX_NOTE_TEXT);
                    cut(&mut note.origin_host, 256);
                    if let Some((_, h)) = note.culprit.as_mut() {
                        cut(h, 256);
                    }
                    // A neighbour speaks for itself on its own connection: a relay of its words is set aside,
                    // and counts only if this rank gave up waiting on it (see below).
                    if note.relayed_by.is_some() && connected[note.origin] {
                        if !self.unheard.iter().any(|m| m.origin == note.origin) {
                            self.unheard.push(note);
                        }
                        continue;
                    }
                    self.notes.push(note);
                    new = true;
                }
            }
        }
        new | self.hear_the_silent()
    }

    /// Counts the relayed note of the rank this rank gave up waiting on (or waits on), when it sent none on its
    /// own connection: a link broken between them carries its words no more, and its note (that it waited on this
    /// rank in turn) is what tells a broken link from a stopped rank. Returns whether one was counted.
    fn hear_the_silent(&mut self) -> bool {
        if self.unheard.is_empty() {
            return false;
        }
        // The rank this rank gave up on, or was waiting on when it stopped (on another's note), or waits on now.
        let silent = match self.own_note().or(self.answer.as_ref()) {
            Some(n) => n.culprit.as_ref().map(|c| c.0),
            None if self.poisoned.is_none() => self.waiting_note().and_then(|n| n.culprit).map(|c| c.0),
            None => None,
        };
        let Some(silent) = silent else {
            return false;
        };
        if self.notes.iter().any(|n| n.origin == silent) {
            return false;
        }
        match self.unheard.iter().position(|m| m.origin == silent) {
            Some(i) => {
                let note = self.unheard.swap_remove(i);
                self.notes.push(note);
                true
            }
            None => false,
        }
    }

    /// How many abort bodies this rank refused (unreadable, or claiming what their connection does not back).
    pub fn notes_refused(&self) -> usize {
        self.notes_refused
    }

    /// Whom the notes blame, chosen from the notes alone, so every rank holding the same notes names the same
    /// culprit whichever note it heard first or wrote itself. Each note blames one rank; a rank blamed that sent
    /// no note (stopped, dead) or that blames itself (a failure of its own) ends the chain of waits, and the
    /// lowest such rank is the culprit. When every rank blamed sent a note blaming another (each gave up
    /// waiting on the next, as with a `-T` shorter than the work), the waits form cycles, and the one through
    /// the lowest rank is taken: two ranks that each gave up waiting on the other, both alive enough to say so,
    /// name the link between them; a longer cycle names its lowest rank. The note returned for a rank blames it:
    /// this rank's own where it does, else the one from the lowest rank.
    fn verdict(&self) -> Option<Verdict<'_>> {
        let note_of = |r: usize| self.notes.iter().find(|n| n.origin == r);
        let ends = self
            .notes
            .iter()
            .map(AbortNote::blamed)
            .filter(|(b, _)| match note_of(*b) {
                None => true,
                Some(n) => n.blamed().0 == *b,
            });
        let culprit = match ends.map(|(b, _)| b).min() {
            Some(c) => c,
            None => {
                // No chain ends: every rank blamed sent a note blaming another. From any note the chain enters
                // a cycle; the cycle through the lowest rank on any is named.
                let mut lowest: Option<Vec<usize>> = None;
                for start in &self.notes {
                    let mut seen = vec![start.origin];
                    let mut at = start.blamed().0;
                    while !seen.contains(&at) {
                        seen.push(at);
                        at = note_of(at).map_or(at, |n| n.blamed().0);
                    }
                    // `at` repeats: the ranks from its first visit on are the cycle.
                    let from = seen.iter().position(|r| *r == at).unwrap_or(0);
                    let cycle = seen.split_off(from);
                    let min = |c: &[usize]| c.iter().copied().min();
                    if lowest.as_deref().map_or(true, |l| min(&cycle) < min(l)) {
                        lowest = Some(cycle);
                    }
                }
                let cycle = lowest?;
                if let [a, b] = cycle[..] {
                    let (a, b) = (a.min(b), a.max(b));
                    return Some(Verdict::Link(note_of(a)?, note_of(b)?));
                }
                cycle.into_iter().min()?
            }
        };
        let blaming = |n: &&AbortNote| n.blamed().0 == culprit;
        self.own_note()
            .filter(blaming)
            .or_else(|| self.notes.iter().filter(blaming).min_by_key(|n| n.origin))
            .map(Verdict::Rank)
    }

    /// Whether the notes held can name the culprit as every other rank will: each rank blamed has sent its
    /// note (or its connection to this rank is closed), and every rank of the job was heard from, directly or
    /// relayed, or is closed. A stopped rank never sends one, so lingering ends on its deadline then.
    fn notes_complete(&self) -> bool {
        let closed = |r: usize| {
            self.peers
                .get(r)
                .and_then(Option::as_ref)
                .is_some_and(|p| p.streams.iter().all(|s| s.closed))
        };
        let heard = |r: usize| r == self.rank || closed(r) || self.notes.iter().any(|n| n.origin == r);
        self.notes.iter().all(|n| heard(n.blamed().0)) && (0..self.peers.len()).all(heard)
    }

    /// This rank's own note, if it gave up on its own or answered a note blaming it.
    fn own_note(&self) -> Option<&AbortNote> {
        self.notes.iter().find(|n| n.origin == self.rank)
    }

    /// How long this rank just stood still, if for at least a quarter of the wait deadline (at least 1 s) and
    /// lately (within one deadline, at least 10 s): long enough that a peer's wait on it ran out while it did.
    /// Not the whole deadline: a peer's wait may have begun well before this rank stopped (a large message in
    /// flight, this rank slowed first), so the stop can be shorter than the wait it ended; the peers' linger
    /// (a second at least, which a stopped rank never cuts short) is in it either way.
    fn stood_still(&self) -> Option<Duration> {
        let at_least = (self.cfg.timeout / 4).max(Duration::from_secs(1));
        self.standstill
            .recent(at_least, self.cfg.timeout.max(Duration::from_secs(10)))
    }

    /// This rank's note blaming itself, when a peer blamed it and it had just stood still (stopped or starved)
    /// for at least a quarter of the wait deadline: its peers waited on a rank that was not running, and the closed
    /// connections it finds on resuming are their leaving, not a broken link.
    fn stood_still_note(&self) -> Option<AbortNote> {
        if !self
            .notes
            .iter()
            .any(|n| n.origin != self.rank && n.blamed().0 == self.rank)
        {
            return None;
        }
        let gap = self.stood_still()?;
        Some(AbortNote {
            relayed_by: None,
            origin: self.rank,
            origin_host: self.host.clone(),
            culprit: None,
            phase: self.phase.clone(),
            text: format!(
                "{}: this rank stood still for {:.1} s, its process stopped (SIGSTOP, a debugger, job control) or \
                 given no CPU, while its peers waited on it; find what held it (ps -o stat shows T for a stopped \
                 process; look for a CPU quota or an overloaded host)",
                self.me(),
                gap.as_secs_f64()
            ),
        })
    }

    /// What this rank would answer a note blaming it: whom it is waiting on, with what pending, since when.
    pub(super) fn waiting_note(&self) -> Option<AbortNote> {
        let p = self.waiting_on()?;
        let addr = p.addr.to_string();
        let pending = self.pending_with(p);
        Some(AbortNote {
            relayed_by: None,
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
        let answer = if let Some(note) = self.stood_still_note() {
            Some(note)
        } else if self.poisoned.is_some() {
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
        let v = match self.verdict()? {
            Verdict::Rank(v) => v,
            Verdict::Link(a, b) => return Some(self.link_failure(a, b, own)),
        };
        let (c, ch) = v.blamed();
        let own_note = self.own_note();
        let (phase, own) = match own_note {
            Some(n) => (n.phase.clone(), n.text.clone()),
            None => own,
        };
        let ch = crate::error::escape(ch).into_owned();
        let relayed = relayed(v, self.rank);
        let said = crate::error::escape(&v.said()).into_owned();
        let oh = crate::error::escape(&v.origin_host).into_owned();
        let (phase, message) = if v.origin == self.rank {
            (phase, own)
        } else if own_note.is_some() {
            // This rank gave up (or answered) on its own: its observation first, then where the waits lead.
            let message = format!(
                "{own}; following whom each rank waited on leads to rank {} (host {oh}){relayed}: {said}",
                v.origin
            );
            (phase, message)
        } else {
            let message = format!(
                "{}: stopped because rank {} (host {oh}){relayed} gave up: {said}",
                self.me(),
                v.origin
            );
            // The phase is where the rank that gave up was: this rank only stopped on its word.
            (v.phase.clone().or(phase), message)
        };
        Some(PeerFailure {
            phase,
            culprit: Some(Culprit::Rank(Party::new(c, ch))),
            peer: Some(Party::new(v.origin, oh)),
            message,
            ..PeerFailure::default()
        })
    }

    /// The failure when ranks `a` and `b` each gave up waiting on the other (their notes): both were alive to say
    /// so, so neither is stopped; what lies between them carries nothing either way.
    fn link_failure(&self, a: &AbortNote, b: &AbortNote, own: (Option<String>, String)) -> PeerFailure {
        let party = |n: &AbortNote| Party::new(n.origin, crate::error::escape(&n.origin_host).into_owned());
        let (pa, pb) = (party(a), party(b));
        let why = "neither is stopped, so the link between them is broken (cut, a firewall, or a path MTU black \
                   hole: small packets pass, full-sized ones do not)";
        let (phase, message) = match self.own_note() {
            Some(n) if n.origin == a.origin || n.origin == b.origin => {
                let other = if n.origin == a.origin { b } else { a };
                let message = format!(
                    "{}; {}{} was waiting on this rank in turn: {why}",
                    n.text,
                    party(other),
                    relayed(other, self.rank)
                );
                (n.phase.clone(), message)
            }
            Some(n) => (
                n.phase.clone(),
                format!("{}; {pa} and {pb} each gave up waiting on the other: {why}", n.text),
            ),
            None => {
                let message = format!(
                    "{}: stopped because {pa} and {pb} each gave up waiting on the other{}: {why}",
                    self.me(),
                    relayed(a, self.rank)
                );
                (own.0.or_else(|| a.phase.clone()), message)
            }
        };
        PeerFailure {
            phase,
            culprit: Some(Culprit::Link { a: pa.clone(), b: pb }),
            peer: Some(pa),
            message,
            ..PeerFailure::default()
        }
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
        if let Some(i) = self.notes.iter().position(|n| n.origin == rank) {
            let n = &mut self.notes[i];
            if n.phase.is_none() && phase.is_some() {
                n.phase = phase;
                // Its wire form changed: serialised again when next sent.
                self.note_wire.truncate(i);
            }
        }
        let heard_first = self.poisoned.is_some() && self.suspect.is_none() && !self.notes.is_empty();
        if self.stood_still().is_some() {
            // Resumed after standing still: the peers' notes are likely waiting in the sockets already, and
            // whether one blames this rank decides what its own note says.
            self.poison(err_text.clone());
            self.hear_once();
        }
        if let Some(note) = self.stood_still_note().filter(|_| self.own_note().is_none()) {
            self.suspect = None;
            self.notes.push(note);
        } else if !heard_first && !self.notes.iter().any(|n| n.origin == self.rank) {
            let culprit = self
                .suspect
                .and_then(|s| self.peers[s].as_ref())
                .map(|p| (p.addr.rank, p.addr.host.clone()))
                .or_else(|| self.blamed_elsewhere.clone());
            let mut text = unphased.clone();
            cut(&mut text, MAX_ABORT_BODY / 2);
            self.notes.push(AbortNote {
                origin: self.rank,
                origin_host: self.host.clone(),
                culprit,
                phase: self.phase.clone(),
                text,
                relayed_by: None,
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

    /// Queues every note a peer has not been sent, except its own. Each note is serialised once, as this rank
    /// sends it: its own as its own, the others as relayed by this rank.
    fn queue_notes(&mut self) {
        while self.note_wire.len() < self.notes.len() {
            let n = &self.notes[self.note_wire.len()];
            let sent = AbortNote {
                relayed_by: (n.origin != self.rank).then_some(self.rank),
                ..n.clone()
            };
            self.note_wire
                .push(serde_json::to_vec(&sent).expect("a note serialises"));
        }
        for p in self.peers.iter_mut().flatten() {
            let Some(s) = p.streams.iter_mut().find(|s| !s.closed) else {
                continue;
            };
            for (n, body) in self.notes[p.notes_sent..].iter().zip(&self.note_wire[p.notes_sent..]) {
                if n.origin != p.addr.rank {
                    s.out.get_or_insert_with(Default::default).push_frame(body);
                }
            }
            p.notes_sent = self.notes.len();
        }
    }

    /// Reads what the sockets hold now, without waiting, and keeps the notes in it.
    fn hear_once(&mut self) {
        for p in self.peers.iter_mut().flatten() {
            for s in &mut p.streams {
                if !s.closed {
                    let _ = s.drive(&mut Requests::default());
                }
            }
        }
        self.collect_notes();
    }

    /// Sends and hears abort notes until every peer was told and has told (or is gone), or its linger passed
    /// ([`LINGER`] once set up; each new note extends it, up to three times).
    fn linger(&mut self) {
        // Not cut to -T: a -T of a millisecond would end the wait before any note could arrive, and ranks would
        // name different culprits.
        // Each new note buys the notes it sets off (an answer, a relay of it) a whole linger to arrive, up to
        // three in all: a chain of answers across a broken link takes several hops, each slow on a loaded host.
        let start = Instant::now();
        let mut end = start + self.linger;
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
            // New notes are answered and sent on at once, but never past the deadline.
            if self.collect_notes() && Instant::now() < end {
                self.answer_blame();
                end = end.max(Instant::now() + self.linger).min(start + 3 * self.linger);
                continue;
            }
            let settled = self
                .peers
                .iter()
                .flatten()
                .all(|p| p.heard || p.streams.iter().all(|s| s.closed))
                && self.notes_complete();
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

/// ` (relayed by rank R)` where `n` came to rank `me` through another rank, else nothing.
fn relayed(n: &AbortNote, me: usize) -> String {
    match n.relayed_by {
        Some(r) if n.origin != me => format!(" (relayed by rank {r})"),
        _ => String::new(),
    }
}

/// Cuts `s` to at most `max` bytes, at a character boundary.
fn cut(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
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

    #[test]
    fn a_cut_inside_a_multibyte_character_keeps_whole_characters() {
        // 'é' is two bytes: a cut at an odd length would fall inside one, where String::truncate panics.
        let mut s = "é".repeat(10);
        cut(&mut s, 7);
        assert_eq!(s, "ééé");
        let mut short = String::from("h1");
        cut(&mut short, 7);
        assert_eq!(short, "h1");
    }

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
    fn a_rank_stopped_while_moving_bytes_answers_its_peers_blame_as_the_one_that_stood_still() {
        // Rank 1 was stopped inside a progress pass (copying a large message), not in a poll or between calls:
        // on resuming, the pass that finds rank 0's note blaming it must already count the stop, or rank 1
        // answers that it was waiting on rank 0 and the two name each other.
        let mut links = mesh(2);
        let l1 = links.pop().unwrap();
        let l0 = links.pop().unwrap();
        let mut t1 = transport(1, l1, Duration::from_secs(4));
        let mut buf = [0u8; 64];
        // SAFETY: buf outlives the request: the transport drops it when poisoned below.
        let _req = unsafe { t1.post_recv(0, buf.as_mut_ptr(), buf.len()) }.unwrap();
        t1.standstill.stopped_for(Duration::from_secs(20));
        let h0 = std::thread::spawn(move || wait_on(0, l0, Duration::from_millis(300), 1));
        let started = Instant::now();
        let err = loop {
            match t1.progress() {
                Err(e) => break e,
                Ok(_) => assert!(started.elapsed() < Duration::from_secs(60), "rank 0's note never came"),
            }
            std::thread::yield_now();
        };
        let m1 = t1.abort(err.during("all_reduce of 64 B")).to_string();
        let m0 = h0.join().unwrap();
        for (r, m) in [(0, &m0), (1, &m1)] {
            assert!(m.ends_with("Culprit: rank 1 (host h1)"), "rank {r}: {m}");
        }
        assert!(m1.contains("stood still"), "{m1}");
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

    /// Writes one abort frame carrying `note` (any JSON) on `sock`, as a rank holding the token could.
    fn send_note(sock: &mut TcpStream, note: serde_json::Value) -> std::io::Result<()> {
        use std::io::Write;
        let body = serde_json::to_vec(&note).unwrap();
        let mut frame = u32::MAX.to_le_bytes().to_vec();
        frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
        frame.extend_from_slice(&[0; 8]);
        frame.extend_from_slice(&body);
        sock.set_nonblocking(false)?;
        sock.write_all(&frame)
    }

    #[test]
    fn a_forged_note_is_refused_and_the_culprit_stays_the_true_one_on_every_rank() {
        // Rank 3 is stopped (the true culprit). Rank 2 holds the token and lies: before anyone gives up it tells
        // rank 1 that rank 0 gave up with a CUDA error (as its own note, and as a relay), and that rank 99999999
        // did. Rank 1 waits on rank 3 for long; rank 0 waits on rank 3 and gives up first.
        let mut links = mesh(4);
        let stopped = links.pop().unwrap();
        let mut liar = links.pop().unwrap();
        let l1 = links.pop().unwrap();
        let l0 = links.pop().unwrap();
        let to1 = &mut liar[1].as_mut().unwrap().1[0];
        let forged = |origin: usize, relayed: Option<usize>| {
            serde_json::json!({
                "origin": origin, "origin_host": "h0", "culprit": null,
                "text": "rank 0: CUDA error 700", "relayed_by": relayed
            })
        };
        send_note(to1, forged(0, None)).unwrap();
        send_note(to1, forged(0, Some(2))).unwrap();
        send_note(to1, forged(99_999_999, Some(2))).unwrap();
        send_note(
            to1,
            serde_json::json!({
                "origin": 2, "origin_host": "h2", "culprit": [99_999_999, "nowhere"], "text": "x"
            }),
        )
        .unwrap();
        let (tx, rx) = mpsc::channel();
        let h1 = std::thread::spawn(move || {
            let mut t = transport(1, l1, Duration::from_secs(60));
            let mut buf = [0u8; 64];
            // SAFETY: buf outlives the request, which the wait below ends.
            let req = unsafe { t.post_recv(3, buf.as_mut_ptr(), buf.len()) }.unwrap();
            let err = t.wait(req).expect_err("rank 0's note stops rank 1");
            let m = t.abort(err).to_string();
            tx.send((m, t.notes_refused())).unwrap();
        });
        let m0 = wait_on(0, l0, Duration::from_millis(300), 3);
        let (m1, refused1) = rx.recv_timeout(Duration::from_secs(60)).expect("rank 1 stops");
        h1.join().unwrap();
        drop((stopped, liar));
        for (r, m) in [(0, &m0), (1, &m1)] {
            assert!(m.ends_with("Culprit: rank 3 (host h3)"), "rank {r}: {m}");
            assert!(
                !m.contains("CUDA error 700") && !m.contains("99999999"),
                "rank {r}: {m}"
            );
        }
        // The note claiming rank 0, the one naming a rank that does not exist and the one blaming one are refused;
        // the relay of rank 0's words is dropped, rank 0 being rank 1's neighbour.
        assert_eq!(refused1, 3, "{m1}");
    }

    #[test]
    fn a_stream_of_notes_does_not_keep_a_rank_past_its_deadline() {
        // Rank 1 streams notes without end, each claiming a new origin. Rank 0 gives up on it and must report
        // within its linger, not once the stream stops; the stream stops on its own only after a minute.
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let mut links = mesh(2);
        let mut streamer = links.pop().unwrap();
        let l0 = links.pop().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let h = std::thread::spawn(move || {
            let sock = &mut streamer[0].as_mut().unwrap().1[0];
            let until = Instant::now() + Duration::from_secs(60);
            let mut sent = 0usize;
            while !stop2.load(Ordering::Relaxed) && Instant::now() < until {
                let note = serde_json::json!({
                    "origin": 2 + sent, "origin_host": "x".repeat(1000), "culprit": [0, "h0"],
                    "text": "y".repeat(60_000)
                });
                // A failed write means rank 0 is gone: it reported.
                if send_note(sock, note).is_err() {
                    break;
                }
                sent += 1;
            }
            Instant::now() < until
        });
        let m = wait_on(0, l0, Duration::from_millis(200), 1);
        stop.store(true, Ordering::Relaxed);
        let ended_before_its_minute = h.join().unwrap();
        assert!(
            ended_before_its_minute,
            "rank 0 reported only after the stream of notes ended: {m}"
        );
        assert!(m.ends_with("Culprit: rank 1 (host h1)"), "{m}");
    }

    /// A note from `origin` blaming `culprit` (itself when `None`), as heard.
    fn note(origin: usize, culprit: Option<usize>) -> AbortNote {
        AbortNote {
            origin,
            origin_host: format!("h{origin}"),
            culprit: culprit.map(|c| (c, format!("h{c}"))),
            phase: None,
            text: format!("rank {origin} gave up"),
            relayed_by: None,
        }
    }

    #[test]
    fn every_rank_holding_the_same_notes_names_the_same_culprit_whichever_it_wrote() {
        // Each case: the notes every rank holds (origin, whom it blames), and the culprit all must name: a rank,
        // or (as `(a, b)`) the link between two.
        type Notes<'a> = &'a [(usize, Option<usize>)];
        let rank = |r| (r, None);
        let link = |a, b| (a, Some(b));
        let cases: [(Notes, (usize, Option<usize>)); 7] = [
            // Every rank gave up waiting on the next (a -T shorter than the work): a cycle, its lowest rank.
            (&[(0, Some(1)), (1, Some(2)), (2, Some(3)), (3, Some(1))], rank(1)),
            // Two ranks each waiting on the other: the link between them; of two such pairs, the lower.
            (&[(0, Some(1)), (1, Some(0)), (2, Some(3)), (3, Some(2))], link(0, 1)),
            // The link between 1 and 3 is cut: each waits on the other, the others on one of them.
            (&[(0, Some(1)), (1, Some(3)), (2, Some(3)), (3, Some(1))], link(1, 3)),
            // A chain of waits ending at a rank that sent nothing (stopped).
            (&[(0, Some(1)), (1, Some(2)), (3, Some(2))], rank(2)),
            // A rank that failed on its own blames itself and ends every chain through it.
            (&[(0, Some(1)), (1, None), (2, Some(0)), (3, Some(2))], rank(1)),
            // Two ranks silent: the lowest.
            (&[(0, Some(3)), (1, Some(2)), (2, None)], rank(2)),
            // A stopped rank ends the chains: a pair waiting on each other beside it is not named.
            (&[(0, Some(2)), (1, Some(3)), (3, Some(1))], rank(2)),
        ];
        let mut links = mesh(4);
        let mut ts: Vec<TcpTransport> = (0..4)
            .rev()
            .map(|r| transport(r, links.pop().unwrap(), Duration::from_secs(60)))
            .collect();
        ts.reverse();
        for (notes, culprit) in cases {
            for (r, t) in ts.iter_mut().enumerate() {
                // Notes arrive in a different order on every rank.
                let mut held: Vec<AbortNote> = notes.iter().map(|&(o, c)| note(o, c)).collect();
                let turn = r % held.len();
                held.rotate_left(turn);
                t.notes = held;
                let named = match t.verdict() {
                    Some(Verdict::Rank(v)) => (v.blamed().0, None),
                    Some(Verdict::Link(a, b)) => (a.origin, Some(b.origin)),
                    None => panic!("rank {r}: no verdict for {notes:?}"),
                };
                assert_eq!(named, culprit, "rank {r}, notes {notes:?}");
            }
        }
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
