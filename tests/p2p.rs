//! `collbench p2p` as a user runs it: local ranks, both sweeps in OSU's column shape with sizes doubling, the
//! JSON, `--units gbit` at 8x, and a `--pair` outside the job refused.

use assert_cmd::Command;
use serde_json::Value;

fn p2p(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("collbench")
        .expect("binary built")
        .arg("p2p")
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

/// The rows under the header line `header`: size and the figures after it.
fn rows(stdout: &str, header: &str) -> Vec<(u64, Vec<f64>)> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with(header))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            let size = it.next().unwrap().parse().unwrap_or_else(|e| panic!("{l}: {e}"));
            (size, it.map(|c| c.parse().unwrap()).collect())
        })
        .collect()
}

#[test]
fn two_ranks_print_both_sweeps_in_osu_shape_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p2p.json");
    let out = p2p(&[
        "--np",
        "2",
        "-e",
        "16K",
        "-n",
        "50",
        "--window",
        "8",
        "-J",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("# collbench p2p: rank 0 ("), "{stdout}");
    let lat = rows(&stdout, "# Size          Latency (us)");
    let bw = rows(&stdout, "# Size      Bandwidth (MB/s)");
    let sizes = |r: &[(u64, Vec<f64>)]| r.iter().map(|(s, _)| *s).collect::<Vec<_>>();
    let doubling: Vec<u64> = (0..=14).map(|k| 1u64 << k).collect();
    assert_eq!(sizes(&lat), [vec![0], doubling.clone()].concat(), "{stdout}");
    assert_eq!(sizes(&bw), doubling, "{stdout}");
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "collbench-p2p/1");
    assert_eq!(v["config"]["pair"], serde_json::json!([0, 1]));
    for (row, p) in lat.iter().zip(v["latency"].as_array().unwrap()) {
        let f = |k: &str| p[k].as_f64().unwrap();
        assert!(
            f("min_us") <= f("p50_us") && f("p50_us") <= f("p99_us") && f("p99_us") <= f("max_us"),
            "{p}"
        );
        // The printed mean is the JSON's, to OSU's two decimals.
        assert!((row.1[0] - f("avg_us")).abs() <= 0.005 + 1e-9, "{row:?} {p}");
        assert!(f("msg_rate") > 0.0, "{p}");
    }
    for (row, p) in bw.iter().zip(v["bandwidth"].as_array().unwrap()) {
        assert!(
            p["mb_s"].as_f64().unwrap() > 0.0 && p["msg_rate"].as_f64().unwrap() > 0.0,
            "{p}"
        );
        assert!(
            (row.1[0] - p["mb_s"].as_f64().unwrap()).abs() <= 0.005 + 1e-9,
            "{row:?} {p}"
        );
    }
}

#[test]
fn gbit_prints_eight_times_the_json_megabytes() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p2p.json");
    let out = p2p(&[
        "--np",
        "3",
        "--pair",
        "2,1",
        "-b",
        "1K",
        "-e",
        "8K",
        "-n",
        "20",
        "--units",
        "gbit",
        "-J",
        json.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("rank 2 (") && stdout.contains("1 other rank(s) idle"),
        "{stdout}"
    );
    let bw = rows(&stdout, "# Size      Bandwidth (Mb/s)");
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let points = v["bandwidth"].as_array().unwrap();
    assert_eq!(bw.len(), 4, "{stdout}");
    for (row, p) in bw.iter().zip(points) {
        let want = 8.0 * p["mb_s"].as_f64().unwrap();
        assert!((row.1[0] - want).abs() <= 0.005 + 1e-9, "{row:?} vs 8 x {p}");
    }
}

#[test]
fn a_pair_outside_the_job_exits_2_naming_the_flag() {
    for (args, what) in [
        (&["--np", "2", "--pair", "0,5"][..], "rank 5"),
        (&["--pair", "1,1"][..], "two different ranks"),
        (&["--units", "furlongs"][..], "gbit"),
    ] {
        let out = p2p(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let flag = if args.contains(&"--units") { "--units" } else { "--pair" };
        assert!(err.contains(flag) && err.contains(what), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
