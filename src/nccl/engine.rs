//! The NCCL baseline: NCCL's collectives on the sweep's device buffers (no staging), through the same
//! runner, check and reporters as collbench's own paths. The communicator is set up over collbench's control
//! path: rank 0 makes the unique id, [`control::broadcast`] carries it, every rank joins. The communicator
//! ([`NcclComm`]) is made once per run; each sweep borrows it in an [`NcclEngine`]. Calls are queued on
//! this rank's stream and return at once, as NCCL's do; the runner waits for them ([`Engine::wait_device`])
//! once per point under nccl-tests' default `-z 0`, or after each iteration or call where asked. Between two
//! queued calls the engine does nothing but NCCL's own calls: the context is made current once per sweep,
//! a point's steps are planned once, and the watchdog is entered once per wait, not per call.

use std::ffi::c_void;

use cudarc::driver::{result, CudaSlice, DevicePtr};

use super::lib::{datatype, red_op, Comm, Nccl, UniqueId};
use super::plan::{needs_scratch, plan, P2p, Step};
use crate::algorithm::{control, Algo, Args};
use crate::collective::Collective;
use crate::engine::call::Call;
use crate::engine::watchdog::{CallGuard, Watchdog};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::memory::cuda::{driver_err, Gpu};
use crate::transport::Transport;

/// This rank's NCCL communicator on its GPU, made once per run.
pub struct NcclComm {
    pub(super) nccl: Nccl,
    pub(super) gpu: Gpu,
    pub(super) comm: Comm,
    /// This rank in the communicator (the job's rank).
    pub(super) rank: usize,
    /// In-place alltoall and sendrecv send from a copy here.
    scratch: Option<CudaSlice<u8>>,
}

/// Runs collectives through NCCL's communicator; `T` carries the control exchanges.
pub struct NcclEngine<'a, T: Transport> {
    ctrl: T,
    comm: &'a mut NcclComm,
    /// Holds `-T` on each call, which NCCL cannot be given.
    watchdog: &'a Watchdog,
    /// The calls queued since the last wait, watched until it returns.
    watched: Option<CallGuard<'a>>,
    /// The last call's steps, for the addresses (send, receive, scratch) they were planned at.
    planned: Option<(Call, [u64; 3], Vec<Step>)>,
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
            rank,
            scratch: None,
        })
    }
}

impl<'a, T: Transport> NcclEngine<'a, T> {
    /// An engine over `comm`, with `ctrl` (a path of the same ranks) for the runner's control exchanges and
    /// its calls watched by `watchdog`. Makes the GPU's context current on this thread, which runs the sweep.
    pub fn new(ctrl: T, comm: &'a mut NcclComm, watchdog: &'a Watchdog) -> Result<Self> {
        let engine = NcclEngine {
            ctrl,
            comm,
            watchdog,
            watched: None,
            planned: None,
        };
        engine
            .comm
            .gpu
            .context()
            .bind_to_thread()
            .map_err(driver_err("binding the context"))
            .map_err(|e| engine.fail(e.into()))?;
        Ok(engine)
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

impl<T: Transport> NcclEngine<'_, T> {
    /// Queues `group` calls of `steps`, between one ncclGroupStart and ncclGroupEnd when more than one (as
    /// nccl-tests' `-m`). In-place exchanges are not grouped: their copy aside is queued at once, while a
    /// group's NCCL calls start only at ncclGroupEnd, so every copy would run before every exchange.
    fn queue_group(&self, call: &Call, steps: &[Step], scratch: u64, group: u32) -> std::result::Result<(), String> {
        let n = &self.comm.nccl;
        let grouped = group > 1 && !needs_scratch(call);
        if grouped {
            // SAFETY: opens a group, closed below on every path.
            n.check("ncclGroupStart", unsafe { (n.group_start)() })?;
        }
        let mut r = Ok(());
        for _ in 0..group {
            r = steps.iter().try_for_each(|step| self.queue(call, step, scratch));
            if r.is_err() {
                break;
            }
            self.watched.as_ref().expect("entered before queueing").launched();
        }
        if grouped {
            // SAFETY: closes the group opened above.
            let end = n.check("ncclGroupEnd", unsafe { (n.group_end)() });
            r = r.and(end);
        }
        r
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
        self.queue_device(call, send, recv, 1)?;
        self.wait_device()
    }

    fn queue_device(&mut self, call: &Call, send: u64, recv: u64, group: u32) -> Result<()> {
        let scratch = if needs_scratch(call) {
            self.scratch(call.send_len)?
        } else {
            0
        };
        let at = [send, recv, scratch];
        if !matches!(&self.planned, Some((c, a, _)) if c == call && *a == at) {
            self.planned = Some((*call, at, plan(call, self.rank(), self.size(), send, recv, scratch)));
        }
        // Watched from the first step of the first call since the last wait: a rank stuck inside a launch
        // never counts that call as launched, so the ranks waiting on their streams for it name it.
        if self.watched.is_none() {
            let bytes = call.send_len.max(call.recv_len) as u64;
            self.watched = Some(self.watchdog.enter(call_name(call.coll), Some(bytes)));
        }
        let (_, _, steps) = self.planned.take().expect("planned above");
        let r = self.queue_group(call, &steps, scratch, group);
        self.planned = Some((*call, at, steps));
        r.map_err(|m| {
            self.watched = None;
            self.fail(m)
        })
    }

    fn wait_device(&mut self) -> Result<()> {
        let stream = self.comm.gpu.stream().cu_stream();
        // SAFETY: the stream is this engine's GPU's, alive while the communicator is; its context was made
        // current on this thread when the engine was made.
        let r = unsafe { result::stream::synchronize(stream) };
        // The wait returned (or failed): the calls it waited for are no longer the watchdog's concern.
        self.watched = None;
        r.map_err(driver_err("synchronising the stream"))
            .map_err(|e| self.fail(e.into()))
    }

    fn queues_device(&self) -> bool {
        true
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
