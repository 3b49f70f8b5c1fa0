//! Collectives on device buffers over a host path, staged through pinned host memory (gloo's model for
//! CUDA buffers): each call copies this rank's input from the device to pinned staging, runs the host
//! algorithm on the staging buffers, and copies the output back, all before it returns, so the call's time
//! includes the staging. The copies go in [`STAGING_CHUNK`] pieces on the device's one stream; they do not
//! overlap the network yet, and reductions run on the host (see the README's GPU section).

use super::direct::{device_error, Direct};
use super::Engine;
use crate::algorithm::Algo;
use crate::bench::point::{Buffers, Call, Memory};
use crate::error::Result;
use crate::memory::device::Device;

/// Bytes per staging copy.
pub const STAGING_CHUNK: usize = 4 << 20;

/// A sweep's buffers in device memory, with their pinned staging and the host buffers the runner fills
/// and checks.
pub struct Staged<D: Device> {
    /// The device buffers and the host ones, as the direct engine has them.
    bufs: Direct<D>,
    stage_send: D::Pinned,
    stage_recv: D::Pinned,
    /// Staging time (s) accumulated since the runner last took it.
    staging_s: f64,
}

impl<D: Device> Staged<D> {
    /// Allocates `send_bytes` and `recv_bytes` on `dev` for `rank`, and their staging.
    pub fn new(dev: D, rank: usize, send_bytes: usize, recv_bytes: usize) -> Result<Self> {
        let bufs = Direct::new(dev, rank, send_bytes, recv_bytes)?;
        let stage_send = bufs.dev.alloc_pinned(send_bytes).map_err(bufs.fail())?;
        let stage_recv = bufs.dev.alloc_pinned(recv_bytes).map_err(bufs.fail())?;
        Ok(Staged {
            bufs,
            stage_send,
            stage_recv,
            staging_s: 0.0,
        })
    }
}

/// Queues the device-to-staging copies of this call's input (from `send`, or in place from `recv`).
fn queue_input<D: Device>(
    dev: &D,
    (send, recv): (&D::Mem, &D::Mem),
    (stage_send, stage_recv): (&mut D::Pinned, &mut D::Pinned),
    call: &Call,
) -> Result<(), String> {
    let (src, dst, at) = if call.in_place {
        (recv, stage_recv, call.input_at)
    } else {
        (send, stage_send, 0)
    };
    for (off, len) in chunks(call.send_len) {
        dev.to_host(src, at + off, dst, at + off, len)?;
    }
    Ok(())
}

/// Queues the staging-to-device copies of this call's output.
fn queue_output<D: Device>(dev: &D, stage_recv: &D::Pinned, recv: &mut D::Mem, call: &Call) -> Result<(), String> {
    for (off, len) in chunks(call.recv_len) {
        dev.to_device(stage_recv, off, recv, off, len)?;
    }
    Ok(())
}

/// `(offset, length)` of the staging copies covering `len` bytes.
fn chunks(len: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..len)
        .step_by(STAGING_CHUNK)
        .map(move |off| (off, STAGING_CHUNK.min(len - off)))
}

impl<D: Device> Memory for Staged<D> {
    fn host(&mut self) -> &mut Buffers {
        &mut self.bufs.host
    }

    fn load(&mut self, call: &Call) -> Result<()> {
        self.bufs.upload_call(call)?;
        // The staging receive buffer gets the poisoned output too: results an earlier call left there must
        // not pass the check if the algorithm failed to write them. The input's staging is scrambled: only
        // the copy from the device may make it right.
        self.stage_recv[..call.recv_len].copy_from_slice(&self.bufs.host.recv[..call.recv_len]);
        let input = if call.in_place {
            &mut self.stage_recv[call.input_at..call.input_at + call.send_len]
        } else {
            &mut self.stage_send[..call.send_len]
        };
        input.iter_mut().for_each(|b| *b = !*b);
        Ok(())
    }

    fn run<E: Engine>(&mut self, e: &mut E, algo: Algo, call: &Call) -> Result<()> {
        let Staged {
            bufs,
            stage_send,
            stage_recv,
            staging_s,
        } = self;
        let Direct {
            dev, rank, send, recv, ..
        } = bufs;
        let fail = |m: String| device_error(*rank, &*dev, m);
        let start = dev.mark().map_err(fail)?;
        queue_input(&*dev, (&*send, &*recv), (&mut *stage_send, &mut *stage_recv), call).map_err(fail)?;
        let staged_in = dev.mark().map_err(fail)?;
        dev.sync().map_err(fail)?;
        e.run(algo, call.args(stage_send, stage_recv))?;
        let computed = dev.mark().map_err(fail)?;
        queue_output(&*dev, stage_recv, recv, call).map_err(fail)?;
        let done = dev.mark().map_err(fail)?;
        dev.sync().map_err(fail)?;
        *staging_s += dev.elapsed(&start, &staged_in).map_err(fail)? + dev.elapsed(&computed, &done).map_err(fail)?;
        Ok(())
    }

    fn unload(&mut self, call: &Call) -> Result<()> {
        self.bufs.download_call(call)
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
