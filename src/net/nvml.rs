//! NVML (libnvidia-ml.so.1, shipped with the NVIDIA driver) loaded with dlopen, for the GPU topology
//! `collbench info` and `collbench gpu-matrix` show. Only the read-only queries used are bound; a machine
//! without the library gets a [`Topology`] saying so, never a failure.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::path::Path;

use libloading::Library;

use super::gpu_topo::{pairs, sysfs_bus_id, GpuInfo, Level, NvLink, Remote, Topology};

/// Names NVML is looked for under.
pub(super) const LIB_NAMES: [&str; 2] = ["libnvidia-ml.so.1", "libnvidia-ml.so"];
/// NVML_NVLINK_MAX_LINKS in current headers; devices with fewer answer an error past their last link.
const MAX_LINKS: u32 = 18;

pub(super) type Device = *mut c_void;

/// nvmlPciInfo_t (v3 layout).
#[repr(C)]
pub(super) struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    pub(super) bus_id: [c_char; 32],
}

impl PciInfo {
    /// All zero, for NVML to fill.
    pub(super) fn empty() -> PciInfo {
        PciInfo {
            bus_id_legacy: [0; 16],
            domain: 0,
            bus: 0,
            device: 0,
            pci_device_id: 0,
            pci_sub_system_id: 0,
            bus_id: [0; 32],
        }
    }
}

