//! Whether this rank itself stood still: stopped (SIGSTOP, a debugger, a job-control stop) or given no CPU
//! while its peers waited on it. Seen from the transport's own clocks: wall time that passed outside its calls
//! (or in a poll(2) past its timeout) without this process using the CPU. Work done between calls (checking
//! results, writing files) uses the CPU and is no stand-still. A rank that stood still through its peers'
//! deadline and then hears them blame it is the culprit, not the link it finds closed when it resumes.

use std::time::{Duration, Instant};

/// The shortest stand-still recorded: shorter gaps are scheduling noise.
const SHORTEST: Duration = Duration::from_millis(500);

/// The longest one poll(2) sleeps: a stop inside a poll counts only beyond the poll's timeout, so a poll as
/// long as the wait deadline would hide a stop as long as the peers' patience. Well under [`SHORTEST`].
const POLL_SLICE: Duration = Duration::from_millis(200);

/// The timeout of the next poll(2) toward `deadline`, in its milliseconds: at most [`POLL_SLICE`], at least 1.
pub(super) fn poll_timeout(deadline: Instant, now: Instant) -> Duration {
    deadline
        .saturating_duration_since(now)
        .clamp(Duration::from_millis(1), POLL_SLICE)
}

/// How often the process's CPU time is read at most: a system call, kept off the per-message path.
const CPU_SAMPLE: Duration = Duration::from_millis(100);

/// The transport's view of its own pauses.
#[derive(Debug)]
pub(super) struct Standstill {
    /// When the transport was last known to be running: its last return to the caller, or just before a poll.
    alive_at: Instant,
    /// The process's CPU time read at most [`CPU_SAMPLE`] before `alive_at`, and when it was read.
    cpu: (Duration, Instant),
    /// The latest stand-still (how long, when it ended).
    last: Option<(Duration, Instant)>,
}

/// CPU time used by this process so far (every thread); zero where it cannot be read, which counts every
/// gap as a stand-still, as before CPU time was consulted.
fn process_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl Standstill {
    pub(super) fn new() -> Self {
        let now = Instant::now();
        Standstill {
            alive_at: now,
            cpu: (process_cpu(), now),
            last: None,
        }
    }

    /// The transport runs again after `expected` away (a poll's timeout; zero on entry from the caller): the
    /// time beyond it, less the CPU this process used meanwhile, was a stand-still.
    pub(super) fn resumed(&mut self, expected: Duration) {
        let now = Instant::now();
        let away = now.saturating_duration_since(self.alive_at).saturating_sub(expected);
        if away >= SHORTEST {
            let cpu = process_cpu();
            let gap = away.saturating_sub(cpu.saturating_sub(self.cpu.0));
            if gap >= SHORTEST {
                self.last = Some((gap, now));
            }
            self.cpu = (cpu, now);
        }
        self.alive_at = now;
    }

    /// The transport is running now (returning to the caller, or about to poll).
    pub(super) fn alive(&mut self) {
        let now = Instant::now();
        if now.saturating_duration_since(self.cpu.1) >= CPU_SAMPLE {
            self.cpu = (process_cpu(), now);
        }
        self.alive_at = now;
    }

    /// As if this process had been stopped for `d` just now, since it was last known running (tests only).
    #[cfg(test)]
    pub(super) fn stopped_for(&mut self, d: Duration) {
        self.alive_at -= d;
        self.cpu.1 -= d;
    }

    /// The latest stand-still, if it lasted at least `at_least` and ended within `within` of now.
    pub(super) fn recent(&self, at_least: Duration, within: Duration) -> Option<Duration> {
        self.last
            .filter(|(gap, ended)| *gap >= at_least && ended.elapsed() <= within)
            .map(|(gap, _)| gap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_beyond_what_was_expected_without_cpu_is_a_stand_still() {
        let mut s = Standstill::new();
        s.alive_at -= Duration::from_secs(5);
        s.resumed(Duration::from_secs(1));
        let gap = s.recent(Duration::from_secs(2), Duration::from_secs(60)).unwrap();
        // Less the little CPU this test process used meanwhile.
        assert!(gap > Duration::from_secs(3) && gap < Duration::from_secs(5), "{gap:?}");
        assert_eq!(
            s.recent(Duration::from_secs(5), Duration::from_secs(60)),
            None,
            "shorter than asked"
        );
    }

    #[test]
    fn a_gap_spent_computing_is_not_a_stand_still() {
        let mut s = Standstill::new();
        let mut x = 0u64;
        // Work outside the transport's calls: CPU time well over the shortest stand-still, however long a
        // loaded machine takes to give it.
        while process_cpu().saturating_sub(s.cpu.0) < 2 * SHORTEST {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        // Left as the work began: the gap is all work (wall time counted as only the CPU time used).
        let used = process_cpu().saturating_sub(s.cpu.0);
        s.alive_at = Instant::now() - used;
        s.resumed(Duration::ZERO);
        assert_eq!(
            s.recent(Duration::ZERO, Duration::from_secs(60)),
            None,
            "{used:?} of work counted"
        );
    }

    #[test]
    fn a_stop_inside_a_poll_toward_a_far_deadline_is_a_stand_still() {
        // Stopped just after entering a poll toward a deadline 3 s away, resumed 4 s later as the peers
        // that gave up on it leave: the whole stop counts, not the 1 s beyond the deadline.
        let mut s = Standstill::new();
        let now = Instant::now();
        let timeout = poll_timeout(now + Duration::from_secs(3), now);
        s.alive_at -= Duration::from_secs(4);
        s.resumed(timeout);
        assert!(
            s.recent(Duration::from_secs(3), Duration::from_secs(60)).is_some(),
            "{timeout:?} taken as the poll's own"
        );
    }

    #[test]
    fn a_poll_that_took_its_timeout_is_not_a_stand_still() {
        let mut s = Standstill::new();
        s.alive_at -= Duration::from_secs(3);
        s.resumed(Duration::from_secs(10));
        assert_eq!(s.recent(Duration::ZERO, Duration::from_secs(60)), None);
    }

    #[test]
    fn an_old_stand_still_no_longer_counts() {
        let mut s = Standstill::new();
        s.last = Some((Duration::from_secs(9), Instant::now() - Duration::from_secs(30)));
        assert_eq!(s.recent(Duration::from_secs(1), Duration::from_secs(10)), None);
        assert!(s.recent(Duration::from_secs(1), Duration::from_secs(60)).is_some());
    }
}
