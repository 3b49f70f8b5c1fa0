//! The textbook cost of each algorithm as a linear form in the model's parameters:
//! `time = a * alpha + b * beta + c * gamma`, with alpha the cost of one message step, beta the cost of one
//! byte on the wire and gamma the cost of reducing one byte. `n` is the size column of the results (bytes
//! of the larger buffer: the whole vector for all_reduce, broadcast and reduce, the n-rank total for
//! all_gather, reduce_scatter and alltoall), `p` the rank count.
//!
//! The forms follow what src/algorithm/ runs, so they can differ from the textbook where the code does:
//! recursive doubling on a rank count that is not a power of two folds the extra ranks in and out (two more
//! steps that carry the whole message, one more reduction), and reduce_scatter by recursive doubling is an
//! all-reduce of the whole n-block buffer.
//!
//! Beside these, the model prices a per-call cost paid once by any call that communicates ([`Coeffs::calls`]),
//! so the step terms carry only the per-round alpha: ceil(lg p) rounds (plus the fold's two steps) for the
//! latency algorithms, whose constants are then identifiable from 2-4 ranks (src/model/fit.rs).

use super::Algo;
use crate::collective::Collective;

/// Coefficients of alpha, beta and gamma for one collective call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coeffs {
    /// Message steps on the critical path (multiplies alpha).
    pub a: f64,
    /// Bytes on the busiest link of the critical path (multiplies beta).
    pub b: f64,
    /// Bytes reduced on the critical path (multiplies gamma).
    pub c: f64,
}

impl Coeffs {
    /// The time these coefficients give for parameters `(alpha, beta, gamma)`.
    pub fn time(&self, alpha: f64, beta: f64, gamma: f64) -> f64 {
        self.a * alpha + self.b * beta + self.c * gamma
    }

    /// How many times the per-call cost is paid: once for a call that communicates (any step), never for
    /// one that moves nothing (one rank).
    pub fn calls(&self) -> f64 {
        if self.a > 0.0 {
            1.0
        } else {
            0.0
        }
    }
}

/// ceil(log2 p) for p >= 1.
fn ceil_lg(p: usize) -> f64 {
    (usize::BITS - (p.max(1) - 1).leading_zeros()) as f64
}

/// Recursive doubling's all-reduce of `n` bytes on `p` ranks (see the module docs for the fold).
fn rec_doubling(p: usize, n: f64) -> Coeffs {
    let k = (usize::BITS - 1 - p.leading_zeros()) as f64; // floor(log2 p)
    if p.is_power_of_two() {
        Coeffs {
            a: k,
            b: k * n,
            c: k * n,
        }
    } else {
        Coeffs {
            a: k + 2.0,
            b: (k + 2.0) * n,
            c: (k + 1.0) * n,
        }
    }
}

/// Rabenseifner's all-reduce of `n` bytes on `p` ranks: halving and doubling among the largest power of two p2,
/// each moving (p2-1)/p2 of the message; a fold in and out (whole message, one more reduction) when p is not
/// a power of two.
fn halving_doubling(p: usize, n: f64) -> Coeffs {
    let k = (usize::BITS - 1 - p.leading_zeros()) as f64; // floor(log2 p)
    let p2 = (1usize << k as u32) as f64;
    let share = (p2 - 1.0) / p2 * n;
    let fold = if p.is_power_of_two() { 0.0 } else { 1.0 };
    Coeffs {
        a: 2.0 * k + 2.0 * fold,
        b: 2.0 * share + 2.0 * fold * n,
        c: share + fold * n,
    }
}

