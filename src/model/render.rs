//! A [`Report`] as text (`#` header lines and whitespace-separated columns, like the run's tables), as
//! Markdown (JSON is the report's serde form).

use std::fmt::Write as _;

use super::fit::{Param, PathFit};
use super::Report;
use crate::sizes::format_size;

/// `value ± sd` in a unit; `(held at 0)` for a parameter that was not fitted.
fn pm(p: &Param, scale: f64, prec: usize) -> String {
    if p.fixed.is_some() {
        return "0 (held)".to_string();
    }
    let sd = if p.sd.is_finite() {
        format!("{:.prec$}", p.sd * scale)
    } else {
        "?".into()
    };
    format!("{:.prec$} ± {sd}", p.value * scale)
}

/// 1/beta in GB/s (beta in us per byte).
fn gbs(us_per_byte: f64) -> String {
    if us_per_byte > 0.0 {
        format!("{:.4}", 1.0 / us_per_byte / 1e3)
    } else {
        "inf".into()
    }
}

fn num(x: f64, prec: usize) -> String {
    if x.is_finite() {
        format!("{x:.prec$}")
    } else {
        "n/a".into()
    }
}

fn opt_num(x: Option<f64>, prec: usize) -> String {
    x.map_or_else(|| "-".into(), |x| num(x, prec))
}

