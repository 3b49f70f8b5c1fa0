//! `collbench plot` as a user runs it: charts of a real run, errors that name the file, and files that must be
//! read with care (an absurd interval, an incomplete run) drawn with a note.

use std::path::Path;
use std::process::Output;

use assert_cmd::Command;

use collbench::plot::{HEIGHT, WIDTH};

fn collbench() -> Command {
    let mut c = Command::cargo_bin("collbench").expect("binary built");
    c.env_remove("COLLBENCH_RANK")
        .timeout(std::time::Duration::from_secs(300));
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn plot(args: &[&str]) -> Output {
    collbench().arg("plot").args(args).output().expect("collbench runs")
}

/// A tiny real run on two local ranks, its results file in `dir`.
fn tiny_run(dir: &Path) -> std::path::PathBuf {
    let json = dir.join("results.json");
    let out = collbench()
        .args(["run", "--np", "2", "-b", "8", "-e", "64K", "-n", "2", "-w", "1", "-J"])
        .arg(&json)
        .output()
        .expect("collbench runs");
    assert!(out.status.success(), "run failed: {}", text(&out.stderr));
    json
}

/// Width and height from a PNG's header, after checking its signature and that the image data decodes.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{} is not a PNG", path.display());
    let decoder = png::Decoder::new(bytes.as_slice());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut buf).unwrap();
    // A chart is not a blank canvas: some pixels are not the white background.
    assert!(
        buf[..frame.buffer_size()].iter().any(|b| *b < 128),
        "{} is blank",
        path.display()
    );
    (frame.width, frame.height)
}

#[test]
fn a_real_run_plots_as_png_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let json = tiny_run(dir.path());
    let charts = dir.path().join("charts");
    let out = plot(&[json.to_str().unwrap(), "--out", charts.to_str().unwrap()]);
    assert!(out.status.success(), "plot failed: {}", text(&out.stderr));
    let listed: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();

    let tables = ["all_reduce-float-sum", "all_gather-float"];
    let mut expected = Vec::new();
    for t in tables {
        for chart in ["busbw", "latency"] {
            for ext in ["png", "svg"] {
                expected.push(charts.join(format!("{t}-{chart}.{ext}")));
            }
        }
    }
    assert_eq!(
        listed,
        expected.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "prints every file written"
    );
    for p in expected.iter().filter(|p| p.extension().unwrap() == "png") {
        assert_eq!(png_size(p), (WIDTH, HEIGHT), "{}", p.display());
    }
    for t in tables {
        let busbw = std::fs::read_to_string(charts.join(format!("{t}-busbw.svg"))).unwrap();
        let latency = std::fs::read_to_string(charts.join(format!("{t}-latency.svg"))).unwrap();
        for (svg, y_axis) in [(&busbw, "bus bandwidth (GB/s"), (&latency, "time (us)")] {
            assert!(svg.starts_with("<svg"), "not an SVG");
            for needle in ["message size (bytes)", y_axis, "tcp@lo", "2 ranks", "1KiB"] {
                assert!(svg.contains(needle), "{t}: SVG lacks {needle:?}");
            }
        }
    }
}

#[test]
fn charts_go_beside_the_results_file_by_default_in_the_formats_asked() {
    let dir = tempfile::tempdir().unwrap();
    let json = tiny_run(dir.path());
    let out = plot(&[json.to_str().unwrap(), "--format", "png"]);
    assert!(out.status.success(), "plot failed: {}", text(&out.stderr));
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "all_gather-float-busbw.png",
            "all_gather-float-latency.png",
            "all_reduce-float-sum-busbw.png",
            "all_reduce-float-sum-latency.png",
            "results.json",
        ]
    );
}

