//! collbench's output read by parsers written the way tools that consume nccl-tests' output read it (from
//! nccl-tests' src/util.cu and tools/analyze_perf_json.py): keyword slicing of stdout (a line holding
//! `out-of-place` opens a table, the line holding both `time` and `busbw` names the columns, rows start with a
//! number, `Out of bounds values` closes it, `Avg bus bandwidth`'s sixth field is the average), columns found
//! from the start and from the end of that header, and JSON readers at versions 2 and 3. Every output shape
//! collbench makes is fed to them and checked against the run's own -J file: a row lost, misread or taken from
//! the wrong column fails. Then the per-iteration analysis nccl-tests' analyzer does, on a run with one rank
//! stopped on purpose, must name that rank.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

fn collbench() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("collbench"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One table as a keyword parser finds it.
#[derive(Debug, Default)]
struct Table {
    /// The column names, `#` dropped.
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// The footer's `Avg bus bandwidth` value, where one closes this table.
    avg: Option<f64>,
}

/// Keyword slicing: every table of `stdout`.
fn tables(stdout: &str) -> Vec<Table> {
    let mut out: Vec<Table> = Vec::new();
    let mut open = false;
    let mut footer_of: Option<usize> = None;
    for line in stdout.lines() {
        if line.contains("out-of-place") {
            out.push(Table::default());
            open = true;
            footer_of = None;
            continue;
        }
        let Some(t) = out.last_mut() else { continue };
        if open && t.header.is_empty() && line.contains("time") && line.contains("busbw") {
            t.header = line.split_whitespace().skip(1).map(str::to_string).collect();
            continue;
        }
        if line.contains("Out of bounds values") {
            open = false;
            footer_of = Some(out.len() - 1);
            continue;
        }
        if line.contains("Avg bus bandwidth") {
            if let Some(i) = footer_of.take() {
                out[i].avg = line.split_whitespace().nth(5).and_then(|v| v.parse().ok());
            }
            continue;
        }
        let first = line.split_whitespace().next().unwrap_or("");
        if open && first.parse::<u64>().is_ok() {
            t.rows.push(line.split_whitespace().map(str::to_string).collect());
        }
    }
    out
}

/// The `nth` column called `name` of `row`, its place counted from the start of the header.
fn from_start(t: &Table, row: &[String], name: &str, nth: usize) -> String {
    let i = t
        .header
        .iter()
        .enumerate()
        .filter(|(_, h)| *h == name)
        .nth(nth)
        .expect(name)
        .0;
    row[i].clone()
}

/// The same, counted from the end of the header (`$(NF-k)` in awk).
fn from_end(t: &Table, row: &[String], name: &str, nth: usize) -> String {
    let i = t
        .header
        .iter()
        .enumerate()
        .filter(|(_, h)| *h == name)
        .nth(nth)
        .expect(name)
        .0;
    let k = t.header.len() - i;
    row[row.len() - k].clone()
}

/// The printed `got` stands for `want` at the table's precision (two decimals, fewer for large values).
fn close(got: &str, want: f64, what: &str) {
    let g: f64 = got
        .parse()
        .unwrap_or_else(|_| panic!("{what}: '{got}' is not a number"));
    let tol = 0.0051f64.max(want.abs() * 0.006);
    assert!((g - want).abs() <= tol, "{what}: printed {got}, the file says {want}");
}

/// What no line after the first table's header may hold unless it is one of nccl-tests' own lines.
fn check_anchors(stdout: &str) {
    let own = |l: &str| {
        let words: Vec<&str> = l.split_whitespace().collect();
        let group = words.first() == Some(&"#")
            && l.contains("out-of-place")
            && l.contains("in-place")
            && words
                .iter()
                .all(|w| ["#", "out-of-place", "in-place", "(+", "per-iteration)"].contains(w));
        let names = words.get(1..6) == Some(&["size", "count", "type", "redop", "root"][..]);
        let oob = l.starts_with("# Out of bounds values : ")
            && words.get(6).is_some_and(|n| n.parse::<u64>().is_ok())
            && matches!(words.get(7..), Some(["OK"]) | Some(["FAILED"]));
        let avg = l.starts_with("# Avg bus bandwidth    : ")
            && words.get(5).is_some_and(|v| v.parse::<f64>().is_ok() || *v == "nan")
            && matches!(words.get(6..), Some([]) | Some(["OK"]) | Some(["FAILED"]));
        group || names || oob || avg
    };
    let start = stdout.find("out-of-place").expect("a table");
    let start = stdout[..start].rfind('\n').map_or(0, |i| i + 1);
    for l in stdout[start..].lines() {
        let anchored = ["out-of-place", "in-place", "Out of bounds values", "Avg bus bandwidth"]
            .iter()
            .any(|a| l.contains(a))
            || (l.contains("time") && l.contains("busbw"));
        assert!(
            !anchored || own(l),
            "a line nccl-tests does not print holds its anchor words:\n{l}\n---\n{stdout}"
        );
    }
}

/// Every row of every table against the file's entries, in order, by name from both ends of the header;
/// each table's average against nccl-tests' definition over its rows.
fn check_stdout_against_json(stdout: &str, v: &Value, footers_per_table: bool) {
    check_anchors(stdout);
    let tabs = tables(stdout);
    let results = v["results"].as_array().unwrap();
    let rows: usize = tabs.iter().map(|t| t.rows.len()).sum();
    assert_eq!(rows, results.len(), "rows lost or added:\n{stdout}");
    let mut entries = results.iter();
    for t in &tabs {
        let mut sum = 0.0;
        for row in &t.rows {
            let e = entries.next().unwrap();
            for pick in [from_start, from_end] {
                assert_eq!(pick(t, row, "size", 0), e["size"].to_string(), "{row:?} vs {e}");
                assert_eq!(pick(t, row, "count", 0), e["count"].to_string(), "{row:?}");
                assert_eq!(pick(t, row, "type", 0), e["type"].as_str().unwrap(), "{row:?}");
                assert_eq!(pick(t, row, "redop", 0), e["redop"].as_str().unwrap(), "{row:?}");
                assert_eq!(pick(t, row, "root", 0), e["root"].as_str().unwrap().trim(), "{row:?}");
                for (nth, place) in [(0, "out_of_place"), (1, "in_place")] {
                    let p = &e[place];
                    let time = if p.get("cpu_time").is_some() { "cputime" } else { "time" };
                    let key = if time == "time" { "time" } else { "cpu_time" };
                    close(
                        &pick(t, row, time, nth),
                        p[key].as_f64().unwrap(),
                        &format!("{place} time {row:?}"),
                    );
                    close(
                        &pick(t, row, "algbw", nth),
                        p["alg_bw"].as_f64().unwrap(),
                        &format!("{place} algbw"),
                    );
                    close(
                        &pick(t, row, "busbw", nth),
                        p["bus_bw"].as_f64().unwrap(),
                        &format!("{place} busbw"),
                    );
                    let wrong = pick(t, row, "#wrong", nth);
                    match p["nwrong"].as_f64() {
                        Some(w) => assert_eq!(wrong.parse::<f64>().unwrap(), w, "{row:?}"),
                        None => assert_eq!(wrong, "N/A"),
                    }
                }
            }
            sum += e["out_of_place"]["bus_bw"].as_f64().unwrap() + e["in_place"]["bus_bw"].as_f64().unwrap();
        }
        if footers_per_table {
            let want = sum / (2 * t.rows.len()) as f64;
            let got = t.avg.expect("a footer closes every table");
            assert!(
                (got - want).abs() <= want.abs() * 1e-5 + 1e-9,
                "table average {got} vs {want}"
            );
        }
    }
}

/// A JSON reader written for nccl-tests' version 2 keys (which version 3 keeps), and the version 3 reader of
/// the per-iteration objects; placements hold nccl-tests' keys only, with nccl-tests' meanings.
fn check_json(v: &Value, nprocs: usize) {
    assert_eq!(v["version"], 3);
    for k in [
        "start_time",
        "args",
        "env",
        "config",
        "results",
        "out_of_bounds",
        "average_bus_bandwidth",
        "errors",
    ] {
        assert!(v.get(k).is_some(), "no {k}");
    }
    let cfg = &v["config"];
    let iters = cfg["iterations"].as_u64().unwrap() as usize;
    let per_iter = cfg["per_iter_timing"] == "true";
    assert!(cfg["per_iter_skip"].is_u64() && cfg["aggregated_iterations"].is_u64());
    let results = v["results"].as_array().unwrap();
    let mut sum = 0.0;
    for e in results {
        assert!(e["size"].is_u64() && e["count"].is_u64() && e["type"].is_string() && e["root"].is_string());
        for place in ["out_of_place", "in_place"] {
            let p = e[place].as_object().unwrap();
            let keys: Vec<&str> = p.keys().map(String::as_str).collect();
            for k in &keys {
                assert!(
                    ["time", "cpu_time", "alg_bw", "bus_bw", "nwrong"].contains(k),
                    "{place} holds {k}: {e}"
                );
            }
            assert_eq!(keys.len(), 4, "{e}");
            sum += p["bus_bw"].as_f64().unwrap();
            let pi = &e[format!("{place}_per_iter")];
            if !per_iter {
                assert!(pi.is_null(), "{e}");
                continue;
            }
            let times: Vec<f64> = pi["times_us"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_f64().unwrap())
                .collect();
            assert_eq!(times.len(), iters, "{pi}");
            for k in [
                "skipped_iterations",
                "min_us",
                "max_us",
                "avg_us",
                "p50_us",
                "p95_us",
                "p99_us",
                "stdev_us",
                "cv_pct",
            ] {
                assert!(pi[k].is_number(), "{k}: {pi}");
            }
            let skip = pi["skipped_iterations"].as_u64().unwrap() as usize;
            let kept = &times[skip..];
            let avg = kept.iter().sum::<f64>() / kept.len() as f64;
            assert!(
                (pi["avg_us"].as_f64().unwrap() - avg).abs() <= avg * 1e-9 + 1e-9,
                "{pi}"
            );
            let rows = pi.get("per_process_max_times_us").and_then(Value::as_array);
            if nprocs > 1 {
                let rows = rows.expect("a row per process");
                assert_eq!(rows.len(), nprocs);
                // The analyzer's consistency check: times_us is the max over the process rows.
                for (i, t) in times.iter().enumerate() {
                    let max = rows.iter().map(|r| r[i].as_f64().unwrap()).fold(f64::MIN, f64::max);
                    assert_eq!(*t, max, "iteration {i}");
                }
            } else {
                assert!(rows.is_none());
            }
        }
    }
    let avg = v["average_bus_bandwidth"]["bandwidth"].as_f64().unwrap();
    let want = sum / (2 * results.len()) as f64;
    assert!(
        (avg - want).abs() <= want * 1e-9 + 1e-12,
        "average_bus_bandwidth {avg} vs {want}"
    );
}

fn run_ok(args: &[&str], json: &Path) -> String {
    let out = collbench().args(args).arg("-J").arg(json).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        text(&out.stderr),
        text(&out.stdout)
    );
    text(&out.stdout)
}

