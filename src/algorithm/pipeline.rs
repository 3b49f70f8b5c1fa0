//! The chunk of `ring_pipelined`: the ring whose messages are cut so each rank's link stays busy.
//!
//! The plain ring cuts a step's segment into `--chunk` pieces (512 KiB): below that a segment goes whole, so
//! each step waits for the previous one to arrive entirely (and be reduced) before it sends. At medium sizes
//! on many ranks (1 MiB over 8 ranks is 128 KiB a segment) that store-and-forward is most of the time.
//! `ring_pipelined` picks its chunk per call from the model of this path: a pipeline of `s` steps and `k`
//! chunks takes `(s + k - 1)` chunk times (alpha + chunk x (beta + gamma)) but never less than the bytes
//! every step puts on this rank's link; the chunk is the largest that reaches that floor, since each further
//! chunk costs another message's overhead. Without a model it cuts each segment into
//! [`CHUNKS_WITHOUT_MODEL`] pieces.

use super::options::MIN_CHUNK;
use crate::collective::Collective;

/// The ring's fitted costs on this path, in microseconds: per message step, per byte, per byte reduced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RingCost {
    pub alpha_us: f64,
    pub beta_us_per_byte: f64,
    pub gamma_us_per_byte: f64,
}

/// Chunks per ring step without a model: one per receive the ring posts ahead ([`super::Tuning::default`]).
pub const CHUNKS_WITHOUT_MODEL: usize = 4;

/// Most chunks per step considered: beyond this the per-message overhead outweighs any pipelining.
const MOST_CHUNKS: usize = 1024;

/// The ring's shape for `coll` on `p` ranks at `n` bytes (the results' size column): steps, steps that
/// reduce, and the segment each step moves, in bytes. `None` where `ring_pipelined` does not run `coll`.
fn shape(coll: Collective, p: usize, n: f64) -> Option<(f64, f64, f64)> {
    let (pf, seg) = (p as f64, n / p as f64);
    match coll {
        Collective::AllReduce => Some((2.0 * (pf - 1.0), pf - 1.0, seg)),
        Collective::AllGather => Some((pf - 1.0, 0.0, seg)),
        _ => None,
    }
}

/// Predicted microseconds of the ring's steps with the segment cut into `k` chunks (no per-call cost).
fn steps_us(cost: &RingCost, steps: f64, reducing: f64, seg: f64, k: usize) -> f64 {
    let c = seg / k as f64;
    // Gamma averaged over the steps: reduce-scatter's steps reduce, all-gather's do not.
    let gamma = cost.gamma_us_per_byte * reducing / steps;
    let chain = (steps + k as f64 - 1.0) * (cost.alpha_us + c * (cost.beta_us_per_byte + gamma));
    // Every step's bytes cross this rank's link (and are reduced) one after another, however they are cut.
    let floor = (steps * seg * cost.beta_us_per_byte).max(reducing * seg * cost.gamma_us_per_byte);
    chain.max(floor)
}

/// The number of chunks per step, at least `least`: the first that minimises [`steps_us`].
fn best_chunks(cost: &RingCost, steps: f64, reducing: f64, seg: f64, least: usize) -> usize {
    let most = ((seg / MIN_CHUNK as f64) as usize).clamp(least, least.max(MOST_CHUNKS));
    let mut best = (least, steps_us(cost, steps, reducing, seg, least));
    for k in least + 1..=most {
        let t = steps_us(cost, steps, reducing, seg, k);
        if t < best.1 {
            best = (k, t);
        }
    }
    best.0
}

/// The chunk `ring_pipelined` uses for `coll` on `p` ranks at `n` bytes: never larger than `max_chunk` (the
/// plain ring's, `--chunk`), never smaller than `--chunk`'s least ([`MIN_CHUNK`]) unless the segment is, a
/// multiple of 16 bytes so it holds whole elements of every dtype.
pub fn chunk_bytes(coll: Collective, p: usize, n: u64, max_chunk: usize, cost: Option<&RingCost>) -> usize {
    let Some((steps, reducing, seg)) = shape(coll, p.max(2), n as f64) else {
        return max_chunk;
    };
    let least = (seg / max_chunk as f64).ceil().max(1.0) as usize;
    let k = match cost {
        Some(c) => best_chunks(c, steps, reducing, seg, least),
        None => least.max(CHUNKS_WITHOUT_MODEL),
    };
    let chunk = (seg / k as f64).ceil() as usize;
    chunk.max(MIN_CHUNK as usize).next_multiple_of(16).min(max_chunk)
}

