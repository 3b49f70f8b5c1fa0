//! What one collective becomes in NCCL calls on device addresses: pure arithmetic on the call's layout,
//! so the offsets are tested without a GPU. The layouts are nccl-tests' (collbench's check expects them),
//! which NCCL's own in-place conventions match: all_gather's input sits at this rank's block of the output,
//! reduce_scatter's output at this rank's block of the input.

use crate::collective::Collective;
use crate::engine::call::Call;

/// One point-to-point half of a grouped exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum P2p {
    /// ncclSend of `count` elements at `buf` to `peer`.
    Send { buf: u64, count: usize, peer: usize },
    /// ncclRecv of `count` elements into `buf` from `peer`.
    Recv { buf: u64, count: usize, peer: usize },
}

/// One NCCL call (or a copy the engine queues before it), in stream order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    AllReduce {
        send: u64,
        recv: u64,
        count: usize,
    },
    /// `count` is per rank (NCCL's sendcount).
    AllGather {
        send: u64,
        recv: u64,
        count: usize,
    },
    /// `count` is per rank (NCCL's recvcount).
    ReduceScatter {
        send: u64,
        recv: u64,
        count: usize,
    },
    Broadcast {
        send: u64,
        recv: u64,
        count: usize,
        root: usize,
    },
    Reduce {
        send: u64,
        recv: u64,
        count: usize,
        root: usize,
    },
    /// Device-to-device copy of `len` bytes from `src` into the engine's scratch buffer: in-place exchanges
    /// send from a copy, or their receives would overwrite data not yet sent.
    ToScratch {
        src: u64,
        len: usize,
    },
    /// ncclSend/ncclRecv between ncclGroupStart and ncclGroupEnd.
    Group(Vec<P2p>),
}

/// The steps running `call` on `rank` of `n`, with the sweep's buffers at `send` and `recv` and a scratch
/// buffer of at least `call.send_len` bytes at `scratch` (used only by in-place alltoall and sendrecv).
pub fn plan(call: &Call, rank: usize, n: usize, send: u64, recv: u64, scratch: u64) -> Vec<Step> {
    let es = call.dtype.size() as u64;
    let c = call.count;
    let input = if call.in_place {
        recv + call.input_at as u64
    } else {
        send
    };
    match call.coll {
        Collective::AllReduce => vec![Step::AllReduce {
            send: input,
            recv,
            count: c,
        }],
        Collective::AllGather => vec![Step::AllGather {
            send: input,
            recv,
            count: c,
        }],
        Collective::ReduceScatter => {
            // In place the input is the whole receive buffer and the result lands at this rank's block.
            let (send, out) = if call.in_place {
                (recv, recv + rank as u64 * c as u64 * es)
            } else {
                (send, recv)
            };
            vec![Step::ReduceScatter {
                send,
                recv: out,
                count: c,
            }]
        }
        Collective::Broadcast => vec![Step::Broadcast {
            send: input,
            recv,
            count: c,
            root: call.root,
        }],
        Collective::Reduce => vec![Step::Reduce {
            send: input,
            recv,
            count: c,
            root: call.root,
        }],
        Collective::AllToAll => {
            let (mut steps, from) = from_copy(call, input, scratch);
            let block = c as u64 * es;
            let mut group = Vec::with_capacity(2 * n);
            for peer in 0..n {
                group.push(P2p::Send {
                    buf: from + peer as u64 * block,
                    count: c,
                    peer,
                });
                group.push(P2p::Recv {
                    buf: recv + peer as u64 * block,
                    count: c,
                    peer,
                });
            }
            steps.push(Step::Group(group));
            steps
        }
        Collective::SendRecv => {
            let (mut steps, from) = from_copy(call, input, scratch);
            steps.push(Step::Group(vec![
                P2p::Send {
                    buf: from,
                    count: c,
                    peer: (rank + 1) % n,
                },
                P2p::Recv {
                    buf: recv,
                    count: c,
                    peer: (rank + n - 1) % n,
                },
            ]));
            steps
        }
    }
}

/// Where an exchange sends from: the input itself out of place, a scratch copy of it in place.
fn from_copy(call: &Call, input: u64, scratch: u64) -> (Vec<Step>, u64) {
    if call.in_place {
        (
            vec![Step::ToScratch {
                src: input,
                len: call.send_len,
            }],
            scratch,
        )
    } else {
        (Vec::new(), input)
    }
}

