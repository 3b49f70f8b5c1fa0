//! collbench under mpirun on this host (feature `mpi`): both paths side by side, bootstrap through MPI and
//! through the environment. Needs OpenMPI's mpirun; skipped with the reason when it is absent, except in CI
//! (CI=true), where that is a failure.
#![cfg(feature = "mpi")]

use std::process::{Command, Output};

fn mpirun_available() -> bool {
    let found = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "mpirun is missing in CI: install openmpi-bin"
        );
        eprintln!("skipped: mpirun (OpenMPI) not found; apt-get install openmpi-bin to run these tests");
    }
    found
}

fn mpirun(np: usize, extra_env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new("mpirun");
    c.args([
        "--oversubscribe",
        "--mca",
        "mpi_yield_when_idle",
        "1",
        "--mca",
        "btl",
        "tcp,self",
        "-np",
    ])
    .arg(np.to_string())
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    .env_remove("COLLBENCH_RANK");
    for (k, v) in extra_env {
        c.args(["-x", &format!("{k}={v}")]);
    }
    c.arg(assert_cmd::cargo::cargo_bin("collbench")).arg("run").args(args);
    c.output().expect("mpirun runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// (path, #wrong out-of-place, #wrong in-place) of every row, with the table's path taken from its title.
fn rows(stdout: &str) -> Vec<(String, String, String)> {
    let mut path = String::new();
    let mut out = Vec::new();
    for l in stdout.lines() {
        if let Some(rest) = l
            .strip_prefix("# ")
            .filter(|r| r.contains(" on ") && r.ends_with("ranks"))
        {
            path = rest
                .split(" on ")
                .nth(1)
                .unwrap()
                .split(',')
                .next()
                .unwrap()
                .to_string();
        } else if !l.starts_with('#') && !l.trim().is_empty() {
            let c: Vec<&str> = l.split_whitespace().collect();
            out.push((path.clone(), c[8].to_string(), c[12].to_string()));
        }
    }
    out
}

#[test]
fn tcp_and_mpi_run_side_by_side_with_endpoints_exchanged_through_mpi() {
    if !mpirun_available() {
        return;
    }
    let out = mpirun(
        3,
        &[],
        &[
            "--transport",
            "tcp,mpi",
            "-e",
            "256K",
            "--collective",
            "all",
            "-d",
            "float,int32,half",
        ],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}\n{stdout}", text(&out.stderr));
    assert!(stdout.contains("endpoints exchanged through MPI"), "{stdout}");
    assert!(
        stdout.contains("Job token: random, from rank 0 through MPI"),
        "{stdout}"
    );
    let rows = rows(&stdout);
    for path in ["tcp@lo", "mpi"] {
        let n = rows.iter().filter(|r| r.0 == path).count();
        // half has no MPI type: the mpi path has 2 dtypes of 3.
        let want = if path == "mpi" { 2 } else { 3 } * 16 * 7;
        assert_eq!(n, want, "{path} rows:\n{stdout}");
    }
    for r in &rows {
        assert_eq!((r.1.as_str(), r.2.as_str()), ("0", "0"), "{r:?}");
    }
    assert!(
        text(&out.stderr).contains("skipping half points on mpi"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn under_mpirun_with_a_rendezvous_address_the_environment_bootstrap_is_used() {
    if !mpirun_available() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let root = format!("127.0.0.1:{port}");
    let out = mpirun(2, &[("COLLBENCH_ROOT", &root)], &["-e", "64K"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("# Launcher: mpirun (OpenMPI) bootstrap"), "{stdout}");
    assert!(stdout.contains("not a secret"), "derived token is flagged: {stdout}");
    assert!(rows(&stdout).iter().all(|r| r.1 == "0" && r.2 == "0"));
}

#[test]
fn the_local_launcher_refuses_the_mpi_path() {
    let out = Command::new(assert_cmd::cargo::cargo_bin("collbench"))
        .args(["run", "--transport", "mpi", "-e", "8"])
        .env_remove("COLLBENCH_RANK")
        .env_remove("OMPI_COMM_WORLD_RANK")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("--transport") && err.contains("mpirun"), "{err}");
}

#[test]
fn with_interleave_point_the_paths_take_turns_at_every_point() {
    if !mpirun_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("turns.json");
    let out = mpirun(
        3,
        &[],
        &[
            "--transport",
            "tcp,mpi",
            "--reference",
            "mpi",
            "--interleave",
            "point",
            "--repeat",
            "2",
            "-b",
            "1K",
            "-e",
            "4K",
            "-n",
            "3",
            "-w",
            "1",
            "--collective",
            "all_reduce,all_gather",
            "-d",
            "float,half",
            "-J",
            json.to_str().unwrap(),
        ],
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{stdout}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let order: Vec<(u64, String, String, String, u64)> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["out_of_place"]["nwrong"], 0.0, "{r}");
            assert_eq!(r["in_place"]["nwrong"], 0.0, "{r}");
            let s = |k: &str| r[k].as_str().unwrap().to_string();
            (
                r["repeat"].as_u64().unwrap(),
                s("collective"),
                s("type"),
                s("path"),
                r["size"].as_u64().unwrap(),
            )
        })
        .collect();
    // Sweep by sweep, point by point, tcp then mpi; MPI has no half type, so half points are tcp's alone.
    let mut want = Vec::new();
    for repeat in 0..2 {
        for coll in ["all_reduce", "all_gather"] {
            for dtype in ["float", "half"] {
                for size in [1024u64, 2048, 4096] {
                    // all_gather over 3 ranks rounds to whole 16-byte blocks per rank, as nccl-tests does.
                    let size = if coll == "all_gather" { size / 48 * 48 } else { size };
                    let paths: &[&str] = if dtype == "half" {
                        &["tcp@lo"]
                    } else {
                        &["tcp@lo", "mpi"]
                    };
                    for p in paths {
                        want.push((repeat, coll.to_string(), dtype.to_string(), p.to_string(), size));
                    }
                }
            }
        }
    }
    assert_eq!(order, want);
    // The skip is said once for the run, not once per point.
    assert_eq!(stderr.matches("skipping half points on mpi").count(), 1, "{stderr}");
    // Both paths share each collective's table, the path in the last column.
    assert_eq!(
        stdout.matches("paths taking turns at every point").count(),
        4,
        "{stdout}"
    );
    for c in v["collbench"]["summary"]["comparison"].as_array().unwrap() {
        for p in c["paths"].as_array().unwrap() {
            assert_eq!(p["repeats"], 2, "both sweeps combined: {p}");
        }
    }
}

#[test]
fn a_rank_stopped_inside_an_mpi_collective_is_named_by_every_other_rank_within_the_deadline() {
    if !mpirun_available() {
        return;
    }
    // mpirun's own --timeout is only the test's bound against a hang; without the watchdog it is what ends
    // the job, and no rank names anyone.
    let mut c = Command::new("mpirun");
    c.args([
        "--timeout",
        "240",
        "--oversubscribe",
        "--mca",
        "mpi_yield_when_idle",
        "1",
        "--mca",
        "btl",
        "tcp,self",
        "-np",
        "3",
    ])
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    .env_remove("COLLBENCH_RANK")
    .arg(assert_cmd::cargo::cargo_bin("collbench"))
    .args([
        "run",
        "--transport",
        "mpi",
        "-T",
        "5",
        "-b",
        "1M",
        "-e",
        "8M",
        "--fault",
        "1:all_reduce@8M:stop",
    ]);
    let out = c.output().expect("mpirun runs");
    let err = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    for r in [0, 2] {
        let line = err
            .lines()
            .find(|l| l.starts_with("collbench: error:") && l.contains(&format!(": rank {r} (host ")))
            .unwrap_or_else(|| panic!("rank {r} reported no failure:\n{err}"));
        assert!(
            line.contains("MPI_Allreduce of 8 MiB")
                && line.contains("did not answer the watchdog")
                && line.ends_with(&format!("Culprit: rank 1 (host {})", hostname())),
            "rank {r}: {line}"
        );
    }
}

fn hostname() -> String {
    text(&Command::new("hostname").output().unwrap().stdout)
        .trim()
        .to_string()
}
