//! The results file's document (`collbench run -J`), one type both written ([`crate::report::json`]) and read
//! (`compare`, `model`, `plot`, `preflight --from-results` and `--baseline`). The layout is nccl-tests' `-J`
//! layout (src/util.cu, JSON_FILE_VERSION 3: per-iteration objects under `-I 1`) with collbench's own fields
//! beside it; the schema is schema/collbench-results.schema.json. Every key nccl-tests writes means what it
//! means there; collbench's per-placement statistics (the spread of the ranks' means, percentiles, intervals)
//! sit in each entry's `collbench` object, as files of version 2 had them inside the placements: reading
//! lifts them back, so files of either version read as the same [`Entry`].
//!
//! Reading is lenient so files written by earlier versions still read: a field a reader needs and the file
//! lacks is `None` here, and the reader says which one (see [`need`]). nccl-tests' conventions kept:
//! booleans as the strings `"true"` / `"false"`, `root` as the `%6i`-formatted string, `nwrong` as a
//! number or `null` when the data check was off, `"nan"` for a number that is not finite.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::per_iter::PerIter;
use super::record::{RunInfo, WrongElement};
use super::summary_view::SummaryView;

/// The nccl-tests JSON layout version whose keys this file keeps.
pub const NCCL_TESTS_JSON_VERSION: u32 = 3;

/// What to give instead of a file that is not a results file.
pub const WHAT_TO_GIVE: &str = "expected a results file written by `collbench run -J`";

/// The whole document. Field order is nccl-tests' key order, then collbench's block. `S` is the summary:
/// the run's [`Summary`](super::Summary) when written, [`SummaryView`] (what readers use of it) when read.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Document<S = SummaryView> {
    #[serde(default)]
    pub version: u32,
    #[serde(default)]
    pub start_time: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// nccl-tests dumps the whole environment; collbench does not, as it may hold secrets.
    #[serde(default)]
    pub env: Vec<String>,
    /// collbench's own transports are not NCCL; `null` rather than a made-up version.
    #[serde(default)]
    pub nccl_version: Option<u32>,
    #[serde(default)]
    pub config: Config,
    #[serde(default)]
    pub results: Vec<Entry>,
    #[serde(default)]
    pub out_of_bounds: OutOfBounds,
    #[serde(default)]
    pub average_bus_bandwidth: AverageBusBw,
    /// What ended a failed run early, with its facts (empty for a run that did not fail); files of earlier
    /// versions hold strings here, read as messages without facts.
    #[serde(default)]
    pub errors: Vec<super::failure::RunError>,
    /// Written once the run is complete, as nccl-tests writes it at finalisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// `None` only in files not written by collbench.
    #[serde(default = "Option::default", bound(deserialize = "S: Deserialize<'de>"))]
    pub collbench: Option<Collbench<S>>,
}

/// nccl-tests' `config` block.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    pub nthreads: u32,
    pub ngpus: u32,
    pub minimum_bytes: Option<u64>,
    pub maximum_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_factor: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_bytes: Option<u64>,
    pub warmup_iters: Option<u64>,
    pub iterations: Option<u64>,
    pub aggregated_iterations: u32,
    pub validation: Option<u64>,
    pub graph: u32,
    pub blocking_collectives: JBool,
    pub per_iter_timing: JBool,
    /// Leading iterations the per-iteration summaries leave out (`-K`); absent in version 2 files.
    pub per_iter_skip: u32,
    pub parallel_init: JBool,
    pub devices: Vec<Device>,
}

/// nccl-tests' per-rank device entry; `device` is -1 and `device_info` names the network end instead.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Device {
    pub rank: usize,
    pub group: u32,
    pub pid: u32,
    pub hostname: String,
    pub device: i32,
    pub device_hex: String,
    pub device_info: String,
}

