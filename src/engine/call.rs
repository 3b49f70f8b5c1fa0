//! One call's shape ([`Call`]) and the memory it runs on ([`Memory`]: host [`Buffers`] directly, device
//! memory staged), made by an [`Alloc`] once a sweep knows its sizes: what an engine is handed for one
//! collective, independent of how a sweep plans it.

use crate::algorithm::{Algo, Args};
use crate::collective::{Collective, Layout};
use crate::error::Result;
use crate::memory::HostBuf;
use crate::reduce::{Dtype, Op};

use super::Engine;

/// Time a call on device memory spent on its staging copies.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Staging {
    /// Device time of the copies (from the device's marks).
    pub copy_s: f64,
    /// Host time spent waiting for them: what the network did not hide.
    pub wait_s: f64,
}

/// The host buffers a sweep runs on, sized once for its largest point.
pub struct Buffers {
    pub send: HostBuf,
    pub recv: HostBuf,
    /// Bytes by which every call's buffers start past the allocation's alignment (`-u`); 0 on device memory.
    pub shift: usize,
}

impl Buffers {
    /// Host buffers of `send` and `recv` bytes and `pad` more, for calls that start up to `pad` bytes past
    /// the alignment; calls start at it until `shift` says otherwise.
    pub fn new(send: usize, recv: usize, pad: usize) -> Buffers {
        Buffers {
            send: HostBuf::new(send + pad),
            recv: HostBuf::new(recv + pad),
            shift: 0,
        }
    }

    /// The send buffer as calls see it (past the shift).
    pub fn send(&self) -> &[u8] {
        &self.send[self.shift..]
    }

    /// The send buffer as calls see it, writable.
    pub fn send_mut(&mut self) -> &mut [u8] {
        &mut self.send[self.shift..]
    }

    /// The receive buffer as calls see it.
    pub fn recv(&self) -> &[u8] {
        &self.recv[self.shift..]
    }

    /// The receive buffer as calls see it, writable.
    pub fn recv_mut(&mut self) -> &mut [u8] {
        &mut self.recv[self.shift..]
    }
}

/// Makes a sweep's buffers once the runner knows their sizes: host memory ([`HostAlloc`]), or device memory
/// staged through host memory ([`super::staged::StagedAlloc`]) or handed over directly
/// ([`super::direct::DirectAlloc`]). The one way the sweep runner is given its memory.
pub trait Alloc {
    /// The memory it makes.
    type Memory: Memory;
    /// Send and receive buffers of `send` and `recv` bytes; host buffers get `pad` bytes more for calls
    /// shifted past the alignment (`-u`).
    fn alloc(self, send: usize, recv: usize, pad: usize) -> Result<Self::Memory>;
    /// Host memory the device runtime behind this memory took when it was opened (bytes; 0 for host memory).
    fn runtime_bytes(&self) -> u64 {
        0
    }
}

/// Host memory: [`Buffers`] the algorithms run on directly.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostAlloc;

impl Alloc for HostAlloc {
    type Memory = Buffers;

    fn alloc(self, send: usize, recv: usize, pad: usize) -> Result<Buffers> {
        Ok(Buffers::new(send, recv, pad))
    }
}

/// An [`Alloc`] on a device whose runtime (CUDA context, NCCL's communicator) took `runtime_bytes` of host
/// memory to open: the sweep reports it, and the peak memory's bound counts it.
pub struct WithRuntime<A: Alloc> {
    pub alloc: A,
    pub runtime_bytes: u64,
}

impl<A: Alloc> Alloc for WithRuntime<A> {
    type Memory = A::Memory;

    fn alloc(self, send: usize, recv: usize, pad: usize) -> Result<A::Memory> {
        self.alloc.alloc(send, recv, pad)
    }

    fn runtime_bytes(&self) -> u64 {
        self.runtime_bytes
    }
}

