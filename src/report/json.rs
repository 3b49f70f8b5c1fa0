//! The JSON file (`-J`): nccl-tests' `-J` layout for everything both tools measure, so its readers keep
//! working, with collbench's own fields beside it. The file is rewritten atomically after every record,
//! so an aborted run still leaves valid JSON with every point measured so far.
//!
//! nccl-tests' conventions kept (src/util.cu, JSON_FILE_VERSION 2): top-level `version`, `start_time`
//! and `end_time` as `YYYY-MM-DD HH:MM:SS`, `args`, `env`, `nccl_version`, `config`, `results`,
//! `out_of_bounds`, `average_bus_bandwidth`, `errors`; booleans written as the strings `"true"` /
//! `"false"`; `root` as the `%6i`-formatted string; `nwrong` as a number, `null` when the data check
//! was off; `"nan"` for a value that is not a number. The schema is schema/collbench-results.schema.json.

use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};

use super::file::write_atomic;
use super::params::{Params, StepView};
use super::record::{Record, RunInfo, Summary, Timing, WrongElement, SCHEMA_VERSION};
use super::summary::summarize;
use super::Reporter;
use crate::error::{Error, Result};

/// The nccl-tests JSON layout version whose keys this file keeps.
pub const NCCL_TESTS_JSON_VERSION: u32 = 2;

/// Writes the JSON results file at a path, rewriting it after every record.
pub struct JsonReporter {
    path: PathBuf,
    run: Option<RunInfo>,
    records: Vec<Record>,
}

impl JsonReporter {
    /// A reporter for `path`; check it first with [`check_writable`](super::check_writable).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        JsonReporter {
            path: path.into(),
            run: None,
            records: Vec::new(),
        }
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write(&self, summary: Option<&Summary>) -> Result<()> {
        // Nothing to write before begin(): the run metadata is what makes the file meaningful.
        let Some(run) = &self.run else { return Ok(()) };
        let doc = document(run, &self.records, summary);
        let mut bytes = serde_json::to_vec_pretty(&doc)
            .map_err(|e| Error::io(format!("encoding {}", self.path.display()), e.into()))?;
        bytes.push(b'\n');
        write_atomic(&self.path, &bytes)
    }
}

impl Reporter for JsonReporter {
    fn begin(&mut self, run: &RunInfo) -> Result<()> {
        self.run = Some(run.clone());
        self.records.clear();
        self.write(None)
    }

    fn record(&mut self, rec: &Record) -> Result<()> {
        self.records.push(rec.clone());
        self.write(None)
    }

    fn finish(&mut self, summary: &Summary) -> Result<()> {
        self.write(Some(summary))
    }
}

/// The whole document. Field order is nccl-tests' key order, then collbench's block.
#[derive(Serialize)]
struct Document<'a> {
    version: u32,
    start_time: String,
    args: &'a [String],
    /// nccl-tests dumps the whole environment; collbench does not, as it may hold secrets.
    env: [&'a str; 0],
    /// collbench's own transports are not NCCL; `null` rather than a made-up version.
    nccl_version: Option<u32>,
    config: Config,
    results: Vec<Entry<'a>>,
    out_of_bounds: OutOfBounds,
    average_bus_bandwidth: AverageBusBw,
    errors: [&'a str; 0],
    /// Written once the run is complete, as nccl-tests writes it at finalisation.
    #[serde(skip_serializing_if = "Option::is_none")]
    end_time: Option<String>,
    collbench: Collbench<'a>,
}

#[derive(Serialize)]
struct Config {
    nthreads: u32,
    ngpus: u32,
    minimum_bytes: Option<u64>,
    maximum_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    step_factor: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    step_bytes: Option<u64>,
    warmup_iters: Option<u64>,
    iterations: Option<u64>,
    aggregated_iterations: u32,
    validation: Option<u64>,
    graph: u32,
    blocking_collectives: JBool,
    per_iter_timing: JBool,
    parallel_init: JBool,
    devices: Vec<Device>,
}

/// nccl-tests' per-rank device entry; `device` is -1 and `device_info` names the network end instead.
#[derive(Serialize)]
struct Device {
    rank: usize,
    group: u32,
    pid: u32,
    hostname: String,
    device: i32,
    device_hex: String,
    device_info: String,
}

/// One `results` entry: nccl-tests' keys, then collbench's.
#[derive(Serialize)]
struct Entry<'a> {
    size: u64,
    count: u64,
    #[serde(rename = "type")]
    dtype: &'static str,
    redop: &'static str,
    root: String,
    out_of_place: Placement,
    in_place: Placement,
    actual_iterations: u32,
    experiment_name: &'static str,
    collective: &'static str,
    path: &'a str,
    algo: &'a str,
    nranks: usize,
    /// Which whole sweep of the path (`--repeat`), from 0.
    repeat: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_wrong: Option<&'a WrongElement>,
}

