//! Axis ranges, tick positions and tick labels. Log axes are drawn as linear axes over the exponent
//! (log2 of the size, log10 of the time), so tick positions are chosen here rather than left to the
//! plotting library's decimal heuristics.

use crate::sizes::format_size;

/// Label steps between size ticks, in powers of two; each divides 10 so KiB, MiB and GiB always get one.
const SIZE_STEPS: [i32; 4] = [1, 2, 5, 10];

/// Widest exponent range an axis spans: log10 and log2 of any positive finite f64 lie within it. Tick
/// positions are counted as i32 over it, so a caller's infinite or absurd range cannot make billions of
/// ticks (an overflowed exp() once asked for 2^31 decades).
const MAX_EXPONENT: f64 = 1100.0;

/// `lo..hi` made finite and within +-[`MAX_EXPONENT`]; `None` when there is nothing to tick.
fn bounded(lo: f64, hi: f64) -> Option<(f64, f64)> {
    let clamp = |v: f64| v.clamp(-MAX_EXPONENT, MAX_EXPONENT);
    (lo.is_finite() && hi.is_finite() && lo <= hi).then(|| (clamp(lo), clamp(hi)))
}

/// Most decades the time axis labels one by one; a wider range is labelled every few decades, without
/// the light grid.
const MAX_DECADES: i32 = 24;

/// A size tick label without spaces: `8B`, `512B`, `1KiB`, `64KiB`, `1MiB`, `64MiB`.
pub fn size_label(bytes: u64) -> String {
    format_size(bytes).replace(' ', "")
}

/// The label for a position on the log2 size axis.
pub fn size_label_at(log2_bytes: f64) -> String {
    size_label(2f64.powf(log2_bytes).round() as u64)
}

/// The log2 range the x axis spans for sizes from `min` to `max` bytes, padded so end points do not sit
/// on the frame.
pub fn size_range(min: u64, max: u64) -> (f64, f64) {
    let lo = (min.max(1) as f64).log2();
    let hi = (max.max(min).max(1) as f64).log2();
    let pad = if hi - lo < 1.0 { 1.0 } else { 0.4 };
    (lo - pad, hi + pad)
}

/// Labelled positions (log2 of bytes) in `lo..=hi`: whole powers of two, every `step`-th one, with the
/// smallest step from `SIZE_STEPS` that keeps the count at or under `max_labels`.
pub fn size_ticks(lo: f64, hi: f64, max_labels: usize) -> Vec<f64> {
    let Some((lo, hi)) = bounded(lo, hi) else {
        return Vec::new();
    };
    let (first, last) = (lo.ceil() as i32, hi.floor() as i32);
    let max_labels = max_labels.max(1);
    for step in SIZE_STEPS.into_iter().chain(std::iter::once(20)) {
        let ticks: Vec<f64> = (first..=last)
            .filter(|e| e.rem_euclid(step) == 0)
            .map(f64::from)
            .collect();
        if ticks.len() <= max_labels {
            return ticks;
        }
    }
    // Ranges wider than 20 x max_labels powers of two do not occur for byte sizes in a u64.
    vec![f64::from(first), f64::from(last)]
}

/// Every whole power of two in `lo..=hi`: the light grid lines of the size axis.
pub fn size_grid(lo: f64, hi: f64) -> Vec<f64> {
    let Some((lo, hi)) = bounded(lo, hi) else {
        return Vec::new();
    };
    (lo.ceil() as i32..=hi.floor() as i32).map(f64::from).collect()
}

/// The log10 range the time axis spans for times from `min` to `max` microseconds, padded by a little of a
/// decade at each end; always finite. A time that is not positive and finite (none is drawn) stands in for
/// the other end, or 1 us for both.
pub fn time_range(min: f64, max: f64) -> (f64, f64) {
    let usable = |v: f64| v.is_finite() && v > 0.0;
    let (min, max) = match (usable(min), usable(max)) {
        (true, true) => (min, max.max(min)),
        (true, false) => (min, min),
        (false, true) => (max, max),
        (false, false) => (1.0, 1.0),
    };
    let (lo, hi) = (min.log10(), max.log10());
    let pad = ((hi - lo) * 0.05).max(0.1);
    (lo - pad, hi + pad)
}