/// One `results` entry: nccl-tests' keys, then collbench's. Every field is optional when read (files of
/// other versions, or other tools, may lack it); the writer fills them all but `first_wrong` and, without
/// `-I 1`, the per-iteration objects. Written as [`EntryOut`] lays it out.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(into = "EntryOut")]
pub struct Entry {
    pub size: Option<u64>,
    pub count: Option<u64>,
    #[serde(rename = "type")]
    pub dtype: Option<String>,
    pub redop: Option<String>,
    pub root: Option<String>,
    pub out_of_place: Option<Placement>,
    pub in_place: Option<Placement>,
    pub actual_iterations: Option<u32>,
    pub experiment_name: Option<String>,
    pub collective: Option<String>,
    pub path: Option<String>,
    pub algo: Option<String>,
    pub nranks: Option<usize>,
    /// Which whole sweep of the path (`--repeat`), from 0; files older than `--repeat` lack it.
    pub repeat: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_wrong: Option<WrongElement>,
    /// nccl-tests' per-iteration objects (`-I 1`).
    pub out_of_place_per_iter: Option<PerIter>,
    pub in_place_per_iter: Option<PerIter>,
    /// `-C 1`: the placements' time is written under nccl-tests' `cpu_time` key (read back as `time`).
    #[serde(skip)]
    pub cpu_time: bool,
    /// How many times slower than its sweep neighbours' curve the point is, where it is far off it
    /// ([`super::off_curve`]); written in the entry's `collbench` object.
    #[serde(default)]
    pub off_curve: Option<f64>,
    /// How the timed calls were waited for, on paths whose calls return before they complete
    /// ([`super::timing`]); written in the entry's `collbench` object.
    #[serde(default)]
    pub timing: Option<super::timing::TimingMode>,
}

/// An [`Entry`] as written: nccl-tests' keys in its order with its meanings, collbench's identification of
/// the row (collective, path, algo, ranks, sweep) after them, and collbench's per-placement statistics in
/// the entry's `collbench` object, where no nccl-tests reader meets them under its own names.
#[derive(Serialize)]
pub struct EntryOut {
    size: Option<u64>,
    count: Option<u64>,
    #[serde(rename = "type")]
    dtype: Option<String>,
    redop: Option<String>,
    root: Option<String>,
    out_of_place: Option<NcclPlacement>,
    #[serde(skip_serializing_if = "Option::is_none")]
    out_of_place_per_iter: Option<PerIter>,
    in_place: Option<NcclPlacement>,
    #[serde(skip_serializing_if = "Option::is_none")]
    in_place_per_iter: Option<PerIter>,
    actual_iterations: Option<u32>,
    experiment_name: Option<String>,
    collective: Option<String>,
    path: Option<String>,
    algo: Option<String>,
    nranks: Option<usize>,
    repeat: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_wrong: Option<WrongElement>,
    collbench: EntryExtras,
}

/// nccl-tests' four keys of a placement; `time` is `cpu_time` under `-C 1`.
#[derive(Serialize)]
pub struct NcclPlacement {
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "jnum")]
    time: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "jnum")]
    cpu_time: Option<f64>,
    #[serde(serialize_with = "jnum")]
    alg_bw: Option<f64>,
    #[serde(serialize_with = "jnum")]
    bus_bw: Option<f64>,
    #[serde(serialize_with = "jnum")]
    nwrong: Option<f64>,
}

/// collbench's statistics of an entry's placements.
#[derive(Serialize)]
pub struct EntryExtras {
    out_of_place: Option<Placement>,
    in_place: Option<Placement>,
    #[serde(skip_serializing_if = "Option::is_none")]
    off_curve: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timing: Option<super::timing::TimingMode>,
}

