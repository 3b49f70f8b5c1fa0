//! Which peers a rank talks to: per algorithm, and the union a run needs, so connection set-up opens only
//! those pairs. Every rank computes the same [`Links`] from the same (consensus) options, so both ends of a
//! pair agree on whether it is connected.
//!
//! Rings and the binomial trees need O(n) pairs, recursive doubling and Bruck O(n log n); only alltoall
//! needs every pair. Control traffic (barrier, gather, broadcast) runs on the binomial tree rooted at 0.

use super::Algo;
use crate::collective::Collective;
pub use crate::transport::Links;

/// Ring neighbours of `r`: left and right (one peer for two ranks, none alone).
fn ring(r: usize, n: usize) -> Vec<usize> {
    vec![(r + 1) % n, (r + n - 1) % n]
}

/// The chain start -> start+1 -> ... -> start-1: the ring without the pair that would close it. Ring
/// broadcast starts at the root, ring reduce at the rank after it (and ends at the root).
fn chain(start: usize, r: usize, n: usize) -> Vec<usize> {
    let pos = (r + n - start) % n;
    let mut v = Vec::with_capacity(2);
    if pos > 0 {
        v.push((r + n - 1) % n);
    }
    if pos + 1 < n {
        v.push((r + 1) % n);
    }
    v
}

/// Partners of recursive doubling, including the fold of the ranks beyond the largest power of two.
fn rec_doubling(r: usize, n: usize) -> Vec<usize> {
    let p2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - p2;
    if r < 2 * rem && r % 2 == 0 {
        return vec![r + 1];
    }
    let mut v = Vec::new();
    let vrank = if r < 2 * rem {
        v.push(r - 1);
        r / 2
    } else {
        r - rem
    };
    let real = |v: usize| if v < rem { 2 * v + 1 } else { v + rem };
    let mut mask = 1;
    while mask < p2 {
        v.push(real(vrank ^ mask));
        mask <<= 1;
    }
    v
}

/// Bruck's (and the dissemination barrier's) partners: rank ± 2^k for every 2^k < n.
fn bruck(r: usize, n: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut d = 1;
    while d < n {
        v.push((r + d) % n);
        v.push((r + n - d) % n);
        d <<= 1;
    }
    v
}

/// Parent and children of `r` in the binomial tree rooted at `root`.
pub fn binomial_tree(root: usize, r: usize, n: usize) -> Vec<usize> {
    let v = (r + n - root) % n;
    let real = |x: usize| (x + root) % n;
    let mut out = Vec::new();
    // Children are v + 2^k below v's lowest set bit (every 2^k < n for the root).
    let low = if v == 0 {
        n.next_power_of_two()
    } else {
        v & v.wrapping_neg()
    };
    if v != 0 {
        out.push(real(v - low));
    }
    let mut mask = 1;
    while mask < low && v + mask < n {
        out.push(real(v + mask));
        mask <<= 1;
    }
    out
}

/// The peers rank `r` of `n` exchanges data with when it runs `coll` with `algo` (`root` for broadcast and
/// reduce). A library's algorithm ([`Algo::Library`]) uses none of collbench's connections.
pub fn of(coll: Collective, algo: Algo, root: usize, r: usize, n: usize) -> Vec<usize> {
    if n < 2 {
        return Vec::new();
    }
    let mut v = match (coll, algo) {
        (_, Algo::Library) => Vec::new(),
        (Collective::Broadcast, Algo::Ring) => chain(root, r, n),
        (Collective::Reduce, Algo::Ring) => chain((root + 1) % n, r, n),
        (Collective::Broadcast | Collective::Reduce, Algo::Tree) => binomial_tree(root, r, n),
        (Collective::AllReduce, Algo::Tree) => binomial_tree(0, r, n),
        (_, Algo::Ring | Algo::RingPipelined) => ring(r, n),
        // Recursive-doubling all_gather runs Bruck where n is not a power of two.
        (Collective::AllGather, Algo::RecDoubling) if !n.is_power_of_two() => bruck(r, n),
        (_, Algo::RecDoubling | Algo::HalvingDoubling) => rec_doubling(r, n),
        (_, Algo::Bruck) => bruck(r, n),
        (Collective::AllToAll, _) => (0..n).collect(),
        (Collective::SendRecv, _) => ring(r, n),
        // Pairs Algo::select never picks (see Algo::available).
        (_, Algo::Tree | Algo::Pairwise) => Vec::new(),
    };
    v.retain(|&p| p != r);
    v.sort_unstable();
    v.dedup();
    v
}

/// The peers of the control exchanges ([`super::control`]): the binomial tree rooted at rank 0.
pub fn control(r: usize, n: usize) -> Vec<usize> {
    if n < 2 {
        return Vec::new();
    }
    binomial_tree(0, r, n)
}

/// One algorithm a run may use: a collective, its algorithm and root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Use {
    pub coll: Collective,
    pub algo: Algo,
    pub root: usize,
}

// The type is the transport's (it opens these pairs); planning them is here, with the peer sets it adds up.
impl Links {
    /// The pairs the control exchanges and every algorithm in `uses` need on `n` ranks. A pair either end
    /// needs is connected, so the result is symmetric even where one algorithm's sets were not.
    pub fn plan(n: usize, uses: &[Use]) -> Links {
        let mut adj: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut add = |r: usize, peers: Vec<usize>| {
            for p in peers {
                adj[r].push(p);
                adj[p].push(r);
            }
        };
        for r in 0..n {
            add(r, control(r, n));
            for u in uses {
                add(r, of(u.coll, u.algo, u.root, r, n));
            }
        }
        let mut names = vec!["control tree"];
        for u in uses {
            let name = u.algo.name();
            if u.algo != Algo::Library && !names.contains(&name) {
                names.push(name);
            }
        }
        Links::from_adjacency(adj, names.join(", "))
    }
}

#[cfg(test)]
mod tests;
