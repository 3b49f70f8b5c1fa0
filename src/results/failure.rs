//! A run that ended before its last point: the error with its facts, and the points it did not measure.
//! Written into the results file's `errors` list, the CSV's closing comment line and the Markdown's
//! "Incomplete run" section, so a file left by a failed run says so itself.

use serde::{Deserialize, Deserializer, Serialize};

use crate::collective::Collective;
use crate::reduce::{Dtype, Op};

use super::record::Record;

/// One point of the plan, as records name it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointKey {
    pub path: String,
    pub collective: Collective,
    /// Bytes, as the record's `size` (after rounding to whole elements).
    pub size: u64,
    #[serde(rename = "type")]
    pub dtype: Dtype,
    /// `None` for collectives that do not reduce.
    pub redop: Option<Op>,
    /// Which `--repeat` sweep, from 0.
    pub repeat: u32,
}

impl PointKey {
    /// The point `rec` measured.
    pub fn of(rec: &Record) -> PointKey {
        PointKey {
            path: rec.path.clone(),
            collective: rec.collective,
            size: rec.size,
            dtype: rec.dtype,
            redop: rec.op,
            repeat: rec.repeat,
        }
    }
}

impl std::fmt::Display for PointKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} of {} ({}{})",
            self.path,
            self.collective,
            crate::sizes::format_size(self.size),
            self.dtype,
            self.redop.map(|o| format!(" {o}")).unwrap_or_default()
        )?;
        if self.repeat > 0 {
            write!(f, ", sweep {}", self.repeat + 1)?;
        }
        Ok(())
    }
}

/// The error that ended a run, with its facts, and the points not measured because of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunError {
    /// The error as the rank printed it (without `collbench: error: `).
    pub message: String,
    /// The phase it happened in (`all_reduce of 4 MiB`), where known.
    pub phase: Option<String>,
    /// The rank it is about: the culprit where one is named, else the rank that reported it.
    pub rank: Option<usize>,
    /// That rank's host.
    pub host: Option<String>,
    /// Whether `rank` is the culprit every rank named (rather than the rank that reported the error).
    pub culprit: bool,
    /// The exit status the run ended with.
    pub exit_code: i32,
    /// The points of the plan not measured, in run order.
    pub missing: Vec<PointKey>,
}

impl RunError {
    /// `self` with `missing` set to the points of `planned` no record of `measured` covers (each record
    /// covers one planned point, so a size planned twice stays missing once if measured once).
    pub fn with_missing<'a>(mut self, planned: &[PointKey], measured: impl IntoIterator<Item = &'a PointKey>) -> Self {
        let mut left: Vec<Option<&PointKey>> = planned.iter().map(Some).collect();
        for m in measured {
            if let Some(slot) = left.iter_mut().find(|p| p.is_some_and(|p| p == m)) {
                *slot = None;
            }
        }
        self.missing = left.into_iter().flatten().cloned().collect();
        self
    }

    /// One line: the error, then how many points are missing and the first few of them; no line breaks, so
    /// it fits a CSV comment line or a Markdown paragraph.
    pub fn line(&self) -> String {
        const SHOWN: usize = 5;
        // Escaped, so a line break in a peer's text cannot end the line early.
        let mut s = crate::error::escape(&self.message).into_owned();
        if !self.missing.is_empty() {
            let first: Vec<String> = self.missing.iter().take(SHOWN).map(|p| p.to_string()).collect();
            s.push_str(&format!(
                "; {} planned point(s) not measured: {}{}",
                self.missing.len(),
                first.join("; "),
                if self.missing.len() > SHOWN { "; ..." } else { "" }
            ));
        }
        s
    }
}

/// Files of earlier versions hold plain strings in `errors`; they read as a message without facts.
impl<'de> Deserialize<'de> for RunError {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Default, Deserialize)]
        #[serde(default)]
        struct Facts {
            message: String,
            phase: Option<String>,
            rank: Option<usize>,
            host: Option<String>,
            culprit: bool,
            exit_code: i32,
            missing: Vec<PointKey>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Facts(Facts),
        }
        Ok(match Either::deserialize(d)? {
            Either::Text(message) => RunError {
                message,
                ..RunError::default()
            },
            Either::Facts(f) => RunError {
                message: f.message,
                phase: f.phase,
                rank: f.rank,
                host: f.host,
                culprit: f.culprit,
                exit_code: f.exit_code,
                missing: f.missing,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(size: u64) -> PointKey {
        PointKey {
            path: "tcp@lo".into(),
            collective: Collective::AllReduce,
            size,
            dtype: Dtype::Float,
            redop: Some(Op::Sum),
            repeat: 0,
        }
    }

    #[test]
    fn missing_points_are_the_plan_less_what_was_measured_counted_once_each() {
        let planned = [key(8), key(8), key(16), key(32)];
        let e = RunError::default().with_missing(&planned, &[key(8), key(16)]);
        assert_eq!(e.missing, [key(8), key(32)]);
    }

    #[test]
    fn the_line_names_the_error_and_the_missing_points_without_line_breaks() {
        let e = RunError {
            message: "during x:\nrank 2 died".into(),
            missing: vec![key(1 << 20)],
            ..RunError::default()
        };
        assert_eq!(
            e.line(),
            "during x:\\nrank 2 died; 1 planned point(s) not measured: tcp@lo all_reduce of 1 MiB (float sum)"
        );
    }

    #[test]
    fn errors_read_as_text_or_as_facts() {
        let v: Vec<RunError> = serde_json::from_str(r#"["old text", {"message": "m", "rank": 2}]"#).unwrap();
        assert_eq!(v[0].message, "old text");
        assert_eq!((v[1].message.as_str(), v[1].rank), ("m", Some(2)));
        let back: RunError = serde_json::from_value(serde_json::to_value(&v[1]).unwrap()).unwrap();
        assert_eq!(back, v[1]);
    }
}
