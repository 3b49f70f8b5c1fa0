//! Axis ranges, tick positions and tick labels. Log axes are drawn as linear axes over the exponent
//! (log2 of the size, log10 of the time), so tick positions are chosen here rather than left to the
//! plotting library's decimal heuristics.

use crate::sizes::format_size;

/// Label steps between size ticks, in powers of two; each divides 10 so KiB, MiB and GiB always get one.
const SIZE_STEPS: [i32; 4] = [1, 2, 5, 10];

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
    (lo.ceil() as i32..=hi.floor() as i32).map(f64::from).collect()
}

/// The log10 range the time axis spans for times from `min` to `max` microseconds (both positive),
/// padded by a little of a decade at each end.
pub fn time_range(min: f64, max: f64) -> (f64, f64) {
    let (lo, hi) = (min.log10(), max.max(min).log10());
    let pad = ((hi - lo) * 0.05).max(0.1);
    (lo - pad, hi + pad)
}

/// Labelled and grid positions (log10 of microseconds) for the time axis in `lo..=hi`: every decade,
/// and 2x and 5x each decade when fewer than four decades are in range. Grid lines mark 1x..9x.
pub fn time_ticks(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
    let decades: Vec<i32> = (lo.floor() as i32..=hi.ceil() as i32).collect();
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
