//! Splitting one call on device buffers into pieces the staged engine can pipeline: each piece is an
//! ordinary call of the same collective on fewer elements, so the copies of one piece overlap the network
//! carrying another.
//!
//! Every collective's buffers are whole blocks of `count` elements (one block, or one per rank). Piece
//! `a..a + c` takes elements `a..a + c` of every block and packs them block after block into its own region
//! of the host staging; there the host algorithm sees the call it would see for a count of `c`. Elementwise
//! reductions and block-wise layouts make the pieces independent, which is what lets them run one after
//! another and still give the whole call's result.

use crate::engine::call::Call;

/// One copy between a device buffer and host staging, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Copy {
    /// Offset in the device buffer.
    pub dev_at: usize,
    /// Offset in the staging buffer.
    pub host_at: usize,
    pub len: usize,
}

/// One piece of a call.
#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    /// The piece as a call on its staging regions.
    pub call: Call,
    /// Where its region starts in the send staging (used out of place).
    pub send_at: usize,
    /// Where its region starts in the receive staging.
    pub recv_at: usize,
    /// Its input: from the device send buffer into the send staging, or in place from the device receive
    /// buffer into the receive staging.
    pub input: Vec<Copy>,
    /// Its output: from the receive staging into the device receive buffer.
    pub output: Vec<Copy>,
}

/// How finely calls are split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// At most this many pieces per call (1: copy in, run, copy out, with no overlap).
    pub pieces: usize,
    /// No piece smaller than this many bytes per block: below it, the latency each extra collective adds
    /// costs more than the overlap saves.
    pub min_piece_bytes: usize,
}

impl Default for Plan {
    fn default() -> Self {
        Plan {
            pieces: crate::defaults::STAGING_PIECES,
            min_piece_bytes: 1 << 20,
        }
    }
}

/// Splits `call` by `plan`. The pieces' input copies together cover the call's input exactly once, their
/// output copies its output, and their staging regions tile the staging buffers in order.
pub fn split(call: &Call, plan: Plan) -> Vec<Piece> {
    let es = call.dtype.size();
    let block = call.count * es;
    if block == 0 {
        return vec![whole(call)];
    }
    // Piece starts stay multiples of 16 bytes, so every staging region is as aligned as the buffers are.
    let align = (16 / es).max(1);
    let by_size = (block / plan.min_piece_bytes.max(1)).max(1);
    let by_align = (call.count / align).max(1);
    let k = plan.pieces.max(1).min(by_size).min(by_align);
    if k == 1 {
        return vec![whole(call)];
    }
    let step = call.count / k / align * align;
    let send_blocks = call.send_len / block;
    let recv_blocks = call.recv_len / block;
    let input_block = call.input_at / block;
    (0..k)
        .map(|i| {
            let a = i * step;
            let c = if i + 1 == k { call.count - a } else { step };
            let (send_at, recv_at) = (send_blocks * a * es, recv_blocks * a * es);
            let copies = |blocks: std::ops::Range<usize>, base: usize| -> Vec<Copy> {
                blocks
                    .map(|j| Copy {
                        dev_at: j * block + a * es,
                        host_at: base + j * c * es,
                        len: c * es,
                    })
                    .collect()
            };
            let input = if call.in_place {
                copies(input_block..input_block + send_blocks, recv_at)
            } else {
                copies(0..send_blocks, send_at)
            };
            Piece {
                call: Call {
                    count: c,
                    send_len: send_blocks * c * es,
                    recv_len: recv_blocks * c * es,
                    input_at: input_block * c * es,
                    ..*call
                },
                send_at,
                recv_at,
                input,
                output: copies(0..recv_blocks, recv_at),
            }
        })
        .collect()
}

