//! Collectives on device buffers over a host path, staged through pinned host memory (gloo's model for
//! CUDA buffers): each call copies this rank's input from the device to pinned staging, runs the host
//! algorithm on the staging buffers, and copies the output back, all before it returns, so the call's time
//! includes the staging. The copies go in [`STAGING_CHUNK`] pieces on the device's one stream; they do not
//! overlap the network yet, and reductions run on the host (see the README's GPU section).

use super::Engine;
use crate::algorithm::Algo;
use crate::bench::point::{Buffers, Call, Memory};
use crate::error::{Error, Result};
use crate::memory::device::Device;
use crate::memory::HostBuf;

/// Bytes per staging copy.
pub const STAGING_CHUNK: usize = 4 << 20;

/// A sweep's buffers in device memory, with their pinned staging and the host buffers the runner fills
/// and checks.
pub struct Staged<D: Device> {
    dev: D,
    rank: usize,
    host: Buffers,
    send: D::Mem,
    recv: D::Mem,
    stage_send: D::Pinned,
    stage_recv: D::Pinned,
    /// Staging time (s) accumulated since the runner last took it.
    staging_s: f64,
}

impl<D: Device> Staged<D> {
    /// Allocates `send_bytes` and `recv_bytes` on `dev` for `rank`, and their staging.
    pub fn new(dev: D, rank: usize, send_bytes: usize, recv_bytes: usize) -> Result<Self> {
        let fail = |m: String| device_error(rank, &dev, m);
        let send = dev.alloc(send_bytes).map_err(fail)?;
        let recv = dev.alloc(recv_bytes).map_err(fail)?;
        let stage_send = dev.alloc_pinned(send_bytes).map_err(fail)?;
        let stage_recv = dev.alloc_pinned(recv_bytes).map_err(fail)?;
        Ok(Staged {
            rank,
            host: Buffers {
                send: HostBuf::new(send_bytes),
                recv: HostBuf::new(recv_bytes),
            },
            send,
            recv,
            stage_send,
            stage_recv,
            staging_s: 0.0,
            dev,
        })
    }

    fn err(&self) -> impl Fn(String) -> Error + '_ {
        move |m| device_error(self.rank, &self.dev, m)
    }

    /// Queues the device-to-staging copies of this call's input.
    fn queue_input(&mut self, call: &Call) -> Result<(), String> {
        let (src, dst, at) = if call.in_place {
            (&self.recv, &mut self.stage_recv, call.input_at)
        } else {
            (&self.send, &mut self.stage_send, 0)
        };
        for (off, len) in chunks(call.send_len) {
            self.dev.to_host(src, at + off, dst, at + off, len)?;
        }
        Ok(())
    }

    /// Queues the staging-to-device copies of this call's output.
    fn queue_output(&mut self, call: &Call) -> Result<(), String> {
        for (off, len) in chunks(call.recv_len) {
            self.dev.to_device(&self.stage_recv, off, &mut self.recv, off, len)?;
        }
        Ok(())
    }
}

/// A device failure on `rank`, naming the device.
fn device_error<D: Device>(rank: usize, dev: &D, m: String) -> Error {
    Error::Peer(format!("rank {rank} ({}): {m}", dev.describe()))
}

/// `(offset, length)` of the staging copies covering `len` bytes.
fn chunks(len: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..len)
        .step_by(STAGING_CHUNK)
        .map(move |off| (off, STAGING_CHUNK.min(len - off)))
}

impl<D: Device> Memory for Staged<D> {
    fn host(&mut self) -> &mut Buffers {
        &mut self.host
    }

    fn load(&mut self, call: &Call) -> Result<()> {
        let r = (|| {
            if !call.in_place {
                self.dev.upload(&self.host.send[..call.send_len], &mut self.send, 0)?;
            }
            self.dev.upload(&self.host.recv[..call.recv_len], &mut self.recv, 0)
        })();
        r.map_err(self.err())?;
        // The staging receive buffer gets the poisoned output too: results an earlier call left there must
        // not pass the check if the algorithm failed to write them. The input's staging is scrambled: only
        // the copy from the device may make it right.
        self.stage_recv[..call.recv_len].copy_from_slice(&self.host.recv[..call.recv_len]);
        let input = if call.in_place {
            &mut self.stage_recv[call.input_at..call.input_at + call.send_len]
        } else {
            &mut self.stage_send[..call.send_len]
        };
        input.iter_mut().for_each(|b| *b = !*b);
        Ok(())
    }

    fn run<E: Engine>(&mut self, e: &mut E, algo: Algo, call: &Call) -> Result<()> {
        let start = self.dev.mark().map_err(self.err())?;
        self.queue_input(call).map_err(self.err())?;
        let staged_in = self.dev.mark().map_err(self.err())?;
        self.dev.sync().map_err(self.err())?;
        e.run(algo, call.args(&self.stage_send, &mut self.stage_recv))?;
        let computed = self.dev.mark().map_err(self.err())?;
        self.queue_output(call).map_err(self.err())?;
        let done = self.dev.mark().map_err(self.err())?;
        self.dev.sync().map_err(self.err())?;
        let s = self.dev.elapsed(&start, &staged_in).map_err(self.err())?
            + self.dev.elapsed(&computed, &done).map_err(self.err())?;
        self.staging_s += s;
        Ok(())
    }

    fn unload(&mut self, call: &Call) -> Result<()> {
        self.dev
            .download(&self.recv, 0, &mut self.host.recv[..call.recv_len])
            .map_err(self.err())
    }

    fn take_staging_s(&mut self) -> Option<f64> {
        Some(std::mem::take(&mut self.staging_s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_length_exactly() {
        assert_eq!(chunks(0).count(), 0);
        assert_eq!(chunks(5).collect::<Vec<_>>(), vec![(0, 5)]);
        let c: Vec<_> = chunks(2 * STAGING_CHUNK + 3).collect();
        assert_eq!(
            c,
            vec![
                (0, STAGING_CHUNK),
                (STAGING_CHUNK, STAGING_CHUNK),
                (2 * STAGING_CHUNK, 3)
            ]
        );
    }
}
