//! Run totals and the per-table average bus bandwidth: the one definition that the table footer, the
//! JSON file and the exit code all use.

use crate::results::record::{AvgBusBw, PathCost, Record, Summary};

/// Sizes from this many bytes up are averaged; below it a point is latency-bound and would drag the
/// average down by how many small sizes the sweep happened to include.
pub const AVG_FROM_BYTES: u64 = 1 << 20;

/// Totals over `records`: out-of-bounds points, wrong elements, the average busbw of every table, and the
/// paths side by side (against `reference` where given), and what each path cost.
pub fn summarize(
    records: &[Record],
    end_time: String,
    reference: Option<&str>,
    line_rates: &[(String, f64)],
    paths: Vec<PathCost>,
) -> Summary {
    Summary {
        out_of_bounds: out_of_bounds(records),
        wrong: wrong_elements(records),
        avg_busbw: avg_busbw(records),
        end_time,
        comparison: super::paths_compared::compare(records, reference, line_rates),
        paths,
        peak_memory: None,
        model: None,
        model_markdown: None,
    }
}

/// Points (record x placement) with at least one wrong element: nccl-tests' "Out of bounds values".
pub fn out_of_bounds(records: &[Record]) -> u64 {
    records
        .iter()
        .flat_map(|r| [&r.out_of_place, &r.in_place])
        .filter(|t| t.wrong.is_some_and(|w| w > 0))
        .count() as u64
}

/// nccl-tests' average bus bandwidth (`# Avg bus bandwidth`, `average_bus_bandwidth`): the mean busbw over
/// every row and both placements of `records`; NaN when there is none, as nccl-tests' 0 / 0 gives.
pub fn nccl_avg_busbw(records: &[Record]) -> f64 {
    let sum: f64 = records.iter().map(|r| r.out_of_place.busbw + r.in_place.busbw).sum();
    sum / (2 * records.len()) as f64
}

/// Wrong elements summed over every point (0 where the check was off).
pub fn wrong_elements(records: &[Record]) -> u64 {
    records
        .iter()
        .flat_map(|r| [&r.out_of_place, &r.in_place])
        .filter_map(|t| t.wrong)
        .sum()
}

/// One average per (path, collective, dtype, op), in first-seen order: the mean over the included
/// sizes of (out-of-place busbw + in-place busbw) / 2. Included are the sizes >= [`AVG_FROM_BYTES`], or
/// every size when a table has none that large.
pub fn avg_busbw(records: &[Record]) -> Vec<AvgBusBw> {
    let mut groups: Vec<Vec<&Record>> = Vec::new();
    for rec in records {
        match groups.iter_mut().find(|g| same_table(g[0], rec)) {
            Some(g) => g.push(rec),
            None => groups.push(vec![rec]),
        }
    }
    groups.into_iter().map(|g| average(&g)).collect()
}

fn same_table(a: &Record, b: &Record) -> bool {
    a.path == b.path && a.collective == b.collective && a.dtype == b.dtype && a.op == b.op
}

fn average(group: &[&Record]) -> AvgBusBw {
    let large: Vec<&Record> = group.iter().copied().filter(|r| r.size >= AVG_FROM_BYTES).collect();
    let included: &[&Record] = if large.is_empty() { group } else { &large };
    let sum: f64 = included
        .iter()
        .map(|r| (r.out_of_place.busbw + r.in_place.busbw) / 2.0)
        .sum();
    let first = group[0];
    AvgBusBw {
        path: first.path.clone(),
        collective: first.collective,
        dtype: first.dtype,
        op: first.op,
        busbw: sum / included.len() as f64,
        from_size: included.iter().map(|r| r.size).min().unwrap_or(0),
        points: included.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::reduce::{Dtype, Op};
    use crate::results::testutil::record;

    #[test]
    fn averages_only_sizes_from_one_mib() {
        let recs = vec![
            record(Collective::AllReduce, 1024, 100.0, 1.0, Some(0)),
            record(Collective::AllReduce, 1 << 20, 100.0, 10.0, Some(0)),
            record(Collective::AllReduce, 4 << 20, 100.0, 20.0, Some(0)),
        ];
        let avg = avg_busbw(&recs);
        assert_eq!(avg.len(), 1);
        // Each record has in-place busbw = out-of-place + 1 (see testutil), so the means are 10.5 and 20.5.
        assert_eq!(avg[0].busbw, 15.5);
        assert_eq!(avg[0].from_size, 1 << 20);
        assert_eq!(avg[0].points, 2);
    }

    #[test]
    fn falls_back_to_every_size_when_none_is_large() {
        let recs = vec![
            record(Collective::AllGather, 8, 10.0, 1.0, None),
            record(Collective::AllGather, 16, 10.0, 3.0, None),
        ];
        let avg = avg_busbw(&recs);
        assert_eq!(avg.len(), 1);
        assert_eq!(avg[0].busbw, 2.5);
        assert_eq!(avg[0].from_size, 8);
        assert_eq!(avg[0].points, 2);
    }

    #[test]
    fn one_average_per_table_in_first_seen_order() {
        let mut other_path = record(Collective::AllReduce, 8, 10.0, 7.0, Some(0));
        other_path.path = "tcp@eth0".into();
        let mut other_dtype = record(Collective::AllReduce, 8, 10.0, 5.0, Some(0));
        other_dtype.dtype = Dtype::Double;
        let mut other_op = record(Collective::AllReduce, 8, 10.0, 5.0, Some(0));
        other_op.op = Some(Op::Max);
        let recs = vec![
            record(Collective::AllReduce, 8, 10.0, 1.0, Some(0)),
            other_path,
            record(Collective::AllGather, 8, 10.0, 1.0, Some(0)),
            record(Collective::AllReduce, 16, 10.0, 3.0, Some(0)),
            other_dtype,
            other_op,
        ];
        let avg = avg_busbw(&recs);
        let keys: Vec<_> = avg
            .iter()
            .map(|a| (a.path.as_str(), a.collective, a.dtype, a.op, a.points))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("tcp@lo", Collective::AllReduce, Dtype::Float, Some(Op::Sum), 2),
                ("tcp@eth0", Collective::AllReduce, Dtype::Float, Some(Op::Sum), 1),
                ("tcp@lo", Collective::AllGather, Dtype::Float, None, 1),
                ("tcp@lo", Collective::AllReduce, Dtype::Double, Some(Op::Sum), 1),
                ("tcp@lo", Collective::AllReduce, Dtype::Float, Some(Op::Max), 1),
            ]
        );
        assert_eq!(avg[0].busbw, 2.5);
    }

    #[test]
    fn counts_points_with_wrong_elements_and_sums_them() {
        let mut bad = record(Collective::AllReduce, 8, 10.0, 1.0, Some(3));
        bad.in_place.wrong = Some(0);
        let both_bad = record(Collective::AllReduce, 16, 10.0, 1.0, Some(2));
        let unchecked = record(Collective::AllReduce, 32, 10.0, 1.0, None);
        let s = summarize(
            &[bad, both_bad, unchecked],
            "2025-01-01T00:00:00Z".into(),
            None,
            &[],
            Vec::new(),
        );
        assert_eq!(s.out_of_bounds, 3);
        assert_eq!(s.wrong, 7);
        assert_eq!(s.end_time, "2025-01-01T00:00:00Z");
        assert_eq!(s.avg_busbw.len(), 1);
        assert_eq!(summarize(&[], String::new(), None, &[], Vec::new()).avg_busbw, vec![]);
    }
}
