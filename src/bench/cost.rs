//! Every rank's [`Usage`] of one sweep becomes the path's [`PathCost`]; sweeps of one path add up.

use super::usage::Usage;
use crate::results::record::{PathCost, CPU_LIMITED_PCT, THROTTLED_SHARE};

/// The cost of one sweep of `path` from every rank's usage (rank order).
pub fn of_sweep(path: &str, usages: &[Usage]) -> PathCost {
    let wall = usages.iter().map(|u| u.wall_s).fold(0.0, f64::max);
    let mut hosts: Vec<&str> = usages.iter().map(|u| u.host.as_str()).collect();
    hosts.dedup();
    hosts.sort_unstable();
    hosts.dedup();
    // Ranks of one host share its CPUs: their CPU time over what the host's CPUs could give in the sweep.
    let (busiest_host, host_cpu_pct) = hosts
        .iter()
        .map(|h| {
            let on: Vec<&Usage> = usages.iter().filter(|u| u.host == *h).collect();
            let cpus = on.iter().map(|u| u.cpus).fold(1.0, f64::max);
            let cpu: f64 = on.iter().map(|u| u.cpu_s).sum();
            (
                h.to_string(),
                if wall > 0.0 { 100.0 * cpu / (wall * cpus) } else { 0.0 },
            )
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or_default();
    // Ranks of one host usually share a cgroup: the host's figure is its most-throttled rank's.
    let throttled = usages
        .iter()
        .filter_map(|u| Some((u.throttled_s?, u.throttled_periods?)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    // Every process's use of the host's CPUs: the busiest host's, over its ranks.
    let host_busy_pct = usages
        .iter()
        .filter_map(|u| u.host_busy_pct)
        .max_by(|a, b| a.total_cmp(b));
    let cpu_s: f64 = usages.iter().map(|u| u.cpu_s).sum();
    let gb_moved = usages.iter().map(|u| u.bytes).sum::<f64>() / 1e9;
    let mut c = PathCost {
        path: path.to_string(),
        line_rate_gbs: None,
        connect_s: None,
        first_collective_us: usages.iter().map(|u| u.first_us).fold(0.0, f64::max),
        sweep_s: wall,
        cpu_s,
        gb_moved,
        cpu_s_per_gb: None,
        busiest_host,
        host_cpu_pct,
        throttled_s: throttled.map(|t| t.0),
        throttled_periods: throttled.map(|t| t.1),
        host_busy_pct,
        cpu_limited: false,
    };
    settle(&mut c);
    c
}

/// Adds a later sweep of the same path to `total`; the first sweep's first collective stays the start-up cost.
pub fn add(total: &mut PathCost, later: &PathCost) {
    total.sweep_s += later.sweep_s;
    total.cpu_s += later.cpu_s;
    total.gb_moved += later.gb_moved;
    if later.host_cpu_pct > total.host_cpu_pct {
        total.host_cpu_pct = later.host_cpu_pct;
        total.busiest_host.clone_from(&later.busiest_host);
    }
    total.throttled_s = total.throttled_s.zip(later.throttled_s).map(|(a, b)| a + b);
    total.throttled_periods = total.throttled_periods.zip(later.throttled_periods).map(|(a, b)| a + b);
    total.host_busy_pct = match (total.host_busy_pct, later.host_busy_pct) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    settle(total);
}

/// The figures derived from the others.
fn settle(c: &mut PathCost) {
    c.cpu_s_per_gb = (c.gb_moved > 0.0).then(|| c.cpu_s / c.gb_moved);
    c.cpu_limited = c.host_cpu_pct >= CPU_LIMITED_PCT
        || c.host_busy_pct.is_some_and(|b| b >= CPU_LIMITED_PCT)
        || c.throttled_s.is_some_and(|t| t > THROTTLED_SHARE * c.sweep_s);
}

/// A warning with advice when `c` says the CPUs rather than the network set the pace; `None` otherwise.
pub fn warning(c: &PathCost) -> Option<String> {
    if !c.cpu_limited {
        return None;
    }
    let throttled = c.throttled_s.filter(|&t| t > THROTTLED_SHARE * c.sweep_s);
    let others = c
        .host_busy_pct
        .filter(|&b| b >= CPU_LIMITED_PCT && c.host_cpu_pct < CPU_LIMITED_PCT);
    Some(match (throttled, others) {
        (None, Some(b)) => format!(
            "path {}: the host's CPUs were {b:.0}% busy during the sweep, mostly with work other than collbench's \
             ranks ({:.0}% of them), so its figures are CPU-limited rather than network-limited. Run on an idle \
             host, or stop what else runs there, and measure again",
            c.path, c.host_cpu_pct
        ),
        (Some(t), _) => format!(
            "path {}: a cgroup CPU quota held ranks back for {t:.2} s of the {:.2} s sweep, so its figures are \
             CPU-limited, not network-limited. Raise the CPU limit of the pods or containers (resources.limits.cpu), \
             or run fewer ranks per host",
            c.path, c.sweep_s
        ),
        (None, None) => format!(
            "path {}: host {}'s CPUs were {:.0}% busy during the sweep, so its figures are CPU-limited rather than \
             network-limited. Run fewer ranks per host (--np, or the launcher's ranks per node) or use a host with \
             more cores",
            c.path, c.busiest_host, c.host_cpu_pct
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(host: &str, cpu_s: f64, cpus: f64, throttled_s: Option<f64>) -> Usage {
        Usage {
            host: host.into(),
            wall_s: 2.0,
            cpu_s,
            cpus,
            bytes: 0.5e9,
            first_us: if host == "b" { 900.0 } else { 100.0 },
            throttled_periods: throttled_s.map(|t| (t * 10.0) as u64),
            throttled_s,
            host_busy_pct: None,
            peak_rss: None,
            waited_s: None,
            runtime_bytes: 0,
        }
    }

    #[test]
    fn a_host_is_as_busy_as_its_ranks_together() {
        // Host a: 2 ranks x 1.5 CPU s over 2 s on 4 CPUs = 37.5%; host b: 3.6 CPU s over 2 s on 2 CPUs = 90%.
        let c = of_sweep(
            "tcp@eth0",
            &[
                u("a", 1.5, 4.0, Some(0.0)),
                u("a", 1.5, 4.0, Some(0.0)),
                u("b", 3.6, 2.0, Some(0.0)),
            ],
        );
        assert_eq!(c.busiest_host, "b");
        assert!((c.host_cpu_pct - 90.0).abs() < 1e-9);
        assert!((c.cpu_s - 6.6).abs() < 1e-9);
        assert!((c.gb_moved - 1.5).abs() < 1e-9);
        assert!((c.cpu_s_per_gb.unwrap() - 4.4).abs() < 1e-9);
        assert_eq!(c.first_collective_us, 900.0, "the slowest rank's first call");
        assert!(c.cpu_limited);
        assert!(warning(&c).unwrap().contains("host b's CPUs were 90% busy"));
    }

    #[test]
    fn throttling_beyond_a_twentieth_of_the_sweep_is_cpu_limited() {
        let idle = of_sweep("p", &[u("a", 0.2, 4.0, Some(0.05))]);
        assert!(!idle.cpu_limited, "0.05 s of 2 s is within the allowance");
        assert_eq!(warning(&idle), None);
        let held = of_sweep("p", &[u("a", 0.2, 4.0, Some(0.3)), u("c", 0.2, 4.0, Some(0.1))]);
        assert_eq!(held.throttled_s, Some(0.3));
        assert!(held.cpu_limited);
        assert!(warning(&held).unwrap().contains("CPU quota held ranks back for 0.30 s"));
        let unknown = of_sweep("p", &[u("a", 0.2, 4.0, None)]);
        assert_eq!((unknown.throttled_s, unknown.cpu_limited), (None, false));
    }

    #[test]
    fn repeats_add_up_and_keep_the_first_start_up() {
        let mut total = of_sweep("p", &[u("a", 1.0, 4.0, Some(0.0))]);
        let mut later = of_sweep("p", &[u("b", 1.0, 1.0, Some(0.25))]);
        later.first_collective_us = 5.0;
        add(&mut total, &later);
        assert_eq!((total.sweep_s, total.cpu_s, total.gb_moved), (4.0, 2.0, 1.0));
        assert_eq!(total.first_collective_us, 100.0);
        assert_eq!(total.busiest_host, "b");
        assert_eq!(total.throttled_s, Some(0.25));
        assert_eq!(total.cpu_s_per_gb, Some(2.0));
        // 0.25 s of 4 s is more than a twentieth; and b's single CPU was half busy.
        assert!(total.cpu_limited);
    }

    #[test]
    fn a_host_busy_with_other_work_is_cpu_limited_too() {
        // The ranks used 5% of the CPUs, but the host was 92% busy: something else took them.
        let mut a = u("a", 0.2, 2.0, Some(0.0));
        a.host_busy_pct = Some(92.0);
        let c = of_sweep("p", &[a.clone()]);
        assert_eq!(c.host_busy_pct, Some(92.0));
        assert!(c.cpu_limited);
        assert!(warning(&c)
            .unwrap()
            .contains("92% busy during the sweep, mostly with work other than"));
        a.host_busy_pct = Some(40.0);
        let quiet = of_sweep("p", &[a]);
        assert!(!quiet.cpu_limited);
        let mut total = c;
        add(&mut total, &quiet);
        assert_eq!(total.host_busy_pct, Some(92.0), "the busier sweep counts");
    }

    #[test]
    fn nothing_moved_has_no_cost_per_gb() {
        let mut e = u("a", 0.0, 1.0, None);
        e.bytes = 0.0;
        e.wall_s = 0.0;
        let c = of_sweep("p", &[e]);
        assert_eq!((c.cpu_s_per_gb, c.host_cpu_pct, c.cpu_limited), (None, 0.0, false));
    }
}
