//! GPU topology as NVML reports it (see [`super::nvml`]): each GPU's PCIe link and NVLinks, and per pair the
//! closest common ancestor and the NVLinks between them. Pure data and logic, tested with made-up machines;
//! also the bandwidth a pair's link should give (`collbench gpu-matrix`).

use serde::{Deserialize, Serialize};

/// What NVML said about one host's GPUs, or why it said nothing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// Why there is no topology (NVML not found, or a call failed); `None` when NVML answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// NVML's own version (`12.580.65`), when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvml_version: Option<String>,
    /// GPUs in NVML's order (which is the CUDA order under CUDA_DEVICE_ORDER=PCI_BUS_ID).
    pub gpus: Vec<GpuInfo>,
    /// Every unordered pair (a < b).
    pub pairs: Vec<Pair>,
}

/// One GPU as NVML sees it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    pub index: usize,
    pub name: String,
    /// PCI bus id in sysfs form (`0000:19:00.0`).
    pub bus_id: String,
    pub numa_node: Option<u32>,
    /// Maximum PCIe generation and width of the link (the current ones drop when the GPU idles).
    pub pcie_gen: Option<u32>,
    pub pcie_width: Option<u32>,
    /// NVLink version of the first active link, as NVML's `nvmlNvlinkVersion_t` numbers it (6 is NVLink 4.0).
    pub nvlink_version: Option<u32>,
    /// CUDA compute capability's major number, where NVML gave it (9: Hopper).
    #[serde(default)]
    pub compute_major: Option<i32>,
    /// Every NVLink the device has, active or not.
    pub links: Vec<NvLink>,
}

/// What is at the other end of an NVLink.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Remote {
    Gpu,
    Switch,
    Other,
}

/// One NVLink of a GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NvLink {
    pub link: u32,
    pub active: bool,
    pub remote: Remote,
    /// The remote end's PCI bus id (sysfs form), when NVML gave it.
    pub remote_bus_id: Option<String>,
}

/// NVML's topology levels (nvmlGpuTopologyLevel_t), nearest first, named as `nvidia-smi topo -m` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Same board (multi-GPU boards).
    Internal,
    /// One PCIe switch between them (PIX).
    Single,
    /// Several PCIe switches, no host bridge (PXB).
    Multiple,
    /// Through a PCIe host bridge (PHB).
    HostBridge,
    /// Through the CPU's interconnect between host bridges of one NUMA node (NODE).
    Node,
    /// Across NUMA nodes (SYS).
    System,
}

impl Level {
    /// From NVML's numeric level.
    pub fn from_nvml(v: u32) -> Option<Level> {
        Some(match v {
            0 => Level::Internal,
            10 => Level::Single,
            20 => Level::Multiple,
            30 => Level::HostBridge,
            40 => Level::Node,
            50 => Level::System,
            _ => return None,
        })
    }

    /// The short name `nvidia-smi topo -m` uses.
    pub fn short(self) -> &'static str {
        match self {
            Level::Internal => "BRD",
            Level::Single => "PIX",
            Level::Multiple => "PXB",
            Level::HostBridge => "PHB",
            Level::Node => "NODE",
            Level::System => "SYS",
        }
    }
}

/// Two GPUs and what joins them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    pub a: usize,
    pub b: usize,
    /// Closest common PCIe ancestor; `None` where NVML could not say.
    pub level: Option<Level>,
    /// Active NVLinks joining them: direct links, or through NVSwitches the smaller of the two GPUs' counts.
    pub nvlinks: u32,
    /// The NVLinks go through NVSwitches.
    pub via_switch: bool,
}

impl Pair {
    /// The connection as `nvidia-smi topo -m` writes it: `NV18`, else the PCIe level.
    pub fn label(&self) -> String {
        if self.nvlinks > 0 {
            format!("NV{}", self.nvlinks)
        } else {
            self.level.map_or("?".into(), |l| l.short().into())
        }
    }
}

