//! The comparison as text (`#` header lines like the rest of collbench), Markdown and JSON.

use serde_json::{json, Value};

use super::diff::{Change, Diff};
use super::input::Key;
use crate::units::BwUnit;

/// What the outputs say about the comparison itself.
pub struct Header<'a> {
    pub old: &'a str,
    pub new: &'a str,
    pub threshold_pct: f64,
}

/// A figure, or `n/a` where there is none (a change relative to 0, as busbw at 0 bytes).
fn num(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        "n/a".into()
    }
}

/// A signed change, or `n/a` where there is none.
fn signed(v: f64) -> String {
    if v.is_finite() {
        format!("{v:+.1}")
    } else {
        "n/a".into()
    }
}

fn key_text(k: &Key) -> String {
    format!("{} {} {} {} {} B", k.path, k.collective, k.dtype, k.redop, k.size)
}

/// One compared point's cells, busbw in `units`.
fn cells(c: &Change, units: BwUnit) -> [String; 14] {
    [
        c.key.path.clone(),
        c.key.collective.clone(),
        c.key.dtype.clone(),
        c.key.redop.clone(),
        c.key.size.to_string(),
        c.nranks.to_string(),
        num(c.old.time_us, 2),
        num(c.old.ci95_us, 2),
        num(c.new.time_us, 2),
        num(c.new.ci95_us, 2),
        signed(c.time_pct),
        num(units.of_gbs(c.old.busbw), 3),
        num(units.of_gbs(c.new.busbw), 3),
        signed(c.busbw_pct),
    ]
}

const COLUMNS: [&str; 15] = [
    "path",
    "collective",
    "type",
    "redop",
    "size(B)",
    "nranks",
    "old(us)",
    "+-ci95",
    "new(us)",
    "+-ci95",
    "time%",
    "old_busbw",
    "new_busbw",
    "busbw%",
    "verdict",
];

/// The human table: every compared point, then what could not be compared, then the regressions; busbw in
/// `units`.
pub fn text(h: &Header, d: &Diff, units: BwUnit) -> String {
    let mut rows: Vec<Vec<String>> = vec![COLUMNS.iter().map(|c| c.to_string()).collect()];
    for c in &d.changes {
        let mut r = cells(c, units).to_vec();
        r.push(c.verdict.word().into());
        rows.push(r);
    }
    let widths: Vec<usize> = (0..COLUMNS.len())
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let line = |r: &[String]| -> String {
        let cols: Vec<String> = r.iter().zip(&widths).map(|(c, w)| format!("{c:>w$}")).collect();
        cols.join("  ")
    };
    let mut out = String::new();
    out += &format!("# collbench compare: old {} -> new {}\n", h.old, h.new);
    out += &format!(
        "# regression: new time more than {}% longer and the 95% intervals of the times do not overlap\n",
        h.threshold_pct
    );
    out += &format!("# times in us, busbw in {units}\n#\n");
    out += &format!("# {}\n", line(&rows[0]));
    for r in &rows[1..] {
        out += &format!("  {}\n", line(r));
    }
    for k in &d.only_old {
        out += &format!("# only in old (not compared): {}\n", key_text(k));
    }
    for k in &d.only_new {
        out += &format!("# only in new (not compared): {}\n", key_text(k));
    }
    for (k, o, n) in &d.nranks_differ {
        out += &format!(
            "# not compared, different rank counts (old {o}, new {n}): {}\n",
            key_text(k)
        );
    }
    let regs: Vec<&Change> = d.regressions().collect();
    out += &format!("#\n# {} of {} compared points regressed\n", regs.len(), d.changes.len());
    for c in regs {
        out += &format!(
            "# REGRESSED: {}: time {} -> {} us ({}%), busbw {} -> {} {units} ({}%)\n",
            key_text(&c.key),
            num(c.old.time_us, 2),
            num(c.new.time_us, 2),
            signed(c.time_pct),
            num(units.of_gbs(c.old.busbw), 3),
            num(units.of_gbs(c.new.busbw), 3),
            signed(c.busbw_pct),
        );
    }
    out
}

/// The same table as Markdown.
pub fn markdown(h: &Header, d: &Diff) -> String {
    let regs = d.regressions().count();
    let mut out = format!(
        "## collbench compare\n\nOld: `{}`, new: `{}`. A regression is a time more than {}% longer whose 95% \
         interval does not overlap the old one.\n\n**{regs} of {} compared points regressed.**\n\n",
        h.old,
        h.new,
        h.threshold_pct,
        d.changes.len()
    );
    out += &format!("| {} |\n", COLUMNS.join(" | "));
    out += &format!("|{}\n", "---|".repeat(COLUMNS.len()));
    for c in &d.changes {
        let verdict = match c.verdict {
            super::diff::Verdict::Regressed => format!("**{}**", c.verdict.word()),
            _ => c.verdict.word().to_string(),
        };
        // Files keep GB/s, as the JSON does.
        out += &format!("| {} | {verdict} |\n", cells(c, BwUnit::Gbyte).join(" | "));
    }
    let mut notes = Vec::new();
    notes.extend(d.only_old.iter().map(|k| format!("- only in old: {}", key_text(k))));
    notes.extend(d.only_new.iter().map(|k| format!("- only in new: {}", key_text(k))));
    notes.extend(
        d.nranks_differ
            .iter()
            .map(|(k, o, n)| format!("- different rank counts (old {o}, new {n}): {}", key_text(k))),
    );
    if !notes.is_empty() {
        out += &format!("\nNot compared:\n\n{}\n", notes.join("\n"));
    }
    out
}

fn key_json(k: &Key) -> Value {
    json!({"path": k.path, "collective": k.collective, "type": k.dtype, "redop": k.redop, "size": k.size})
}

/// A number for JSON: `null` when it is not finite (JSON has no NaN or infinity).
fn jnum(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        Value::Null
    }
}

/// Every compared point with its verdict, what was not compared, and the regression count.
pub fn json(h: &Header, d: &Diff) -> Value {
    let points: Vec<Value> = d
        .changes
        .iter()
        .map(|c| {
            let mut v = key_json(&c.key);
            let side = |e: &crate::report::paths_compared::Estimate| {
                json!({"time_us": jnum(e.time_us), "ci95_us": jnum(e.ci95_us), "bus_bw": jnum(e.busbw),
                       "repeats": e.repeats})
            };
            v["nranks"] = json!(c.nranks);
            v["old"] = side(&c.old);
            v["new"] = side(&c.new);
            v["time_change_pct"] = jnum(c.time_pct);
            v["busbw_change_pct"] = jnum(c.busbw_pct);
            v["significant"] = json!(c.significant);
            v["verdict"] = json!(c.verdict);
            v
        })
        .collect();
    json!({
        "old": h.old,
        "new": h.new,
        "threshold_pct": h.threshold_pct,
        "points": points,
        "only_old": d.only_old.iter().map(key_json).collect::<Vec<_>>(),
        "only_new": d.only_new.iter().map(key_json).collect::<Vec<_>>(),
        "nranks_differ": d.nranks_differ.iter().map(|(k, o, n)| {
            let mut v = key_json(k);
            v["old_nranks"] = json!(o);
            v["new_nranks"] = json!(n);
            v
        }).collect::<Vec<_>>(),
        "regressions": d.regressions().count(),
    })
}
