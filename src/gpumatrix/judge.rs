//! `collbench gpu-matrix` results: each ordered GPU pair's copy bandwidth against what its link should give
//! (NVLinks x per-link rate, else PCIe generation x width, from NVML), pairs under a fraction flagged with
//! advice. Pure logic, tested with made-up measurements.

use serde::Serialize;

use crate::net::gpu_topo::{expected_gbs, pair_of, GpuInfo, Topology};
use crate::sizes::format_size;

/// Version of the `gpu-matrix` JSON; bump on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// One measured copy from `src` to `dst` (CUDA ordinals; equal for a device's own copy).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Copy {
    pub src: usize,
    pub dst: usize,
    /// PCI bus ids (sysfs form), to find the GPUs in NVML's list whatever CUDA_VISIBLE_DEVICES did.
    pub src_bus: String,
    pub dst_bus: String,
    pub gbs: f64,
    /// Peer access was enabled (else the driver stages the copy through host memory).
    pub peer_access: bool,
}

/// One ordered pair, judged.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    #[serde(flatten)]
    pub copy: Copy,
    /// The link as `nvidia-smi topo -m` names it plus what the expectation assumes, or why there is none.
    pub link: String,
    pub expected_gbs: Option<f64>,
    /// Measured over expected.
    pub fraction: Option<f64>,
    pub flagged: bool,
}

/// The whole measurement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub bytes: u64,
    pub iters: usize,
    /// Pairs under this fraction of their expectation are flagged.
    pub threshold: f64,
    /// Why expectations are missing (NVML not found), if they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology_unavailable: Option<String>,
    /// Each device's copy within its own memory (the ceiling a peer copy is read against).
    pub self_copies: Vec<Copy>,
    pub pairs: Vec<Row>,
    pub flagged: usize,
    pub advice: Vec<String>,
}

fn find<'a>(topo: &'a Topology, bus: &str) -> Option<&'a GpuInfo> {
    topo.gpus.iter().find(|g| g.bus_id == bus)
}

/// Judges `copies` (peer copies and self copies together) against `topo`.
pub fn judge(copies: &[Copy], topo: &Topology, bytes: u64, iters: usize, threshold: f64) -> Report {
    let (self_copies, peer): (Vec<Copy>, Vec<Copy>) = copies.iter().cloned().partition(|c| c.src == c.dst);
    let mut rows = Vec::new();
    let mut advice = Vec::new();
    for c in peer {
        let (a, b) = (find(topo, &c.src_bus), find(topo, &c.dst_bus));
        let (expected, link) = match (a, b) {
            (Some(a), Some(b)) => {
                let pair = pair_of(&topo.pairs, a.index, b.index);
                let label = pair.map_or("?".to_string(), |p| p.label());
                match expected_gbs(a, b, pair) {
                    // NVLink expectations already start with the pair's label (NV4 ...).
                    Some((gbs, why)) if why.starts_with(&label) => (Some(gbs), why),
                    Some((gbs, why)) => (Some(gbs), format!("{label}: {why}")),
                    None => (None, format!("{label}: link rate unknown")),
                }
            }
            _ => (None, "unknown (no NVML data for these GPUs)".to_string()),
        };
        let fraction = expected.filter(|e| *e > 0.0).map(|e| c.gbs / e);
        let flagged = fraction.is_some_and(|f| f < threshold);
        if flagged {
            advice.push(flag_advice(&c, &link, fraction.unwrap_or(0.0)));
        }
        rows.push(Row {
            copy: c,
            link,
            expected_gbs: expected,
            fraction,
            flagged,
        });
    }
    let no_peer: Vec<String> = rows
        .iter()
        .filter(|r| !r.copy.peer_access)
        .map(|r| format!("{}->{}", r.copy.src, r.copy.dst))
        .collect();
    if !no_peer.is_empty() {
        advice.push(format!(
            "no peer access for {}: those copies go through host memory. Check `nvidia-smi topo -p2p r`, and that \
             ACS or the IOMMU does not block peer-to-peer on this machine",
            no_peer.join(", ")
        ));
    }
    Report {
        schema_version: SCHEMA_VERSION,
        bytes,
        iters,
        threshold,
        topology_unavailable: topo.unavailable.clone(),
        self_copies,
        flagged: rows.iter().filter(|r| r.flagged).count(),
        pairs: rows,
        advice,
    }
}

fn flag_advice(c: &Copy, link: &str, fraction: f64) -> String {
    let pct = fraction * 100.0;
    if link.starts_with("NV") {
        format!(
            "gpu {} -> gpu {} reached {pct:.0}% of its NVLink expectation ({link}): NVLink peers are not being \
             used as such. Check `nvidia-smi nvlink -s` for links down, that the job's GPUs (CUDA_VISIBLE_DEVICES, \
             or the scheduler's allocation) are NVLink peers rather than GPUs split across NVLink islands, and \
             that peer access is enabled",
            c.src, c.dst
        )
    } else {
        format!(
            "gpu {} -> gpu {} reached {pct:.0}% of its PCIe expectation ({link}): check the link trained at full \
             width and generation (`nvidia-smi -q -d PCIE`), and whether the pair crosses CPU sockets or a PCIe \
             switch with ACS on; a scheduler that gives a job GPUs on different sockets or switches causes this",
            c.src, c.dst
        )
    }
}