/// The NVML library under the first of [`LIB_NAMES`] the loader finds, or the loader's last error.
pub(super) fn open_library() -> Result<Library, String> {
    let mut last = String::new();
    for name in LIB_NAMES {
        // SAFETY: loading NVML runs only its own initialisers.
        match unsafe { Library::new(name) } {
            Ok(lib) => return Ok(lib),
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

struct Nvml {
    shutdown: unsafe extern "C" fn() -> c_int,
    count: unsafe extern "C" fn(*mut c_uint) -> c_int,
    handle: unsafe extern "C" fn(c_uint, *mut Device) -> c_int,
    name: unsafe extern "C" fn(Device, *mut c_char, c_uint) -> c_int,
    pci: unsafe extern "C" fn(Device, *mut PciInfo) -> c_int,
    ancestor: unsafe extern "C" fn(Device, Device, *mut c_int) -> c_int,
    link_state: unsafe extern "C" fn(Device, c_uint, *mut c_int) -> c_int,
    link_version: unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> c_int,
    remote_pci: unsafe extern "C" fn(Device, c_uint, *mut PciInfo) -> c_int,
    /// Not in older drivers.
    remote_type: Option<unsafe extern "C" fn(Device, c_uint, *mut c_int) -> c_int>,
    max_gen: unsafe extern "C" fn(Device, *mut c_uint) -> c_int,
    max_width: unsafe extern "C" fn(Device, *mut c_uint) -> c_int,
    /// nvmlDeviceGetCudaComputeCapability (NVML 10 and later).
    capability: Option<unsafe extern "C" fn(Device, *mut c_int, *mut c_int) -> c_int>,
    version: unsafe extern "C" fn(*mut c_char, c_uint) -> c_int,
    _lib: Library,
}

pub(super) fn cstr(b: &[c_char]) -> String {
    // Up to the first NUL, or the whole buffer where NVML filled it.
    let bytes: Vec<u8> = b.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl Nvml {
    fn load() -> Result<Nvml, String> {
        match open_library() {
            Ok(lib) => Nvml::bind(lib),
            Err(last) => Err(format!(
                "NVML (libnvidia-ml.so.1, part of the NVIDIA driver) not found ({last}); the listing above is from \
                 sysfs. Install the driver (or expose it to the container) for PCIe and NVLink topology"
            )),
        }
    }

    fn bind(lib: Library) -> Result<Nvml, String> {
        // SAFETY: each symbol is cast to the signature nvml.h declares for it.
        unsafe {
            macro_rules! sym {
                ($s:literal) => {
                    *lib.get(concat!($s, "\0").as_bytes())
                        .map_err(|e| format!("NVML has no {} ({e}); the driver is too old", $s))?
                };
            }
            let init: unsafe extern "C" fn() -> c_int = sym!("nvmlInit_v2");
            let rc = init();
            if rc != 0 {
                return Err(format!(
                    "NVML loaded but nvmlInit failed (error {rc}); check `nvidia-smi` and that the driver matches \
                     the kernel module"
                ));
            }
            Ok(Nvml {
                shutdown: sym!("nvmlShutdown"),
                count: sym!("nvmlDeviceGetCount_v2"),
                handle: sym!("nvmlDeviceGetHandleByIndex_v2"),
                name: sym!("nvmlDeviceGetName"),
                pci: sym!("nvmlDeviceGetPciInfo_v3"),
                ancestor: sym!("nvmlDeviceGetTopologyCommonAncestor"),
                link_state: sym!("nvmlDeviceGetNvLinkState"),
                link_version: sym!("nvmlDeviceGetNvLinkVersion"),
                remote_pci: sym!("nvmlDeviceGetNvLinkRemotePciInfo_v2"),
                remote_type: lib.get(b"nvmlDeviceGetNvLinkRemoteDeviceType\0").ok().map(|s| *s),
                max_gen: sym!("nvmlDeviceGetMaxPcieLinkGeneration"),
                max_width: sym!("nvmlDeviceGetMaxPcieLinkWidth"),
                capability: lib.get(b"nvmlDeviceGetCudaComputeCapability\0").ok().map(|s| *s),
                version: sym!("nvmlSystemGetNVMLVersion"),
                _lib: lib,
            })
        }
    }

    fn uint(&self, f: unsafe extern "C" fn(Device, *mut c_uint) -> c_int, d: Device) -> Option<u32> {
        let mut v: c_uint = 0;
        // SAFETY: writes one unsigned int for a valid handle.
        (unsafe { f(d, &mut v) } == 0).then_some(v)
    }

    fn compute_major(&self, d: Device) -> Option<i32> {
        let f = self.capability?;
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: writes two ints for a valid handle.
        (unsafe { f(d, &mut major, &mut minor) } == 0).then_some(major)
    }

    fn links(&self, d: Device) -> (Vec<NvLink>, Option<u32>) {
        let mut links = Vec::new();
        let mut version = None;
        for l in 0..MAX_LINKS {
            let mut state: c_int = 0;
            // SAFETY: plain queries on a valid handle; an error past the last link ends the loop.
            unsafe {
                if (self.link_state)(d, l, &mut state) != 0 {
                    // Links can be numbered sparsely: an unsupported one is skipped, not the end.
                    continue;
                }
                let active = state == 1;
                let mut pci = std::mem::zeroed::<PciInfo>();
                let remote_bus_id = ((self.remote_pci)(d, l, &mut pci) == 0).then(|| sysfs_bus_id(&cstr(&pci.bus_id)));
                let remote = match self.remote_type {
                    Some(f) => {
                        let mut t: c_int = -1;
                        match (f(d, l, &mut t) == 0).then_some(t) {
                            Some(0) => Remote::Gpu,
                            Some(2) => Remote::Switch,
                            _ => Remote::Other,
                        }
                    }
                    // Without the type query a remote end that is a GPU is recognised by its bus id later.
                    None => Remote::Gpu,
                };
                if active && version.is_none() {
                    let mut v: c_uint = 0;
                    if (self.link_version)(d, l, &mut v) == 0 {
                        version = Some(v);
                    }
                }
                links.push(NvLink {
                    link: l,
                    active,
                    remote,
                    remote_bus_id,
                });
            }
        }
        (links, version)
    }

    fn topology(&self, sys_root: &Path) -> Result<Topology, String> {
        let mut n: c_uint = 0;
        // SAFETY: writes one unsigned int.
        let rc = unsafe { (self.count)(&mut n) };
        if rc != 0 {
            return Err(format!("nvmlDeviceGetCount failed (error {rc})"));
        }
        let mut handles = Vec::new();
        let mut gpus = Vec::new();
        for i in 0..n {
            let mut d: Device = std::ptr::null_mut();
            // SAFETY: index below the count; the handle stays valid until nvmlShutdown.
            if unsafe { (self.handle)(i, &mut d) } != 0 {
                return Err(format!(
                    "nvmlDeviceGetHandleByIndex({i}) failed; is the GPU lost (see dmesg)?"
                ));
            }
            let mut name = [0 as c_char; 96];
            let mut pci = PciInfo::empty();
            // SAFETY: buffers of the sizes passed.
            let (rn, rp) = unsafe { ((self.name)(d, name.as_mut_ptr(), 96), (self.pci)(d, &mut pci)) };
            let bus_id = if rp == 0 {
                sysfs_bus_id(&cstr(&pci.bus_id))
            } else {
                String::new()
            };
            let numa_node = std::fs::read_to_string(sys_root.join("bus/pci/devices").join(&bus_id).join("numa_node"))
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok());
            let (links, nvlink_version) = self.links(d);
            gpus.push(GpuInfo {
                index: i as usize,
                name: if rn == 0 { cstr(&name) } else { "?".into() },
                bus_id,
                numa_node,
                pcie_gen: self.uint(self.max_gen, d),
                pcie_width: self.uint(self.max_width, d),
                nvlink_version,
                compute_major: self.compute_major(d),
                links,
            });
            handles.push(d);
        }
        let level = |a: usize, b: usize| {
            let mut l: c_int = -1;
            // SAFETY: two valid handles.
            (unsafe { (self.ancestor)(handles[a], handles[b], &mut l) } == 0)
                .then_some(l)
                .and_then(|l| Level::from_nvml(l as u32))
        };
        let mut version = [0 as c_char; 80];
        // SAFETY: a buffer of the size passed.
        let nvml_version = (unsafe { (self.version)(version.as_mut_ptr(), 80) } == 0).then(|| cstr(&version));
        Ok(Topology {
            unavailable: None,
            nvml_version,
            pairs: pairs(&gpus, level),
            gpus,
        })
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: balances the nvmlInit in bind.
        unsafe { (self.shutdown)() };
    }
}

/// This machine's GPU topology through NVML, or a [`Topology`] saying why there is none.
pub fn read() -> Topology {
    let r = Nvml::load().and_then(|n| n.topology(Path::new("/sys")));
    r.unwrap_or_else(|why| Topology {
        unavailable: Some(why),
        ..Topology::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_never_fails_and_says_why_without_nvml() {
        let t = read();
        match &t.unavailable {
            Some(why) => assert!(why.contains("libnvidia-ml.so.1") || why.contains("NVML"), "{why}"),
            None => assert_eq!(t.pairs.len(), t.gpus.len() * t.gpus.len().saturating_sub(1) / 2),
        }
    }

    #[test]
    fn c_strings_stop_at_the_first_nul() {
        let mut b = [0 as c_char; 8];
        for (d, s) in b.iter_mut().zip(b"H200\0xy") {
            *d = *s as c_char;
        }
        assert_eq!(cstr(&b), "H200");
    }
}
