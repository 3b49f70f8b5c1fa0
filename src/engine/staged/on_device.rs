//! `--reduce-on device`: all_reduce and reduce_scatter on device buffers with the reductions done by the GPU
//! kernels, the host only moving bytes. Per piece of the call, on rank `r` of `n`:
//!
//! 1. the input is copied to host staging `A`, as `n` blocks of one shard each (all_reduce pads its count
//!    to `n` equal shards);
//! 2. the host runs an alltoall from `A` to `B`: block `j` of `B` is rank `j`'s copy of shard `r`;
//! 3. `B` is copied to device scratch `S`, and the kernels reduce its `n` blocks into one, alternating
//!    between block `r` and a spare block so no kernel reads what it writes (the kernels assume it);
//! 4. reduce_scatter copies the result, on the device, to the output; all_reduce copies it back to the
//!    host staging `C`, runs an all_gather there and copies `C` to the output.
//!
//! The network carries what a ring would (alltoall then all_gather: `2(n-1)/n` of the buffer), and every
//! piece's input copy is queued at once, as in the host-reduction pipeline; the alltoalls of all pieces run
//! before the all_gathers, so the device reduces one piece while the host exchanges the next.

use std::time::{Duration, Instant};

use super::{finish, queue_copies, Staged};
use crate::collective::Collective;
use crate::engine::call::Call;
use crate::engine::direct::{device_error, Direct};
use crate::engine::pieces::Piece;
use crate::engine::Engine;
use crate::error::Result;
use crate::memory::device::Device;
use crate::memory::MemoryError;

/// Whether `call` on `nranks` ranks is reduced on the device (others run the host-reduction pipeline).
pub(super) fn applies(coll: Collective, nranks: usize) -> bool {
    matches!(coll, Collective::AllReduce | Collective::ReduceScatter) && nranks > 1
}

/// The name the algo column shows for calls reduced on the device.
pub(super) const ALGO_NAME: &str = "device_reduce";

/// One piece's share of the scratch buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Part {
    /// Elements per shard: the alltoall's and all_gather's count.
    shard: usize,
    /// Bytes per shard block.
    blk: usize,
    /// Where the piece's `n` blocks start in `A`, `B` and `C`.
    host_at: usize,
    /// Where its `n + 1` blocks start in `S` (the last is the spare accumulator).
    dev_at: usize,
    /// Bytes of this rank's shard that hold data (all_reduce's last shards are padding, wholly or in part).
    real: usize,
}

/// The parts of `pieces` on rank `rank` of `n`, and the host and device bytes they need in all.
pub(super) fn parts(pieces: &[Piece], rank: usize, n: usize) -> (Vec<Part>, usize, usize) {
    let (mut host, mut dev) = (0, 0);
    let parts = pieces
        .iter()
        .map(|p| {
            let c = &p.call;
            let es = c.dtype.size();
            let (shard, real) = match c.coll {
                // Shards stay 16-byte multiples, as the pieces are, so every block is aligned for the kernels;
                // the padding is exchanged but never reduced or copied out.
                Collective::AllReduce => {
                    let align = (16 / es).max(1);
                    let shard = c.count.div_ceil(n).div_ceil(align) * align;
                    (shard, c.count.saturating_sub(rank * shard).min(shard))
                }
                _ => (c.count, c.count),
            };
            let real = real * es;
            let blk = shard * es;
            let part = Part {
                shard,
                blk,
                host_at: host,
                dev_at: dev,
                real,
            };
            host += n * blk;
            dev += (n + 1) * blk;
            part
        })
        .collect();
    (parts, host, dev)
}

/// Host staging and device scratch for reductions on the device, grown to the largest call.
pub(super) struct Scratch<D: Device> {
    a: D::Pinned,
    b: D::Pinned,
    c: D::Pinned,
    s: D::Mem,
    /// Bytes of `s`.
    s_len: usize,
    /// The parts of the call last loaded.
    parts: Vec<Part>,
}

impl<D: Device> Scratch<D> {
    /// Empty buffers on `dev`.
    pub(super) fn new(dev: &D) -> std::result::Result<Self, MemoryError> {
        Ok(Scratch {
            a: dev.alloc_pinned(0)?,
            b: dev.alloc_pinned(0)?,
            c: dev.alloc_pinned(0)?,
            s: dev.alloc(0)?,
            s_len: 0,
            parts: Vec::new(),
        })
    }
}

/// Where a piece's input lands in its contiguous staging region (out of place the send staging, in place
/// the receive staging from the input).
fn input_base(p: &Piece) -> usize {
    if p.call.in_place {
        p.recv_at + p.call.input_at
    } else {
        p.send_at
    }
}

