//! Weighted linear least squares for a handful of parameters: Householder QR on column-scaled data (the
//! columns of an alpha-beta design differ by ten orders of magnitude), rank detection that names the
//! column which adds nothing, and the parameters' covariance.

/// A solved least-squares problem.
#[derive(Clone, Debug)]
pub struct Solution {
    /// Parameters, one per column (0 for columns held fixed).
    pub theta: Vec<f64>,
    /// Covariance of the parameters (zero rows and columns for fixed ones); NaN when there are no degrees
    /// of freedom left to estimate the noise.
    pub cov: Vec<Vec<f64>>,
    /// Rows minus free parameters.
    pub dof: usize,
    /// Weighted residual sum of squares.
    pub rss: f64,
}

/// Why a problem could not be solved.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// Column `.0` is (numerically) a combination of the free columns before it: the data cannot tell its
    /// parameter apart from theirs.
    Dependent(usize),
    /// No rows at all. (Fewer rows than columns shows as the first column past the rows being dependent.)
    TooFewRows { rows: usize, params: usize },
}

/// A column whose part orthogonal to the earlier ones is below this share of its length adds nothing.
const RANK_TOL: f64 = 1e-9;

// Column-oriented matrix arithmetic reads clearest with indices.
#[allow(clippy::needless_range_loop)]
/// Minimises `sum_i (w_i * (x_i . theta - y_i))^2` over the columns marked `free` (the others stay 0).
pub fn solve(x: &[Vec<f64>], y: &[f64], w: &[f64], free: &[bool]) -> Result<Solution, Failure> {
    let cols: Vec<usize> = (0..free.len()).filter(|&j| free[j]).collect();
    let (m, k) = (x.len(), cols.len());
    if m == 0 && k > 0 {
        return Err(Failure::TooFewRows { rows: m, params: k });
    }
    // Weighted rows, then every column scaled to unit length.
    let mut a: Vec<Vec<f64>> = x
        .iter()
        .zip(w)
        .map(|(r, &wi)| cols.iter().map(|&j| r[j] * wi).collect())
        .collect();
    let mut b: Vec<f64> = y.iter().zip(w).map(|(&yi, &wi)| yi * wi).collect();
    let mut scale = vec![1.0; k];
    for (j, s) in scale.iter_mut().enumerate() {
        let norm = a.iter().map(|r| r[j] * r[j]).sum::<f64>().sqrt();
        if norm == 0.0 {
            return Err(Failure::Dependent(cols[j]));
        }
        *s = norm;
        a.iter_mut().for_each(|r| r[j] /= norm);
    }
    // Householder QR in place: R ends up in the upper triangle, Q'b in b.
    for j in 0..k {
        let norm = (j..m).map(|i| a[i][j] * a[i][j]).sum::<f64>().sqrt();
        if norm < RANK_TOL {
            return Err(Failure::Dependent(cols[j]));
        }
        let alpha = if a[j][j] > 0.0 { -norm } else { norm };
        let mut v: Vec<f64> = (j..m).map(|i| a[i][j]).collect();
        v[0] -= alpha;
        let vv: f64 = v.iter().map(|t| t * t).sum();
        if vv > 0.0 {
            for c in j..k {
                let d: f64 = (j..m).map(|i| v[i - j] * a[i][c]).sum::<f64>() * 2.0 / vv;
                (j..m).for_each(|i| a[i][c] -= d * v[i - j]);
            }
            let d: f64 = (j..m).map(|i| v[i - j] * b[i]).sum::<f64>() * 2.0 / vv;
            (j..m).for_each(|i| b[i] -= d * v[i - j]);
        }
    }
    // Back substitution for the scaled parameters.
    let mut z = vec![0.0; k];
    for j in (0..k).rev() {
        let s: f64 = (j + 1..k).map(|c| a[j][c] * z[c]).sum();
        z[j] = (b[j] - s) / a[j][j];
    }
    let rss: f64 = b[k..].iter().map(|t| t * t).sum();
    let dof = m - k;
    let s2 = if dof > 0 { rss / dof as f64 } else { f64::NAN };
    // R^-1 (upper triangular), then cov = s2 * R^-1 R^-T, unscaled.
    let mut rinv = vec![vec![0.0; k]; k];
    for j in 0..k {
        rinv[j][j] = 1.0 / a[j][j];
        for i in (0..j).rev() {
            let s: f64 = (i + 1..=j).map(|c| a[i][c] * rinv[c][j]).sum();
            rinv[i][j] = -s / a[i][i];
        }
    }
    let n = free.len();
    let mut theta = vec![0.0; n];
    let mut cov = vec![vec![0.0; n]; n];
    for (p, &j) in cols.iter().enumerate() {
        theta[j] = z[p] / scale[p];
        for (q, &l) in cols.iter().enumerate() {
            let rr: f64 = (p.max(q)..k).map(|c| rinv[p][c] * rinv[q][c]).sum();
            cov[j][l] = s2 * rr / (scale[p] * scale[q]);
        }
    }
    Ok(Solution { theta, cov, dof, rss })
}