fn read(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

#[test]
fn one_and_several_collectives_percentiles_and_repeats_parse_as_nccl_tests_output() {
    let d = tempfile::tempdir().unwrap();
    let shapes: [&[&str]; 4] = [
        &["--collective", "all_reduce"],
        &[
            "--collective",
            "all_reduce,all_gather,broadcast,alltoall",
            "-d",
            "float,int32",
            "--percentiles",
        ],
        &[
            "--collective",
            "reduce_scatter,sendrecv",
            "--repeat",
            "2",
            "-I",
            "1",
            "-K",
            "1",
            "-m",
            "2",
        ],
        &[
            "--collective",
            "all_reduce,reduce",
            "--interleave",
            "point",
            "--repeat",
            "2",
            "-C",
            "1",
            "-z",
            "1",
        ],
    ];
    for (i, shape) in shapes.iter().enumerate() {
        let json = d.path().join(format!("{i}.json"));
        let mut args = vec![
            "run", "--np", "3", "-b", "8", "-e", "4K", "-f", "8", "-n", "3", "-w", "1",
        ];
        args.extend_from_slice(shape);
        let stdout = run_ok(&args, &json);
        let v = read(&json);
        check_stdout_against_json(&stdout, &v, !shape.contains(&"point"));
        check_json(&v, 3);
        if i == 0 {
            checks_fail_on_damaged_output(&stdout, &v);
        }
        // The last table, as parsers that take the last `out-of-place` line read it, is the last rows.
        let last = tables(&stdout).pop().unwrap();
        let n = v["results"].as_array().unwrap().len();
        assert_eq!(last.rows.last().unwrap()[0], v["results"][n - 1]["size"].to_string());
    }
}

/// The checks above catch what they are for: a row lost, a cell dropped (every cell after it read from the
/// wrong column), an extra line holding an anchor word.
fn checks_fail_on_damaged_output(stdout: &str, v: &Value) {
    let fails = |damaged: String| {
        let v = v.clone();
        std::panic::catch_unwind(move || check_stdout_against_json(&damaged, &v, true)).is_err()
    };
    let lines: Vec<&str> = stdout.lines().collect();
    let row = lines
        .iter()
        .position(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .unwrap();
    let without = |i: usize| {
        lines
            .iter()
            .enumerate()
            .filter(move |(j, _)| *j != i)
            .map(|(_, l)| format!("{l}\n"))
    };
    assert!(fails(without(row).collect()), "a lost row passes");
    let mut cells: Vec<&str> = lines[row].split_whitespace().collect();
    cells.remove(8);
    let shifted = lines.iter().map(|l| {
        if *l == lines[row] {
            cells.join("  ")
        } else {
            l.to_string()
        }
    });
    assert!(
        fails(shifted.map(|l| l + "\n").collect()),
        "a row read a column off passes"
    );
    let noted = stdout.replacen(
        "# Out of bounds values",
        "# note: in-place done\n# Out of bounds values",
        1,
    );
    assert!(fails(noted), "a line of collbench's holding an anchor word passes");
}

#[test]
fn a_run_with_a_model_keeps_nccl_tests_words_to_its_tables() {
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("m.json");
    let stdout = run_ok(
        &[
            "run",
            "--np",
            "2",
            "-b",
            "64K",
            "-e",
            "4M",
            "-n",
            "3",
            "-w",
            "1",
            "--algo",
            "ring",
            "--collective",
            "all_reduce",
            "--target-ranks",
            "8",
        ],
        &json,
    );
    assert!(stdout.contains("# predictions at"), "{stdout}");
    check_stdout_against_json(&stdout, &read(&json), true);
}

/// OpenMPI's mpirun, or `None` with the reason said (a failure in CI).
#[cfg(feature = "mpi")]
fn mpirun() -> Option<Command> {
    let found = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "mpirun is missing in CI: install openmpi-bin"
        );
        eprintln!("skipped: mpirun (OpenMPI) not found; apt-get install openmpi-bin to run this test");
        return None;
    }
    let mut c = Command::new("mpirun");
    c.args([
        "--oversubscribe",
        "--mca",
        "mpi_yield_when_idle",
        "1",
        "--mca",
        "btl",
        "tcp,self",
    ])
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    Some(c)
}

