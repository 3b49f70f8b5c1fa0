//! One sweep far off its siblings: the same points, measured again minutes apart, where one sweep took several
//! times as long as the others. The median over sweeps would absorb it; an intermittent link (a port that goes
//! down now and then, a burst of loss upstream) looks exactly like this, so it is a finding to explain, not
//! noise to average. With a carrier loss or retransmission timeouts in the hosts' evidence it fails, cause the
//! link; without, it warns (a burst of other work on the hosts does the same).

use super::cause::Cause;
use super::evidence::HostEvidence;
use super::measure::Sample;
use super::verdict::{bare_check, Check, Verdict};

/// A point of one sweep is off when it took this many times the other sweeps' median...
pub const OFF_VS_MEDIAN: f64 = 3.0;
/// ...and this many times the slowest other sweep (one slow sibling is not a pattern)...
pub const OFF_VS_SLOWEST: f64 = 2.0;
/// ...and lost at least this many seconds over its timed calls (tiny points jitter by large factors).
pub const MIN_LOST_S: f64 = 0.2;

/// A point of a sweep far off its siblings.
#[derive(Clone, Debug, PartialEq)]
pub struct OffPoint {
    pub collective: String,
    pub size: u64,
    pub repeat: u32,
    pub time_us: f64,
    /// The other sweeps' median time of the point.
    pub others_us: f64,
    /// Seconds lost over the point's timed calls.
    pub lost_s: f64,
}

/// The points of `path` in `samples` whose sweep is far off the others' (three sweeps or more needed).
pub fn off_points(path: &str, samples: &[Sample]) -> Vec<OffPoint> {
    let mine: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.path == path && s.time_us.is_finite())
        .collect();
    let mut out = Vec::new();
    for s in &mine {
        let others: Vec<f64> = mine
            .iter()
            .filter(|o| o.collective == s.collective && o.size == s.size && o.repeat != s.repeat)
            .map(|o| o.time_us)
            .collect();
        if others.len() < 2 {
            continue;
        }
        let mut sorted = others.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[sorted.len() / 2];
        let slowest = sorted[sorted.len() - 1];
        let lost_s = (s.time_us - median) * 1e-6 * f64::from(s.iters.max(1));
        if s.time_us > OFF_VS_MEDIAN * median && s.time_us > OFF_VS_SLOWEST * slowest && lost_s >= MIN_LOST_S {
            out.push(OffPoint {
                collective: s.collective.clone(),
                size: s.size,
                repeat: s.repeat,
                time_us: s.time_us,
                others_us: median,
                lost_s,
            });
        }
    }
    out
}

