//! Collectives and the engine over the RDMA transport's protocol engine, on the in-memory fabric: ranks as
//! threads, real algorithms on top, windows smaller than a chunk and fragments overtaking each other.

use std::time::Duration;

use crate::algorithm::{self, control, Algo, Args, Tuning, Workspace};
use crate::collective::Collective;
use crate::engine::{Engine, Native};
use crate::reduce::{Dtype, Op};
use crate::transport::rdma::mem::{run_lanes, run_ranks, MemFabric};
use crate::transport::rdma::window::WindowShape;
use crate::transport::rdma::RdmaTransport;
use crate::transport::Transport;

fn all_reduce(t: &mut RdmaTransport<MemFabric>, algo: Algo, count: usize) -> Vec<i32> {
    let (n, r) = (t.size(), t.rank());
    let input: Vec<i32> = (0..count).map(|i| (i as i32 % 1000) * (r as i32 + 1)).collect();
    let mut out = vec![0i32; count];
    let tune = Tuning {
        chunk_bytes: 64,
        depth: 3,
        ring_cost: None,
    };
    algorithm::run(
        t,
        algo,
        Args {
            coll: Collective::AllReduce,
            dtype: Dtype::Int32,
            op: Op::Sum,
            root: 0,
            count,
            send: Some(bytemuck::cast_slice(&input)),
            recv: bytemuck::cast_slice_mut(&mut out),
        },
        &mut Workspace::default(),
        &tune,
    )
    .unwrap();
    let want: Vec<i32> = (0..count)
        .map(|i| (i as i32 % 1000) * (n * (n + 1) / 2) as i32)
        .collect();
    assert_eq!(out, want, "rank {r} {algo}");
    out
}

#[test]
fn collectives_run_over_it_with_a_window_smaller_than_a_chunk() {
    let shape = WindowShape::new(3, 24).unwrap();
    for n in [2, 3, 4] {
        for algo in [Algo::Ring, Algo::RecDoubling, Algo::Tree] {
            let out = run_ranks(n, shape, 1, Duration::from_secs(30), |t| {
                all_reduce(t, algo, 1001);
                all_reduce(t, algo, 0);
                t.pending()
            });
            assert!(out.iter().all(|&p| p == 0), "{n} ranks {algo}: requests left");
        }
    }
    // Control traffic (barrier, gather) as the runner uses it.
    let got = run_ranks(3, shape, 0, Duration::from_secs(30), |t| {
        control::barrier(t).unwrap();
        control::gather(t, &[t.rank() as u8; 40]).unwrap()
    });
    assert_eq!(got[0].as_ref().unwrap()[2], vec![2u8; 40]);
}

#[test]
fn the_engine_passes_forget_memory_down_to_the_fabric() {
    let shape = WindowShape {
        slots: 4,
        slot_bytes: 4096,
    };
    let counts = run_ranks(2, shape, 0, Duration::from_secs(5), |t| {
        let mut e = Native::new(&mut *t, &crate::algorithm::options::AlgoOptions::default());
        // A sweep ends: its buffers may be freed and the next sweep's may reuse their addresses.
        e.forget_memory();
        e.forget_memory();
        t.fabric().forgotten
    });
    assert_eq!(counts, [2, 2]);
}

/// Element counts (of i32) around a 24-byte fragment (6), a 3-slot window (18) and a 64-byte chunk (16).
const EDGE_COUNTS: [usize; 12] = [1, 5, 6, 7, 16, 17, 18, 19, 35, 36, 37, 1001];

#[test]
fn collectives_stay_right_when_fragments_overtake_each_other_across_queue_pairs() {
    let shape = WindowShape::new(3, 24).unwrap();
    for qps in 1..=4 {
        let mut overtaken = 0;
        for n in [2, 3, 4] {
            for algo in [Algo::Ring, Algo::RecDoubling, Algo::Tree] {
                let seed = (qps * 100 + n) as u64;
                let out = run_lanes(n, shape, (qps, seed), 1, Duration::from_secs(30), |t| {
                    for count in EDGE_COUNTS {
                        all_reduce(t, algo, count);
                    }
                    (t.pending(), t.fabric().overtaken)
                });
                assert!(
                    out.iter().all(|o| o.0 == 0),
                    "{n} ranks {algo} {qps} QPs: requests left"
                );
                overtaken += out.iter().map(|o| o.1).sum::<usize>();
            }
        }
        // The interleaving really reorders (one queue pair cannot: completions are ordered within it).
        assert_eq!(overtaken > 0, qps > 1, "{qps} QPs: {overtaken} immediates overtaken");
    }
}