#[test]
fn bad_input_names_the_file_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nosuch.json");
    let not_json = dir.path().join("table.txt");
    std::fs::write(&not_json, "# nccl-tests style table\n").unwrap();
    let other_json = dir.path().join("other.json");
    std::fs::write(&other_json, r#"{"results": []}"#).unwrap();
    let cases = [
        (&missing, "cannot read"),
        (&not_json, "not JSON"),
        (&other_json, "not a collbench results file"),
    ];
    for (file, why) in cases {
        let out = plot(&[file.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", file.display());
        assert!(err.contains(&file.display().to_string()), "names the file: {err}");
        assert!(
            err.contains(why) && err.contains("collbench run -J"),
            "says why and what to do: {err}"
        );
    }
    // Nothing was written for any of them.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);

    let out = plot(&[other_json.to_str().unwrap(), "--format", "gif"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--format"), "{}", text(&out.stderr));
}

/// The committed charts (results/netns-paths and results/tcp-vs-mpi, drawn by tests/bench/*.sh with
/// `collbench plot results.json --out DIR`) come out again byte for byte from their committed results files.
#[test]
fn the_committed_charts_regenerate_byte_identical() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let mut compared = 0;
    for set in [
        "netns-paths/shaped",
        "netns-paths/unshaped",
        "tcp-vs-mpi/loopback",
        "tcp-vs-mpi/shaped",
    ] {
        let dir = results.join(set);
        if !dir.join("results.json").exists() {
            continue;
        }
        let out = tempfile::tempdir().unwrap();
        // Committed charts are SVG only (text, diffable; a PNG of each is one `--format png` away).
        let run = plot(&[
            dir.join("results.json").to_str().unwrap(),
            "--out",
            out.path().to_str().unwrap(),
            "--format",
            "svg",
        ]);
        assert!(run.status.success(), "{set}: {}", text(&run.stderr));
        for chart in std::fs::read_dir(out.path()).unwrap() {
            let chart = chart.unwrap().path();
            let name = chart.file_name().unwrap();
            let committed = std::fs::read(dir.join(name)).unwrap_or_default();
            assert!(
                std::fs::read(&chart).unwrap() == committed,
                "{set}/{} differs",
                name.to_string_lossy()
            );
            compared += 1;
        }
    }
    assert!(compared >= 16, "only {compared} charts compared");
}

/// `collbench plot` with `args` under a 2 GiB address-space limit: drawing a few charts needs a small part of it,
/// and a chart that asks for more (an axis of billions of ticks once asked for 20 GB) fails here at once
/// instead of taking the machine's memory.
fn plot_bounded(args: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("collbench"));
    c.env_remove("COLLBENCH_RANK").arg("plot").args(args);
    let lim = libc::rlimit {
        rlim_cur: 2 << 30,
        rlim_max: 2 << 30,
    };
    // SAFETY: setrlimit is async-signal-safe and reads only `lim`, copied into the closure.
    unsafe {
        c.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_AS, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        })
    };
    Command::from_std(c)
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .expect("collbench runs")
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn write_json(p: &Path, v: &serde_json::Value) {
    std::fs::write(p, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

#[test]
fn an_absurd_interval_is_drawn_clipped_with_a_note_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let json = tiny_run(dir.path());
    let mut v = read_json(&json);
    // The issue's file: one point 20 us +- 1e6 us.
    v["results"][0]["out_of_place"]["time"] = 20.0.into();
    v["results"][0]["collbench"]["out_of_place"]["ci95_us"] = 1e6.into();
    write_json(&json, &v);
    let charts = dir.path().join("charts");
    let out = plot_bounded(&[
        json.to_str().unwrap(),
        "--out",
        charts.to_str().unwrap(),
        "--format",
        "svg",
    ]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "plot failed: {:?}\n{err}", out.status);
    assert!(
        err.contains(&format!("warning: {}: the 95% interval of", json.display()))
            && err.contains("tcp@lo all_reduce of 8 B: ci95_us 1000000 at 20 us")
            && err.contains("drawn clipped to 1000x"),
        "{err}"
    );
    let latency = std::fs::read_to_string(charts.join("all_reduce-float-sum-latency.svg")).unwrap();
    assert!(latency.contains("clipped at 1000x their time"), "the chart says so");
}

#[test]
fn an_incomplete_run_is_marked_on_its_charts_and_on_stderr_with_the_missing_count() {
    let dir = tempfile::tempdir().unwrap();
    let json = tiny_run(dir.path());
    let mut v = read_json(&json);
    // The run stopped before its last four points (all_gather's largest sizes), as a failed run writes it.
    let results = v["results"].as_array_mut().unwrap();
    let dropped: Vec<serde_json::Value> = results.split_off(results.len() - 4);
    assert!(dropped.iter().all(|e| e["collective"] == "all_gather"), "{dropped:?}");
    let missing: Vec<serde_json::Value> = dropped
        .iter()
        .map(|e| {
            let redop = if e["redop"] == "none" {
                serde_json::Value::Null
            } else {
                e["redop"].clone()
            };
            serde_json::json!({
                "path": e["path"], "collective": e["collective"], "size": e["size"], "type": e["type"],
                "redop": redop, "repeat": 0,
            })
        })
        .collect();
    v["errors"] = serde_json::json!([{ "message": "rank 1 (host h1) died", "exit_code": 3, "missing": missing }]);
    v["collbench"]["complete"] = false.into();
    v.as_object_mut().unwrap().remove("end_time");
    write_json(&json, &v);
    let charts = dir.path().join("charts");
    let out = plot_bounded(&[
        json.to_str().unwrap(),
        "--out",
        charts.to_str().unwrap(),
        "--format",
        "svg",
    ]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "plot failed: {err}");
    assert!(
        err.contains(&format!(
            "warning: {}: the run stopped before its plan was done",
            json.display()
        )) && err.contains("4 planned point(s) were not measured"),
        "{err}"
    );
    for (chart, here) in [("all_gather-float", 4), ("all_reduce-float-sum", 0)] {
        for kind in ["busbw", "latency"] {
            let svg = std::fs::read_to_string(charts.join(format!("{chart}-{kind}.svg"))).unwrap();
            let mark = format!("INCOMPLETE RUN: 4 planned point(s) not measured, {here} of them in this chart");
            assert!(svg.contains(&mark), "{chart}-{kind} lacks {mark:?}");
        }
    }
}