#[derive(Serialize)]
struct Placement {
    time: JNum,
    alg_bw: JNum,
    bus_bw: JNum,
    nwrong: Option<JNum>,
    rank0_us: JNum,
    avg_us: JNum,
    min_us: JNum,
    max_us: JNum,
    p50_us: JNum,
    p99_us: JNum,
    ci95_us: JNum,
    iters: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    staging_us: Option<JNum>,
    #[serde(skip_serializing_if = "Option::is_none")]
    staging_wait_us: Option<JNum>,
}

#[derive(Serialize)]
struct OutOfBounds {
    count: u64,
    okay: JBool,
}

#[derive(Serialize)]
struct AverageBusBw {
    bandwidth: JNum,
    /// nccl-tests writes "unchecked" when no minimum was asked for (NCCL_TESTS_MIN_BW unset).
    okay: &'static str,
}

#[derive(Serialize)]
struct Collbench<'a> {
    schema_version: u32,
    /// Where the buffers lived (`host`, `cuda`), and whether the times include copies between device and
    /// host staging (they do with device memory).
    memory: MemoryNote,
    run: &'a RunInfo,
    summary: Option<&'a Summary>,
    complete: bool,
}

/// The run's memory kind and what its times cover.
#[derive(Serialize)]
struct MemoryNote {
    kind: String,
    times_include_staging: bool,
    /// Where the reductions ran.
    reductions: &'static str,
    /// Paths that run on the device buffers directly (nccl): no staging, reductions on the GPU; the two
    /// fields above describe the other paths.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    direct_paths: Vec<String>,
    /// rdma paths on device memory only: they stage too; whether rank 0's host has a GPUDirect RDMA route.
    #[serde(skip_serializing_if = "Option::is_none")]
    rdma_route: Option<String>,
    /// The device was host memory posing as one (`--emulate-device`, a testing aid): no GPU was measured.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    emulated: bool,
}

impl MemoryNote {
    fn of(run: &RunInfo) -> MemoryNote {
        let p = Params::from_options(&run.options);
        let kind = p.memory.clone().unwrap_or_else(|| "host".into());
        MemoryNote {
            times_include_staging: kind == "cuda",
            reductions: if run.options.get("reduce_on_device").and_then(|v| v.as_bool()) == Some(true) {
                "device (all_reduce, reduce_scatter; reduce on the host)"
            } else {
                "host"
            },
            direct_paths: direct_paths(&p),
            rdma_route: run.rdma_route.clone(),
            emulated: run.options.get("emulate_device").and_then(|v| v.as_bool()) == Some(true),
            kind,
        }
    }
}

/// The paths of the run that take device memory directly (nccl).
fn direct_paths(p: &Params) -> Vec<String> {
    p.transports.iter().filter(|t| *t == "nccl").cloned().collect()
}

/// A number as nccl-tests writes it: `"nan"` when it is not finite.
struct JNum(f64);

impl Serialize for JNum {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        if self.0.is_finite() {
            s.serialize_f64(self.0)
        } else {
            s.serialize_str("nan")
        }
    }
}

/// A boolean as nccl-tests writes it: the string `"true"` or `"false"`.
struct JBool(bool);

impl Serialize for JBool {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(if self.0 { "true" } else { "false" })
    }
}

