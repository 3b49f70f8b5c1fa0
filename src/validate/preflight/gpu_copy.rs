//! The GPUs' copy bandwidths as preflight checks: within device memory, host to device and device to host,
//! measured on every GPU by its host's first rank after NVML's readings ([`crate::memory::copy_rates`]).
//! A GPU is slow when it is below its peers (the GPUs of its model across the job) by pairwise's rule for a
//! host: in log space, below the median by the floor (40% with fewer than 5 peers, 20% from 5) and by the bar
//! of robust deviations corrected for the GPUs judged; and a copy over PCIe is slow below half of what the
//! GPU's link carries at its maximum generation and width. A finding names host, GPU index and bus id, with
//! the cause NVML shows (a link trained to fewer lanes, a clock slowdown) where it shows one.

use super::gpu_check::{capped, check, evidence, HostReading};
use super::verdict::{Check, Verdict};
use crate::net::gpu_health::{clock_event, pcie_gbps, slowdowns, CopyRates, GpuHealth, Gpus};
use crate::validate::pairwise::fit::{bar, robust_sd};
use crate::validate::pairwise::localise::Thresholds;
use crate::validate::pairwise::median::median;

/// The share of its PCIe link's rate a copy between host and device must reach (an H100 on gen5 x16 reaches
/// about 85%; one trained to x8, or to a lower generation, stays below half).
pub const PCIE_SHARE: f64 = 0.5;
/// Peers below which a GPU is not compared with them (the median of two is their middle).
pub const MIN_PEERS: usize = 3;
/// Peers from which the lower floor holds (pairwise's fit needs five hosts).
const FIT_PEERS: usize = 5;
/// The least spread (log units) the peers are judged with, as pairwise's.
const LEAST_SD: f64 = 0.01;

/// One way of copying.
#[derive(Clone, Copy)]
struct Kind {
    name: &'static str,
    rate: fn(&CopyRates) -> f64,
    /// Whether it crosses the PCIe link (judged against the link too).
    pcie: bool,
    what: &'static str,
}

const KINDS: [Kind; 3] = [
    Kind {
        name: "gpu copy bandwidth",
        rate: |c| c.device_gbps,
        pcie: false,
        what: "a copy within device memory (bytes read + written)",
    },
    Kind {
        name: "gpu host-to-device",
        rate: |c| c.h2d_gbps,
        pcie: true,
        what: "a copy from pinned host memory",
    },
    Kind {
        name: "gpu device-to-host",
        rate: |c| c.d2h_gbps,
        pcie: true,
        what: "a copy to pinned host memory",
    },
];

/// Reads `measured` (bus id and rates, or why not) into `gpus`, matching NVML's GPUs by bus id.
pub fn attach(gpus: &mut Gpus, measured: Result<Vec<(String, CopyRates)>, String>) {
    match measured {
        Err(why) => gpus.copies_unmeasured = Some(why),
        Ok(rates) => {
            for g in &mut gpus.gpus {
                g.copies = rates
                    .iter()
                    .find(|(bus, _)| bus.eq_ignore_ascii_case(&g.bus_id))
                    .map(|(_, r)| *r);
            }
        }
    }
}

/// The peer rule over `rates` (GB/s, all of one model): for each, whether it is slow and the peers' median.
fn below_peers(rates: &[f64]) -> Option<(Vec<bool>, f64)> {
    if rates.len() < MIN_PEERS || rates.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
        return None;
    }
    let th = Thresholds::default();
    let logs: Vec<f64> = rates.iter().map(|r| r.ln()).collect();
    let centre = median(&mut logs.clone());
    let sd = robust_sd(logs.iter().copied(), centre).max(LEAST_SD);
    let floor = if rates.len() < FIT_PEERS {
        th.bw_floor
    } else {
        th.bw_least
    };
    let least = -(1.0 - floor).ln();
    let z = bar(rates.len(), th.alpha, th.k);
    let slow = logs.iter().map(|l| centre - l > least && centre - l > z * sd).collect();
    Some((slow, centre.exp()))
}

/// What NVML shows that slows the copies of `g` (`pcie`: a copy over the link), if anything.
fn cause(g: &GpuHealth, pcie: bool) -> String {
    let mut why = Vec::new();
    if let (true, Some(w), Some(max)) = (pcie, g.pcie_width, g.pcie_max_width) {
        if w < max {
            why.push(format!("its PCIe link trained to x{w} of x{max} (see gpu PCIe link)"));
        }
    }
    // Read before the copies: an idle GPU's link drops its generation to save power, a busy one's should not.
    let idle = g.clock_events.is_some_and(|b| b & clock_event::GPU_IDLE != 0);
    if let (true, false, Some(gen), Some(max)) = (pcie, idle, g.pcie_gen, g.pcie_max_gen) {
        if gen < max {
            why.push(format!(
                "its PCIe link runs at gen{gen} of gen{max} (see gpu PCIe link)"
            ));
        }
    }
    if let Some(bits) = g.clock_events {
        let slow = slowdowns(bits & !clock_event::SW_POWER_CAP);
        if !slow.is_empty() {
            why.push(format!("slowed now: {} (see gpu clocks)", slow.join(", ")));
        }
    }
    if why.is_empty() {
        let more = if pcie {
            "a PCIe switch or retimer, the slot, or the host's memory or IOMMU settings"
        } else {
            "its memory or copy engines"
        };
        return format!(
            "NVML shows no cause (links and clocks as they should be): check {more} (dcgmi diag -r 2, \
             nvidia-smi -q)"
        );
    }
    why.join("; ")
}

