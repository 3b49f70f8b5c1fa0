//! Collectives on (emulated) device memory: the staged engine copies each rank's input from the device to
//! pinned staging, runs the host algorithm there and copies the output back; the runner fills the device
//! buffers and checks what comes back from them. Ranks are threads connected over loopback; the device is
//! host memory posing as one (`Emulated`), so everything but the CUDA calls runs here.

use collbench::algorithm::{Algo, Args};
use collbench::bench::{self, Outcome, Sweep};
use collbench::collective::Collective;
use collbench::engine::call::HostAlloc;
use collbench::engine::pieces::Plan;
use collbench::engine::staged::{StagedAlloc, STAGING_CHUNK};
use collbench::engine::Engine;
use collbench::engine::Native;
use collbench::memory::emulated::{Emulated, Observer};
use collbench::options::{Options, Progress, SizeRange, Step, SweepOptions};
use collbench::reduce::{Dtype, Op};
use collbench::results::RankInfo;
use collbench::session;

fn opts(min: u64, max: u64, collectives: Vec<Collective>, dtypes: Vec<Dtype>) -> Options {
    let mut o = Options {
        sweep: SweepOptions {
            sizes: SizeRange {
                min,
                max,
                step: Step::Factor(4),
            },
            iters: 2,
            warmup: 1,
            check_iters: 1,
            collectives,
            dtypes,
            ops: vec![Op::Sum, Op::Max],
            ..SweepOptions::default()
        },
        ..Options::default()
    };
    o.outputs.progress = Progress::Never;
    o
}

/// Sweep number 0 of `opts`, reporting nowhere.
fn sweep<'a>(opts: &'a Options, ranks: &'a [RankInfo]) -> Sweep<'a> {
    Sweep {
        opts: opts.settings(),
        repeat: 0,
        ranks,
        reporters: &mut [],
        progress: None,
        only: None,
    }
}

/// Sweeps `opts` on `n` thread ranks; rank `corrupt` (if any) corrupts its copies back to the device.
fn staged_sweep(n: usize, opts: &Options, corrupt: Option<usize>) -> Vec<Outcome> {
    staged_sweep_on(n, opts, Plan::default(), |rank| {
        corrupting_on(rank, corrupt, Emulated::corrupting_copies_to_device)
    })
}

/// The device of `rank`: `corrupt` applied on rank `on` only.
fn corrupting_on(rank: usize, on: Option<usize>, corrupt: fn(Emulated) -> Emulated) -> Emulated {
    if on == Some(rank) {
        corrupt(Emulated::default())
    } else {
        Emulated::default()
    }
}

/// Sweeps `opts` on `n` thread ranks, each on the device `dev` makes for it, calls split by `plan`
/// (reductions on the device with `opts.reduce_on_device`).
fn staged_sweep_on(n: usize, opts: &Options, plan: Plan, dev: impl Fn(usize) -> Emulated + Sync) -> Vec<Outcome> {
    session::run_threads(n, opts, |sess| {
        let ranks = sess.world.ranks.clone();
        let rank = sess.world.rank;
        let mut engine = Native::new(&mut sess.transports[0], &opts.algorithm);
        let dev = dev(rank);
        let alloc = StagedAlloc {
            dev,
            rank,
            plan,
            reduce_on_device: opts.buffers.reduce_on_device.then_some(n),
        };
        bench::sweep(&mut engine, sweep(opts, &ranks), alloc).expect("the sweep runs")
    })
    .into_iter()
    .map(|r| r.expect("the ranks connect"))
    .collect()
}

