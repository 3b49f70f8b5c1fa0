//! NVIDIA GPUs, read from procfs and sysfs without the driver's libraries: every PCI function of vendor
//! 0x10de with a display class (0x03xxxx) under `/sys/bus/pci/devices`, with its NUMA node, and the model
//! the driver names in `/proc/driver/nvidia/gpus/BUS/information` where the driver is loaded.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::sysfs::read_trim;

/// NVIDIA's PCI vendor id.
const NVIDIA: &str = "0x10de";

/// One NVIDIA GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gpu {
    /// PCI bus location, lower case (`0000:19:00.0`).
    pub bus_id: String,
    /// The model the driver reports ("NVIDIA H200"); `None` without the driver.
    pub model: Option<String>,
    /// The NUMA node the GPU hangs off; `None` where the machine has one node or does not say.
    pub numa_node: Option<u32>,
    /// PCI device id (`0x2335`).
    pub device_id: Option<String>,
}

/// `Key: value` lines of the driver's `information` file.
fn field(info: &str, key: &str) -> Option<String> {
    info.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key)
            .then(|| v.trim().to_string())
            .filter(|v| !v.is_empty())
    })
}

/// The NVIDIA GPUs under `sys_root` (`/sys`) and `proc_root` (`/proc`), sorted by bus id.
pub fn read(sys_root: &Path, proc_root: &Path) -> Vec<Gpu> {
    let mut gpus: BTreeMap<String, Gpu> = BTreeMap::new();
    let pci = sys_root.join("bus/pci/devices");
    for e in fs::read_dir(&pci).into_iter().flatten().flatten() {
        let dir = e.path();
        let vendor = read_trim(&dir.join("vendor"));
        let class = read_trim(&dir.join("class"));
        if vendor.as_deref() != Some(NVIDIA) || !class.is_some_and(|c| c.starts_with("0x03")) {
            continue;
        }
        let bus_id = e.file_name().to_string_lossy().to_lowercase();
        gpus.insert(
            bus_id.clone(),
            Gpu {
                bus_id,
                model: None,
                // -1: no NUMA information.
                numa_node: read_trim(&dir.join("numa_node")).and_then(|n| n.parse().ok()),
                device_id: read_trim(&dir.join("device")),
            },
        );
    }
    let driver = proc_root.join("driver/nvidia/gpus");
    for e in fs::read_dir(&driver).into_iter().flatten().flatten() {
        let Some(info) = read_trim(&e.path().join("information")) else {
            continue;
        };
        let bus_id = field(&info, "Bus Location")
            .unwrap_or_else(|| e.file_name().to_string_lossy().into_owned())
            .to_lowercase();
        let g = gpus.entry(bus_id.clone()).or_insert(Gpu {
            bus_id,
            model: None,
            numa_node: None,
            device_id: None,
        });
        g.model = field(&info, "Model");
    }
    gpus.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, body: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, format!("{body}\n")).unwrap();
    }

    fn pci(root: &Path, bdf: &str, vendor: &str, class: &str, numa: &str) {
        for (f, v) in [
            ("vendor", vendor),
            ("class", class),
            ("numa_node", numa),
            ("device", "0x2335"),
        ] {
            write(root, &format!("sys/bus/pci/devices/{bdf}/{f}"), v);
        }
    }

    #[test]
    fn nvidia_display_functions_are_gpus_with_the_drivers_model() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        pci(r, "0000:19:00.0", "0x10de", "0x030200", "0");
        pci(r, "0000:3b:00.0", "0x10de", "0x030000", "-1");
        // An NVIDIA NVSwitch/bridge (class 0x0680) and another vendor's GPU are not listed.
        pci(r, "0000:05:00.0", "0x10de", "0x068000", "0");
        pci(r, "0000:06:00.0", "0x1002", "0x030000", "0");
        let info = "Model: \t\t NVIDIA H200\nIRQ:   \t\t 123\nGPU UUID: \t GPU-0a1b\nBus Location: \t 0000:19:00.0\n\
                    Device Minor: \t 0\n";
        write(r, "proc/driver/nvidia/gpus/0000:19:00.0/information", info);
        let gpus = read(&r.join("sys"), &r.join("proc"));
        assert_eq!(
            gpus,
            vec![
                Gpu {
                    bus_id: "0000:19:00.0".into(),
                    model: Some("NVIDIA H200".into()),
                    numa_node: Some(0),
                    device_id: Some("0x2335".into()),
                },
                Gpu {
                    bus_id: "0000:3b:00.0".into(),
                    model: None,
                    numa_node: None,
                    device_id: Some("0x2335".into()),
                },
            ]
        );
    }

    #[test]
    fn the_driver_alone_is_enough_and_nothing_is_nothing() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        assert!(read(&r.join("sys"), &r.join("proc")).is_empty());
        write(
            r,
            "proc/driver/nvidia/gpus/0000:AB:00.0/information",
            "Model: \t Tesla T4\n",
        );
        let gpus = read(&r.join("sys"), &r.join("proc"));
        assert_eq!(gpus.len(), 1);
        assert_eq!(
            (gpus[0].bus_id.as_str(), gpus[0].model.as_deref()),
            ("0000:ab:00.0", Some("Tesla T4"))
        );
    }
}
