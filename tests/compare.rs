//! `collbench compare` as a user runs it: results files in the layout `collbench run -J` writes, a
//! regressed copy, a noisy copy, identical files, and bad input.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::{json, Value};

fn collbench() -> Command {
    let mut c = Command::cargo_bin("collbench").expect("binary built");
    c.env_remove("COLLBENCH_RANK")
        .timeout(std::time::Duration::from_secs(300));
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One `results` entry as `collbench run --np 2 --collective all_reduce -J` writes it.
fn entry(size: u64, time: f64, ci95: f64) -> Value {
    let busbw = size as f64 / time / 1e3;
    let placement = json!({
        "time": time, "alg_bw": busbw, "bus_bw": busbw, "nwrong": 0.0, "rank0_us": time, "avg_us": time,
        "min_us": time * 0.95, "max_us": time, "p50_us": time, "p99_us": time * 1.5, "ci95_us": ci95,
        "iters": 3
    });
    json!({
        "size": size, "count": size / 4, "type": "float", "redop": "sum", "root": "    -1",
        "out_of_place": placement, "in_place": placement, "actual_iterations": 3, "experiment_name": "",
        "collective": "all_reduce", "path": "tcp@lo", "algo": "ring", "nranks": 2, "repeat": 0
    })
}

/// A baseline at 1, 2 and 4 MiB with intervals of 2% of the time.
fn baseline() -> Value {
    let results: Vec<Value> = [(1u64 << 20, 10_000.0), (2 << 20, 18_000.0), (4 << 20, 35_000.0)]
        .iter()
        .map(|&(size, t)| entry(size, t, t * 0.02))
        .collect();
    json!({"version": 2, "start_time": "2025-03-04 05:06:07", "results": results,
           "collbench": {"schema_version": 1, "complete": true}})
}

/// `doc` with every out-of-place time scaled by `factor` (busbw inversely), intervals kept.
fn scaled(doc: &Value, factor: f64, only_size: Option<u64>) -> Value {
    let mut d = doc.clone();
    for r in d["results"].as_array_mut().unwrap() {
        if only_size.is_some_and(|s| r["size"] != s) {
            continue;
        }
        let o = &mut r["out_of_place"];
        o["time"] = json!(o["time"].as_f64().unwrap() * factor);
        o["bus_bw"] = json!(o["bus_bw"].as_f64().unwrap() / factor);
    }
    d
}

fn write(dir: &Path, name: &str, v: &Value) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec_pretty(v).unwrap()).unwrap();
    p
}

fn compare(old: &Path, new: &Path, extra: &[&str]) -> Output {
    collbench()
        .arg("compare")
        .arg(old)
        .arg(new)
        .args(extra)
        .output()
        .expect("collbench runs")
}

#[test]
fn a_regressed_run_exits_1_and_names_the_regressed_points() {
    let dir = tempfile::tempdir().unwrap();
    let base = write(dir.path(), "base.json", &baseline());
    // Only 2 MiB got 30% slower.
    let reg = write(dir.path(), "reg.json", &scaled(&baseline(), 1.3, Some(2 << 20)));
    let md = dir.path().join("out.md");
    let js = dir.path().join("out.json");
    let out = compare(
        &base,
        &reg,
        &["-J", js.to_str().unwrap(), "--markdown", md.to_str().unwrap()],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("# 1 of 3 compared points regressed"), "{stdout}");
    let regressed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("# REGRESSED:")).collect();
    assert_eq!(regressed.len(), 1, "{stdout}");
    assert!(
        regressed[0].contains("tcp@lo all_reduce float sum 2097152 B"),
        "{stdout}"
    );
    assert!(
        regressed[0].contains("(+30.0%)") && regressed[0].contains("(-23.1%)"),
        "{stdout}"
    );
    // Every compared point is a table row, one of them regressed.
    let rows: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    assert_eq!(rows.iter().filter(|r| r.ends_with("REGRESSED")).count(), 1);
    let j: Value = serde_json::from_slice(&std::fs::read(&js).unwrap()).unwrap();
    assert_eq!(j["regressions"], 1);
    assert_eq!(j["points"][1]["verdict"], "regressed");
    assert_eq!(j["points"][0]["verdict"], "unchanged");
    assert!(std::fs::read_to_string(&md).unwrap().contains("**REGRESSED**"));
}

