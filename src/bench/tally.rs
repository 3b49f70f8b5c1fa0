//! What a run's sweeps add up to: every record, the wrong elements, each path's cost and each rank's peak
//! memory, fed one sweep [`Outcome`] at a time.

use super::Outcome;
use crate::error::stderr;
use crate::results::{PathCost, Record};

/// The sums of a run's sweeps so far.
#[derive(Debug, Default)]
pub struct Tally {
    /// Every record, on rank 0 only.
    pub records: Vec<Record>,
    /// Wrong elements over every sweep, known on every rank.
    pub wrong: u64,
    /// Each path's cost over all its sweeps, in the order paths first finished a sweep (rank 0 only).
    pub costs: Vec<PathCost>,
    /// Each rank's peak resident memory, the largest sample of any sweep; rank 0 only.
    pub peak_rss: Vec<Option<u64>>,
    /// Host memory each path's device runtime took when it opened (bytes; rank 0 only), by path.
    runtime: Vec<(String, u64)>,
    /// Skip notes already said (each is said once per run).
    said: Vec<String>,
}

impl Tally {
    /// Adds one sweep's outcome. A path's first cost takes its connect time and line rate (GB/s, where
    /// known and positive), which later sweeps of the same path share.
    pub fn add(&mut self, outcome: Outcome, connect_s: Option<f64>, line_rates: &[(String, f64)]) {
        super::note_skipped(&mut self.said, outcome.skipped);
        self.records.extend(outcome.records);
        self.peak_rss
            .resize(outcome.peak_rss.len().max(self.peak_rss.len()), None);
        for (acc, p) in self.peak_rss.iter_mut().zip(outcome.peak_rss) {
            *acc = (*acc).max(p);
        }
        self.wrong += outcome.wrong;
        if let Some(c) = &outcome.cost {
            match self.runtime.iter_mut().find(|(p, _)| *p == c.path) {
                Some((_, b)) => *b = (*b).max(outcome.runtime_bytes),
                None => self.runtime.push((c.path.clone(), outcome.runtime_bytes)),
            }
        }
        if let Some(mut c) = outcome.cost {
            match self.costs.iter_mut().find(|t| t.path == c.path) {
                Some(total) => super::cost::add(total, &c),
                None => {
                    c.connect_s = connect_s;
                    c.line_rate_gbs = line_rates.iter().find(|(p, r)| *p == c.path && *r > 0.0).map(|l| l.1);
                    self.costs.push(c);
                }
            }
        }
    }

    /// Host memory the run's device runtimes (CUDA contexts, NCCL's communicator) took when their paths
    /// opened, bytes: each path measured what its own opening added, so they add up. 0 on host memory.
    pub fn runtime_bytes(&self) -> u64 {
        self.runtime.iter().map(|(_, b)| b).sum()
    }

    /// Warns on stderr about every path whose sweeps the CPUs, not the network, paced.
    pub fn warn_cpu_limited(&self) {
        for c in &self.costs {
            if let Some(w) = super::cost::warning(c) {
                stderr!("collbench: warning: {w}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_add_up_and_a_paths_first_cost_takes_its_connect_time_and_line_rate() {
        let cost = |path: &str, s: f64| PathCost {
            path: path.into(),
            line_rate_gbs: None,
            connect_s: None,
            first_collective_us: 0.0,
            sweep_s: s,
            cpu_s: 0.0,
            gb_moved: 0.0,
            cpu_s_per_gb: None,
            busiest_host: String::new(),
            host_cpu_pct: 0.0,
            throttled_s: None,
            throttled_periods: None,
            host_busy_pct: None,
            cpu_limited: false,
        };
        let mut t = Tally::default();
        let rates = vec![("tcp@lo".to_string(), 1.25), ("mpi".to_string(), 0.0)];
        t.add(
            Outcome {
                wrong: 2,
                cost: Some(cost("tcp@lo", 1.0)),
                peak_rss: vec![Some(10), None],
                ..Outcome::default()
            },
            Some(0.5),
            &rates,
        );
        t.add(
            Outcome {
                wrong: 1,
                cost: Some(cost("tcp@lo", 2.0)),
                peak_rss: vec![Some(5), Some(7), Some(1)],
                runtime_bytes: 200,
                ..Outcome::default()
            },
            Some(9.0),
            &rates,
        );
        t.add(
            Outcome {
                cost: Some(cost("mpi", 4.0)),
                runtime_bytes: 30,
                ..Outcome::default()
            },
            None,
            &rates,
        );
        assert_eq!(t.wrong, 3);
        assert_eq!(t.peak_rss, vec![Some(10), Some(7), Some(1)]);
        // Each path's opening measured its own runtime once, however many sweeps report it: they add up.
        assert_eq!(t.runtime_bytes(), 230);
        assert_eq!(t.costs.len(), 2);
        assert_eq!((t.costs[0].sweep_s, t.costs[0].connect_s), (3.0, Some(0.5)));
        assert_eq!(t.costs[0].line_rate_gbs, Some(1.25));
        // A zero rate is unknown, not zero.
        assert_eq!((t.costs[1].connect_s, t.costs[1].line_rate_gbs), (None, None));
    }
}
