//! The pairwise test as OpenMetrics text (`pairwise --metrics FILE`): the verdict, every link's bandwidth
//! (each direction), latency and stalls, and the findings, under the stable names docs/metrics.md lists. A
//! pure function of the report.

use super::{Finding, Metric, PairwiseReport};
use crate::report::openmetrics::{build_info, render, Family};

/// The exposition of `r`, written at `now_s` (seconds since the Unix epoch).
pub fn text(r: &PairwiseReport, now_s: f64) -> String {
    let path = || ("path", r.path.clone());
    let mut verdict = Family::new(
        "collbench_pairwise_verdict",
        "The pairwise test's verdict: 1 for the one reached, 0 for the others (warn: findings among ranks of one host).",
        None,
    );
    verdict.states(vec![path()], "verdict", &["pass", "warn", "fail"], r.verdict());
    let mut parts = Family::new(
        "collbench_pairwise_participants",
        "Hosts (or ranks, where pairs are ranks) measured.",
        None,
    );
    parts.push(vec![path(), ("unit", r.unit.clone())], r.hosts.len() as f64);
    let mut took = Family::new(
        "collbench_pairwise_duration_seconds",
        "Seconds from the first round to the last.",
        Some("seconds"),
    );
    took.push(vec![path()], r.elapsed_s);
    let mut when = Family::new(
        "collbench_pairwise_timestamp_seconds",
        "When this file was written (Unix time).",
        Some("seconds"),
    );
    when.push(vec![path()], now_s);
    let mut bw = Family::new(
        "collbench_pairwise_link_bandwidth_bytes_per_second",
        "Bytes per second from src to dst while dst sent to src at the same time, as dst received them.",
        Some("bytes_per_second"),
    );
    let mut lat = Family::new(
        "collbench_pairwise_link_latency_seconds",
        "Half the median 8-byte round trip between a and b.",
        Some("seconds"),
    );
    let mut stalls = Family::new(
        "collbench_pairwise_link_stalls",
        "8-byte round trips between a and b that stalled (a retransmission timeout, or a rank that answered late).",
        None,
    );
    for l in &r.links {
        let dir = |src: &str, dst: &str| vec![path(), ("src", src.to_string()), ("dst", dst.to_string())];
        bw.push(dir(&l.a_name, &l.b_name), l.bw_ab_gbs * 1e9);
        bw.push(dir(&l.b_name, &l.a_name), l.bw_ba_gbs * 1e9);
        let pair = || vec![path(), ("a", l.a_name.clone()), ("b", l.b_name.clone())];
        lat.push(pair(), l.latency_us * 1e-6);
        stalls.push(pair(), l.stalls as f64);
    }
    let mut findings = Family::new(
        "collbench_pairwise_finding",
        "A slow host (host set, peer empty) or a slow link (host and peer) the test names, by metric.",
        None,
    );
    for f in &r.findings {
        let (kind, host, peer, metric) = match f {
            Finding::SlowHost { host, metric, .. } => ("slow_host", host.clone(), String::new(), *metric),
            Finding::SlowLink { a, b, metric, .. } => ("slow_link", a.clone(), b.clone(), *metric),
        };
        let metric = match metric {
            Metric::Bandwidth => "bandwidth",
            Metric::Latency => "latency",
            Metric::Stalls => "stalls",
        };
        findings.push(
            vec![
                path(),
                ("kind", kind.to_string()),
                ("metric", metric.to_string()),
                ("host", host),
                ("peer", peer),
            ],
            1.0,
        );
    }
    let mut count = Family::new("collbench_pairwise_findings", "How many findings the test names.", None);
    count.push(vec![path()], r.findings.len() as f64);
    render(&[
        verdict,
        parts,
        took,
        when,
        bw,
        lat,
        stalls,
        findings,
        count,
        build_info(),
    ])
}
