//! A point far off its neighbours' curve: its time against the log-log interpolation of the points on either
//! side (time against size is a straight line in log-log within the latency-bound sizes and within the
//! bandwidth-bound ones, and bends smoothly at the knee between them). A point is off the curve when it is
//! both more than [`FACTOR`] times slower than that line and slower than it by more than its own 95%
//! interval: a 5 s loss spell over one point, not a noisy one. Only slow points are flagged; the first and
//! last point of a sweep have one neighbour and are not judged.

use super::record::Record;

/// How many times slower than its neighbours' curve a point must be to be flagged.
pub const FACTOR: f64 = 3.0;

/// One sweep point as the rule sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub size: u64,
    pub time_us: f64,
    /// Half-width of the 95% interval of `time_us`, from the point's iterations.
    pub ci95_us: f64,
}

/// For each point of one sweep (sizes ascending), how many times slower it is than its neighbours' curve,
/// where it is off it; `None` for the others.
pub fn judge(points: &[Point]) -> Vec<Option<f64>> {
    let mut out = vec![None; points.len()];
    for i in 1..points.len().saturating_sub(1) {
        let (a, p, b) = (points[i - 1], points[i], points[i + 1]);
        let Some(expected) = interpolate(a, b, p.size) else {
            continue;
        };
        let factor = p.time_us / expected;
        if factor > FACTOR && p.time_us - expected > p.ci95_us {
            out[i] = Some(factor);
        }
    }
    out
}

/// The time at `size` on the straight log-log line through `a` and `b`; `None` where the logs are not
/// defined (a size or time of 0).
fn interpolate(a: Point, b: Point, size: u64) -> Option<f64> {
    let ok = |x: f64| x.is_finite() && x > 0.0;
    let (sa, sb, s) = (a.size as f64, b.size as f64, size as f64);
    if !(ok(sa) && ok(sb) && ok(s) && ok(a.time_us) && ok(b.time_us)) || sa == sb {
        return None;
    }
    let w = (s.ln() - sa.ln()) / (sb.ln() - sa.ln());
    Some((a.time_us.ln() + w * (b.time_us.ln() - a.time_us.ln())).exp())
}

/// What makes records points of one sweep: the same path, collective, type, op, root, ranks and repeat.
fn sweep_key(r: &Record) -> (&str, &str, &str, &str, Option<usize>, usize, u32) {
    (
        r.path.as_str(),
        r.collective.name(),
        r.dtype.name(),
        r.op.map_or("none", |o| o.name()),
        r.root,
        r.nranks,
        r.repeat,
    )
}

