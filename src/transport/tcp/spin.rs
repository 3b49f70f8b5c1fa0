//! The polling phase of a wait. A peer's next bytes often arrive within microseconds, sooner than a sleeping
//! rank would be woken and scheduled again, so a wait first polls (yielding the CPU between polls, so ranks
//! sharing cores still run) and only then sleeps in poll(2).
//!
//! How long it polls adapts to what the waits meet ([`SpinBudget`]): a wait for bytes a paced link delivers
//! over milliseconds sleeps anyway, and polling first only burns a core's time that ranks sharing it need.

use std::time::{Duration, Instant};

/// The shortest budget the adaptation cuts to (or `--spin`, if smaller): a wait still catches a reply that
/// comes within a scheduling slice without sleeping, and a wait that does so doubles the budget again.
pub(super) const MIN_SPIN: Duration = Duration::from_micros(50);

/// How long the next wait polls before it sleeps: `--spin` at first and while waits end within their polling;
/// halved after each wait that had to sleep right after another that did (down to [`MIN_SPIN`]), doubled after
/// each that ended while still polling. Small messages keep the whole budget (their waits end while polling,
/// and one late partner does not cut it); the waits of a transfer that takes milliseconds sleep one after
/// another and soon poll for [`MIN_SPIN`] only, so they no longer cost a core's time per call.
#[derive(Clone, Copy, Debug)]
pub(super) struct SpinBudget {
    max: Duration,
    now: Duration,
    /// The last counted wait slept.
    slept_last: bool,
}

/// How a wait ended, as its budget counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// Done before it ever polled in vain: says nothing about the budget.
    AtOnce,
    /// Done while it was still polling: polling paid.
    WhilePolling,
    /// It polled its whole budget and slept.
    AfterSleeping,
}

impl SpinBudget {
    /// A budget of at most `max` (`--spin`; zero never polls).
    pub(super) fn new(max: Duration) -> Self {
        SpinBudget {
            max,
            now: max,
            slept_last: false,
        }
    }

    /// How long the next wait polls.
    pub(super) fn current(&self) -> Duration {
        self.now
    }

    /// Counts a wait that ended as `ended`.
    pub(super) fn record(&mut self, ended: Ended) {
        match ended {
            Ended::AtOnce => {}
            Ended::WhilePolling => {
                self.now = (self.now * 2).min(self.max);
                self.slept_last = false;
            }
            Ended::AfterSleeping if self.slept_last => self.now = (self.now / 2).max(MIN_SPIN.min(self.max)),
            Ended::AfterSleeping => self.slept_last = true,
        }
    }
}

/// One wait's polling: `keep_spinning` until its budget is spent.
pub(super) struct Spin {
    budget: Duration,
    since: Option<Instant>,
    slept: bool,
}

impl Spin {
    pub(super) fn new(budget: Duration) -> Self {
        Spin {
            budget,
            since: None,
            slept: false,
        }
    }

    /// Nothing moved: whether to poll again (after yielding) rather than sleep. Once it says sleep, the wait
    /// counts as one that slept.
    pub(super) fn keep_spinning(&mut self) -> bool {
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        if !self.budget.is_zero() && now.duration_since(since) < self.budget {
            std::thread::yield_now();
            true
        } else {
            self.slept = true;
            false
        }
    }

