//! The points of a sweep: collectives x dtypes x ops x sizes, in the order they run.

use crate::collective::{Collective, Layout};
use crate::options::Options;
use crate::reduce::{Dtype, Op};

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

/// Every point for `nranks` ranks, in run order: per collective, per dtype, per op, sizes ascending.
pub fn points(opts: &Options, nranks: usize) -> Vec<Point> {
    let sizes = opts.sizes.sizes();
    let mut out = Vec::new();
    for &coll in &opts.collectives {
        for &dtype in &opts.dtypes {
            let ops: Vec<Option<Op>> = if coll.reduces() {
                opts.ops.iter().copied().map(Some).collect()
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