/// The predicted time (microseconds, without the per-call cost) of `ring_pipelined` running `coll` on `p`
/// ranks at `n` bytes with the ring's costs `cost` and the chunk [`chunk_bytes`] picks; `None` where it does
/// not run `coll`.
pub fn predict_us(coll: Collective, p: usize, n: u64, max_chunk: usize, cost: &RingCost) -> Option<f64> {
    if p <= 1 {
        return Some(0.0);
    }
    let (steps, reducing, seg) = shape(coll, p, n as f64)?;
    let chunk = chunk_bytes(coll, p, n, max_chunk, Some(cost)) as f64;
    let k = (seg / chunk).ceil().max(1.0) as usize;
    Some(steps_us(cost, steps, reducing, seg, k))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 Gbit/s (0.008 us a byte), 50 us a step, reduction 10x faster than the wire.
    const GIGABIT: RingCost = RingCost {
        alpha_us: 50.0,
        beta_us_per_byte: 0.008,
        gamma_us_per_byte: 0.0008,
    };
    const PLAIN: usize = 512 << 10;

    #[test]
    fn one_chunk_is_the_plain_rings_textbook_time() {
        // Store and forward: 2(p-1) steps of alpha + the segment's bytes, half of them reduced.
        let (p, n) = (8usize, (1u64 << 20) as f64);
        let seg = n / p as f64;
        let t = steps_us(&GIGABIT, 14.0, 7.0, seg, 1);
        let textbook = 14.0 * (50.0 + seg * 0.008) + 7.0 * seg * 0.0008;
        assert!((t - textbook).abs() < 1e-6, "{t} vs {textbook}");
    }

    #[test]
    fn medium_messages_on_many_ranks_are_cut_until_the_link_is_the_limit() {
        // 1 MiB over 8 ranks: 128 KiB segments, which the plain ring sends whole.
        let c = chunk_bytes(Collective::AllReduce, 8, 1 << 20, PLAIN, Some(&GIGABIT));
        assert!(c < 128 << 10, "{c}");
        let (steps, seg) = (14.0, (128 << 10) as f64);
        let k = (seg / c as f64).ceil() as usize;
        // The link-bound floor reached, and with the fewest chunks that reach it.
        let floor = steps * seg * GIGABIT.beta_us_per_byte;
        assert_eq!(steps_us(&GIGABIT, steps, 7.0, seg, k), floor);
        assert!(steps_us(&GIGABIT, steps, 7.0, seg, k - 1) > floor);
        let plain = steps_us(&GIGABIT, steps, 7.0, seg, 1);
        assert!(floor < plain, "{floor} vs {plain}");
        assert_eq!(c % 16, 0);
    }

    #[test]
    fn the_chunk_never_exceeds_the_plain_rings_nor_falls_below_the_least() {
        for coll in [Collective::AllReduce, Collective::AllGather] {
            for p in [2usize, 3, 8, 16, 64] {
                for n in [8u64, 4096, 64 << 10, 1 << 20, 16 << 20, 1 << 30] {
                    for cost in [Some(&GIGABIT), None] {
                        let c = chunk_bytes(coll, p, n, PLAIN, cost);
                        assert!(c <= PLAIN && c >= MIN_CHUNK as usize, "{coll} {p} {n}: {c}");
                        assert_eq!(c % 16, 0);
                    }
                }
            }
        }
        // Without a model: four chunks a step, the plain ring's when its own are smaller.
        assert_eq!(chunk_bytes(Collective::AllReduce, 4, 4 << 20, PLAIN, None), 256 << 10);
        assert_eq!(chunk_bytes(Collective::AllReduce, 2, 64 << 20, PLAIN, None), PLAIN);
        assert_eq!(chunk_bytes(Collective::Broadcast, 4, 4 << 20, PLAIN, None), PLAIN);
    }

    #[test]
    fn where_latency_rules_it_keeps_few_chunks() {
        // 100 ms a step, a fast wire: every further chunk costs another step's latency.
        let slow = RingCost {
            alpha_us: 100_000.0,
            ..GIGABIT
        };
        let c = chunk_bytes(Collective::AllGather, 8, 1 << 20, PLAIN, Some(&slow));
        assert_eq!(c, (1 << 20) / 8);
        let t = predict_us(Collective::AllGather, 8, 1 << 20, PLAIN, &slow).unwrap();
        assert!((t - 7.0 * (100_000.0 + 131072.0 * 0.008)).abs() < 1e-6, "{t}");
        assert_eq!(predict_us(Collective::Reduce, 8, 1 << 20, PLAIN, &slow), None);
        assert_eq!(predict_us(Collective::AllReduce, 1, 1 << 20, PLAIN, &slow), Some(0.0));
    }
}
