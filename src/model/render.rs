//! A [`Report`] as text (`#` header lines and whitespace-separated columns, like the run's tables), as
//! Markdown (JSON is the report's serde form). The tables are built once (`Tables`); the two forms differ
//! in the prose around them and in how `table` prints them.

use std::fmt::Write as _;

use super::fit::{Held, Param, PathFit};
use super::table::{self, left, right, Cell, Col, Table, TextForm};
use super::Report;
use crate::sizes::format_size;
use crate::units::BwUnit;

/// `value ± sd` in a unit; `(held at 0)` for a parameter that was not fitted.
fn pm(p: &Param, scale: f64, prec: usize) -> String {
    match p.held {
        // Negative beyond its noise: the data cannot identify it, which is not the same as a cost of 0.
        Some(Held::Negative) => return "not identified (held at 0)".to_string(),
        Some(Held::Unmeasured | Held::Inseparable) => return "0 (held)".to_string(),
        // Below 0 within its noise: 0, with the uncertainty it was fitted with.
        Some(Held::WithinNoise) | None => {}
    }
    let sd = if p.sd.is_finite() {
        format!("{:.prec$}", p.sd * scale)
    } else {
        "?".into()
    };
    format!("{:.prec$} ± {sd}", p.value * scale)
}

/// 1/beta in `units` (beta in us per byte).
fn gbs(us_per_byte: f64, units: BwUnit) -> String {
    if us_per_byte > 0.0 {
        format!("{:.4}", units.of_gbs(1.0 / us_per_byte / 1e3))
    } else {
        "inf".into()
    }
}

