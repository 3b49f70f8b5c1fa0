//! The run parameters reporters print, read from [`RunInfo::options`](super::RunInfo) (the serialised
//! `Options`). Reading the JSON rather than `Options` keeps reporters usable on runs recorded by other
//! versions; a missing field reads as `None` instead of failing the report.

use serde_json::Value;

/// How the sweep steps between sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepView {
    Factor(u64),
    Bytes(u64),
}

/// The parameters a header shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Params {
    pub min_bytes: Option<u64>,
    pub max_bytes: Option<u64>,
    pub step: Option<StepView>,
    pub iters: Option<u64>,
    pub warmup: Option<u64>,
    pub check_iters: Option<u64>,
    /// Whole sweeps of every path (`--repeat`).
    pub repeat: Option<u64>,
    pub rank_stat: Option<String>,
    pub algo: Option<String>,
    pub streams: Option<u64>,
    pub chunk_bytes: Option<u64>,
    /// `--sndbuf`: bytes, or `auto`; `None` for records older than the option.
    pub sndbuf: Option<String>,
    /// Seconds; `Options` serialises its `Duration` as `{secs, nanos}`, a plain number is accepted too.
    pub timeout_s: Option<f64>,
    /// `--bootstrap-timeout`, seconds.
    pub bootstrap_timeout_s: Option<f64>,
    /// `--connect-timeout`, seconds.
    pub connect_timeout_s: Option<f64>,
    pub percentiles: bool,
    /// Memory kind (`host`, `cuda`) once options carry one.
    pub memory: Option<String>,
    /// `--interleave`: `sweep` or `point`; `None` for records older than the option (they are `sweep`).
    pub interleave: Option<String>,
    /// `--transport` paths as the options name them (`tcp@lo`, `nccl`, ...); empty where they are absent.
    pub transports: Vec<String>,
}

impl Params {
    /// Reads what it can from the options object.
    pub fn from_options(o: &Value) -> Params {
        let u = |p: &str| o.pointer(p).and_then(Value::as_u64);
        let s = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_string);
        let step = match (u("/sizes/step/factor"), u("/sizes/step/bytes")) {
            (Some(f), _) => Some(StepView::Factor(f)),
            (None, Some(b)) => Some(StepView::Bytes(b)),
            (None, None) => None,
        };
        let secs = |k: &str| match o.get(k) {
            Some(Value::Number(n)) => n.as_f64(),
            Some(t @ Value::Object(_)) => {
                let secs = t.get("secs").and_then(Value::as_u64);
                let nanos = t.get("nanos").and_then(Value::as_u64).unwrap_or(0);
                secs.map(|s| s as f64 + nanos as f64 / 1e9)
            }
            _ => None,
        };
        let timeout_s = secs("timeout");
        Params {
            min_bytes: u("/sizes/min"),
            max_bytes: u("/sizes/max"),
            step,
            iters: u("/iters"),
            warmup: u("/warmup"),
            check_iters: u("/check_iters"),
            repeat: u("/repeat"),
            rank_stat: s("/rank_stat"),
            algo: s("/algo"),
            streams: u("/streams"),
            chunk_bytes: u("/chunk_bytes"),
            sndbuf: match o.get("sndbuf") {
                Some(Value::Null) => Some("auto".into()),
                Some(v) => v.as_u64().map(|b| b.to_string()),
                None => None,
            },
            timeout_s,
            bootstrap_timeout_s: secs("bootstrap_timeout"),
            connect_timeout_s: secs("connect_timeout"),
            percentiles: o.get("percentiles").and_then(Value::as_bool).unwrap_or(false),
            memory: s("/memory"),
            interleave: s("/interleave"),
            transports: o
                .get("transports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        }
    }
}

/// `value` or `?` when the options did not say.
pub fn or_unknown<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(|| "?".to_string(), T::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_every_field_of_the_real_options() {
        // Guards against Options being renamed under the reporters' feet.
        let o = serde_json::to_value(crate::options::Options::default()).unwrap();
        let p = Params::from_options(&o);
        assert!(p.min_bytes.is_some() && p.max_bytes.is_some() && p.step.is_some());
        assert!(p.iters.is_some() && p.warmup.is_some() && p.check_iters.is_some());
        assert!(p.rank_stat.is_some() && p.algo.is_some() && p.streams.is_some());
        assert!(p.chunk_bytes.is_some() && p.timeout_s.is_some());
        assert_eq!(p.interleave.as_deref(), Some("sweep"));
        assert_eq!(p.sndbuf.as_deref(), Some("524288"));
        let auto = crate::options::Options {
            sndbuf: None,
            ..Default::default()
        };
        let p = Params::from_options(&serde_json::to_value(auto).unwrap());
        assert_eq!(p.sndbuf.as_deref(), Some("auto"));
    }

    #[test]
    fn reads_serialised_options_and_tolerates_missing_fields() {
        let p = Params::from_options(&crate::report::testutil::run_info(true).options);
        assert_eq!(p.min_bytes, Some(8));
        assert_eq!(p.max_bytes, Some(4 << 20));
        assert_eq!(p.step, Some(StepView::Factor(2)));
        assert_eq!(p.timeout_s, Some(60.0));
        assert_eq!(p.rank_stat.as_deref(), Some("max"));
        assert!(p.percentiles);
        let q = Params::from_options(&json!({"sizes": {"step": {"bytes": 1024}}, "timeout": 2.5}));
        assert_eq!(q.step, Some(StepView::Bytes(1024)));
        assert_eq!(q.timeout_s, Some(2.5));
        assert_eq!(q.iters, None);
        assert_eq!(q.sndbuf, None, "a record from before --sndbuf");
        assert_eq!(or_unknown(&q.iters), "?");
        assert_eq!(Params::from_options(&Value::Null), Params::default());
    }
}
