//! The MPI baseline: MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast, MPI_Reduce,
//! MPI_Alltoall and MPI_Sendrecv on the same buffers, runner, check and reporters as collbench's own path.
//!
//! Where MPI's semantics differ from nccl-tests' layout, the difference is handled outside the library call
//! and said here: avg is MPI_SUM followed by a local division (MPI has no average); out-of-place broadcast
//! copies the root's input to its output first (MPI_Bcast is in place); in-place reduce_scatter moves the
//! result from the buffer's start to this rank's block (MPI leaves it at the start). half and bfloat16 have
//! no standard MPI type and are skipped.

use std::ffi::c_void;

use mpi::ffi;
use mpi::raw::AsRaw;

use super::Mpi;
use crate::algorithm::{Algo, Args};
use crate::collective::Collective;
use crate::engine::watchdog::Watchdog;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::reduce::kernel::finalize;
use crate::reduce::{Dtype, Op};

extern "C" {
    fn collbench_mpi_in_place() -> *mut c_void;
}

/// Runs collectives through the MPI library.
pub struct MpiEngine<'a> {
    mpi: &'a Mpi,
    /// Holds `-T` on every library call (a call that never returns names the rank that stopped answering).
    watchdog: &'a Watchdog,
    in_place: *mut c_void,
}

impl<'a> MpiEngine<'a> {
    /// An engine on MPI_COMM_WORLD, its calls watched by `watchdog`.
    pub fn new(mpi: &'a Mpi, watchdog: &'a Watchdog) -> Self {
        MpiEngine {
            mpi,
            watchdog,
            // SAFETY: returns a constant of the MPI library.
            in_place: unsafe { collbench_mpi_in_place() },
        }
    }
}

fn datatype(d: Dtype) -> Option<ffi::MPI_Datatype> {
    // SAFETY: reading constants the MPI library defines.
    unsafe {
        Some(match d {
            Dtype::Int8 => ffi::RSMPI_INT8_T,
            Dtype::Uint8 => ffi::RSMPI_UINT8_T,
            Dtype::Int32 => ffi::RSMPI_INT32_T,
            Dtype::Uint32 => ffi::RSMPI_UINT32_T,
            Dtype::Int64 => ffi::RSMPI_INT64_T,
            Dtype::Uint64 => ffi::RSMPI_UINT64_T,
            Dtype::Float => ffi::RSMPI_FLOAT,
            Dtype::Double => ffi::RSMPI_DOUBLE,
            Dtype::Half | Dtype::Bfloat16 => return None,
        })
    }
}

fn mpi_op(op: Op) -> ffi::MPI_Op {
    // SAFETY: reading constants the MPI library defines.
    unsafe {
        match op {
            Op::Sum | Op::Avg => ffi::RSMPI_SUM,
            Op::Prod => ffi::RSMPI_PROD,
            Op::Min => ffi::RSMPI_MIN,
            Op::Max => ffi::RSMPI_MAX,
        }
    }
}

/// The library call that runs `coll`, as the watchdog names it.
fn call_name(coll: Collective) -> &'static str {
    match coll {
        Collective::AllReduce => "MPI_Allreduce",
        Collective::AllGather => "MPI_Allgather",
        Collective::ReduceScatter => "MPI_Reduce_scatter_block",
        Collective::Broadcast => "MPI_Bcast",
        Collective::Reduce => "MPI_Reduce",
        Collective::AllToAll => "MPI_Alltoall",
        Collective::SendRecv => "MPI_Sendrecv",
    }
}

fn check(call: &str, rc: i32, rank: usize) -> Result<()> {
    if rc == ffi::MPI_SUCCESS as i32 {
        Ok(())
    } else {
        Err(Error::peer(format!(
            "rank {rank} (host {}): {call} failed with MPI error {rc}",
            crate::net::hostname()
        )))
    }
}