/// gamma as a rate with its unit. A cost of 0 (held there: the data could not tell it from 0) has no rate:
/// an infinite bandwidth would read as a measurement.
fn gamma_rate(us_per_byte: f64, units: BwUnit) -> String {
    if us_per_byte > 0.0 {
        format!("{} {units}", gbs(us_per_byte, units))
    } else {
        "no rate: too small to tell from 0".into()
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

fn scale_line(r: &Report, units: BwUnit) -> String {
    match r.ranks_per_node {
        Some(g) if g > 1 => format!(
            "{} ranks ({} nodes of {g}; two-level rows use the local link: {})",
            r.target_ranks,
            r.target_ranks / g,
            r.local_link.as_ref().map_or_else(String::new, |l| format!(
                "{}, alpha {:.2} us, {} {units}",
                l.source,
                l.alpha_us,
                gbs(l.beta_us_per_byte, units)
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

/// Text rows behind `# ` headings, as the run's tables.
const PLAIN: TextForm = TextForm {
    head: Some("# "),
    row: "  ",
    trim: false,
};

/// A fit's algorithms: one row each.
const ALGO_COLS: [Col; 7] = [
    left("algo", 13).md("algorithm"),
    right("alpha (us)", 20),
    right("beta (ns/B)", 20),
    right("1/beta GB/s", 12).md("1/beta (GB/s)"),
    right("points", 6),
    left("ranks", 8).around("  ", ""),
    left("collectives", 0),
];

/// A fit's residuals per collective, algorithm and rank count; in text a line of words, no heading.
const RESIDUAL_COLS: [Col; 6] = [
    left("", 15).md("collective"),
    left("", 13).md("algorithm"),
    right("", 3).md("ranks").around(" ", " ranks"),
    right("", 4).md("points").around(" ", " points"),
    right("", 6).md("relative RMS").around("  RMS ", "%"),
    right("", 6).md("max").around("  max ", "%"),
];

/// The predictions; [`MEASURED_COLS`] follow where any was measured.
const PREDICTION_COLS: [Col; 10] = [
    left("path", 12),
    left("collective", 15),
    left("algo", 13).md("algorithm"),
    right("level", 6).md_left(),
    right("size(B)", 12).md("size"),
    right("time(us)", 13).md("time (us)"),
    right("±95%", 10),
    right("algbw", 9).md("algbw (GB/s)"),
    right("busbw", 9).md("busbw (GB/s)"),
    left("bound", 10),
];

const MEASURED_COLS: [Col; 2] = [
    right("measured(us)", 13).md("measured (us)"),
    right("err%", 7).md("error"),
];

const CROSSOVER_COLS: [Col; 5] = [
    left("path", 12),
    left("collective", 15),
    left("latency", 13).md("latency algorithm"),
    right("crossover(B)", 14).md("crossover"),
    left("which", 0).md("").around("  ", ""),
];

const RATIO_COLS: [Col; 6] = [
    left("path", 12),
    left("collective", 15),
    left("algo", 13).md("algorithm"),
    right("level", 6).md_left(),
    right("size(B)", 12).md("size"),
    right("ratio", 8),
];

/// Errors at the largest measured size; in text a sentence per row, no heading.
const ERROR_COLS: [Col; 7] = [
    left("path", 0),
    left("collective", 0),
    left("algorithm", 0),
    right("size", 0).around(" at ", ""),
    right("predicted (us)", 0).around(": predicted ", ""),
    right("measured (us)", 0).around(" us, measured ", ""),
    right("error", 0).around(" us, error ", "%"),
];

/// Two-level or flat, short in text.
fn level(hierarchical: bool) -> Cell {
    if hierarchical {
        Cell::forms("2-lvl", "two-level")
    } else {
        Cell::same("flat")
    }
}

/// A size: bytes in text, with its unit in Markdown.
fn size(bytes: u64) -> Cell {
    Cell::forms(bytes.to_string(), format_size(bytes))
}

/// A list: `a,b` in text, `a, b` in Markdown.
fn list(items: &[String]) -> Cell {
    Cell::forms(items.join(","), items.join(", "))
}

/// What both forms say of one fit.
struct Fit {
    path: String,
    points: usize,
    /// The rank counts measured, `2,3`.
    ranks: String,
    /// Relative RMS and largest relative residual, in %.
    rms_pct: f64,
    max_pct: f64,
    r2: String,
    dof: usize,
    /// gamma ± sd in ns/B, and 1/gamma in the unit asked for, with the unit.
    gamma: String,
    gamma_rate: String,
    algos: Table,
    residuals: Table,
}

impl Fit {
    fn of(f: &PathFit, units: BwUnit) -> Fit {
        Fit {
            path: f.path.clone(),
            points: f.residuals.len(),
            ranks: ranks(f),
            rms_pct: f.rel_rms * 100.0,
            max_pct: f.rel_max * 100.0,
            r2: num(f.r2, 4),
            dof: f.dof,
            gamma: pm(&f.gamma_us_per_byte, 1e3, 4),
            gamma_rate: gamma_rate(f.gamma_us_per_byte.value, units),
            algos: algo_table(f, units),
            residuals: residual_table(f),
        }
    }

    /// The fit's account after its path, worded for text or for Markdown.
    fn account(&self, markdown: bool) -> String {
        let Fit {
            points,
            ranks,
            rms_pct,
            max_pct,
            r2,
            dof,
            ..
        } = self;
        let (r2_name, dof_name) = if markdown {
            ("R²", "degrees of freedom.")
        } else {
            ("R^2", "dof")
        };
        format!("{points} points at {ranks} ranks; relative RMS {rms_pct:.1}%, max {max_pct:.1}%, {r2_name} {r2}, {dof} {dof_name}")
    }
}

/// Every table of a report, built once for both forms (bandwidth in text in the unit asked for, in Markdown
/// in GB/s as the files keep it).
struct Tables {
    fits: Vec<Fit>,
    predictions: Table,
    crossovers: Table,
    ratios: Table,
    errors: Table,
}

impl Tables {
    fn of(r: &Report, units: BwUnit) -> Tables {
        let fits = r.fits.iter().map(|f| Fit::of(f, units)).collect();
        let measured = r.predictions.iter().any(|p| p.measured_us.is_some());
        let mut cols = PREDICTION_COLS.to_vec();
        if measured {
            cols.extend(MEASURED_COLS);
        }
        let predictions = Table {
            cols,
            rows: r
                .predictions
                .iter()
                .map(|p| {
                    let mut row = vec![
                        Cell::same(p.path.as_str()),
                        Cell::same(p.collective.name()),
                        Cell::same(p.algo.as_str()),
                        level(p.hierarchical),
                        size(p.size),
                        // A time resting on a parameter the data did not identify is marked, not passed off.
                        Cell::same(if p.unidentified.is_empty() {
                            format!("{:.2}", p.time_us)
                        } else {
                            format!("{:.2}*", p.time_us)
                        }),
                        Cell::same(if p.unidentified.is_empty() {
                            num(p.ci95_us, 2)
                        } else {
                            "n/a".into()
                        }),
                        bw_cell(p.algbw, units),
                        bw_cell(p.busbw, units),
                        Cell::same(p.bound),
                    ];
                    if measured {
                        let err = p.error_pct.map_or_else(|| "-".into(), |e| format!("{e:+.1}%"));
                        row.push(Cell::same(opt_num(p.measured_us, 2)));
                        row.push(Cell::forms(opt_num(p.error_pct, 1), err));
                    }
                    row
                })
                .collect(),
            // Without the measured columns the last one is padded.
            text: TextForm { trim: true, ..PLAIN },
        };
        let crossovers = Table {
            cols: CROSSOVER_COLS.to_vec(),
            rows: r
                .crossovers
                .iter()
                .map(|c| {
                    let at = c.size.map_or_else(
                        || Cell::same("none"),
                        |x| Cell::forms(format!("{x:.0}"), format_size(x.round() as u64)),
                    );
                    vec![
                        Cell::same(c.path.as_str()),
                        Cell::same(c.collective.name()),
                        Cell::same(c.latency_algo.as_str()),
                        at,
                        Cell::same(c.note.as_str()),
                    ]
                })
                .collect(),
            text: PLAIN,
        };
        let ratios = Table {
            cols: RATIO_COLS.to_vec(),
            rows: r
                .ratios
                .iter()
                .map(|q| {
                    vec![
                        Cell::same(q.path.as_str()),
                        Cell::same(q.collective.name()),
                        Cell::same(q.algo.as_str()),
                        level(q.hierarchical),
                        size(q.size),
                        Cell::same(format!("{:.3}", q.ratio)),
                    ]
                })
                .collect(),
            text: PLAIN,
        };
        let errors = Table {
            cols: ERROR_COLS.to_vec(),
            rows: r
                .largest_errors
                .iter()
                .map(|e| {
                    vec![
                        Cell::same(e.path.as_str()),
                        Cell::same(e.collective.name()),
                        Cell::same(e.algo.as_str()),
                        Cell::same(format_size(e.size)),
                        Cell::same(format!("{:.1} ± {}", e.predicted_us, num(e.ci95_us, 1))),
                        Cell::same(format!("{:.1}", e.measured_us)),
                        Cell::forms(format!("{:+.1}", e.error_pct), format!("{:+.1}%", e.error_pct)),
                    ]
                })
                .collect(),
            text: TextForm {
                head: None,
                row: "#   ",
                trim: false,
            },
        };
        Tables {
            fits,
            predictions,
            crossovers,
            ratios,
            errors,
        }
    }
}

/// A bandwidth in GB/s: in `units` in text, in GB/s in Markdown.
fn bw_cell(gbs: f64, units: BwUnit) -> Cell {
    Cell::forms(format!("{:.4}", units.of_gbs(gbs)), format!("{gbs:.4}"))
}

fn algo_table(f: &PathFit, units: BwUnit) -> Table {
    let rows = f
        .algos
        .iter()
        .map(|a| {
            let rk: Vec<String> = a.rank_counts.iter().map(usize::to_string).collect();
            let cs: Vec<String> = a.collectives.iter().map(|c| c.name().to_string()).collect();
            vec![
                Cell::same(a.algo.name()),
                Cell::same(pm(&a.alpha_us, 1.0, 2)),
                Cell::same(pm(&a.beta_us_per_byte, 1e3, 4)),
                Cell::forms(
                    gbs(a.beta_us_per_byte.value, units),
                    gbs(a.beta_us_per_byte.value, BwUnit::Gbyte),
                ),
                Cell::same(a.points.to_string()),
                list(&rk),
                list(&cs),
            ]
        })
        .collect::<Vec<Vec<Cell>>>();
    let mut cols = ALGO_COLS.to_vec();
    cols[3].text = match units {
        BwUnit::Gbyte => "1/beta GB/s",
        BwUnit::Gbit => "1/beta Gb/s",
    };
    // The per-call column only where a per-call cost was fitted, so fits without one read as before.
    let mut rows = rows;
    if f.algos.iter().any(|a| a.call_us.is_some()) {
        cols.insert(1, right("call (us)", 20));
        for (row, a) in rows.iter_mut().zip(&f.algos) {
            let cell = a.call_us.as_ref().map_or_else(|| "-".to_string(), |c| pm(c, 1.0, 2));
            row.insert(1, Cell::same(cell));
        }
    }
    Table {
        cols,
        rows,
        text: TextForm {
            head: Some("#   "),
            row: "#   ",
            trim: false,
        },
    }
}

fn residual_table(f: &PathFit) -> Table {
    let pct = |x: f64| Cell::forms(format!("{:.1}", x * 100.0), format!("{:.1}%", x * 100.0));
    let rows = residual_groups(f)
        .into_iter()
        .map(|g| {
            vec![
                Cell::same(g.0),
                Cell::same(g.1),
                Cell::same(g.2.to_string()),
                Cell::same(g.3.to_string()),
                pct(g.4),
                pct(g.5),
            ]
        })
        .collect();
    Table {
        cols: RESIDUAL_COLS.to_vec(),
        rows,
        text: TextForm {
            head: None,
            row: "#     ",
            trim: false,
        },
    }
}

/// [`text`] as `collbench run --target-ranks` prints it after its tables: the predictions' column titles in
/// words nccl-tests' parsers do not take for a results header (a line holding both `time` and `busbw`).
pub fn text_after_results(r: &Report, units: BwUnit) -> String {
    text(r, units)
        .lines()
        .map(|l| {
            if l.contains("time(us)") && l.contains("busbw") {
                l.replacen("time(us)", "pred(us)", 1)
                    .replacen("    busbw", &format!(" bus {units}"), 1)
            } else {
                l.to_string()
            }
        })
        .map(|l| l + "\n")
        .collect()
}

/// The text report, bandwidth in `units`.
pub fn text(r: &Report, units: BwUnit) -> String {
    let t = Tables::of(r, units);
    let mut s = String::new();
    let _ = writeln!(s, "# collbench model: fitted to {}", r.sources.join(", "));
    let _ = writeln!(s, "# fit: {}", r.weighting);
    let _ = writeln!(s, "# target: {}", scale_line(r, units));
    for (f, fit) in r.fits.iter().zip(&t.fits) {
        let _ = writeln!(s, "#");
        let _ = writeln!(s, "# path {}: {}", fit.path, fit.account(false));
        table::text(&mut s, &fit.algos);
        let _ = writeln!(s, "#   gamma (ns/B reduced) {} ({})", fit.gamma, fit.gamma_rate);
        let _ = writeln!(s, "#   residuals (fitted - measured) / measured:");
        table::text(&mut s, &fit.residuals);
        for n in &f.notes {
            let _ = writeln!(s, "#   note: {n}");
        }
    }
    let _ = writeln!(s, "#");
    let _ = writeln!(
        s,
        "# predictions at {} (± is the 95% interval from the fit's uncertainty; algbw and busbw in {units})",
        scale_line(r, units)
    );
    table::text(&mut s, &t.predictions);
    if let Some(l) = unidentified_line(r) {
        let _ = writeln!(s, "# {l}");
    }
    if !r.crossovers.is_empty() {
        let _ = writeln!(s, "#");
        let _ = writeln!(s, "# ring vs latency algorithm at {} ranks (flat)", r.target_ranks);
        table::text(&mut s, &t.crossovers);
    }
    if let Some(reference) = &r.reference {
        let _ = writeln!(s, "#");
        let _ = writeln!(
            s,
            "# paths against {reference} at {} ranks: predicted time / {reference}'s",
            r.target_ranks
        );
        table::text(&mut s, &t.ratios);
    }
    if !r.largest_errors.is_empty() {
        let _ = writeln!(s, "#");
        let _ = writeln!(
            s,
            "# measured at {} ranks ({}): error at the largest size",
            r.target_ranks,
            r.measured_sources.join(", ")
        );
        table::text(&mut s, &t.errors);
    }
    s
}

/// The footnote of predictions marked `*`: which parameters the data did not identify.
fn unidentified_line(r: &Report) -> Option<String> {
    let mut which: Vec<String> = Vec::new();
    for p in &r.predictions {
        for u in &p.unidentified {
            let w = format!("{} on {}", u, p.path);
            if !which.contains(&w) {
                which.push(w);
            }
        }
    }
    (!which.is_empty()).then(|| {
        format!(
            "* rests on a parameter the data could not identify ({}; held at 0): not a prediction, and no interval; measure more sizes or rank counts",
            which.join(", ")
        )
    })
}

/// The Markdown report.
pub fn markdown(r: &Report) -> String {
    let units = BwUnit::Gbyte;
    let t = Tables::of(r, units);
    let mut s = String::new();
    let _ = writeln!(s, "# collbench model: predictions at {}\n", scale_line(r, units));
    let _ = writeln!(s, "Fitted to {}; {}.\n", r.sources.join(", "), r.weighting);
    for (f, fit) in r.fits.iter().zip(&t.fits) {
        let _ = writeln!(s, "## Fit of {}\n\n{}\n", fit.path, fit.account(true));
        table::markdown(&mut s, &fit.algos);
        let _ = writeln!(s, "\ngamma (reduction): {} ns/B ({}).\n", fit.gamma, fit.gamma_rate);
        for n in &f.notes {
            let _ = writeln!(s, "- {n}");
        }
        let _ = writeln!(s);
        table::markdown(&mut s, &fit.residuals);
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## Predictions at {}\n", scale_line(r, units));
    table::markdown(&mut s, &t.predictions);
    if let Some(l) = unidentified_line(r) {
        let _ = writeln!(s, "\n{l}");
    }
    if !r.crossovers.is_empty() {
        let _ = writeln!(s, "\n## Ring vs latency algorithm at {} ranks\n", r.target_ranks);
        table::markdown(&mut s, &t.crossovers);
    }
    if let Some(reference) = &r.reference {
        let _ = writeln!(
            s,
            "\n## Paths against {reference} at {} ranks (predicted time ratio)\n",
            r.target_ranks
        );
        table::markdown(&mut s, &t.ratios);
    }
    if !r.largest_errors.is_empty() {
        let _ = writeln!(
            s,
            "\n## Error at the largest measured size ({} ranks, {})\n",
            r.target_ranks,
            r.measured_sources.join(", ")
        );
        table::markdown(&mut s, &t.errors);
    }
    s
}
