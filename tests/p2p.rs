//! `collbench p2p` as OSU users run it: two local ranks, the latency sweep (sizes 0, 1, 2, 4 ... doubling) and
//! the bandwidth sweep in osu_latency's and osu_bw's column shapes, the JSON beside them, `--units gbit`
//! exactly 8 times the bytes, and a pair outside the job refused naming the flag.

use std::path::Path;
use std::process::Output;

use serde_json::Value;

mod common;

fn p2p(args: &[&str]) -> Output {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("collbench"));
    common::clean_env(&mut c);
    c.arg("p2p").args(args).output().expect("collbench runs")
}

/// The rows under the line starting `# Size` that follows the line starting `header`: (size, figures).
fn section(stdout: &str, header: &str) -> Vec<(u64, Vec<f64>)> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with(header))
        .skip_while(|l| !l.starts_with("# Size"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut f = l.split_whitespace();
            let size = f.next().unwrap().parse().unwrap();
            (size, f.map(|x| x.parse().unwrap()).collect())
        })
        .collect()
}

fn read(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn two_ranks_print_both_sweeps_in_osu_shape_with_json_and_units() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p2p.json");
    let out = p2p(&[
        "--np",
        "2",
        "-n",
        "10",
        "--maxbytes",
        "4K",
        "-J",
        json.to_str().unwrap(),
    ]);
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{so}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(so.contains("# Size          Latency (us)"), "{so}");
    assert!(so.contains("Bandwidth (MB/s)"), "{so}");
    let lat = section(&so, "# Latency");
    let sizes: Vec<u64> = lat.iter().map(|r| r.0).collect();
    assert_eq!(
        sizes,
        [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096],
        "{so}"
    );
    assert!(lat.iter().all(|(_, f)| f[0] > 0.0), "{so}");
    let bw = section(&so, "# Bandwidth");
    let sizes: Vec<u64> = bw.iter().map(|r| r.0).collect();
    assert_eq!(sizes, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096], "{so}");
    let v = read(&json);
    assert_eq!(v["latency"].as_array().unwrap().len(), 14);
    assert_eq!(v["bandwidth"].as_array().unwrap().len(), 13);
    for l in v["latency"].as_array().unwrap() {
        let f = |k: &str| l[k].as_f64().unwrap();
        assert!(
            f("min_us") <= f("p50_us") && f("p50_us") <= f("p99_us") && f("p99_us") <= f("max_us"),
            "{l}"
        );
        assert!(f("msg_rate") > 0.0, "{l}");
    }
    // The printed MB/s are the JSON's, rounded to two decimals.
    for ((size, figs), b) in bw.iter().zip(v["bandwidth"].as_array().unwrap()) {
        assert_eq!(*size, b["size"].as_u64().unwrap());
        assert!((figs[0] - b["mb_s"].as_f64().unwrap()).abs() <= 0.006, "{figs:?} {b}");
    }

    // --units gbit: megabits, 8 times the megabytes of the same run's JSON.
    let out = p2p(&[
        "--np",
        "2",
        "-n",
        "10",
        "--maxbytes",
        "1K",
        "--units",
        "gbit",
        "-J",
        json.to_str().unwrap(),
        "--force",
    ]);
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{so}");
    assert!(so.contains("Bandwidth (Mb/s)"), "{so}");
    let v = read(&json);
    for ((_, figs), b) in section(&so, "# Bandwidth")
        .iter()
        .zip(v["bandwidth"].as_array().unwrap())
    {
        assert!(
            (figs[0] - 8.0 * b["mb_s"].as_f64().unwrap()).abs() <= 0.006,
            "{figs:?} {b}"
        );
    }
}

#[test]
fn a_pair_outside_the_job_is_refused_naming_the_flag() {
    for pair in ["0,5", "1,1", "x"] {
        let out = p2p(&["--np", "2", "--pair", pair]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{pair}: {err}");
        assert!(err.contains("--pair"), "{pair}: {err}");
    }
}

/// Past 1 MiB the bandwidth window shrinks with the size (64 MiB in flight at most), so a smaller size has
/// more messages in flight than the largest: each must land inside the receiver's buffer, and arrive whole.
#[test]
fn sizes_past_a_mebibyte_keep_every_window_inside_the_receive_buffer() {
    let out = p2p(&["--np", "2", "-b", "1M", "-e", "4M", "-n", "20"]);
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{so}\n{}", String::from_utf8_lossy(&out.stderr));
    let bw: Vec<u64> = section(&so, "# Bandwidth").iter().map(|r| r.0).collect();
    assert_eq!(bw, [1 << 20, 2 << 20, 4 << 20], "{so}");
}
