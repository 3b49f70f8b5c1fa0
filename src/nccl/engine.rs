//! The NCCL baseline: NCCL's collectives on the sweep's device buffers (no staging), through the same
//! runner, check and reporters as collbench's own paths. The communicator is set up over collbench's control
//! path: rank 0 makes the unique id, [`control::broadcast`] carries it, every rank joins. The communicator
//! ([`NcclComm`]) is made once per run; each sweep borrows it in an [`NcclEngine`]. Each call is queued on
//! this rank's stream and waited for, so the runner's clock times it to completion.

use std::ffi::c_void;

use cudarc::driver::{result, CudaSlice, DevicePtr};

use super::lib::{datatype, red_op, Comm, Nccl, UniqueId};
use super::plan::{needs_scratch, plan, P2p, Step};
use crate::algorithm::{control, Algo, Args};
use crate::collective::Collective;
use crate::engine::call::Call;
use crate::engine::watchdog::Watchdog;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::memory::cuda::{driver_err, Gpu};
use crate::transport::Transport;

/// This rank's NCCL communicator on its GPU, made once per run.
pub struct NcclComm {
    nccl: Nccl,
    gpu: Gpu,
    comm: Comm,
    /// In-place alltoall and sendrecv send from a copy here.
    scratch: Option<CudaSlice<u8>>,
}

/// Runs collectives through NCCL's communicator; `T` carries the control exchanges.
pub struct NcclEngine<'a, T: Transport> {
    ctrl: T,
    comm: &'a mut NcclComm,
    /// Holds `-T` on each call, which NCCL cannot be given.
    watchdog: &'a Watchdog,
}

impl NcclComm {
    /// Loads NCCL, opens the GPU `device` names (else the local rank's) and joins every rank of `ctrl`
    /// into one communicator.
    pub fn open<T: Transport + ?Sized>(ctrl: &mut T, device: Option<&str>) -> Result<Self> {
        let (rank, n) = (ctrl.rank(), ctrl.size());
        let host = crate::net::hostname();
        let fail = move |m: String| Error::peer(format!("rank {rank} (host {host}): nccl: {m}"));
        let nccl = Nccl::load().map_err(|m| Error::usage("--transport", m))?;
        let gpu = Gpu::open(device).map_err(|e| fail(e.into()))?;
        let mut id = UniqueId { internal: [0; 128] };
        if rank == 0 {
            // SAFETY: writes the 128-byte id.
            nccl.check("ncclGetUniqueId", unsafe { (nccl.get_unique_id)(&mut id) })
                .map_err(&fail)?;
        }
        let bytes: Vec<u8> = id.internal.iter().map(|&c| c as u8).collect();
        let got = control::broadcast(ctrl, &bytes)?;
        if got.len() != 128 {
            return Err(fail(format!(
                "the unique id from rank 0 has {} bytes, not 128",
                got.len()
            )));
        }
        for (d, s) in id.internal.iter_mut().zip(&got) {
            *d = *s as std::ffi::c_char;
        }
        gpu.context()
            .bind_to_thread()
            .map_err(driver_err("binding the context"))
            .map_err(|e| fail(e.into()))?;
        let mut comm: Comm = std::ptr::null_mut();
        // SAFETY: every rank passes the same id, its own rank and the job's size; the context is current.
        let rc = unsafe { (nccl.comm_init_rank)(&mut comm, n as i32, id, rank as i32) };
        nccl.check("ncclCommInitRank", rc).map_err(&fail)?;
        Ok(NcclComm {
            nccl,
            gpu,
            comm,
            scratch: None,
        })
    }
}

impl<'a, T: Transport> NcclEngine<'a, T> {
    /// An engine over `comm`, with `ctrl` (a path of the same ranks) for the runner's control exchanges and
    /// its calls watched by `watchdog`.
    pub fn new(ctrl: T, comm: &'a mut NcclComm, watchdog: &'a Watchdog) -> Self {
        NcclEngine { ctrl, comm, watchdog }
    }

    fn fail(&self, m: String) -> Error {
        Error::peer(format!(
            "rank {} (host {}, cuda:{} {}): nccl: {m}",
            self.rank(),
            crate::net::hostname(),
            self.comm.gpu.ordinal,
            self.comm.gpu.name
        ))
    }

    /// A scratch device buffer of at least `len` bytes.
    fn scratch(&mut self, len: usize) -> Result<u64> {
        if self.comm.scratch.as_ref().map_or(true, |s| s.len() < len) {
            self.comm.scratch = None;
            let fresh = self.comm.gpu.alloc(len.max(1)).map_err(|e| self.fail(e.into()))?;
            self.comm.scratch = Some(fresh);
        }
        let s = self.comm.scratch.as_ref().expect("allocated above");
        Ok(s.device_ptr(self.comm.gpu.stream()).0)
    }