/// Each rank's stdout of an mpirun with `--output-filename dir`, in rank order.
#[cfg(feature = "mpi")]
fn rank_stdouts(dir: &Path, n: usize) -> Vec<String> {
    let mut found = vec![String::new(); n];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        for f in std::fs::read_dir(&p).unwrap() {
            let f = f.unwrap().path();
            if f.is_dir() {
                stack.push(f);
            } else if f.file_name().unwrap() == "stdout" {
                let rank = f.parent().unwrap().file_name().unwrap().to_str().unwrap();
                let r: usize = rank.trim_start_matches("rank.").parse().unwrap();
                found[r] = std::fs::read_to_string(&f).unwrap();
            }
        }
    }
    found
}

#[cfg(feature = "mpi")]
#[test]
fn under_mpirun_rank_0_prints_every_path_and_the_other_ranks_nothing_a_parser_takes() {
    let d = tempfile::tempdir().unwrap();
    for (i, extra) in [&[][..], &["--interleave", "point"]].iter().enumerate() {
        let Some(mut c) = mpirun() else { return };
        let (json, outdir) = (d.path().join(format!("{i}.json")), d.path().join(format!("out{i}")));
        let out: std::process::Output = c
            .arg("--output-filename")
            .arg(&outdir)
            .args(["-np", "2"])
            .arg(assert_cmd::cargo::cargo_bin("collbench"))
            .args([
                "run",
                "--transport",
                "tcp,mpi",
                "-b",
                "8",
                "-e",
                "1K",
                "-f",
                "4",
                "-n",
                "2",
                "-w",
                "1",
            ])
            .args(["--collective", "all_reduce,all_gather"])
            .args(*extra)
            .arg("-J")
            .arg(&json)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let ranks = rank_stdouts(&outdir, 2);
        let v = read(&json);
        check_stdout_against_json(&ranks[0], &v, extra.is_empty());
        check_json(&v, 2);
        assert!(
            tables(&ranks[1]).is_empty() && ranks[1].trim().is_empty(),
            "rank 1 printed:\n{}",
            ranks[1]
        );
        let paths: std::collections::BTreeSet<&str> = v["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap())
            .collect();
        assert_eq!(paths.len(), 2, "{paths:?}");
    }
}

/// `collbench install-aliases --mkdir` into `dir`: the links it made.
fn install(dir: &Path) -> Vec<PathBuf> {
    let out = collbench()
        .args(["install-aliases", "--mkdir"])
        .arg(dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout).lines().map(PathBuf::from).collect()
}

#[test]
fn under_nccl_tests_names_collbench_prints_and_exits_as_nccl_tests() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin");
    let links = install(&bin);
    assert_eq!(links.len(), 7);
    for l in &links {
        assert_eq!(
            std::fs::read_link(l).unwrap(),
            assert_cmd::cargo::cargo_bin("collbench")
        );
    }
    let alias = |name: &str| Command::new(bin.join(name));
    // all_reduce_perf -b 8 -e 4K -f 8 -g 2 as scripts run it, with per-iteration timing.
    let json = d.path().join("ar.json");
    let out = alias("all_reduce_perf")
        .args([
            "-b", "8", "-e", "4K", "-f", "8", "-g", "2", "-n", "4", "-w", "1", "-I", "1", "-J",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}\n{stdout}", text(&out.stderr));
    assert!(
        stdout.contains("# Collective test starting: all_reduce_perf\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# Collective test concluded: all_reduce_perf\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("as nccl-tests: NCCL's")
            || stdout.contains("as nccl-tests: collbench's tcp path on host memory"),
        "the header says which path: {stdout}"
    );
    assert!(
        stdout.contains(&format!("# Writing JSON output to {}\n", json.display())),
        "{stdout}"
    );
    let t = tables(&stdout);
    assert_eq!(t.len(), 1, "one table: {stdout}");
    assert!(t[0].header.contains(&"i_p99".to_string()), "{:?}", t[0].header);
    let v = read(&json);
    check_stdout_against_json(&stdout, &v, true);
    check_json(&v, 2);
    // Every row: nccl-tests' 13 columns and the 8 per-iteration ones, nothing else.
    assert!(t[0].rows.iter().all(|r| r.len() == 21), "{stdout}");
    // A second -J run does not overwrite: nccl-tests writes NAME.0.
    let again = alias("all_reduce_perf")
        .args(["-b", "8", "-e", "8", "-J"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert!(PathBuf::from(format!("{}.0", json.display())).exists());
    // Another program, NCCL_TESTS_MIN_BW out of reach: FAILED on the average, nccl-tests' exit status 7.
    let out = alias("all_gather_perf")
        .args(["-b", "1K", "-e", "1K", "-n", "2", "-w", "1", "-S", "1"])
        .env("NCCL_TESTS_MIN_BW", "1000000")
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(7), "{}\n{stdout}", text(&out.stderr));
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("# Avg bus bandwidth    : ") && l.ends_with(" FAILED")),
        "{stdout}"
    );
    check_anchors(&stdout);
    let rows = &tables(&stdout)[0].rows;
    assert_eq!(rows.len(), 1, "{stdout}");
    assert_eq!(rows[0][0], "1024");
    // A negative NCCL_TESTS_MIN_BW (nccl-tests reads it with atof) judges nothing: the run passes, it is not
    // taken for a flag.
    let out = alias("all_gather_perf")
        .args(["-b", "1K", "-e", "1K", "-n", "2", "-w", "1"])
        .env("NCCL_TESTS_MIN_BW", "-1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    check_anchors(&text(&out.stdout));
    // A flag nccl-tests has that collbench does not honour: exit 2, saying why and what instead.
    let out = alias("broadcast_perf").args(["-G", "10"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("-G/--cudagraph") && err.contains("drop -G"), "{err}");
    let help = alias("sendrecv_perf").arg("-h").output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(text(&help.stdout).starts_with("USAGE: sendrecv_perf"));
}

/// Where NCCL cannot run, the note saying so is one short line; a mistyped value is answered by its error
/// alone, with no note before it.
#[test]
fn not_nccl_is_one_short_note_and_a_usage_error_comes_alone() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("bin");
    install(&bin);
    let out = Command::new(bin.join("all_reduce_perf"))
        .args(["-b", "8", "-e", "8", "-n", "1", "-w", "0"])
        .output()
        .unwrap();
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{err}\n{stdout}");
    if !stdout.contains("as nccl-tests: NCCL's") {
        let notes: Vec<&str> = err.lines().filter(|l| l.contains("note: not NCCL")).collect();
        assert_eq!(notes.len(), 1, "{err}");
        assert!(
            notes[0].chars().count() <= 100,
            "{} columns: {}",
            notes[0].chars().count(),
            notes[0]
        );
    }
    let out = Command::new(bin.join("all_reduce_perf"))
        .args(["-b", "8", "-e", "8", "-d", "nosuchtype"])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nosuchtype") && !err.contains("note"), "{err}");
}

/// What nccl-tests' tools/analyze_perf_json.py reports of one placement of one entry: the processes by mean
/// iteration time (its straggler table sorts them so), the iterations where some process exceeded
/// `threshold` x the summary's avg_us (its spike table), and iteration 0 over the mean of the rest.
/// The analyzer's findings: processes fastest first, (iteration, processes over the threshold) per spike,
/// and iteration 0's time over the mean of the rest.
struct Analysis {
    by_mean: Vec<usize>,
    spikes: Vec<(usize, Vec<usize>)>,
    iter0: f64,
}

fn analyze(per_iter: &Value, threshold: f64) -> Analysis {
    let rows: Vec<Vec<f64>> = per_iter["per_process_max_times_us"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().iter().map(|t| t.as_f64().unwrap()).collect())
        .collect();
    let mut by_mean: Vec<(usize, f64)> = rows
        .iter()
        .enumerate()
        .map(|(p, t)| (p, t.iter().sum::<f64>() / t.len() as f64))
        .collect();
    by_mean.sort_by(|a, b| a.1.total_cmp(&b.1));
    let avg = per_iter["avg_us"].as_f64().unwrap();
    let mut spikes: Vec<(usize, Vec<usize>)> = Vec::new();
    for i in 0..rows[0].len() {
        let high: Vec<usize> = (0..rows.len()).filter(|&p| rows[p][i] > avg * threshold).collect();
        if !high.is_empty() {
            spikes.push((i, high));
        }
    }
    let times: Vec<f64> = per_iter["times_us"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    let steady = times[1..].iter().sum::<f64>() / (times.len() - 1) as f64;
    Analysis {
        by_mean: by_mean.into_iter().map(|(p, _)| p).collect(),
        spikes,
        iter0: times[0] / steady,
    }
}

/// A process's state letter from /proc/PID/stat (`T`: stopped).
fn state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(") ")?.1.chars().next()
}

#[test]
fn the_per_iteration_analysis_names_the_rank_that_was_held_back() {
    // Rank 1 stops itself (the --fault aid) before the first timed iteration of every placement of the 64 KiB
    // point; this test wakes it once it has stopped. The others wait for it in that iteration, so its own
    // iterations are the shortest: the straggler table puts it first, the others spike at iteration 0, and
    // the first iteration costs far more than the rest.
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("slow.json");
    let mut child = collbench()
        .args([
            "run",
            "--np",
            "3",
            "--collective",
            "all_reduce",
            "-b",
            "64K",
            "-e",
            "64K",
            "-n",
            "8",
            "-w",
            "1",
        ])
        .args(["-I", "1", "--no-progress", "--fault", "1:all_reduce@64K:stop", "-J"])
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let pid: u32 = loop {
        let l = lines.next().expect("the rank lines come first").unwrap();
        if let Some(rest) = l.strip_prefix("#  Rank  1 Pid ") {
            break rest.split_whitespace().next().unwrap().parse().unwrap();
        }
    };
    let rest = std::thread::spawn(move || lines.map(|l| l.unwrap() + "\n").collect::<String>());
    let mut woken = 0;
    // Poll the rank's state until the run ends: each time it has stopped itself, let it go on.
    while child.try_wait().unwrap().is_none() {
        if state(pid) == Some('T') {
            // The slowing itself: the rank stays stopped this long before it may go on.
            std::thread::sleep(std::time::Duration::from_millis(100));
            // SAFETY: kill only sends a signal to the rank this test started; no memory is touched.
            assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGCONT) }, 0);
            woken += 1;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let status = child.wait().unwrap();
    let stdout = rest.join().unwrap();
    assert!(status.success(), "{stdout}");
    assert!(woken >= 2, "rank 1 stopped {woken} time(s)");
    let v = read(&json);
    check_json(&v, 3);
    for place in ["out_of_place_per_iter", "in_place_per_iter"] {
        let pi = &v["results"][0][place];
        let Analysis {
            by_mean: order,
            spikes,
            iter0,
        } = analyze(pi, 1.5);
        assert_eq!(
            order[0], 1,
            "{place}: the straggler table puts the held-back rank first: {order:?}\n{pi}"
        );
        let first = spikes.first().expect("a spike");
        assert_eq!(first.0, 0, "{place}: the spike is iteration 0: {spikes:?}");
        assert!(
            !first.1.contains(&1) && first.1.len() == 2,
            "{place}: the waiting ranks spike: {spikes:?}"
        );
        assert!(iter0 > 1.5, "{place}: iteration 0 costs {iter0} x the rest");
    }
}
