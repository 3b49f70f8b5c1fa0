//! Which pairs meet in which round: the circle method, so every pair is measured exactly once and the
//! pairs of one round are disjoint (they run at the same time without sharing an endpoint).

/// Rounds of disjoint pairs `(a, b)` with `a < b` over participants `0..n`: n-1 rounds of n/2 pairs for
/// even n; for odd n, n rounds of (n-1)/2 pairs in which one participant sits out (a bye).
/// No rounds for n < 2.
pub fn rounds(n: usize) -> Vec<Vec<(usize, usize)>> {
    (0..count(n)).map(|r| round(n, r)).collect()
}

/// How many rounds [`rounds`] has for `n` participants: n-1 for even n, n for odd n, none below 2.
pub fn count(n: usize) -> usize {
    match n {
        0 | 1 => 0,
        _ if n % 2 == 0 => n - 1,
        _ => n,
    }
}

/// Round `r` (< [`count`]`(n)`) of [`rounds`] alone, so a sampled schedule need not build all of them.
pub fn round(n: usize, r: usize) -> Vec<(usize, usize)> {
    // Odd n: a phantom participant `n` joins; whoever meets it has the bye.
    let m = if n % 2 == 0 { n } else { n + 1 };
    let ring = m - 1;
    // The last participant stays fixed; the others rotate one step per round.
    let mut pairs = vec![(m - 1, r)];
    for i in 1..m / 2 {
        pairs.push(((r + i) % ring, (r + ring - i) % ring));
    }
    pairs
        .into_iter()
        .filter(|&(a, b)| a < n && b < n)
        .map(|(a, b)| (a.min(b), a.max(b)))
        .collect()
}

/// The partner of `me` in `round`, if it has one.
pub fn partner(round: &[(usize, usize)], me: usize) -> Option<usize> {
    round.iter().find_map(|&(a, b)| {
        if a == me {
            Some(b)
        } else if b == me {
            Some(a)
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn check(n: usize) {
        let rs = rounds(n);
        let want_rounds = match n {
            0 | 1 => 0,
            _ if n % 2 == 0 => n - 1,
            _ => n,
        };
        assert_eq!(rs.len(), want_rounds, "n={n}");
        assert_eq!(count(n), want_rounds, "n={n}");
        let mut seen = BTreeSet::new();
        for (k, round) in rs.iter().enumerate() {
            assert_eq!(round.len(), n / 2, "n={n} round {k}: {round:?}");
            let mut busy = BTreeSet::new();
            for &(a, b) in round {
                assert!(a < b && b < n, "n={n}: pair ({a}, {b})");
                assert!(
                    busy.insert(a) && busy.insert(b),
                    "n={n} round {k} reuses a participant: {round:?}"
                );
                assert!(seen.insert((a, b)), "n={n}: pair ({a}, {b}) measured twice");
            }
        }
        assert_eq!(seen.len(), n * n.saturating_sub(1) / 2, "n={n}: every pair once");
    }

    #[test]
    fn every_pair_exactly_once_in_disjoint_rounds() {
        for n in 0..=17 {
            check(n);
        }
    }

    #[test]
    fn small_cases_are_as_expected() {
        assert!(rounds(1).is_empty());
        assert_eq!(rounds(2), vec![vec![(0, 1)]]);
        // Three participants: three rounds of one pair, each one sits out once.
        let three = rounds(3);
        let byes: BTreeSet<usize> = three
            .iter()
            .map(|r| (0..3).find(|&p| partner(r, p).is_none()).unwrap())
            .collect();
        assert_eq!(byes, BTreeSet::from([0, 1, 2]));
    }

    #[test]
    fn partner_is_symmetric() {
        for round in rounds(6) {
            for p in 0..6 {
                let q = partner(&round, p).expect("even n: nobody sits out");
                assert_eq!(partner(&round, q), Some(p));
            }
        }
    }
}
