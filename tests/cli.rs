//! The binary as a user runs it: bad input, the default run, output files, wrong data, exit codes.

use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;

mod common;
use common::validate_against_schema;

fn collbench() -> Command {
    let mut c = Command::cargo_bin("collbench").expect("binary built");
    // Keep the runs independent of the environment the tests run in.
    c.env_remove("COLLBENCH_RANK")
        .timeout(std::time::Duration::from_secs(300));
    c
}

fn run(args: &[&str]) -> Output {
    collbench().arg("run").args(args).output().expect("collbench runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Rows of the tables: lines that are not comments.
fn rows(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn bad_input_names_the_flag_and_exits_2_without_running() {
    let cases: &[(&[&str], &str)] = &[
        (&["-b", "1Q"], "-b/--minbytes"),
        (&["-b", "1M", "-e", "1K"], "-b"),
        (&["-f", "1"], "-f"),
        (&["--np", "0"], "--np"),
        (&["--np", "100000"], "--np"),
        (&["-d", "float7"], "-d"),
        (&["-o", "median"], "-o"),
        (&["--collective", "all_scatter"], "--collective"),
        (&["--algo", "fastest"], "--algo"),
        (&["-n", "0"], "-n"),
        (&["-T", "0"], "-T"),
        (&["--streams", "99"], "--streams"),
        (&["--transport", "udp"], "--transport"),
        (&["--line-rate", "0"], "--line-rate"),
        (&["--repeat", "0"], "--repeat"),
        // Two entries on one interface would mix their measurements under one path name.
        (&["--np", "2", "-e", "8", "--transport", "tcp@lo,tcp"], "--transport"),
        (&["--iface", "nosuch0"], "--iface"),
        // More memory than any machine here has, checked before allocating.
        (&["-e", "64T"], "-e/--maxbytes"),
        // A root that does not exist in a 2-rank job is found once the world size is known.
        (&["-r", "5", "--np", "2", "-e", "8"], "-r/--root"),
    ];
    for (args, flag) in cases {
        let out = run(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: exit status; stderr: {err}");
        assert!(err.contains(flag), "{args:?}: message should name {flag}: {err}");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert!(rows(&text(&out.stdout)).is_empty(), "{args:?} should not run anything");
    }
    // The memory check says how much was needed and how much there is.
    let err = text(&run(&["-e", "64T"]).stderr);
    assert!(err.contains("GiB") && err.contains("available"), "{err}");
}

#[test]
fn run_dash_h_is_a_short_page_and_dash_dash_help_the_full_one() {
    let short = text(&collbench().args(["run", "-h"]).output().unwrap().stdout);
    let full = text(&collbench().args(["run", "--help"]).output().unwrap().stdout);
    // nccl-tests' -h is about 20 lines; the everyday options, one short line each, and where the rest are.
    assert!(short.lines().count() <= 45, "{} lines:\n{short}", short.lines().count());
    for flag in [
        "--minbytes",
        "--maxbytes",
        "--iters",
        "--transport",
        "--np",
        "--output_file",
        "--help gives",
    ] {
        assert!(short.contains(flag), "{flag} missing from -h:\n{short}");
    }
    assert!(!short.contains("--sndbuf"), "a rare option in -h:\n{short}");
    for flag in ["--sndbuf", "--staging-pieces", "binary, as in 64K"] {
        assert!(full.contains(flag), "{flag} missing from --help");
    }
    assert!(full.lines().count() > 3 * short.lines().count());
}

#[test]
fn no_subcommand_prints_help_and_exits_2() {
    let out = collbench().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("Usage"), "{}", text(&out.stderr));
}

#[test]
fn default_run_prints_both_tables_with_no_wrong_data() {
    let out = collbench().arg("run").output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    // A header line per rank: rank, pid, host, interface.
    for r in 0..4 {
        assert!(
            stdout.contains(&format!("#  Rank  {r} Pid")),
            "no line for rank {r}:\n{stdout}"
        );
    }
    assert!(stdout.contains("iface lo"), "{stdout}");
    assert!(stdout.contains("# all_reduce on tcp@lo, 4 ranks"), "{stdout}");
    assert!(stdout.contains("# all_gather on tcp@lo, 4 ranks"), "{stdout}");
    let rows = rows(&stdout);
    // 8 B .. 64 MiB in x2 steps: 24 sizes per collective.
    assert_eq!(rows.len(), 48, "{stdout}");
    for r in &rows {
        assert_eq!(r.len(), 14, "13 nccl-tests columns + algo: {r:?}");
        assert_eq!((r[8].as_str(), r[12].as_str()), ("0", "0"), "#wrong must be 0: {r:?}");
    }
    assert_eq!(rows.last().unwrap()[0], "67108864");
    assert!(rows.iter().any(|r| r[13] == "ring") && rows.iter().any(|r| r[13] == "rec_doubling"));
    assert!(stdout.contains("# Out of bounds values : 0 OK"), "{stdout}");
    assert!(stdout.contains("# Avg bus bandwidth    :"), "{stdout}");
    assert!(
        stdout.contains(">= 1 MiB"),
        "the footer says which sizes were averaged: {stdout}"
    );
}

#[test]
fn forced_all_gather_algorithms_run_on_a_power_of_two_and_the_table_names_them() {
    // On 4 ranks `--algo rd` runs recursive doubling and `--algo bruck` Bruck's steps (auto runs both, at
    // different sizes); each must connect the pairs it needs and deliver correct data at every size.
    for (algo, shown) in [("bruck", "bruck"), ("rd", "rec_doubling")] {
        let out = run(&[
            "--np",
            "4",
            "--collective",
            "all_gather",
            "--algo",
            algo,
            "-b",
            "8",
            "-e",
            "16M",
            "-f",
            "16",
            "-n",
            "2",
            "-w",
            "1",
        ]);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "--algo {algo}: {stderr}");
        let rows = rows(&stdout);
        assert_eq!(rows.len(), 6, "8 B .. 8 MiB in x16 steps: {stdout}");
        for r in &rows {
            assert_eq!(r[13], shown, "--algo {algo}: {r:?}");
            assert_eq!((r[8].as_str(), r[12].as_str()), ("0", "0"), "#wrong must be 0: {r:?}");
        }
    }
    // An algorithm the collective lacks is not an error: it runs auto's choice, and rank 0 says so.
    let out = run(&[
        "--np",
        "2",
        "--collective",
        "all_gather",
        "--algo",
        "rhd",
        "-e",
        "8",
        "-n",
        "1",
        "-w",
        "0",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "collbench: note: --algo rhd is not an algorithm of all_gather, which run(s) --algo auto's choice"
        ),
        "{stderr}"
    );
}

#[test]
fn json_and_csv_cover_every_point_and_match_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let csv = dir.path().join("out.csv");
    let md = dir.path().join("out.md");
    let args = [
        "-e",
        "256K",
        "-f",
        "4",
        "--collective",
        "all",
        "-d",
        "float,half",
        "-o",
        "sum,max",
        "--np",
        "3",
    ];
    let out = collbench()
        .arg("run")
        .args(args)
        .arg("-J")
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .arg("--markdown")
        .arg(&md)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    validate_against_schema(&v);
    let results = v["results"].as_array().unwrap();
    // 8 B .. 256 KiB in x4 steps = 8 sizes; 3 reducing collectives x 2 dtypes x 2 ops + 4 others x 2 dtypes.
    assert_eq!(results.len(), 8 * (3 * 2 * 2 + 4 * 2));
    for r in results {
        for p in ["out_of_place", "in_place"] {
            assert_eq!(r[p]["nwrong"].as_f64(), Some(0.0), "{r}");
            assert!(r[p]["time"].as_f64().unwrap() >= 0.0);
        }
        assert_eq!(r["nranks"], 3);
    }
    assert_eq!(v["collbench"]["complete"], true);
    assert_eq!(v["collbench"]["run"]["ranks"].as_array().unwrap().len(), 3);
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    // A header, then one line per record and placement.
    assert_eq!(csv_text.lines().count(), 1 + 2 * results.len());
    assert!(csv_text.starts_with("path,collective,algo,size"));
    let md_text = std::fs::read_to_string(&md).unwrap();
    // One Markdown table per collective (one path), a row per record, then the path's cost.
    assert_eq!(md_text.matches("\n## ").count(), 8, "{md_text}");
    assert_eq!(
        md_text
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| size") && !l.starts_with("| path"))
            .count(),
        results.len() + 1
    );
    assert!(md_text.contains("\n## Path costs\n"), "{md_text}");

    // Existing files are not overwritten silently...
    let again = collbench()
        .arg("run")
        .args(["-e", "8"])
        .arg("-J")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(text(&again.stderr).contains("--force"), "{}", text(&again.stderr));
    // ... unless asked.
    let forced = collbench()
        .arg("run")
        .args(["-e", "8", "--force"])
        .arg("-J")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(forced.status.code(), Some(0), "{}", text(&forced.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["results"].as_array().unwrap().len(), 2, "one size, two collectives");
}

#[test]
fn repeats_are_labelled_and_every_path_reports_its_cost() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let charts = dir.path().join("charts");
    let args = [
        "--np",
        "2",
        "-b",
        "1M",
        "-e",
        "1M",
        "-n",
        "3",
        "-w",
        "1",
        "--collective",
        "all_reduce",
        "--repeat",
        "2",
        "-J",
        json.to_str().unwrap(),
        "--plot",
        charts.to_str().unwrap(),
    ];
    let out = run(&args);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("all_reduce on tcp@lo, 2 ranks, sweep 1 of 2"),
        "{stdout}"
    );
    assert!(
        stdout.contains("all_reduce on tcp@lo, 2 ranks, sweep 2 of 2"),
        "{stdout}"
    );
    assert!(stdout.contains("# Path costs"), "{stdout}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    validate_against_schema(&v);
    let repeats: Vec<u64> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["repeat"].as_u64().unwrap())
        .collect();
    assert_eq!(repeats, [0, 1]);
    let paths = v["collbench"]["summary"]["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 1, "one path, its two sweeps added up: {paths:?}");
    let c = &paths[0];
    assert_eq!(c["path"], "tcp@lo");
    // 2 ranks x 2 sweeps x 2 placements x (1 warm-up + 3 timed + 1 check) calls x 1 MiB x busbw factor 1.
    let gb = 2.0 * 2.0 * 2.0 * 5.0 * 1048576.0 / 1e9;
    assert!((c["gb_moved"].as_f64().unwrap() - gb).abs() < 1e-12, "{c}");
    assert!(c["cpu_s"].as_f64().unwrap() > 0.0, "moving 42 MB takes CPU time: {c}");
    assert!(c["connect_s"].as_f64().unwrap() > 0.0, "{c}");
    assert!(c["first_collective_us"].as_f64().unwrap() > 0.0, "{c}");
    assert!(c["sweep_s"].as_f64().unwrap() > 0.0, "{c}");
    assert_eq!(c["busiest_host"], v["collbench"]["run"]["ranks"][0]["host"]);
    // --plot drew both charts of the one table, in both formats, and said so.
    let mut drawn: Vec<String> = std::fs::read_dir(&charts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    drawn.sort();
    assert_eq!(
        drawn,
        [
            "all_reduce-float-sum-busbw.png",
            "all_reduce-float-sum-busbw.svg",
            "all_reduce-float-sum-latency.png",
            "all_reduce-float-sum-latency.svg"
        ]
    );
    assert!(text(&out.stderr).contains("collbench: chart "), "{}", text(&out.stderr));
}

#[test]
fn wrong_data_is_counted_located_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bad.json");
    let out = collbench()
        .arg("run")
        .args([
            "-e",
            "4K",
            "--corrupt-rank",
            "2",
            "--collective",
            "all_reduce,broadcast",
        ])
        .arg("-J")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let rows = rows(&stdout);
    assert!(!rows.is_empty());
    for r in &rows {
        // Exactly the one corrupted element per placement, summed over ranks.
        assert_eq!((r[8].as_str(), r[12].as_str()), ("1", "1"), "{r:?}");
    }
    assert!(stdout.contains("wrong data: rank 2 (host"), "{stdout}");
    assert!(stdout.contains("FAILED"), "{stdout}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let first = &v["results"][0]["first_wrong"];
    assert_eq!(first["rank"], 2, "{first}");
    assert_ne!(first["expected"], first["got"]);
}

#[test]
fn ranks_started_with_different_options_are_refused_before_data_moves() {
    use collbench::world::{env, new_token, token_to_hex};
    let token = token_to_hex(&new_token());
    // Rank 0 serves the rendezvous on a port that was free a moment ago.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let spawn = |rank: usize, iters: &str| {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("collbench"))
            .args(["run", "-e", "8", "-n", iters])
            .env(env::RANK, rank.to_string())
            .env(env::WORLD_SIZE, "2")
            .env(env::ROOT, format!("127.0.0.1:{port}"))
            .env(env::JOB_TOKEN, &token)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(0, "20"), spawn(1, "7"));
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("rank 1") && err.contains("iters"), "{err}");
        assert!(rows(&text(&out.stdout)).is_empty(), "no data may move");
    }
}