/// The call as one piece: its buffers copied whole.
fn whole(call: &Call) -> Piece {
    let one = |at: usize, len: usize| -> Vec<Copy> {
        if len == 0 {
            return Vec::new();
        }
        vec![Copy {
            dev_at: at,
            host_at: at,
            len,
        }]
    };
    let input_at = if call.in_place { call.input_at } else { 0 };
    Piece {
        call: *call,
        send_at: 0,
        recv_at: 0,
        input: one(input_at, call.send_len),
        output: one(0, call.recv_len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::reduce::{Dtype, Op};

    fn call(coll: Collective, dtype: Dtype, bytes: usize, n: usize, rank: usize, in_place: bool) -> Call {
        let layout = coll.layout(bytes, dtype.size(), n);
        Call::new(coll, dtype, Some(Op::Sum), &layout, 0, rank, in_place)
    }

    /// Marks every byte the copies touch on each side; each must be touched exactly once.
    fn cover(copies: impl Iterator<Item = Copy>, dev_len: usize, host_len: usize) -> (Vec<u8>, Vec<u8>) {
        let (mut dev, mut host) = (vec![0u8; dev_len], vec![0u8; host_len]);
        for c in copies {
            dev[c.dev_at..c.dev_at + c.len].iter_mut().for_each(|b| *b += 1);
            host[c.host_at..c.host_at + c.len].iter_mut().for_each(|b| *b += 1);
        }
        (dev, host)
    }

    #[test]
    fn pieces_cover_every_buffer_once_for_every_collective_and_placement() {
        let plan = Plan {
            pieces: 4,
            min_piece_bytes: 64,
        };
        for coll in Collective::ALL {
            for n in [1, 3, 4] {
                for in_place in [false, true] {
                    for (dtype, bytes) in [(Dtype::Float, 4096), (Dtype::Half, 1000), (Dtype::Double, 8200)] {
                        let rank = n - 1;
                        let c = call(coll, dtype, bytes, n, rank, in_place);
                        let pieces = split(&c, plan);
                        let what = format!("{coll} {dtype} {bytes} B, {n} ranks, in place {in_place}");
                        assert!(pieces.len() > 1 || c.count * dtype.size() < 2 * 64, "{what}: not split");
                        assert_eq!(pieces.iter().map(|p| p.call.count).sum::<usize>(), c.count, "{what}");
                        // Each piece is the call the whole one would be at its count, on this rank.
                        for p in &pieces {
                            assert_eq!(p.call.send_len, c.send_len / c.count * p.call.count, "{what}");
                            assert_eq!(p.call.recv_len, c.recv_len / c.count * p.call.count, "{what}");
                            assert_eq!(p.call.input_at, c.input_at / c.count * p.call.count, "{what}");
                            assert_eq!(p.send_at % 16, 0, "{what}: send region aligned");
                            assert_eq!(p.recv_at % 16, 0, "{what}: receive region aligned");
                        }
                        // Regions tile the staging in order.
                        let mut at = (0, 0);
                        for p in &pieces {
                            assert_eq!((p.send_at, p.recv_at), at, "{what}");
                            at = (at.0 + p.call.send_len, at.1 + p.call.recv_len);
                        }
                        assert_eq!(at, (c.send_len, c.recv_len), "{what}");
                        // Output: every byte of the receive buffer, each way, once.
                        let (dev, host) = cover(pieces.iter().flat_map(|p| p.output.clone()), c.recv_len, c.recv_len);
                        assert!(dev.iter().chain(&host).all(|&t| t == 1), "{what}: output");
                        // Input: the call's input bytes on the device, each piece's own input region on the host.
                        let (dev_len, host_len) = if in_place {
                            (c.recv_len, c.recv_len)
                        } else {
                            (c.send_len, c.send_len)
                        };
                        let (dev, host) = cover(pieces.iter().flat_map(|p| p.input.clone()), dev_len, host_len);
                        let start = if in_place { c.input_at } else { 0 };
                        for (i, &t) in dev.iter().enumerate() {
                            let want = u8::from(i >= start && i < start + c.send_len);
                            assert_eq!(t, want, "{what}: device input byte {i}");
                        }
                        for p in &pieces {
                            let base = if in_place {
                                p.recv_at + p.call.input_at
                            } else {
                                p.send_at
                            };
                            assert!(host[base..base + p.call.send_len].iter().all(|&t| t == 1), "{what}");
                        }
                        assert_eq!(host.iter().map(|&t| t as usize).sum::<usize>(), c.send_len, "{what}");
                    }
                }
            }
        }
    }

    #[test]
    fn all_gather_pieces_take_the_same_elements_of_every_rank_block() {
        // 4 ranks, 64 floats each; 2 pieces of 32.
        let c = call(Collective::AllGather, Dtype::Float, 1024, 4, 2, true);
        assert_eq!((c.count, c.input_at), (64, 2 * 256));
        let plan = Plan {
            pieces: 2,
            min_piece_bytes: 16,
        };
        let p = split(&c, plan);
        assert_eq!(p.len(), 2);
        assert_eq!((p[1].call.count, p[1].recv_at, p[1].call.input_at), (32, 512, 2 * 128));
        let out: Vec<(usize, usize)> = p[1].output.iter().map(|c| (c.dev_at, c.host_at)).collect();
        assert_eq!(out, vec![(128, 512), (384, 640), (640, 768), (896, 896)]);
        assert_eq!(
            p[1].input,
            vec![Copy {
                dev_at: 2 * 256 + 128,
                host_at: 512 + 2 * 128,
                len: 128
            }]
        );
    }

    #[test]
    fn small_calls_and_a_plan_of_one_piece_are_copied_whole() {
        let c = call(Collective::AllReduce, Dtype::Float, 4 << 20, 2, 0, false);
        for plan in [
            Plan {
                pieces: 1,
                min_piece_bytes: 1,
            },
            Plan {
                pieces: 4,
                min_piece_bytes: 8 << 20,
            },
        ] {
            let p = split(&c, plan);
            assert_eq!(p.len(), 1, "{plan:?}");
            assert_eq!(p[0].call, c);
            let whole = vec![Copy {
                dev_at: 0,
                host_at: 0,
                len: 4 << 20,
            }];
            assert_eq!((&p[0].input, &p[0].output), (&whole, &whole));
        }
        // The default plan: 1 MiB pieces at most four, so 4 MiB splits in four and 1.5 MiB stays whole.
        assert_eq!(split(&c, Plan::default()).len(), 4);
        let small = call(Collective::AllReduce, Dtype::Float, 3 << 19, 2, 0, false);
        assert_eq!(split(&small, Plan::default()).len(), 1);
        // An empty call has nothing to copy.
        let empty = call(Collective::AllGather, Dtype::Float, 8, 4, 0, false);
        let p = split(&empty, Plan::default());
        assert!(p.len() == 1 && p[0].input.is_empty() && p[0].output.is_empty());
    }

    #[test]
    fn uneven_counts_leave_the_remainder_to_the_last_piece() {
        // 1001 floats: aligned pieces of 248, the last 257.
        let c = call(Collective::AllReduce, Dtype::Float, 4004, 2, 0, false);
        let p = split(
            &c,
            Plan {
                pieces: 4,
                min_piece_bytes: 16,
            },
        );
        let counts: Vec<usize> = p.iter().map(|p| p.call.count).collect();
        assert_eq!(counts, vec![248, 248, 248, 257]);
    }
}
