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
