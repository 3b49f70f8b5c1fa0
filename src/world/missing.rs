//! The ranks of a job that have not joined, said in a line whatever the job's size: runs of consecutive ranks
//! as ranges, the first few runs, then how many more. Computed from the ranks that joined, so a job announced
//! with a million ranks costs nothing until they come.

use std::collections::BTreeMap;

/// Runs of missing ranks named before the rest are only counted.
const SHOWN_RUNS: usize = 8;

/// The ranks below `size` that are not keys of `joined`, e.g. `1, 2, 5-99 and 3 more ranks`; empty when none.
pub(crate) fn missing_ranks<V>(size: usize, joined: &BTreeMap<usize, V>) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut next = 0;
    for &r in joined.keys().filter(|&&r| r < size) {
        if r > next {
            runs.push((next, r - 1));
        }
        next = r + 1;
    }
    if next < size {
        runs.push((next, size - 1));
    }
    let mut parts: Vec<String> = Vec::new();
    for &(a, b) in runs.iter().take(SHOWN_RUNS) {
        match b - a {
            0 => parts.push(a.to_string()),
            1 => parts.extend([a.to_string(), b.to_string()]),
            _ => parts.push(format!("{a}-{b}")),
        }
    }
    let rest: usize = runs.iter().skip(SHOWN_RUNS).map(|(a, b)| b - a + 1).sum();
    let mut out = parts.join(", ");
    if rest > 0 {
        out.push_str(&format!(" and {rest} more"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(ranks: &[usize]) -> BTreeMap<usize, ()> {
        ranks.iter().map(|&r| (r, ())).collect()
    }

    #[test]
    fn missing_ranks_are_listed_as_ranges_and_the_rest_counted() {
        assert_eq!(missing_ranks(3, &joined(&[0])), "1, 2");
        assert_eq!(missing_ranks(4, &joined(&[0, 1, 2])), "3");
        assert_eq!(missing_ranks(4, &joined(&[0, 1, 2, 3])), "");
        assert_eq!(missing_ranks(1 << 20, &joined(&[0])), "1-1048575");
        assert_eq!(missing_ranks(10, &joined(&[1, 5])), "0, 2-4, 6-9");
        let every_other: Vec<usize> = (0..100).step_by(2).collect();
        // 50 single missing ranks: eight named, 42 counted.
        assert_eq!(
            missing_ranks(100, &joined(&every_other)),
            "1, 3, 5, 7, 9, 11, 13, 15 and 42 more"
        );
    }
}
