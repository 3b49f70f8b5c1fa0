//! The run parameters a results file records (`collbench.run.params`): a typed, versioned record made from
//! the validated options in one place ([`RunParams::from_options`]), which the reporters print. Files
//! written before it carry the serialised options instead (`collbench.run.options`, durations as
//! `{secs, nanos}`); [`RunParams::from_legacy`] reads those, a missing field reading as `None`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of the [`RunParams`] record; 0 (absent) in files that carry the old `options` object.
pub const RUN_PARAMS_VERSION: u32 = 1;

/// How the sweep steps between sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepView {
    Factor(u64),
    Bytes(u64),
}

/// The parameters of a run, as recorded and printed. `None` (or empty) where a record does not say; `None`
/// is left out of the file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunParams {
    /// [`RUN_PARAMS_VERSION`] when written; 0 where read from an older file's `options`.
    pub version: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<StepView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iters: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_iters: Option<u64>,
    /// Whole sweeps of every path (`--repeat`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u64>,
    /// `--interleave`: `sweep` or `point`; `None` for records older than the option (they are `sweep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interleave: Option<String>,
    pub collectives: Vec<String>,
    pub dtypes: Vec<String>,
    pub ops: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algo: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algo_threshold: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank_stat: Option<String>,
    pub percentiles: bool,
    /// `--transport` paths as the options name them (`tcp@lo`, `nccl`, ...); empty where they are absent.
    pub transports: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_bytes: Option<u64>,
    /// `--sndbuf`: bytes, or `auto`; `None` for records older than the option.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sndbuf: Option<String>,
    /// `--tcp-congestion`; `None`: the host's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_congestion: Option<String>,
    /// `-T/--timeout`, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// `--bootstrap-timeout`, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bootstrap_timeout_s: Option<f64>,
    /// `--connect-timeout`, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_timeout_s: Option<f64>,
    /// Memory kind (`host`, `cuda`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// `--staging-pieces` (device memory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub staging_pieces: Option<u64>,
    /// `--reduce-on device`.
    pub reduce_on_device: bool,
    /// `--emulate-device` (a testing aid): no GPU was measured.
    pub emulate_device: bool,
    /// How each timed iteration ran (nccl-tests' `-I -K -m -z -u -C`); `None` for records older than it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iteration: Option<IterParams>,
    /// The `--algo-model` file that picked the algorithms; `None` without one and in records older than it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algo_model: Option<AlgoModelParams>,
}

/// The `--algo-model` file a run picked its algorithms with: where it was, its digest and the fitted costs
/// it held, so a results file says which model chose, even after the file changed or went.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AlgoModelParams {
    /// The path as given to `--algo-model`.
    pub file: String,
    /// `sha256:` and the hex SHA-256 of the file's text.
    pub digest: String,
    /// The fitted costs per kind of path.
    pub paths: Vec<AlgoModelPath>,
}

/// One kind of path's fitted costs in an [`AlgoModelParams`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AlgoModelPath {
    /// The kind of path (`tcp`, `rdma`).
    pub kind: String,
    /// The path the fit was made on (`tcp@eth0`).
    pub fitted_on: String,
    pub algos: Vec<AlgoModelCost>,
    /// Microseconds per byte reduced.
    pub gamma_us_per_byte: f64,
}

/// One algorithm's fitted costs in an [`AlgoModelPath`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AlgoModelCost {
    /// The algorithm as results files name it (`ring`, `rec_doubling`).
    pub algo: String,
    /// Microseconds per call, whatever the rounds.
    pub call_us: f64,
    /// Microseconds per message step.
    pub alpha_us: f64,
    /// Microseconds per byte on the busiest link.
    pub beta_us_per_byte: f64,
}

/// How each timed iteration ran, as recorded: nccl-tests' `-I`, `-K`, `-m`, `-z`, `-u` and `-C`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct IterParams {
    /// Every timed iteration's time was kept (`-I 1`).
    pub per_iter: bool,
    /// Leading iterations the per-iteration summary leaves out (`-K`).
    pub skip: u32,
    /// Collectives per timed iteration (`-m`).
    pub agg: u32,
    /// Waits between collectives (`-z`).
    pub blocking: u8,
    /// Elements the buffers start past their alignment (`-u`).
    pub unalign: u32,
    /// The time column is named `cputime` (`-C 1`).
    pub cputime: bool,
}