/// `v' C v`: the variance of a linear combination `v . theta`.
pub fn quad_form(v: &[f64], cov: &[Vec<f64>]) -> f64 {
    let mut s = 0.0;
    for (i, vi) in v.iter().enumerate() {
        for (j, vj) in v.iter().enumerate() {
            if *vi != 0.0 && *vj != 0.0 {
                s += vi * cov[i][j] * vj;
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_line_is_recovered_with_zero_residual() {
        let x: Vec<Vec<f64>> = (0..5).map(|i| vec![1.0, 1e6 * i as f64]).collect();
        let y: Vec<f64> = x.iter().map(|r| 3.0 * r[0] + 2e-6 * r[1]).collect();
        let s = solve(&x, &y, &[1.0; 5], &[true, true]).unwrap();
        assert!(
            (s.theta[0] - 3.0).abs() < 1e-9 && (s.theta[1] - 2e-6).abs() < 1e-15,
            "{s:?}"
        );
        assert!(s.rss < 1e-18);
        assert_eq!(s.dof, 3);
    }

    #[test]
    fn covariance_matches_the_closed_form_of_a_straight_line() {
        // y = a + b t with unit weights: var(b) = s2 / sum (t - mean)^2.
        let t = [0.0, 1.0, 2.0, 3.0];
        let y = [0.1, 0.9, 2.2, 2.8];
        let x: Vec<Vec<f64>> = t.iter().map(|&ti| vec![1.0, ti]).collect();
        let s = solve(&x, &y, &[1.0; 4], &[true, true]).unwrap();
        let s2 = s.rss / 2.0;
        assert!((s.cov[1][1] - s2 / 5.0).abs() < 1e-12, "{:?}", s.cov);
        assert!((s.cov[0][1] - (-1.5 * s2 / 5.0)).abs() < 1e-12);
        assert!((quad_form(&[1.0, 0.0], &s.cov) - s.cov[0][0]).abs() < 1e-15);
    }

    #[test]
    fn a_dependent_column_is_named_and_fixed_columns_are_left_out() {
        let x: Vec<Vec<f64>> = (1..6).map(|i| vec![1.0, i as f64, 2.0 * i as f64]).collect();
        let y = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(
            solve(&x, &y, &[1.0; 5], &[true, true, true]).unwrap_err(),
            Failure::Dependent(2)
        );
        let s = solve(&x, &y, &[1.0; 5], &[true, true, false]).unwrap();
        assert_eq!(s.theta[2], 0.0);
        assert_eq!(s.cov[2][2], 0.0);
        // One row for two parameters: the second adds nothing the first does not.
        let short = solve(&x[..1], &y[..1], &[1.0], &[true, true, false]).unwrap_err();
        assert_eq!(short, Failure::Dependent(1));
        let none = solve(&[], &[], &[], &[true]).unwrap_err();
        assert_eq!(none, Failure::TooFewRows { rows: 0, params: 1 });
    }
}