fn document<'a>(run: &'a RunInfo, records: &'a [Record], summary: Option<&'a Summary>) -> Document<'a> {
    // While running, the totals cover the points so far, by the same definition as the final summary.
    let so_far;
    let totals = match summary {
        Some(s) => s,
        None => {
            so_far = summarize(records, String::new(), None, &[], Vec::new());
            &so_far
        }
    };
    let bandwidth = if totals.avg_busbw.is_empty() {
        0.0
    } else {
        // One number for the whole run, as nccl-tests has: the mean of the per-table averages (the table
        // footer's value when there is one table).
        totals.avg_busbw.iter().map(|a| a.busbw).sum::<f64>() / totals.avg_busbw.len() as f64
    };
    Document {
        version: NCCL_TESTS_JSON_VERSION,
        start_time: nccl_time(&run.start_time),
        args: &run.args,
        env: [],
        nccl_version: None,
        config: config(run),
        results: records.iter().map(entry).collect(),
        out_of_bounds: OutOfBounds {
            count: totals.out_of_bounds,
            okay: JBool(totals.out_of_bounds == 0),
        },
        average_bus_bandwidth: AverageBusBw {
            bandwidth: JNum(bandwidth),
            okay: "unchecked",
        },
        errors: [],
        end_time: summary.map(|s| nccl_time(&s.end_time)),
        collbench: Collbench {
            schema_version: SCHEMA_VERSION,
            memory: MemoryNote::of(run),
            run,
            summary,
            complete: summary.is_some(),
        },
    }
}

fn config(run: &RunInfo) -> Config {
    let p = Params::from_options(&run.options);
    let (step_factor, step_bytes) = match p.step {
        Some(StepView::Factor(f)) => (Some(f), None),
        Some(StepView::Bytes(b)) => (None, Some(b)),
        None => (None, None),
    };
    Config {
        // One thread per rank; a GPU per rank only with CUDA memory.
        nthreads: 1,
        ngpus: u32::from(p.memory.as_deref() == Some("cuda")),
        minimum_bytes: p.min_bytes,
        maximum_bytes: p.max_bytes,
        step_factor,
        step_bytes,
        warmup_iters: p.warmup,
        iterations: p.iters,
        aggregated_iterations: 1,
        validation: p.check_iters,
        graph: 0,
        blocking_collectives: JBool(false),
        per_iter_timing: JBool(false),
        parallel_init: JBool(false),
        devices: run
            .ranks
            .iter()
            .map(|r| {
                let net = format!("iface {} addr {}", r.iface, r.addr);
                // nccl-tests' device fields are the rank's GPU: where it has one, they are too.
                let (device, device_hex, device_info) = match r.device.as_deref().and_then(gpu_parts) {
                    Some((ordinal, bus, name)) => (ordinal, bus, format!("{name}, {net}")),
                    None => (-1, String::new(), net),
                };
                Device {
                    rank: r.rank,
                    group: 0,
                    pid: r.pid,
                    hostname: r.host.clone(),
                    device,
                    device_hex,
                    device_info,
                }
            })
            .collect(),
    }
}

/// A rank's GPU label (`cuda:0 [0000:19:00.0] NVIDIA H200`) as (ordinal, bus id, name).
fn gpu_parts(label: &str) -> Option<(i32, String, String)> {
    let rest = label.strip_prefix("cuda:")?;
    let (ordinal, rest) = rest.split_once(" [")?;
    let (bus, name) = rest.split_once("] ")?;
    Some((ordinal.parse().ok()?, bus.to_string(), name.to_string()))
}

/// `records` as the `results` array of this file, for documents that carry measurements in the same form.
pub fn entries(records: &[Record]) -> serde_json::Value {
    serde_json::to_value(records.iter().map(entry).collect::<Vec<_>>()).expect("results entries serialise")
}

fn entry(rec: &Record) -> Entry<'_> {
    Entry {
        size: rec.size,
        count: rec.count,
        dtype: rec.dtype.name(),
        redop: rec.op.map_or("none", |o| o.name()),
        // nccl-tests writes the root as its table cell, the string sprintf("%6i", root).
        root: format!("{:6}", rec.root.map_or(-1, |r| r as i64)),
        out_of_place: placement(&rec.out_of_place),
        in_place: placement(&rec.in_place),
        actual_iterations: rec.out_of_place.iters,
        experiment_name: "",
        collective: rec.collective.name(),
        path: &rec.path,
        algo: &rec.algo,
        nranks: rec.nranks,
        repeat: rec.repeat,
        first_wrong: rec.first_wrong.as_ref(),
    }
}