impl Default for IterParams {
    fn default() -> Self {
        IterParams {
            per_iter: false,
            skip: 0,
            agg: 1,
            blocking: 0,
            unalign: 0,
            cputime: false,
        }
    }
}

/// The name serde gives an option's value (`max`, `auto`, `cuda`, ...), as the options file wrote it.
/// A value's name as serde writes it (`"sweep"` for `Interleave::Sweep`), for the record.
pub(crate) fn name<T: Serialize>(v: &T) -> Option<String> {
    serde_json::to_value(v).ok()?.as_str().map(str::to_string)
}

impl RunParams {
    /// Reads what it can from an older file's `options` object (the serialised `Options`).
    pub fn from_legacy(o: &Value) -> RunParams {
        let u = |p: &str| o.pointer(p).and_then(Value::as_u64);
        let s = |p: &str| o.pointer(p).and_then(Value::as_str).map(str::to_string);
        let b = |k: &str| o.get(k).and_then(Value::as_bool) == Some(true);
        let list = |k: &str| -> Vec<String> {
            o.get(k)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
        let step = match (u("/sizes/step/factor"), u("/sizes/step/bytes")) {
            (Some(f), _) => Some(StepView::Factor(f)),
            (None, Some(b)) => Some(StepView::Bytes(b)),
            (None, None) => None,
        };
        // `Duration` was serialised as `{secs, nanos}`; a plain number is accepted too.
        let secs = |k: &str| match o.get(k) {
            Some(Value::Number(n)) => n.as_f64(),
            Some(t @ Value::Object(_)) => {
                let secs = t.get("secs").and_then(Value::as_u64);
                let nanos = t.get("nanos").and_then(Value::as_u64).unwrap_or(0);
                secs.map(|s| s as f64 + nanos as f64 / 1e9)
            }
            _ => None,
        };
        RunParams {
            version: 0,
            min_bytes: u("/sizes/min"),
            max_bytes: u("/sizes/max"),
            step,
            iters: u("/iters"),
            warmup: u("/warmup"),
            check_iters: u("/check_iters"),
            repeat: u("/repeat"),
            interleave: s("/interleave"),
            collectives: list("collectives"),
            dtypes: list("dtypes"),
            ops: list("ops"),
            root: u("/root"),
            algo: s("/algo"),
            algo_threshold: u("/algo_threshold"),
            rank_stat: s("/rank_stat"),
            percentiles: b("percentiles"),
            transports: list("transports"),
            streams: u("/streams"),
            chunk_bytes: u("/chunk_bytes"),
            sndbuf: match o.get("sndbuf") {
                Some(Value::Null) => Some("auto".into()),
                Some(v) => v.as_u64().map(|b| b.to_string()),
                None => None,
            },
            tcp_congestion: s("/tcp_congestion"),
            timeout_s: secs("timeout"),
            bootstrap_timeout_s: secs("bootstrap_timeout"),
            connect_timeout_s: secs("connect_timeout"),
            memory: s("/memory"),
            staging_pieces: u("/staging_pieces"),
            reduce_on_device: b("reduce_on_device"),
            emulate_device: b("emulate_device"),
            iteration: o.get("iteration").and_then(|v| IterParams::deserialize(v).ok()),
            // The option is younger than the record: no older file used it.
            algo_model: None,
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
    fn reads_serialised_options_and_tolerates_missing_fields() {
        let p = RunParams::from_legacy(&crate::results::testutil::legacy_options(true));
        assert_eq!(p.min_bytes, Some(8));
        assert_eq!(p.max_bytes, Some(4 << 20));
        assert_eq!(p.step, Some(StepView::Factor(2)));
        assert_eq!(p.timeout_s, Some(60.0));
        assert_eq!(p.rank_stat.as_deref(), Some("max"));
        assert!(p.percentiles);
        let q = RunParams::from_legacy(&json!({"sizes": {"step": {"bytes": 1024}}, "timeout": 2.5}));
        assert_eq!(q.step, Some(StepView::Bytes(1024)));
        assert_eq!(q.timeout_s, Some(2.5));
        assert_eq!(q.iters, None);
        assert_eq!(q.sndbuf, None, "a record from before --sndbuf");
        assert_eq!(or_unknown(&q.iters), "?");
        assert_eq!(RunParams::from_legacy(&Value::Null), RunParams::default());
    }
}