#[test]
fn info_without_a_launcher_describes_this_host() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("info.json");
    let out = collbench()
        .args(["info", "--np", "4096", "-J"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.lines().any(|l| l.contains(" lo ") && l.contains("loopback")),
        "{stdout}"
    );
    // 4096 ranks outnumber any machine's CPUs: the advice says so.
    assert!(stdout.contains("4096 ranks"), "{stdout}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema_version"], 2);
    common::validate_info_against_schema(&v);
    assert!(v["hosts"][0]["ifaces"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["name"] == "lo"));
}

/// `--tcp-congestion` reaches the data sockets: the JSON and the table report what the kernel says they use,
/// and a name the host lacks is refused before anything starts.
#[test]
fn tcp_congestion_is_applied_to_the_data_sockets_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cc.json");
    let out = collbench()
        .args([
            "run",
            "-b",
            "1M",
            "-e",
            "1M",
            "-n",
            "2",
            "-w",
            "1",
            "--np",
            "2",
            "--tcp-congestion",
            "reno",
            "-J",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("TCP connections, congestion control reno"), "{stdout}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    validate_against_schema(&v);
    let record = &v["collbench"]["run"];
    assert_eq!(record["connections"]["congestion"], "reno");
    assert_eq!(record["params"]["tcp_congestion"], "reno");
    for row in rows(&stdout) {
        assert_eq!(row[8], "0", "out-of-place #wrong: {row:?}");
    }

    let out = run(&["--np", "2", "--tcp-congestion", "nosuchcc"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--tcp-congestion") && err.contains("no congestion control 'nosuchcc'"),
        "{err}"
    );
    assert!(rows(&text(&out.stdout)).is_empty(), "nothing may run: {err}");
}

#[test]
fn interleave_point_measures_every_point_once_per_sweep_with_data_checked() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let md = dir.path().join("out.md");
    let out = run(&[
        "--np",
        "2",
        "-b",
        "1K",
        "-e",
        "64K",
        "-n",
        "2",
        "-w",
        "1",
        "-d",
        "float,bfloat16",
        "--interleave",
        "point",
        "--repeat",
        "2",
        "-J",
        json.to_str().unwrap(),
        "--markdown",
        md.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    validate_against_schema(&v);
    let results = v["results"].as_array().unwrap();
    // 2 sweeps x 2 collectives x 2 types x 7 sizes, each point once, in plan order within a sweep.
    assert_eq!(results.len(), 2 * 2 * 2 * 7, "{stdout}");
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["repeat"].as_u64().unwrap(), (i / 28) as u64, "{r}");
        assert_eq!(r["size"].as_u64().unwrap(), 1024 << (i % 7), "{r}");
        assert_eq!(r["out_of_place"]["nwrong"], 0.0, "{r}");
        assert_eq!(r["in_place"]["nwrong"], 0.0, "{r}");
    }
    assert_eq!(
        stdout.matches("paths taking turns at every point").count(),
        4,
        "a table per collective and sweep: {stdout}"
    );
    let doc = std::fs::read_to_string(&md).unwrap();
    assert_eq!(doc.matches("\n## all_reduce on tcp@lo").count(), 2, "{doc}");
}

/// Every command's output files are kept unless --force, as docs/output.md says: pairwise's and info's too.
#[test]
fn pairwise_and_info_keep_an_existing_output_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("out.json");
    for args in [
        &[
            "pairwise",
            "--np",
            "2",
            "--bytes",
            "64K",
            "-n",
            "2",
            "--lat-iters",
            "10",
            "-J",
        ][..],
        &["info", "-J"][..],
    ] {
        std::fs::write(&kept, "keep me").unwrap();
        let out = collbench().args(args).arg(&kept).output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--force") && err.contains("out.json"), "{args:?}: {err}");
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "keep me", "{args:?}");
        let out = collbench().args(args).arg(&kept).arg("--force").output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&kept).unwrap()).unwrap();
        assert!(v.is_object(), "{args:?}");
    }
}

