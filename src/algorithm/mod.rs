//! Collective algorithms, written only against the [`Transport`] trait.
//!
//! - `ring`: pipelined ring all_reduce (reduce-scatter + all-gather), all_gather, reduce_scatter, and
//!   pipelined chains for broadcast and reduce: bandwidth-optimal for large messages.
//! - [`pipeline`]: `ring_pipelined`, the ring with its chunk per call from the model of the path.
//! - `rd`: recursive doubling all_reduce (and reduce_scatter on top of it), log2(n) steps.
//! - `bruck`: Bruck all_gather, ceil(log2 n) steps for any n.
//! - `tree`: binomial-tree broadcast and reduce, and all_reduce as reduce + broadcast.
//! - `pairwise`: alltoall and sendrecv, every pair at once.
//! - [`control`]: barrier and small gathers/broadcasts the runner uses for statistics.
//! - [`peers`]: which peers each algorithm talks to, and the pairs a run connects.

mod bruck;
pub mod cost;
pub mod options;
mod pairwise;
pub mod peers;
mod picker;
pub mod pipeline;
pub use picker::{AlgoCost, CostModel, CostTable};
mod rd;
mod ring;
mod tree;

mod bufs;

use std::fmt;

use crate::algorithm::options::AlgoChoice;
use crate::collective::Collective;
use crate::error::Result;
use crate::memory::HostBuf;
use crate::reduce::{Dtype, Op};
pub use crate::transport::control;
use crate::transport::{Request, Transport};

/// The algorithm `--algo auto` runs between a collective's latency algorithm and the ring ([`Algo::middle`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Middle {
    pub algo: Algo,
    /// The first size it runs at.
    pub from: u64,
    /// The size from which the ring takes over.
    pub below: u64,
}

pub(crate) use bufs::Bufs;

/// A concrete algorithm, as shown in the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algo {
    Ring,
    /// The ring with each step's segment cut by the model of the path ([`pipeline`]).
    RingPipelined,
    RecDoubling,
    /// Rabenseifner's all_reduce: recursive-halving reduce-scatter, then recursive-doubling all-gather.
    HalvingDoubling,
    Bruck,
    Tree,
    Pairwise,
    /// A library's own choice (MPI, NCCL): collbench does not know which algorithm it ran.
    Library,
}

