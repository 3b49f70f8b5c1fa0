//! A run's stdout is the same from build to build except for what is measured: the same header lines,
//! tables, rows, columns, footers and summaries, with only timings, bandwidths and the machine's own facts
//! (pids, ports, host name, dates, congestion control, CPU verdicts) differing. tests/golden/run.txt holds
//! the normalised stdout of one small run of several collectives, types and repeats; a change to
//! what collbench prints fails here until the golden file is regenerated on purpose:
//!
//! `COLLBENCH_WRITE_GOLDEN=path/to/collbench cargo test --test stdout_shape` writes it from that binary.

use std::path::Path;
use std::process::Command;

/// The run whose stdout is compared: several tables, types and
/// repeats, and the run's summaries, at a size that takes seconds (one path: a second would need a second
/// interface, which a plain test on one host does not have).
const ARGS: &[&str] = &[
    "run",
    "--np",
    "2",
    "-b",
    "8",
    "-e",
    "4K",
    "-n",
    "2",
    "-w",
    "1",
    "--collective",
    "all_reduce,all_gather,broadcast,reduce_scatter",
    "-d",
    "float,int32",
    "--repeat",
    "2",
    "--no-progress",
];

/// Masks what differs between runs of the same command on different machines and moments.
fn normalise(stdout: &str) -> String {
    let subs: &[(&str, &str)] = &[
        (r"# Command line: \S+", "# Command line: collbench"),
        (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "DATE"),
        (r"Pid\s+\d+", "Pid PID"),
        (r"(\d+\.){3}\d+:\d+", "ADDR"),
        (r" on\s+\S+ iface", " on HOST iface"),
        (r"\(host [^)]*\)", "(host HOST)"),
        (r"\b(rank \d+) on [^,)\s]+", "$1 on HOST"),
        (r"congestion control \S+", "congestion control CC"),
        (r"-?\d+(\.\d+)?e[-+]?\d+", "N"),
        (r"-?\d+\.\d+", "N"),
        (r"\s(cpu|-)$", " LIMIT"),
        // Which rank peaked is measured too.
        (r"(Peak memory per rank : N MiB \(rank) \d+", "$1 R"),
        // A path-cost row's host cpu% and busy%.
        (r"^(# \S+ N N N N N N) \d+ \d+ ", "$1 PCT PCT "),
    ];
    let res: Vec<(regex::Regex, &str)> = subs
        .iter()
        .map(|(p, r)| (regex::Regex::new(&format!("(?m){p}")).unwrap(), *r))
        .collect();
    stdout
        .lines()
        .map(|line| {
            // Widths follow the numbers: compare the words, not the padding.
            let mut l = line.split_whitespace().collect::<Vec<_>>().join(" ");
            for (re, with) in &res {
                l = re.replace_all(&l, *with).into_owned();
            }
            l
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn stdout_of(bin: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin)
        .args(ARGS)
        .current_dir(dir.path())
        .env_remove("COLLBENCH_JOB_TOKEN")
        .output()
        .expect("collbench starts");
    assert!(
        out.status.success(),
        "{} {ARGS:?}: {}\n{}",
        bin.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_runs_stdout_differs_from_the_golden_one_only_in_what_was_measured() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/run.txt");
    if let Some(bin) = std::env::var_os("COLLBENCH_WRITE_GOLDEN") {
        std::fs::write(&golden, normalise(&stdout_of(Path::new(&bin)))).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&golden).unwrap();
    let got = normalise(&stdout_of(Path::new(env!("CARGO_BIN_EXE_collbench"))));
    if got != want {
        let first = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(got.lines().count()));
        panic!(
            "stdout differs from tests/golden/run.txt from line {}:\n  golden: {:?}\n  now:    {:?}\n\
             (if the change is on purpose, regenerate it: see this file's doc)\n--- now\n{got}",
            first + 1,
            want.lines().nth(first),
            got.lines().nth(first)
        );
    }
}

#[test]
fn the_normalisation_keeps_the_words_and_masks_the_measurements() {
    let line = "           8             2     float     sum      -1  5264.35    0.00    0.00       0  1.5e-05  x";
    assert_eq!(normalise(line), "8 2 float sum -1 N N N 0 N x\n");
    assert_eq!(
        normalise("#  Rank  0 Pid  15474 on         vm iface lo addr 127.0.0.1:40929"),
        "# Rank 0 Pid PID on HOST iface lo addr ADDR\n"
    );
}