fn placement(t: &Timing) -> Placement {
    Placement {
        time: JNum(t.time_us),
        alg_bw: JNum(t.algbw),
        bus_bw: JNum(t.busbw),
        nwrong: t.wrong.map(|w| JNum(w as f64)),
        rank0_us: JNum(t.rank0_us),
        avg_us: JNum(t.avg_us),
        min_us: JNum(t.min_us),
        max_us: JNum(t.max_us),
        p50_us: JNum(t.p50_us),
        p99_us: JNum(t.p99_us),
        ci95_us: JNum(t.ci95_us),
        iters: t.iters,
        staging_us: t.staging_us.map(JNum),
        staging_wait_us: t.staging_wait_us.map(JNum),
    }
}

/// RFC 3339 (`2025-03-04T05:06:07.123Z`) to nccl-tests' `%Y-%m-%d %H:%M:%S`, keeping UTC; anything
/// else is passed through.
fn nccl_time(rfc3339: &str) -> String {
    let b = rfc3339.as_bytes();
    if b.len() >= 19 && b[10] == b'T' && rfc3339.is_char_boundary(19) {
        format!("{} {}", &rfc3339[..10], &rfc3339[11..19])
    } else {
        rfc3339.to_string()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::collective::Collective;
    use crate::report::testutil::{record, run_info};

    #[test]
    fn nccl_is_listed_as_a_direct_path() {
        let o = serde_json::json!({"transports": ["tcp@lo", "nccl"], "memory": "cuda"});
        let direct = |o: &Value| direct_paths(&Params::from_options(o));
        assert_eq!(direct(&o), vec!["nccl".to_string()]);
        assert!(direct(&serde_json::json!({"transports": ["tcp"]})).is_empty());
        assert!(direct(&serde_json::json!({})).is_empty());
    }

    const SCHEMA: &str = include_str!("../../schema/collbench-results.schema.json");

    /// Records covering the awkward cases: no op, no root, check off, a wrong element with its place.
    fn records() -> Vec<Record> {
        let ar = record(Collective::AllReduce, 1 << 20, 100.0, 12.5, Some(0));
        let ag = record(Collective::AllGather, 4096, 20.0, 1.5, None);
        let mut bc = record(Collective::Broadcast, 8, 5.0, 0.01, Some(3));
        bc.in_place.wrong = Some(0);
        bc.first_wrong = Some(WrongElement {
            rank: 1,
            host: "node1".into(),
            in_place: false,
            offset: 1,
            expected: "2".into(),
            got: "7".into(),
        });
        vec![ar, ag, bc]
    }

    fn write_run(finish: bool) -> (tempfile::TempDir, Value) {
        let dir = tempfile::tempdir().unwrap();
        let mut j = JsonReporter::new(dir.path().join("r.json"));
        j.begin(&run_info(false)).unwrap();
        let recs = records();
        for r in &recs {
            j.record(r).unwrap();
        }
        if finish {
            j.finish(&summarize(
                &recs,
                "2025-03-04T05:07:00.5Z".into(),
                None,
                &[],
                Vec::new(),
            ))
            .unwrap();
        }
        let v = serde_json::from_slice(&std::fs::read(j.path()).unwrap()).unwrap();
        (dir, v)
    }

    fn validate(v: &Value) {
        let schema: Value = serde_json::from_str(SCHEMA).unwrap();
        let mut compiler = boon::Compiler::new();
        let mut schemas = boon::Schemas::new();
        compiler.add_resource("urn:collbench-results", schema).unwrap();
        let idx = compiler.compile("urn:collbench-results", &mut schemas).unwrap();
        if let Err(e) = schemas.validate(v, idx) {
            panic!("{e:#}\n{}", serde_json::to_string_pretty(v).unwrap());
        }
    }

    #[test]
    fn finished_and_running_files_validate_against_the_schema() {
        let (_d, done) = write_run(true);
        validate(&done);
        let (_d, running) = write_run(false);
        validate(&running);
    }

    #[test]
    fn the_rdma_route_is_in_the_memory_note_only_when_the_run_has_one() {
        let mut run = run_info(false);
        let note = serde_json::to_value(MemoryNote::of(&run)).unwrap();
        assert!(note.get("rdma_route").is_none(), "{note}");
        run.options["memory"] = "cuda".into();
        run.options["transports"] = serde_json::json!(["tcp@lo", "rdma@mlx5_0:1"]);
        run.rdma_route = Some("staging through host memory (no GPUDirect RDMA route: ...)".into());
        let note = serde_json::to_value(MemoryNote::of(&run)).unwrap();
        assert_eq!(note["rdma_route"], run.rdma_route.clone().unwrap().as_str());
        assert_eq!(
            (&note["kind"], &note["times_include_staging"]),
            (&"cuda".into(), &true.into())
        );
        // Written once: under collbench.memory, not again under collbench.run; the file still validates.
        let dir = tempfile::tempdir().unwrap();
        let mut j = JsonReporter::new(dir.path().join("r.json"));
        j.begin(&run).unwrap();
        let v: Value = serde_json::from_slice(&std::fs::read(j.path()).unwrap()).unwrap();
        assert_eq!(v["collbench"]["memory"]["rdma_route"], note["rdma_route"]);
        assert!(v["collbench"]["run"].get("rdma_route").is_none());
        validate(&v);
    }

    #[test]
    fn schema_rejects_a_file_missing_nccl_tests_keys() {
        let (_d, mut v) = write_run(true);
        v["results"][0].as_object_mut().unwrap().remove("out_of_place");
        let schema: Value = serde_json::from_str(SCHEMA).unwrap();
        let mut compiler = boon::Compiler::new();
        let mut schemas = boon::Schemas::new();
        compiler.add_resource("urn:s", schema).unwrap();
        let idx = compiler.compile("urn:s", &mut schemas).unwrap();
        assert!(schemas.validate(&v, idx).is_err());
        // A file that says it is complete must carry its summary and end time.
        let (_d, mut v) = write_run(true);
        v["collbench"]["summary"] = Value::Null;
        assert!(schemas.validate(&v, idx).is_err());
        let (_d, mut v) = write_run(true);
        v.as_object_mut().unwrap().remove("end_time");
        assert!(schemas.validate(&v, idx).is_err());
    }

    #[test]
    fn staging_times_are_written_only_for_device_memory() {
        let mut t = crate::report::testutil::timing(100.0, 1.0, Some(0));
        let host = serde_json::to_value(placement(&t)).unwrap();
        assert!(host.get("staging_us").is_none() && host.get("staging_wait_us").is_none());
        (t.staging_us, t.staging_wait_us) = (Some(30.0), Some(12.5));
        let dev = serde_json::to_value(placement(&t)).unwrap();
        assert_eq!(
            (dev["staging_us"].as_f64(), dev["staging_wait_us"].as_f64()),
            (Some(30.0), Some(12.5))
        );
    }

    #[test]
    fn nccl_tests_keys_are_present_with_their_names_and_conventions() {
        let (_d, v) = write_run(true);
        let top: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        for k in [
            "version",
            "start_time",
            "args",
            "env",
            "nccl_version",
            "config",
            "results",
            "out_of_bounds",
            "average_bus_bandwidth",
            "errors",
            "end_time",
        ] {
            assert!(top.contains(&k), "missing top-level key {k}");
        }
        assert_eq!(v["version"], 2);
        assert_eq!(v["start_time"], "2025-03-04 05:06:07");
        assert_eq!(v["end_time"], "2025-03-04 05:07:00");
        let c = &v["config"];
        for k in [
            "nthreads",
            "ngpus",
            "minimum_bytes",
            "maximum_bytes",
            "step_factor",
            "warmup_iters",
            "iterations",
            "aggregated_iterations",
            "validation",
            "graph",
            "blocking_collectives",
            "per_iter_timing",
            "parallel_init",
            "devices",
        ] {
            assert!(c.get(k).is_some(), "missing config key {k}");
        }
        assert_eq!(c["minimum_bytes"], 8);
        assert_eq!(c["step_factor"], 2);
        assert_eq!(c["blocking_collectives"], "false");
        assert_eq!(c["devices"][1]["hostname"], "node1");
        // Rank 1 has a GPU (testutil): nccl-tests' device fields carry it; rank 0 has none.
        assert_eq!(
            (
                &c["devices"][1]["device"],
                &c["devices"][1]["device_hex"],
                &c["devices"][1]["device_info"]
            ),
            (
                &serde_json::json!(1),
                &serde_json::json!("0000:1a:00.0"),
                &serde_json::json!("NVIDIA H200, iface lo addr 127.0.0.1:40001")
            )
        );
        assert_eq!(
            (&c["devices"][0]["device"], &c["devices"][0]["device_info"]),
            (
                &serde_json::json!(-1),
                &serde_json::json!("iface lo addr 127.0.0.1:40000")
            )
        );

        let r = &v["results"];
        assert_eq!(r.as_array().unwrap().len(), 3);
        for k in [
            "size",
            "count",
            "type",
            "redop",
            "root",
            "out_of_place",
            "in_place",
            "actual_iterations",
        ] {
            assert!(r[0].get(k).is_some(), "missing result key {k}");
        }
        for k in ["time", "alg_bw", "bus_bw", "nwrong"] {
            assert!(r[0]["out_of_place"].get(k).is_some(), "missing placement key {k}");
        }
        assert_eq!(r[0]["size"], 1 << 20);
        assert_eq!(r[0]["type"], "float");
        assert_eq!(r[0]["redop"], "sum");
        assert_eq!(r[0]["root"], "    -1");
        assert_eq!(r[0]["out_of_place"]["time"], 100.0);
        assert_eq!(r[0]["out_of_place"]["bus_bw"], 12.5);
        assert_eq!(r[0]["in_place"]["nwrong"], 0.0);
        assert_eq!(r[1]["redop"], "none");
        assert_eq!(r[1]["out_of_place"]["nwrong"], Value::Null);
        assert_eq!(r[2]["root"], "     0");
        assert_eq!(r[2]["out_of_place"]["nwrong"], 3.0);
        assert_eq!(r[2]["first_wrong"]["got"], "7");
        assert!(r[0].get("first_wrong").is_none());
        assert_eq!(v["out_of_bounds"]["count"], 1);
        assert_eq!(v["out_of_bounds"]["okay"], "false");
        assert_eq!(v["average_bus_bandwidth"]["okay"], "unchecked");

        // collbench's extras sit beside them.
        assert_eq!(r[0]["collective"], "all_reduce");
        assert_eq!(r[0]["path"], "tcp@lo");
        assert_eq!(r[0]["algo"], "ring");
        assert_eq!(r[0]["nranks"], 4);
        assert_eq!(r[0]["in_place"]["p99_us"], 103.0);
        assert_eq!(v["collbench"]["schema_version"], SCHEMA_VERSION);
        assert_eq!(v["collbench"]["complete"], true);
        assert_eq!(v["collbench"]["summary"]["wrong"], 3);
        assert_eq!(v["collbench"]["run"]["launcher"], "local");
    }

    #[test]
    fn a_run_that_stops_early_leaves_valid_partial_json() {
        let (d, v) = write_run(false);
        assert_eq!(v["collbench"]["complete"], false);
        assert_eq!(v["collbench"]["summary"], Value::Null);
        assert!(v.get("end_time").is_none());
        assert_eq!(v["results"].as_array().unwrap().len(), 3);
        // Totals so far use the same definitions as the final summary.
        assert_eq!(v["out_of_bounds"]["count"], 1);
        let avg = summarize(&records(), String::new(), None, &[], Vec::new()).avg_busbw;
        let mean = avg.iter().map(|a| a.busbw).sum::<f64>() / avg.len() as f64;
        assert_eq!(v["average_bus_bandwidth"]["bandwidth"], mean);
        // Only the file itself is left in the directory: the temporaries were renamed over it.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn non_finite_numbers_are_written_as_nan() {
        let mut rec = record(Collective::AllReduce, 8, 5.0, 1.0, Some(0));
        rec.out_of_place.algbw = f64::NAN;
        let run = run_info(false);
        let v = serde_json::to_value(document(&run, std::slice::from_ref(&rec), None)).unwrap();
        assert_eq!(v["results"][0]["out_of_place"]["alg_bw"], "nan");
        validate(&v);
    }

    #[test]
    fn times_convert_to_nccl_tests_format() {
        assert_eq!(nccl_time("2025-03-04T05:06:07Z"), "2025-03-04 05:06:07");
        assert_eq!(nccl_time("2025-03-04T05:06:07.123456+00:00"), "2025-03-04 05:06:07");
        assert_eq!(nccl_time("yesterday"), "yesterday");
    }
}