#[test]
fn every_collective_on_device_memory_is_right_at_one_to_four_ranks() {
    // Sizes on both sides of the default algorithm threshold (64 KiB), in place and out of place.
    let o = opts(
        8,
        128 << 10,
        Collective::ALL.to_vec(),
        vec![Dtype::Float, Dtype::Half, Dtype::Int32],
    );
    for n in 1..=4 {
        let outs = staged_sweep(n, &o, None);
        for (r, out) in outs.iter().enumerate() {
            assert_eq!(out.wrong, 0, "{n} ranks: rank {r} counted wrong elements");
        }
        let recs = &outs[0].records;
        // 7 collectives, 3 dtypes; the 3 reducing ones twice (sum, max); 8 sizes (8 B to 128 KiB by 4).
        assert!(recs.len() >= 7 * 3, "{n} ranks: only {} records", recs.len());
        for c in Collective::ALL {
            assert!(recs.iter().any(|r| r.collective == c), "{n} ranks: no {c} record");
        }
        for rec in recs {
            for t in [&rec.out_of_place, &rec.in_place] {
                assert_eq!(
                    t.wrong,
                    Some(0),
                    "{n} ranks: {} {} {} B",
                    rec.collective,
                    rec.dtype,
                    rec.size
                );
                let s = t.staging_us.expect("device memory reports its staging time");
                assert!(
                    s >= 0.0 && s <= t.max_us,
                    "staging {s} us within the call's {} us",
                    t.max_us
                );
            }
        }
    }
}

#[test]
fn buffers_larger_than_a_staging_chunk_are_copied_whole() {
    // 2.5 staging chunks per rank in one piece: the copies go in three chunks each way.
    let size = (STAGING_CHUNK * 5 / 2) as u64;
    let o = opts(
        size,
        size,
        vec![Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter],
        vec![Dtype::Float],
    );
    let one = Plan {
        pieces: 1,
        ..Plan::default()
    };
    let outs = staged_sweep_on(3, &o, one, |_| Emulated::default());
    assert!(outs.iter().all(|o| o.wrong == 0));
    for c in [Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter] {
        assert!(outs[0].records.iter().any(|r| r.collective == c), "no {c} record");
    }
}

#[test]
fn a_corrupted_copy_back_to_the_device_is_counted_wrong() {
    let o = opts(
        1024,
        1024,
        vec![Collective::AllReduce, Collective::Broadcast],
        vec![Dtype::Int32],
    );
    let outs = staged_sweep(2, &o, Some(1));
    // The verdict is shared: every rank knows the run was wrong.
    assert!(outs.iter().all(|o| o.wrong > 0), "corruption went unnoticed");
    for rec in &outs[0].records {
        for t in [&rec.out_of_place, &rec.in_place] {
            // One flipped byte per copy back; rank 0's copies are clean.
            assert_eq!(t.wrong, Some(1), "{} {:?}", rec.collective, rec.op);
        }
        let first = rec.first_wrong.as_ref().expect("the first wrong element is named");
        assert_eq!((first.rank, first.offset), (1, 0));
    }
}

#[test]
fn host_memory_reports_no_staging() {
    let o = opts(64, 64, vec![Collective::AllReduce], vec![Dtype::Float]);
    let outs = session::run_threads(2, &o, |sess| {
        let ranks = sess.world.ranks.clone();
        let mut engine = Native::new(&mut sess.transports[0], &o.algorithm);
        bench::sweep(&mut engine, sweep(&o, &ranks), HostAlloc).expect("the sweep runs")
    });
    let recs = &outs[0].as_ref().expect("ranks connect").records;
    assert!(recs
        .iter()
        .all(|r| r.out_of_place.staging_us.is_none() && r.out_of_place.wrong == Some(0)));
}

#[test]
fn a_corrupted_copy_of_the_input_to_staging_is_counted_wrong() {
    // The algorithm must read the input that came from the device, in place as out of place.
    let o = opts(
        1024,
        1024,
        vec![Collective::AllReduce, Collective::AllGather],
        vec![Dtype::Int32],
    );
    let outs = staged_sweep_on(2, &o, Plan::default(), |rank| {
        corrupting_on(rank, Some(1), Emulated::corrupting_copies_to_host)
    });
    assert!(outs.iter().all(|o| o.wrong > 0), "corruption went unnoticed");
    for rec in &outs[0].records {
        for t in [&rec.out_of_place, &rec.in_place] {
            // Rank 1's first input element is wrong on both ranks' outputs.
            assert_eq!(t.wrong, Some(2), "{} {:?}", rec.collective, rec.op);
        }
    }
}