/// The checks of one kind of copy over every GPU measured.
fn judge_kind(hosts: &[HostReading], kind: Kind) -> Vec<Check> {
    let measured: Vec<(&HostReading, &GpuHealth, f64)> = hosts
        .iter()
        .flat_map(|h| h.gpus.gpus.iter().map(move |g| (h, g)))
        .filter_map(|(h, g)| g.copies.map(|c| (h, g, (kind.rate)(&c))))
        .collect();
    let threshold = if kind.pcie {
        format!(
            "not below its peers (pairwise's rule), and >= {:.0}% of its PCIe link's maximum rate",
            PCIE_SHARE * 100.0
        )
    } else {
        "not below its peers (pairwise's rule)".to_string()
    };
    if measured.is_empty() {
        let why = hosts
            .iter()
            .find_map(|h| h.gpus.copies_unmeasured.clone())
            .unwrap_or_else(|| "no GPU's copies were measured".into());
        return vec![check(
            kind.name.into(),
            "not measured".into(),
            &threshold,
            Verdict::Warn,
            why,
        )];
    }
    // Peers: the GPUs of one model.
    let mut models: Vec<&str> = measured.iter().map(|m| m.1.name.as_str()).collect();
    models.sort_unstable();
    models.dedup();
    let mut slow_of_peers = vec![None; measured.len()];
    let mut compared = 0;
    for model in &models {
        let idx: Vec<usize> = (0..measured.len()).filter(|&i| measured[i].1.name == *model).collect();
        let rates: Vec<f64> = idx.iter().map(|&i| measured[i].2).collect();
        if let Some((slow, med)) = below_peers(&rates) {
            compared += idx.len();
            for (k, &i) in idx.iter().enumerate() {
                slow_of_peers[i] = Some((slow[k], med));
            }
        }
    }
    let mut findings = Vec::new();
    for (i, (h, g, r)) in measured.iter().enumerate() {
        let mut said = Vec::new();
        if let Some((true, med)) = slow_of_peers[i] {
            said.push(format!("{:.0}% of its peers' median {med:.1} GB/s", 100.0 * r / med));
        }
        let link = g.pcie_max_gen.zip(g.pcie_max_width);
        if let (true, Some((gen, width))) = (kind.pcie, link) {
            if let Some(allowed) = pcie_gbps(gen, width).filter(|a| *r < PCIE_SHARE * a) {
                said.push(format!(
                    "{:.0}% of gen{gen} x{width}'s {allowed:.1} GB/s",
                    100.0 * r / allowed
                ));
            }
        }
        if said.is_empty() {
            continue;
        }
        let mut c = check(
            format!("{}: {} {}", kind.name, h.host, g.label()),
            format!("{r:.1} GB/s, {}", said.join(", ")),
            &threshold,
            Verdict::Fail,
            format!(
                "{} {}: {} is slow, and every collective it is in waits for it; cause: {}",
                h.host,
                g.label(),
                kind.what,
                cause(g, kind.pcie)
            ),
        );
        c.value = Some(*r);
        c.unit = "GB/s".into();
        c.evidence = evidence(h, vec![(*g).clone()]);
        findings.push(c);
    }
    if !findings.is_empty() {
        return capped(kind.name, findings);
    }
    let rates: Vec<f64> = measured.iter().map(|m| m.2).collect();
    let (lo, hi) = rates
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    let peers = if compared < measured.len() {
        format!(
            "; {} not compared with peers (fewer than {MIN_PEERS} GPUs of their model)",
            measured.len() - compared
        )
    } else {
        String::new()
    };
    let mut c = check(
        kind.name.into(),
        format!("{} GPU(s): {lo:.1} to {hi:.1} GB/s", measured.len()),
        &threshold,
        Verdict::Pass,
        format!("{} on {} host(s){peers}", kind.what, hosts.len()),
    );
    c.value = Some(lo);
    c.unit = "GB/s".into();
    vec![c]
}

