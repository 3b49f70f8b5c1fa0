//! The preflight as OpenMetrics text (`--metrics FILE`): the verdict, the exit status, and every check with
//! its verdict, value and cause, under the stable names docs/metrics.md lists. A pure function of the report.

use super::document::Report;
use super::verdict::Verdict;
use crate::report::openmetrics::{build_info, render, Family};

const VERDICTS: [&str; 3] = ["pass", "warn", "fail"];

fn word(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Warn => "warn",
        Verdict::Fail => "fail",
    }
}

/// A check's value in the Prometheus convention's base unit, as pairwise's metrics give theirs: GB/s as
/// bytes per second, microseconds as seconds, a percentage or a factor as a ratio; a count as it is.
fn base_unit(unit: &str, v: f64) -> (String, f64) {
    match unit {
        "GB/s" => ("bytes_per_second".into(), v * 1e9),
        "Gbit/s" => ("bytes_per_second".into(), v * 1e9 / 8.0),
        "us" => ("seconds".into(), v * 1e-6),
        "ms" => ("seconds".into(), v * 1e-3),
        "%" => ("ratio".into(), v / 100.0),
        "x" => ("ratio".into(), v),
        other => (other.to_string(), v),
    }
}

/// The exposition of `r`, written at `now_s` (seconds since the Unix epoch).
pub fn text(r: &Report, now_s: f64) -> String {
    let mut verdict = Family::new(
        "collbench_preflight_verdict",
        "The preflight's verdict: 1 for the one reached, 0 for the others.",
        None,
    );
    verdict.states(Vec::new(), "verdict", &VERDICTS, word(r.verdict));
    let mut code = Family::new(
        "collbench_preflight_exit_code",
        "The preflight's exit status (0 PASS or WARN, 1 FAIL, 3 or 4 ended early).",
        None,
    );
    code.push(Vec::new(), f64::from(r.exit_code));
    let mut ranks = Family::new("collbench_preflight_ranks", "Ranks that took part.", None);
    ranks.push(Vec::new(), r.nranks as f64);
    let mut when = Family::new(
        "collbench_preflight_timestamp_seconds",
        "When this file was written (Unix time): a stale file means the check stopped running.",
        Some("seconds"),
    );
    when.push(Vec::new(), now_s);
    let mut status = Family::new(
        "collbench_preflight_check_status",
        "Each check's verdict: 1 for the one reached, 0 for the others.",
        None,
    );
    let mut value = Family::new(
        "collbench_preflight_check_value",
        "Each check's measured median, in the Prometheus base unit its label names (bytes_per_second, seconds, \
         ratio; a count otherwise).",
        None,
    );
    let mut cause = Family::new(
        "collbench_preflight_check_cause",
        "The most likely cause of a check's failure or finding (cpu, loss, configuration, tcp_buffers, mtu, link).",
        None,
    );
    for c in &r.checks {
        let labels = || vec![("path", c.path.clone()), ("check", c.name.clone())];
        status.states(labels(), "status", &VERDICTS, word(c.verdict));
        if let Some(v) = c.value {
            let (unit, v) = base_unit(&c.unit, v);
            let mut l = labels();
            l.push(("unit", unit));
            value.push(l, v);
        }
        if let Some(k) = c.cause {
            let mut l = labels();
            l.push((
                "cause",
                serde_json::to_value(k)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
            ));
            cause.push(l, 1.0);
        }
    }
    render(&[verdict, code, ranks, when, status, value, cause, build_info()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_is_a_labelled_state_and_the_verdict_is_one_state() {
        let r = super::super::render::tests::report();
        let t = text(&r, 1.7e9);
        assert!(t.contains("collbench_preflight_verdict{verdict=\"fail\"} 1\n"), "{t}");
        assert!(t.contains("collbench_preflight_verdict{verdict=\"pass\"} 0\n"), "{t}");
        assert!(t.contains("collbench_preflight_exit_code 1\n"), "{t}");
        assert!(t.contains("collbench_preflight_timestamp_seconds 1700000000\n"), "{t}");
        for c in &r.checks {
            let line = format!(
                "collbench_preflight_check_status{{path=\"{}\",check=\"{}\",status=\"{}\"}} 1\n",
                c.path,
                c.name,
                word(c.verdict)
            );
            assert!(t.contains(&line), "{line} missing in\n{t}");
        }
        assert!(t.ends_with("# EOF\n"));
    }

    #[test]
    fn values_are_in_base_units_as_pairwise_gives_them() {
        let r = super::super::render::tests::report();
        let t = text(&r, 1.7e9);
        // The fixture's checks measure 1.000 GB/s.
        assert!(t.contains("unit=\"bytes_per_second\"} 1000000000\n"), "{t}");
        assert!(!t.contains("GB/s"), "{t}");
        assert_eq!(base_unit("us", 250.0), ("seconds".into(), 250e-6));
        assert_eq!(base_unit("%", 12.5), ("ratio".into(), 0.125));
        assert_eq!(base_unit("hosts", 3.0), ("hosts".into(), 3.0));
    }
}
