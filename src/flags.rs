//! Small parsers shared by the option parts: each checks one command-line value and names its flag in the
//! error, so every part reports bad input the same way.

use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::sizes::parse_size;

/// Longest `-T`: one week. Deadlines are `Instant + timeout`, which must not overflow.
pub const MAX_TIMEOUT_SECS: f64 = 7.0 * 24.0 * 3600.0;

/// Parses one size flag, naming it in the error.
pub fn size_flag(flag: &str, value: &str) -> Result<u64> {
    parse_size(value).map_err(|e| Error::usage(flag, e))
}

/// `--units`: the unit bandwidth is printed in; the error names the flag.
pub fn units_flag(value: &str) -> Result<crate::units::BwUnit> {
    value.parse().map_err(|e| Error::usage("--units", e))
}

/// clap's value parser for a count (`-n`, `-w`, `--np`, `-r`, ...): a negative value gets a message that says
/// so, where clap alone would call `-1` an unexpected argument. Use with `allow_negative_numbers`.
pub fn count<T: FromStr>(value: &str) -> std::result::Result<T, String>
where
    T::Err: std::fmt::Display,
{
    let v = value.trim();
    if v.starts_with('-') && v[1..].parse::<f64>().is_ok() {
        return Err(format!("'{value}' is negative; give a whole number, 0 or more"));
    }
    v.parse()
        .map_err(|e| format!("'{value}' is not a whole number that fits ({e}); give a count such as 20"))
}

/// A comma list of names (already split by clap) or `all`, duplicates dropped, order kept.
pub fn parse_list<T>(flag: &str, items: &[String], all: &[T]) -> Result<Vec<T>>
where
    T: FromStr<Err = String> + Clone + PartialEq,
{
    if items.is_empty() {
        return Err(Error::usage(flag, "give at least one name, or all"));
    }
    let mut out = Vec::new();
    for item in items.iter().map(|i| i.trim()) {
        if item.is_empty() {
            return Err(Error::usage(
                flag,
                "has an empty name in its list; separate names with single commas",
            ));
        }
        let parsed = if item.eq_ignore_ascii_case("all") {
            all.to_vec()
        } else {
            vec![item.parse().map_err(|e| Error::usage(flag, e))?]
        };
        for t in parsed {
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    Ok(out)
}

/// A timeout flag as a deadline: positive, finite and at most [`MAX_TIMEOUT_SECS`].
pub fn timeout(flag: &str, secs: f64) -> Result<Duration> {
    if !(secs > 0.0 && secs <= MAX_TIMEOUT_SECS) {
        return Err(Error::usage(
            flag,
            format!(
                "must be more than 0 and at most {MAX_TIMEOUT_SECS} seconds (got {secs}); \
                 every wait has a deadline, so pick a generous one rather than none"
            ),
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}
