//! The pairwise report as text: a header, host x host matrices of bandwidth and latency, the findings.

use std::fmt::Write;

use super::{Finding, LatencyStats, Link, Metric, PairwiseReport};
use crate::sizes::format_size;
use crate::units::BwUnit;
use crate::validate::wrap::{prefixed, WIDTH};

/// Links listed one by one in the latency statistics: the worst by p99 (all of them in the JSON).
pub const WORST_LINKS: usize = 5;
/// The most hosts whose matrices stdout shows; beyond, the heatmaps (`--plot`) and the JSON (`-J`) carry them.
pub const MAX_MATRIX_HOSTS: usize = 16;
/// Findings listed one by one per kind (slow hosts, slow links, not confirmed); the rest are counted (and
/// all of them are in the JSON), so a 1,000-host report stays a screen long.
pub const MAX_LISTED: usize = 12;

/// Cells of a host x host matrix: `cell(row, col)` for row != col; the diagonal is `-`.
fn matrix(names: &[String], title: &str, cell: impl Fn(usize, usize) -> Option<f64>, decimals: usize) -> String {
    let w = names.iter().map(String::len).max().unwrap_or(0).max(9);
    let mut s = format!("# {title}\n{:>w$}", "");
    for n in names {
        let _ = write!(s, " {n:>w$}");
    }
    s.push('\n');
    for (r, rn) in names.iter().enumerate() {
        let _ = write!(s, "{rn:>w$}");
        for c in 0..names.len() {
            let text = match (r == c, cell(r, c)) {
                (true, _) => "-".to_string(),
                (false, Some(v)) if v.is_finite() => format!("{v:.decimals$}"),
                (false, _) => "n/a".to_string(),
            };
            let _ = write!(s, " {text:>w$}");
        }
        s.push('\n');
    }
    s
}

/// The latency statistics block: the [`WORST_LINKS`] links with the highest p99, then one line over all links
/// (lowest min, mean of the means, median of the medians, highest p99, p99.9 and max, median message rates).
fn latency_stats(rep: &PairwiseReport) -> String {
    let mut with: Vec<(&Link, &LatencyStats)> = rep
        .links
        .iter()
        .filter_map(|l| l.latency.as_ref().map(|st| (l, st)))
        .collect();
    if with.is_empty() {
        return String::new();
    }
    with.sort_by(|x, y| y.1.p99_us.total_cmp(&x.1.p99_us));
    let shown = with.len().min(WORST_LINKS);
    let name = |l: &Link| format!("{}<->{}", l.a_name, l.b_name);
    let w = with.iter().map(|(l, _)| name(l).len()).max().unwrap_or(0).max(10);
    let bw_size = format_size(rep.config.bytes as u64);
    let which = if shown == with.len() {
        format!("all {} links", with.len())
    } else {
        format!("the {shown} links of {} with the highest p99", with.len())
    };
    let mut s =
        format!("# Latency statistics, us (half the 8 B round trip), and message rates: {which}; every link in -J\n");
    let _ = writeln!(
        s,
        "# {:>w2$} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>12} {:>12}",
        "link",
        "min",
        "avg",
        "p50",
        "p99",
        "p99.9",
        "max",
        "msg/s 8 B",
        format!("msg/s {}", bw_size.replace(' ', "")),
        w2 = w.saturating_sub(2)
    );
    let line = |s: &mut String, label: &str, st: &LatencyStats, bw_rate: f64| {
        let _ = writeln!(
            s,
            "{label:>w$} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>12.0} {:>12.1}",
            st.min_us, st.avg_us, st.p50_us, st.p99_us, st.p999_us, st.max_us, st.msg_rate, bw_rate
        );
    };
    for (l, st) in &with[..shown] {
        line(&mut s, &name(l), st, l.bw_msg_rate);
    }
    let med = |mut v: Vec<f64>| super::median::median(&mut v);
    let samples: usize = with.iter().map(|(_, st)| st.samples).sum();
    let overall = LatencyStats {
        samples,
        min_us: with.iter().map(|(_, st)| st.min_us).fold(f64::INFINITY, f64::min),
        avg_us: with.iter().map(|(_, st)| st.avg_us * st.samples as f64).sum::<f64>() / samples.max(1) as f64,
        p50_us: med(with.iter().map(|(_, st)| st.p50_us).collect()),
        p99_us: with.iter().map(|(_, st)| st.p99_us).fold(f64::NEG_INFINITY, f64::max),
        p999_us: with.iter().map(|(_, st)| st.p999_us).fold(f64::NEG_INFINITY, f64::max),
        max_us: with.iter().map(|(_, st)| st.max_us).fold(f64::NEG_INFINITY, f64::max),
        msg_rate: med(with.iter().map(|(_, st)| st.msg_rate).collect()),
    };
    line(
        &mut s,
        "all",
        &overall,
        med(with.iter().map(|(l, _)| l.bw_msg_rate).collect()),
    );
    s.push_str("# all: lowest min, mean of the means, median of the medians, highest p99/p99.9/max, median rates\n");
    s
}