/// Active links of `g` to the GPU at `bus_id`.
fn direct_links(g: &GpuInfo, bus_id: &str) -> u32 {
    g.links
        .iter()
        .filter(|l| l.active && l.remote == Remote::Gpu && l.remote_bus_id.as_deref() == Some(bus_id))
        .count() as u32
}

/// Active links of `g` to NVSwitches.
fn switch_links(g: &GpuInfo) -> u32 {
    g.links
        .iter()
        .filter(|l| l.active && l.remote == Remote::Switch)
        .count() as u32
}

/// Every pair of `gpus`, with `level(a, b)` the common ancestor NVML reports for indices `a` and `b`.
pub fn pairs(gpus: &[GpuInfo], level: impl Fn(usize, usize) -> Option<Level>) -> Vec<Pair> {
    let mut out = Vec::new();
    for (i, a) in gpus.iter().enumerate() {
        for (j, b) in gpus.iter().enumerate().skip(i + 1) {
            let direct = direct_links(a, &b.bus_id).max(direct_links(b, &a.bus_id));
            let (sa, sb) = (switch_links(a), switch_links(b));
            let (nvlinks, via_switch) = if direct > 0 {
                (direct, false)
            } else if sa > 0 && sb > 0 {
                (sa.min(sb), true)
            } else {
                (0, false)
            };
            out.push(Pair {
                a: a.index,
                b: b.index,
                level: level(i, j),
                nvlinks,
                via_switch,
            });
        }
    }
    out
}

/// A PCI bus id in sysfs form: NVML writes an 8-digit domain (`00000000:19:00.0`), sysfs four, lower case.
pub fn sysfs_bus_id(nvml: &str) -> String {
    let s = nvml.trim().to_lowercase();
    match s.split_once(':') {
        Some((dom, rest)) => match u32::from_str_radix(dom, 16) {
            Ok(d) => format!("{d:04x}:{rest}"),
            Err(_) => s,
        },
        None => s,
    }
}

/// The NVLink generation an `nvmlNvlinkVersion_t` value names: 1 = 1.0 (P100), 2 = 2.0 (V100), 3 = 2.2,
/// 4 = 3.0 (A100), 5 = 3.1, 6 = 4.0 (H100/H200), 7 = 5.0 (B200). NVML returns this enumeration, not the
/// generation's number.
pub fn nvlink_generation(nvml_version: u32) -> Option<&'static str> {
    Some(match nvml_version {
        1 => "1.0",
        2 => "2.0",
        3 => "2.2",
        4 => "3.0",
        5 => "3.1",
        6 => "4.0",
        7 => "5.0",
        _ => return None,
    })
}

/// One NVLink lane's bandwidth in one direction, GB/s, by NVML's `nvmlNvlinkVersion_t` value. Some
/// drivers report 7 (5.0) for Hopper GPUs, whose links are 4.0: with compute capability 9.x, 4.0's rate.
pub fn nvlink_gbs_per_link(nvml_version: u32, compute_major: Option<i32>) -> Option<f64> {
    match nvml_version {
        1 => Some(20.0),
        2..=6 => Some(25.0),
        7 if compute_major == Some(9) => Some(25.0),
        7 => Some(50.0),
        _ => None,
    }
}

/// A PCIe link's bandwidth in one direction, GB/s (after line coding), by generation and width.
pub fn pcie_gbs(gen: u32, width: u32) -> Option<f64> {
    let lane = match gen {
        1 => 0.25,
        2 => 0.5,
        3 => 0.985,
        4 => 1.969,
        5 => 3.938,
        6 => 7.563,
        _ => return None,
    };
    Some(lane * f64::from(width))
}