/// A CPU-bound run's sentence is a `#` line like the rest of the verdict: every unprefixed line is a row.
#[test]
fn the_cpu_saturation_line_is_a_comment_line_after_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let base = write(dir.path(), "base.json", &baseline());
    let mut busy = scaled(&baseline(), 1.3, Some(2 << 20));
    busy["collbench"]["summary"] = json!({"paths": [{"path": "tcp@lo", "cpu_limited": true, "host_busy_pct": 97.0}]});
    let busy = write(dir.path(), "busy.json", &busy);
    let out = compare(&base, &busy, &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let last = stdout.lines().last().unwrap_or("");
    assert!(
        last.starts_with("# CPU saturation: ") && last.contains("busy.json: tcp@lo was CPU-bound (CPUs 97% busy)"),
        "{stdout}"
    );
    let rows: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    assert!(rows.iter().all(|r| r.starts_with("  ")), "{stdout}");
}

#[test]
fn noise_and_identical_files_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let base = write(dir.path(), "base.json", &baseline());
    // 1% slower with 2% intervals: inside the noise (and under the threshold).
    let noise = write(dir.path(), "noise.json", &scaled(&baseline(), 1.01, None));
    let out = compare(&base, &noise, &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("# 0 of 3 compared points regressed"), "{stdout}");
    let out = compare(&base, &base, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    // A lower threshold does not turn noise into a regression: the intervals still overlap.
    let out = compare(&base, &noise, &["--threshold", "0.5"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

#[test]
fn points_in_one_file_only_or_at_other_rank_counts_are_listed_not_compared() {
    let dir = tempfile::tempdir().unwrap();
    let base = write(dir.path(), "base.json", &baseline());
    let mut other = baseline();
    let results = other["results"].as_array_mut().unwrap();
    results[0]["nranks"] = json!(4);
    results[2]["size"] = json!(8u64 << 20);
    let other = write(dir.path(), "other.json", &other);
    let out = compare(&base, &other, &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("# not compared, different rank counts (old 2, new 4): tcp@lo all_reduce float sum 1048576 B"),
        "{stdout}"
    );
    assert!(stdout.contains("# only in old (not compared): tcp@lo all_reduce float sum 4194304 B"));
    assert!(stdout.contains("# only in new (not compared): tcp@lo all_reduce float sum 8388608 B"));
    assert!(stdout.contains("# 0 of 1 compared points regressed"), "{stdout}");
}

#[test]
fn bad_input_exits_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let base = write(dir.path(), "base.json", &baseline());
    let missing = dir.path().join("missing.json");
    let not_json = dir.path().join("notes.txt");
    std::fs::write(&not_json, "busbw was fine\n").unwrap();
    let not_ours = write(dir.path(), "other.json", &json!({"rows": []}));
    let mut far = baseline();
    for r in far["results"].as_array_mut().unwrap() {
        r["path"] = json!("tcp@eth0");
    }
    let disjoint = write(dir.path(), "disjoint.json", &far);
    let cases: [(&Path, &Path, &str, &str); 5] = [
        (&base, &missing, "missing.json", "cannot read"),
        (&missing, &base, "missing.json", "cannot read"),
        (&base, &not_json, "notes.txt", "not JSON"),
        (&not_ours, &base, "other.json", "no `results` array"),
        (&base, &disjoint, "disjoint.json", "no point is in both files"),
    ];
    for (old, new, file, what) in cases {
        let out = compare(old, new, &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file}: {stderr}");
        assert!(stderr.contains(file) && stderr.contains(what), "{file}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let out = compare(&base, &base, &["--threshold=-1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--threshold"));
}

#[test]
fn a_real_run_compared_with_itself_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.json");
    let run = collbench()
        .args(["run", "--np", "2", "-b", "1M", "-e", "4M", "-n", "3", "-w", "1"])
        .args(["--collective", "all_reduce", "-J"])
        .arg(&file)
        .output()
        .expect("collbench runs");
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let out = compare(&file, &file, &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("# 0 of 3 compared points regressed"), "{stdout}");
}

#[test]
fn an_incomplete_or_newer_file_is_refused_and_outputs_are_not_overwritten_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let old = write(dir.path(), "old.json", &baseline());
    // A run that stopped after its first point.
    let mut partial = baseline();
    partial["collbench"]["complete"] = json!(false);
    partial["results"].as_array_mut().unwrap().truncate(1);
    let new = write(dir.path(), "partial.json", &partial);
    let out = compare(&old, &new, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("partial.json") && err.contains("complete: false") && err.contains("1 points measured"),
        "{err}"
    );
    assert!(err.contains("--allow-incomplete"), "{err}");
    // Knowingly: the point it has is compared.
    let out = compare(&old, &new, &["--allow-incomplete"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let mut newer = baseline();
    newer["collbench"]["schema_version"] = json!(99);
    let newer = write(dir.path(), "newer.json", &newer);
    let out = compare(&old, &newer, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("newer.json: results schema version 99"), "{err}");

    // An existing output file is kept unless --force, as every other command's outputs.
    let kept = dir.path().join("diff.json");
    std::fs::write(&kept, "keep me").unwrap();
    let out = compare(&old, &old, &["-J", kept.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--force"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "keep me");
    let out = compare(&old, &old, &["-J", kept.to_str().unwrap(), "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_ne!(std::fs::read_to_string(&kept).unwrap(), "keep me");
}

#[test]
fn units_gbit_prints_busbw_in_gbit_per_s_eight_times_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let base_doc = baseline();
    let base = write(dir.path(), "base.json", &base_doc);
    let reg = write(dir.path(), "reg.json", &scaled(&base_doc, 1.3, Some(2 << 20)));
    let js = dir.path().join("out.json");
    let out = compare(&base, &reg, &["--units", "gbit", "-J", js.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("# times in us, busbw in Gb/s\n"), "{stdout}");
    assert!(!stdout.contains("GB/s"), "{stdout}");
    // Each row's old busbw (column 12) is 8 x the file's GB/s, to the 3 decimals printed.
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    for (row, entry) in rows.iter().zip(base_doc["results"].as_array().unwrap()) {
        let gbs = entry["out_of_place"]["bus_bw"].as_f64().unwrap();
        assert_eq!(row[11], format!("{:.3}", gbs * 8.0), "{row:?}");
    }
    let regressed = stdout.lines().find(|l| l.starts_with("# REGRESSED:")).unwrap();
    assert!(regressed.ends_with("Gb/s (-23.1%)"), "{regressed}");
    // The JSON keeps GB/s.
    let j: Value = serde_json::from_slice(&std::fs::read(&js).unwrap()).unwrap();
    let gbs = base_doc["results"][0]["out_of_place"]["bus_bw"].as_f64().unwrap();
    let kept = j["points"][0]["old"]["bus_bw"].as_f64().unwrap();
    assert!((kept - gbs).abs() < 1e-9 * gbs, "{kept} vs {gbs}");
    // By default, GB/s.
    let out = compare(&base, &reg, &[]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("# times in us, busbw in GB/s\n"), "{stdout}");
    let first = stdout.lines().find(|l| !l.starts_with('#')).unwrap();
    assert_eq!(
        first.split_whitespace().nth(11),
        Some(format!("{gbs:.3}").as_str()),
        "{stdout}"
    );
}