impl Algo {
    /// Name shown in tables and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Algo::Ring => "ring",
            Algo::RingPipelined => "ring_pipelined",
            Algo::RecDoubling => "rec_doubling",
            Algo::HalvingDoubling => "halving_doubling",
            Algo::Bruck => "bruck",
            Algo::Tree => "tree",
            Algo::Pairwise => "pairwise",
            Algo::Library => "library",
        }
    }

    /// collbench's own algorithms (every one but [`Algo::Library`]).
    pub const NATIVE: [Algo; 7] = [
        Algo::Ring,
        Algo::RingPipelined,
        Algo::RecDoubling,
        Algo::HalvingDoubling,
        Algo::Bruck,
        Algo::Tree,
        Algo::Pairwise,
    ];

    /// The length of the longest name, so a table column holds every algorithm (`halving_doubling`).
    pub const LONGEST_NAME: usize = {
        let mut w = Algo::Library.name().len();
        let mut i = 0;
        while i < Algo::NATIVE.len() {
            let n = Algo::NATIVE[i].name().len();
            if n > w {
                w = n;
            }
            i += 1;
        }
        w
    };

    /// The algorithms `coll` can run.
    pub fn available(coll: Collective) -> &'static [Algo] {
        match coll {
            Collective::AllReduce => &[
                Algo::Ring,
                Algo::RecDoubling,
                Algo::Tree,
                Algo::HalvingDoubling,
                Algo::RingPipelined,
            ],
            Collective::AllGather => &[Algo::Ring, Algo::Bruck, Algo::RecDoubling, Algo::RingPipelined],
            Collective::ReduceScatter => &[Algo::Ring, Algo::RecDoubling],
            Collective::Broadcast | Collective::Reduce => &[Algo::Ring, Algo::Tree],
            Collective::AllToAll | Collective::SendRecv => &[Algo::Pairwise],
        }
    }

    /// The latency algorithm of `coll`, used below the size threshold.
    pub fn latency(coll: Collective) -> Algo {
        match coll {
            Collective::AllReduce | Collective::ReduceScatter => Algo::RecDoubling,
            Collective::AllGather => Algo::Bruck,
            Collective::Broadcast | Collective::Reduce => Algo::Tree,
            Collective::AllToAll | Collective::SendRecv => Algo::Pairwise,
        }
    }

    /// The size at which `--algo auto` leaves `coll`'s latency algorithm, where the user sets none.
    /// Measured on 4 ranks (loopback, 200-1000 iterations a point): recursive doubling all_reduce beats
    /// recursive halving + doubling below 128 KiB (at 64 KiB they tie), Bruck all_gather beats the ring up to
    /// 256 KiB of output; for the others the ring or chain wins from 64 KiB.
    pub fn default_threshold(coll: Collective) -> u64 {
        match coll {
            Collective::AllReduce => 128 << 10,
            Collective::AllGather => 256 << 10,
            _ => 64 << 10,
        }
    }

    /// Between the latency algorithm and the ring, `--algo auto` (with no user threshold) runs this algorithm from the
    /// first size given and below the second, on a power-of-two number of ranks (elsewhere its folding steps move whole
    /// messages). Measured on 4 ranks: recursive halving + doubling all_reduce took 142-358 us at 128-512 KiB against
    /// recursive doubling's 170-493, and 751-4437 us at 1-4 MiB against the ring's 1199-4742; they tie at 8 MiB and the
    /// ring wins from 16 MiB. Across 8 namespace hosts at 1 Gbit/s it starts paying below that: at 32 and 64 KiB it
    /// took 680-732 and 1028-1034 us against recursive doubling's 896-901 and 1724-1734 (it moves 2 x (p-1)/p of the
    /// message on each link, recursive doubling lg p times all of it), and at 16 KiB 684-745 against 561-566; on
    /// loopback the two tie at 64 KiB. Recursive-doubling all_gather beats the ring by 5-10% at 1-4 MiB of output on
    /// loopback (4 ranks on 2 cores), but across namespace hosts whose links set the pace the two take the same time
    /// from 1 MiB (8 hosts at 1 Gbit/s: 7.74 against 7.72 ms at 1 MiB, 30.9 against 30.8 ms at 4 MiB) and recursive
    /// doubling alone falls into slow spells: once a rank runs late, the ranks' back-to-back calls stay out of step for
    /// tens of iterations at up to 1.8x the wire time (sweeps 30-68% apart at 1-4 MiB on 8 and 16 hosts, the ring's
    /// 0-1%; a barrier after each call removes them), so the ring takes over from 1 MiB
    /// (results/tcp-vs-mpi/spread/README.md).
    pub fn middle(coll: Collective) -> Option<Middle> {
        let (algo, from, below) = match coll {
            Collective::AllReduce => (Algo::HalvingDoubling, 64 << 10, 8 << 20),
            Collective::AllGather => (Algo::RecDoubling, 256 << 10, 1 << 20),
            _ => return None,
        };
        Some(Middle { algo, from, below })
    }

    /// Picks the algorithm for one point on `nranks` ranks. A forced choice applies to the collectives that
    /// have it; the others keep their automatic pick. `threshold`: the user's switch size to the ring (then
    /// there is no middle algorithm), else [`Algo::default_threshold`] and [`Algo::middle`].
    pub fn select(
        coll: Collective,
        choice: AlgoChoice,
        size_bytes: u64,
        threshold: Option<u64>,
        nranks: usize,
    ) -> Algo {
        let middle = match threshold {
            None if nranks.is_power_of_two() => Algo::middle(coll),
            _ => None,
        };
        let threshold = threshold.unwrap_or_else(|| Algo::default_threshold(coll));
        let auto = || match middle {
            Some(m) if (m.from..m.below).contains(&size_bytes) => m.algo,
            _ if size_bytes < threshold => Algo::latency(coll),
            _ => Algo::available(coll)[0],
        };
        match Algo::forced(choice) {
            Some(wanted) if Algo::available(coll).contains(&wanted) => wanted,
            _ => auto(),
        }
    }

    /// Picks the algorithm for one point of the path named `path` (`tcp@eth0`; only its kind counts, as
    /// interface names differ between ranks): [`Algo::select`]'s pick, which `--algo-model`'s table for the
    /// path's kind replaces where it predicts something strictly faster ([`CostTable::pick`]) when `--algo`
    /// is auto and no `--algo-threshold` is given. The inputs are all agreed options, so every rank picks alike.
    pub fn choose(coll: Collective, opts: &options::AlgoOptions, path: &str, size_bytes: u64, nranks: usize) -> Algo {
        let default = Algo::select(coll, opts.algo, size_bytes, opts.algo_threshold, nranks);
        match (&opts.algo_model, opts.algo, opts.algo_threshold) {
            (Some(model), AlgoChoice::Auto, None) => model
                .table(path)
                .map_or(default, |t| t.pick(coll, nranks, size_bytes, default)),
            _ => default,
        }
    }

    /// The algorithm `--algo` forces, or None for auto.
    pub const fn forced(choice: AlgoChoice) -> Option<Algo> {
        Some(match choice {
            AlgoChoice::Auto => return None,
            AlgoChoice::Ring => Algo::Ring,
            AlgoChoice::RecDoubling => Algo::RecDoubling,
            AlgoChoice::Tree => Algo::Tree,
            AlgoChoice::HalvingDoubling => Algo::HalvingDoubling,
            AlgoChoice::Bruck => Algo::Bruck,
            AlgoChoice::RingPipelined => Algo::RingPipelined,
        })
    }

    /// A note for rank 0 to print when the forced `choice` is no algorithm of some of `colls`, which then run
    /// auto's choice; None for auto or when it applies to every one.
    pub fn unforced_note(choice: AlgoChoice, colls: &[Collective]) -> Option<String> {
        let wanted = Algo::forced(choice)?;
        let (runs, not): (Vec<&Collective>, Vec<&Collective>) =
            colls.iter().partition(|c| Algo::available(**c).contains(&wanted));
        if not.is_empty() {
            return None;
        }
        let names = |v: &[&Collective]| v.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ");
        Some(format!(
            "--algo {choice} is not an algorithm of {}, which run(s) --algo auto's choice{}",
            names(&not),
            if runs.is_empty() {
                String::new()
            } else {
                format!(" (it applies to {})", names(&runs))
            }
        ))
    }
}