/// One call's shape: the collective, and the bytes of the buffers it reads and writes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Call {
    pub coll: Collective,
    pub dtype: Dtype,
    pub op: Op,
    pub root: usize,
    /// Per-rank element count.
    pub count: usize,
    pub in_place: bool,
    /// Bytes of input (in the send buffer, or in place in the receive buffer from `input_at`).
    pub send_len: usize,
    /// Bytes of the receive buffer the call uses.
    pub recv_len: usize,
    /// In place: the byte offset of this rank's input in the receive buffer.
    pub input_at: usize,
}

impl Call {
    /// The call of `coll` over `layout` on `rank` (`op` is `None` for collectives that do not reduce).
    pub fn new(
        coll: Collective,
        dtype: Dtype,
        op: Option<Op>,
        layout: &Layout,
        root: usize,
        rank: usize,
        in_place: bool,
    ) -> Call {
        let es = layout.elem_size;
        Call {
            coll,
            dtype,
            op: op.unwrap_or(Op::Sum),
            root,
            count: layout.count,
            in_place,
            send_len: layout.send_count * es,
            recv_len: coll.recv_elems(layout, in_place) * es,
            input_at: if in_place {
                coll.in_place_input_at(layout, rank) * es
            } else {
                0
            },
        }
    }

    /// The algorithm's arguments over these buffers (at least `send_len` and `recv_len` bytes).
    #[inline]
    pub fn args<'a>(&self, send: &'a [u8], recv: &'a mut [u8]) -> Args<'a> {
        Args {
            coll: self.coll,
            dtype: self.dtype,
            op: self.op,
            root: self.root,
            count: self.count,
            send: if self.in_place {
                None
            } else {
                Some(&send[..self.send_len])
            },
            recv: &mut recv[..self.recv_len],
        }
    }
}

/// Where a sweep's buffers live and how one call runs on them: host [`Buffers`] run it directly, device
/// memory stages it ([`super::staged::Staged`]). Generic, so the host path has no indirection.
pub trait Memory {
    /// The host buffers the pattern is written to and the check reads.
    fn host(&mut self) -> &mut Buffers;
    /// The host buffers were just prepared for `call`: make them the call's input (not timed).
    fn load(&mut self, call: &Call) -> Result<()>;
    /// Runs one call.
    fn run<E: Engine>(&mut self, e: &mut E, algo: Algo, call: &Call) -> Result<()>;
    /// Queues `group` calls (nccl-tests' `-m`, one group where the engine has them) to complete by
    /// [`Memory::wait`]; memory whose calls return complete runs them.
    fn queue<E: Engine>(&mut self, e: &mut E, algo: Algo, call: &Call, group: u32) -> Result<()> {
        for _ in 0..group {
            self.run(e, algo, call)?;
        }
        Ok(())
    }
    /// Returns once every call [`Memory::queue`] queued is complete.
    fn wait<E: Engine>(&mut self, _e: &mut E) -> Result<()> {
        Ok(())
    }
    /// Whether [`Memory::queue`] returns before its calls complete on `e` (device memory handed to NCCL).
    fn queues<E: Engine>(&self, _e: &E) -> bool {
        false
    }
    /// Brings the call's output into the host buffers for the check (not timed).
    fn unload(&mut self, call: &Call) -> Result<()>;
    /// The algo column for `coll` run with `algo`: its name, unless this memory runs the collective its own way.
    fn algo_name(&self, _coll: Collective, algo: Algo) -> &'static str {
        algo.name()
    }
    /// Staging time since the last call of this; `None` where nothing is staged.
    fn take_staging(&mut self) -> Option<Staging> {
        None
    }
}

impl Memory for Buffers {
    fn host(&mut self) -> &mut Buffers {
        self
    }

    fn load(&mut self, _call: &Call) -> Result<()> {
        Ok(())
    }

    #[inline]
    fn run<E: Engine>(&mut self, e: &mut E, algo: Algo, call: &Call) -> Result<()> {
        let shift = self.shift;
        e.run(algo, call.args(&self.send[shift..], &mut self.recv[shift..]))
    }

    fn unload(&mut self, _call: &Call) -> Result<()> {
        Ok(())
    }
}
