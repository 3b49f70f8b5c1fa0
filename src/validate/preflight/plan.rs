//! The fixed plan: connectivity at 8 B, latency at small sizes, bandwidth at large sizes where busbw has
//! plateaued, each a short sweep run through `run`'s machinery; and how long it should take.

use crate::collective::Collective;
use crate::error::{Error, Result};
use crate::options::{Options, SizeRange, Step, SweepOptions};
use crate::sizes::{format_size, parse_size};

/// The latency phase's largest size.
pub const LATENCY_MAX: u64 = 64 << 10;
/// The bandwidth phase measures at its largest size and at this fraction of it.
pub const BANDWIDTH_SPAN: u64 = 4;
/// The smallest `--bandwidth-bytes`: below it a point is not bandwidth-bound on any network.
pub const MIN_BANDWIDTH_BYTES: u64 = 1 << 20;
/// A small collective's cost before anything is measured, for the duration estimate (us).
const ASSUMED_LATENCY_US: f64 = 100.0;
/// busbw assumed for the duration estimate where the line rate is unknown (GB/s).
const ASSUMED_BUSBW: f64 = 1.0;

/// One sweep of the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    pub name: &'static str,
    pub collectives: Vec<Collective>,
    pub min: u64,
    pub max: u64,
    pub factor: u64,
    pub iters: u32,
    pub warmup: u32,
}

impl Phase {
    /// The requested sizes.
    pub fn sizes(&self) -> Vec<u64> {
        let mut v = vec![self.min];
        while let Some(&s) = v.last() {
            let next = s * self.factor;
            if next > self.max {
                break;
            }
            v.push(next);
        }
        v
    }
}

/// The whole plan: phases, each swept `repeat` times per path.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub phases: Vec<Phase>,
    pub repeat: u32,
}

impl Plan {
    /// The plan for the largest bandwidth size `bw_max` and `repeat` sweeps.
    pub fn new(bw_max: u64, repeat: u32) -> Plan {
        let both = vec![Collective::AllReduce, Collective::AllGather];
        Plan {
            phases: vec![
                Phase {
                    name: "connectivity",
                    collectives: both.clone(),
                    min: 8,
                    max: 8,
                    factor: 2,
                    iters: 1,
                    warmup: 0,
                },
                Phase {
                    name: "latency",
                    collectives: vec![Collective::AllReduce],
                    min: 8,
                    max: LATENCY_MAX,
                    factor: 2,
                    iters: 20,
                    warmup: 5,
                },
                Phase {
                    name: "bandwidth",
                    collectives: both,
                    min: bw_max / BANDWIDTH_SPAN,
                    max: bw_max,
                    factor: 2,
                    iters: 5,
                    warmup: 1,
                },
            ],
            repeat,
        }
    }

    /// The smallest size of the bandwidth phase.
    pub fn bandwidth_from(&self) -> u64 {
        self.phases[2].min
    }

    /// Seconds the plan should take on `paths` paths of `nranks` ranks at `busbw` GB/s (None: assumed).
    pub fn expected_s(&self, nranks: usize, paths: usize, busbw: Option<f64>) -> f64 {
        let bw = busbw.filter(|b| *b > 0.0).unwrap_or(ASSUMED_BUSBW);
        let mut us = 0.0;
        for ph in &self.phases {
            // Warm-up, timed and one checked call, out of place and in place.
            let calls = 2.0 * f64::from(ph.warmup + ph.iters + 1);
            for c in &ph.collectives {
                for s in ph.sizes() {
                    us += calls * (ASSUMED_LATENCY_US + s as f64 * c.bus_factor(nranks) / bw / 1e3);
                }
            }
        }
        us * f64::from(self.repeat) * paths as f64 / 1e6
    }

    /// Seconds the latency and bandwidth phases (not connectivity, which runs once before the plan is
    /// sized) should take on `paths` paths of `nranks` ranks at `busbw` GB/s and `call_us` per small call.
    pub fn measure_s(&self, nranks: usize, paths: usize, busbw: f64, call_us: f64) -> f64 {
        let bw = if busbw > 0.0 { busbw } else { ASSUMED_BUSBW };
        let mut us = 0.0;
        for ph in self.phases.iter().filter(|p| p.name != "connectivity") {
            let calls = 2.0 * f64::from(ph.warmup + ph.iters + 1);
            for c in &ph.collectives {
                for s in ph.sizes() {
                    us += calls * (call_us + s as f64 * c.bus_factor(nranks) / bw / 1e3);
                }
            }
        }
        us * f64::from(self.repeat) * paths as f64 / 1e6
    }