fn ranks(f: &PathFit) -> String {
    let mut r: Vec<usize> = f.residuals.iter().map(|r| r.nranks).collect();
    r.sort_unstable();
    r.dedup();
    r.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

fn scale_line(r: &Report) -> String {
    match r.ranks_per_node {
        Some(g) if g > 1 => format!(
            "{} ranks ({} nodes of {g}; two-level rows use the local link: {})",
            r.target_ranks,
            r.target_ranks / g,
            r.local_link.as_ref().map_or_else(String::new, |l| format!(
                "{}, alpha {:.2} us, {} GB/s",
                l.source,
                l.alpha_us,
                gbs(l.beta_us_per_byte)
            ))
        ),
        _ => format!("{} ranks", r.target_ranks),
    }
}

/// Residual summary per collective, algorithm and rank count: (label, points, rel RMS, max |rel|).
fn residual_groups(f: &PathFit) -> Vec<(String, String, usize, usize, f64, f64)> {
    let mut out: Vec<(String, String, usize, usize, f64, f64)> = Vec::new();
    for r in &f.residuals {
        let key = (r.collective.name().to_string(), r.algo.clone(), r.nranks);
        match out.iter_mut().find(|g| (&g.0, &g.1, g.2) == (&key.0, &key.1, key.2)) {
            Some(g) => {
                g.3 += 1;
                g.4 += r.rel * r.rel;
                g.5 = g.5.max(r.rel.abs());
            }
            None => out.push((key.0, key.1, key.2, 1, r.rel * r.rel, r.rel.abs())),
        }
    }
    for g in &mut out {
        g.4 = (g.4 / g.3 as f64).sqrt();
    }
    out
}

/// The text report.
pub fn text(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# collbench model: fitted to {}", r.sources.join(", "));
    let _ = writeln!(s, "# fit: {}", r.weighting);
    let _ = writeln!(s, "# target: {}", scale_line(r));
    for f in &r.fits {
        let _ = writeln!(s, "#");
        let _ = writeln!(
            s,
            "# path {}: {} points at {} ranks; relative RMS {:.1}%, max {:.1}%, R^2 {}, {} dof",
            f.path,
            f.residuals.len(),
            ranks(f),
            f.rel_rms * 100.0,
            f.rel_max * 100.0,
            num(f.r2, 4),
            f.dof
        );
        let _ = writeln!(
            s,
            "#   {:<13} {:>20} {:>20} {:>12} {:>6}  {:<8} collectives",
            "algo", "alpha (us)", "beta (ns/B)", "1/beta GB/s", "points", "ranks"
        );
        for a in &f.algos {
            let rk: Vec<String> = a.rank_counts.iter().map(usize::to_string).collect();
            let cs: Vec<&str> = a.collectives.iter().map(|c| c.name()).collect();
            let _ = writeln!(
                s,
                "#   {:<13} {:>20} {:>20} {:>12} {:>6}  {:<8} {}",
                a.algo.name(),
                pm(&a.alpha_us, 1.0, 2),
                pm(&a.beta_us_per_byte, 1e3, 4),
                gbs(a.beta_us_per_byte.value),
                a.points,
                rk.join(","),
                cs.join(",")
            );
        }
        let _ = writeln!(
            s,
            "#   gamma (ns/B reduced) {} ({} GB/s)",
            pm(&f.gamma_us_per_byte, 1e3, 4),
            gbs(f.gamma_us_per_byte.value)
        );
        let _ = writeln!(s, "#   residuals (fitted - measured) / measured:");
        for g in residual_groups(f) {
            let _ = writeln!(
                s,
                "#     {:<15} {:<13} {:>3} ranks {:>4} points  RMS {:>6.1}%  max {:>6.1}%",
                g.0,
                g.1,
                g.2,
                g.3,
                g.4 * 100.0,
                g.5 * 100.0
            );
        }
        for n in &f.notes {
            let _ = writeln!(s, "#   note: {n}");
        }
    }
    let _ = writeln!(s, "#");
    let _ = writeln!(
        s,
        "# predictions at {} (± is the 95% interval from the fit's uncertainty)",
        scale_line(r)
    );
    let measured = r.predictions.iter().any(|p| p.measured_us.is_some());
    let mut head = format!(
        "# {:<12} {:<15} {:<13} {:>6} {:>12} {:>13} {:>10} {:>9} {:>9} {:<10}",
        "path", "collective", "algo", "level", "size(B)", "time(us)", "±95%", "algbw", "busbw", "bound"
    );
    if measured {
        let _ = write!(head, " {:>13} {:>7}", "measured(us)", "err%");
    }
    let _ = writeln!(s, "{}", head.trim_end());
    for p in &r.predictions {
        let mut line = format!(
            "  {:<12} {:<15} {:<13} {:>6} {:>12} {:>13.2} {:>10} {:>9.4} {:>9.4} {:<10}",
            p.path,
            p.collective.name(),
            p.algo,
            if p.hierarchical { "2-lvl" } else { "flat" },
            p.size,
            p.time_us,
            num(p.ci95_us, 2),
            p.algbw,
            p.busbw,
            p.bound
        );
        if measured {
            let _ = write!(
                line,
                " {:>13} {:>7}",
                opt_num(p.measured_us, 2),
                opt_num(p.error_pct, 1)
            );
        }
        let _ = writeln!(s, "{}", line.trim_end());
    }
    if !r.crossovers.is_empty() {
        let _ = writeln!(s, "#");
        let _ = writeln!(s, "# ring vs latency algorithm at {} ranks (flat)", r.target_ranks);
        let _ = writeln!(
            s,
            "# {:<12} {:<15} {:<13} {:>14}  which",
            "path", "collective", "latency", "crossover(B)"
        );
        for c in &r.crossovers {
            let at = c.size.map_or_else(|| "none".into(), |x| format!("{x:.0}"));
            let _ = writeln!(
                s,
                "  {:<12} {:<15} {:<13} {:>14}  {}",
                c.path,
                c.collective.name(),
                c.latency_algo,
                at,
                c.note
            );
        }
    }
    if let Some(reference) = &r.reference {
        let _ = writeln!(s, "#");
        let _ = writeln!(
            s,
            "# paths against {reference} at {} ranks: predicted time / {reference}'s",
            r.target_ranks
        );
        let _ = writeln!(
            s,
            "# {:<12} {:<15} {:<13} {:>6} {:>12} {:>8}",
            "path", "collective", "algo", "level", "size(B)", "ratio"
        );
        for q in &r.ratios {
            let _ = writeln!(
                s,
                "  {:<12} {:<15} {:<13} {:>6} {:>12} {:>8.3}",
                q.path,
                q.collective.name(),
                q.algo,
                if q.hierarchical { "2-lvl" } else { "flat" },
                q.size,
                q.ratio
            );
        }
    }
    if !r.largest_errors.is_empty() {
        let _ = writeln!(s, "#");
        let _ = writeln!(
            s,
            "# measured at {} ranks ({}): error at the largest size",
            r.target_ranks,
            r.measured_sources.join(", ")
        );
        for e in &r.largest_errors {
            let _ = writeln!(
                s,
                "#   {} {} {} at {}: predicted {:.1} ± {} us, measured {:.1} us, error {:+.1}%",
                e.path,
                e.collective.name(),
                e.algo,
                format_size(e.size),
                e.predicted_us,
                num(e.ci95_us, 1),
                e.measured_us,
                e.error_pct
            );
        }
    }
    s
}

/// The Markdown report.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# collbench model: predictions at {}\n", scale_line(r));
    let _ = writeln!(s, "Fitted to {}; {}.\n", r.sources.join(", "), r.weighting);
    for f in &r.fits {
        let _ = writeln!(
            s,
            "## Fit of {}\n\n{} points at {} ranks; relative RMS {:.1}%, max {:.1}%, R² {}, {} degrees of freedom.\n",
            f.path,
            f.residuals.len(),
            ranks(f),
            f.rel_rms * 100.0,
            f.rel_max * 100.0,
            num(f.r2, 4),
            f.dof
        );
        let _ = writeln!(
            s,
            "| algorithm | alpha (us) | beta (ns/B) | 1/beta (GB/s) | points | ranks | collectives |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---|---|");
        for a in &f.algos {
            let rk: Vec<String> = a.rank_counts.iter().map(usize::to_string).collect();
            let cs: Vec<&str> = a.collectives.iter().map(|c| c.name()).collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                a.algo.name(),
                pm(&a.alpha_us, 1.0, 2),
                pm(&a.beta_us_per_byte, 1e3, 4),
                gbs(a.beta_us_per_byte.value),
                a.points,
                rk.join(", "),
                cs.join(", ")
            );
        }
        let _ = writeln!(
            s,
            "\ngamma (reduction): {} ns/B ({} GB/s).\n",
            pm(&f.gamma_us_per_byte, 1e3, 4),
            gbs(f.gamma_us_per_byte.value)
        );
        for n in &f.notes {
            let _ = writeln!(s, "- {n}");
        }
        let _ = writeln!(s, "\n| collective | algorithm | ranks | points | relative RMS | max |");
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|");
        for g in residual_groups(f) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.1}% | {:.1}% |",
                g.0,
                g.1,
                g.2,
                g.3,
                g.4 * 100.0,
                g.5 * 100.0
            );
        }
        let _ = writeln!(s);
    }
    let measured = r.predictions.iter().any(|p| p.measured_us.is_some());
    let _ = writeln!(s, "## Predictions at {}\n", scale_line(r));
    let _ = write!(
        s,
        "| path | collective | algorithm | level | size | time (us) | ±95% | algbw (GB/s) | busbw (GB/s) | bound |"
    );
    let _ = writeln!(s, "{}", if measured { " measured (us) | error |" } else { "" });
    let _ = write!(s, "|---|---|---|---|---:|---:|---:|---:|---:|---|");
    let _ = writeln!(s, "{}", if measured { "---:|---:|" } else { "" });
    for p in &r.predictions {
        let _ = write!(
            s,
            "| {} | {} | {} | {} | {} | {:.2} | {} | {:.4} | {:.4} | {} |",
            p.path,
            p.collective.name(),
            p.algo,
            if p.hierarchical { "two-level" } else { "flat" },
            format_size(p.size),
            p.time_us,
            num(p.ci95_us, 2),
            p.algbw,
            p.busbw,
            p.bound
        );
        if measured {
            let err = p.error_pct.map_or_else(|| "-".into(), |e| format!("{e:+.1}%"));
            let _ = write!(s, " {} | {err} |", opt_num(p.measured_us, 2));
        }
        let _ = writeln!(s);
    }
    if !r.crossovers.is_empty() {
        let _ = writeln!(s, "\n## Ring vs latency algorithm at {} ranks\n", r.target_ranks);
        let _ = writeln!(s, "| path | collective | latency algorithm | crossover | |");
        let _ = writeln!(s, "|---|---|---|---:|---|");
        for c in &r.crossovers {
            let at = c.size.map_or_else(|| "none".into(), |x| format_size(x.round() as u64));
            let _ = writeln!(
                s,
                "| {} | {} | {} | {at} | {} |",
                c.path,
                c.collective.name(),
                c.latency_algo,
                c.note
            );
        }
    }
    if let Some(reference) = &r.reference {
        let _ = writeln!(
            s,
            "\n## Paths against {reference} at {} ranks (predicted time ratio)\n",
            r.target_ranks
        );
        let _ = writeln!(s, "| path | collective | algorithm | level | size | ratio |");
        let _ = writeln!(s, "|---|---|---|---|---:|---:|");
        for q in &r.ratios {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {:.3} |",
                q.path,
                q.collective.name(),
                q.algo,
                if q.hierarchical { "two-level" } else { "flat" },
                format_size(q.size),
                q.ratio
            );
        }
    }
    if !r.largest_errors.is_empty() {
        let _ = writeln!(
            s,
            "\n## Error at the largest measured size ({} ranks, {})\n",
            r.target_ranks,
            r.measured_sources.join(", ")
        );
        let _ = writeln!(
            s,
            "| path | collective | algorithm | size | predicted (us) | measured (us) | error |"
        );
        let _ = writeln!(s, "|---|---|---|---:|---:|---:|---:|");
        for e in &r.largest_errors {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.1} ± {} | {:.1} | {:+.1}% |",
                e.path,
                e.collective.name(),
                e.algo,
                format_size(e.size),
                e.predicted_us,
                num(e.ci95_us, 1),
                e.measured_us,
                e.error_pct
            );
        }
    }
    s
}
