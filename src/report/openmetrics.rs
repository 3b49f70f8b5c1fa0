//! OpenMetrics text (the Prometheus exposition format) for monitoring systems: metric families written as
//! gauges only, so the same file reads as OpenMetrics 1.0 (Pushgateway, Prometheus) and as the classic text
//! format node_exporter's textfile collector parses (which knows no state sets or info types). A state is a
//! gauge per state, 1 for the one that holds, 0 for the others; an info is a gauge of 1 with its labels.

use std::fmt::Write;

/// One metric family: its name (with the unit as its suffix where it has one), help, unit and samples.
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: String,
    pub help: String,
    /// OpenMetrics unit (`seconds`, `bytes_per_second`); the name must end with it.
    pub unit: Option<&'static str>,
    pub samples: Vec<Sample>,
}

/// One sample of a family: its labels, in order, and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

impl Family {
    /// A family with no samples yet.
    pub fn new(name: &str, help: &str, unit: Option<&'static str>) -> Family {
        debug_assert!(
            !matches!(unit, Some(u) if !name.ends_with(u)),
            "{name} must end with its unit"
        );
        Family {
            name: name.to_string(),
            help: help.to_string(),
            unit,
            samples: Vec::new(),
        }
    }

    /// Adds a sample; values that are not finite are left out (a gauge of NaN says nothing a reader can use).
    pub fn push(&mut self, labels: Vec<(&'static str, String)>, value: f64) -> &mut Family {
        if value.is_finite() {
            self.samples.push(Sample { labels, value });
        }
        self
    }

    /// One sample per state in `states`, 1 for `current`, 0 for the others (a state set, as a gauge).
    pub fn states(&mut self, labels: Vec<(&'static str, String)>, key: &'static str, states: &[&str], current: &str) {
        for s in states {
            let mut l = labels.clone();
            l.push((key, (*s).to_string()));
            self.push(l, f64::from(u8::from(*s == current)));
        }
    }
}

/// Escapes a label value as both formats require: backslash, double quote and line feed.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text escapes backslash and line feed.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A value as the formats write it: integers without a fraction, others in Rust's shortest exact form.
fn value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// The exposition of `families`, ending with `# EOF`. Families without samples are left out.
pub fn render(families: &[Family]) -> String {
    let mut out = String::new();
    for f in families.iter().filter(|f| !f.samples.is_empty()) {
        let _ = writeln!(out, "# HELP {} {}", f.name, escape_help(&f.help));
        let _ = writeln!(out, "# TYPE {} gauge", f.name);
        if let Some(u) = f.unit {
            let _ = writeln!(out, "# UNIT {} {u}", f.name);
        }
        for s in &f.samples {
            out.push_str(&f.name);
            if !s.labels.is_empty() {
                let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
                let _ = write!(out, "{{{}}}", labels.join(","));
            }
            let _ = writeln!(out, " {}", value(s.value));
        }
    }
    out.push_str("# EOF\n");
    out
}

/// `collbench_build_info{version="..."} 1`: which collbench wrote the file.
pub fn build_info() -> Family {
    let mut f = Family::new(
        "collbench_build_info",
        "The collbench version that wrote this file.",
        None,
    );
    f.push(vec![("version", env!("CARGO_PKG_VERSION").to_string())], 1.0);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped_and_the_text_ends_with_eof() {
        let mut f = Family::new("collbench_x_seconds", "A line\nand a \\ backslash.", Some("seconds"));
        f.push(vec![("check", "a \"quoted\" \\ name\nnext".into())], 1.5);
        f.push(vec![("check", "nan".into())], f64::NAN);
        let t = render(&[f, Family::new("collbench_empty", "none", None)]);
        assert_eq!(
            t,
            "# HELP collbench_x_seconds A line\\nand a \\\\ backslash.\n# TYPE collbench_x_seconds gauge\n\
             # UNIT collbench_x_seconds seconds\n\
             collbench_x_seconds{check=\"a \\\"quoted\\\" \\\\ name\\nnext\"} 1.5\n# EOF\n"
        );
    }

    #[test]
    fn a_state_set_is_one_gauge_per_state() {
        let mut f = Family::new("collbench_v", "verdict", None);
        f.states(
            vec![("path", "tcp".into())],
            "verdict",
            &["pass", "warn", "fail"],
            "warn",
        );
        let t = render(&[f]);
        assert!(t.contains("collbench_v{path=\"tcp\",verdict=\"pass\"} 0\n"), "{t}");
        assert!(t.contains("collbench_v{path=\"tcp\",verdict=\"warn\"} 1\n"), "{t}");
        assert!(t.contains("collbench_v{path=\"tcp\",verdict=\"fail\"} 0\n"), "{t}");
        assert!(render(&[build_info()]).contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))));
    }
}
