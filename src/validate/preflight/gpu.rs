//! GPU health as preflight checks: every host's GPUs read through NVML by its first rank before anything is
//! measured (milliseconds, and a few copies per GPU), gathered to rank 0 and judged: the GPU count against what the job expects,
//! uncorrectable ECC errors, memory repairs pending or failed, clock slowdowns, the PCIe link, NVLinks down,
//! persistence mode, the driver's versions across hosts, and each GPU's copy bandwidths ([`super::gpu_copy`],
//! measured after NVML's readings). A finding names host, GPU index and bus id, with
//! that GPU's readings as its evidence. Without the cuda feature or NVML on any host, one note says why and
//! nothing else changes.

use super::evidence::HostEvidence;
use super::verdict::{Check, Verdict};
use crate::error::{Error, Result};
use crate::net::gpu_health::{self, clock_event, GpuHealth, Gpus};
use crate::results::RankInfo;
use crate::transport::control;
use crate::transport::Transport;

use super::gpu_check::{capped, check, evidence};
pub use super::gpu_check::{HostReading, MAX_FINDINGS, PATH};

/// How the note of GPU checks not run begins (`--from-results` carries it over).
pub const NOT_RUN: &str = "GPU checks not run";

/// Whether the ranks on a node are the GPUs it should have: under a real launcher (mpirun, srun, Kubernetes)
/// a job runs one rank per GPU; `--np`'s local ranks share host memory and say nothing of GPUs.
pub fn ranks_count_gpus(launcher: &str) -> bool {
    !matches!(launcher, "local" | "threads")
}

/// This host's GPUs now, or why they cannot be read (never a failure).
fn read() -> Gpus {
    #[cfg(feature = "cuda")]
    {
        let mut gpus = crate::net::nvml_health::read();
        // The copies are measured only where NVML found GPUs: a host without them opens no CUDA context.
        if gpus.unavailable.is_none() && !gpus.gpus.is_empty() {
            super::gpu_copy::attach(&mut gpus, crate::memory::copy_rates::measure_host());
        }
        gpus
    }
    #[cfg(not(feature = "cuda"))]
    {
        Gpus {
            unavailable: Some("this collbench was built without the cuda feature (cargo build --features cuda)".into()),
            ..Gpus::default()
        }
    }
}

/// Every host's GPUs on rank 0 (`None` elsewhere), read once per host by its first rank.
pub fn gather<T: Transport + ?Sized>(t: &mut T, ranks: &[RankInfo], me: usize) -> Result<Option<Vec<HostReading>>> {
    let host = |r: usize| ranks.get(r).map_or("", |i| i.host.as_str());
    let first = ranks.iter().position(|r| r.host == host(me)) == Some(me);
    let mine: Option<Gpus> = first.then(read);
    let bytes = serde_json::to_vec(&mine).expect("GPU readings serialise");
    let Some(all) = control::gather(t, &bytes)? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for (r, b) in all.iter().enumerate() {
        let read: Option<Gpus> = serde_json::from_slice(b).map_err(|e| {
            Error::peer(format!(
                "rank 0: rank {r} sent unreadable GPU readings ({e}); were all ranks started with the same \
                 collbench version?"
            ))
        })?;
        if let Some(gpus) = read {
            let h = host(r).to_string();
            let n = ranks.iter().filter(|x| x.host == h).count();
            out.push(HostReading {
                host: h,
                ranks: n,
                gpus,
            });
        }
    }
    Ok(Some(out))
}

/// The GPU checks, and the note saying why there are none.
#[derive(Debug, Default)]
pub struct Judged {
    pub checks: Vec<Check>,
    pub note: Option<String>,
}

/// One rule over each GPU.
struct Rule {
    /// `gpu ECC`: the check's name, and its findings' prefix.
    name: &'static str,
    threshold: &'static str,
    /// The NVML calls it reads.
    calls: &'static [&'static str],
    /// Whether any one of `calls` will do (else it needs them all).
    any_of: bool,
    /// Whether the GPU answered what the rule reads.
    read: fn(&GpuHealth) -> bool,
    /// A finding: verdict, what was measured, why it matters and what to do, value and unit.
    judge: fn(&GpuHealth) -> Option<Finding>,
    /// What a clean GPU shows, for the PASS check.
    clean: &'static str,
}

