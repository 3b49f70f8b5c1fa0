//! The unit bandwidth is printed in: GB/s (10^9 bytes/s, as nccl-tests prints) or Gbit/s (10^9 bits/s, as
//! perftest's `--report_gbits` and link speeds are given). Figures are kept in GB/s everywhere; only
//! printers convert, through [`BwUnit`], so every table says the same thing the same way.

use std::fmt;
use std::str::FromStr;

/// A bandwidth unit for human output (`--units`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BwUnit {
    /// 10^9 bytes per second (nccl-tests' GB/s): the default.
    #[default]
    Gbyte,
    /// 10^9 bits per second: 8 x the GB/s figure.
    Gbit,
}

/// The values `--units` takes, for help text and completions.
pub const UNITS: &[&str] = &["gbyte", "gbit"];

impl BwUnit {
    /// The figure in this unit of `gbs` GB/s.
    pub fn of_gbs(self, gbs: f64) -> f64 {
        match self {
            BwUnit::Gbyte => gbs,
            BwUnit::Gbit => gbs * 8.0,
        }
    }

    /// The figure in this unit of `mbs` MB/s (10^6 bytes/s, OSU's unit): MB/s or Mbit/s.
    pub fn of_mbs(self, mbs: f64) -> f64 {
        self.of_gbs(mbs)
    }

    /// How the unit is printed: `GB/s` or `Gb/s` (the same width, so tables keep their columns).
    pub fn label(self) -> &'static str {
        match self {
            BwUnit::Gbyte => "GB/s",
            BwUnit::Gbit => "Gb/s",
        }
    }

    /// The unit a thousand times smaller: `MB/s` or `Mb/s` (OSU's columns).
    pub fn mega_label(self) -> &'static str {
        match self {
            BwUnit::Gbyte => "MB/s",
            BwUnit::Gbit => "Mb/s",
        }
    }

    /// What the unit is, for a table's header: `GB/s = 1e9 bytes/s` or `Gb/s = 1e9 bits/s`.
    pub fn definition(self) -> &'static str {
        match self {
            BwUnit::Gbyte => "GB/s = 1e9 bytes/s",
            BwUnit::Gbit => "Gb/s = 1e9 bits/s",
        }
    }

    /// The flag value naming it (`gbyte`, `gbit`).
    pub fn name(self) -> &'static str {
        match self {
            BwUnit::Gbyte => "gbyte",
            BwUnit::Gbit => "gbit",
        }
    }
}