impl fmt::Display for Algo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Pipeline tuning of the ring and chain algorithms.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Bytes per pipeline chunk (`ring_pipelined`'s largest).
    pub chunk_bytes: usize,
    /// Receives posted ahead (and scratch slots), at most [`MAX_DEPTH`].
    pub depth: usize,
    /// The ring's fitted costs on this path, which size `ring_pipelined`'s chunk (`None`: no model).
    pub ring_cost: Option<pipeline::RingCost>,
}

impl Tuning {
    /// The tuning `algo` runs `coll` with on `p` ranks at `size_bytes` (the results' size column): for
    /// `ring_pipelined`, the chunk [`pipeline::chunk_bytes`] picks; as it is for the others.
    pub fn for_call(&self, coll: Collective, algo: Algo, p: usize, size_bytes: u64) -> Tuning {
        match algo {
            Algo::RingPipelined => Tuning {
                chunk_bytes: pipeline::chunk_bytes(coll, p, size_bytes, self.chunk_bytes, self.ring_cost.as_ref()),
                ..*self
            },
            _ => *self,
        }
    }
}

/// Upper bound of [`Tuning::depth`].
pub const MAX_DEPTH: usize = 8;

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            chunk_bytes: 512 << 10,
            depth: pipeline::CHUNKS_WITHOUT_MODEL,
            ring_cost: None,
        }
    }
}