impl From<Entry> for EntryOut {
    fn from(e: Entry) -> EntryOut {
        let cpu = e.cpu_time;
        let nccl = |p: &Option<Placement>| {
            p.as_ref().map(|p| NcclPlacement {
                time: if cpu { None } else { p.time },
                cpu_time: if cpu { p.time } else { None },
                alg_bw: p.alg_bw,
                bus_bw: p.bus_bw,
                nwrong: p.nwrong,
            })
        };
        // The statistics without nccl-tests' four, which the placement itself carries.
        let extra = |p: &Option<Placement>| {
            p.as_ref().map(|p| Placement {
                time: None,
                alg_bw: None,
                bus_bw: None,
                nwrong: None,
                ..p.clone()
            })
        };
        EntryOut {
            size: e.size,
            count: e.count,
            dtype: e.dtype,
            redop: e.redop,
            root: e.root,
            out_of_place: nccl(&e.out_of_place),
            out_of_place_per_iter: e.out_of_place_per_iter,
            in_place: nccl(&e.in_place),
            in_place_per_iter: e.in_place_per_iter,
            actual_iterations: e.actual_iterations,
            experiment_name: e.experiment_name,
            collective: e.collective,
            path: e.path,
            algo: e.algo,
            nranks: e.nranks,
            repeat: e.repeat,
            first_wrong: e.first_wrong,
            collbench: EntryExtras {
                out_of_place: extra(&e.out_of_place),
                in_place: extra(&e.in_place),
                off_curve: e.off_curve,
                timing: e.timing,
            },
        }
    }
}

/// An entry of either layout made flat: a version 3 entry's `collbench.out_of_place` statistics joined to
/// its `out_of_place` (and so on), and `cpu_time` read as `time`. Keys already in the placement win, so an
/// edited placement (a test that changes `ci95_us`) is read as edited.
pub(crate) fn lift(entry: &Value) -> Value {
    let mut e = entry.clone();
    let Some(obj) = e.as_object_mut() else { return e };
    let extras = obj.remove("collbench");
    for key in ["off_curve", "timing"] {
        if let Some(f) = extras.as_ref().and_then(|x| x.get(key)) {
            obj.insert(key.into(), f.clone());
        }
    }
    for placement in ["out_of_place", "in_place"] {
        let Some(Value::Object(p)) = obj.get_mut(placement) else {
            continue;
        };
        if !p.contains_key("time") {
            if let Some(t) = p.get("cpu_time").cloned() {
                p.insert("time".into(), t);
            }
        }
        if let Some(Value::Object(more)) = extras.as_ref().and_then(|x| x.get(placement)) {
            for (k, v) in more {
                if !p.contains_key(k) && !v.is_null() {
                    p.insert(k.clone(), v.clone());
                }
            }
        }
    }
    e
}

/// One placement (out-of-place or in-place) of an entry, as read: nccl-tests' four keys and collbench's
/// statistics (written apart, see [`EntryOut`]). Numbers that are not finite are `"nan"`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "jnum",
        deserialize_with = "number_or_nan"
    )]
    pub time: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "jnum",
        deserialize_with = "number_or_nan"
    )]
    pub alg_bw: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "jnum",
        deserialize_with = "number_or_nan"
    )]
    pub bus_bw: Option<f64>,
    /// Wrong elements; `null` when the data check was off.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "jnum",
        deserialize_with = "number_or_nan"
    )]
    pub nwrong: Option<f64>,
    #[serde(default, serialize_with = "jnum", deserialize_with = "number_or_nan")]
    pub rank0_us: Option<f64>,
    #[serde(default, serialize_with = "jnum", deserialize_with = "number_or_nan")]
    pub avg_us: Option<f64>,
    #[serde(default, serialize_with = "jnum", deserialize_with = "number_or_nan")]
    pub min_us: Option<f64>,
    #[serde(default, serialize_with = "jnum", deserialize_with = "number_or_nan")]
    pub max_us: Option<f64>,
    #[serde(default, serialize_with = "jnum", deserialize_with = "number_or_nan")]
    pub p50_us: Option<f64>,
    #[serde(default, serialize_with = "jnum", deserialize_with = "number_or_nan")]
    pub p99_us: Option<f64>,
    /// Absent in files written before it existed.
    #[serde(default, serialize_with = "jnum", deserialize_with = "number_or_nan")]
    pub ci95_us: Option<f64>,
    #[serde(default)]
    pub iters: Option<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "jnum",
        deserialize_with = "number_or_nan"
    )]
    pub staging_us: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "jnum",
        deserialize_with = "number_or_nan"
    )]
    pub staging_wait_us: Option<f64>,
}

