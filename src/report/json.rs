//! The JSON file (`-J`): the [`Document`] filled from the run, rewritten atomically after every record, so
//! an aborted run still leaves valid JSON with every point measured so far. `start_time` and `end_time`
//! are written as nccl-tests writes them, `YYYY-MM-DD HH:MM:SS`.

use std::path::{Path, PathBuf};

use super::file::{write_atomic, Replace};
use super::summary::{nccl_avg_busbw, summarize};
use super::Reporter;
use crate::error::{Error, Result};
use crate::results::document::{
    AverageBusBw, Collbench, Config, Device, Document, Entry, JBool, MemoryNote, OutOfBounds, Placement,
};
use crate::results::failure::{PointKey, RunError};
use crate::results::record::{Record, RunInfo, Summary, Timing, SCHEMA_VERSION};
use crate::results::run_params::{RunParams, StepView};
use crate::transport::path::Traits;

pub use crate::results::document::NCCL_TESTS_JSON_VERSION;

/// Writes the JSON results file at a path, rewriting it after every record.
pub struct JsonReporter {
    path: PathBuf,
    /// Whether a file at the path may be replaced: `--force` at first, then yes (the file is this run's).
    replace: Replace,
    run: Option<RunInfo>,
    records: Vec<Record>,
    /// What ended the run early, once it has failed.
    error: Option<RunError>,
}

impl JsonReporter {
    /// A reporter for `path` that replaces a file already there only with `force`; check it first with [`check_writable`](super::check_writable).
    pub fn new(path: impl Into<PathBuf>, force: bool) -> Self {
        JsonReporter {
            path: path.into(),
            replace: Replace::from_force(force),
            run: None,
            records: Vec::new(),
            error: None,
        }
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write(&mut self, summary: Option<&Summary>) -> Result<()> {
        // Nothing to write before begin(): the run metadata is what makes the file meaningful.
        let Some(run) = &self.run else { return Ok(()) };
        // A stream (a pipe, /dev/stdout) cannot be rewritten: it gets the final document only, the failed
        // run's included.
        if summary.is_none() && self.error.is_none() && super::file::is_stream(&self.path) {
            return Ok(());
        }
        let mut doc = document(run, &self.records, summary);
        doc.errors.extend(self.error.clone());
        let mut bytes = serde_json::to_vec_pretty(&doc)
            .map_err(|e| Error::io(format!("encoding {}", self.path.display()), e.into()))?;
        bytes.push(b'\n');
        write_atomic(&self.path, &bytes, self.replace)?;
        self.replace = Replace::Allowed;
        Ok(())
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

    fn fail(&mut self, error: &RunError, planned: &[PointKey]) -> Result<()> {
        let measured: Vec<PointKey> = self.records.iter().map(PointKey::of).collect();
        self.error = Some(error.clone().with_missing(planned, &measured));
        self.write(None)
    }
}

impl MemoryNote {
    fn of(run: &RunInfo) -> MemoryNote {
        let p = &run.params;
        let kind = p.memory.clone().unwrap_or_else(|| "host".into());
        MemoryNote {
            times_include_staging: kind == "cuda",
            reductions: if p.reduce_on_device {
                "device (all_reduce, reduce_scatter; reduce on the host)"
            } else {
                "host"
            }
            .into(),
            direct_paths: direct_paths(p),
            rdma_route: run.rdma_route.clone(),
            emulated: p.emulate_device,
            kind,
        }
    }
}

/// The paths of the run that take device memory directly (nccl).
fn direct_paths(p: &RunParams) -> Vec<String> {
    p.transports
        .iter()
        .filter(|t| Traits::named(t).is_some_and(|k| k.on_device_stream))
        .cloned()
        .collect()
}

fn document<'a>(run: &RunInfo, records: &[Record], summary: Option<&'a Summary>) -> Document<&'a Summary> {
    // While running, the totals cover the points so far, by the same definition as the final summary.
    let so_far;
    let totals = match summary {
        Some(s) => s,
        None => {
            so_far = summarize(records, String::new(), None, &[], Vec::new());
            &so_far
        }
    };
    // As nccl-tests computes it: the mean busbw over every row and placement of the run (NaN, written
    // "nan", before the first row); collbench's own averages are in its summary.
    let bandwidth = nccl_avg_busbw(records);
    let cpu_time = run.params.iteration.is_some_and(|i| i.cputime);
    Document {
        version: NCCL_TESTS_JSON_VERSION,
        start_time: nccl_time(&run.start_time),
        args: run.args.clone(),
        env: Vec::new(),
        nccl_version: None,
        config: config(run),
        results: records
            .iter()
            .zip(crate::results::off_curve::of_records(records))
            .map(|(r, off_curve)| Entry {
                cpu_time,
                off_curve,
                ..entry(r)
            })
            .collect(),
        out_of_bounds: OutOfBounds {
            count: totals.out_of_bounds,
            okay: JBool(totals.out_of_bounds == 0),
        },
        average_bus_bandwidth: AverageBusBw {
            bandwidth,
            okay: run.min_bw.map_or_else(
                || "unchecked".to_string(),
                // nccl-tests' NCCL_TESTS_MIN_BW check: within 90% of the minimum asked for.
                |min| (bandwidth >= min * 0.9).to_string(),
            ),
        },
        errors: Vec::new(),
        end_time: summary.map(|s| nccl_time(&s.end_time)),
        collbench: Some(Collbench {
            schema_version: SCHEMA_VERSION,
            memory: MemoryNote::of(run),
            run: run.clone(),
            summary,
            complete: summary.is_some(),
        }),
    }
}

