//! NVML's health queries for [`super::gpu_health`], loaded with dlopen like [`super::nvml`]. Only the count, the
//! handles and the PCI info are required; every other call is bound where the driver has it, and a call it
//! lacks is named in [`Gpus::missing`] so its check says "not available" instead of failing.

use std::ffi::{c_char, c_int, c_uint};

use libloading::Library;

use super::gpu_health::{GpuHealth, Gpus};
use super::gpu_topo::sysfs_bus_id;
use super::nvml::{cstr, open_library, Device, PciInfo};

/// NVML_NVLINK_MAX_LINKS in current headers.
const MAX_LINKS: u32 = 18;
/// nvmlMemoryErrorType_t NVML_MEMORY_ERROR_TYPE_UNCORRECTED; nvmlEccCounterType_t VOLATILE and AGGREGATE.
const UNCORRECTED: c_int = 1;
const VOLATILE_ECC: c_int = 0;
const AGGREGATE_ECC: c_int = 1;

type UintQuery = unsafe extern "C" fn(Device, *mut c_uint) -> c_int;
type StateQuery = unsafe extern "C" fn(Device, *mut c_int) -> c_int;

struct Calls {
    shutdown: unsafe extern "C" fn() -> c_int,
    count: unsafe extern "C" fn(*mut c_uint) -> c_int,
    handle: unsafe extern "C" fn(c_uint, *mut Device) -> c_int,
    pci: unsafe extern "C" fn(Device, *mut PciInfo) -> c_int,
    name: Option<unsafe extern "C" fn(Device, *mut c_char, c_uint) -> c_int>,
    ecc: Option<unsafe extern "C" fn(Device, c_int, c_int, *mut u64) -> c_int>,
    remapped: Option<unsafe extern "C" fn(Device, *mut c_uint, *mut c_uint, *mut c_uint, *mut c_uint) -> c_int>,
    retired_pending: Option<StateQuery>,
    clock_events: Option<unsafe extern "C" fn(Device, *mut u64) -> c_int>,
    curr_gen: Option<UintQuery>,
    curr_width: Option<UintQuery>,
    max_gen: Option<UintQuery>,
    max_width: Option<UintQuery>,
    link_state: Option<unsafe extern "C" fn(Device, c_uint, *mut c_int) -> c_int>,
    persistence: Option<StateQuery>,
    driver: Option<unsafe extern "C" fn(*mut c_char, c_uint) -> c_int>,
    cuda: Option<unsafe extern "C" fn(*mut c_int) -> c_int>,
    missing: Vec<String>,
    _lib: Library,
}

impl Calls {
    fn bind(lib: Library) -> Result<Calls, String> {
        let mut missing = Vec::new();
        // SAFETY: each symbol is cast to the signature nvml.h declares for it; the library outlives the
        // pointers (it is kept in `_lib`).
        unsafe {
            macro_rules! need {
                ($s:literal) => {
                    *lib.get(concat!($s, "\0").as_bytes())
                        .map_err(|e| format!("NVML has no {} ({e}); the driver is too old", $s))?
                };
            }
            // The first of the names the driver has; none named in `missing`.
            macro_rules! want {
                ($($s:literal),+) => {{
                    let found = None$(.or_else(|| lib.get(concat!($s, "\0").as_bytes()).ok().map(|s| *s)))+;
                    if found.is_none() {
                        missing.push([$($s),+][0].to_string());
                    }
                    found
                }};
            }
            let init: unsafe extern "C" fn() -> c_int = need!("nvmlInit_v2");
            let rc = init();
            if rc != 0 {
                return Err(format!(
                    "NVML loaded but nvmlInit failed (error {rc}: is the NVIDIA kernel driver loaded? check \
                     `nvidia-smi`)"
                ));
            }
            Ok(Calls {
                shutdown: need!("nvmlShutdown"),
                count: need!("nvmlDeviceGetCount_v2"),
                handle: need!("nvmlDeviceGetHandleByIndex_v2"),
                pci: need!("nvmlDeviceGetPciInfo_v3"),
                name: want!("nvmlDeviceGetName"),
                ecc: want!("nvmlDeviceGetTotalEccErrors"),
                remapped: want!("nvmlDeviceGetRemappedRows"),
                retired_pending: want!("nvmlDeviceGetRetiredPagesPendingStatus"),
                clock_events: want!(
                    "nvmlDeviceGetCurrentClocksEventReasons",
                    "nvmlDeviceGetCurrentClocksThrottleReasons"
                ),
                curr_gen: want!("nvmlDeviceGetCurrPcieLinkGeneration"),
                curr_width: want!("nvmlDeviceGetCurrPcieLinkWidth"),
                max_gen: want!("nvmlDeviceGetMaxPcieLinkGeneration"),
                max_width: want!("nvmlDeviceGetMaxPcieLinkWidth"),
                link_state: want!("nvmlDeviceGetNvLinkState"),
                persistence: want!("nvmlDeviceGetPersistenceMode"),
                driver: want!("nvmlSystemGetDriverVersion"),
                cuda: want!("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"),
                missing: Vec::new(),
                _lib: lib,
            })
            .map(|mut c| {
                c.missing = missing;
                c
            })
        }
    }