/// nccl-tests' `out_of_bounds` block.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OutOfBounds {
    pub count: u64,
    pub okay: JBool,
}

/// nccl-tests' `average_bus_bandwidth` block.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AverageBusBw {
    #[serde(serialize_with = "jnum_always", deserialize_with = "nan_if_absent")]
    pub bandwidth: f64,
    /// nccl-tests writes "unchecked" when no minimum was asked for (NCCL_TESTS_MIN_BW unset).
    pub okay: String,
}

/// collbench's own block.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Collbench<S> {
    #[serde(default)]
    pub schema_version: u32,
    /// Where the buffers lived (`host`, `cuda`), and whether the times include copies between device and
    /// host staging (they do with device memory).
    #[serde(default)]
    pub memory: MemoryNote,
    #[serde(default)]
    pub run: RunInfo,
    #[serde(default = "Option::default", bound(deserialize = "S: Deserialize<'de>"))]
    pub summary: Option<S>,
    #[serde(default)]
    pub complete: bool,
}

/// The run's memory kind and what its times cover.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryNote {
    pub kind: String,
    pub times_include_staging: bool,
    /// Where the reductions ran.
    pub reductions: String,
    /// Paths that run on the device buffers directly (nccl): no staging, reductions on the GPU; the two
    /// fields above describe the other paths.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub direct_paths: Vec<String>,
    /// rdma paths on device memory only: they stage too; whether rank 0's host has a GPUDirect RDMA route.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rdma_route: Option<String>,
    /// The device was host memory posing as one (`--emulate-device`, a testing aid): no GPU was measured.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub emulated: bool,
}

/// A boolean as nccl-tests writes it: the string `"true"` or `"false"` (a JSON boolean reads too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JBool(pub bool);

impl Serialize for JBool {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(if self.0 { "true" } else { "false" })
    }
}

impl<'de> Deserialize<'de> for JBool {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(b) => Ok(JBool(b)),
            Value::String(s) if s == "true" || s == "false" => Ok(JBool(s == "true")),
            other => Err(serde::de::Error::custom(format!(
                "expected \"true\" or \"false\", got {other}"
            ))),
        }
    }
}

/// A number as nccl-tests writes it: `"nan"` when it is not finite.
fn jnum_always<S: Serializer>(v: &f64, s: S) -> std::result::Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_str("nan")
    }
}

/// An optional number as nccl-tests writes it: `null` when absent, `"nan"` when not finite.
fn jnum<S: Serializer>(v: &Option<f64>, s: S) -> std::result::Result<S::Ok, S::Error> {
    match v {
        Some(v) => jnum_always(v, s),
        None => s.serialize_none(),
    }
}

/// A number, or nccl-tests' `"nan"` string for one that is not finite; `null` reads as absent.
fn number_or_nan<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    match Value::deserialize(d)? {
        Value::Number(n) => Ok(n.as_f64()),
        Value::Null => Ok(None),
        Value::String(s) if s.eq_ignore_ascii_case("nan") => Ok(Some(f64::NAN)),
        other => Err(serde::de::Error::custom(format!("expected a number, got {other}"))),
    }
}

fn nan_if_absent<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    Ok(number_or_nan(d)?.unwrap_or(f64::NAN))
}

/// `field` of entry `i` (named `key`, dotted for nested ones), or the message that it is missing.
pub fn need<T>(field: Option<T>, i: usize, key: &str) -> std::result::Result<T, String> {
    field.ok_or_else(|| format!("results[{i}] has no `{key}`; {WHAT_TO_GIVE}"))
}