/// `|cell - want|` within half a unit of the cell's last printed decimal.
fn printed_as(cell: &str, want: f64) -> bool {
    let decimals = cell.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    let v: f64 = cell.parse().unwrap_or_else(|e| panic!("{cell}: {e}"));
    (v - want).abs() <= 0.5 * 10f64.powi(-decimals) + 1e-9
}

#[test]
fn units_gbit_prints_eight_times_the_json_gbs_and_says_gb_per_s() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = run(&[
        "--np",
        "2",
        "-b",
        "64K",
        "-e",
        "256K",
        "-n",
        "2",
        "-w",
        "1",
        "--units",
        "gbit",
        "-J",
        json.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains("(Gb/s)  (Gb/s)") && !stdout.contains("(GB/s)"),
        "{stdout}"
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let results = v["results"].as_array().unwrap();
    let table = rows(&stdout);
    assert_eq!(table.len(), results.len(), "{stdout}");
    for (row, r) in table.iter().zip(results) {
        // Columns: size count type redop root, then time algbw busbw #wrong per placement.
        for (col, place) in [(6, "out_of_place"), (10, "in_place")] {
            for (off, key) in [(0, "alg_bw"), (1, "bus_bw")] {
                let want = 8.0 * r[place][key].as_f64().unwrap();
                assert!(
                    printed_as(&row[col + off], want),
                    "{key} {} vs 8 x JSON = {want}\n{stdout}",
                    row[col + off]
                );
            }
        }
    }
    let bad = run(&["--np", "2", "--units", "furlongs"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("--units"), "{}", text(&bad.stderr));
}
