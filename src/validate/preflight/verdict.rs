//! Verdicts: one per check and one overall, noise-aware (an interval that straddles its threshold is a
//! warning, not a failure), and the exit status they make. A check also carries the cause it names, where
//! [`super::cause`] names one.

use serde::{Deserialize, Serialize};

/// The outcome of one check, or of the whole preflight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    /// The measurement's interval straddles its threshold, or the check could not be decided.
    Warn,
    Fail,
}

impl Verdict {
    /// The word in tables.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
        }
    }
}

/// A cause, as findings name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// A rank throttled by its CPU quota, or starved of CPU.
    Cpu,
    /// Packets lost: TCP retransmitted.
    Loss,
    /// A host set up differently from the others, or a path `collbench info` warns about.
    Configuration,
    /// A host whose TCP buffers (its limits, or what its sockets got) are smaller than the others'.
    TcpBuffers,
    /// Frames of the interface's MTU vanish on the way while smaller ones pass: a path MTU black hole (a
    /// switch port or a link with a smaller MTU than the hosts', and no ICMP back).
    Mtu,
    /// None of the above: the link (NIC, cable, switch port, a rate limit on the way).
    Link,
}

impl Cause {
    /// The word in summaries.
    pub fn word(self) -> &'static str {
        match self {
            Cause::Cpu => "CPU",
            Cause::Loss => "loss",
            Cause::Configuration => "configuration",
            Cause::TcpBuffers => "TCP buffers",
            Cause::Mtu => "MTU",
            Cause::Link => "the link",
        }
    }
}

/// One check: what was measured, against what, from where, and the verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// e.g. `tcp@lo all_reduce busbw`.
    pub name: String,
    pub path: String,
    /// The measurement as shown, with its interval and unit.
    pub measured: String,
    /// The median and its interval, in `unit`; `None` where not a number.
    pub value: Option<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub unit: String,
    /// The threshold as shown (`>= 0.875 GB/s`).
    pub threshold: String,
    /// Where the threshold came from (the file and line, the link speed, built in).
    pub source: String,
    pub verdict: Verdict,
    /// Why, in a sentence.
    pub detail: String,
    /// The most likely cause of a failure or finding, where one is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<Cause>,
    /// Every host involved during the measurement: CPU, TCP counters, path configuration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<super::evidence::HostEvidence>,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Which side of the limit is good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The measurement must be at least the limit (bandwidth).
    AtLeast,
    /// The measurement must be at most the limit (latency, variation).
    AtMost,
}

/// The verdict of a median `value` with interval `[lo, hi]` against `limit`: clear of it on the good side
/// passes, clear of it on the bad side fails, an interval touching both sides warns.
pub fn judge(value: f64, lo: f64, hi: f64, bound: Bound, limit: f64) -> Verdict {
    if value.is_nan() || lo.is_nan() || hi.is_nan() {
        return Verdict::Warn;
    }
    match bound {
        Bound::AtLeast if lo >= limit => Verdict::Pass,
        Bound::AtLeast if hi < limit => Verdict::Fail,
        Bound::AtMost if hi <= limit => Verdict::Pass,
        Bound::AtMost if lo > limit => Verdict::Fail,
        _ => Verdict::Warn,
    }
}

/// A check of an estimate against a limit.
#[allow(clippy::too_many_arguments)]
pub fn threshold_check(
    name: String,
    path: &str,
    est: super::measure::Estimate,
    unit: &str,
    digits: usize,
    bound: Bound,
    limit: f64,
    source: String,
) -> Check {
    let verdict = judge(est.value, est.lo, est.hi, bound, limit);
    let op = match bound {
        Bound::AtLeast => ">=",
        Bound::AtMost => "<=",
    };
    let detail = match verdict {
        Verdict::Pass => "clear of the threshold, noise included".to_string(),
        Verdict::Fail => "beyond the threshold, noise included".to_string(),
        Verdict::Warn if est.value.is_nan() => "no number was measured".to_string(),
        Verdict::Warn => "the threshold lies inside the noise of the measurement".to_string(),
    };
    // A unitless figure (cv) takes no space for a unit.
    let u = if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    };
    Check {
        name,
        path: path.to_string(),
        measured: format!("{:.d$}{u} [{:.d$}, {:.d$}]", est.value, est.lo, est.hi, d = digits),
        value: finite(est.value),
        lo: finite(est.lo),
        hi: finite(est.hi),
        unit: unit.to_string(),
        threshold: format!("{op} {limit:.digits$}{u}"),
        source,
        verdict,
        detail,
        cause: None,
        evidence: Vec::new(),
    }
}

