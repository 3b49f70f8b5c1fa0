//! A sweep's buffers in device memory handed to the engine as device addresses, with no staging: for
//! libraries that run on device memory themselves (NCCL). The runner still fills and checks host buffers;
//! they are uploaded before and downloaded after the timed calls, outside the timing.

use super::Engine;
use crate::algorithm::Algo;
use crate::engine::call::{Alloc, Buffers, Call, Memory};
use crate::error::{Error, Result};
use crate::memory::device::Device;
use crate::memory::MemoryError;

/// Device send and receive buffers, and the host buffers the runner fills and checks. The staged engine
/// ([`super::staged::Staged`]) keeps its device buffers in one too.
pub struct Direct<D: Device> {
    pub(super) dev: D,
    pub(super) rank: usize,
    pub(super) host: Buffers,
    pub(super) send: D::Mem,
    pub(super) recv: D::Mem,
}

impl<D: Device> Direct<D> {
    /// Allocates `send_bytes` and `recv_bytes` on `dev` for `rank`.
    pub fn new(dev: D, rank: usize, send_bytes: usize, recv_bytes: usize) -> Result<Self> {
        let fail = |m: MemoryError| device_error(rank, &dev, m);
        let send = dev.alloc(send_bytes).map_err(fail)?;
        let recv = dev.alloc(recv_bytes).map_err(fail)?;
        Ok(Direct {
            rank,
            host: Buffers::new(send_bytes, recv_bytes, 0),
            send,
            recv,
            dev,
        })
    }

    /// Turns a device's message into an error naming this rank and the device.
    pub(super) fn fail(&self) -> impl Fn(MemoryError) -> Error + '_ {
        move |m| device_error(self.rank, &self.dev, m)
    }

    /// Uploads the call's input (out of place) and its poisoned output from the host buffers.
    pub(super) fn upload_call(&mut self, call: &Call) -> Result<()> {
        let r = (|| {
            if !call.in_place {
                self.dev.upload(&self.host.send[..call.send_len], &mut self.send, 0)?;
            }
            self.dev.upload(&self.host.recv[..call.recv_len], &mut self.recv, 0)
        })();
        r.map_err(self.fail())
    }

    /// Downloads the call's output into the host buffer the check reads.
    pub(super) fn download_call(&mut self, call: &Call) -> Result<()> {
        let r = self.dev.download(&self.recv, 0, &mut self.host.recv[..call.recv_len]);
        r.map_err(self.fail())
    }
}

/// Makes a sweep's [`Direct`] buffers on a device, for `rank`.
pub struct DirectAlloc<D: Device> {
    pub dev: D,
    pub rank: usize,
}

impl<D: Device> Alloc for DirectAlloc<D> {
    type Memory = Direct<D>;

    /// Device memory is not shifted: `pad` does not apply.
    fn alloc(self, send: usize, recv: usize, _pad: usize) -> Result<Direct<D>> {
        Direct::new(self.dev, self.rank, send, recv)
    }
}

/// A device failure on `rank`, naming the device.
pub(super) fn device_error<D: Device>(rank: usize, dev: &D, m: MemoryError) -> Error {
    Error::peer(format!("rank {rank} ({}): {m}", dev.describe()))
}

impl<D: Device> Memory for Direct<D> {
    fn host(&mut self) -> &mut Buffers {
        &mut self.host
    }

    fn load(&mut self, call: &Call) -> Result<()> {
        self.upload_call(call)
    }

    fn run<E: Engine>(&mut self, e: &mut E, _algo: Algo, call: &Call) -> Result<()> {
        e.run_device(call, self.dev.address(&self.send), self.dev.address(&self.recv))
    }

    fn queue<E: Engine>(&mut self, e: &mut E, _algo: Algo, call: &Call, group: u32) -> Result<()> {
        e.queue_device(call, self.dev.address(&self.send), self.dev.address(&self.recv), group)
    }

    fn wait<E: Engine>(&mut self, e: &mut E) -> Result<()> {
        e.wait_device()
    }

    fn queues<E: Engine>(&self, e: &E) -> bool {
        e.queues_device()
    }

    fn unload(&mut self, call: &Call) -> Result<()> {
        self.download_call(call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Args;
    use crate::collective::Collective;
    use crate::engine::one_rank::OneRank;
    use crate::memory::emulated::Emulated;
    use crate::reduce::{Dtype, Op};

    /// Copies the call's input to the start of its output through the addresses it is given, as a one-rank
    /// all_reduce on a device would.
    fn copy_engine() -> impl Engine {
        OneRank {
            run: |_: Args<'_>| -> Result<()> { panic!("a direct engine is handed device addresses, not host slices") },
            run_device: |call: &Call, send: u64, recv: u64| {
                let from = if call.in_place {
                    recv + call.input_at as u64
                } else {
                    send
                };
                // SAFETY: the emulated device's addresses are host buffers at least this long.
                unsafe { std::ptr::copy(from as *const u8, recv as *mut u8, call.send_len) };
                Ok(())
            },
        }
    }

    #[test]
    fn the_engine_gets_device_addresses_and_the_check_sees_what_it_wrote() {
        let mut m = Direct::new(Emulated::default(), 0, 64, 64).unwrap();
        let call = Call {
            coll: Collective::AllReduce,
            dtype: Dtype::Float,
            op: Op::Sum,
            root: 0,
            count: 16,
            in_place: false,
            send_len: 64,
            recv_len: 64,
            input_at: 0,
        };
        for (i, b) in m.host().send.iter_mut().enumerate() {
            *b = i as u8;
        }
        m.host().recv.fill(0xee);
        m.load(&call).unwrap();
        // The host copy is not what the engine reads: spoil it after the upload.
        m.host().send.fill(0);
        m.run(&mut copy_engine(), Algo::Library, &call).unwrap();
        m.unload(&call).unwrap();
        let want: Vec<u8> = (0..64).collect();
        assert_eq!(&m.host().recv[..], &want[..]);
        assert_eq!(m.take_staging(), None, "nothing is staged");
    }
}