impl Entry {
    /// The out-of-place placement, or an empty one where the entry has none.
    pub fn out_of_place(&self) -> &Placement {
        static EMPTY: Placement = Placement::EMPTY;
        self.out_of_place.as_ref().unwrap_or(&EMPTY)
    }

    /// The in-place placement, or an empty one where the entry has none.
    pub fn in_place(&self) -> &Placement {
        static EMPTY: Placement = Placement::EMPTY;
        self.in_place.as_ref().unwrap_or(&EMPTY)
    }
}

impl Placement {
    const EMPTY: Placement = Placement {
        time: None,
        alg_bw: None,
        bus_bw: None,
        nwrong: None,
        rank0_us: None,
        avg_us: None,
        min_us: None,
        max_us: None,
        p50_us: None,
        p99_us: None,
        ci95_us: None,
        iters: None,
        staging_us: None,
        staging_wait_us: None,
    };
}

/// Entries in the flat layout, each placement's statistics inside it (as files of version 2 had them): how
/// `collbench preflight -J` writes its `results` and `connectivity`, for `#[serde(with)]`. They read as any
/// entry reads, an error naming the entry (`entry 3 ...`).
pub mod flat_entries {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    use super::{entries_from_value, lift, Entry};

    /// Each entry as [`EntryOut`](super::EntryOut) lays it out, then made flat.
    pub fn serialize<S: Serializer>(entries: &[Entry], s: S) -> std::result::Result<S::Ok, S::Error> {
        let flat = entries
            .iter()
            .map(|e| serde_json::to_value(e).map(|v| lift(&v)))
            .collect::<std::result::Result<Vec<Value>, _>>()
            .map_err(serde::ser::Error::custom)?;
        flat.serialize(s)
    }

    /// A list of entries of either layout.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<Entry>, D::Error> {
        entries_from_value(&Value::deserialize(d)?, "entry").map_err(serde::de::Error::custom)
    }
}

/// Entries read one by one, so an error names the entry (`results[3] ...`, or `entry 3 ...` with
/// `label` "entry").
pub fn entries_from_value(v: &Value, label: &str) -> std::result::Result<Vec<Entry>, String> {
    let Some(list) = v.as_array() else {
        return Err(format!("is not an array of results; {WHAT_TO_GIVE}"));
    };
    list.iter()
        .enumerate()
        .map(|(i, e)| {
            Entry::deserialize(&lift(e)).map_err(|err| {
                let at = if label == "entry" {
                    format!("entry {i}")
                } else {
                    format!("{label}[{i}]")
                };
                format!("{at} is not a collbench result entry: {err}")
            })
        })
        .collect()
}

impl Document<SummaryView> {
    /// Reads a parsed results document. The message (for the caller to prefix with where the document came
    /// from) says what is wrong: no `results` array, or which entry is not an entry and why.
    pub fn from_value(doc: &Value) -> std::result::Result<Document, String> {
        let Some(list) = doc.get("results").filter(|r| r.is_array()) else {
            return Err(format!("no `results` array; {WHAT_TO_GIVE}"));
        };
        let results = entries_from_value(list, "results")?;
        // The rest without the entries, read once above with their index.
        let mut rest = doc.clone();
        rest["results"] = Value::Array(Vec::new());
        let mut read: Document = Document::deserialize(&rest).map_err(|e| format!("{e}; {WHAT_TO_GIVE}"))?;
        read.results = results;
        if let Some(c) = &mut read.collbench {
            c.run.upgrade();
        }
        Ok(read)
    }

    /// The hosts the run's ranks were on, without repeats (none when the file lacks the rank list).
    pub fn hosts(&self) -> std::collections::BTreeSet<&str> {
        self.collbench
            .iter()
            .flat_map(|c| &c.run.ranks)
            .map(|r| r.host.as_str())
            .filter(|h| !h.is_empty())
            .collect()
    }
}