/// Labelled and grid positions (log10 of microseconds) for the time axis in `lo..=hi`: every decade,
/// and 2x and 5x each decade when fewer than four decades are in range. Grid lines mark 1x..9x. Over more
/// than `MAX_DECADES` decades, every few decades are labelled and there is no light grid.
pub fn time_ticks(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
    let Some((lo, hi)) = bounded(lo, hi) else {
        return (Vec::new(), Vec::new());
    };
    let (first, last) = (lo.floor() as i32, hi.ceil() as i32);
    let step = (last - first + MAX_DECADES - 1) / MAX_DECADES;
    if step > 1 {
        let bold = (first..=last)
            .filter(|d| d.rem_euclid(step) == 0)
            .map(f64::from)
            .filter(|v| *v >= lo && *v <= hi)
            .collect();
        return (bold, Vec::new());
    }
    let decades: Vec<i32> = (first..=last).collect();
    let within = |v: &f64| *v >= lo && *v <= hi;
    let at = |mults: &[f64]| -> Vec<f64> {
        decades
            .iter()
            .flat_map(|d| mults.iter().map(move |m| f64::from(*d) + m.log10()))
            .filter(within)
            .collect()
    };
    let mut bold = at(&[1.0]);
    if bold.len() < 4 {
        bold = at(&[1.0, 2.0, 5.0]);
    }
    let light = at(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    (bold, light)
}

/// A time tick label in microseconds: `0.5`, `2`, `100`, `20000`.
pub fn time_label_at(log10_us: f64) -> String {
    let us = 10f64.powf(log10_us);
    if us >= 1.0 {
        format!("{:.0}", us)
    } else {
        // Two significant digits are enough for tick values (1, 2 or 5 times a power of ten).
        let digits = (-us.log10().floor()) as usize + 1;
        let s = format!("{us:.digits$}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A bandwidth or rate for the legend: three significant digits, `12.5`, `0.962`, `118`.
pub fn gbs_label(gbs: f64) -> String {
    if gbs >= 100.0 {
        format!("{gbs:.0}")
    } else if gbs >= 10.0 {
        format!("{gbs:.1}")
    } else if gbs >= 1.0 {
        format!("{gbs:.2}")
    } else {
        format!("{gbs:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_labels_read_like_the_table() {
        let labels: Vec<String> = [8u64, 512, 1024, 64 << 10, 1 << 20, 64 << 20, 1 << 30]
            .into_iter()
            .map(size_label)
            .collect();
        assert_eq!(labels, ["8B", "512B", "1KiB", "64KiB", "1MiB", "64MiB", "1GiB"]);
        assert_eq!(size_label_at(10.0), "1KiB");
        assert_eq!(size_label_at(26.0), "64MiB");
        assert_eq!(size_label(1536), "1.5KiB");
    }

    #[test]
    fn size_ticks_fit_the_budget_and_always_label_whole_units() {
        // 8 B .. 64 MiB is 24 powers of two: every other one fits in 12 labels.
        let t = size_ticks(3.0, 26.0, 12);
        assert_eq!(t.len(), 12);
        assert_eq!(t.first(), Some(&4.0));
        assert_eq!(t.last(), Some(&26.0));
        for unit in [10.0, 20.0] {
            assert!(t.contains(&unit), "{unit} missing from {t:?}");
        }
        // A short range labels every power of two, and padding outside whole powers adds none.
        assert_eq!(size_ticks(2.6, 6.4, 12), [3.0, 4.0, 5.0, 6.0]);
        // A tight budget steps by 5 then 10, still through the units.
        assert_eq!(size_ticks(0.0, 40.0, 5), [0.0, 10.0, 20.0, 30.0, 40.0]);
        assert_eq!(size_grid(2.6, 6.4), [3.0, 4.0, 5.0, 6.0]);
    }

    #[test]
    fn size_range_pads_and_widens_a_single_size() {
        let (lo, hi) = size_range(8, 1 << 20);
        assert!((lo - 2.6).abs() < 1e-9 && (hi - 20.4).abs() < 1e-9, "{lo} {hi}");
        assert_eq!(size_range(1024, 1024), (9.0, 11.0));
        // Size 0 would be -inf on a log axis; it is treated as 1 byte.
        assert!(size_range(0, 8).0.is_finite());
    }

    #[test]
    fn time_ticks_use_decades_or_finer_steps_on_short_ranges() {
        let (bold, light) = time_ticks(0.5, 4.5);
        assert_eq!(bold, [1.0, 2.0, 3.0, 4.0]);
        let (bold, _) = time_ticks(0.9, 3.1);
        assert_eq!(bold.len(), 7, "10, 20, 50 .. 1000: {bold:?}");
        // 4x..9x of the first decade, all of the next three, 1x..3x of the last.
        assert_eq!(light.len(), 6 + 27 + 3);
        let (bold, _) = time_ticks(1.2, 2.1);
        let labels: Vec<String> = bold.iter().map(|v| time_label_at(*v)).collect();
        assert_eq!(labels, ["20", "50", "100"]);
        let (lo, hi) = time_range(10.0, 1000.0);
        assert!(lo < 1.0 && hi > 3.0);
    }

    #[test]
    fn every_axis_range_is_finite_and_its_ticks_few_whatever_it_is_given() {
        // An interval of 1e6 us at 20 us once overflowed exp() to infinity: 2^31 decades of ticks (20 GB).
        let (lo, hi) = time_range(20.0, f64::INFINITY);
        assert!(lo.is_finite() && hi.is_finite() && hi - lo < 1.0, "{lo} {hi}");
        for (lo, hi) in [
            (0.0, f64::INFINITY),
            (f64::NEG_INFINITY, 2.0),
            (f64::NAN, 1.0),
            (3.0, 1.0),
        ] {
            assert_eq!(time_ticks(lo, hi), (vec![], vec![]), "{lo} {hi}");
            assert!(
                size_ticks(lo, hi, 12).is_empty() && size_grid(lo, hi).is_empty(),
                "{lo} {hi}"
            );
        }
        // The widest range positive f64 times span: a few labels, no light grid.
        let (lo, hi) = time_range(f64::MIN_POSITIVE, f64::MAX);
        let (bold, light) = time_ticks(lo, hi);
        assert!(
            bold.len() <= MAX_DECADES as usize + 1 && bold.len() > 2 && light.is_empty(),
            "{bold:?}"
        );
        let (bold, light) = time_ticks(-1e300, 1e300);
        assert!(
            bold.len() <= MAX_DECADES as usize + 1 && light.is_empty(),
            "{}",
            bold.len()
        );
        assert!(size_grid(-1e300, 1e300).len() <= 2 * MAX_EXPONENT as usize + 1);
        assert_eq!(time_range(f64::NAN, -1.0), time_range(1.0, 1.0));
    }

    #[test]
    fn time_labels_are_plain_microseconds() {
        assert_eq!(time_label_at(0.0), "1");
        assert_eq!(time_label_at(2.0), "100");
        assert_eq!(time_label_at(4.0), "10000");
        assert_eq!(time_label_at(5f64.log10() - 1.0), "0.5");
        assert_eq!(time_label_at(2f64.log10() - 2.0), "0.02");
        assert_eq!(gbs_label(12.5), "12.5");
        assert_eq!(gbs_label(0.9621), "0.962");
        assert_eq!(gbs_label(117.6), "118");
    }
}
