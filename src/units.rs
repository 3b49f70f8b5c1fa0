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

    /// The flag value naming it (`gbyte`, `gbit`).
    pub fn name(self) -> &'static str {
        match self {
            BwUnit::Gbyte => "gbyte",
            BwUnit::Gbit => "gbit",
        }
    }
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
}
