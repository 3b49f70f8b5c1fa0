//! Where each collective's input lives and what its output must hold, for the data check.

use super::{Collective, Layout};
use crate::reduce::pattern::Source;

/// A run of output elements whose values must equal `source`'s values from element `first` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expect {
    /// First element in the receive buffer.
    pub at: usize,
    pub len: usize,
    pub source: Source,
    /// Pattern index of the first element.
    pub first: usize,
}

impl Collective {
    /// Elements of the receive buffer the collective works on: in place this holds the input too.
    pub fn recv_elems(self, l: &Layout, in_place: bool) -> usize {
        if in_place {
            l.send_count.max(l.recv_count)
        } else {
            l.recv_count
        }
    }

    /// Where, in place, the input sits in the receive buffer (start element); out of place it is the send
    /// buffer from element 0.
    pub fn in_place_input_at(self, l: &Layout, rank: usize) -> usize {
        match self {
            Collective::AllGather => rank * l.count,
            _ => 0,
        }
    }

    /// What the output of `rank` must hold after the collective.
    pub fn expected(self, l: &Layout, rank: usize, nranks: usize, root: usize, in_place: bool) -> Vec<Expect> {
        let c = l.count;
        let n = nranks;
        match self {
            Collective::AllReduce => vec![Expect {
                at: 0,
                len: c,
                source: Source::Reduced,
                first: 0,
            }],
            Collective::AllGather => (0..n)
                .map(|j| Expect {
                    at: j * c,
                    len: c,
                    source: Source::Rank(j),
                    first: 0,
                })
                .collect(),
            Collective::ReduceScatter => {
                let at = if in_place { rank * c } else { 0 };
                vec![Expect {
                    at,
                    len: c,
                    source: Source::Reduced,
                    first: rank * c,
                }]
            }
            Collective::Broadcast => vec![Expect {
                at: 0,
                len: c,
                source: Source::Rank(root),
                first: 0,
            }],
            Collective::Reduce if rank == root => vec![Expect {
                at: 0,
                len: c,
                source: Source::Reduced,
                first: 0,
            }],
            Collective::Reduce => Vec::new(),
            Collective::AllToAll => (0..n)
                .map(|j| Expect {
                    at: j * c,
                    len: c,
                    source: Source::Rank(j),
                    first: rank * c,
                })
                .collect(),
            Collective::SendRecv => vec![Expect {
                at: 0,
                len: c,
                source: Source::Rank((rank + n - 1) % n),
                first: 0,
            }],
        }
    }
}
