//! `collbench selftest` as a user runs it: the table and JSON it writes, and bad flags.

use assert_cmd::Command;
use serde_json::Value;

fn selftest(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("collbench")
        .expect("binary built")
        .arg("selftest")
        .args(args)
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .expect("collbench runs")
}

#[test]
fn small_run_prints_every_row_and_writes_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("selftest.json");
    let out = selftest(&["--bytes", "4M", "--iters", "2", "-J", json.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let kinds: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[1])).collect();
    // The copy rows: memcpy, then the explicit loops where the CPU has AVX2; exactly one is the reference.
    let copies: Vec<&Vec<&str>> = rows.iter().take_while(|r| r[0] == "copy").collect();
    assert_eq!(copies[0][1], "memcpy", "{stdout}");
    let methods: Vec<&str> = copies.iter().map(|r| r[1]).collect();
    assert!(
        methods == ["memcpy"] || methods == ["memcpy", "avx2", "avx2-nt"],
        "{stdout}"
    );
    assert_eq!(copies.iter().filter(|r| r[6] == "ref").count(), 1, "{stdout}");
    for c in &copies {
        let vs: f64 = c[5].parse().unwrap();
        assert!(vs <= 1.0, "no copy is faster than the reference: {c:?}");
    }
    assert_eq!(
        kinds[copies.len()..],
        [
            ("sum", "float"),
            ("sum", "half"),
            ("sum", "bfloat16"),
            ("sum", "double"),
            ("sum", "int32")
        ],
        "{stdout}"
    );
    for r in &rows {
        assert_eq!(r.len(), 7, "{r:?}");
        assert_eq!(r[2], "4194304", "{r:?}");
        if r[0] == "copy" {
            continue;
        }
        let target = r[6];
        let targeted = ["float", "half", "bfloat16"].contains(&r[1]);
        if targeted {
            assert!(target == "PASS" || target == "BELOW", "{r:?}");
        } else {
            assert_eq!(target, "-", "{r:?}");
        }
    }

    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["bytes"], 4 << 20);
    assert_eq!(v["iters"], 2);
    assert_eq!(v["target_ratio"], 0.8);
    assert!(v["accounting"].as_str().unwrap().contains("read + written"));
    assert_eq!(v["copy"]["bytes_moved"], 2 * (4 << 20));
    assert!(v["copy"]["gbps"].as_f64().unwrap() > 0.0);
    let copies = v["copies"].as_array().unwrap();
    assert_eq!(copies.len(), methods.len());
    let best = copies.iter().map(|c| c["gbps"].as_f64().unwrap()).fold(0.0, f64::max);
    assert_eq!(
        v["copy"]["gbps"].as_f64().unwrap(),
        best,
        "the reference is the fastest copy"
    );
    assert!(copies.iter().any(|c| c["method"] == v["copy"]["method"]));
    let reds = v["reductions"].as_array().unwrap();
    let dtypes: Vec<&str> = reds.iter().map(|r| r["dtype"].as_str().unwrap()).collect();
    assert_eq!(dtypes, ["float", "half", "bfloat16", "double", "int32"]);
    for r in reds {
        assert_eq!(r["op"], "sum");
        assert_eq!(r["bytes_moved"], 3 * (4 << 20));
        let ratio = r["ratio"].as_f64().unwrap();
        assert!(ratio.is_finite() && ratio > 0.0, "{r}");
        let gbps = r["gbps"].as_f64().unwrap();
        let copy = v["copy"]["gbps"].as_f64().unwrap();
        assert!((ratio - gbps / copy).abs() < 1e-9 * ratio, "{r}");
        let expect = match (r["targeted"].as_bool().unwrap(), ratio >= 0.8) {
            (false, _) => Value::Null,
            (true, true) => Value::from("PASS"),
            (true, false) => Value::from("BELOW"),
        };
        assert_eq!(r["status"], expect, "{r}");
    }
}

#[test]
fn bad_sizes_exit_2_naming_the_flag() {
    for bad in ["0", "1Q"] {
        let out = selftest(&["--bytes", bad]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--bytes {bad}: {stderr}");
        assert!(stderr.contains("--bytes"), "--bytes {bad}: {stderr}");
        assert!(out.stdout.is_empty(), "nothing measured for --bytes {bad}");
    }
}

#[test]
fn zero_iters_exit_2_naming_the_flag() {
    let out = selftest(&["--iters", "0"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--iters"), "{stderr}");
}

/// A JSON file from an earlier run is kept unless --force; the refusal comes before anything is measured.
#[test]
fn an_existing_json_file_is_kept_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("selftest.json");
    std::fs::write(&json, "earlier results").unwrap();
    let out = selftest(&["--bytes", "1M", "--iters", "1", "-J", json.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("-J") && stderr.contains("exists; use --force"),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "nothing measured: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "earlier results");

    let out = selftest(&["--bytes", "1M", "--iters", "1", "-J", json.to_str().unwrap(), "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v.is_object(), "replaced by this run's JSON: {v}");
}

#[test]
fn units_gbit_prints_bandwidth_in_gbit_per_s_eight_times_the_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("selftest.json");
    let out = selftest(&[
        "--bytes",
        "1M",
        "--iters",
        "1",
        "--units",
        "gbit",
        "-J",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("GB/s"), "{stdout}");
    let header = stdout.lines().find(|l| l.contains("size(B)")).unwrap();
    assert_eq!(header.split_whitespace().nth(5), Some("Gb/s"), "{stdout}");
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let json_rows: Vec<&Value> = v["copies"]
        .as_array()
        .unwrap()
        .iter()
        .chain(v["reductions"].as_array().unwrap())
        .collect();
    assert_eq!(rows.len(), json_rows.len(), "{stdout}");
    for (row, j) in rows.iter().zip(json_rows) {
        let gbs = j["gbps"].as_f64().unwrap();
        assert_eq!(row[4], format!("{:.2}", gbs * 8.0), "{row:?} vs {j}");
    }
}