fn config(run: &RunInfo) -> Config {
    let p = &run.params;
    let it = p.iteration.unwrap_or_default();
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
        aggregated_iterations: it.agg,
        validation: p.check_iters,
        graph: 0,
        blocking_collectives: JBool(it.blocking != 0),
        per_iter_timing: JBool(it.per_iter),
        per_iter_skip: it.skip,
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

/// `records` as entries, for documents of collbench's own that carry measurements (`preflight -J`, which
/// writes them flat with [`flat_entries`](crate::results::document::flat_entries)).
pub fn entries(records: &[Record]) -> Vec<Entry> {
    records.iter().map(entry).collect()
}

fn entry(rec: &Record) -> Entry {
    Entry {
        size: Some(rec.size),
        count: Some(rec.count),
        dtype: Some(rec.dtype.name().into()),
        redop: Some(rec.op.map_or("none", |o| o.name()).into()),
        // nccl-tests writes the root as its table cell, the string sprintf("%6i", root).
        root: Some(format!("{:6}", rec.root.map_or(-1, |r| r as i64))),
        out_of_place: Some(placement(&rec.out_of_place)),
        in_place: Some(placement(&rec.in_place)),
        actual_iterations: Some(rec.out_of_place.iters),
        experiment_name: Some(String::new()),
        collective: Some(rec.collective.name().into()),
        path: Some(rec.path.clone()),
        algo: Some(rec.algo.clone()),
        nranks: Some(rec.nranks),
        repeat: Some(rec.repeat),
        first_wrong: rec.first_wrong.clone(),
        out_of_place_per_iter: rec.out_of_place.per_iter.clone(),
        in_place_per_iter: rec.in_place.per_iter.clone(),
        cpu_time: false,
        off_curve: None,
        timing: rec.timing,
    }
}

fn placement(t: &Timing) -> Placement {
    Placement {
        time: Some(t.time_us),
        alg_bw: Some(t.algbw),
        bus_bw: Some(t.busbw),
        nwrong: t.wrong.map(|w| w as f64),
        rank0_us: Some(t.rank0_us),
        avg_us: Some(t.avg_us),
        min_us: Some(t.min_us),
        max_us: Some(t.max_us),
        p50_us: Some(t.p50_us),
        p99_us: Some(t.p99_us),
        ci95_us: Some(t.ci95_us),
        iters: Some(t.iters),
        staging_us: t.staging_us,
        staging_wait_us: t.staging_wait_us,
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
    use crate::results::record::WrongElement;
    use crate::results::testutil::{record, run_info};

    #[test]
    fn nccl_is_listed_as_a_direct_path() {
        let o = serde_json::json!({"transports": ["tcp@lo", "nccl"], "memory": "cuda"});
        let direct = |o: &Value| direct_paths(&RunParams::from_legacy(o));
        assert_eq!(direct(&o), vec!["nccl".to_string()]);
        assert!(direct(&serde_json::json!({"transports": ["tcp"]})).is_empty());
        assert!(direct(&serde_json::json!({})).is_empty());
    }

    const SCHEMA: &str = include_str!("../../schema/collbench-results.schema.json");

    /// Records covering the awkward cases: no op, no root, check off, a wrong element with its place.
    fn records() -> Vec<Record> {
        let mut ar = record(Collective::AllReduce, 1 << 20, 100.0, 12.5, Some(0));
        // As the nccl path records it: its timed calls queued, one wait.
        ar.timing = Some(crate::results::timing::TimingMode::Queued);
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
        let mut j = JsonReporter::new(dir.path().join("r.json"), false);
        j.begin(&run_info(false)).unwrap();
        let recs = records();
        for r in &recs {
            j.record(r).unwrap();
        }
        if finish {
            let mut summary = summarize(&recs, "2025-03-04T05:07:00.5Z".into(), None, &[], Vec::new());
            // A device run's peak, its bound counting the CUDA context's start-up memory.
            summary.peak_memory = crate::results::PeakMemory::of(vec![Some(300 << 20)], &["node0"], 1 << 20)
                .map(|m| m.with_runtime(250 << 20));
            j.finish(&summary).unwrap();
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
    fn a_failed_runs_file_holds_its_error_and_the_points_missing_and_validates() {
        let dir = tempfile::tempdir().unwrap();
        let mut j = JsonReporter::new(dir.path().join("r.json"), false);
        j.begin(&run_info(false)).unwrap();
        let recs = records();
        j.record(&recs[0]).unwrap();
        let planned: Vec<PointKey> = recs.iter().map(PointKey::of).collect();
        let error = RunError {
            message: "during all_reduce of 4 MiB: gone. Culprit: rank 1 (host h1)".into(),
            phase: Some("all_reduce of 4 MiB".into()),
            rank: Some(1),
            host: Some("h1".into()),
            culprit: true,
            exit_code: 3,
            missing: Vec::new(),
        };
        j.fail(&error, &planned).unwrap();
        let v: Value = serde_json::from_slice(&std::fs::read(j.path()).unwrap()).unwrap();
        validate(&v);
        assert_eq!(v["collbench"]["complete"], false);
        let read = Document::from_value(&v).unwrap();
        assert_eq!(read.errors, [error.with_missing(&planned, &planned[..1])]);
        assert_eq!(read.errors[0].missing.len(), recs.len() - 1);
    }

    #[test]
    fn a_written_file_reads_back_as_the_same_document() {
        let (_d, v) = write_run(true);
        let read = Document::from_value(&v).unwrap();
        assert_eq!(read.results, records().iter().map(entry).collect::<Vec<_>>());
        let c = read.collbench.as_ref().unwrap();
        assert_eq!((c.complete, c.run.ranks.len()), (true, 2));
        assert_eq!(c.memory, MemoryNote::of(&run_info(false)));
        // Written again (with the summary as a value), the document is the same JSON.
        let again = Document {
            version: read.version,
            start_time: read.start_time,
            args: read.args,
            env: read.env,
            nccl_version: read.nccl_version,
            config: read.config,
            results: read.results,
            out_of_bounds: read.out_of_bounds,
            average_bus_bandwidth: read.average_bus_bandwidth,
            errors: read.errors,
            end_time: read.end_time,
            collbench: read.collbench.map(|c| Collbench {
                summary: Some(&v["collbench"]["summary"]),
                schema_version: c.schema_version,
                memory: c.memory,
                run: c.run,
                complete: c.complete,
            }),
        };
        assert_eq!(serde_json::to_value(&again).unwrap(), v);
    }

    #[test]
    fn every_committed_results_file_reads() {
        // Files written by earlier versions (results/ holds several) read with the current type.
        let mut read = 0;
        let mut dirs = vec![std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/results"
        ))];
        while let Some(dir) = dirs.pop() {
            for f in std::fs::read_dir(&dir).unwrap() {
                let f = f.unwrap().path();
                if f.is_dir() {
                    dirs.push(f);
                    continue;
                }
                if f.extension() != Some(std::ffi::OsStr::new("json")) {
                    continue;
                }
                let v: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
                if v.get("collbench").is_some_and(Value::is_object) && v.get("results").is_some() {
                    let doc = crate::results::reader::parse(&v, &f.display().to_string()).unwrap();
                    assert_eq!(doc.results.len(), v["results"].as_array().unwrap().len());
                    // Their `options` object reads as the params record.
                    let run = &doc.collbench.as_ref().unwrap().run;
                    assert!(
                        run.params.min_bytes.is_some() && run.params.iters.is_some(),
                        "{}",
                        f.display()
                    );
                    read += 1;
                }
            }
        }
        assert!(read >= 20, "only {read} results files found");
    }

    #[test]
    fn the_rdma_route_is_in_the_memory_note_only_when_the_run_has_one() {
        let mut run = run_info(false);
        let note = serde_json::to_value(MemoryNote::of(&run)).unwrap();
        assert!(note.get("rdma_route").is_none(), "{note}");
        run.params.memory = Some("cuda".into());
        run.params.transports = vec!["tcp@lo".into(), "rdma@mlx5_0:1".into()];
        run.rdma_route = Some("staging through host memory (no GPUDirect RDMA route: ...)".into());
        let note = serde_json::to_value(MemoryNote::of(&run)).unwrap();
        assert_eq!(note["rdma_route"], run.rdma_route.clone().unwrap().as_str());
        assert_eq!(
            (&note["kind"], &note["times_include_staging"]),
            (&"cuda".into(), &true.into())
        );
        // Written once: under collbench.memory, not again under collbench.run; the file still validates.
        let dir = tempfile::tempdir().unwrap();
        let mut j = JsonReporter::new(dir.path().join("r.json"), false);
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
        let mut t = crate::results::testutil::timing(100.0, 1.0, Some(0));
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
        assert_eq!(v["version"], 3);
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
        // collbench's statistics in the entry's own object, not under nccl-tests' names.
        assert_eq!(r[0]["collbench"]["in_place"]["p99_us"], 103.0);
        assert!(r[0]["in_place"].get("p99_us").is_none() && r[0].get("out_of_place_per_iter").is_none());
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
        // nccl-tests' average: every row, both placements.
        let recs = records();
        let mean = recs
            .iter()
            .map(|r| r.out_of_place.busbw + r.in_place.busbw)
            .sum::<f64>()
            / 6.0;
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
    fn per_iteration_objects_and_cpu_time_are_written_under_nccl_tests_keys_and_read_back() {
        let mut run = run_info(false);
        run.params.iteration = Some(crate::results::run_params::IterParams {
            per_iter: true,
            skip: 1,
            cputime: true,
            ..Default::default()
        });
        let mut rec = record(Collective::AllReduce, 1 << 20, 100.0, 12.5, Some(0));
        rec.out_of_place.per_iter = crate::results::per_iter::PerIter::of(&[&[9.0, 1.0, 2.0], &[3.0, 4.0, 1.0]], 1);
        rec.in_place.per_iter = rec.out_of_place.per_iter.clone();
        let v = serde_json::to_value(document(&run, std::slice::from_ref(&rec), None)).unwrap();
        validate(&v);
        let e = &v["results"][0];
        // nccl-tests' order, as written: each placement, then its per-iteration object.
        let written = serde_json::to_string(&document(&run, std::slice::from_ref(&rec), None)).unwrap();
        let at = |k: &str| written.find(&format!("\"{k}\":")).unwrap();
        assert!(at("out_of_place") < at("out_of_place_per_iter") && at("out_of_place_per_iter") < at("in_place"));
        assert_eq!(e["out_of_place"]["cpu_time"], 100.0);
        assert!(e["out_of_place"].get("time").is_none());
        assert_eq!(
            e["out_of_place_per_iter"]["times_us"],
            serde_json::json!([9.0, 4.0, 2.0])
        );
        assert_eq!(e["out_of_place_per_iter"]["skipped_iterations"], 1);
        assert_eq!(v["config"]["per_iter_timing"], "true");
        assert_eq!(v["config"]["per_iter_skip"], 1);
        let read = Document::from_value(&v).unwrap();
        let r = &read.results[0];
        assert_eq!(r.out_of_place().time, Some(100.0), "cpu_time reads as the time");
        assert_eq!(r.out_of_place().p99_us, Some(103.0), "the statistics are lifted back");
        assert_eq!(r.in_place_per_iter, rec.in_place.per_iter);
    }

    #[test]
    fn times_convert_to_nccl_tests_format() {
        assert_eq!(nccl_time("2025-03-04T05:06:07Z"), "2025-03-04 05:06:07");
        assert_eq!(nccl_time("2025-03-04T05:06:07.123456+00:00"), "2025-03-04 05:06:07");
        assert_eq!(nccl_time("yesterday"), "yesterday");
    }
}
