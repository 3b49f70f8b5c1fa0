//! NCCL's point-to-point between two ranks, for the pairwise test on device buffers: a bidirectional exchange
//! (ncclSend and ncclRecv in one group, so both directions run at once and complete together) or a lone
//! send or receive, queued on this rank's stream; the wait for them is watched by the library watchdog, so a
//! peer that never meets this rank is named within `-T`.

use std::ffi::c_void;

use cudarc::driver::{result, CudaSlice, DevicePtr, DevicePtrMut};

use super::engine::NcclComm;
use crate::engine::watchdog::Watchdog;
use crate::error::{Error, Result};
use crate::memory::cuda::{driver_err, pci_bus_id, Gpu};

/// ncclUint8: buffers are counted in bytes.
const UINT8: i32 = 1;

/// Which GPU a rank measures with: the driver's ordinal, its PCI bus id (sysfs form) and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuIdentity {
    pub ordinal: usize,
    pub bus_id: String,
    pub name: String,
}

/// The run's NCCL communicator and watchdog, borrowed for point-to-point exchanges.
pub struct PairPath<'a> {
    comm: &'a mut NcclComm,
    watchdog: &'a Watchdog,
}

impl<'a> PairPath<'a> {
    /// Exchanges over `comm`, their waits watched by `watchdog`; makes the GPU's context current on this thread.
    pub fn new(comm: &'a mut NcclComm, watchdog: &'a Watchdog) -> Result<Self> {
        let p = PairPath { comm, watchdog };
        p.comm
            .gpu
            .context()
            .bind_to_thread()
            .map_err(driver_err("binding the context"))
            .map_err(|e| p.fail(e.into()))?;
        Ok(p)
    }

    /// This rank's GPU.
    pub fn gpu(&self) -> &Gpu {
        &self.comm.gpu
    }

    /// This rank's GPU as a finding names it (the bus id left empty where the driver cannot say).
    pub fn identity(&self) -> GpuIdentity {
        let g = &self.comm.gpu;
        let bus_id = result::device::get(g.ordinal as i32)
            .map_err(driver_err("cuDeviceGet"))
            .and_then(pci_bus_id)
            .unwrap_or_default();
        GpuIdentity {
            ordinal: g.ordinal,
            bus_id,
            name: g.name.clone(),
        }
    }

    /// An error of this rank's NCCL point-to-point, naming the rank, host and GPU.
    pub fn fail(&self, m: String) -> Error {
        let g = &self.comm.gpu;
        Error::peer(format!(
            "rank {} (host {}, cuda:{} {}): nccl point-to-point: {m}",
            self.rank(),
            crate::net::hostname(),
            g.ordinal,
            g.name
        ))
    }

    /// The job rank this communicator was made with.
    fn rank(&self) -> usize {
        self.comm.rank
    }

    /// Queues `send` to `peer` and a receive of as many bytes from it into `recv`, in one group.
    pub fn exchange(&self, peer: usize, send: &CudaSlice<u8>, recv: &mut CudaSlice<u8>) -> Result<()> {
        let stream = self.comm.gpu.stream();
        let (s, _s) = send.device_ptr(stream);
        let len = send.len().min(recv.len());
        let (r, _r) = recv.device_ptr_mut(stream);
        let n = &self.comm.nccl;
        let st = stream.cu_stream() as *mut c_void;
        // SAFETY: both buffers are this GPU's allocations of at least `len` bytes, alive until the caller waits
        // for the stream; the group is closed on every path.
        let done = unsafe {
            n.check("ncclGroupStart", (n.group_start)())
                .and_then(|()| {
                    n.check(
                        "ncclSend",
                        (n.send)(s as *const c_void, len, UINT8, peer as i32, self.comm.comm, st),
                    )
                })
                .and_then(|()| {
                    n.check(
                        "ncclRecv",
                        (n.recv)(r as *const c_void, len, UINT8, peer as i32, self.comm.comm, st),
                    )
                })
                .and_then(|()| n.check("ncclGroupEnd", (n.group_end)()))
        };
        if done.is_err() {
            // A group left open would swallow the next calls; closing it again is harmless when it closed.
            // SAFETY: ends the group opened above, if it is still open.
            let _ = unsafe { (n.group_end)() };
        }
        done.map_err(|m| self.fail(m))
    }

    /// Queues a lone send of `buf` to `peer` (`to_peer`) or a receive into it from `peer`.
    pub fn one_way(&self, peer: usize, buf: &mut CudaSlice<u8>, to_peer: bool) -> Result<()> {
        let stream = self.comm.gpu.stream();
        let len = buf.len();
        let (p, _p) = buf.device_ptr_mut(stream);
        let n = &self.comm.nccl;
        let st = stream.cu_stream() as *mut c_void;
        // SAFETY: the buffer is this GPU's allocation of `len` bytes, alive until the caller waits for the stream.
        let rc = unsafe {
            if to_peer {
                (n.send)(p as *const c_void, len, UINT8, peer as i32, self.comm.comm, st)
            } else {
                (n.recv)(p as *const c_void, len, UINT8, peer as i32, self.comm.comm, st)
            }
        };
        n.check(if to_peer { "ncclSend" } else { "ncclRecv" }, rc)
            .map_err(|m| self.fail(m))
    }

    /// Waits for everything queued on the stream, watched as `call` on messages of `bytes`: a peer that never
    /// meets this rank is named by the watchdog within `-T`.
    pub fn wait(&self, call: &'static str, bytes: usize) -> Result<()> {
        let _watched = self.watchdog.call(call, Some(bytes as u64));
        self.comm
            .gpu
            .sync()
            .map_err(|e| self.fail(format!("{e} (NCCL_DEBUG=WARN says more)")))
    }
}