/// What a copy from `a` to `b` should reach, GB/s, and the link it assumes (`NV18 x 25 GB/s`,
/// `PCIe gen5 x16`): NVLinks where there are any, else the slower of the two GPUs' PCIe links.
pub fn expected_gbs(a: &GpuInfo, b: &GpuInfo, pair: Option<&Pair>) -> Option<(f64, String)> {
    if let Some(p) = pair.filter(|p| p.nvlinks > 0) {
        let (v, major) = [a, b]
            .iter()
            .find_map(|g| g.nvlink_version.map(|v| (v, g.compute_major)))?;
        let per = nvlink_gbs_per_link(v, major)?;
        let generation = nvlink_generation(v).unwrap_or("?");
        return Some((
            per * f64::from(p.nvlinks),
            format!("NV{} (NVLink {generation}, {per} GB/s per link)", p.nvlinks),
        ));
    }
    let one = |g: &GpuInfo| Some((pcie_gbs(g.pcie_gen?, g.pcie_width?)?, g.pcie_gen?, g.pcie_width?));
    let (ra, rb) = (one(a)?, one(b)?);
    let slow = if ra.0 <= rb.0 { ra } else { rb };
    Some((slow.0, format!("PCIe gen{} x{}", slow.1, slow.2)))
}

/// The pair of `a` and `b` (either order) in `pairs`.
pub fn pair_of(pairs: &[Pair], a: usize, b: usize) -> Option<&Pair> {
    let (a, b) = (a.min(b), a.max(b));
    pairs.iter().find(|p| p.a == a && p.b == b)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn link(link: u32, remote: Remote, bus: &str) -> NvLink {
        NvLink {
            link,
            active: true,
            remote,
            remote_bus_id: Some(bus.into()),
        }
    }

    /// Four GPUs: 0 and 1 joined by 4 direct NVLinks (3.0, NVML's 4), 2 and 3 on PCIe only, across NUMA nodes.
    pub(crate) fn four() -> Vec<GpuInfo> {
        let g = |i: usize, bus: &str, numa: u32, links: Vec<NvLink>| GpuInfo {
            index: i,
            name: "NVIDIA A100".into(),
            bus_id: bus.into(),
            numa_node: Some(numa),
            pcie_gen: Some(4),
            pcie_width: Some(16),
            nvlink_version: (!links.is_empty()).then_some(4),
            compute_major: Some(8),
            links,
        };
        let to1: Vec<NvLink> = (0..4).map(|l| link(l, Remote::Gpu, "0000:1a:00.0")).collect();
        let mut to0: Vec<NvLink> = (0..4).map(|l| link(l, Remote::Gpu, "0000:19:00.0")).collect();
        to0.push(NvLink {
            link: 4,
            active: false,
            remote: Remote::Other,
            remote_bus_id: None,
        });
        vec![
            g(0, "0000:19:00.0", 0, to1),
            g(1, "0000:1a:00.0", 0, to0),
            g(2, "0000:5e:00.0", 1, vec![]),
            g(3, "0000:5f:00.0", 1, vec![]),
        ]
    }

    pub(crate) fn level(a: usize, b: usize) -> Option<Level> {
        Some(if a / 2 == b / 2 { Level::Single } else { Level::System })
    }

    #[test]
    fn direct_nvlinks_are_counted_per_pair_and_pcie_pairs_get_their_level() {
        let p = pairs(&four(), level);
        assert_eq!(p.len(), 6);
        let p01 = pair_of(&p, 1, 0).unwrap();
        assert_eq!(
            (p01.nvlinks, p01.via_switch, p01.label()),
            (4, false, "NV4".to_string())
        );
        assert_eq!(pair_of(&p, 2, 3).unwrap().label(), "PIX");
        assert_eq!(pair_of(&p, 0, 3).unwrap().label(), "SYS");
    }

    #[test]
    fn gpus_on_nvswitches_are_joined_by_the_fewer_of_their_switch_links() {
        let mut gpus = four();
        for (g, n) in gpus.iter_mut().zip([18u32, 18, 18, 12]) {
            g.links = (0..n).map(|l| link(l, Remote::Switch, "0000:ff:00.0")).collect();
        }
        let p = pairs(&gpus, level);
        assert_eq!(pair_of(&p, 0, 1).unwrap().nvlinks, 18);
        let p23 = pair_of(&p, 2, 3).unwrap();
        assert_eq!((p23.nvlinks, p23.via_switch), (12, true));
    }

    #[test]
    fn bus_ids_take_sysfs_form_and_levels_nvml_numbers() {
        assert_eq!(sysfs_bus_id("00000000:19:00.0"), "0000:19:00.0");
        assert_eq!(sysfs_bus_id("00000001:AB:00.0"), "0001:ab:00.0");
        assert_eq!(Level::from_nvml(40), Some(Level::Node));
        assert_eq!(Level::from_nvml(7), None);
    }

    fn why_nv(gpus: &[GpuInfo]) -> String {
        let p = pairs(gpus, level);
        expected_gbs(&gpus[0], &gpus[1], pair_of(&p, 0, 1)).unwrap().1
    }

    #[test]
    fn nvlink_rates_follow_nvmls_version_numbers() {
        // NVML's enumeration, not the generation: 6 is NVLink 4.0 (H100/H200, 25 GB/s per link per
        // direction, 18 links = 450 GB/s), 7 is 5.0 (B200, 50 GB/s).
        assert_eq!(
            (nvlink_generation(6), nvlink_gbs_per_link(6, Some(9))),
            (Some("4.0"), Some(25.0))
        );
        assert_eq!(
            (nvlink_generation(4), nvlink_gbs_per_link(4, Some(8))),
            (Some("3.0"), Some(25.0))
        );
        assert_eq!(nvlink_gbs_per_link(5, None), Some(25.0), "3.1 is not 5.0");
        assert_eq!(
            (nvlink_generation(7), nvlink_gbs_per_link(7, Some(10))),
            (Some("5.0"), Some(50.0))
        );
        assert_eq!(
            nvlink_gbs_per_link(7, Some(9)),
            Some(25.0),
            "a Hopper GPU reported as 5.0"
        );
        assert_eq!(
            (nvlink_generation(1), nvlink_gbs_per_link(1, None)),
            (Some("1.0"), Some(20.0))
        );
        assert_eq!((nvlink_generation(0), nvlink_gbs_per_link(0, None)), (None, None));
        assert_eq!(
            nvlink_gbs_per_link(9, None),
            None,
            "a generation not known here: no expectation"
        );
        let mut h200 = four();
        for g in &mut h200[..2] {
            g.nvlink_version = Some(6);
            g.compute_major = Some(9);
        }
        assert!(
            why_nv(&h200).starts_with("NV4 (NVLink 4.0, 25 GB/s"),
            "{}",
            why_nv(&h200)
        );
    }

    #[test]
    fn expectations_follow_the_link() {
        let gpus = four();
        let p = pairs(&gpus, level);
        let (gbs, why) = expected_gbs(&gpus[0], &gpus[1], pair_of(&p, 0, 1)).unwrap();
        assert_eq!((gbs, why.starts_with("NV4")), (100.0, true));
        let (gbs, why) = expected_gbs(&gpus[2], &gpus[3], pair_of(&p, 2, 3)).unwrap();
        assert!((gbs - 31.504).abs() < 1e-9 && why == "PCIe gen4 x16", "{gbs} {why}");
        let mut slow = gpus[3].clone();
        slow.pcie_width = Some(8);
        assert_eq!(expected_gbs(&gpus[2], &slow, None).unwrap().1, "PCIe gen4 x8");
        assert!(
            why_nv(&gpus).contains("NVLink 3.0, 25 GB/s per link"),
            "{}",
            why_nv(&gpus)
        );
        slow.pcie_gen = None;
        assert_eq!(
            expected_gbs(&gpus[2], &slow, None),
            None,
            "unknown link, no expectation"
        );
    }
}