/// One collective call: what to do and on which buffers.
pub struct Args<'a> {
    pub coll: Collective,
    pub dtype: Dtype,
    /// Reduction op (ignored by collectives that do not reduce).
    pub op: Op,
    /// Root rank (broadcast, reduce).
    pub root: usize,
    /// Per-rank element count (nccl-tests' `count` column).
    pub count: usize,
    /// Input buffer; `None` runs in place, with the input inside `recv` where nccl-tests puts it (all_gather:
    /// this rank's block; reduce_scatter: `recv` holds all n blocks and the result lands in this rank's).
    pub send: Option<&'a [u8]>,
    /// Output buffer.
    pub recv: &'a mut [u8],
}

/// Scratch bytes `algo` needs for `coll` with `count` elements of `elem` bytes on `n` ranks.
pub fn scratch_bytes(coll: Collective, algo: Algo, count: usize, elem: usize, n: usize, tune: &Tuning) -> usize {
    let msg = count * elem;
    let chunk = tune.chunk_bytes.div_ceil(elem) * elem;
    match (coll, algo) {
        (Collective::ReduceScatter, Algo::Ring) => 2 * msg,
        (_, Algo::Ring | Algo::RingPipelined) => tune.depth.clamp(1, MAX_DEPTH) * chunk,
        (Collective::AllReduce, Algo::RecDoubling | Algo::HalvingDoubling) => msg,
        (Collective::ReduceScatter, Algo::RecDoubling) => 2 * msg * n,
        (Collective::AllGather, Algo::Bruck | Algo::RecDoubling) => msg * n,
        (Collective::Reduce | Collective::AllReduce, Algo::Tree) => 2 * msg,
        (Collective::AllToAll, _) => msg * n,
        (Collective::SendRecv, _) => msg,
        _ => 0,
    }
}

/// Memory an algorithm may use between calls, kept so the data path allocates nothing once warmed up.
#[derive(Debug, Default)]
pub struct Workspace {
    /// Scratch bytes, grown to the largest need seen.
    pub bytes: HostBuf,
    /// Request handles of algorithms that track many at once.
    reqs: Vec<Option<Request>>,
}