/// One finding as a line: `SLOW HOST h2: bandwidth 0.012 GB/s (median of its links) vs 0.049 typical, ...`.
pub fn finding_line(f: &Finding) -> String {
    finding_text(f, false)
}

/// [`finding_line`], or with `one_host` the same finding about ranks sharing one host, as a warning.
fn finding_text(f: &Finding, one_host: bool) -> String {
    if one_host {
        return match f {
            Finding::SlowHost {
                host,
                metric,
                value,
                reference,
                slow_links,
                links,
            } => format!(
                "WARN slow rank {host}: {} (median of its pairs) vs {} typical; slower with {slow_links} of {links} \
                 partners",
                amount(*metric, *value),
                num(*reference)
            ),
            Finding::SlowLink {
                a,
                b,
                metric,
                value,
                reference,
            } => format!(
                "WARN slow pair {a} <-> {b}: {} vs {} typical",
                amount(*metric, *value),
                num(*reference)
            ),
        };
    }
    match f {
        Finding::SlowHost {
            host,
            metric,
            value,
            reference,
            slow_links,
            links,
        } => format!(
            "SLOW HOST {host}: {} (median of its links) vs {} typical; slow with {slow_links} of {links} partners",
            amount(*metric, *value),
            num(*reference)
        ),
        Finding::SlowLink {
            a,
            b,
            metric,
            value,
            reference,
        } => format!(
            "SLOW LINK {a} <-> {b}: {} vs {} typical; both hosts are fine with their other partners",
            amount(*metric, *value),
            num(*reference)
        ),
    }
}

/// A measured value with its metric: `bandwidth 0.012 GB/s`, `latency 47.6 us`, `3 stalled round trips`.
fn amount(metric: Metric, v: f64) -> String {
    match metric {
        Metric::Stalls => format!("{v} {}", metric.name()),
        _ => format!("{} {} {}", metric.name(), num(v), metric.unit()),
    }
}

/// Three significant digits, whatever the scale (0.0123, 1.23, 123).
fn num(v: f64) -> String {
    if !v.is_finite() || v == 0.0 {
        return format!("{v}");
    }
    let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
    format!("{v:.digits$}")
}

