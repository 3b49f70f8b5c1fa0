//! The points of a sweep: collectives x dtypes x ops x sizes, in the order they run.

use super::options::SweepOptions;
use super::Settings;
use crate::algorithm::peers::{Links, Use};
use crate::algorithm::Algo;
use crate::collective::{Collective, Layout};
use crate::path_names as names;
use crate::reduce::{Dtype, Op};
use crate::transport::path::PathKind;

/// One point of the sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub coll: Collective,
    pub dtype: Dtype,
    /// `None` for collectives that do not reduce.
    pub op: Option<Op>,
    /// The requested size (before per-collective rounding).
    pub requested: u64,
    pub layout: Layout,
}

impl Point {
    /// This point's call on `rank`.
    pub fn call(&self, root: usize, rank: usize, in_place: bool) -> crate::engine::call::Call {
        crate::engine::call::Call::new(self.coll, self.dtype, self.op, &self.layout, root, rank, in_place)
    }
}

/// Every point for `nranks` ranks, in run order: per collective, per dtype, per op, sizes ascending.
pub fn points(sweep: &SweepOptions, nranks: usize) -> Vec<Point> {
    let sizes = sweep.sizes.sizes();
    let mut out = Vec::new();
    for &coll in &sweep.collectives {
        for &dtype in &sweep.dtypes {
            let ops: Vec<Option<Op>> = if coll.reduces() {
                sweep.ops.iter().copied().map(Some).collect()
            } else {
                vec![None]
            };
            for op in ops {
                for &requested in &sizes {
                    let layout = coll.layout(requested as usize, dtype.size(), nranks);
                    out.push(Point {
                        coll,
                        dtype,
                        op,
                        requested,
                        layout,
                    });
                }
            }
        }
    }
    out
}

/// The algorithms collbench's own engine runs for the points of `opts` on `nranks` ranks (as
/// [`Algo::choose`] picks them per point on a TCP path), each once.
pub fn uses(opts: Settings<'_>, nranks: usize) -> Vec<Use> {
    let mut out: Vec<Use> = Vec::new();
    for p in points(opts.sweep, nranks) {
        let u = Use {
            coll: p.coll,
            // The TCP paths' picks: the links planned here are theirs.
            algo: Algo::choose(p.coll, opts.algorithm, names::TCP, p.layout.size_bytes as u64, nranks),
            root: opts.sweep.root,
        };
        if !out.contains(&u) {
            out.push(u);
        }
    }
    out
}

/// The rank pairs the TCP paths connect for `opts` on `nranks` ranks: what the chosen algorithms and the
/// control exchanges need, or every pair when an RDMA path will swap queue-pair records with every peer
/// over the first TCP path.
pub fn links(opts: Settings<'_>, nranks: usize) -> Links {
    if opts.paths.transports.iter().any(|p| p.traits().set_up_with_every_peer) {
        return Links::full(nranks, "all pairs: RDMA set-up talks to every peer");
    }
    if !opts.paths.transports.iter().any(PathKind::is_tcp) {
        // The TCP path only carries control traffic (the library paths move the data).
        return Links::plan(nranks, &[]);
    }
    Links::plan(nranks, &uses(opts, nranks))
}

/// Send and receive buffer bytes that cover every point.
pub fn buffer_bytes(points: &[Point]) -> (usize, usize) {
    points.iter().fold((0, 0), |(s, r), p| {
        let es = p.layout.elem_size;
        (
            s.max(p.layout.send_count * es),
            r.max(p.layout.send_count.max(p.layout.recv_count) * es),
        )
    })
}

/// Requested sizes that a collective had to round (not a multiple of its element or block size).
pub fn rounded(points: &[Point], nranks: usize) -> Vec<String> {
    points
        .iter()
        .filter(|p| p.requested as usize != p.layout.size_bytes)
        .map(|p| {
            format!(
                "{} {} {} B -> {} B (nccl-tests rounding: whole elements{})",
                p.coll,
                p.dtype,
                p.requested,
                p.layout.size_bytes,
                match p.coll {
                    Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => {
                        format!(", per-rank blocks of a multiple of 16 bytes over {nranks} ranks")
                    }
                    _ => String::new(),
                }
            )
        })
        .collect()
}