/// The coefficients of `algo` running `coll` on `p` ranks with size column `n` bytes; `None` for an
/// algorithm collbench cannot model (a library's own choice), one whose time is no linear form
/// (`ring_pipelined`, priced from the ring's costs by [`super::pipeline`]) or one `coll` does not run.
pub fn coeffs(coll: Collective, algo: Algo, p: usize, n: f64) -> Option<Coeffs> {
    use Collective as C;
    if !Algo::available(coll).contains(&algo) {
        return None;
    }
    if p <= 1 {
        // One rank moves nothing between ranks.
        return Some(Coeffs { a: 0.0, b: 0.0, c: 0.0 });
    }
    let pf = p as f64;
    let share = (pf - 1.0) / pf * n;
    let lg = ceil_lg(p);
    Some(match (coll, algo) {
        (C::AllReduce, Algo::Ring) => Coeffs {
            a: 2.0 * (pf - 1.0),
            b: 2.0 * share,
            c: share,
        },
        (C::AllReduce | C::ReduceScatter, Algo::RecDoubling) => rec_doubling(p, n),
        (C::AllReduce, Algo::HalvingDoubling) => halving_doubling(p, n),
        // Reduce to the root, then broadcast from it, both binomial.
        (C::AllReduce, Algo::Tree) => Coeffs {
            a: 2.0 * lg,
            b: 2.0 * lg * n,
            c: lg * n,
        },
        (C::AllGather | C::AllToAll, Algo::Ring | Algo::Pairwise) => Coeffs {
            a: pf - 1.0,
            b: share,
            c: 0.0,
        },
        // Recursive doubling on 2^k ranks has Bruck's steps and bytes (and runs Bruck on other counts).
        (C::AllGather, Algo::Bruck | Algo::RecDoubling) => Coeffs {
            a: lg,
            b: share,
            c: 0.0,
        },
        (C::ReduceScatter, Algo::Ring) => Coeffs {
            a: pf - 1.0,
            b: share,
            c: share,
        },
        // A pipelined chain: p-1 hops, and (ignoring the pipeline's fill) the whole message once per link.
        (C::Broadcast, Algo::Ring) => Coeffs {
            a: pf - 1.0,
            b: n,
            c: 0.0,
        },
        (C::Reduce, Algo::Ring) => Coeffs {
            a: pf - 1.0,
            b: n,
            c: n,
        },
        // A binomial tree: the root sends (or receives) the whole message once per round.
        (C::Broadcast, Algo::Tree) => Coeffs {
            a: lg,
            b: lg * n,
            c: 0.0,
        },
        (C::Reduce, Algo::Tree) => Coeffs {
            a: lg,
            b: lg * n,
            c: lg * n,
        },
        (C::SendRecv, Algo::Pairwise) => Coeffs { a: 1.0, b: n, c: 0.0 },
        _ => return None,
    })
}