impl<D: Device> Staged<D> {
    /// Prepares the scratch for `call` (split into `self.pieces`), not timed: sizes it, and scrambles every
    /// byte a step must write, so a step that fails to write cannot pass on what the previous call left.
    pub(super) fn load_on_device(&mut self, call: &Call) -> Result<()> {
        let Some(n) = self.on_device else {
            return Ok(());
        };
        if !applies(call.coll, n) || call.count == 0 {
            return Ok(());
        }
        let (parts, host, dev_bytes) = parts(&self.pieces, self.bufs.rank, n);
        let dev = &self.bufs.dev;
        let fail = self.bufs.fail();
        let sc = self
            .scratch
            .as_mut()
            .expect("scratch exists when reducing on the device");
        if sc.a.len() < host {
            sc.a = dev.alloc_pinned(host).map_err(&fail)?;
            sc.b = dev.alloc_pinned(host).map_err(&fail)?;
            sc.c = dev.alloc_pinned(host).map_err(&fail)?;
        }
        if sc.s_len < dev_bytes {
            sc.s = dev.alloc(dev_bytes).map_err(&fail)?;
            sc.s_len = dev_bytes;
        }
        for buf in [&mut sc.a, &mut sc.b, &mut sc.c] {
            buf[..host].iter_mut().for_each(|x| *x = !*x);
        }
        for part in &parts {
            let len = n * part.blk;
            dev.upload(&sc.b[part.host_at..part.host_at + len], &mut sc.s, part.dev_at)
                .map_err(&fail)?;
        }
        sc.parts = parts;
        Ok(())
    }

    /// Runs `call` with its reductions on the device (see the module's steps).
    pub(super) fn run_on_device<E: Engine>(&mut self, e: &mut E, call: &Call) -> Result<()> {
        let n = e.size();
        let Staged {
            bufs,
            pieces,
            marks,
            staging,
            scratch,
            ..
        } = self;
        let Direct {
            dev, rank, send, recv, ..
        } = bufs;
        let (dev, r) = (&*dev, *rank);
        let fail = |m: MemoryError| device_error(r, dev, m);
        let Scratch { a, b, c, s, parts, .. } = scratch.as_mut().expect("scratch exists when reducing on the device");
        let kind = (call.dtype, call.op);

        // 1. Every piece's input to A, each followed by a mark.
        marks.begin(dev).map_err(fail)?;
        for (p, part) in pieces.iter().zip(parts.iter()) {
            let base = input_base(p);
            let to_a = |d: usize, h: usize, len: usize, src: &D::Mem, a: &mut D::Pinned| {
                dev.to_host(src, d, a, part.host_at + h - base, len)
            };
            let res = if call.in_place {
                queue_copies(&p.input, |d, h, len| to_a(d, h, len, recv, a))
            } else {
                queue_copies(&p.input, |d, h, len| to_a(d, h, len, send, a))
            };
            res.map_err(fail)?;
            marks.input(dev).map_err(fail)?;
        }

        // 2-3. Per piece: the alltoall on the host, then the copy to S and the reduction queued on the device.
        let mut waited = Duration::ZERO;
        for (k, (p, part)) in pieces.iter().zip(parts.iter()).enumerate() {
            let t = Instant::now();
            dev.wait(marks.input_done(k)).map_err(fail)?;
            waited += t.elapsed();
            let (h, len) = (part.host_at, n * part.blk);
            let exchange = Call {
                coll: Collective::AllToAll,
                count: part.shard,
                in_place: false,
                send_len: len,
                recv_len: len,
                input_at: 0,
                ..*call
            };
            let algo = e.algo(Collective::AllToAll, len as u64);
            e.run(algo, exchange.args(&a[h..h + len], &mut b[h..h + len]))?;
            marks.batch_begin(dev).map_err(fail)?;
            for j in 0..n {
                let at = j * part.blk;
                dev.to_device(b, h + at, s, part.dev_at + at, part.real).map_err(fail)?;
            }
            let result = reduce_blocks(dev, s, kind, part, r, n).map_err(fail)?;
            dev.finalize(s, kind, result, part.real, n).map_err(fail)?;
            if call.coll == Collective::AllReduce {
                dev.to_host(s, result, c, h + r * part.blk, part.real).map_err(fail)?;
            } else {
                // The piece's place in the output block: the first block, or in place this rank's.
                let block = if call.in_place {
                    r * call.count * call.dtype.size()
                } else {
                    0
                };
                dev.copy(&*s, result, recv, block + p.output[0].dev_at, part.real)
                    .map_err(fail)?;
            }
            marks.batch_end(dev).map_err(fail)?;
        }

        // 4. all_reduce: per piece, once its shard is back, the all_gather on the host and the copy out.
        if call.coll == Collective::AllReduce {
            for (k, (p, part)) in pieces.iter().zip(parts.iter()).enumerate() {
                let t = Instant::now();
                dev.wait(marks.batch_done(k)).map_err(fail)?;
                waited += t.elapsed();
                let (h, len) = (part.host_at, n * part.blk);
                let gather = Call {
                    coll: Collective::AllGather,
                    count: part.shard,
                    in_place: true,
                    send_len: part.blk,
                    recv_len: len,
                    input_at: r * part.blk,
                    ..*call
                };
                let algo = e.algo(Collective::AllGather, len as u64);
                e.run(algo, gather.args(&[], &mut c[h..h + len]))?;
                marks.batch_begin(dev).map_err(fail)?;
                let res = queue_copies(&p.output, |d, hh, l| dev.to_device(c, h + hh - p.recv_at, recv, d, l));
                res.map_err(fail)?;
                marks.batch_end(dev).map_err(fail)?;
            }
        }
        finish(dev, marks, waited, staging).map_err(fail)
    }
}