/// The overall verdict: the worst check's (no check at all passes).
pub fn overall(checks: &[Check]) -> Verdict {
    checks.iter().map(|c| c.verdict).max().unwrap_or(Verdict::Pass)
}

/// The exit status: 1 on a failure, or on a warning with `strict`; else 0.
pub fn exit_code(overall: Verdict, strict: bool) -> i32 {
    match overall {
        Verdict::Fail => 1,
        Verdict::Warn if strict => 1,
        _ => 0,
    }
}

/// A check without a number.
pub(super) fn bare_check(
    name: String,
    path: &str,
    measured: String,
    threshold: String,
    source: String,
    verdict: Verdict,
    detail: String,
) -> Check {
    Check {
        name,
        path: path.to_string(),
        measured,
        value: None,
        lo: None,
        hi: None,
        unit: String::new(),
        threshold,
        source,
        verdict,
        detail,
        cause: None,
        evidence: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::preflight::measure::Estimate;

    #[test]
    fn clear_measurements_pass_or_fail_and_straddling_ones_warn() {
        // busbw 10 GB/s in [9, 11]:
        assert_eq!(judge(10.0, 9.0, 11.0, Bound::AtLeast, 8.0), Verdict::Pass);
        assert_eq!(judge(10.0, 9.0, 11.0, Bound::AtLeast, 12.0), Verdict::Fail);
        assert_eq!(
            judge(10.0, 9.0, 11.0, Bound::AtLeast, 10.5),
            Verdict::Warn,
            "median below, interval above"
        );
        assert_eq!(
            judge(10.0, 9.0, 11.0, Bound::AtLeast, 9.5),
            Verdict::Warn,
            "median above, interval below"
        );
        // latency 100 us in [90, 120]:
        assert_eq!(judge(100.0, 90.0, 120.0, Bound::AtMost, 200.0), Verdict::Pass);
        assert_eq!(judge(100.0, 90.0, 120.0, Bound::AtMost, 80.0), Verdict::Fail);
        assert_eq!(judge(100.0, 90.0, 120.0, Bound::AtMost, 100.0), Verdict::Warn);
        assert_eq!(judge(f64::NAN, 1.0, 2.0, Bound::AtMost, 5.0), Verdict::Warn);
    }

    #[test]
    fn the_worst_check_decides_and_strict_fails_on_a_warning() {
        let c = |v: f64| {
            threshold_check(
                "x".into(),
                "p",
                Estimate {
                    value: v,
                    lo: v - 1.0,
                    hi: v + 1.0,
                },
                "GB/s",
                2,
                Bound::AtLeast,
                10.0,
                "built in".into(),
            )
        };
        let (pass, warn, fail) = (c(20.0), c(10.0), c(1.0));
        assert_eq!(
            (pass.verdict, warn.verdict, fail.verdict),
            (Verdict::Pass, Verdict::Warn, Verdict::Fail)
        );
        assert_eq!(pass.threshold, ">= 10.00 GB/s");
        assert_eq!(pass.measured, "20.00 GB/s [19.00, 21.00]");
        assert_eq!(overall(&[pass.clone(), warn.clone()]), Verdict::Warn);
        assert_eq!(overall(&[pass.clone(), warn.clone(), fail.clone()]), Verdict::Fail);
        assert_eq!(overall(&[]), Verdict::Pass);
        assert_eq!(exit_code(Verdict::Pass, true), 0);
        assert_eq!(exit_code(Verdict::Warn, false), 0);
        assert_eq!(exit_code(Verdict::Warn, true), 1);
        assert_eq!(exit_code(Verdict::Fail, false), 1);
    }
}