/// Whether `call` needs the scratch buffer.
pub fn needs_scratch(call: &Call) -> bool {
    call.in_place && matches!(call.coll, Collective::AllToAll | Collective::SendRecv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduce::{Dtype, Op};

    fn call(coll: Collective, in_place: bool, input_at: usize, send_len: usize) -> Call {
        Call {
            coll,
            dtype: Dtype::Float,
            op: Op::Sum,
            root: 1,
            count: 4,
            in_place,
            send_len,
            recv_len: 64,
            input_at,
        }
    }

    const S: u64 = 0x1000;
    const R: u64 = 0x2000;
    const X: u64 = 0x3000;

    #[test]
    fn out_of_place_calls_read_the_send_buffer() {
        for coll in [Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter] {
            let s = plan(&call(coll, false, 0, 16), 2, 4, S, R, X);
            let (send, recv, count) = match &s[..] {
                [Step::AllReduce { send, recv, count }]
                | [Step::AllGather { send, recv, count }]
                | [Step::ReduceScatter { send, recv, count }] => (*send, *recv, *count),
                other => panic!("{coll}: {other:?}"),
            };
            assert_eq!((send, recv, count), (S, R, 4), "{coll}");
        }
        let s = plan(&call(Collective::Broadcast, false, 0, 16), 0, 4, S, R, X);
        assert_eq!(
            s,
            vec![Step::Broadcast {
                send: S,
                recv: R,
                count: 4,
                root: 1
            }]
        );
    }

    #[test]
    fn in_place_follows_nccl_conventions() {
        // all_gather: this rank's input at its block of the output (rank 2, 4 floats a block = 32 bytes in).
        let s = plan(&call(Collective::AllGather, true, 32, 16), 2, 4, S, R, X);
        assert_eq!(
            s,
            vec![Step::AllGather {
                send: R + 32,
                recv: R,
                count: 4
            }]
        );
        // reduce_scatter: the whole buffer in, this rank's block out.
        let s = plan(&call(Collective::ReduceScatter, true, 0, 64), 2, 4, S, R, X);
        assert_eq!(
            s,
            vec![Step::ReduceScatter {
                send: R,
                recv: R + 32,
                count: 4
            }]
        );
        let s = plan(&call(Collective::AllReduce, true, 0, 16), 2, 4, S, R, X);
        assert_eq!(
            s,
            vec![Step::AllReduce {
                send: R,
                recv: R,
                count: 4
            }]
        );
    }

    #[test]
    fn alltoall_sends_and_receives_one_block_per_peer() {
        let s = plan(&call(Collective::AllToAll, false, 0, 48), 1, 3, S, R, X);
        let Step::Group(g) = &s[0] else { panic!("{s:?}") };
        assert_eq!(s.len(), 1);
        assert_eq!(g.len(), 6);
        assert_eq!(
            g[2],
            P2p::Send {
                buf: S + 16,
                count: 4,
                peer: 1
            }
        );
        assert_eq!(
            g[5],
            P2p::Recv {
                buf: R + 32,
                count: 4,
                peer: 2
            }
        );
    }

    #[test]
    fn in_place_exchanges_send_from_a_scratch_copy() {
        let c = call(Collective::AllToAll, true, 0, 48);
        assert!(needs_scratch(&c));
        let s = plan(&c, 1, 3, S, R, X);
        assert_eq!(s[0], Step::ToScratch { src: R, len: 48 });
        let Step::Group(g) = &s[1] else { panic!("{s:?}") };
        assert_eq!(
            g[0],
            P2p::Send {
                buf: X,
                count: 4,
                peer: 0
            }
        );
        assert_eq!(
            g[1],
            P2p::Recv {
                buf: R,
                count: 4,
                peer: 0
            }
        );

        let s = plan(&call(Collective::SendRecv, true, 0, 16), 0, 4, S, R, X);
        assert_eq!(
            s,
            vec![
                Step::ToScratch { src: R, len: 16 },
                Step::Group(vec![
                    P2p::Send {
                        buf: X,
                        count: 4,
                        peer: 1
                    },
                    P2p::Recv {
                        buf: R,
                        count: 4,
                        peer: 3
                    },
                ]),
            ]
        );
        assert!(!needs_scratch(&call(Collective::SendRecv, false, 0, 16)));
    }
}
