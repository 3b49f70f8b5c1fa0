//! `collbench preflight` as a user runs it: local ranks over loopback, expectations that pass, fail and sit
//! inside the noise, a baseline, every output file, and bad input.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use quick_xml::events::Event;
use serde_json::Value;

fn collbench() -> Command {
    let mut c = Command::cargo_bin("collbench").expect("binary built");
    c.env_remove("COLLBENCH_RANK")
        .timeout(std::time::Duration::from_secs(600));
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn preflight(args: &[&str]) -> Output {
    collbench().arg("preflight").args(args).output().unwrap()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let f = dir.join(name);
    std::fs::write(&f, body).unwrap();
    f
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn validate(v: &Value) {
    let schema: Value = serde_json::from_str(include_str!("../schema/collbench-preflight.schema.json")).unwrap();
    let mut compiler = boon::Compiler::new();
    let mut schemas = boon::Schemas::new();
    compiler.add_resource("urn:preflight", schema).unwrap();
    let idx = compiler.compile("urn:preflight", &mut schemas).unwrap();
    if let Err(e) = schemas.validate(v, idx) {
        panic!("preflight JSON does not match its schema: {e:#}");
    }
}

/// (testcases, failures, skipped) in a JUnit file, by parsing it.
fn junit_counts(path: &Path) -> (usize, usize, usize) {
    let x = std::fs::read_to_string(path).unwrap();
    let mut reader = quick_xml::Reader::from_str(&x);
    let (mut cases, mut failures, mut skipped) = (0, 0, 0);
    loop {
        match reader.read_event().unwrap_or_else(|e| panic!("{e}\n{x}")) {
            Event::Start(e) | Event::Empty(e) => match e.name().as_ref() {
                b"testcase" => cases += 1,
                b"failure" => failures += 1,
                b"skipped" => skipped += 1,
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    (cases, failures, skipped)
}

/// The check named `name` in a preflight JSON.
fn check<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {:#}", v["checks"]))
}

#[test]
fn default_preflight_on_four_local_ranks_passes_with_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let (json, xml, md) = (
        dir.path().join("p.json"),
        dir.path().join("p.xml"),
        dir.path().join("p.md"),
    );
    let out = preflight(&["--np", "4", "-J", p(&json), "--junit", p(&xml), "--markdown", p(&md)]);
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{so}\n{se}");
    // The plan and its duration come first, then the checks.
    assert!(so.starts_with("Preflight plan: 4 rank(s), path(s) tcp@lo"), "{so}");
    assert!(so.contains("expected duration: about"), "{so}");
    assert!(so.contains("16 MiB .. 64 MiB"), "the default bandwidth phase: {so}");
    let v = read_json(&json);
    validate(&v);
    let checks = v["checks"].as_array().unwrap();
    assert!(checks.len() >= 2, "{so}");
    for c in checks {
        let row = so
            .lines()
            .find(|l| l.trim_start().starts_with(c["name"].as_str().unwrap()))
            .unwrap_or_else(|| panic!("check {} not printed:\n{so}", c["name"]));
        assert!(row.ends_with("PASS") || row.ends_with("WARN"), "{row}");
    }
    assert_eq!(check(&v, "tcp@lo connectivity")["verdict"], "pass");
    assert_eq!(check(&v, "tcp@lo data")["verdict"], "pass");
    assert!(
        so.contains("Preflight verdict: PASS") || so.contains("Preflight verdict: WARN"),
        "{so}"
    );
    // Loopback has no link speed: bandwidth is measured and said to be unjudged, not silently dropped.
    assert!(
        v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("all_reduce busbw")),
        "{:#}",
        v["notes"]
    );
    // Every sweep the plan ran (three, or fewer where a busy machine made the budget lower the plan, which the
    // plan then says) of every latency and bandwidth point, all_reduce and all_gather; none beyond.
    let results = v["results"].as_array().unwrap();
    let sweeps = v["repeat"].as_u64().unwrap();
    let lowered = v["plan"].to_string().contains("the plan is lowered");
    assert!(
        sweeps == 3 || (lowered && (1..3).contains(&sweeps)),
        "{sweeps} sweeps: {}",
        v["plan"]
    );
    for r in 0..sweeps {
        for coll in ["all_reduce", "all_gather"] {
            assert!(
                results.iter().any(|e| e["repeat"] == r && e["collective"] == coll),
                "sweep {r} of {coll}: {so}"
            );
        }
    }
    assert!(results.iter().all(|e| e["repeat"].as_u64() < Some(sweeps)), "{so}");
    // A check may warn on a busy machine (the rows above allow it); JUnit shows each warning as skipped.
    let warned = checks.iter().filter(|c| c["verdict"] == "warn").count();
    assert_eq!(junit_counts(&xml), (checks.len(), 0, warned), "{so}");
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.starts_with("## collbench preflight: "), "{md}");
    assert!(md.contains("| tcp@lo connectivity |"), "{md}");
}

#[test]
fn impossible_busbw_fails_and_a_threshold_inside_the_noise_warns_unless_strict() {
    let dir = tempfile::tempdir().unwrap();
    let impossible = write(dir.path(), "fast.toml", "[[expect]]\nmin_busbw = 1e6\n");
    let (json, xml) = (dir.path().join("p.json"), dir.path().join("p.xml"));
    let out = preflight(&[
        "--np",
        "2",
        "--bandwidth-bytes",
        "1M",
        "--expect",
        p(&impossible),
        "-J",
        p(&json),
        "--junit",
        p(&xml),
    ]);
    let so = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{so}\n{}", text(&out.stderr));
    assert!(so.contains("FAIL: tcp@lo all_reduce busbw"), "{so}");
    assert!(so.contains("Preflight verdict: FAIL"), "{so}");
    let v = read_json(&json);
    validate(&v);
    let ar = check(&v, "tcp@lo all_reduce busbw");
    assert_eq!(ar["verdict"], "fail");
    assert!(ar["source"].as_str().unwrap().ends_with("fast.toml line 2"), "{ar}");
    // all_reduce and all_gather fail; connectivity, data and the pairwise links pass.
    let (cases, failures, skipped) = junit_counts(&xml);
    assert_eq!((cases, failures, skipped), (5, 2, 0));
    assert_eq!(check(&v, "tcp@lo pairwise links")["verdict"], "pass");

    // The same measurements judged again with the threshold at the measured median: inside the noise.
    let median = ar["value"].as_f64().unwrap();
    let at = write(
        dir.path(),
        "at.toml",
        &format!("[[expect]]\ncollective = \"all_reduce\"\nmin_busbw = {median:?}\n"),
    );
    let out = preflight(&["--from-results", p(&json), "--expect", p(&at)]);
    let so = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a warning alone passes:\n{so}\n{}",
        text(&out.stderr)
    );
    assert!(so.contains("WARN: tcp@lo all_reduce busbw"), "{so}");
    assert!(so.contains("Preflight verdict: WARN"), "{so}");
    // The saved pairwise check is judged again too, as it was.
    assert!(so.contains("tcp@lo pairwise links"), "{so}");
    let out = preflight(&["--from-results", p(&json), "--expect", p(&at), "--strict"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "--strict fails on a warning:\n{}",
        text(&out.stdout)
    );
}

/// `doc` with every point's out-of-place time set to `time_us` (interval 1% of it), busbw to match.
fn steady(doc: &Value, time_us: f64) -> Value {
    let mut d = doc.clone();
    for e in d["results"].as_array_mut().unwrap() {
        let o = &mut e["out_of_place"];
        o["time"] = time_us.into();
        o["ci95_us"] = (time_us / 100.0).into();
        o["bus_bw"] = (1000.0 / time_us).into();
    }
    d
}

#[test]
fn a_regression_against_the_baseline_fails() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let out = preflight(&["--np", "2", "--bandwidth-bytes", "1M", "--repeat", "2", "-J", p(&json)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    // The measured points with set times, so significance does not depend on this machine's noise.
    let now = write(dir.path(), "now.json", &steady(&read_json(&json), 1000.0).to_string());
    // Against itself nothing regressed.
    let out = preflight(&["--from-results", p(&now), "--baseline", p(&now)]);
    let so = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{so}");
    assert!(so.contains("tcp@lo all_reduce vs baseline"), "{so}");
    assert!(!so.contains("FAIL"), "{so}");
    // A baseline ten times faster at every point: this run regressed.
    let base = write(dir.path(), "base.json", &steady(&read_json(&json), 100.0).to_string());
    let out = preflight(&["--from-results", p(&now), "--baseline", p(&base)]);
    let so = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{so}");
    assert!(
        so.contains("FAIL: tcp@lo all_reduce vs baseline: worst time change"),
        "{so}"
    );
    assert!(
        so.contains("FAIL: tcp@lo all_gather vs baseline: worst time change"),
        "{so}"
    );
}

#[test]
fn bad_expectations_exit_2_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    for (body, line, key) in [
        ("[[expect]]\nmin_busbw = \"12 furlongs\"\n", 2, "min_busbw"),
        ("# ok\n[[expect]]\nmax_busbw = 3\n", 3, "max_busbw"),
        ("[[expect]]\npath = \"tcp@nowhere0\"\n", 2, "path"),
        ("[[expect]]\ncollective = \"broadcast\"\n", 2, "collective"),
        ("[[expect]\nmin_busbw = 1\n", 1, ""),
    ] {
        let f = write(dir.path(), "bad.toml", body);
        let out = preflight(&["--np", "2", "--expect", p(&f)]);
        let se = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{body}: {se}");
        assert!(se.contains(&format!("bad.toml line {line}")), "{body}: {se}");
        assert!(se.contains(key), "{body}: {se}");
        assert!(text(&out.stdout).is_empty(), "nothing ran: {}", text(&out.stdout));
    }
    let out = preflight(&["--expect", "/nonexistent/e.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("/nonexistent/e.toml"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn an_expectations_file_beyond_the_bound_or_not_a_file_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // 30,000 valid entries: over the 1 MiB bound, so refused before parsing (parsing used to take minutes).
    let big = write(dir.path(), "big.toml", &"[[expect]]\nmax_cv = 0.5\n".repeat(50_000));
    let out = preflight(&["--np", "2", "--expect", p(&big)]);
    let se = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{se}");
    assert!(
        se.contains("--expect") && se.contains("more than 1048576 bytes") && se.contains("big.toml"),
        "{se}"
    );
    assert!(text(&out.stdout).is_empty(), "nothing ran: {}", text(&out.stdout));
    // A FIFO with no writer would block the open forever; a directory is no file.
    let fifo = dir.path().join("fifo.toml");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for (f, kind) in [(fifo.as_path(), "a FIFO"), (dir.path(), "a directory")] {
        let out = preflight(&["--np", "2", "--expect", p(f)]);
        let se = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{se}");
        assert!(se.contains("--expect") && se.contains(kind), "{se}");
    }
}

#[test]
fn sweep_flags_the_plan_fixes_are_refused() {
    for flag in ["-b", "--maxbytes", "--collective", "--iters"] {
        let out = preflight(&[flag, "8"]);
        assert_eq!(out.status.code(), Some(2), "{flag}");
        assert!(text(&out.stderr).contains(flag), "{flag}: {}", text(&out.stderr));
    }
    let out = preflight(&["--repeat", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--repeat"), "{}", text(&out.stderr));
    let out = preflight(&["--bandwidth-bytes", "4K"]);
    assert!(text(&out.stderr).contains("--bandwidth-bytes"), "{}", text(&out.stderr));
    // NCCL needs device buffers: on host memory it says to add --memory cuda, as `run` does (a build without
    // NCCL says how to build one); and MPI has none.
    let out = preflight(&["--transport", "tcp,nccl"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    let want = if cfg!(feature = "cuda") {
        "--transport: nccl runs on device buffers: add --memory cuda"
    } else {
        "--transport"
    };
    assert!(err.contains(want), "{err}");
    if cfg!(feature = "mpi") {
        let out = preflight(&["--transport", "mpi", "--memory", "cuda"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(
            text(&out.stderr).contains("--memory: cuda runs on tcp and rdma paths"),
            "{}",
            text(&out.stderr)
        );
    }
    // An output file that exists is refused before anything runs, unless --force.
    let dir = tempfile::tempdir().unwrap();
    let taken = write(dir.path(), "taken.xml", "keep");
    let out = preflight(&["--junit", p(&taken)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--junit"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "keep");
    let out = preflight(&["--from-results", "/nonexistent/p.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--from-results /nonexistent/p.json"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_rank_lost_mid_plan_keeps_what_was_measured_and_fails_the_phase() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    // Rank 1 dies before the bandwidth phase's first all_gather: connectivity and latency are measured by then.
    let out = preflight(&[
        "--np",
        "3",
        "--bandwidth-bytes",
        "1M",
        "--repeat",
        "1",
        "-T",
        "20",
        "-J",
        p(&json),
        "--fault",
        "1:all_gather@256K:kill",
    ]);
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{so}\n{se}");
    assert!(so.contains("FAIL: tcp@lo bandwidth:"), "{so}");
    assert!(so.contains("Preflight verdict: FAIL"), "{so}");
    let v = read_json(&json);
    validate(&v);
    assert_eq!(check(&v, "tcp@lo bandwidth")["verdict"], "fail");
    assert_eq!(check(&v, "tcp@lo connectivity")["verdict"], "pass");
    let results = v["results"].as_array().unwrap();
    assert!(results.iter().any(|e| e["size"] == 65536), "the latency phase was kept");
    // The file says what the process did.
    assert_eq!(v["exit_code"], 3, "{so}");
    assert!(so.contains("ended before its plan was done, exit 3"), "{so}");

    // Lost in the very first phase: nothing measured, so nothing is claimed about the data.
    let out = preflight(&[
        "--np",
        "3",
        "-T",
        "20",
        "-J",
        p(&json),
        "--force",
        "--fault",
        "1:all_reduce@8:kill",
    ]);
    let (so, se) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{so}\n{se}");
    assert!(so.contains("FAIL: tcp@lo connectivity"), "{so}");
    assert!(!so.contains("0 wrong elements in 0 points"), "{so}");
    let v = read_json(&json);
    validate(&v);
    assert_eq!(v["exit_code"], 3);
    assert!(
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["name"] != "tcp@lo data"),
        "{:#}",
        v["checks"]
    );
}

/// Ranks started one by one (as a Kubernetes Indexed Job or a per-node health check starts them) each exit with
/// the job's verdict: a FAIL is exit 1 on every rank, not only on rank 0, and a PASS is 0 on every rank.
#[test]
fn every_rank_exits_with_the_verdict() {
    use collbench::world::{env, new_token, token_to_hex};
    let dir = tempfile::tempdir().unwrap();
    let impossible = write(dir.path(), "fast.toml", "[[expect]]\nmin_busbw = 1e6\n");
    for (expect, verdict) in [(Some(&impossible), 1), (None, 0)] {
        let token = token_to_hex(&new_token());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ranks: Vec<_> = (0..3)
            .map(|rank| {
                let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("collbench"));
                c.args(["preflight", "--bandwidth-bytes", "1M", "--no-pairwise"])
                    .env_remove("COLLBENCH_RANK")
                    .env(env::RANK, rank.to_string())
                    .env(env::WORLD_SIZE, "3")
                    .env(env::ROOT, format!("127.0.0.1:{port}"))
                    .env(env::JOB_TOKEN, &token)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                if let Some(f) = expect {
                    c.arg("--expect").arg(f);
                }
                c.spawn().unwrap()
            })
            .collect();
        for (rank, child) in ranks.into_iter().enumerate() {
            let out = child.wait_with_output().unwrap();
            let (so, se) = (text(&out.stdout), text(&out.stderr));
            assert_eq!(out.status.code(), Some(verdict), "rank {rank}:\n{so}\n{se}");
            if rank == 0 {
                let line = if verdict == 1 {
                    "Preflight verdict: FAIL"
                } else {
                    "Preflight verdict: "
                };
                assert!(so.contains(line), "{so}");
            } else if verdict == 1 {
                assert!(
                    se.contains(&format!("rank {rank}: exits 1, the preflight verdict")),
                    "{se}"
                );
            }
        }
    }
}

#[test]
fn units_gbit_prints_every_check_in_gbit_per_s_and_the_json_keeps_gbs() {
    let dir = tempfile::tempdir().unwrap();
    let impossible = write(dir.path(), "fast.toml", "[[expect]]\nmin_busbw = 1e6\n");
    let json = dir.path().join("p.json");
    let out = preflight(&[
        "--np",
        "2",
        "--bandwidth-bytes",
        "1M",
        "--expect",
        p(&impossible),
        "-J",
        p(&json),
        "--units",
        "gbit",
    ]);
    let so = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{so}\n{}", text(&out.stderr));
    assert!(!so.contains("GB/s"), "every figure in Gb/s:\n{so}");
    let v = read_json(&json);
    let ar = check(&v, "tcp@lo all_reduce busbw");
    assert_eq!(ar["unit"], "GB/s", "{ar}");
    assert!(ar["measured"].as_str().unwrap().contains(" GB/s ["), "{ar}");
    // The same file judged again: the failure line's figures are 8 x the JSON's.
    let out = preflight(&[
        "--from-results",
        p(&json),
        "--expect",
        p(&impossible),
        "--units",
        "gbit",
    ]);
    let so = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{so}\n{}", text(&out.stderr));
    assert!(!so.contains("GB/s"), "{so}");
    let f = |k: &str| format!("{:.3}", ar[k].as_f64().unwrap() * 8.0);
    let line = format!(
        "FAIL: tcp@lo all_reduce busbw: {} Gb/s [{}, {}] vs >= 8000000.000 Gb/s",
        f("value"),
        f("lo"),
        f("hi")
    );
    assert!(so.contains(&line), "{line}\n{so}");
    assert!(
        so.contains("Gb/s median (lowest "),
        "the pairwise links in Gb/s too:\n{so}"
    );
}

/// A host whose rank waited for a CPU most of the collectives, apart from the others, fails by name with the
/// CPU as cause, though no figure fell short; the same evidence on every host (a busy machine) names nobody.
#[test]
fn a_host_starved_of_cpu_apart_from_the_others_fails_by_name_from_its_evidence_alone() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let out = preflight(&["--np", "2", "--bandwidth-bytes", "1M", "-J", p(&json)]);
    assert_ne!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let mut v = read_json(&json);
    let one = v["evidence"][0].clone();
    let host = |name: &str, waited: f64| {
        let mut e = one.clone();
        e["host"] = name.into();
        e["wall_s"] = 10.0.into();
        e["waited_s"] = waited.into();
        e["throttled_s"] = Value::Null;
        e
    };
    let judged = |v: &Value| {
        let again = dir.path().join("again.json");
        std::fs::write(dir.path().join("edited.json"), serde_json::to_vec(v).unwrap()).unwrap();
        let out = preflight(&[
            "--from-results",
            p(&dir.path().join("edited.json")),
            "-J",
            p(&again),
            "--force",
        ]);
        (out.status.code(), text(&out.stdout), read_json(&again))
    };
    v["evidence"] = Value::Array(vec![host("hA", 0.2), host("hB", 8.1), host("hC", 0.3)]);
    let (code, so, again) = judged(&v);
    assert_eq!(code, Some(1), "{so}");
    let c = check(&again, "tcp@lo CPU of hB during the collectives");
    assert_eq!(
        (c["verdict"].as_str(), c["cause"].as_str()),
        (Some("fail"), Some("cpu")),
        "{c}"
    );
    assert!(c["detail"].as_str().unwrap().contains("waited for a CPU"), "{c}");
    assert!(!so.contains("CPU of hA") && !so.contains("CPU of hC"), "{so}");
    // Every host alike busy: no host is starved apart.
    v["evidence"] = Value::Array(vec![host("hA", 7.9), host("hB", 8.1), host("hC", 7.5)]);
    let (code, so, _) = judged(&v);
    assert_eq!(code, Some(0), "{so}");
    assert!(!so.contains(" CPU of "), "{so}");
}

/// One sweep of a point far off its siblings is a finding, judged from a saved report: with a carrier lost in
/// the evidence it fails as the link, naming that host; the median alone would have hidden it.
#[test]
fn a_sweep_far_off_its_siblings_is_a_finding_not_noise() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("p.json");
    let out = preflight(&["--np", "2", "--bandwidth-bytes", "1M", "--repeat", "3", "-J", p(&json)]);
    assert_ne!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let mut v = read_json(&json);
    let results = v["results"].as_array_mut().unwrap();
    let i = results
        .iter()
        .position(|e| e["repeat"] == 1 && e["collective"] == "all_reduce" && e["size"] == 1 << 20)
        .unwrap_or_else(|| panic!("no second sweep at 1 MiB: {}", text(&out.stdout)));
    results[i]["out_of_place"]["time"] = 500_000.0.into();
    let judged = |v: &Value| {
        let edited = dir.path().join("edited.json");
        let again = dir.path().join("again.json");
        std::fs::write(&edited, serde_json::to_vec(v).unwrap()).unwrap();
        let out = preflight(&["--from-results", p(&edited), "-J", p(&again), "--force"]);
        (out.status.code(), text(&out.stdout), read_json(&again))
    };
    // No carrier lost, no timeout: a warning.
    let (_, so, again) = judged(&v);
    let c = check(&again, "tcp@lo sweep 2 against the others");
    assert_eq!(c["verdict"], "warn", "{c}\n{so}");
    assert!(c["measured"].as_str().unwrap().contains("all_reduce at 1 MiB"), "{c}");
    // The same with the host's link down twice during the collectives: a failure, cause the link.
    v["evidence"][0]["link_downs"] = 2.into();
    let host = v["evidence"][0]["host"].as_str().unwrap().to_string();
    let (code, so, again) = judged(&v);
    assert_eq!(code, Some(1), "{so}");
    let c = check(&again, "tcp@lo sweep 2 against the others");
    assert_eq!(
        (c["verdict"].as_str(), c["cause"].as_str()),
        (Some("fail"), Some("link")),
        "{c}"
    );
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("{host} lost its carrier 2 time(s)")),
        "{c}"
    );
}

/// k8s/overlays/preflight-gate/gate.sh against a stand-in kubectl whose Job failed: it prints rank 0's verdict
/// line, not the JSON document the log ends with, and exits 1; without a verdict in the log, the log's last
/// lines say why.
#[test]
fn the_preflight_gate_prints_the_verdict_line_not_the_json() {
    let d = tempfile::tempdir().unwrap();
    let kubectl = write(
        d.path(),
        "kubectl",
        r#"#!/usr/bin/env bash
case "$*" in
    "get configmap/collbench-baseline" | "get secret/collbench-job-token") exit 0 ;;
    "delete job "*) exit 0 ;;
    "apply -k "*) echo "job.batch/collbench-preflight created" ;;
    "get job collbench-preflight -o jsonpath="*) printf 'Failed ' ;;
    "logs -l "*) cat "$FAKE_LOG" ;;
    *) echo "kubectl stand-in: unexpected: $*" >&2; exit 9 ;;
esac
"#,
    );
    std::fs::set_permissions(&kubectl, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let verdict = "Preflight verdict: FAIL: 1 of 2 checks failed (tcp@eth0 all_reduce vs baseline)";
    let json_lines: String = (0..200)
        .map(|i| format!("    {{\"name\": \"check {i}\"}},\n"))
        .collect();
    let with_verdict = write(
        d.path(),
        "verdict.log",
        &format!(
            "\nPreflight checks:\n  check  measured  threshold  verdict\n  FAIL: tcp@eth0 all_reduce vs baseline: \
             worst time change +41.0% vs no point slower by > 10% (--baseline b.json): regressed\n{verdict}\n\
             collbench preflight rank 0: exit code 1\n----- BEGIN /results/preflight.json -----\n{{\n  \
             \"checks\": [\n{json_lines}  ]\n}}\n----- END /results/preflight.json -----\n"
        ),
    );
    let stopped = write(
        d.path(),
        "stopped.log",
        "collbench: error: rank 1 (collbench-preflight-1) stopped answering during all_reduce of 64 MiB\n\
         collbench preflight rank 0: exit code 3\n",
    );
    let gate = Path::new(env!("CARGO_MANIFEST_DIR")).join("k8s/overlays/preflight-gate/gate.sh");
    let run = |log: &Path| {
        let out = std::process::Command::new("bash")
            .arg(&gate)
            .arg("60")
            .env("KUBECTL", &kubectl)
            .env("FAKE_LOG", log)
            .env_remove("NAMESPACE")
            .output()
            .unwrap();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let (code, so, se) = run(&with_verdict);
    assert_eq!(code, Some(1), "{so}\n{se}");
    let lines: Vec<&str> = so.lines().filter(|l| !l.starts_with("job.batch/")).collect();
    assert_eq!(lines.first().copied(), Some(verdict), "{so}");
    assert_eq!(lines.len(), 2, "the verdict and the Job's state:\n{so}");
    assert!(lines[1].starts_with("gate.sh: job/collbench-preflight Failed"), "{so}");
    assert!(!so.contains("\"checks\"") && !so.contains("BEGIN"), "{so}");
    let (code, so, se) = run(&stopped);
    assert_eq!(code, Some(1), "{so}\n{se}");
    assert!(so.contains("stopped answering during all_reduce"), "{so}");
}

/// Rank 0 of a launched job whose JSON file is already there refuses it before it starts, with one error that
/// says so and what to do; it writes nothing about the refusal (that would meet the same file and blame
/// another run for it), and the earlier file is kept as it was. It serves the rendezvous until the other ranks
/// were told of the refusal; rank 1 never starts here, so that lasts until the (short) bootstrap deadline.
#[test]
fn a_launched_rank_0_refuses_an_existing_json_once_and_writes_nothing() {
    use collbench::world::{env, new_token, token_to_hex};
    let dir = tempfile::tempdir().unwrap();
    let taken = write(dir.path(), "taken.json", "earlier results");
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("collbench"))
        .args([
            "preflight",
            "--bandwidth-bytes",
            "1M",
            "--no-pairwise",
            "--bootstrap-timeout",
            "1",
            "-J",
        ])
        .arg(&taken)
        .env_remove("COLLBENCH_RANK")
        .env(env::RANK, "0")
        .env(env::WORLD_SIZE, "2")
        .env(env::ROOT, "127.0.0.1:1")
        .env(env::JOB_TOKEN, token_to_hex(&new_token()))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("collbench: error")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(errors[0].contains("exists; use --force"), "{err}");
    assert!(!err.contains("kept in"), "{err}");
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "earlier results");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "only the earlier file: {left:?}");
}