/// Queues the reduction of `part`'s `n` blocks of `s` into one (`n` >= 2) and returns where the result is:
/// block `rank` and the spare block `n` take turns as destination, so no kernel reads what it writes.
fn reduce_blocks<D: Device>(
    dev: &D,
    s: &mut D::Mem,
    kind: (crate::reduce::Dtype, crate::reduce::Op),
    part: &Part,
    rank: usize,
    n: usize,
) -> std::result::Result<usize, MemoryError> {
    let at = |j: usize| part.dev_at + j * part.blk;
    let (mut cur, mut spare) = (at(rank), at(n));
    for j in (0..n).filter(|&j| j != rank) {
        dev.reduce(s, kind, spare, (cur, at(j)), part.real)?;
        std::mem::swap(&mut cur, &mut spare);
    }
    Ok(cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::pieces::{split, Plan};
    use crate::reduce::{Dtype, Op};

    fn call(coll: Collective, count: usize, n: usize) -> Call {
        let es = 4;
        let (send, recv) = match coll {
            Collective::ReduceScatter => (n * count * es, count * es),
            _ => (count * es, count * es),
        };
        Call {
            coll,
            dtype: Dtype::Float,
            op: Op::Sum,
            root: 0,
            count,
            in_place: false,
            send_len: send,
            recv_len: recv,
            input_at: 0,
        }
    }

    #[test]
    fn all_reduce_shards_are_padded_equal_and_aligned_and_the_real_bytes_add_up() {
        // 1001 floats over 3 ranks: shards of 336 (a multiple of 4 floats), the last holding 329.
        let c = call(Collective::AllReduce, 1001, 3);
        let pieces = split(&c, Plan::default());
        let reals: Vec<usize> = (0..3).map(|r| parts(&pieces, r, 3).0[0].real).collect();
        assert_eq!(reals, vec![336 * 4, 336 * 4, 329 * 4]);
        let (p, host, dev) = parts(&pieces, 0, 3);
        assert_eq!((p[0].shard, p[0].blk, host, dev), (336, 1344, 3 * 1344, 4 * 1344));
        // More ranks than elements: the shards past the data are all padding.
        let tiny = call(Collective::AllReduce, 5, 4);
        let t = split(&tiny, Plan::default());
        let reals: Vec<usize> = (0..4).map(|r| parts(&t, r, 4).0[0].real).collect();
        assert_eq!(reals, vec![16, 4, 0, 0]);
    }

    #[test]
    fn parts_of_several_pieces_follow_one_another() {
        let c = call(Collective::ReduceScatter, 1 << 20, 2);
        let pieces = split(
            &c,
            Plan {
                pieces: 3,
                min_piece_bytes: 16,
            },
        );
        let (p, host, dev) = parts(&pieces, 1, 2);
        assert_eq!(p.len(), 3);
        assert_eq!(parts(&pieces, 0, 2).0, p, "every rank's shard is whole");
        let mut at = (0, 0);
        for part in &p {
            assert_eq!((part.host_at, part.dev_at), at);
            assert_eq!(part.real, part.blk, "reduce_scatter shards are whole blocks");
            at = (at.0 + 2 * part.blk, at.1 + 3 * part.blk);
        }
        assert_eq!((host, dev), at);
        assert_eq!(p.iter().map(|q| q.shard).sum::<usize>(), 1 << 20);
    }

    #[test]
    fn only_reducing_collectives_with_peers_are_reduced_on_the_device() {
        assert!(applies(Collective::AllReduce, 2) && applies(Collective::ReduceScatter, 8));
        assert!(!applies(Collective::AllReduce, 1), "one rank has nothing to reduce");
        for c in [Collective::Reduce, Collective::AllGather, Collective::Broadcast] {
            assert!(!applies(c, 4), "{c}");
        }
    }
}