#[test]
fn calls_split_into_pipelined_pieces_are_right_for_every_collective() {
    // Pieces of 16 bytes and up, at most 3 a call: 64 B to 16 KiB split into 2 or 3 pieces with uneven
    // remainders, in place and out of place. The emulated device copies only when a piece's mark is waited
    // for, so a piece run before its input arrived, or an output copied back before it was computed, is
    // counted wrong.
    let o = opts(
        64,
        16 << 10,
        Collective::ALL.to_vec(),
        vec![Dtype::Float, Dtype::Half, Dtype::Double],
    );
    let plan = Plan {
        pieces: 3,
        min_piece_bytes: 16,
    };
    for n in 1..=4 {
        let outs = staged_sweep_on(n, &o, plan, |_| Emulated::default());
        for (r, out) in outs.iter().enumerate() {
            assert_eq!(out.wrong, 0, "{n} ranks: rank {r} counted wrong elements");
        }
        let recs = &outs[0].records;
        for c in Collective::ALL {
            assert!(recs.iter().any(|r| r.collective == c), "{n} ranks: no {c} record");
        }
        for rec in recs {
            for t in [&rec.out_of_place, &rec.in_place] {
                let what = format!("{n} ranks: {} {} {} B", rec.collective, rec.dtype, rec.size);
                assert_eq!(t.wrong, Some(0), "{what}");
                let wait = t.staging_wait_us.expect("device memory reports the wait for staging");
                assert!(
                    wait >= 0.0 && wait <= t.max_us,
                    "{what}: wait {wait} us within {} us",
                    t.max_us
                );
            }
        }
    }
}

#[test]
fn a_corrupted_copy_into_one_piece_is_counted_wrong_where_that_piece_lands() {
    // 4 KiB of int32 all_reduce in 4 pieces of 256 elements: rank 1 flips the first byte of each piece's
    // copy back to the device, so 4 elements are wrong, the first at element 0 of rank 1.
    let o = opts(4096, 4096, vec![Collective::AllReduce], vec![Dtype::Int32]);
    let plan = Plan {
        pieces: 4,
        min_piece_bytes: 16,
    };
    let outs = staged_sweep_on(2, &o, plan, |rank| {
        corrupting_on(rank, Some(1), Emulated::corrupting_copies_to_device)
    });
    let rec = &outs[0].records[0];
    for t in [&rec.out_of_place, &rec.in_place] {
        assert_eq!(t.wrong, Some(4), "one flipped element per piece");
    }
    let first = rec.first_wrong.as_ref().expect("the first wrong element is named");
    assert_eq!((first.rank, first.offset), (1, 0));
}

#[test]
fn reductions_on_the_device_are_right_for_every_dtype_op_and_placement() {
    // all_reduce and reduce_scatter reduced by the (emulated) device after an alltoall on the host, every
    // dtype and op, odd counts (all_reduce pads its shards), 1 to 4 ranks, whole and in 3 pieces. The other
    // collectives in the same sweep keep the host pipeline.
    let mut o = opts(
        8,
        40 << 10,
        vec![Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather],
        Dtype::ALL.to_vec(),
    );
    o.sweep.sizes.step = Step::Bytes(12 << 10);
    o.sweep.ops = Op::ALL.to_vec();
    o.buffers.reduce_on_device = true;
    let split = Plan {
        pieces: 3,
        min_piece_bytes: 16,
    };
    for plan in [Plan::default(), split] {
        for n in 1..=4 {
            let outs = staged_sweep_on(n, &o, plan, |_| Emulated::default());
            for (r, out) in outs.iter().enumerate() {
                assert_eq!(out.wrong, 0, "{n} ranks, {plan:?}: rank {r} counted wrong elements");
            }
            let recs = &outs[0].records;
            assert!(
                recs.len() >= 2 * Dtype::ALL.len() * Op::ALL.len(),
                "{n} ranks: {} records",
                recs.len()
            );
            for rec in recs {
                let what = format!(
                    "{n} ranks: {} {} {:?} {} B",
                    rec.collective, rec.dtype, rec.op, rec.size
                );
                for t in [&rec.out_of_place, &rec.in_place] {
                    assert_eq!(t.wrong, Some(0), "{what}");
                }
                let on_device = n > 1 && rec.collective != Collective::AllGather;
                assert_eq!(rec.algo == "device_reduce", on_device, "{what}: algo {}", rec.algo);
            }
        }
    }
}

