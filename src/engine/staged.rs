//! Collectives on device buffers over a host path, staged through pinned host memory: each call copies this
//! rank's input from the device to pinned staging, runs the host algorithm there, and copies the output
//! back, all before it returns, so the call's time includes the staging.
//!
//! A large call is split into pieces ([`pieces::split`]) and pipelined on the device's one stream: every
//! piece's input copy is queued at once, the host runs piece `k` as soon as its input has arrived (waiting
//! for that piece's mark only), and queues `k`'s output copy before running `k + 1`. So the copies of one
//! piece overlap the network carrying another, and only the first piece's input and the last one's output
//! are exposed. Reductions run on the host.

use std::time::{Duration, Instant};

mod marks;
mod on_device;

use super::direct::{device_error, Direct};
use super::pieces::{self, Piece, Plan};
use super::Engine;
use crate::algorithm::Algo;
use crate::collective::Collective;
use crate::engine::call::{Alloc, Buffers, Call, Memory, Staging};
use crate::error::Result;
use crate::memory::device::Device;
use crate::memory::MemoryError;

/// Bytes per staging copy.
pub const STAGING_CHUNK: usize = 4 << 20;

/// A sweep's buffers in device memory, with their pinned staging and the host buffers the runner fills
/// and checks.
pub struct Staged<D: Device> {
    /// The device buffers and the host ones, as the direct engine has them.
    bufs: Direct<D>,
    stage_send: D::Pinned,
    stage_recv: D::Pinned,
    plan: Plan,
    /// The pieces of `planned`, the call last loaded.
    pieces: Vec<Piece>,
    planned: Option<Call>,
    /// The call's marks: after each piece's input copy, and around each later batch of device work.
    marks: marks::Marks<D::Mark>,
    /// Staging time accumulated since the runner last took it.
    staging: Staging,
    /// `--reduce-on device`: the job's rank count, and the scratch the device reductions use.
    on_device: Option<usize>,
    scratch: Option<on_device::Scratch<D>>,
}

impl<D: Device> Staged<D> {
    /// Allocates `send_bytes` and `recv_bytes` on `dev` for `rank`, and their staging; calls are split by
    /// `plan`.
    pub fn new(dev: D, rank: usize, send_bytes: usize, recv_bytes: usize, plan: Plan) -> Result<Self> {
        let bufs = Direct::new(dev, rank, send_bytes, recv_bytes)?;
        let stage_send = bufs.dev.alloc_pinned(send_bytes).map_err(bufs.fail())?;
        let stage_recv = bufs.dev.alloc_pinned(recv_bytes).map_err(bufs.fail())?;
        Ok(Staged {
            bufs,
            stage_send,
            stage_recv,
            plan,
            pieces: Vec::new(),
            planned: None,
            marks: marks::Marks::new(),
            staging: Staging::default(),
            on_device: None,
            scratch: None,
        })
    }

    /// Reduces all_reduce and reduce_scatter on the device, in a job of `nranks` (`--reduce-on device`).
    pub fn reducing_on_device(mut self, nranks: usize) -> Result<Self> {
        self.bufs.dev.prepare_reductions().map_err(self.bufs.fail())?;
        self.scratch = Some(on_device::Scratch::new(&self.bufs.dev).map_err(self.bufs.fail())?);
        self.on_device = Some(nranks);
        Ok(self)
    }

    /// Whether `call` runs with its reductions on the device.
    fn reduced_on_device(&self, call: &Call) -> bool {
        self.on_device.is_some_and(|n| on_device::applies(call.coll, n)) && call.count > 0
    }

    /// Splits `call` unless it is the one already split.
    fn plan_for(&mut self, call: &Call) {
        if self.planned.as_ref() != Some(call) {
            self.pieces = pieces::split(call, self.plan);
            self.planned = Some(*call);
        }
    }
}

/// Makes a sweep's [`Staged`] buffers on a device, for `rank`: calls split by `plan`, reductions on the device
/// in a job of `reduce_on_device` ranks where given (`--reduce-on device`).
pub struct StagedAlloc<D: Device> {
    pub dev: D,
    pub rank: usize,
    pub plan: Plan,
    pub reduce_on_device: Option<usize>,
}

impl<D: Device> Alloc for StagedAlloc<D> {
    type Memory = Staged<D>;

    /// Device memory is not shifted: `pad` does not apply.
    fn alloc(self, send: usize, recv: usize, _pad: usize) -> Result<Staged<D>> {
        let staged = Staged::new(self.dev, self.rank, send, recv, self.plan)?;
        match self.reduce_on_device {
            Some(nranks) => staged.reducing_on_device(nranks),
            None => Ok(staged),
        }
    }
}

/// Queues `copies`, each in pieces of at most [`STAGING_CHUNK`], through `queue(device offset, host
/// offset, length)`.
fn queue_copies(
    copies: &[pieces::Copy],
    mut queue: impl FnMut(usize, usize, usize) -> Result<(), MemoryError>,
) -> Result<(), MemoryError> {
    for c in copies {
        for (off, len) in chunks(c.len) {
            queue(c.dev_at + off, c.host_at + off, len)?;
        }
    }
    Ok(())
}

