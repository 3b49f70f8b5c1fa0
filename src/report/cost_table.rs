//! The path-cost table's columns, shared by the text table and the Markdown report.

use crate::results::record::PathCost;

/// Column titles.
pub const HEADERS: [&str; 11] = [
    "path",
    "connect(ms)",
    "1st call(us)",
    "sweep(s)",
    "cpu(s)",
    "GB moved",
    "cpu s/GB",
    "host cpu%",
    "host busy%",
    "throttled(s)",
    "limited by",
];

/// Text-table column widths, one per header.
pub const WIDTHS: [usize; 11] = [16, 11, 12, 9, 8, 9, 9, 9, 10, 12, 10];

/// What the columns mean, for the line above the table.
pub const LEGEND: &str = "start-up = connect + first call; cpu = every rank's CPU seconds; GB moved as the bus \
                          bandwidth counts bytes; host cpu% = the busiest host's ranks' CPU seconds over its CPUs' wall seconds; host busy% = the same host's CPUs busy with anything; throttled = held \
                          back by a cgroup CPU quota; limited by cpu = the CPUs, not the network, set the pace";

/// One path's row.
pub fn cells(c: &PathCost) -> Vec<String> {
    let opt = |v: Option<f64>, prec: usize| v.map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"));
    vec![
        c.path.clone(),
        opt(c.connect_s.map(|s| s * 1e3), 1),
        format!("{:.1}", c.first_collective_us),
        format!("{:.2}", c.sweep_s),
        format!("{:.2}", c.cpu_s),
        format!("{:.3}", c.gb_moved),
        opt(c.cpu_s_per_gb, 3),
        format!("{:.0}", c.host_cpu_pct),
        opt(c.host_busy_pct, 0),
        // No cgroup found is not "never throttled": say it is unknown.
        c.throttled_s
            .map_or_else(|| "unknown".to_string(), |t| format!("{t:.2}")),
        if c.cpu_limited { "cpu" } else { "-" }.to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_has_a_cell_per_column_dashes_for_what_does_not_apply_and_unknown_throttling_said() {
        let c = PathCost {
            path: "mpi".into(),
            line_rate_gbs: None,
            connect_s: None,
            first_collective_us: 1234.56,
            sweep_s: 2.0,
            cpu_s: 3.0,
            gb_moved: 1.5,
            cpu_s_per_gb: Some(2.0),
            busiest_host: "h0".into(),
            host_cpu_pct: 91.2,
            throttled_s: None,
            throttled_periods: None,
            host_busy_pct: Some(97.4),
            cpu_limited: true,
        };
        let row = cells(&c);
        assert_eq!(row.len(), HEADERS.len());
        assert_eq!(
            row,
            ["mpi", "-", "1234.6", "2.00", "3.00", "1.500", "2.000", "91", "97", "unknown", "cpu"]
        );
    }
}
