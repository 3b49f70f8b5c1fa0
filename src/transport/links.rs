//! Which rank pairs a run connects: the set connection set-up opens and that `Transport`s then carry.
//! What fills it (the peers each algorithm and the control exchanges need) is the algorithms' business:
//! `Links::plan` lives with them in `algorithm::peers`.

/// Which rank pairs are connected: symmetric, the same on every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Links {
    /// Per rank, its peers in ascending order.
    pub(crate) adj: Vec<Vec<usize>>,
    /// Why these pairs, for the header (e.g. `ring, control tree`).
    pub why: String,
}

impl Links {
    /// Every pair of `n` ranks, for traffic whose pattern collbench does not control (`why` says whose).
    pub fn full(n: usize, why: &str) -> Links {
        Links {
            adj: (0..n).map(|r| (0..n).filter(|&p| p != r).collect()).collect(),
            why: why.to_string(),
        }
    }

    /// The pairs in `adj` (per rank, peers in any order, possibly repeated), sorted and deduplicated.
    pub fn from_adjacency(mut adj: Vec<Vec<usize>>, why: String) -> Links {
        for a in &mut adj {
            a.sort_unstable();
            a.dedup();
        }
        Links { adj, why }
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.adj.len()
    }

    /// The peers of rank `r`, ascending.
    pub fn peers(&self, r: usize) -> &[usize] {
        &self.adj[r]
    }

    /// Whether ranks `a` and `b` are connected.
    pub fn connected(&self, a: usize, b: usize) -> bool {
        self.adj.get(a).is_some_and(|v| v.binary_search(&b).is_ok())
    }

    /// Connected pairs (each counted once).
    pub fn pairs(&self) -> usize {
        self.adj.iter().map(Vec::len).sum::<usize>() / 2
    }

    /// The most peers any one rank has.
    pub fn max_peers(&self) -> usize {
        self.adj.iter().map(Vec::len).max().unwrap_or(0)
    }
}