impl BwUnit {
    /// `text` with every figure written `N GB/s` (and an interval right after it, `N GB/s [LO, HI]`) in this
    /// unit, each to as many decimals as it had. For lines made once in GB/s and stored so (a preflight's
    /// checks, whose JSON keeps GB/s) and printed in the unit asked for.
    pub fn restate(self, text: &str) -> String {
        const GBS: &str = " GB/s";
        if self == BwUnit::Gbyte {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len() + 16);
        let mut rest = text;
        while let Some(at) = rest.find(GBS) {
            let (before, after) = rest.split_at(at);
            let start = number_start(before);
            match before[start..].parse::<f64>() {
                Ok(v) if start < before.len() => {
                    out.push_str(&before[..start]);
                    out.push_str(&self.figure(v, &before[start..]));
                    out.push(' ');
                    out.push_str(self.label());
                    rest = &after[GBS.len()..];
                    // `[LO, HI]`: the interval of the figure before it, in the same unit.
                    if let Some((lo, hi, len)) = interval(rest) {
                        out.push_str(&format!(" [{}, {}]", self.figure_of(lo), self.figure_of(hi)));
                        rest = &rest[len..];
                    }
                }
                _ => {
                    out.push_str(before);
                    out.push_str(GBS);
                    rest = &after[GBS.len()..];
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// `gbs` (written `shown`) in this unit, to as many decimals as `shown` has.
    fn figure(self, gbs: f64, shown: &str) -> String {
        let decimals = shown.split_once('.').map_or(0, |(_, d)| d.len());
        format!("{:.decimals$}", self.of_gbs(gbs))
    }

    fn figure_of(self, shown: &str) -> String {
        shown
            .parse::<f64>()
            .map_or_else(|_| shown.to_string(), |v| self.figure(v, shown))
    }
}

/// Where the plain decimal number that ends `s` starts (`s.len()` when none does).
fn number_start(s: &str) -> usize {
    let b = s.as_bytes();
    let mut i = b.len();
    while i > 0 && (b[i - 1].is_ascii_digit() || b[i - 1] == b'.') {
        i -= 1;
    }
    if i > 0 && b[i - 1] == b'-' {
        i -= 1;
    }
    i
}

/// ` [LO, HI]` at the start of `s`: the two numbers as written and the length taken.
fn interval(s: &str) -> Option<(&str, &str, usize)> {
    let inner = s.strip_prefix(" [")?;
    let end = inner.find(']')?;
    let (lo, hi) = inner[..end].split_once(", ")?;
    (lo.parse::<f64>().is_ok() && hi.parse::<f64>().is_ok()).then_some((lo, hi, 2 + end + 1))
}

impl fmt::Display for BwUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl FromStr for BwUnit {
    type Err = String;

    /// `gbyte` (or `GB/s`, `GBps`, `bytes`) and `gbit` (or `Gbit/s`, `Gb/s`, `bits`), any case.
    fn from_str(s: &str) -> Result<Self, String> {
        // `Gb/s` and `GB/s` differ only in case: told apart before case is ignored.
        if s == "Gb/s" {
            return Ok(BwUnit::Gbit);
        }
        match s.to_ascii_lowercase().as_str() {
            "gbyte" | "gbytes" | "gb/s" | "gbps" | "byte" | "bytes" => Ok(BwUnit::Gbyte),
            "gbit" | "gbits" | "gbit/s" | "bit" | "bits" => Ok(BwUnit::Gbit),
            _ => Err(format!(
                "'{s}' is not a bandwidth unit: give gbyte (GB/s, 10^9 bytes/s, the default) or gbit (Gbit/s, \
                 10^9 bits/s)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gbit_is_eight_times_gbyte_and_both_parse() {
        assert_eq!(BwUnit::Gbit.of_gbs(1.25), 10.0);
        assert_eq!(BwUnit::Gbyte.of_gbs(1.25), 1.25);
        assert_eq!("gbit".parse::<BwUnit>(), Ok(BwUnit::Gbit));
        assert_eq!("Gbit/s".parse::<BwUnit>(), Ok(BwUnit::Gbit));
        assert_eq!("GB/s".parse::<BwUnit>(), Ok(BwUnit::Gbyte));
        assert_eq!("Gb/s".parse::<BwUnit>(), Ok(BwUnit::Gbit));
        assert_eq!(BwUnit::default(), BwUnit::Gbyte);
        assert_eq!(BwUnit::Gbit.label().len(), BwUnit::Gbyte.label().len());
        for u in UNITS {
            assert_eq!(u.parse::<BwUnit>().map(BwUnit::name), Ok(*u));
        }
        assert!("mbit".parse::<BwUnit>().unwrap_err().contains("gbyte"));
    }

    #[test]
    fn restate_converts_every_gbs_figure_and_its_interval_and_nothing_else() {
        let line = "FAIL: tcp@lo all_reduce busbw: 1.250 GB/s [1.125, 1.375] vs >= 2.188 GB/s (e.toml line 3: 70% of \
                    3.125 GB/s (link speed of eth0 (25.0 Gbit/s))): 3 links at 16 MiB";
        assert_eq!(BwUnit::Gbyte.restate(line), line);
        assert_eq!(
            BwUnit::Gbit.restate(line),
            "FAIL: tcp@lo all_reduce busbw: 10.000 Gb/s [9.000, 11.000] vs >= 17.504 Gb/s (e.toml line 3: 70% of \
             25.000 Gb/s (link speed of eth0 (25.0 Gbit/s))): 3 links at 16 MiB"
        );
        // A unit after no number, or an interval that is not one, is left as it is.
        assert_eq!(BwUnit::Gbit.restate("in GB/s [a, b]"), "in GB/s [a, b]");
        assert_eq!(BwUnit::Gbit.restate("x GB/s"), "x GB/s");
        assert_eq!(BwUnit::Gbit.restate("2 GB/s [1, x]"), "16 Gb/s [1, x]");
        assert_eq!(BwUnit::Gbit.restate("NaN GB/s; 0.5 GB/s"), "NaN GB/s; 4.0 Gb/s");
        assert_eq!(BwUnit::Gbit.restate(""), "");
    }
}