    /// Queues one step on the stream.
    fn queue(&self, call: &Call, step: &Step, scratch: u64) -> std::result::Result<(), String> {
        let (dt, op, comm) = (datatype(call.dtype), red_op(call.op), self.comm.comm);
        let stream = self.comm.gpu.stream().cu_stream() as *mut c_void;
        let p = |a: u64| a as *mut c_void;
        let n = &self.comm.nccl;
        // SAFETY: the addresses lie in the sweep's device buffers (or scratch), sized by the runner from the
        // collective's layout; NCCL reads and writes them on `stream`, which is waited for before they are
        // touched again.
        unsafe {
            match *step {
                Step::AllReduce { send, recv, count } => n.check(
                    "ncclAllReduce",
                    (n.all_reduce)(p(send), p(recv), count, dt, op, comm, stream),
                ),
                Step::AllGather { send, recv, count } => n.check(
                    "ncclAllGather",
                    (n.all_gather)(p(send), p(recv), count, dt, comm, stream),
                ),
                Step::ReduceScatter { send, recv, count } => n.check(
                    "ncclReduceScatter",
                    (n.reduce_scatter)(p(send), p(recv), count, dt, op, comm, stream),
                ),
                Step::Broadcast {
                    send,
                    recv,
                    count,
                    root,
                } => n.check(
                    "ncclBroadcast",
                    (n.broadcast)(p(send), p(recv), count, dt, root as i32, comm, stream),
                ),
                Step::Reduce {
                    send,
                    recv,
                    count,
                    root,
                } => n.check(
                    "ncclReduce",
                    (n.reduce)(p(send), p(recv), count, dt, op, root as i32, comm, stream),
                ),
                Step::ToScratch { src, len } => {
                    result::memcpy_dtod_async(scratch, src, len, self.comm.gpu.stream().cu_stream())
                        .map_err(driver_err("copying the in-place input aside"))
                        .map_err(String::from)
                }
                Step::Group(ref ops) => {
                    n.check("ncclGroupStart", (n.group_start)())?;
                    for o in ops {
                        let r = match *o {
                            P2p::Send { buf, count, peer } => {
                                n.check("ncclSend", (n.send)(p(buf), count, dt, peer as i32, comm, stream))
                            }
                            P2p::Recv { buf, count, peer } => {
                                n.check("ncclRecv", (n.recv)(p(buf), count, dt, peer as i32, comm, stream))
                            }
                        };
                        if let Err(e) = r {
                            // The group must still be closed.
                            let _ = (n.group_end)();
                            return Err(e);
                        }
                    }
                    n.check("ncclGroupEnd", (n.group_end)())
                }
            }
        }
    }
}

/// The NCCL call that runs `coll`, as the watchdog names it.
fn call_name(coll: Collective) -> &'static str {
    match coll {
        Collective::AllReduce => "ncclAllReduce",
        Collective::AllGather => "ncclAllGather",
        Collective::ReduceScatter => "ncclReduceScatter",
        Collective::Broadcast => "ncclBroadcast",
        Collective::Reduce => "ncclReduce",
        Collective::AllToAll => "ncclAllToAll (grouped sends and receives)",
        Collective::SendRecv => "ncclSend/ncclRecv",
    }
}

impl Drop for NcclComm {
    fn drop(&mut self) {
        // SAFETY: the communicator was made by ncclCommInitRank and is not used after this.
        unsafe { (self.nccl.comm_destroy)(self.comm) };
    }
}

impl<T: Transport> Engine for NcclEngine<'_, T> {
    fn path(&self) -> String {
        "nccl".into()
    }

    fn rank(&self) -> usize {
        self.ctrl.rank()
    }

    fn size(&self) -> usize {
        self.ctrl.size()
    }

    fn algo(&self, _coll: Collective, _size_bytes: u64) -> Algo {
        Algo::Library
    }

    fn run(&mut self, _algo: Algo, _args: Args<'_>) -> Result<()> {
        Err(Error::usage(
            "--memory",
            "nccl runs on device buffers only; add --memory cuda",
        ))
    }

    fn run_device(&mut self, call: &Call, send: u64, recv: u64) -> Result<()> {
        let scratch = if needs_scratch(call) {
            self.scratch(call.send_len)?
        } else {
            0
        };
        self.comm
            .gpu
            .context()
            .bind_to_thread()
            .map_err(driver_err("binding the context"))
            .map_err(|e| self.fail(e.into()))?;
        // Watched from the first step: a rank stuck inside a launch never counts the call as launched, so the
        // ranks waiting on their streams for it name it.
        let watched = self
            .watchdog
            .enter(call_name(call.coll), Some(call.send_len.max(call.recv_len) as u64));
        for step in plan(call, self.rank(), self.size(), send, recv, scratch) {
            self.queue(call, &step, scratch).map_err(|m| self.fail(m))?;
        }
        watched.launched();
        self.comm.gpu.sync().map_err(|e| self.fail(e.into()))
    }

    fn barrier(&mut self) -> Result<()> {
        control::barrier(&mut self.ctrl)
    }

    fn gather(&mut self, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        control::gather(&mut self.ctrl, data)
    }

    fn broadcast(&mut self, data: &[u8]) -> Result<Vec<u8>> {
        control::broadcast(&mut self.ctrl, data)
    }

    fn forget_memory(&mut self) {
        self.comm.scratch = None;
    }
}