struct Finding {
    verdict: Verdict,
    measured: String,
    why: &'static str,
    value: Option<(f64, &'static str)>,
}

fn ecc(g: &GpuHealth) -> Option<Finding> {
    let (v, a) = (g.ecc_volatile.unwrap_or(0), g.ecc_aggregate.unwrap_or(0));
    (v > 0 || a > 0).then(|| Finding {
        verdict: Verdict::Fail,
        measured: format!("{v} volatile, {a} aggregate uncorrectable ECC errors"),
        why: "uncorrectable memory errors crash or corrupt a job: drain the node and have the GPU checked \
              (nvidia-smi -q -d ECC)",
        value: Some((v.max(a) as f64, "errors")),
    })
}

fn repair(g: &GpuHealth) -> Option<Finding> {
    let mut what = Vec::new();
    if g.remap_pending == Some(true) {
        what.push("a row remapping pending");
    }
    if g.remap_failed == Some(true) {
        what.push("a row remapping failed");
    }
    if g.retired_pending == Some(true) {
        what.push("retired pages pending");
    }
    (!what.is_empty()).then(|| Finding {
        verdict: Verdict::Fail,
        measured: what.join(", "),
        why: "a pending repair takes effect only after a GPU reset (reset it before the job); a failed \
              remapping means the GPU should be replaced",
        value: None,
    })
}

fn clocks(g: &GpuHealth) -> Option<Finding> {
    let bits = g.clock_events?;
    let hard = gpu_health::slowdowns(bits & !clock_event::SW_POWER_CAP);
    if !hard.is_empty() {
        return Some(Finding {
            verdict: Verdict::Fail,
            measured: format!("slowed now: {}", hard.join(", ")),
            why: "the GPU runs below its clocks and holds back every collective it is in: check its cooling and \
                  power (nvidia-smi -q -d PERFORMANCE)",
            value: None,
        });
    }
    (bits & clock_event::SW_POWER_CAP != 0).then(|| Finding {
        verdict: Verdict::Warn,
        measured: "held at its software power cap".into(),
        why: "the GPU draws all the power its limit allows: fine under load, a lowered limit if idle (nvidia-smi \
              -q -d POWER)",
        value: None,
    })
}

fn pcie(g: &GpuHealth) -> Option<Finding> {
    let (gen, max_gen) = (g.pcie_gen?, g.pcie_max_gen?);
    let (width, max_width) = (g.pcie_width?, g.pcie_max_width?);
    let measured = format!("gen{gen} x{width} of gen{max_gen} x{max_width}");
    if width < max_width {
        return Some(Finding {
            verdict: Verdict::Fail,
            measured,
            why: "the link trained to fewer lanes than it has: reseat the GPU or riser, or check the slot",
            value: Some((f64::from(width), "lanes")),
        });
    }
    // An idle GPU lowers its link's generation to save power: only a busy one below its maximum is slow.
    let idle = g.clock_events.is_some_and(|b| b & clock_event::GPU_IDLE != 0);
    (gen < max_gen && !idle).then_some(Finding {
        verdict: Verdict::Warn,
        measured,
        why: "the link runs below its generation while the GPU is not idle: check the slot's and BIOS's PCIe \
              settings",
        value: None,
    })
}

fn nvlink(g: &GpuHealth) -> Option<Finding> {
    (!g.nvlinks_down.is_empty()).then(|| {
        let down: Vec<String> = g.nvlinks_down.iter().map(u32::to_string).collect();
        Finding {
            verdict: Verdict::Fail,
            measured: format!("link(s) {} down of {}", down.join(", "), g.nvlinks),
            why: "traffic between GPUs falls back to PCIe or fails: check the NVLink bridge or NVSwitch fabric \
                  (nvidia-smi nvlink -s)",
            value: Some((g.nvlinks_down.len() as f64, "links")),
        }
    })
}

fn persistence(g: &GpuHealth) -> Option<Finding> {
    (g.persistence == Some(false)).then(|| Finding {
        verdict: Verdict::Warn,
        measured: "persistence mode off".into(),
        why: "without it the driver lets go of the GPU between jobs and each job's first CUDA call waits for \
              it: run nvidia-persistenced (or nvidia-smi -pm 1)",
        value: None,
    })
}

const RULES: [Rule; 6] = [
    Rule {
        name: "gpu ECC",
        threshold: "0 uncorrectable errors (volatile and aggregate)",
        calls: &["nvmlDeviceGetTotalEccErrors"],
        any_of: false,
        read: |g| g.ecc_volatile.is_some() || g.ecc_aggregate.is_some(),
        judge: ecc,
        clean: "no uncorrectable ECC error",
    },
    Rule {
        name: "gpu memory repair",
        threshold: "no remapping pending or failed, no retired page pending",
        calls: &["nvmlDeviceGetRemappedRows", "nvmlDeviceGetRetiredPagesPendingStatus"],
        any_of: true,
        read: |g| g.remap_pending.is_some() || g.retired_pending.is_some(),
        judge: repair,
        clean: "no repair pending or failed",
    },
    Rule {
        name: "gpu clocks",
        threshold: "no hardware, thermal or power-brake slowdown (software power cap: WARN)",
        calls: &["nvmlDeviceGetCurrentClocksEventReasons"],
        any_of: false,
        read: |g| g.clock_events.is_some(),
        judge: clocks,
        clean: "none slowed",
    },
    Rule {
        name: "gpu PCIe link",
        threshold: "the link's maximum width (FAIL) and generation (WARN)",
        calls: &["nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkWidth"],
        any_of: false,
        read: |g| g.pcie_width.is_some() && g.pcie_max_width.is_some(),
        judge: pcie,
        clean: "every link at its width",
    },
    Rule {
        name: "gpu NVLink",
        threshold: "every NVLink up",
        calls: &["nvmlDeviceGetNvLinkState"],
        any_of: false,
        // A GPU without NVLinks has none down: it is judged too.
        read: |_| true,
        judge: nvlink,
        clean: "no NVLink down",
    },
    Rule {
        name: "gpu persistence mode",
        threshold: "on",
        calls: &["nvmlDeviceGetPersistenceMode"],
        any_of: false,
        read: |g| g.persistence.is_some(),
        judge: persistence,
        clean: "on",
    },
];

/// Every GPU check of the hosts read; `per_node` is `--gpus-per-node`, and `ranks_count` says whether the
/// ranks on a node are the GPUs it should have where the flag is not given.
pub fn judge(hosts: &[HostReading], per_node: Option<usize>, ranks_count: bool) -> Judged {
    let any_gpu = hosts.iter().any(|h| !h.gpus.gpus.is_empty());
    if per_node.is_none() && !any_gpu {
        let why = hosts
            .iter()
            .find_map(|h| h.gpus.unavailable.clone())
            .unwrap_or_else(|| "NVML found no GPU".into());
        let on = if hosts.len() > 1 { " on any host" } else { "" };
        return Judged {
            checks: Vec::new(),
            note: Some(format!("{NOT_RUN}{on}: {why}")),
        };
    }
    let mut checks = count(hosts, per_node, ranks_count);
    let total: usize = hosts.iter().map(|h| h.gpus.gpus.len()).sum();
    for rule in &RULES {
        checks.extend(per_gpu(hosts, rule, total));
    }
    checks.extend(super::gpu_copy::judge(hosts));
    checks.push(versions(hosts));
    Judged { checks, note: None }
}

fn count(hosts: &[HostReading], per_node: Option<usize>, ranks_count: bool) -> Vec<Check> {
    let name = "gpu count";
    let mut findings = Vec::new();
    let mut expected_any = false;
    for h in hosts {
        let (want, from) = match per_node {
            Some(n) => (Some(n), "--gpus-per-node"),
            None if ranks_count => (Some(h.ranks), "the ranks on the host"),
            None => (None, ""),
        };
        expected_any |= want.is_some();
        let lost: Vec<&GpuHealth> = h.gpus.gpus.iter().filter(|g| g.error.is_some()).collect();
        let good = h.gpus.gpus.len() - lost.len();
        let finding = |measured: String, detail: String| {
            let mut c = check(
                format!("{name}: {}", h.host),
                measured,
                &want.map_or("every GPU readable".into(), |n| format!(">= {n} ({from})")),
                Verdict::Fail,
                detail,
            );
            c.value = Some(good as f64);
            c.unit = "GPUs".into();
            c.evidence = evidence(h, h.gpus.gpus.clone());
            c
        };
        if let Some(why) = &h.gpus.unavailable {
            findings.push(finding(
                "GPUs not read".into(),
                format!("{}: {why}, while the job expects GPUs there", h.host),
            ));
        } else if want.is_some_and(|n| good < n) {
            let n = want.unwrap_or(0);
            findings.push(finding(
                format!("{good} of {n} GPUs"),
                format!(
                    "{} has {good} GPU(s) NVML can read, {n} expected ({from}): a GPU fell off the bus or is \
                     hidden (nvidia-smi, dmesg)",
                    h.host
                ),
            ));
        }
        for g in lost {
            let mut c = finding(
                format!("{} unreadable", g.label()),
                format!("{} {}: {}", h.host, g.label(), g.error.as_deref().unwrap_or("?")),
            );
            c.name = format!("{name}: {} {}", h.host, g.label());
            findings.push(c);
        }
    }
    if findings.is_empty() {
        let counts: Vec<usize> = hosts.iter().map(|h| h.gpus.gpus.len()).collect();
        let (lo, hi) = (
            counts.iter().min().copied().unwrap_or(0),
            counts.iter().max().copied().unwrap_or(0),
        );
        let per = if lo == hi {
            format!("{lo}")
        } else {
            format!("{lo} to {hi}")
        };
        let threshold = match per_node {
            Some(n) => format!(">= {n} (--gpus-per-node)"),
            None if expected_any => ">= the ranks on each host".into(),
            None => "not judged for --np's local ranks: give --gpus-per-node".into(),
        };
        let mut c = check(
            name.into(),
            format!("{per} GPU(s) on each of {} host(s)", hosts.len()),
            &threshold,
            Verdict::Pass,
            "every GPU expected is there and answers".into(),
        );
        c.value = Some(lo as f64);
        c.unit = "GPUs".into();
        return vec![c];
    }
    capped(name, findings)
}

fn per_gpu(hosts: &[HostReading], rule: &Rule, total: usize) -> Vec<Check> {
    let mut findings = Vec::new();
    let mut read = 0;
    for h in hosts {
        for g in h.gpus.gpus.iter().filter(|g| g.error.is_none()) {
            if !(rule.read)(g) {
                continue;
            }
            read += 1;
            if let Some(f) = (rule.judge)(g) {
                let mut c = check(
                    format!("{}: {} {}", rule.name, h.host, g.label()),
                    f.measured,
                    rule.threshold,
                    f.verdict,
                    format!("{} {}: {}", h.host, g.label(), f.why),
                );
                if let Some((v, unit)) = f.value {
                    c.value = Some(v);
                    c.unit = unit.into();
                }
                c.evidence = evidence(h, vec![g.clone()]);
                findings.push(c);
            }
        }
    }
    if !findings.is_empty() {
        return capped(rule.name, findings);
    }
    let lacking: Vec<&str> = rule
        .calls
        .iter()
        .copied()
        .filter(|call| hosts.iter().any(|h| h.gpus.missing.iter().any(|m| m == call)))
        .collect();
    let driver_lacks = if rule.any_of {
        lacking.len() == rule.calls.len()
    } else {
        !lacking.is_empty()
    };
    // Not available: a warning (it could not be decided), never a failure.
    let (verdict, measured, detail) = if read == 0 && total > 0 {
        let why = if driver_lacks {
            format!("the driver lacks {} (update the driver)", lacking.join(" and "))
        } else {
            format!(
                "no GPU answered {}: not supported by these GPUs, or turned off",
                rule.calls.join(" or ")
            )
        };
        (Verdict::Warn, "not available".to_string(), why)
    } else if rule.name == "gpu NVLink" && driver_lacks {
        (
            Verdict::Warn,
            "not available".to_string(),
            format!("the driver lacks {} (update the driver)", lacking.join(" and ")),
        )
    } else {
        let links: u32 = hosts.iter().flat_map(|h| &h.gpus.gpus).map(|g| g.nvlinks).sum();
        let what = if rule.name == "gpu NVLink" && links == 0 {
            "no NVLinks".to_string()
        } else if rule.name == "gpu NVLink" {
            format!("{links} NVLinks, {}", rule.clean)
        } else {
            rule.clean.to_string()
        };
        let not_read = if read < total {
            format!(" ({} not available)", total - read)
        } else {
            String::new()
        };
        (
            Verdict::Pass,
            format!("{read} GPU(s): {what}{not_read}"),
            format!("{read} GPU(s) on {} host(s) read", hosts.len()),
        )
    };
    vec![check(rule.name.into(), measured, rule.threshold, verdict, detail)]
}

/// The driver and CUDA versions across hosts: one version is a PASS, several a WARN naming which host has which.
fn versions(hosts: &[HostReading]) -> Check {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for h in hosts.iter().filter(|h| h.gpus.unavailable.is_none()) {
        let v = format!(
            "driver {}, CUDA {}",
            h.gpus.driver.as_deref().unwrap_or("?"),
            h.gpus.cuda.map_or("?".into(), gpu_health::cuda_version)
        );
        match groups.iter_mut().find(|g| g.0 == v) {
            Some(g) => g.1.push(&h.host),
            None => groups.push((v, vec![&h.host])),
        }
    }
    let name = "gpu driver".to_string();
    let threshold = "one driver and CUDA version on every host";
    match groups.len() {
        0 | 1 => check(
            name,
            groups.first().map_or("not read".into(), |g| g.0.clone()),
            threshold,
            Verdict::Pass,
            format!("the same on {} host(s)", groups.first().map_or(0, |g| g.1.len())),
        ),
        _ => {
            groups.sort_by_key(|g| std::cmp::Reverse(g.1.len()));
            // The hosts unlike the most are named; a version the most hosts run is counted (a cluster, not a list).
            let described: Vec<String> = groups
                .iter()
                .enumerate()
                .map(|(i, (v, hs))| match i {
                    0 => format!("{v} on {} host(s)", hs.len()),
                    _ => {
                        let shown: Vec<&str> = hs.iter().take(MAX_FINDINGS).copied().collect();
                        let more = hs.len().saturating_sub(MAX_FINDINGS);
                        let more = if more > 0 {
                            format!(" and {more} more")
                        } else {
                            String::new()
                        };
                        format!("{v} on {}{more}", shown.join(", "))
                    }
                })
                .collect();
            let mut c = check(
                name,
                format!("{} versions", groups.len()),
                threshold,
                Verdict::Warn,
                format!(
                    "{}: hosts on another driver can behave differently (NCCL, CUDA compatibility); install one \
                     everywhere",
                    described.join("; ")
                ),
            );
            c.evidence = groups
                .iter()
                .skip(1)
                .flat_map(|(_, hs)| hs.iter().take(MAX_FINDINGS))
                .filter_map(|host| hosts.iter().find(|h| &h.host == host))
                .map(|h| HostEvidence {
                    host: h.host.clone(),
                    gpu: Some(Gpus {
                        gpus: Vec::new(),
                        ..h.gpus.clone()
                    }),
                    ..HostEvidence::default()
                })
                .collect();
            c
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(i: u32) -> GpuHealth {
        GpuHealth {
            index: i,
            bus_id: format!("0000:{:02x}:00.0", 0x10 + i),
            name: "H100".into(),
            ecc_volatile: Some(0),
            ecc_aggregate: Some(0),
            remap_pending: Some(false),
            remap_failed: Some(false),
            retired_pending: None,
            clock_events: Some(0),
            pcie_gen: Some(5),
            pcie_width: Some(16),
            pcie_max_gen: Some(5),
            pcie_max_width: Some(16),
            persistence: Some(true),
            copies: Some(crate::net::gpu_health::CopyRates {
                device_gbps: 2000.0,
                h2d_gbps: 54.0,
                d2h_gbps: 54.0,
            }),
            ..GpuHealth::default()
        }
    }

    fn host(name: &str, n: u32) -> HostReading {
        HostReading {
            host: name.into(),
            ranks: n as usize,
            gpus: Gpus {
                driver: Some("580.00".into()),
                cuda: Some(13000),
                gpus: (0..n).map(gpu).collect(),
                ..Gpus::default()
            },
        }
    }

    fn verdicts(j: &Judged) -> Vec<(String, Verdict)> {
        j.checks.iter().map(|c| (c.name.clone(), c.verdict)).collect()
    }

    #[test]
    fn healthy_hosts_pass_one_check_per_kind() {
        let j = judge(&[host("a", 8), host("b", 8)], Some(8), true);
        assert_eq!(j.note, None);
        assert_eq!(j.checks.len(), 11, "{:?}", verdicts(&j));
        assert!(
            j.checks.iter().all(|c| c.verdict == Verdict::Pass && c.path == PATH),
            "{:?}",
            verdicts(&j)
        );
    }

    #[test]
    fn aggregate_errors_alone_fail_and_an_idle_gpus_lower_generation_does_not() {
        let mut h = host("a", 2);
        h.gpus.gpus[0].ecc_aggregate = Some(2);
        h.gpus.gpus[1].pcie_gen = Some(1);
        h.gpus.gpus[1].clock_events = Some(clock_event::GPU_IDLE);
        let j = judge(&[h], None, true);
        let ecc = j
            .checks
            .iter()
            .find(|c| c.name == "gpu ECC: a GPU 0 [0000:10:00.0]")
            .unwrap();
        assert_eq!((ecc.verdict, ecc.value), (Verdict::Fail, Some(2.0)));
        assert!(ecc.evidence[0]
            .line()
            .starts_with("a: driver 580.00, CUDA 13.0; GPU 0 [0000:10:00.0] H100"));
        let pcie = j.checks.iter().find(|c| c.name == "gpu PCIe link").unwrap();
        assert_eq!(pcie.verdict, Verdict::Pass);
    }

    #[test]
    fn the_count_follows_the_flag_else_a_launchers_ranks_never_local_ranks() {
        let mut short = host("a", 2);
        short.ranks = 4;
        let fail = |j: &Judged| {
            j.checks
                .iter()
                .any(|c| c.name == "gpu count: a" && c.verdict == Verdict::Fail)
        };
        assert!(fail(&judge(std::slice::from_ref(&short), None, true)));
        assert!(!fail(&judge(std::slice::from_ref(&short), None, false)));
        assert!(fail(&judge(std::slice::from_ref(&short), Some(3), false)));
        // A lost GPU is a finding of its own, naming it.
        short.gpus.gpus[1].error = Some("error 15".into());
        let j = judge(&[short], Some(1), false);
        assert!(
            j.checks
                .iter()
                .any(|c| c.name == "gpu count: a GPU 1 [0000:11:00.0]" && c.verdict == Verdict::Fail),
            "{:?}",
            verdicts(&j)
        );
    }

    #[test]
    fn no_gpu_anywhere_is_one_note_and_one_host_without_nvml_among_others_fails() {
        let none = HostReading {
            host: "c".into(),
            ranks: 1,
            gpus: Gpus {
                unavailable: Some("NVML not found".into()),
                ..Gpus::default()
            },
        };
        let j = judge(&[none.clone(), none.clone()], None, true);
        assert!(j.checks.is_empty());
        assert_eq!(
            j.note.as_deref(),
            Some("GPU checks not run on any host: NVML not found")
        );
        let j = judge(&[host("a", 1), none], None, true);
        let c = j.checks.iter().find(|c| c.name == "gpu count: c").unwrap();
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.detail.contains("NVML not found"), "{}", c.detail);
    }

    #[test]
    fn drivers_that_disagree_warn_naming_the_odd_hosts() {
        let mut odd = host("z", 1);
        odd.gpus.driver = Some("570.10".into());
        odd.gpus.cuda = Some(12080);
        let j = judge(&[host("a", 1), host("b", 1), odd], None, true);
        let c = j.checks.iter().find(|c| c.name == "gpu driver").unwrap();
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(
            c.detail
                .starts_with("driver 580.00, CUDA 13.0 on 2 host(s); driver 570.10, CUDA 12.8 on z:"),
            "{}",
            c.detail
        );
        assert_eq!(c.evidence.len(), 1);
        assert_eq!(c.evidence[0].line(), "z: driver 570.10, CUDA 12.8");
    }

    #[test]
    fn many_findings_of_one_kind_are_a_screen_and_one_check_naming_the_rest() {
        let mut h = host("a", 20);
        for g in &mut h.gpus.gpus {
            g.persistence = Some(false);
        }
        h.gpus.gpus[19].ecc_volatile = Some(1);
        let j = judge(&[h], None, false);
        let persist: Vec<&Check> = j
            .checks
            .iter()
            .filter(|c| c.name.starts_with("gpu persistence mode"))
            .collect();
        assert_eq!(persist.len(), MAX_FINDINGS);
        let rest = persist.last().unwrap();
        assert_eq!(rest.name, "gpu persistence mode: 9 more");
        assert_eq!(rest.verdict, Verdict::Warn);
        assert!(
            rest.detail.contains("a GPU 19 [0000:23:00.0] (persistence mode off)"),
            "{}",
            rest.detail
        );
    }

    #[test]
    fn a_reading_no_gpu_answers_warns_not_available_saying_why() {
        let mut h = host("a", 2);
        for g in &mut h.gpus.gpus {
            g.ecc_volatile = None;
            g.ecc_aggregate = None;
        }
        let j = judge(std::slice::from_ref(&h), None, false);
        let c = j.checks.iter().find(|c| c.name == "gpu ECC").unwrap();
        assert_eq!((c.verdict, c.measured.as_str()), (Verdict::Warn, "not available"));
        assert!(c.detail.contains("not supported by these GPUs"), "{}", c.detail);
        h.gpus.missing = vec!["nvmlDeviceGetTotalEccErrors".into()];
        let j = judge(&[h], None, false);
        let c = j.checks.iter().find(|c| c.name == "gpu ECC").unwrap();
        assert!(
            c.detail.contains("the driver lacks nvmlDeviceGetTotalEccErrors"),
            "{}",
            c.detail
        );
    }
}
