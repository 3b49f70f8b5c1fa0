//! The health of this host's GPUs as NVML reports it now (uncorrectable ECC errors, memory repairs pending,
//! clock slowdowns, the PCIe link, NVLinks, persistence mode, the driver's versions), for preflight's GPU
//! checks. Read through NVML with the `cuda` feature (`super::nvml_health`); every query is optional, so an
//! older driver leaves a field unknown rather than failing, and a build or host without NVML says why.

use serde::{Deserialize, Serialize};

/// NVML's clock event reasons (nvmlClocksEventReason*), the bits of [`GpuHealth::clock_events`].
pub mod clock_event {
    /// Nothing runs on the GPU: its clocks (and its PCIe link) may drop to save power.
    pub const GPU_IDLE: u64 = 0x1;
    /// Held under its power limit by software.
    pub const SW_POWER_CAP: u64 = 0x4;
    /// Slowed by hardware: too hot, or the power supply signalled.
    pub const HW_SLOWDOWN: u64 = 0x8;
    /// Slowed by software because it is too hot.
    pub const SW_THERMAL: u64 = 0x20;
    /// Slowed by hardware because it is too hot.
    pub const HW_THERMAL: u64 = 0x40;
    /// The external power brake asserted (the power supply or the board).
    pub const HW_POWER_BRAKE: u64 = 0x80;
}

/// One GPU's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuHealth {
    /// NVML's index.
    pub index: u32,
    /// `0000:19:00.0`, as sysfs writes it.
    pub bus_id: String,
    pub name: String,
    /// Why the GPU could not be read at all (a lost GPU), if so; the other fields are then unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Uncorrectable ECC errors since the driver loaded, and over the GPU's life (`None`: not known).
    pub ecc_volatile: Option<u64>,
    pub ecc_aggregate: Option<u64>,
    /// Row remapping (Ampere and later): a remapping waits for a reset; one failed.
    pub remap_pending: Option<bool>,
    pub remap_failed: Option<bool>,
    /// Page retirement (before Ampere): a page waits for a reset to be retired.
    pub retired_pending: Option<bool>,
    /// The clock event reasons active now ([`clock_event`]).
    pub clock_events: Option<u64>,
    /// The PCIe link now and at most.
    pub pcie_gen: Option<u32>,
    pub pcie_width: Option<u32>,
    pub pcie_max_gen: Option<u32>,
    pub pcie_max_width: Option<u32>,
    /// NVLinks that answered, and those of them down (by link number).
    pub nvlinks: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nvlinks_down: Vec<u32>,
    pub persistence: Option<bool>,
    /// Its copy bandwidths, measured through the CUDA driver after NVML's readings (`None`: not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies: Option<CopyRates>,
}

/// One GPU's copy bandwidths in GB/s (1e9 bytes/s): within its memory (bytes read + written, as `selftest
/// --gpu` counts them), and from and to pinned host memory over its PCIe link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CopyRates {
    pub device_gbps: f64,
    pub h2d_gbps: f64,
    pub d2h_gbps: f64,
}

/// The most a PCIe link of generation `gen` and `width` lanes carries one way, GB/s: the transfer rate
/// after its line encoding (8b/10b to gen2, 128b/130b from gen3; gen6's FLIT mode counted as gen5's per
/// transfer), before packet overheads, which real copies pay (an H100 on gen5 x16 reaches about 85%).
pub fn pcie_gbps(gen: u32, width: u32) -> Option<f64> {
    let per_lane_gt = match gen {
        1 => 2.5 * 0.8,
        2 => 5.0 * 0.8,
        3 => 8.0 * 128.0 / 130.0,
        4 => 16.0 * 128.0 / 130.0,
        5 => 32.0 * 128.0 / 130.0,
        6 => 64.0 * 128.0 / 130.0,
        _ => return None,
    };
    Some(per_lane_gt * f64::from(width) / 8.0)
}

/// The GPUs of one host, or why they could not be read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Gpus {
    /// Why nothing was read (no cuda feature, no NVML, NVML would not start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    pub driver: Option<String>,
    /// NVML's CUDA driver version (1000 x major + 10 x minor).
    pub cuda: Option<i32>,
    /// NVML calls this driver lacks: the checks that need them are not available.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    pub gpus: Vec<GpuHealth>,
    /// Why the GPUs' copies were not measured (no CUDA driver, a device that would not open), if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies_unmeasured: Option<String>,
}