/// The bandwidth, latency and stall matrices.
fn matrices(rep: &PairwiseReport, names: &[String], units: BwUnit) -> String {
    let n = names.len();
    let mut at = vec![None; n * n];
    for (i, l) in rep.links.iter().enumerate() {
        if l.a < n && l.b < n {
            at[l.a * n + l.b] = Some(i);
        }
    }
    let link = |r: usize, c: usize| at[r.min(c) * n + r.max(c)].map(|i| &rep.links[i]);
    let mut s = String::from("\n");
    s += &matrix(
        names,
        &format!("Bandwidth, {units}: row sends to column while column sends to row (as the column received it)"),
        |r, c| link(r, c).map(|l| units.of_gbs(if r < c { l.bw_ab_gbs } else { l.bw_ba_gbs })),
        3,
    );
    s.push('\n');
    s += &matrix(
        names,
        "Latency, us: half the median 8 B round trip",
        |r, c| link(r, c).map(|l| l.latency_us),
        1,
    );
    s.push('\n');
    s += &matrix(
        names,
        "Stalls: 8 B round trips over 50 ms and 20x the median (a lost packet's retransmission timeout, or a rank that answered late)",
        |r, c| link(r, c).map(|l| l.stalls as f64),
        0,
    );
    s
}

/// `findings` as lines (each through `line`), grouped: slow hosts, then slow links, each kind at most
/// [`MAX_LISTED`] with the rest counted by metric.
fn grouped(findings: &[Finding], line: impl Fn(&Finding) -> String, indent: &str) -> String {
    let mut s = String::new();
    for hosts in [true, false] {
        let kind: Vec<&Finding> = findings
            .iter()
            .filter(|f| matches!(f, Finding::SlowHost { .. }) == hosts)
            .collect();
        if kind.is_empty() {
            continue;
        }
        if findings.len() > MAX_LISTED {
            let _ = writeln!(
                s,
                "# {} slow {} ({})",
                kind.len(),
                if hosts { "hosts" } else { "links" },
                by_metric(&kind)
            );
        }
        for f in kind.iter().take(MAX_LISTED) {
            let _ = writeln!(s, "{indent}{}", line(f));
        }
        if kind.len() > MAX_LISTED {
            let _ = writeln!(
                s,
                "{indent}... and {} more slow {} (every one in -J)",
                kind.len() - MAX_LISTED,
                if hosts { "hosts" } else { "links" }
            );
        }
    }
    s
}