/// One check per sweep of `path` with points far off the other sweeps; `seen` is every host's evidence over
/// the collectives, which decides between FAIL (the link: a carrier lost, retransmission timeouts) and WARN.
pub fn checks(path: &str, samples: &[Sample], seen: &[HostEvidence]) -> Vec<Check> {
    let off = off_points(path, samples);
    let mut sweeps: Vec<u32> = off.iter().map(|o| o.repeat).collect();
    sweeps.sort_unstable();
    sweeps.dedup();
    let downs: Vec<&HostEvidence> = seen.iter().filter(|e| e.link_downs.is_some_and(|d| d > 0)).collect();
    // A host losing packets all along explains timeouts in any sweep: its own check names it.
    let lossy: Vec<&HostEvidence> = seen
        .iter()
        .filter(|e| e.tcp.is_some_and(|t| t.loss_share() >= super::cause::LOSS_SHARE))
        .collect();
    let rto: Vec<&HostEvidence> = seen.iter().filter(|e| e.tcp.is_some_and(|t| t.timeouts > 0)).collect();
    sweeps
        .into_iter()
        .map(|r| {
            let pts: Vec<&OffPoint> = off.iter().filter(|o| o.repeat == r).collect();
            let lost: f64 = pts.iter().map(|o| o.lost_s).sum();
            let worst = pts
                .iter()
                .max_by(|a, b| (a.time_us / a.others_us).total_cmp(&(b.time_us / b.others_us)))
                .expect("a sweep listed has a point");
            let measured = format!(
                "{} point(s) {:.1}-{:.1}x the other sweeps' median, {lost:.2} s lost (worst: {} at {})",
                pts.len(),
                pts.iter()
                    .map(|o| o.time_us / o.others_us)
                    .fold(f64::INFINITY, f64::min),
                worst.time_us / worst.others_us,
                worst.collective,
                crate::sizes::format_size(worst.size),
            );
            let name = format!("{path} sweep {} against the others", r + 1);
            // A carrier lost names its host; retransmission timeouts do not: the partners of a host whose link
            // went down wait them out too, so they would blame healthy senders.
            let timeouts: u64 = rto.iter().map(|e| e.tcp.map_or(0, |t| t.timeouts)).sum();
            let (verdict, cause, why, evidence) = if !downs.is_empty() {
                let who: Vec<String> = downs
                    .iter()
                    .map(|e| format!("{} lost its carrier {} time(s)", e.host, e.link_downs.unwrap_or(0)))
                    .collect();
                (
                    Verdict::Fail,
                    Some(Cause::Link),
                    format!(
                        "one sweep far off the others while {}: an intermittent link, which the median over sweeps \
                         would hide; see the check of its link",
                        who.join(", ")
                    ),
                    downs.iter().map(|e| (*e).clone()).collect(),
                )
            } else if timeouts > 0 && lossy.is_empty() {
                (
                    Verdict::Fail,
                    Some(Cause::Link),
                    format!(
                        "one sweep far off the others, with {timeouts} retransmission timeout(s) across {} host(s) \
                         and no carrier lost on any: an intermittent fault on the way (bursts of loss, a port \
                         upstream going down), which the median over sweeps would hide; `collbench pairwise` on \
                         these hosts names the link",
                        rto.len()
                    ),
                    seen.to_vec(),
                )
            } else {
                (
                    Verdict::Warn,
                    None,
                    if lossy.is_empty() {
                        "one sweep far off the others, with no carrier lost and no retransmission timeout on any \
                         host: a burst of other work on the hosts, or a fault the counters do not see; the verdict \
                         judges the median over sweeps (a warning, not a failure)"
                            .to_string()
                    } else {
                        "one sweep far off the others while a host was losing packets all along (see the check \
                         naming it): its retransmission timeouts fall in some sweeps more than others (a warning, \
                         not a failure)"
                            .to_string()
                    },
                    seen.to_vec(),
                )
            };
            Check {
                cause,
                evidence,
                ..bare_check(
                    name,
                    path,
                    measured,
                    format!("each point under {OFF_VS_MEDIAN}x the other sweeps' median"),
                    "the sweeps against each other (built in)".into(),
                    verdict,
                    why,
                )
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::preflight::evidence::TcpCounters;

    fn sample(repeat: u32, size: u64, time_us: f64) -> Sample {
        Sample {
            path: "tcp@eth0".into(),
            collective: "all_reduce".into(),
            size,
            repeat,
            time_us,
            ci95_us: 0.0,
            busbw: 0.0,
            p99_us: time_us,
            iters: 5,
            wrong: 0,
        }
    }

    /// Three sweeps of two points; sweep `bad` (if any) takes `factor` times as long at 4 MiB.
    fn sweeps(bad: Option<u32>, factor: f64) -> Vec<Sample> {
        (0..3)
            .flat_map(|r| {
                let f = if Some(r) == bad {
                    factor
                } else {
                    1.0 + 0.05 * f64::from(r)
                };
                [sample(r, 8, 50.0), sample(r, 4 << 20, 100_000.0 * f)]
            })
            .collect()
    }

    #[test]
    fn a_sweep_far_off_fails_as_the_link_where_a_carrier_was_lost() {
        let s = sweeps(Some(1), 10.0);
        let off = off_points("tcp@eth0", &s);
        assert_eq!(off.len(), 1, "{off:?}");
        assert_eq!((off[0].repeat, off[0].size), (1, 4 << 20));
        let mut h2 = HostEvidence {
            host: "h2".into(),
            link_downs: Some(2),
            ..Default::default()
        };
        h2.config.iface = "eth0".into();
        let seen = [
            HostEvidence {
                host: "h0".into(),
                ..Default::default()
            },
            h2,
        ];
        let c = checks("tcp@eth0", &s, &seen);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, "tcp@eth0 sweep 2 against the others");
        assert_eq!((c[0].verdict, c[0].cause), (Verdict::Fail, Some(Cause::Link)));
        assert!(c[0].detail.contains("h2 lost its carrier 2 time(s)"), "{}", c[0].detail);
        assert!(!c[0].detail.contains("h0"), "{}", c[0].detail);
        assert_eq!(c[0].evidence.len(), 1);
        // Timeouts alone are evidence too.
        let rto = [HostEvidence {
            host: "h3".into(),
            tcp: Some(TcpCounters {
                timeouts: 4,
                ..Default::default()
            }),
            ..Default::default()
        }];
        let c = checks("tcp@eth0", &s, &rto);
        assert_eq!(c[0].verdict, Verdict::Fail);
        assert!(!c[0].detail.contains("h3"), "a timeout names nobody: {}", c[0].detail);
        // Timeouts where a host was losing packets all along: that host's check explains them.
        let lossy = [HostEvidence {
            host: "h3".into(),
            tcp: Some(TcpCounters {
                timeouts: 4,
                out_segs: 1000,
                retrans_segs: 100,
                ..Default::default()
            }),
            ..Default::default()
        }];
        let c = checks("tcp@eth0", &s, &lossy);
        assert_eq!((c[0].verdict, c[0].cause), (Verdict::Warn, None));
        assert!(c[0].detail.contains("losing packets"), "{}", c[0].detail);
        // Without either, a warning.
        let quiet = [HostEvidence::default()];
        let c = checks("tcp@eth0", &s, &quiet);
        assert_eq!((c[0].verdict, c[0].cause), (Verdict::Warn, None));
    }

    #[test]
    fn sweeps_alike_small_points_or_two_sweeps_are_no_finding() {
        assert!(off_points("tcp@eth0", &sweeps(None, 1.0)).is_empty());
        // 2.5x is within what a busy host does to a point.
        assert!(off_points("tcp@eth0", &sweeps(Some(2), 2.5)).is_empty());
        // 8 B points 20x slower lose microseconds: noise.
        let mut s = sweeps(None, 1.0);
        s[0].time_us = 1000.0;
        assert!(off_points("tcp@eth0", &s).is_empty());
        // Two sweeps cannot say which is off.
        let two: Vec<Sample> = sweeps(Some(1), 10.0).into_iter().filter(|x| x.repeat < 2).collect();
        assert!(off_points("tcp@eth0", &two).is_empty());
        assert!(off_points("tcp@ib0", &sweeps(Some(1), 10.0)).is_empty());
    }
}
