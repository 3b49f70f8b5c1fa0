//! Whether this rank itself stood still: stopped (SIGSTOP, a debugger, a job-control stop) or starved of CPU
//! while its peers waited on it. Seen from the transport's own clock: time that passed outside its calls, or a
//! poll(2) that returned long after its timeout. A rank that stood still through its peers' deadline and then
//! hears them blame it is the culprit, not the link it finds closed when it resumes.

use std::time::{Duration, Instant};

/// The shortest stand-still recorded: shorter gaps are scheduling noise.
const SHORTEST: Duration = Duration::from_millis(500);

/// The transport's view of its own pauses.
#[derive(Debug)]
pub(super) struct Standstill {
    /// When the transport was last known to be running: its last return to the caller, or just before a poll.
    alive_at: Instant,
    /// The latest stand-still (how long, when it ended).
    last: Option<(Duration, Instant)>,
}

impl Standstill {
    pub(super) fn new() -> Self {
        Standstill {
            alive_at: Instant::now(),
            last: None,
        }
    }

    /// The transport runs again after `expected` away (a poll's timeout; zero on entry from the caller): any
    /// time beyond it was a stand-still.
    pub(super) fn resumed(&mut self, expected: Duration) {
        let now = Instant::now();
        let gap = now.saturating_duration_since(self.alive_at).saturating_sub(expected);
        if gap >= SHORTEST {
            self.last = Some((gap, now));
        }
        self.alive_at = now;
    }

    /// The transport is running now (returning to the caller, or about to poll).
    pub(super) fn alive(&mut self) {
        self.alive_at = Instant::now();
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
    fn a_gap_beyond_what_was_expected_is_a_stand_still() {
        let mut s = Standstill::new();
        s.alive_at -= Duration::from_secs(5);
        s.resumed(Duration::from_secs(1));
        let gap = s.recent(Duration::from_secs(2), Duration::from_secs(60)).unwrap();
        assert!(gap >= Duration::from_secs(4) && gap < Duration::from_secs(5), "{gap:?}");
        assert_eq!(
            s.recent(Duration::from_secs(5), Duration::from_secs(60)),
            None,
            "shorter than asked"
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
