//! What every GPU check shares: one host's readings, the evidence a finding carries and the check row a GPU
//! rule makes (path `gpu`), the findings capped per kind. Health rules (`gpu`) and copy rules (`gpu_copy`)
//! both build on it.

use super::evidence::HostEvidence;
use super::verdict::{bare_check, Check, Verdict};
use crate::net::gpu_health::{GpuHealth, Gpus};

/// The `path` of every GPU check (the checks' label in JSON and OpenMetrics).
pub const PATH: &str = "gpu";
/// Findings of one kind listed one by one; the rest are one check naming each (a screen, not a cluster).
pub const MAX_FINDINGS: usize = 12;
const SOURCE: &str = "built in (NVML)";

/// One host's GPUs as its first rank read them.
#[derive(Clone, Debug, PartialEq)]
pub struct HostReading {
    pub host: String,
    /// The job's ranks on the host.
    pub ranks: usize,
    pub gpus: Gpus,
}

/// The evidence of one host's GPUs `gpus` (all of them, or the one a finding is about).
pub(super) fn evidence(h: &HostReading, gpus: Vec<GpuHealth>) -> Vec<HostEvidence> {
    vec![HostEvidence {
        host: h.host.clone(),
        gpu: Some(Gpus { gpus, ..h.gpus.clone() }),
        ..HostEvidence::default()
    }]
}

/// A check of path [`PATH`] from the built-in rules.
pub(super) fn check(name: String, measured: String, threshold: &str, verdict: Verdict, detail: String) -> Check {
    bare_check(
        name,
        PATH,
        measured,
        threshold.to_string(),
        SOURCE.into(),
        verdict,
        detail,
    )
}

/// The findings of one kind, at most [`MAX_FINDINGS`] by name (failures first), the rest as one check.
pub(super) fn capped(name: &str, mut findings: Vec<Check>) -> Vec<Check> {
    if findings.len() <= MAX_FINDINGS {
        return findings;
    }
    findings.sort_by_key(|c| std::cmp::Reverse(c.verdict));
    let rest = findings.split_off(MAX_FINDINGS - 1);
    let listed: Vec<String> = rest
        .iter()
        .map(|c| format!("{} ({})", c.name.split_once(": ").map_or("", |x| x.1), c.measured))
        .collect();
    let worst = rest.iter().map(|c| c.verdict).max().unwrap_or(Verdict::Pass);
    findings.push(check(
        format!("{name}: {} more", rest.len()),
        format!("{} more GPUs or hosts", rest.len()),
        &rest[0].threshold,
        worst,
        listed.join("; "),
    ));
    findings
}