/// For each of `records`, how many times slower than its sweep neighbours' curve it is (the worse of its
/// two placements), where it is off it. O(n log n): the JSON file is rewritten after every point.
pub fn of_records(records: &[Record]) -> Vec<Option<f64>> {
    let mut out = vec![None; records.len()];
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by(|&a, &b| (sweep_key(&records[a]), records[a].size).cmp(&(sweep_key(&records[b]), records[b].size)));
    for sweep in order.chunk_by(|&a, &b| sweep_key(&records[a]) == sweep_key(&records[b])) {
        // A size met twice in one sweep counts once.
        let mut sweep = sweep.to_vec();
        sweep.dedup_by_key(|j| records[*j].size);
        for in_place in [false, true] {
            let pts: Vec<Point> = sweep
                .iter()
                .map(|&j| {
                    let r = &records[j];
                    let t = if in_place { &r.in_place } else { &r.out_of_place };
                    Point {
                        size: r.size,
                        time_us: t.time_us,
                        ci95_us: t.ci95_us,
                    }
                })
                .collect();
            for (&j, f) in sweep.iter().zip(judge(&pts)) {
                if let Some(f) = f {
                    out[j] = Some(out[j].map_or(f, |g: f64| g.max(f)));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clean sweep 8 B .. 64 MiB: latency 20 us flat below the knee, then 10 GB/s.
    fn clean(noise: &[f64]) -> Vec<Point> {
        (3..=26)
            .enumerate()
            .map(|(i, e)| {
                let size = 1u64 << e;
                let t = (20.0 + size as f64 / 10e3) * (1.0 + noise[i % noise.len()]);
                Point {
                    size,
                    time_us: t,
                    ci95_us: t * 0.02,
                }
            })
            .collect()
    }

    #[test]
    fn clean_curves_never_flag() {
        // Flat latency-bound sizes, the knee, the bandwidth-bound line, with and without 30% jitter.
        for noise in [&[0.0][..], &[0.3, -0.2, 0.1, -0.25, 0.0], &[-0.3, 0.3]] {
            let pts = clean(noise);
            assert!(judge(&pts).iter().all(Option::is_none), "{noise:?}");
        }
        // A latency floor that jumps by a protocol switch (eager to rendezvous) at one size: a step, not a
        // spike, is not off the curve either.
        let mut pts = clean(&[0.0]);
        for p in pts.iter_mut().skip(10) {
            p.time_us *= 2.5;
        }
        assert!(judge(&pts).iter().all(Option::is_none));
        // Sizes of 0 and one point alone are not judged.
        let zero = [Point {
            size: 0,
            time_us: 0.1,
            ci95_us: 0.0,
        }; 3];
        assert!(judge(&zero).iter().all(Option::is_none));
        assert_eq!(judge(&pts[..1]), [None]);
        assert!(judge(&[]).is_empty());
    }

    #[test]
    fn a_point_ten_times_slower_than_its_neighbours_is_flagged_alone() {
        for at in [1, 5, 12, 20] {
            let mut pts = clean(&[0.0]);
            pts[at].time_us *= 10.0;
            let flags = judge(&pts);
            assert!((flags[at].unwrap() - 10.0).abs() < 0.5, "{at}: {flags:?}");
            assert_eq!(flags.iter().filter(|f| f.is_some()).count(), 1, "{at}: {flags:?}");
        }
        // Slower than the factor but inside its own noise: not flagged.
        let mut pts = clean(&[0.0]);
        pts[12].time_us *= 4.0;
        pts[12].ci95_us = pts[12].time_us;
        assert!(judge(&pts)[12].is_none());
        // Within the factor: not flagged.
        let mut pts = clean(&[0.0]);
        pts[12].time_us *= 2.5;
        assert!(judge(&pts)[12].is_none());
        // Faster than the curve: not flagged.
        let mut pts = clean(&[0.0]);
        pts[12].time_us /= 10.0;
        assert!(judge(&pts)[12].is_none());
    }
}

#[cfg(test)]
mod written {
    use crate::results::document::{lift, Entry};

    #[test]
    fn the_flag_is_written_in_the_entrys_collbench_object_and_read_back() {
        let e = Entry {
            size: Some(32768),
            off_curve: Some(10.5),
            ..Entry::default()
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["collbench"]["off_curve"], 10.5, "{v}");
        assert!(v.get("off_curve").is_none(), "{v}");
        let back: Entry = serde_json::from_value(lift(&v)).unwrap();
        assert_eq!(back.off_curve, Some(10.5));
        // A point on the curve writes nothing, and reads back as none.
        let v = serde_json::to_value(Entry::default()).unwrap();
        assert!(v["collbench"].get("off_curve").is_none(), "{v}");
        let back: Entry = serde_json::from_value(lift(&v)).unwrap();
        assert_eq!(back.off_curve, None);
    }
}

#[cfg(test)]
mod records {
    use super::of_records;
    use crate::collective::Collective;
    use crate::results::testutil::record;

    #[test]
    fn sweeps_are_judged_apart_whatever_their_order() {
        // Two paths taking turns at every point (--interleave point); tcp@a's 4 KiB point is 10x slow.
        let mut recs = Vec::new();
        for e in 3..=16 {
            let size = 1u64 << e;
            let t = 20.0 + size as f64 / 1e3;
            for path in ["tcp@a", "tcp@b"] {
                let slow = if path == "tcp@a" && size == 4096 { 10.0 } else { 1.0 };
                let mut r = record(Collective::AllReduce, size, t * slow, 1.0, Some(0));
                r.in_place = r.out_of_place.clone();
                r.path = path.into();
                recs.push(r);
            }
        }
        let flags = of_records(&recs);
        let flagged: Vec<(&str, u64)> = recs
            .iter()
            .zip(&flags)
            .filter(|(_, f)| f.is_some())
            .map(|(r, _)| (r.path.as_str(), r.size))
            .collect();
        assert_eq!(flagged, [("tcp@a", 4096)], "{flags:?}");
    }
}
