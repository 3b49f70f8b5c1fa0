//! `collbench pairwise` as a user runs it on one machine: local ranks, every pair in the matrix, the JSON
//! against its schema, the heatmaps, and bad flags.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

fn pairwise(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("collbench")
        .expect("binary built")
        .arg("pairwise")
        .args(args)
        // Launcher variables of the surrounding environment would make this process one rank of a job.
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("MASTER_ADDR")
        .env_remove("OMPI_COMM_WORLD_RANK")
        .env_remove("PMI_RANK")
        .env_remove("SLURM_PROCID")
        .env_remove("COLLBENCH_RANK")
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .expect("collbench runs")
}

fn validate(v: &Value) {
    let schema: Value =
        serde_json::from_str(include_str!("../schema/collbench-pairwise.schema.json")).expect("schema parses");
    let mut compiler = boon::Compiler::new();
    let mut schemas = boon::Schemas::new();
    compiler.add_resource("urn:collbench-pairwise", schema).unwrap();
    let idx = compiler.compile("urn:collbench-pairwise", &mut schemas).unwrap();
    if let Err(e) = schemas.validate(v, idx) {
        panic!("pairwise JSON does not match its schema: {e:#}\n{v:#}");
    }
}

/// Rows of the matrix titled `# {title}...`: the row name and its cells.
fn matrix<'a>(stdout: &'a str, title: &str) -> Vec<Vec<&'a str>> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with(&format!("# {title}")))
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect()
}

