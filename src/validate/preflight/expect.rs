//! The expectations file (`--expect FILE`, TOML): per path and collective, a minimum busbw, the most a
//! latency may be at given sizes, the most the coefficient of variation may be. Every error names the file,
//! the line and the key, and is a usage error (exit 2).

use serde::Deserialize;
use toml::Spanned;

use crate::collective::Collective;
use crate::error::{Error, Result};
use crate::sizes::parse_size;

/// The collectives the preflight plan measures, so the only ones an expectation may name.
pub const PLANNED: [Collective; 2] = [Collective::AllReduce, Collective::AllGather];

/// A minimum bus bandwidth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MinBusbw {
    /// GB/s (1e9 bytes/s).
    Gbs(f64),
    /// Percent of the path's line rate.
    PctOfLine(f64),
}

/// Which latency figure a limit applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyStat {
    /// The 99th percentile of iteration times (slowest rank).
    P99,
    /// The reported time (the slowest rank's mean).
    Time,
}

impl LatencyStat {
    /// The word in check names.
    pub fn word(self) -> &'static str {
        match self {
            LatencyStat::P99 => "p99",
            LatencyStat::Time => "time",
        }
    }
}

/// A limit on all_reduce latency at one size.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyMax {
    pub line: usize,
    pub size: u64,
    pub stat: LatencyStat,
    pub max_us: f64,
}

/// One `[[expect]]` entry, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub line: usize,
    /// `*` or a path as `--transport` names it (`tcp`, `tcp@eth0`, `mpi`).
    pub path: String,
    /// `None`: every planned collective.
    pub collective: Option<Collective>,
    pub min_busbw: Option<(MinBusbw, usize)>,
    pub max_cv: Option<(f64, usize)>,
    pub latency: Vec<LatencyMax>,
}

/// A parsed expectations file.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Expectations {
    /// The file as the user named it.
    pub file: String,
    /// Entries in file order; a later one overrides an earlier one where both set the same thing.
    pub entries: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    expect: Vec<Spanned<RawEntry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    path: Option<Spanned<String>>,
    collective: Option<Spanned<String>>,
    min_busbw: Option<Spanned<toml::Value>>,
    max_cv: Option<Spanned<toml::Value>>,
    #[serde(default)]
    latency: Vec<Spanned<RawLatency>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLatency {
    size: Spanned<toml::Value>,
    max_p99: Option<Spanned<toml::Value>>,
    max_time: Option<Spanned<toml::Value>>,
}

/// Reads and parses `path`; `paths` are the path names an entry may use besides `*`.
pub fn read(path: &std::path::Path, paths: &[String]) -> Result<Expectations> {
    let shown = path.display().to_string();
    let text = crate::input::read_to_string(path, MAX_FILE_BYTES)
        .map_err(|e| Error::usage("--expect", format!("the expectations file: {e}; check the path")))?;
    parse(&text, &shown, paths)
}

/// The largest expectations file read (1 MiB, about 30,000 entries): far more than any cluster needs, and
/// small enough that a wrong path (a log, a device) is refused at once rather than parsed for minutes.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// The byte offsets where each line of a text starts, so a span's line is a binary search: counting the
/// newlines before every key would make a file of n entries cost n^2.
struct Lines(Vec<usize>);

impl Lines {
    fn of(text: &str) -> Lines {
        let starts = std::iter::once(0)
            .chain(
                text.bytes()
                    .enumerate()
                    .filter(|&(_, b)| b == b'\n')
                    .map(|(i, _)| i + 1),
            )
            .collect();
        Lines(starts)
    }

    /// 1-based line of byte offset `at`.
    fn of_offset(&self, at: usize) -> usize {
        self.0.partition_point(|&start| start <= at)
    }
}