#[test]
fn a_device_reduction_that_misses_a_peer_is_counted_wrong() {
    // Rank 1 corrupts every copy to its device, the shards it reduces among them: the check sees it, on
    // the path with reductions on the device as on the host one.
    let mut o = opts(
        4096,
        4096,
        vec![Collective::AllReduce, Collective::ReduceScatter],
        vec![Dtype::Int32],
    );
    o.buffers.reduce_on_device = true;
    let outs = staged_sweep_on(2, &o, Plan::default(), |rank| {
        corrupting_on(rank, Some(1), Emulated::corrupting_copies_to_device)
    });
    assert!(outs.iter().all(|o| o.wrong > 0), "corruption went unnoticed");
    for rec in &outs[0].records {
        assert_eq!(rec.algo, "device_reduce");
    }
}

/// An engine that notes, as each collective runs on the host, the copies its device still has queued.
struct Watched<E> {
    inner: E,
    device: Observer,
    seen: Vec<(usize, usize)>,
}

impl<E: Engine> Engine for Watched<E> {
    fn path(&self) -> String {
        self.inner.path()
    }
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn algo(&self, coll: Collective, size_bytes: u64) -> Algo {
        self.inner.algo(coll, size_bytes)
    }
    fn run(&mut self, algo: Algo, args: Args<'_>) -> collbench::error::Result<()> {
        self.seen.push(self.device.pending_copies());
        self.inner.run(algo, args)
    }
    fn barrier(&mut self) -> collbench::error::Result<()> {
        self.inner.barrier()
    }
    fn gather(&mut self, data: &[u8]) -> collbench::error::Result<Option<Vec<Vec<u8>>>> {
        self.inner.gather(data)
    }
    fn broadcast(&mut self, data: &[u8]) -> collbench::error::Result<Vec<u8>> {
        self.inner.broadcast(data)
    }
}

#[test]
fn device_reductions_overlap_the_host_exchanges_of_other_pieces() {
    // 2 ranks, all_reduce of 1024 floats in 4 pieces, reduced on the device. Each call runs 4 alltoalls, then
    // 4 all_gathers. (copies to the host, copies to the device) still queued as each starts:
    // - alltoall k: the inputs of pieces k+1.. and the reduced shards of pieces ..k-1 (to the host), the two
    //   contributions of each piece ..k-1 (to the device): the device works on earlier pieces meanwhile;
    // - all_gather k: the reduced shards and contributions of pieces k+1.., and the outputs of ..k-1.
    let mut o = opts(4096, 4096, vec![Collective::AllReduce], vec![Dtype::Float]);
    o.sweep.ops = vec![Op::Sum];
    o.buffers.reduce_on_device = true;
    let plan = Plan {
        pieces: 4,
        min_piece_bytes: 16,
    };
    let seen = session::run_threads(2, &o, |sess| {
        let ranks = sess.world.ranks.clone();
        let rank = sess.world.rank;
        let dev = Emulated::default();
        let device = dev.observer();
        let mut engine = Watched {
            inner: Native::new(&mut sess.transports[0], &o.algorithm),
            device,
            seen: Vec::new(),
        };
        let alloc = StagedAlloc {
            dev,
            rank,
            plan,
            reduce_on_device: Some(2),
        };
        let out = bench::sweep(&mut engine, sweep(&o, &ranks), alloc).expect("the sweep runs");
        assert_eq!(out.wrong, 0);
        engine.seen
    });
    let one_call = [(3, 0), (3, 2), (3, 4), (3, 6), (3, 6), (2, 5), (1, 4), (0, 3)];
    for (rank, seen) in seen.into_iter().enumerate() {
        let seen = seen.expect("the ranks connect");
        // Warm-up, timed and checked calls, out of place and in place: the same pattern each time.
        assert!(
            !seen.is_empty() && seen.len() % one_call.len() == 0,
            "rank {rank}: {seen:?}"
        );
        for call in seen.chunks(one_call.len()) {
            assert_eq!(call, one_call, "rank {rank}");
        }
    }
}