/// The copy checks of every GPU measured (none where no host read GPUs).
pub fn judge(hosts: &[HostReading]) -> Vec<Check> {
    if hosts.iter().all(|h| h.gpus.gpus.is_empty()) {
        return Vec::new();
    }
    KINDS.iter().flat_map(|&k| judge_kind(hosts, k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, rates: &[(f64, f64)]) -> HostReading {
        HostReading {
            host: name.into(),
            ranks: rates.len(),
            gpus: Gpus {
                gpus: rates
                    .iter()
                    .enumerate()
                    .map(|(i, &(dev, pcie))| GpuHealth {
                        index: i as u32,
                        bus_id: format!("0000:{:02x}:00.0", 0x10 + i),
                        name: "H100".into(),
                        pcie_gen: Some(5),
                        pcie_width: Some(16),
                        pcie_max_gen: Some(5),
                        pcie_max_width: Some(16),
                        clock_events: Some(0),
                        copies: Some(CopyRates {
                            device_gbps: dev,
                            h2d_gbps: pcie,
                            d2h_gbps: pcie,
                        }),
                        ..GpuHealth::default()
                    })
                    .collect(),
                ..Gpus::default()
            },
        }
    }

    fn named<'a>(c: &'a [Check], name: &str) -> &'a Check {
        c.iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("{name}: {c:#?}"))
    }

    #[test]
    fn clean_gpus_pass_one_check_per_kind() {
        let c = judge(&[host("a", &[(2000.0, 54.0); 4]), host("b", &[(1950.0, 53.0); 4])]);
        assert_eq!(c.len(), 3, "{c:#?}");
        assert!(c.iter().all(|c| c.verdict == Verdict::Pass), "{c:#?}");
        assert_eq!(named(&c, "gpu host-to-device").measured, "8 GPU(s): 53.0 to 54.0 GB/s");
    }

    #[test]
    fn a_gpu_at_half_its_peers_is_named_with_its_bus_id_and_cause() {
        let mut rates = [(2000.0, 54.0); 8];
        rates[3] = (1000.0, 27.0);
        let mut h = host("h2", &rates);
        h.gpus.gpus[3].pcie_width = Some(8);
        h.gpus.gpus[3].pcie_gen = Some(4);
        let c = judge(&[h]);
        let d = named(&c, "gpu copy bandwidth: h2 GPU 3 [0000:13:00.0]");
        assert_eq!(d.verdict, Verdict::Fail);
        assert_eq!(d.measured, "1000.0 GB/s, 50% of its peers' median 2000.0 GB/s");
        assert!(d.detail.contains("cause: NVML shows no cause"), "{}", d.detail);
        let h2d = named(&c, "gpu host-to-device: h2 GPU 3 [0000:13:00.0]");
        assert_eq!(
            h2d.measured,
            "27.0 GB/s, 50% of its peers' median 54.0 GB/s, 43% of gen5 x16's 63.0 GB/s"
        );
        assert!(
            h2d.detail.contains("cause: its PCIe link trained to x8 of x16"),
            "{}",
            h2d.detail
        );
        assert_eq!(h2d.evidence[0].gpu.as_ref().unwrap().gpus[0].index, 3);
        assert_eq!(c.iter().filter(|c| c.verdict == Verdict::Fail).count(), 3, "{c:#?}");
    }

    #[test]
    fn scatter_within_the_floor_is_no_finding_and_two_gpus_are_not_compared() {
        let c = judge(&[host(
            "a",
            &[(2000.0, 54.0), (1700.0, 47.0), (2100.0, 55.0), (1900.0, 50.0)],
        )]);
        assert!(c.iter().all(|c| c.verdict == Verdict::Pass), "{c:#?}");
        let c = judge(&[host("a", &[(2000.0, 54.0), (1000.0, 40.0)])]);
        let d = named(&c, "gpu copy bandwidth");
        assert_eq!(d.verdict, Verdict::Pass);
        assert!(d.detail.contains("2 not compared with peers"), "{}", d.detail);
    }

    #[test]
    fn a_copy_under_half_its_link_fails_without_peers_and_none_measured_warns_why() {
        let c = judge(&[host("a", &[(2000.0, 20.0)])]);
        let d = named(&c, "gpu device-to-host: a GPU 0 [0000:10:00.0]");
        assert_eq!(d.measured, "20.0 GB/s, 32% of gen5 x16's 63.0 GB/s");
        let mut h = host("a", &[(1.0, 1.0)]);
        h.gpus.gpus[0].copies = None;
        h.gpus.copies_unmeasured = Some("CUDA driver not found".into());
        let c = judge(&[h]);
        let d = named(&c, "gpu copy bandwidth");
        assert_eq!((d.verdict, d.detail.as_str()), (Verdict::Warn, "CUDA driver not found"));
    }

    #[test]
    fn rates_attach_by_bus_id_whatever_its_case() {
        let mut g = Gpus {
            gpus: vec![GpuHealth {
                bus_id: "0000:1a:00.0".into(),
                ..GpuHealth::default()
            }],
            ..Gpus::default()
        };
        let r = CopyRates {
            device_gbps: 1.0,
            h2d_gbps: 2.0,
            d2h_gbps: 3.0,
        };
        attach(&mut g, Ok(vec![("0000:1A:00.0".into(), r)]));
        assert_eq!(g.gpus[0].copies, Some(r));
    }
}