/// Parses the text of an expectations file named `file`.
pub fn parse(text: &str, file: &str, paths: &[String]) -> Result<Expectations> {
    let at = |line: usize| format!("{file} line {line}");
    let lines = Lines::of(text);
    let line_of = |at: usize| lines.of_offset(at);
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(s.start));
        Error::usage(
            at(line),
            format!("{}; see launch/preflight-expect.toml for the keys", e.message().trim()),
        )
    })?;
    let mut entries = Vec::new();
    for e in raw.expect {
        let entry_line = line_of(e.span().start);
        let e = e.into_inner();
        let line = |s: std::ops::Range<usize>| line_of(s.start);
        let path = match &e.path {
            None => "*".to_string(),
            Some(p) if p.get_ref() == "*" || paths.contains(p.get_ref()) => p.get_ref().clone(),
            Some(p) => {
                return Err(Error::usage(
                    at(line(p.span())),
                    format!(
                        "key `path`: '{}' is not a path this preflight measures; use * or one of: {}",
                        p.get_ref(),
                        paths.join(", ")
                    ),
                ))
            }
        };
        let collective = match &e.collective {
            None => None,
            Some(c) if c.get_ref() == "*" => None,
            Some(c) => {
                let l = line(c.span());
                let coll: Collective = c
                    .get_ref()
                    .parse()
                    .map_err(|m: String| Error::usage(at(l), format!("key `collective`: {m}")))?;
                if !PLANNED.contains(&coll) {
                    return Err(Error::usage(
                        at(l),
                        format!(
                            "key `collective`: {coll} is not in the preflight plan; use all_reduce, all_gather or *"
                        ),
                    ));
                }
                Some(coll)
            }
        };
        let min_busbw = e
            .min_busbw
            .as_ref()
            .map(|v| {
                let l = line(v.span());
                busbw(v.get_ref())
                    .map(|b| (b, l))
                    .map_err(|m| Error::usage(at(l), format!("key `min_busbw`: {m}")))
            })
            .transpose()?;
        let max_cv = e
            .max_cv
            .as_ref()
            .map(|v| {
                let l = line(v.span());
                match number(v.get_ref()) {
                    Some(x) if x > 0.0 && x.is_finite() => Ok((x, l)),
                    _ => Err(Error::usage(
                        at(l),
                        "key `max_cv`: expected a positive number, the most the standard deviation of iteration \
                         times may be as a fraction of their mean (e.g. 0.25)",
                    )),
                }
            })
            .transpose()?;
        let mut latency = Vec::new();
        for l in &e.latency {
            let ll = line_of(l.span().start);
            if collective == Some(Collective::AllGather) {
                return Err(Error::usage(
                    at(ll),
                    "key `latency`: the plan measures latency with all_reduce only; put it in an entry for \
                     all_reduce or *",
                ));
            }
            let l = l.get_ref();
            let sl = line(l.size.span());
            let size = match l.size.get_ref() {
                toml::Value::Integer(i) if *i >= 0 => *i as u64,
                toml::Value::String(s) => {
                    parse_size(s).map_err(|m| Error::usage(at(sl), format!("key `size`: {m}")))?
                }
                _ => {
                    return Err(Error::usage(
                        at(sl),
                        "key `size`: expected bytes, a whole number or a string such as \"64K\"",
                    ))
                }
            };
            let given = [(&l.max_p99, LatencyStat::P99), (&l.max_time, LatencyStat::Time)];
            let mut any = false;
            for (v, stat) in given {
                if let Some(v) = v {
                    let vl = line(v.span());
                    let max_us = duration_us(v.get_ref())
                        .map_err(|m| Error::usage(at(vl), format!("key `max_{}`: {m}", stat.word())))?;
                    latency.push(LatencyMax {
                        line: vl,
                        size,
                        stat,
                        max_us,
                    });
                    any = true;
                }
            }
            if !any {
                return Err(Error::usage(
                    at(ll),
                    "key `latency`: an entry needs max_p99 or max_time (e.g. max_p99 = \"500us\")",
                ));
            }
        }
        entries.push(Entry {
            line: entry_line,
            path,
            collective,
            min_busbw,
            max_cv,
            latency,
        });
    }
    Ok(Expectations {
        file: file.to_string(),
        entries,
    })
}