    fn uint(f: Option<UintQuery>, d: Device) -> Option<u32> {
        let mut v: c_uint = 0;
        // SAFETY: writes one unsigned int for a valid handle.
        (unsafe { f?(d, &mut v) } == 0).then_some(v)
    }

    fn state(f: Option<StateQuery>, d: Device) -> Option<bool> {
        let mut v: c_int = 0;
        // SAFETY: writes one nvmlEnableState_t (an int) for a valid handle.
        (unsafe { f?(d, &mut v) } == 0).then_some(v != 0)
    }

    fn ecc(&self, d: Device, counter: c_int) -> Option<u64> {
        let mut v: u64 = 0;
        // SAFETY: writes one unsigned long long for a valid handle.
        (unsafe { self.ecc?(d, UNCORRECTED, counter, &mut v) } == 0).then_some(v)
    }

    fn gpu(&self, i: u32) -> GpuHealth {
        let mut d: Device = std::ptr::null_mut();
        // SAFETY: an index below the count; the handle stays valid until nvmlShutdown.
        let rc = unsafe { (self.handle)(i, &mut d) };
        if rc != 0 {
            return GpuHealth {
                index: i,
                bus_id: "?".into(),
                error: Some(format!(
                    "nvmlDeviceGetHandleByIndex failed (error {rc}); is the GPU lost? see dmesg"
                )),
                ..GpuHealth::default()
            };
        }
        let mut pci = PciInfo::empty();
        let mut name = [0 as c_char; 96];
        // SAFETY: buffers of the sizes passed, a valid handle.
        let (rp, rn) = unsafe {
            (
                (self.pci)(d, &mut pci),
                self.name.map_or(-1, |f| f(d, name.as_mut_ptr(), 96)),
            )
        };
        let (mut corr, mut unc, mut pending, mut failed): (c_uint, c_uint, c_uint, c_uint) = (0, 0, 0, 0);
        // SAFETY: four unsigned ints for a valid handle.
        let remapped = self
            .remapped
            .filter(|f| unsafe { f(d, &mut corr, &mut unc, &mut pending, &mut failed) } == 0);
        let mut events: u64 = 0;
        // SAFETY: one unsigned long long for a valid handle.
        let events = self
            .clock_events
            .filter(|f| unsafe { f(d, &mut events) } == 0)
            .map(|_| events);
        let (mut nvlinks, mut down) = (0, Vec::new());
        if let Some(f) = self.link_state {
            for l in 0..MAX_LINKS {
                let mut active: c_int = 0;
                // SAFETY: one int for a valid handle; a link the GPU lacks answers an error and is skipped.
                if unsafe { f(d, l, &mut active) } == 0 {
                    nvlinks += 1;
                    if active == 0 {
                        down.push(l);
                    }
                }
            }
        }
        GpuHealth {
            index: i,
            bus_id: if rp == 0 {
                sysfs_bus_id(&cstr(&pci.bus_id))
            } else {
                "?".into()
            },
            name: if rn == 0 { cstr(&name) } else { "?".into() },
            error: None,
            ecc_volatile: self.ecc(d, VOLATILE_ECC),
            ecc_aggregate: self.ecc(d, AGGREGATE_ECC),
            remap_pending: remapped.map(|_| pending != 0),
            remap_failed: remapped.map(|_| failed != 0),
            retired_pending: Calls::state(self.retired_pending, d),
            clock_events: events,
            pcie_gen: Calls::uint(self.curr_gen, d),
            pcie_width: Calls::uint(self.curr_width, d),
            pcie_max_gen: Calls::uint(self.max_gen, d),
            pcie_max_width: Calls::uint(self.max_width, d),
            nvlinks,
            nvlinks_down: down,
            persistence: Calls::state(self.persistence, d),
            copies: None,
        }
    }

    fn read(&self) -> Result<Gpus, String> {
        let mut n: c_uint = 0;
        // SAFETY: writes one unsigned int.
        let rc = unsafe { (self.count)(&mut n) };
        if rc != 0 {
            return Err(format!("nvmlDeviceGetCount failed (error {rc}); check `nvidia-smi`"));
        }
        let mut version = [0 as c_char; 80];
        // SAFETY: a buffer of the size passed.
        let driver = self
            .driver
            .filter(|f| unsafe { f(version.as_mut_ptr(), 80) } == 0)
            .map(|_| cstr(&version));
        let mut cuda: c_int = 0;
        // SAFETY: writes one int.
        let cuda = self.cuda.filter(|f| unsafe { f(&mut cuda) } == 0).map(|_| cuda);
        Ok(Gpus {
            unavailable: None,
            driver,
            cuda,
            missing: self.missing.clone(),
            gpus: (0..n).map(|i| self.gpu(i)).collect(),
            copies_unmeasured: None,
        })
    }
}

impl Drop for Calls {
    fn drop(&mut self) {
        // SAFETY: balances the nvmlInit in bind.
        unsafe { (self.shutdown)() };
    }
}

/// This host's GPUs through NVML, or why they cannot be read.
pub fn read() -> Gpus {
    let r = open_library()
        .map_err(|e| format!("NVML (libnvidia-ml.so.1, part of the NVIDIA driver) not found ({e})"))
        .and_then(Calls::bind)
        .and_then(|c| c.read());
    r.unwrap_or_else(|why| Gpus {
        unavailable: Some(why),
        ..Gpus::default()
    })
}