/// `13.0` of NVML's 13000.
pub fn cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// The clock event reasons in `bits` that slow a GPU, as words.
pub fn slowdowns(bits: u64) -> Vec<&'static str> {
    use clock_event::*;
    [
        (HW_SLOWDOWN, "hardware slowdown"),
        (HW_THERMAL, "hardware thermal slowdown"),
        (SW_THERMAL, "software thermal slowdown"),
        (HW_POWER_BRAKE, "power brake"),
        (SW_POWER_CAP, "software power cap"),
    ]
    .into_iter()
    .filter(|(b, _)| bits & b != 0)
    .map(|(_, w)| w)
    .collect()
}

impl GpuHealth {
    /// `GPU 1 [0000:11:00.0]`: how a finding names the GPU.
    pub fn label(&self) -> String {
        format!("GPU {} [{}]", self.index, self.bus_id)
    }

    /// One line for people: every reading, `?` where unknown.
    pub fn line(&self) -> String {
        if let Some(e) = &self.error {
            return format!("{}: unreadable ({e})", self.label());
        }
        let n = |v: Option<u64>| v.map_or("?".into(), |v| v.to_string());
        let yes = |v: Option<bool>, t: &str, f: &str| v.map_or("?", |b| if b { t } else { f }).to_string();
        let events = match self.clock_events {
            None => "?".to_string(),
            Some(b) if slowdowns(b).is_empty() => "none".to_string(),
            Some(b) => slowdowns(b).join(", "),
        };
        let u = |v: Option<u32>| v.map_or("?".into(), |v| v.to_string());
        format!(
            "{} {}: uncorrectable ECC {} volatile, {} aggregate; row remapping {}{}; retired pages {}; slowdowns {}; \
             PCIe gen{} x{} of gen{} x{}; NVLinks {} of {} up; persistence mode {}",
            self.label(),
            self.name,
            n(self.ecc_volatile),
            n(self.ecc_aggregate),
            yes(self.remap_pending, "pending", "none pending"),
            if self.remap_failed == Some(true) {
                ", a remapping failed"
            } else {
                ""
            },
            yes(self.retired_pending, "pending", "none pending"),
            events,
            u(self.pcie_gen),
            u(self.pcie_width),
            u(self.pcie_max_gen),
            u(self.pcie_max_width),
            self.nvlinks - self.nvlinks_down.len() as u32,
            self.nvlinks,
            yes(self.persistence, "on", "off"),
        ) + &self.copies.map_or(String::new(), |c| {
            format!(
                "; copies {:.1} GB/s in device memory, {:.1} host to device, {:.1} device to host",
                c.device_gbps, c.h2d_gbps, c.d2h_gbps
            )
        })
    }
}

impl Gpus {
    /// One line for people: the driver, then each GPU's state.
    pub fn line(&self) -> String {
        if let Some(why) = &self.unavailable {
            return format!("GPUs not read: {why}");
        }
        let driver = self.driver.as_deref().unwrap_or("?");
        let cuda = self.cuda.map_or("?".into(), cuda_version);
        let gpus: Vec<String> = self.gpus.iter().map(GpuHealth::line).collect();
        match gpus.is_empty() {
            true => format!("driver {driver}, CUDA {cuda}"),
            false => format!("driver {driver}, CUDA {cuda}; {}", gpus.join("; ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpus_line_names_each_reading_and_what_is_unknown() {
        let g = GpuHealth {
            index: 1,
            bus_id: "0000:11:00.0".into(),
            name: "H100".into(),
            ecc_volatile: Some(3),
            clock_events: Some(clock_event::HW_POWER_BRAKE | clock_event::GPU_IDLE),
            pcie_gen: Some(4),
            pcie_width: Some(8),
            pcie_max_gen: Some(5),
            pcie_max_width: Some(16),
            nvlinks: 4,
            nvlinks_down: vec![2],
            persistence: Some(false),
            ..GpuHealth::default()
        };
        let l = g.line();
        for want in [
            "GPU 1 [0000:11:00.0] H100",
            "uncorrectable ECC 3 volatile, ? aggregate",
            "slowdowns power brake;",
            "PCIe gen4 x8 of gen5 x16",
            "NVLinks 3 of 4 up",
            "persistence mode off",
        ] {
            assert!(l.contains(want), "{want}: {l}");
        }
        assert_eq!(cuda_version(12040), "12.4");
    }

    #[test]
    fn a_pcie_links_rate_follows_its_encoding_and_lanes() {
        let r = |g, w| (pcie_gbps(g, w).unwrap() * 100.0).round() / 100.0;
        assert_eq!(r(5, 16), 63.02);
        assert_eq!(r(4, 8), 15.75);
        assert_eq!(r(3, 16), 15.75);
        assert_eq!(r(2, 16), 8.0);
        assert_eq!(pcie_gbps(0, 16), None);
    }
}