/// Waits for the rest of a call's device work and adds its times to `staging`: the device time its `marks`
/// span, and the host's time waiting for the device.
fn finish<D: Device>(
    dev: &D,
    marks: &marks::Marks<D::Mark>,
    mut waited: Duration,
    staging: &mut Staging,
) -> Result<(), MemoryError> {
    let t = Instant::now();
    dev.sync()?;
    waited += t.elapsed();
    staging.copy_s += marks.device_s(dev)?;
    staging.wait_s += waited.as_secs_f64();
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
        self.plan_for(call);
        // The staging receive buffer gets the poisoned output too: results an earlier call left there must
        // not pass the check if the algorithm failed to write them. Where each piece reads its input, the
        // staging is scrambled: only the copy from the device may make it right.
        self.stage_recv[..call.recv_len].copy_from_slice(&self.bufs.host.recv[..call.recv_len]);
        let input = if call.in_place {
            &mut self.stage_recv
        } else {
            &mut self.stage_send
        };
        for c in self.pieces.iter().flat_map(|p| &p.input) {
            input[c.host_at..c.host_at + c.len].iter_mut().for_each(|b| *b = !*b);
        }
        self.load_on_device(call)
    }

    fn run<E: Engine>(&mut self, e: &mut E, algo: Algo, call: &Call) -> Result<()> {
        self.plan_for(call);
        if self.reduced_on_device(call) {
            return self.run_on_device(e, call);
        }
        let Staged {
            bufs,
            stage_send,
            stage_recv,
            pieces,
            marks,
            staging,
            ..
        } = self;
        let Direct {
            dev, rank, send, recv, ..
        } = bufs;
        let dev = &*dev;
        let fail = |m: MemoryError| device_error(*rank, dev, m);
        marks.begin(dev).map_err(fail)?;
        for p in pieces.iter() {
            let r = if call.in_place {
                queue_copies(&p.input, |d, h, len| dev.to_host(recv, d, stage_recv, h, len))
            } else {
                queue_copies(&p.input, |d, h, len| dev.to_host(send, d, stage_send, h, len))
            };
            r.map_err(fail)?;
            marks.input(dev).map_err(fail)?;
        }
        let mut waited = Duration::ZERO;
        for (k, p) in pieces.iter().enumerate() {
            let t = Instant::now();
            dev.wait(marks.input_done(k)).map_err(fail)?;
            waited += t.elapsed();
            let (s, r) = (p.send_at, p.recv_at);
            let args = p.call.args(
                &stage_send[s..s + p.call.send_len],
                &mut stage_recv[r..r + p.call.recv_len],
            );
            e.run(algo, args)?;
            marks.batch_begin(dev).map_err(fail)?;
            queue_copies(&p.output, |d, h, len| dev.to_device(stage_recv, h, recv, d, len)).map_err(fail)?;
            marks.batch_end(dev).map_err(fail)?;
        }
        finish(dev, marks, waited, staging).map_err(fail)
    }

    fn unload(&mut self, call: &Call) -> Result<()> {
        self.bufs.download_call(call)
    }

    fn algo_name(&self, coll: Collective, algo: Algo) -> &'static str {
        match self.on_device {
            Some(n) if on_device::applies(coll, n) => on_device::ALGO_NAME,
            _ => algo.name(),
        }
    }

    fn take_staging(&mut self) -> Option<Staging> {
        Some(std::mem::take(&mut self.staging))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Args;
    use crate::engine::one_rank::OneRank;
    use crate::memory::emulated::Emulated;
    use crate::reduce::{Dtype, Op};

    #[test]
    fn each_piece_runs_while_later_inputs_and_earlier_outputs_are_still_being_copied() {
        // 4 pieces of 256 floats. Were the staging not overlapped (every input copied before the first piece,
        // or each output copied back before the next piece), the queue would be empty whenever a piece runs.
        let dev = Emulated::default();
        let device = dev.observer();
        let plan = Plan {
            pieces: 4,
            min_piece_bytes: 16,
        };
        let mut m = Staged::new(dev, 0, 4096, 4096, plan).unwrap();
        let call = Call {
            coll: Collective::AllReduce,
            dtype: Dtype::Float,
            op: Op::Sum,
            root: 0,
            count: 1024,
            in_place: false,
            send_len: 4096,
            recv_len: 4096,
            input_at: 0,
        };
        let input: Vec<u8> = (0..4096).map(|i| (i * 7 % 251) as u8).collect();
        m.host().send.copy_from_slice(&input);
        m.host().recv.fill(0xee);
        m.load(&call).unwrap();
        // One rank's all_reduce (its input is its output), noting the copies still queued as each piece runs.
        let mut seen = Vec::new();
        let mut e = OneRank {
            run: |args: Args<'_>| {
                seen.push(device.pending_copies());
                if let Some(send) = args.send {
                    args.recv.copy_from_slice(send);
                }
                Ok(())
            },
            run_device: |_: &Call, _: u64, _: u64| unreachable!("staged memory hands over host slices"),
        };
        m.run(&mut e, Algo::Ring, &call).unwrap();
        // (inputs still to come, outputs still to go back) as pieces 0..3 run.
        assert_eq!(seen, vec![(3, 0), (2, 1), (1, 2), (0, 3)]);
        m.unload(&call).unwrap();
        assert_eq!(&m.host().recv[..], &input[..]);
        let t = m.take_staging().expect("device memory reports staging");
        assert!(t.copy_s >= 0.0 && t.wait_s >= 0.0);
    }

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