fn png_size(path: &Path) -> (u32, u32) {
    let dec = png::Decoder::new(std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    let info = dec.read_info().expect("a PNG");
    let i = info.info();
    (i.width, i.height)
}

#[test]
fn four_local_ranks_give_every_pair_json_and_heatmaps() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pw.json");
    let plots = dir.path().join("charts");
    let out = pairwise(&[
        "--np",
        "4",
        "--bytes",
        "256K",
        "-n",
        "3",
        "--lat-iters",
        "20",
        "-J",
        json.to_str().unwrap(),
        "--plot",
        plots.to_str().unwrap(),
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("rank 0 wrote the JSON")).unwrap();
    validate(&v);
    // A shared machine's loopback may be uneven enough to be named; on one host that is a warning (exit 0),
    // as in preflight, and the output says so.
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(findings.is_empty(), stdout.contains("# No finding"), "{stdout}");
    assert_eq!(
        !findings.is_empty(),
        stdout.contains("# Warnings, not failures"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("SLOW HOST") && !stdout.contains("SLOW LINK"),
        "{stdout}"
    );
    // All four ranks share this host: pairs are ranks, and the output says so.
    assert_eq!(v["unit"], "ranks");
    assert!(stdout.contains("pairs are ranks, not hosts"), "{stdout}");
    assert_eq!(v["rounds"], 3);
    assert_eq!(v["path"], "tcp@lo");
    let pairs: Vec<(u64, u64)> = v["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["a"].as_u64().unwrap(), l["b"].as_u64().unwrap()))
        .collect();
    assert_eq!(pairs, [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]);
    for l in v["links"].as_array().unwrap() {
        for k in ["bw_ab_gbs", "bw_ba_gbs", "bidir_gbs", "latency_us", "bw_msg_rate"] {
            assert!(l[k].as_f64().unwrap() > 0.0, "{k}: {l}");
        }
        // Every link's latency distribution, ordered, over the --lat-iters round trips; latency_us is its p50.
        let st = &l["latency"];
        let f = |k: &str| st[k].as_f64().unwrap_or_else(|| panic!("{k}: {l}"));
        assert_eq!(st["samples"], 20, "{l}");
        assert!(f("min_us") > 0.0, "{l}");
        assert!(f("min_us") <= f("p50_us") && f("p50_us") <= f("p99_us"), "{l}");
        assert!(f("p99_us") <= f("p999_us") && f("p999_us") <= f("max_us"), "{l}");
        assert!((f("min_us")..=f("max_us")).contains(&f("avg_us")), "{l}");
        assert!(f("msg_rate") > 0.0, "{l}");
        // latency_us is the median (the mean of the middle two of an even count); p50 the nearest-rank one.
        let median = l["latency_us"].as_f64().unwrap();
        assert!((f("min_us")..=f("max_us")).contains(&median), "{l}");
        assert!((f("p50_us") - median).abs() <= f("max_us") - f("min_us"), "{l}");
    }
    // The table's statistics block: a header naming the columns, every link (six, under the five shown when
    // more), then the overall line.
    // (The title may go on to a second `#` line at 100 columns.)
    let block: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("# Latency statistics"))
        .skip(1)
        .skip_while(|l| l.starts_with('#') && !l.contains(" p99.9 "))
        .collect();
    assert!(!block.is_empty(), "{stdout}");
    let head: Vec<&str> = block[0].split_whitespace().collect();
    assert_eq!(
        head[..8],
        ["#", "link", "min", "avg", "p50", "p99", "p99.9", "max"],
        "{stdout}"
    );
    assert!(
        block[0].contains("msg/s 8 B") && block[0].contains("msg/s 256KiB"),
        "{stdout}"
    );
    let rows: Vec<Vec<&str>> = block[1..]
        .iter()
        .take_while(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 6, "five worst links, then all:\n{stdout}");
    assert_eq!(rows[5][0], "all", "{stdout}");
    for r in &rows {
        let n: Vec<f64> = r[1..].iter().map(|c| c.parse().unwrap()).collect();
        assert_eq!(n.len(), 8, "{r:?}");
        assert!(n[0] <= n[2] && n[2] <= n[3] && n[3] <= n[4] && n[4] <= n[5], "{r:?}");
        assert!(n[6] > 0.0 && n[7] > 0.0, "{r:?}");
    }
    // The printed matrices: a row per rank, `-` on the diagonal, a number elsewhere, the JSON's numbers.
    for title in ["Bandwidth", "Latency"] {
        let rows = matrix(&stdout, title);
        assert_eq!(rows.len(), 4, "{title}:\n{stdout}");
        for (r, row) in rows.iter().enumerate() {
            assert_eq!(row[0], format!("rank{r}"));
            for (c, cell) in row[1..].iter().enumerate() {
                if r == c {
                    assert_eq!(*cell, "-");
                } else {
                    assert!(cell.parse::<f64>().unwrap() > 0.0, "{title} {r},{c}: {cell}\n{stdout}");
                }
            }
        }
    }
    let bw01: f64 = matrix(&stdout, "Bandwidth")[0][2].parse().unwrap();
    assert!(
        (bw01 - v["links"][0]["bw_ab_gbs"].as_f64().unwrap()).abs() < 1e-3,
        "{stdout}"
    );
    for f in ["pairwise-bandwidth.png", "pairwise-latency.png"] {
        assert_eq!(png_size(&plots.join(f)), (1100, 1000), "{f}");
        assert!(
            stderr.contains(&format!("heatmap {}", plots.join(f).display())),
            "{stderr}"
        );
    }
}

#[test]
fn units_gbit_prints_eight_times_the_json_gbs() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pw.json");
    let out = pairwise(&[
        "--np",
        "2",
        "--bytes",
        "64K",
        "--units",
        "gbit",
        "-J",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{stdout}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    validate(&v);
    assert!(stdout.contains("# Bandwidth, Gb/s:"), "{stdout}");
    let rows = matrix(&stdout, "Bandwidth");
    let l = &v["links"][0];
    // The JSON keeps GB/s; the printed cells are 8 x it, to the 3 decimals printed.
    for (cell, key) in [(rows[0][2], "bw_ab_gbs"), (rows[1][1], "bw_ba_gbs")] {
        let printed: f64 = cell.parse().unwrap();
        let want = 8.0 * l[key].as_f64().unwrap();
        assert_eq!(format!("{want:.3}"), format!("{printed:.3}"), "{key}:\n{stdout}");
    }
}

/// One rank has no pair to measure: refused before anything starts (an empty matrix with "No finding" would
/// read as a pass), with the flag to change.
#[test]
fn one_rank_is_refused_for_it_has_no_pair() {
    let out = pairwise(&["--np", "1", "--bytes", "4K"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--np") && stderr.contains("give 2 or more"), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// A build without the `cuda` feature refuses `--memory cuda` by name, before anything starts, saying how to
/// build one that measures pairs of GPUs; `--memory host` is the default spelled out and measures as before.
#[cfg(not(feature = "cuda"))]
#[test]
fn memory_cuda_without_the_cuda_feature_is_refused_naming_the_flag_and_the_build() {
    let out = pairwise(&["--np", "2", "--bytes", "4K", "--memory", "cuda"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("error: --memory: "), "{stderr}");
    assert!(stderr.contains("--features cuda"), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    let out = pairwise(&["--np", "2", "--bytes", "4K", "--memory", "host"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// NCCL is measured on device buffers only, and device buffers over NCCL only: `--transport nccl` without
/// `--memory cuda`, or `--memory cuda` with another path, is refused by name before anything starts.
#[test]
fn nccl_and_device_memory_go_together() {
    let out = pairwise(&["--np", "2", "--transport", "nccl"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error: --transport: ") && stderr.contains("add --memory cuda"),
        "{stderr}"
    );
    if cfg!(feature = "cuda") {
        let out = pairwise(&["--np", "2", "--memory", "cuda", "--transport", "tcp@lo"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("error: --transport: ") && stderr.contains("give --transport nccl"),
            "{stderr}"
        );
        assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
fn no_confirm_is_recorded_in_the_json() {
    let dir = tempfile::tempdir().unwrap();
    for (flags, confirm) in [(&[][..], true), (&["--no-confirm"][..], false)] {
        let json = dir.path().join("pw.json");
        let mut args = vec!["--np", "2", "--bytes", "4K", "--force", "-J", json.to_str().unwrap()];
        args.extend_from_slice(flags);
        let out = pairwise(&args);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        validate(&v);
        assert_eq!(v["config"]["confirm"], confirm, "{flags:?}: {v:#}");
    }
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    for (args, flag) in [
        (&["--bytes", "0"][..], "--bytes"),
        (&["--bytes", "lots"], "--bytes"),
        (&["-n", "0"], "-n/--iters"),
        (&["--lat-iters", "0"], "--lat-iters"),
        (&["--np", "0"], "--np"),
        (&["--transport", "mpi"], "--transport"),
        (&["--transport", "tcp@"], "--transport"),
        // No such verbs device (or a build without RDMA): refused before any rank starts.
        (&["--transport", "rdma@no_such_dev0"], "--transport"),
        (&["-T", "-1"], "-T/--timeout"),
        (&["--iface", ""], "--iface"),
        (&["-J", "/nonexistent-dir/x.json"], "-J/--output_file"),
        (&["--units", "furlongs"], "--units"),
    ] {
        let out = pairwise(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(&format!("error: {flag}: ")), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing measured");
    }
}

#[test]
fn latency_statistics_and_message_rates_are_in_json_and_table_and_gbit_is_8x() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pw.json");
    let out = pairwise(&[
        "--np",
        "3",
        "--bytes",
        "256K",
        "--lat-iters",
        "50",
        "--no-confirm",
        "--units",
        "gbit",
        "-J",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.code().is_some_and(|c| c == 0 || c == 1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    validate(&v);
    let links = v["links"].as_array().unwrap();
    assert_eq!(links.len(), 3);
    for l in links {
        let st = &l["latency"];
        let f = |k: &str| st[k].as_f64().unwrap_or_else(|| panic!("{k} missing: {l}"));
        let (min, avg, p50, p99, p999, max) = (
            f("min_us"),
            f("avg_us"),
            f("p50_us"),
            f("p99_us"),
            f("p999_us"),
            f("max_us"),
        );
        assert!(
            min > 0.0 && min <= p50 && p50 <= p99 && p99 <= p999 && p999 <= max,
            "{l}"
        );
        assert!(min <= avg && avg <= max, "{l}");
        assert_eq!(st["samples"], 50);
        assert_eq!(p50, l["latency_us"].as_f64().unwrap());
        // Two messages per round trip: the rate is 1e6 / mean half round trip, as the samples sum.
        let rate = f("msg_rate");
        assert!((rate * avg / 1e6 - 1.0).abs() < 1e-6, "{rate} msg/s vs {avg} us: {l}");
        let bw_rate = l["bw_msg_rate"].as_f64().unwrap();
        assert!(bw_rate > 0.0, "{l}");
    }
    // The table's latency block lists every link (3 <= the worst-links cap) and an overall line.
    let block: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("# Latency statistics"))
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(block[0].contains("all 3 links"), "{stdout}");
    assert!(block[1].contains("p99.9") && block[1].contains("msg/s 8 B"), "{stdout}");
    for l in links {
        let name = format!("{}<->{}", l["a_name"].as_str().unwrap(), l["b_name"].as_str().unwrap());
        let row: Vec<&str> = block
            .iter()
            .find(|r| r.trim_start().starts_with(&name))
            .expect(&name)
            .split_whitespace()
            .collect();
        let p99: f64 = row[4].parse().unwrap();
        assert!(
            (p99 - l["latency"]["p99_us"].as_f64().unwrap()).abs() <= 0.005 + 1e-9,
            "{row:?} {l}"
        );
    }
    assert!(block.iter().any(|r| r.trim_start().starts_with("all ")), "{stdout}");
    // --units gbit: the matrix says Gb/s and every cell is 8 x the JSON's GB/s, to the printed 3 decimals.
    assert!(stdout.contains("# Bandwidth, Gb/s:"), "{stdout}");
    let rows = matrix(&stdout, "Bandwidth");
    for l in links {
        let (a, b) = (l["a"].as_u64().unwrap() as usize, l["b"].as_u64().unwrap() as usize);
        let cell: f64 = rows[a][b + 1].parse().unwrap();
        let want = 8.0 * l["bw_ab_gbs"].as_f64().unwrap();
        assert!(
            (cell - want).abs() <= 0.0005 + 1e-9,
            "cell {cell} vs 8 x JSON {want}\n{stdout}"
        );
    }
}

/// The plan line on stdout and the JSON's `plan`, from a run with `flags`: (stdout, JSON).
fn planned(flags: &[&str]) -> (String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("pw.json");
    let mut args = vec![
        "--bytes",
        "16K",
        "-n",
        "1",
        "--lat-iters",
        "5",
        "-J",
        json.to_str().unwrap(),
    ];
    args.extend_from_slice(flags);
    let out = pairwise(&args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr),
    );
    // One host: a finding is a warning, so the run exits 0 whatever the shared machine's loopback did.
    assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).expect("rank 0 wrote the JSON")).unwrap();
    validate(&v);
    (stdout, v)
}

/// The link pairs of a pairwise JSON.
fn link_pairs(v: &Value) -> Vec<(u64, u64)> {
    v["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["a"].as_u64().unwrap(), l["b"].as_u64().unwrap()))
        .collect()
}

#[test]
fn budget_0_measures_every_pair_and_says_so() {
    let (stdout, v) = planned(&["--np", "4", "--budget", "0"]);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("plan: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.starts_with("plan: every pair: 3 of 3 rounds, 6 pairs;") && line.ends_with("no budget"),
        "{line}"
    );
    let p = &v["plan"];
    assert_eq!(p["budget_s"], Value::Null, "{p}");
    assert_eq!(
        (p["participants"].as_u64(), p["circle_rounds"].as_u64()),
        (Some(4), Some(3)),
        "{p}"
    );
    assert_eq!(p["rounds"], serde_json::json!([0, 1, 2]), "{p}");
    // Without a budget every first-pass link may be measured again.
    assert_eq!(
        (p["confirm_rounds"].as_u64(), p["unconfirmed"].as_u64()),
        (Some(6), Some(0)),
        "{p}"
    );
    assert!(p["round_s"].as_f64().unwrap() > 0.0, "{p}");
    assert_eq!(v["rounds"], 3);
    assert_eq!(link_pairs(&v), [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]);
}

#[test]
fn a_budget_too_small_for_every_pair_measures_a_sample_and_says_so() {
    // Six ranks, one second: the margin alone is more, so the plan is the fewest rounds (4 of the circle's 5),
    // each rank meets 4 partners, and nothing is left to measure suspects again.
    let (stdout, v) = planned(&["--np", "6", "--budget", "1"]);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("plan: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.starts_with("plan: 4 of 5 rounds sampled: 12 of 15 pairs, every host meets 4 partners"),
        "{line}"
    );
    assert!(
        line.contains("of --budget 1 s") && line.contains("raise --budget"),
        "{line}"
    );
    let p = &v["plan"];
    assert_eq!(p["budget_s"].as_f64(), Some(1.0), "{p}");
    assert_eq!(p["rounds"].as_array().unwrap().len(), 4, "{p}");
    assert_eq!(p["confirm_rounds"].as_u64(), Some(0), "{p}");
    assert_eq!(
        (v["rounds"].as_u64(), v["remeasure_rounds"].as_u64()),
        (Some(4), Some(0))
    );
    // The links are the planned rounds' pairs: 12 of 15, each rank in 4 of them.
    let pairs = link_pairs(&v);
    assert_eq!(pairs.len(), 12, "{pairs:?}");
    for r in 0..6 {
        assert_eq!(
            pairs.iter().filter(|&&(a, b)| a == r || b == r).count(),
            4,
            "rank {r}: {pairs:?}"
        );
    }
    // The plan line comes before the matrices, as soon as the plan is made.
    let at = |s: &str| stdout.find(s).unwrap_or_else(|| panic!("{s}: {stdout}"));
    assert!(at("plan: ") < at("# Bandwidth"), "{stdout}");
}

#[test]
fn the_default_budget_is_recorded_with_the_plan() {
    let (stdout, v) = planned(&["--np", "2"]);
    assert!(stdout.contains("of --budget 120 s"), "{stdout}");
    assert_eq!(v["plan"]["budget_s"].as_f64(), Some(120.0));
    assert_eq!(v["plan"]["rounds"], serde_json::json!([0]));
}