/// Runs one collective with `algo`; the workspace grows to what the algorithm needs.
pub fn run<T: Transport + ?Sized>(
    t: &mut T,
    algo: Algo,
    args: Args<'_>,
    ws: &mut Workspace,
    tune: &Tuning,
) -> Result<()> {
    let n = t.size();
    let es = args.dtype.size();
    // The results' size column: all_gather's is the n blocks it gathers.
    let size_column = match args.coll {
        Collective::AllGather => args.count * es * n,
        _ => args.count * es,
    };
    let tune = &tune.for_call(args.coll, algo, n, size_column as u64);
    ws.bytes.ensure(scratch_bytes(args.coll, algo, args.count, es, n, tune));
    let scratch: &mut [u8] = &mut ws.bytes;
    let reqs = &mut ws.reqs;
    let Args {
        coll,
        dtype,
        op,
        root,
        count,
        send,
        recv,
    } = args;
    let b = Bufs::new(send, recv);
    let r = match (coll, algo) {
        (Collective::AllReduce, Algo::Ring | Algo::RingPipelined) => {
            ring::all_reduce(t, &b, count, dtype, op, scratch, tune)
        }
        (Collective::AllReduce, Algo::RecDoubling) => rd::all_reduce(t, &b, count, dtype, op, scratch),
        (Collective::AllReduce, Algo::HalvingDoubling) => {
            rd::all_reduce_halving(t, &b, count, dtype, op, scratch, tune)
        }
        (Collective::AllReduce, Algo::Tree) => tree::all_reduce(t, &b, count, dtype, op, scratch),
        (Collective::AllGather, Algo::Ring | Algo::RingPipelined) => ring::all_gather(t, &b, count * es, tune, reqs),
        (Collective::AllGather, Algo::Bruck) => bruck::all_gather(t, &b, count * es, scratch),
        (Collective::AllGather, Algo::RecDoubling) => rd::all_gather(t, &b, count * es, scratch),
        (Collective::ReduceScatter, Algo::Ring) => ring::reduce_scatter(t, &b, count, dtype, op, (scratch, reqs), tune),
        (Collective::ReduceScatter, Algo::RecDoubling) => rd::reduce_scatter(t, &b, count, dtype, op, scratch),
        (Collective::Broadcast, Algo::Ring) => ring::broadcast(t, &b, count * es, root, tune, reqs),
        (Collective::Broadcast, Algo::Tree) => tree::broadcast(t, &b, count * es, root),
        (Collective::Reduce, Algo::Ring) => ring::reduce(t, &b, count, dtype, op, root, scratch, tune),
        (Collective::Reduce, Algo::Tree) => tree::reduce(t, &b, count, dtype, op, root, scratch),
        (Collective::AllToAll, _) => pairwise::alltoall(t, &b, count * es, scratch),
        (Collective::SendRecv, _) => pairwise::sendrecv(t, &b, count * es, scratch),
        (c, a) => panic!("{a} is not an algorithm of {c}; Algo::select never picks it"),
    };
    debug_assert!(r.is_err() || t.pending() == 0, "{coll}/{algo} left requests in flight");
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_picks_latency_algorithms_below_the_threshold() {
        assert_eq!(
            Algo::select(Collective::AllReduce, AlgoChoice::Auto, 8, Some(65536), 4),
            Algo::RecDoubling
        );
        assert_eq!(
            Algo::select(Collective::AllReduce, AlgoChoice::Auto, 65536, Some(65536), 4),
            Algo::Ring
        );
        assert_eq!(
            Algo::select(Collective::AllGather, AlgoChoice::Auto, 8, Some(65536), 4),
            Algo::Bruck
        );
        assert_eq!(
            Algo::select(Collective::Broadcast, AlgoChoice::Auto, 8, Some(65536), 4),
            Algo::Tree
        );
        assert_eq!(
            Algo::select(Collective::AllToAll, AlgoChoice::Auto, 1 << 30, Some(65536), 4),
            Algo::Pairwise
        );
    }

    #[test]
    fn without_a_user_threshold_each_collective_switches_at_its_own() {
        for (coll, at) in [(Collective::ReduceScatter, 64 << 10), (Collective::Broadcast, 64 << 10)] {
            assert_eq!(
                Algo::select(coll, AlgoChoice::Auto, at - 1, None, 4),
                Algo::latency(coll),
                "{coll}"
            );
            assert_eq!(Algo::select(coll, AlgoChoice::Auto, at, None, 4), Algo::Ring, "{coll}");
        }
        // A user's threshold applies to every collective alike, straight to the ring.
        assert_eq!(
            Algo::select(Collective::AllReduce, AlgoChoice::Auto, 64 << 10, Some(64 << 10), 4),
            Algo::Ring
        );
        assert_eq!(
            Algo::select(Collective::AllReduce, AlgoChoice::Auto, 1 << 20, Some(64 << 10), 4),
            Algo::Ring
        );
    }

    #[test]
    fn all_reduce_runs_halving_doubling_between_its_latency_and_ring_sizes_on_powers_of_two() {
        let pick = |size: u64, n: usize| Algo::select(Collective::AllReduce, AlgoChoice::Auto, size, None, n);
        for n in [2, 4, 8, 64] {
            assert_eq!(pick((64 << 10) - 4, n), Algo::RecDoubling, "{n} ranks");
            assert_eq!(pick(64 << 10, n), Algo::HalvingDoubling, "{n} ranks");
            assert_eq!(pick((8 << 20) - 4, n), Algo::HalvingDoubling, "{n} ranks");
            assert_eq!(pick(8 << 20, n), Algo::Ring, "{n} ranks");
        }
        for n in [3, 5, 6, 12] {
            assert_eq!(pick((128 << 10) - 4, n), Algo::RecDoubling, "{n} ranks");
            assert_eq!(pick(128 << 10, n), Algo::Ring, "{n} ranks");
            assert_eq!(pick(1 << 20, n), Algo::Ring, "{n} ranks");
        }
    }

    #[test]
    fn all_gather_runs_recursive_doubling_between_bruck_and_the_ring_on_powers_of_two() {
        let pick = |size: u64, n: usize| Algo::select(Collective::AllGather, AlgoChoice::Auto, size, None, n);
        for n in [2, 4, 16] {
            assert_eq!(pick((256 << 10) - 64, n), Algo::Bruck, "{n} ranks");
            assert_eq!(pick(256 << 10, n), Algo::RecDoubling, "{n} ranks");
            assert_eq!(pick((1 << 20) - 64, n), Algo::RecDoubling, "{n} ranks");
            assert_eq!(pick(1 << 20, n), Algo::Ring, "{n} ranks");
        }
        for n in [3, 6] {
            assert_eq!(pick((256 << 10) - 64, n), Algo::Bruck, "{n} ranks");
            assert_eq!(pick(1 << 20, n), Algo::Ring, "{n} ranks");
        }
        // --algo rd forces it (Bruck's steps on other rank counts).
        assert_eq!(
            Algo::select(Collective::AllGather, AlgoChoice::RecDoubling, 1 << 30, None, 4),
            Algo::RecDoubling
        );
        // --algo bruck forces Bruck, on 2^k ranks too; elsewhere it falls back to auto.
        assert_eq!(
            Algo::select(Collective::AllGather, AlgoChoice::Bruck, 1 << 30, None, 4),
            Algo::Bruck
        );
        assert_eq!(
            Algo::select(Collective::AllReduce, AlgoChoice::Bruck, 1 << 30, None, 4),
            Algo::Ring
        );
    }

    #[test]
    fn a_forced_choice_that_some_collectives_lack_is_noted() {
        let colls = [Collective::AllReduce, Collective::AllGather];
        assert_eq!(Algo::unforced_note(AlgoChoice::Auto, &colls), None);
        assert_eq!(Algo::unforced_note(AlgoChoice::Ring, &colls), None);
        assert_eq!(
            Algo::unforced_note(AlgoChoice::HalvingDoubling, &colls).as_deref(),
            Some("--algo rhd is not an algorithm of all_gather, which run(s) --algo auto's choice (it applies to all_reduce)")
        );
        assert_eq!(
            Algo::unforced_note(AlgoChoice::Bruck, &[Collective::AllReduce, Collective::Broadcast]).as_deref(),
            Some("--algo bruck is not an algorithm of all_reduce, broadcast, which run(s) --algo auto's choice")
        );
    }

    #[test]
    fn forced_choices_apply_where_they_exist() {
        assert_eq!(
            Algo::select(Collective::AllReduce, AlgoChoice::Ring, 8, Some(65536), 4),
            Algo::Ring
        );
        assert_eq!(
            Algo::select(Collective::AllGather, AlgoChoice::RecDoubling, 1 << 20, Some(65536), 4),
            Algo::RecDoubling
        );
        assert_eq!(
            Algo::select(Collective::AllGather, AlgoChoice::Tree, 1 << 20, Some(65536), 4),
            Algo::Ring
        );
        assert_eq!(
            Algo::select(Collective::SendRecv, AlgoChoice::Ring, 8, Some(65536), 4),
            Algo::Pairwise
        );
        for c in Collective::ALL {
            for a in Algo::available(c) {
                assert!(Algo::available(c).contains(&Algo::latency(c)), "{c} {a}");
            }
        }
    }
}