/// The algorithm named as results files name it (`ring`, `rec_doubling`, ...); `None` for `library` and
/// unknown names.
pub fn algo_named(name: &str) -> Option<Algo> {
    Algo::NATIVE.into_iter().find(|a| a.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(coll: Collective, algo: Algo, p: usize, n: f64) -> Coeffs {
        coeffs(coll, algo, p, n).unwrap()
    }

    #[test]
    fn ring_all_reduce_is_the_textbook_form() {
        for p in [2usize, 3, 4, 6, 8, 64, 1000] {
            let (pf, n) = (p as f64, 1e6);
            let k = c(Collective::AllReduce, Algo::Ring, p, n);
            assert_eq!(k.a, 2.0 * (pf - 1.0), "p={p}");
            assert!((k.b - 2.0 * (pf - 1.0) / pf * n).abs() < 1e-6, "p={p}");
            assert!((k.c - (pf - 1.0) / pf * n).abs() < 1e-6, "p={p}");
        }
    }

    #[test]
    fn recursive_doubling_is_lg_p_on_powers_of_two_and_folds_otherwise() {
        for (p, lg) in [(2usize, 1.0), (4, 2.0), (8, 3.0), (1024, 10.0)] {
            let n = 4096.0;
            let k = c(Collective::AllReduce, Algo::RecDoubling, p, n);
            assert_eq!((k.a, k.b, k.c), (lg, lg * n, lg * n), "p={p}");
        }
        // 6 ranks: 4 in the doubling (2 steps) + fold in and out (2 steps, one more reduction).
        let k = c(Collective::AllReduce, Algo::RecDoubling, 6, 10.0);
        assert_eq!((k.a, k.b, k.c), (4.0, 40.0, 30.0));
        let k = c(Collective::AllReduce, Algo::RecDoubling, 3, 10.0);
        assert_eq!((k.a, k.b, k.c), (3.0, 30.0, 20.0));
        // reduce_scatter by recursive doubling is the all-reduce of the whole buffer.
        assert_eq!(
            c(Collective::ReduceScatter, Algo::RecDoubling, 6, 10.0),
            c(Collective::AllReduce, Algo::RecDoubling, 6, 10.0)
        );
    }

    #[test]
    fn all_gather_ring_and_bruck_are_the_textbook_forms() {
        for (p, lg) in [
            (2usize, 1.0),
            (3, 2.0),
            (4, 2.0),
            (5, 3.0),
            (6, 3.0),
            (8, 3.0),
            (9, 4.0),
        ] {
            let (pf, n) = (p as f64, 3e5);
            let ring = c(Collective::AllGather, Algo::Ring, p, n);
            assert_eq!(ring.a, pf - 1.0);
            assert!((ring.b - (pf - 1.0) / pf * n).abs() < 1e-6);
            assert_eq!(ring.c, 0.0);
            let bruck = c(Collective::AllGather, Algo::Bruck, p, n);
            assert_eq!(bruck.a, lg, "p={p}");
            assert_eq!(bruck.b, ring.b);
            assert_eq!(bruck.c, 0.0);
        }
    }

    #[test]
    fn every_algorithm_a_collective_runs_has_a_form_and_one_rank_costs_nothing() {
        for coll in Collective::ALL {
            for &algo in Algo::available(coll) {
                if algo == Algo::RingPipelined {
                    // Not a linear form: its chunk is chosen by the costs (super::pipeline).
                    assert_eq!(coeffs(coll, algo, 5, 100.0), None);
                    continue;
                }
                let k = c(coll, algo, 5, 100.0);
                assert!(k.a > 0.0 && k.b > 0.0, "{coll} {algo}: {k:?}");
                assert_eq!(k.c > 0.0, coll.reduces(), "{coll} {algo}: gamma only where it reduces");
                assert_eq!(c(coll, algo, 1, 100.0).time(1.0, 1.0, 1.0), 0.0);
            }
        }
        assert_eq!(coeffs(Collective::AllGather, Algo::Tree, 4, 1.0), None);
        assert_eq!(coeffs(Collective::AllReduce, Algo::Library, 4, 1.0), None);
    }

    #[test]
    fn halving_doubling_moves_the_rings_bytes_in_logarithmic_steps() {
        // 4 ranks: 2 log2 4 = 4 steps, 2 x 3/4 of the message, 3/4 of it reduced: the ring's bytes.
        let k = c(Collective::AllReduce, Algo::HalvingDoubling, 4, 100.0);
        assert_eq!((k.a, k.b, k.c), (4.0, 150.0, 75.0));
        let ring = c(Collective::AllReduce, Algo::Ring, 4, 100.0);
        assert_eq!((k.b, k.c), (ring.b, ring.c));
        // 6 ranks: the 4-rank exchange plus a fold in and out carrying the whole message.
        let k = c(Collective::AllReduce, Algo::HalvingDoubling, 6, 100.0);
        assert_eq!((k.a, k.b, k.c), (6.0, 350.0, 175.0));
        assert_eq!(coeffs(Collective::ReduceScatter, Algo::HalvingDoubling, 4, 1.0), None);
    }

    #[test]
    fn algorithm_names_round_trip() {
        for a in Algo::NATIVE {
            assert_eq!(algo_named(a.name()), Some(a));
        }
        assert_eq!(algo_named("library"), None);
        assert_eq!(algo_named("nonsense"), None);
    }
}