    /// The plan as lines for people; `busbw` as for [`Plan::expected_s`].
    pub fn describe(&self, nranks: usize, paths: &[String], busbw: Option<f64>) -> Vec<String> {
        let mut v = vec![format!(
            "Preflight plan: {} rank(s), path(s) {}, {} sweep(s) of each phase, interleaved across paths",
            nranks,
            paths.join(", "),
            self.repeat
        )];
        for ph in &self.phases {
            let coll: Vec<&str> = ph.collectives.iter().map(|c| c.name()).collect();
            let sizes = if ph.min == ph.max {
                format_size(ph.min)
            } else {
                format!("{} .. {} (x{})", format_size(ph.min), format_size(ph.max), ph.factor)
            };
            v.push(format!(
                "  {:<12} {:<21} {:<28} {} iters + {} warm-up",
                ph.name,
                coll.join(","),
                sizes,
                ph.iters,
                ph.warmup
            ));
        }
        v.push(format!(
            "  expected duration: about {:.0} s ({})",
            self.expected_s(nranks, paths.len(), busbw).ceil(),
            match busbw {
                Some(b) => format!("at {b:.2} GB/s busbw, 70% of the line rate"),
                None => format!("assuming {ASSUMED_BUSBW} GB/s busbw: the line rate is unknown"),
            }
        ));
        v
    }
}

/// `base` sweeping `colls` from `min` to `max` bytes by doubling, each point checked once, in one sweep.
fn with_sweep(base: &Options, colls: &[Collective], min: u64, max: u64, iters: u32, warmup: u32) -> Options {
    Options {
        sweep: SweepOptions {
            sizes: SizeRange {
                min,
                max,
                step: Step::Factor(2),
            },
            collectives: colls.to_vec(),
            iters,
            warmup,
            check_iters: 1,
            repeat: 1,
            ..SweepOptions::default()
        },
        ..base.clone()
    }
}

/// The options of one phase.
pub fn phase_options(base: &Options, ph: &Phase) -> Options {
    with_sweep(base, &ph.collectives, ph.min, ph.max, ph.iters, ph.warmup)
}

/// Options covering every phase (every collective, 8 B up to the largest size): what the session connects
/// for and what memory is checked against.
pub fn union_options(base: &Options, plan: &Plan) -> Options {
    let max = plan.phases.iter().map(|p| p.max).max().unwrap_or(8);
    with_sweep(base, &[Collective::AllReduce, Collective::AllGather], 8, max, 1, 0)
}

/// `--bandwidth-bytes` as bytes: at least [`MIN_BANDWIDTH_BYTES`].
pub fn bandwidth_bytes(text: &str) -> Result<u64> {
    let b = parse_size(text).map_err(|e| Error::usage("--bandwidth-bytes", e))?;
    if b < MIN_BANDWIDTH_BYTES {
        return Err(Error::usage(
            "--bandwidth-bytes",
            format!(
                "{} is too small to measure bandwidth; give {} or more",
                format_size(b),
                format_size(MIN_BANDWIDTH_BYTES)
            ),
        ));
    }
    Ok(b)
}

/// The largest bandwidth size, from `want` down by halves, whose buffers for `local_ranks` ranks fit in
/// `available` bytes; `None` when not even [`MIN_BANDWIDTH_BYTES`] fits.
pub fn fit_memory(base: &Options, want: u64, repeat: u32, local_ranks: usize, available: u64) -> Option<u64> {
    let mut b = want;
    while b >= MIN_BANDWIDTH_BYTES {
        let o = union_options(base, &Plan::new(b, repeat));
        if o.check_memory(local_ranks, &crate::memory::available::Available::host(available))
            .is_ok()
        {
            return Some(b);
        }
        b /= 2;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_cover_connectivity_latency_and_the_bandwidth_plateau() {
        let p = Plan::new(64 << 20, 3);
        assert_eq!(p.phases[0].sizes(), [8]);
        let lat = p.phases[1].sizes();
        assert_eq!((lat[0], *lat.last().unwrap(), lat.len()), (8, 64 << 10, 14));
        assert_eq!(p.phases[2].sizes(), [16 << 20, 32 << 20, 64 << 20]);
        assert_eq!(p.bandwidth_from(), 16 << 20);
        // Faster links make a shorter plan; more paths a longer one.
        let slow = p.expected_s(4, 1, Some(0.1));
        assert!(slow > p.expected_s(4, 1, Some(10.0)));
        assert!((p.expected_s(4, 2, Some(0.1)) - 2.0 * slow).abs() < 1e-9);
        let d = p.describe(4, &["tcp@lo".into()], None);
        assert!(
            d[0].contains("tcp@lo") && d.last().unwrap().contains("unknown"),
            "{d:?}"
        );
    }

    #[test]
    fn bandwidth_bytes_has_a_floor() {
        assert_eq!(bandwidth_bytes("64M").unwrap(), 64 << 20);
        let e = bandwidth_bytes("4K").unwrap_err();
        assert!(e.to_string().starts_with("--bandwidth-bytes:"), "{e}");
    }
}