impl Engine for MpiEngine<'_> {
    fn path(&self) -> String {
        "mpi".into()
    }

    fn rank(&self) -> usize {
        self.mpi.rank()
    }

    fn size(&self) -> usize {
        self.mpi.size()
    }

    fn algo(&self, _coll: Collective, _size_bytes: u64) -> Algo {
        Algo::Library
    }

    fn unsupported(&self, dtype: Dtype, _op: Option<Op>) -> Option<String> {
        datatype(dtype)
            .is_none()
            .then(|| format!("MPI has no standard {dtype} type"))
    }

    fn run(&mut self, _algo: Algo, a: Args<'_>) -> Result<()> {
        let (n, r) = (self.size(), self.rank());
        let dt = datatype(a.dtype).ok_or_else(|| Error::usage("-d", format!("MPI cannot carry {}", a.dtype)))?;
        let op = mpi_op(a.op);
        let comm = self.mpi.world().as_raw();
        let es = a.dtype.size();
        let c = a.count as i32;
        let recv = a.recv.as_mut_ptr() as *mut c_void;
        let send = a.send.map_or(self.in_place, |s| s.as_ptr() as *mut c_void);
        let _watched = self.watchdog.call(call_name(a.coll), Some((a.count * es) as u64));
        // SAFETY: every buffer holds what the collective reads or writes (the runner sizes them from the
        // collective's layout), and MPI calls are blocking: nothing is in flight after they return.
        unsafe {
            match a.coll {
                Collective::AllReduce => {
                    check("MPI_Allreduce", ffi::MPI_Allreduce(send, recv, c, dt, op, comm), r)?;
                    finalize(a.dtype, a.op, &mut a.recv[..a.count * es], n);
                }
                Collective::AllGather => {
                    check("MPI_Allgather", ffi::MPI_Allgather(send, c, dt, recv, c, dt, comm), r)?;
                }
                Collective::ReduceScatter => {
                    check(
                        "MPI_Reduce_scatter_block",
                        ffi::MPI_Reduce_scatter_block(send, recv, c, dt, op, comm),
                        r,
                    )?;
                    let out = if a.send.is_none() {
                        // MPI leaves the in-place result at the start; nccl-tests' layout has it at this rank's block.
                        a.recv.copy_within(..a.count * es, r * a.count * es);
                        r * a.count * es
                    } else {
                        0
                    };
                    finalize(a.dtype, a.op, &mut a.recv[out..out + a.count * es], n);
                }
                Collective::Broadcast => {
                    if let Some(s) = a.send.filter(|_| r == a.root) {
                        a.recv[..a.count * es].copy_from_slice(&s[..a.count * es]);
                    }
                    check("MPI_Bcast", ffi::MPI_Bcast(recv, c, dt, a.root as i32, comm), r)?;
                }
                Collective::Reduce => {
                    // MPI_IN_PLACE is for the root only; other ranks' input is their receive buffer.
                    let send = if a.send.is_none() && r != a.root { recv } else { send };
                    check(
                        "MPI_Reduce",
                        ffi::MPI_Reduce(send, recv, c, dt, op, a.root as i32, comm),
                        r,
                    )?;
                    if r == a.root {
                        finalize(a.dtype, a.op, &mut a.recv[..a.count * es], n);
                    }
                }
                Collective::AllToAll => {
                    check("MPI_Alltoall", ffi::MPI_Alltoall(send, c, dt, recv, c, dt, comm), r)?;
                }
                Collective::SendRecv => {
                    let (to, from) = (((r + 1) % n) as i32, ((r + n - 1) % n) as i32);
                    let mut status = std::mem::MaybeUninit::<ffi::MPI_Status>::uninit();
                    let rc = match a.send {
                        Some(s) => ffi::MPI_Sendrecv(
                            s.as_ptr() as *const c_void,
                            c,
                            dt,
                            to,
                            0,
                            recv,
                            c,
                            dt,
                            from,
                            0,
                            comm,
                            status.as_mut_ptr(),
                        ),
                        None => ffi::MPI_Sendrecv_replace(recv, c, dt, to, 0, from, 0, comm, status.as_mut_ptr()),
                    };
                    check("MPI_Sendrecv", rc, r)?;
                }
            }
        }
        Ok(())
    }

    fn barrier(&mut self) -> Result<()> {
        let comm = self.mpi.world().as_raw();
        let _watched = self.watchdog.call("MPI_Barrier", None);
        // SAFETY: plain barrier on the world communicator.
        check("MPI_Barrier", unsafe { ffi::MPI_Barrier(comm) }, self.rank())
    }

    fn gather(&mut self, data: &[u8]) -> Result<Option<Vec<Vec<u8>>>> {
        let all = {
            let _watched = self.watchdog.call("MPI_Allgatherv", Some(data.len() as u64));
            self.mpi.allgather_bytes(data)
        };
        Ok((self.rank() == 0).then_some(all))
    }

    fn broadcast(&mut self, data: &[u8]) -> Result<Vec<u8>> {
        let _watched = self.watchdog.call("MPI_Bcast", Some(data.len() as u64));
        Ok(self.mpi.broadcast_bytes(data))
    }
}