/// The report as text.
pub fn render(r: &Report) -> String {
    let mut out = format!(
        "# gpu-matrix: {} per copy, {} timed copies per pair, flagged under {:.0}% of the link's expectation\n",
        format_size(r.bytes),
        r.iters,
        r.threshold * 100.0
    );
    if let Some(why) = &r.topology_unavailable {
        out.push_str(&format!("# no expectations: {why}\n"));
    }
    for c in &r.self_copies {
        out.push_str(&format!(
            "# gpu {} ({}) copy within its own memory: {:.1} GB/s\n",
            c.src, c.src_bus, c.gbs
        ));
    }
    if r.pairs.is_empty() {
        out.push_str("one GPU on this node: no pairs to measure\n");
        return out;
    }
    let mut rows = vec![["src", "dst", "GB/s", "expected", "%", "flag", "link"]
        .map(String::from)
        .to_vec()];
    for p in &r.pairs {
        rows.push(vec![
            p.copy.src.to_string(),
            p.copy.dst.to_string(),
            format!("{:.1}", p.copy.gbs),
            p.expected_gbs.map_or("-".into(), |e| format!("{e:.1}")),
            p.fraction.map_or("-".into(), |f| format!("{:.0}", f * 100.0)),
            if p.flagged { "SLOW" } else { "" }.into(),
            format!(
                "{}{}",
                p.link,
                if p.copy.peer_access { "" } else { " (no peer access)" }
            ),
        ]);
    }
    // Numbers (the first five columns) right-aligned.
    out.push_str(&crate::info::columns(&rows, &[0, 1, 2, 3, 4]));
    if r.advice.is_empty() {
        out.push_str("no pair below its expectation\n");
    }
    for a in &r.advice {
        out.push_str(&format!("warning: {a}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::gpu_topo::{pairs, tests::four, Level};

    fn topo() -> Topology {
        let gpus = four();
        Topology {
            unavailable: None,
            nvml_version: None,
            pairs: pairs(&gpus, |a, b| {
                Some(if a / 2 == b / 2 { Level::Single } else { Level::System })
            }),
            gpus,
        }
    }

    fn copy(src: usize, dst: usize, gbs: f64) -> Copy {
        let bus = ["0000:19:00.0", "0000:1a:00.0", "0000:5e:00.0", "0000:5f:00.0"];
        Copy {
            src,
            dst,
            src_bus: bus[src].into(),
            dst_bus: bus[dst].into(),
            gbs,
            peer_access: true,
        }
    }

    #[test]
    fn pairs_far_below_their_link_are_flagged_with_advice() {
        // 0<->1 have 4 NVLinks v3 = 100 GB/s; 0->1 at 92 is fine, 1->0 at 20 is the split-island symptom.
        let copies = vec![copy(0, 0, 900.0), copy(0, 1, 92.0), copy(1, 0, 20.0), copy(2, 3, 25.0)];
        let r = judge(&copies, &topo(), 256 << 20, 5, 0.5);
        assert_eq!(r.self_copies.len(), 1);
        assert_eq!(r.pairs.len(), 3);
        assert_eq!(r.flagged, 1);
        let slow = r.pairs.iter().find(|p| p.flagged).unwrap();
        assert_eq!((slow.copy.src, slow.copy.dst, slow.expected_gbs), (1, 0, Some(100.0)));
        assert!((slow.fraction.unwrap() - 0.2).abs() < 1e-12);
        assert!(
            r.advice[0].contains("NVLink") && r.advice[0].contains("CUDA_VISIBLE_DEVICES"),
            "{:?}",
            r.advice
        );
        // 2->3 on PCIe gen4 x16 (31.5 GB/s) at 25 is 79%: not flagged.
        let pcie = r.pairs.iter().find(|p| p.copy.src == 2).unwrap();
        assert!(!pcie.flagged && pcie.link.starts_with("PIX: PCIe gen4 x16"), "{pcie:?}");
        let text = render(&r);
        assert!(
            text.contains("SLOW") && text.contains("warning: gpu 1 -> gpu 0 reached 20%"),
            "{text}"
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["pairs"][1]["flagged"], true);
        assert_eq!(v["pairs"][1]["src"], 1, "the copy's fields sit in the row");
    }

    #[test]
    fn without_nvml_nothing_is_flagged_and_the_reason_is_shown() {
        let none = Topology {
            unavailable: Some("NVML not found".into()),
            ..Topology::default()
        };
        let mut c = copy(0, 1, 3.0);
        c.peer_access = false;
        let r = judge(&[c], &none, 1 << 20, 2, 0.5);
        assert_eq!((r.flagged, r.pairs[0].expected_gbs), (0, None));
        assert!(r.advice[0].contains("no peer access for 0->1"), "{:?}", r.advice);
        let text = render(&r);
        assert!(text.contains("# no expectations: NVML not found"), "{text}");
        assert!(text.contains("(no peer access)"), "{text}");
    }

    #[test]
    fn one_gpu_reports_its_own_copy_and_no_pairs() {
        let r = judge(&[copy(0, 0, 1500.0)], &topo(), 256 << 20, 5, 0.5);
        let text = render(&r);
        assert!(
            text.contains("gpu 0 (0000:19:00.0) copy within its own memory: 1500.0 GB/s"),
            "{text}"
        );
        assert!(text.ends_with("one GPU on this node: no pairs to measure\n"), "{text}");
    }
}
