//! One link's ping-pong latency as statistics, shared by the pairwise test and `p2p`.

use serde::{Deserialize, Serialize};

/// One link's ping-pong: half round trips in microseconds (min, mean, percentiles, max) and the messages
/// per second it carried, as perftest's `ib_write_lat` and OSU's `osu_latency` report them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Timed round trips the statistics are over.
    pub samples: usize,
    pub min_us: f64,
    pub avg_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// The 99.9th percentile (nearest rank, as p99) (with fewer than 1000 samples, the largest but the top 0.1%: the maximum).
    pub p999_us: f64,
    pub max_us: f64,
    /// Messages per second, both directions together: two per round trip over the round trips' time.
    pub msg_rate: f64,
}

impl LatencyStats {
    /// The statistics of round trips `rtt_s` (seconds; sorted in place); `None` when there are none.
    pub fn of_round_trips(rtt_s: &mut [f64]) -> Option<LatencyStats> {
        if rtt_s.is_empty() {
            return None;
        }
        rtt_s.sort_by(f64::total_cmp);
        let n = rtt_s.len();
        let half_us = |x: f64| x / 2.0 * 1e6;
        // Nearest rank: the smallest sample with at least q of them at or below it.
        let pct = |q: f64| half_us(rtt_s[((q * n as f64).ceil() as usize).clamp(1, n) - 1]);
        let total: f64 = rtt_s.iter().sum();
        Some(LatencyStats {
            samples: n,
            min_us: half_us(rtt_s[0]),
            avg_us: half_us(total / n as f64),
            // The median as the link's `latency_us` takes it (the middle two averaged), so the two agree.
            p50_us: half_us(if n % 2 == 1 {
                rtt_s[n / 2]
            } else {
                (rtt_s[n / 2 - 1] + rtt_s[n / 2]) / 2.0
            }),
            p99_us: pct(0.99),
            p999_us: pct(0.999),
            max_us: half_us(rtt_s[n - 1]),
            msg_rate: if total > 0.0 { 2.0 * n as f64 / total } else { 0.0 },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_statistics_are_half_round_trips_by_nearest_rank() {
        // 1000 round trips of 2..=2000 us: half of them is 1..=1000 us.
        let mut rtt: Vec<f64> = (1..=1000).rev().map(|i| 2.0 * i as f64 * 1e-6).collect();
        let st = LatencyStats::of_round_trips(&mut rtt).unwrap();
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(near(st.min_us, 1.0) && near(st.max_us, 1000.0), "{st:?}");
        assert!(
            near(st.p50_us, 500.5) && near(st.p99_us, 990.0) && near(st.p999_us, 999.0),
            "{st:?}"
        );
        assert!(near(st.avg_us, 500.5), "{st:?}");
        // 2000 messages over the sum of the round trips (1.001 s).
        assert!(near(st.msg_rate, 2000.0 / 1.001), "{st:?}");
        assert_eq!(LatencyStats::of_round_trips(&mut []), None);
    }
}