/// `bandwidth 30, latency 2`: how many of `fs` each metric found.
fn by_metric(fs: &[&Finding]) -> String {
    let metric = |f: &Finding| match f {
        Finding::SlowHost { metric, .. } | Finding::SlowLink { metric, .. } => *metric,
    };
    [Metric::Bandwidth, Metric::Latency, Metric::Stalls]
        .iter()
        .map(|&m| (m, fs.iter().filter(|f| metric(f) == m).count()))
        .filter(|&(_, c)| c > 0)
        .map(|(m, c)| format!("{} {c}", m.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `s` with every line wider than [`WIDTH`] broken at spaces to fit, a `#` comment staying one; table rows
/// (columns aligned with runs of spaces) are left whole, as breaking them would unalign every column.
fn fit(s: &str) -> String {
    s.lines()
        .map(|l| {
            let body = l.trim_start();
            let indent = &l[..l.len() - body.len()];
            let table = body.trim_start_matches('#').trim_start().contains("  ");
            match body.strip_prefix("# ") {
                _ if l.chars().count() <= WIDTH || table => format!("{l}\n"),
                Some(text) => prefixed(text, &format!("{indent}# "), &format!("{indent}#   ")),
                None => prefixed(body, indent, &format!("{indent}    ")),
            }
        })
        .collect()
}

/// The whole report as printed on stdout, bandwidth in `units`; every line but a table's fits [`WIDTH`].
pub fn text(rep: &PairwiseReport, units: BwUnit) -> String {
    fit(&unfitted(rep, units))
}

/// [`text`] before its long lines are broken.
fn unfitted(rep: &PairwiseReport, units: BwUnit) -> String {
    let names: Vec<String> = rep.hosts.iter().map(|h| h.name.clone()).collect();
    let n = names.len();
    let again = rep.links.iter().filter(|l| l.remeasured).count();
    let remeasured = match again {
        0 => String::new(),
        _ => format!(
            " (+{} re-measuring {again} suspect link{})",
            rep.remeasure_rounds,
            if again == 1 { "" } else { "s" }
        ),
    };
    let mut s = format!(
        "# collbench pairwise: {n} {} over {}, {} rounds{remeasured} in {:.1} s\n",
        rep.unit, rep.path, rep.rounds, rep.elapsed_s
    );
    if rep.unit == "ranks" {
        let one_host = rep.hosts.windows(2).all(|w| w[0].host == w[1].host);
        if one_host && n > 1 && rep.hosts.iter().all(|h| h.gpu.is_some()) {
            let _ = writeln!(
                s,
                "# all ranks run on {}: pairs are its GPUs, one rank on each (a slow pair is a finding here too)",
                rep.hosts[0].host
            );
        } else if one_host && n > 1 {
            let _ = writeln!(
                s,
                "# all ranks run on {}: pairs are ranks, not hosts (the links are this host's own)",
                rep.hosts[0].host
            );
        } else {
            s.push_str("# pairs are ranks, as asked\n");
        }
    }
    let _ = writeln!(
        s,
        "# each pair: {} each way at once x {} (+1 warm-up), total bytes over total time; 8 B ping-pong x {}, median",
        format_size(rep.config.bytes as u64),
        rep.config.iters,
        rep.config.lat_iters
    );
    if n <= MAX_MATRIX_HOSTS {
        s += &matrices(rep, &names, units);
    } else {
        let _ = writeln!(
            s,
            "# {} links measured; the {n} x {n} matrices are not printed above {MAX_MATRIX_HOSTS} {}: every link \
             is in -J (JSON) and the --plot heatmaps",
            rep.links.len(),
            rep.unit
        );
    }
    s.push('\n');
    let stats = latency_stats(rep);
    if !stats.is_empty() {
        s += &stats;
        s.push('\n');
    }
    if rep.findings.is_empty() {
        let th = &rep.thresholds;
        let _ = writeln!(
            s,
            "# No finding: no link is {:.0}% below the typical bandwidth or {}x its latency by more than {} \
             robust deviations, and none stalled {} or more times",
            th.bw_floor * 100.0,
            th.lat_factor,
            th.k,
            th.min_stalls
        );
    } else {
        let one_host = rep.one_host();
        if one_host {
            s.push_str(
                "# Warnings, not failures: every rank runs on one host, so these pairs share its loopback and CPUs; \
                 a slower pair means ranks waited for a core, not a bad link (link findings need ranks on \
                 different hosts)\n",
            );
        } else {
            let once = rep.plan.as_ref().map_or(0, |p| p.unconfirmed);
            s.push_str(&if !rep.config.confirm {
                "# Findings (first pass only: --no-confirm)\n".to_string()
            } else if once > 0 {
                format!(
                    "# Findings ({once} suspect link(s) measured once: the budget left no rounds to measure them \
                     again)\n"
                )
            } else {
                "# Findings (each holds with its links measured twice)\n".to_string()
            });
        }
        s += &grouped(
            &rep.findings,
            // Which way it is slow, where one way is: both ways alike is said by the finding itself.
            |f| {
                let gpus = super::gpu_names::suffix(rep, f).unwrap_or_default();
                match super::direction::of_finding(rep, f) {
                    Some((d, way)) if d != super::direction::Direction::Both => {
                        format!("{}; {way}{gpus}", finding_text(f, one_host))
                    }
                    _ => format!("{}{gpus}", finding_text(f, one_host)),
                }
            },
            "",
        );
    }
    if !rep.dismissed.is_empty() {
        s.push_str("# Not confirmed when measured again (a transient: look only if it recurs)\n");
        s += &grouped(
            &rep.dismissed,
            |f| format!("first pass: {}", finding_text(f, rep.one_host())),
            "  ",
        );
    }
    for l in &rep.link_downs {
        let _ = writeln!(
            s,
            "LINK DOWN {}: {} lost its carrier {} time(s) during the test and came back: an intermittent link \
             (cable, NIC, switch port or its peer), whatever the matrix shows",
            l.host, l.iface, l.downs
        );
    }
    if !rep.host_config.is_empty() {
        let _ = writeln!(
            s,
            "# Set-up warnings: the hosts configure {} unlike each other (the matrix cannot show these)",
            rep.path
        );
        for a in &rep.host_config {
            let _ = writeln!(s, "WARN {}\n  what to do: {}", a.what, a.advice);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::localise::tests::matrix as synthetic;
    use super::super::{localise, PairwiseConfig, Thresholds, SCHEMA};
    use super::*;

    fn report(bad: Option<usize>) -> PairwiseReport {
        let (hosts, mut links) = synthetic(
            3,
            |a, b, _| if Some(a) == bad || Some(b) == bad { 0.25 } else { 1.0 },
            |_, _, i| 30.0 + i as f64,
        );
        // Directions differ, so the matrix shows which cell is which.
        links[0].bw_ab_gbs = 1.5;
        let findings = localise::findings(&hosts, &links, &Thresholds::default());
        PairwiseReport {
            schema: SCHEMA.into(),
            path: "tcp@eth0".into(),
            unit: "hosts".into(),
            config: PairwiseConfig::default(),
            hosts,
            links,
            findings,
            dismissed: Vec::new(),
            host_config: Vec::new(),
            link_downs: Vec::new(),
            thresholds: Thresholds::default(),
            rounds: 3,
            remeasure_rounds: 0,
            elapsed_s: 1.25,
            plan: None,
        }
    }

    #[test]
    fn matrices_put_each_direction_in_its_cell() {
        let t = text(&report(None), BwUnit::Gbyte);
        assert!(
            t.starts_with("# collbench pairwise: 3 hosts over tcp@eth0, 3 rounds in 1.2 s\n"),
            "{t}"
        );
        let rows: Vec<Vec<&str>> = t
            .lines()
            .skip_while(|l| !l.starts_with("# Bandwidth"))
            .skip(2)
            .take(3)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows[0], ["h0", "-", "1.500", "1.000"], "{t}");
        assert_eq!(rows[1], ["h1", "1.000", "-", "1.000"], "{t}");
        let lat: Vec<Vec<&str>> = t
            .lines()
            .skip_while(|l| !l.starts_with("# Latency"))
            .skip(2)
            .take(3)
            .map(|l| l.split_whitespace().collect())
            .collect();
        // Links in order (0,1) (0,2) (1,2): latencies 30, 31, 32, the same both ways.
        assert_eq!(lat[2], ["h2", "31.0", "32.0", "-"], "{t}");
        assert!(t.contains("# No finding"), "{t}");
    }

    #[test]
    fn latency_statistics_list_the_worst_links_and_all() {
        let t = text(&report(None), BwUnit::Gbyte);
        let block: Vec<&str> = t
            .lines()
            .skip_while(|l| !l.starts_with("# Latency statistics"))
            .collect();
        assert!(block[0].contains("all 3 links"), "{t}");
        // Worst p99 first: links (1,2), (0,2), (0,1) have latencies 32, 31, 30 and p99 twice that.
        let row = |i: usize| block[i].split_whitespace().collect::<Vec<_>>();
        assert_eq!(
            row(2)[..7],
            ["h1<->h2", "28.80", "35.20", "32.00", "64.00", "96.00", "128.00"],
            "{t}"
        );
        assert_eq!(row(4)[0], "h0<->h1", "{t}");
        assert_eq!(
            row(5)[..7],
            ["all", "27.00", "34.10", "31.00", "64.00", "96.00", "128.00"],
            "{t}"
        );
    }

    #[test]
    fn gbit_prints_eight_times_the_gbyte_figures() {
        let rep = report(None);
        let cells = |u: BwUnit| -> Vec<f64> {
            let t = text(&rep, u);
            assert!(t.contains(&format!("# Bandwidth, {}:", u.label())), "{t}");
            t.lines()
                .skip_while(|l| !l.starts_with("# Bandwidth"))
                .skip(2)
                .take(3)
                .flat_map(|l| {
                    l.split_whitespace()
                        .skip(1)
                        .filter_map(|c| c.parse::<f64>().ok())
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        let (gb, gbit) = (cells(BwUnit::Gbyte), cells(BwUnit::Gbit));
        assert_eq!(gb.len(), 6);
        assert_eq!(gbit, gb.iter().map(|v| v * 8.0).collect::<Vec<_>>());
    }

    #[test]
    fn re_measured_links_and_dismissed_findings_are_shown() {
        let mut rep = report(Some(2));
        for l in rep.links.iter_mut().filter(|l| l.a == 2 || l.b == 2) {
            l.remeasured = true;
        }
        rep.remeasure_rounds = 2;
        rep.dismissed = vec![Finding::SlowLink {
            a: "h0".into(),
            b: "h1".into(),
            metric: Metric::Latency,
            value: 310.0,
            reference: 30.0,
        }];
        let t = text(&rep, BwUnit::Gbyte);
        assert!(
            t.starts_with("# collbench pairwise: 3 hosts over tcp@eth0, 3 rounds (+2 re-measuring 2 suspect links) in"),
            "{t}"
        );
        assert!(
            t.ends_with(
                "# Not confirmed when measured again (a transient: look only if it recurs)\n  first pass: SLOW LINK \
                 h0 <-> h1: latency 310 us vs 30.0 typical; both hosts are fine with their\n      other partners\n"
            ),
            "{t}"
        );
        rep.config.confirm = false;
        assert!(text(&rep, BwUnit::Gbyte).contains("# Findings (first pass only: --no-confirm)\nSLOW HOST h2"));
    }

    #[test]
    fn a_link_that_went_down_fails_a_clean_matrix_by_name() {
        let mut rep = report(None);
        rep.link_downs = vec![super::super::hostcheck::LinkDown {
            host: "h1".into(),
            iface: "eth0".into(),
            downs: 3,
        }];
        assert_eq!(rep.verdict(), "fail");
        assert!(
            text(&rep, BwUnit::Gbyte).contains("\nLINK DOWN h1: eth0 lost its carrier 3 time(s) during the test"),
            "{}",
            text(&rep, BwUnit::Gbyte)
        );
    }

    #[test]
    fn set_up_warnings_are_shown_last_and_make_a_clean_matrix_a_warning() {
        let mut rep = report(None);
        assert_eq!(rep.verdict(), "pass");
        rep.host_config = vec![crate::net::advice::Advice {
            severity: crate::net::advice::Severity::Warning,
            what: "the MTU differs between hosts on the same path: MTU 1280 on h2 (eth0); MTU 1500 on h0 (eth0)".into(),
            advice: "set one MTU".into(),
        }];
        assert_eq!(rep.verdict(), "warn", "a set-up warning alone is a warning");
        let t = text(&rep, BwUnit::Gbyte);
        assert!(
            t.ends_with(
                "# Set-up warnings: the hosts configure tcp@eth0 unlike each other (the matrix cannot show these)\n\
                 WARN the MTU differs between hosts on the same path: MTU 1280 on h2 (eth0); MTU 1500 on h0 (eth0)\n  \
                 what to do: set one MTU\n"
            ),
            "{t}"
        );
    }

    #[test]
    fn findings_among_ranks_of_one_host_are_warnings_about_ranks() {
        let mut r = report(Some(2));
        assert_eq!(r.verdict(), "fail", "across hosts a finding fails");
        r.unit = "ranks".into();
        for (i, h) in r.hosts.iter_mut().enumerate() {
            h.name = format!("rank{i}");
            h.host = "node1".into();
        }
        r.findings = localise::findings(&r.hosts, &r.links, &Thresholds::default());
        assert!(r.one_host() && !r.findings.is_empty());
        assert_eq!(r.verdict(), "warn", "one host: a warning, exit 0");
        let t = text(&r, crate::units::BwUnit::default());
        assert!(
            t.contains("# Warnings, not failures: every rank runs on one host"),
            "{t}"
        );
        assert!(
            t.contains("WARN slow rank rank2: bandwidth 0.250 GB/s (median of its pairs)"),
            "{t}"
        );
        assert!(
            !t.contains("SLOW HOST") && !t.contains("SLOW LINK") && !t.contains("hosts are fine"),
            "{t}"
        );
        let m = super::super::metrics::text(&r, 0.0);
        assert!(
            m.contains("collbench_pairwise_verdict{path=\"tcp@eth0\",verdict=\"warn\"} 1\n"),
            "{m}"
        );
        assert!(
            m.contains("kind=\"slow_host\",metric=\"bandwidth\",host=\"rank2\""),
            "{m}"
        );
        // Without a finding the verdict passes.
        r.findings.clear();
        assert_eq!(r.verdict(), "pass");
    }

    #[test]
    fn findings_are_listed_by_name() {
        let t = text(&report(Some(2)), BwUnit::Gbyte);
        assert!(
            t.contains("# Findings (each holds with its links measured twice)\nSLOW HOST h2: bandwidth 0.250 GB/s"),
            "{t}"
        );
        assert!(!t.contains("SLOW LINK") && !t.contains("No finding"), "{t}");
        assert!(!t.contains("Not confirmed") && !t.contains("re-measuring"), "{t}");
        // Where the budget left suspects measured once, the header does not say twice.
        let mut once = report(Some(2));
        once.plan = Some(super::super::plan::Record {
            budget_s: Some(10.0),
            plan: super::super::plan::plan(4, 1.0, 10.0),
            unconfirmed: 3,
        });
        let t = text(&once, BwUnit::Gbyte);
        assert!(
            t.contains("# Findings (3 suspect link(s) measured once: the budget left no rounds to measure them again)"),
            "{t}"
        );
        let line = finding_line(&Finding::SlowLink {
            a: "x".into(),
            b: "y".into(),
            metric: Metric::Latency,
            value: 1234.4,
            reference: 45.678,
        });
        assert_eq!(
            line,
            "SLOW LINK x <-> y: latency 1234 us vs 45.7 typical; both hosts are fine with their other partners"
        );
        let host = finding_line(&Finding::SlowHost {
            host: "h".into(),
            metric: Metric::Stalls,
            value: 3.0,
            reference: 0.0,
            slow_links: 2,
            links: 3,
        });
        assert_eq!(
            host,
            "SLOW HOST h: 3 stalled round trips (median of its links) vs 0 typical; slow with 2 of 3 partners"
        );
    }

    #[test]
    fn a_thousand_host_report_is_a_screen_of_grouped_findings() {
        let n = 1024;
        let (hosts, links) = synthetic(n, |_, _, i| 1.0 + (i % 7) as f64 * 0.01, |_, _, _| 20.0);
        let link = |a: usize, b: usize, metric: Metric| Finding::SlowLink {
            a: format!("h{a}"),
            b: format!("h{b}"),
            metric,
            value: 0.3,
            reference: 1.0,
        };
        let mut findings: Vec<Finding> = (0..3)
            .map(|h| Finding::SlowHost {
                host: format!("h{}", 100 + h),
                metric: Metric::Bandwidth,
                value: 0.4,
                reference: 1.0,
                slow_links: 900,
                links: n - 1,
            })
            .collect();
        findings.extend((0..38).map(|i| link(i, 500 + i, Metric::Bandwidth)));
        findings.extend((0..2).map(|i| link(i, 700 + i, Metric::Latency)));
        let rep = PairwiseReport {
            schema: SCHEMA.into(),
            path: "tcp@eth0".into(),
            unit: "hosts".into(),
            config: PairwiseConfig::default(),
            hosts,
            links,
            findings,
            dismissed: (0..30).map(|i| link(i, 900 + i, Metric::Latency)).collect(),
            host_config: Vec::new(),
            link_downs: Vec::new(),
            thresholds: Thresholds::default(),
            rounds: n - 1,
            remeasure_rounds: 40,
            elapsed_s: 100.0,
            plan: None,
        };
        let t = text(&rep, BwUnit::Gbyte);
        // 36 findings listed (12 of each kind), a line or two each at 100 columns, and the headers: the same
        // few screens at any N.
        let lines = t.lines().count();
        assert!(lines <= 90, "{lines} lines:\n{t}");
        assert!(
            t.contains("# 523776 links measured; the 1024 x 1024 matrices are not printed above 16 hosts"),
            "{t}"
        );
        assert!(!t.contains("# Bandwidth,"), "{t}");
        // Grouped and counted, by kind and metric; the first of each listed.
        assert!(t.contains("# 3 slow hosts (bandwidth 3)\nSLOW HOST h100:"), "{t}");
        assert!(
            t.contains("# 40 slow links (bandwidth 38, latency 2)\nSLOW LINK h0 <-> h500:"),
            "{t}"
        );
        assert!(t.contains("... and 28 more slow links (every one in -J)"), "{t}");
        assert!(t.contains("  ... and 18 more slow links (every one in -J)"), "{t}");
        assert_eq!(t.matches("SLOW LINK").count(), 2 * MAX_LISTED, "{t}");
        // At 16 hosts the matrices are still printed.
        let small = report(Some(2));
        assert!(text(&small, BwUnit::Gbyte).contains("# Bandwidth,"));
    }

    #[test]
    fn every_line_fits_100_columns_and_comments_stay_comments() {
        // The long lines of each kind of report: no finding, findings, one host's ranks, a link down and a
        // set-up warning, with host names as a namespace cluster's.
        let named = |bad| {
            let mut r = report(bad);
            for (i, h) in r.hosts.iter_mut().enumerate() {
                h.name = format!("cbc-gate-h{i}");
            }
            r
        };
        let mut down = named(None);
        down.link_downs = vec![super::super::hostcheck::LinkDown {
            host: "cbc-gate-h1".into(),
            iface: "eth0".into(),
            downs: 3,
        }];
        down.host_config = vec![crate::net::advice::Advice {
            severity: crate::net::advice::Severity::Warning,
            what: "the MTU differs between hosts on the same path: MTU 1280 on cbc-gate-h2 (eth0); MTU 1500 on \
                   cbc-gate-h0 (eth0) and cbc-gate-h1 (eth0)"
                .into(),
            advice: "set one MTU on every host of the path, the overlay's 50 bytes below the underlay's".into(),
        }];
        let mut ranks = named(Some(2));
        ranks.unit = "ranks".into();
        for h in &mut ranks.hosts {
            h.host = "node1".into();
        }
        ranks.findings = localise::findings(&ranks.hosts, &ranks.links, &Thresholds::default());
        for r in [named(None), named(Some(2)), ranks, down] {
            let t = text(&r, BwUnit::Gbyte);
            for l in t.lines() {
                assert!(l.chars().count() <= WIDTH, "{} columns: {l}\n{t}", l.chars().count());
            }
            // A comment broken over lines goes on as one, so `grep -v '^#'` still leaves the data.
            let lines: Vec<&str> = t.lines().collect();
            for w in lines.windows(2) {
                assert!(
                    !w[1].starts_with("#   ") || w[0].starts_with('#'),
                    "{}\n{}\n{t}",
                    w[0],
                    w[1]
                );
            }
        }
        let t = text(&named(None), BwUnit::Gbyte);
        assert!(t.contains("# No finding: no link is") && t.contains("\n#   "), "{t}");
        assert!(t.contains("\n# Stalls: 8 B round trips over 50 ms"), "{t}");
    }
}