fn number(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// Splits "12.5 GB/s" into 12.5 and "GB/s".
fn split_unit(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'))
        .unwrap_or(s.len());
    // An exponent marker with nothing numeric after it belongs to the unit.
    let (num, unit) = s.split_at(end);
    let x: f64 = num.trim().parse().ok()?;
    Some((x, unit.trim()))
}

/// A busbw minimum: a number (GB/s), "N GB/s", "N Gbit/s", "N MB/s" or "N%" of the line rate.
fn busbw(v: &toml::Value) -> std::result::Result<MinBusbw, String> {
    const HOW: &str =
        "expected GB/s as a number, or a string such as \"12.5 GB/s\", \"100 Gbit/s\" or \"70%\" (of the \
                       line rate)";
    let b = match v {
        toml::Value::String(s) => {
            let (x, unit) = split_unit(s).ok_or_else(|| format!("'{s}' is not a bandwidth; {HOW}"))?;
            match unit.to_ascii_lowercase().as_str() {
                "%" => {
                    if !(x > 0.0 && x <= 100.0) {
                        return Err(format!(
                            "'{s}': a percentage of the line rate is more than 0 and at most 100"
                        ));
                    }
                    MinBusbw::PctOfLine(x)
                }
                "gb/s" | "gbyte/s" => MinBusbw::Gbs(x),
                "mb/s" => MinBusbw::Gbs(x / 1e3),
                "gbit/s" | "gb/s " | "gbps" => MinBusbw::Gbs(x / 8.0),
                other => return Err(format!("unknown unit '{other}' in '{s}'; {HOW}")),
            }
        }
        other => MinBusbw::Gbs(number(other).ok_or_else(|| HOW.to_string())?),
    };
    match b {
        MinBusbw::Gbs(x) if !(x > 0.0 && x.is_finite()) => Err(format!("must be more than 0 GB/s; {HOW}")),
        b => Ok(b),
    }
}

/// A duration in microseconds: a number (us), or a string "500us", "1.5ms", "0.01s", "800ns".
fn duration_us(v: &toml::Value) -> std::result::Result<f64, String> {
    const HOW: &str = "expected microseconds as a number, or a string such as \"500us\", \"2ms\" or \"0.1s\"";
    let us = match v {
        toml::Value::String(s) => {
            let (x, unit) = split_unit(s).ok_or_else(|| format!("'{s}' is not a duration; {HOW}"))?;
            let scale = match unit {
                "ns" => 1e-3,
                "us" | "µs" => 1.0,
                "ms" => 1e3,
                "s" => 1e6,
                other => return Err(format!("unknown unit '{other}' in '{s}'; {HOW}")),
            };
            x * scale
        }
        other => number(other).ok_or_else(|| HOW.to_string())?,
    };
    if us > 0.0 && us.is_finite() {
        Ok(us)
    } else {
        Err(format!("must be more than 0; {HOW}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> Vec<String> {
        vec!["tcp".into(), "tcp@eth0".into()]
    }

    fn err(text: &str) -> (String, String) {
        match parse(text, "x.toml", &paths()) {
            Err(Error::Usage { flag, message }) => (flag, message),
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn a_valid_file_parses_with_units_and_lines() {
        let text = "# comment\n[[expect]]\nmin_busbw = \"70%\"\nmax_cv = 0.3\n\n[[expect]]\npath = \"tcp@eth0\"\n\
                    collective = \"all_reduce\"\nmin_busbw = \"100 Gbit/s\"\nlatency = [\n  { size = 8, max_p99 = \
                    \"1.5ms\" },\n  { size = \"64K\", max_time = 300 },\n]\n";
        let e = parse(text, "x.toml", &paths()).unwrap();
        assert_eq!(e.entries.len(), 2);
        assert_eq!(e.entries[0].path, "*");
        assert_eq!(e.entries[0].collective, None);
        assert_eq!(e.entries[0].min_busbw, Some((MinBusbw::PctOfLine(70.0), 3)));
        assert_eq!(e.entries[0].max_cv, Some((0.3, 4)));
        let b = &e.entries[1];
        assert_eq!(
            (b.path.as_str(), b.collective),
            ("tcp@eth0", Some(Collective::AllReduce))
        );
        assert_eq!(b.min_busbw, Some((MinBusbw::Gbs(12.5), 9)));
        assert_eq!(
            b.latency,
            vec![
                LatencyMax {
                    line: 11,
                    size: 8,
                    stat: LatencyStat::P99,
                    max_us: 1500.0
                },
                LatencyMax {
                    line: 12,
                    size: 64 << 10,
                    stat: LatencyStat::Time,
                    max_us: 300.0
                },
            ]
        );
        assert_eq!(parse("", "x.toml", &paths()).unwrap().entries, vec![]);
    }

    #[test]
    fn an_unknown_key_names_file_line_and_key() {
        let (flag, msg) = err("[[expect]]\nmin_busbw = 1\nmax_busbw = 3\n");
        assert_eq!(flag, "x.toml line 3");
        assert!(msg.contains("max_busbw"), "{msg}");
        let (flag, msg) = err("[tuning]\nx = 1\n");
        assert_eq!(flag, "x.toml line 1");
        assert!(msg.contains("tuning"), "{msg}");
    }

    #[test]
    fn a_bad_unit_names_the_key_and_the_units() {
        let (flag, msg) = err("[[expect]]\n\nmin_busbw = \"12 furlongs\"\n");
        assert_eq!(flag, "x.toml line 3");
        assert!(
            msg.contains("min_busbw") && msg.contains("furlongs") && msg.contains("Gbit/s"),
            "{msg}"
        );
        let (flag, msg) = err("[[expect]]\nlatency = [{ size = 8, max_p99 = \"3 fortnights\" }]\n");
        assert_eq!(flag, "x.toml line 2");
        assert!(msg.contains("max_p99") && msg.contains("fortnights"), "{msg}");
        let (_, msg) = err("[[expect]]\nmin_busbw = \"120%\"\n");
        assert!(msg.contains("at most 100"), "{msg}");
        let (_, msg) = err("[[expect]]\nmax_cv = -1\n");
        assert!(msg.contains("max_cv"), "{msg}");
    }

    #[test]
    fn unknown_paths_and_collectives_are_refused() {
        let (flag, msg) = err("[[expect]]\npath = \"tcp@eth9\"\n");
        assert_eq!(flag, "x.toml line 2");
        assert!(msg.contains("tcp@eth9") && msg.contains("tcp@eth0"), "{msg}");
        let (_, msg) = err("[[expect]]\ncollective = \"broadcast\"\n");
        assert!(msg.contains("not in the preflight plan"), "{msg}");
        let (_, msg) = err("[[expect]]\ncollective = \"allfoo\"\n");
        assert!(msg.contains("unknown collective"), "{msg}");
        let (_, msg) = err("[[expect]]\ncollective = \"all_gather\"\nlatency = [{ size = 8, max_p99 = 5 }]\n");
        assert!(msg.contains("all_reduce only"), "{msg}");
    }

    #[test]
    fn the_shipped_example_parses() {
        let text = include_str!("../../../launch/preflight-expect.toml");
        let e = parse(text, "launch/preflight-expect.toml", &["tcp".into()]).unwrap();
        assert_eq!(e.entries.len(), 3);
        assert_eq!(e.entries[0].min_busbw.map(|b| b.0), Some(MinBusbw::PctOfLine(70.0)));
        assert_eq!(e.entries[1].latency.len(), 2);
        assert_eq!(e.entries[2].min_busbw.map(|b| b.0), Some(MinBusbw::Gbs(0.01)));
    }

    #[test]
    fn lines_are_found_by_offset_as_counting_newlines_would() {
        let text = "a\nbc\n\nd";
        let lines = Lines::of(text);
        for at in 0..=text.len() + 2 {
            let counted = text[..at.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1;
            assert_eq!(lines.of_offset(at), counted, "offset {at}");
        }
    }

    #[test]
    fn invalid_toml_names_the_line() {
        let (flag, msg) = err("[[expect]]\nmin_busbw = \n");
        assert_eq!(flag, "x.toml line 2", "{msg}");
    }
}