    /// How the wait ended, once it is done.
    pub(super) fn ended(&self) -> Ended {
        match (self.since, self.slept) {
            (_, true) => Ended::AfterSleeping,
            (Some(_), false) => Ended::WhilePolling,
            (None, false) => Ended::AtOnce,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::tcp::{PeerAddr, TcpConfig, TcpTransport};
    use crate::transport::Transport;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn waits_that_sleep_in_a_row_halve_the_budget_down_to_the_floor_and_waits_caught_polling_restore_it() {
        let mut b = SpinBudget::new(MS);
        assert_eq!(b.current(), MS);
        b.record(Ended::AfterSleeping);
        assert_eq!(b.current(), MS, "one late partner does not cut it");
        b.record(Ended::WhilePolling);
        b.record(Ended::AfterSleeping);
        assert_eq!(b.current(), MS, "nor does one now and then");
        b.record(Ended::AfterSleeping);
        assert_eq!(b.current(), Duration::from_micros(500));
        for _ in 0..10 {
            b.record(Ended::AfterSleeping);
        }
        assert_eq!(b.current(), MIN_SPIN);
        b.record(Ended::AtOnce);
        assert_eq!(b.current(), MIN_SPIN, "a wait that never polled says nothing");
        b.record(Ended::WhilePolling);
        assert_eq!(b.current(), MIN_SPIN * 2);
        for _ in 0..10 {
            b.record(Ended::WhilePolling);
        }
        assert_eq!(b.current(), MS, "never above --spin");
    }

    #[test]
    fn a_spin_below_the_floor_or_zero_is_kept_as_given() {
        let mut zero = SpinBudget::new(Duration::ZERO);
        for _ in 0..3 {
            zero.record(Ended::AfterSleeping);
        }
        zero.record(Ended::WhilePolling);
        assert_eq!(zero.current(), Duration::ZERO, "--spin 0 never polls");
        let small = Duration::from_micros(20);
        let mut b = SpinBudget::new(small);
        for _ in 0..3 {
            b.record(Ended::AfterSleeping);
        }
        assert_eq!(b.current(), small);
    }

    /// Rank `rank`'s transport over one loopback connection to rank `1 - rank`.
    fn transport(rank: usize, sock: std::net::TcpStream) -> TcpTransport {
        sock.set_nonblocking(true).unwrap();
        let peer = PeerAddr {
            rank: 1 - rank,
            host: format!("h{}", 1 - rank),
            addr: sock.peer_addr().unwrap(),
        };
        let mut links: Vec<Option<(PeerAddr, Vec<std::net::TcpStream>)>> = vec![None, None];
        links[1 - rank] = Some((peer, vec![sock]));
        let cfg = TcpConfig {
            streams: 1,
            stripe_min: usize::MAX,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            spin: MS,
            sndbuf: None,
            congestion: None,
        };
        TcpTransport::new(rank, format!("h{rank}"), "lo".into(), "tcp".into(), links, cfg)
    }

    #[test]
    fn a_transports_waits_count_in_its_budget() {
        // Rank 0's budget starts spent (zero), so a wait that finds nothing to do sleeps at once; a reply
        // from another thread's rank cannot be there at a wait's first look every time in 20 round trips.
        // Two such waits in a row halve the budget, which lifts it to the floor (and waits that then end while
        // polling double it): counted, the waits leave it above zero.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        const ROUNDS: usize = 20;
        let echo = std::thread::spawn(move || {
            let mut t = transport(1, s);
            let mut buf = [0u8; 8];
            for _ in 0..ROUNDS {
                // SAFETY: buf outlives each request, which the wait after it ends.
                let req = unsafe { t.post_recv(0, buf.as_mut_ptr(), buf.len()) }.unwrap();
                t.wait(req).unwrap();
                // SAFETY: as above.
                let req = unsafe { t.post_send(0, buf.as_ptr(), buf.len()) }.unwrap();
                t.wait(req).unwrap();
            }
        });
        let mut t = transport(0, c);
        t.spin = SpinBudget {
            max: MS,
            now: Duration::ZERO,
            slept_last: false,
        };
        for i in 0..ROUNDS {
            let mut buf = [i as u8; 8];
            // SAFETY: buf outlives each request, which the wait after it ends.
            let req = unsafe { t.post_send(1, buf.as_ptr(), buf.len()) }.unwrap();
            t.wait(req).unwrap();
            buf = [0; 8];
            // SAFETY: as above.
            let req = unsafe { t.post_recv(1, buf.as_mut_ptr(), buf.len()) }.unwrap();
            t.wait(req).unwrap();
            assert_eq!(buf, [i as u8; 8]);
        }
        echo.join().unwrap();
        assert!(t.spin.current() >= MIN_SPIN, "the waits were not counted");
    }

    #[test]
    fn a_wait_tells_whether_it_ended_at_once_while_polling_or_after_sleeping() {
        assert_eq!(Spin::new(MS).ended(), Ended::AtOnce);
        let mut polling = Spin::new(Duration::from_secs(60));
        assert!(polling.keep_spinning());
        assert_eq!(polling.ended(), Ended::WhilePolling);
        let mut spent = Spin::new(Duration::ZERO);
        assert!(!spent.keep_spinning());
        assert_eq!(spent.ended(), Ended::AfterSleeping);
    }
}
