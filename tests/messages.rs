//! Messages name the right thing: the variable a value came from, the page a flag's help points to, one
//! line per fault rather than one per rank, one error prefix, and sentences without runs of spaces.

use std::path::Path;
use std::process::Output;

use assert_cmd::Command;

const TOKEN: &str = "00112233445566778899aabbccddeeff";

fn collbench() -> Command {
    let mut c = Command::cargo_bin("collbench").expect("binary built");
    for v in [
        "COLLBENCH_RANK",
        "COLLBENCH_ROOT",
        "RANK",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
    ] {
        c.env_remove(v);
    }
    c.timeout(std::time::Duration::from_secs(300));
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn out(args: &[&str]) -> Output {
    collbench().args(args).output().unwrap()
}

/// Prose lines (notes, errors, footnotes) holding a run of three or more spaces between words.
fn spaced_sentences(s: &str) -> Vec<String> {
    let run = regex::Regex::new(r"\S {3,}\S").unwrap();
    s.lines()
        .filter(|l| l.starts_with("collbench") || l.starts_with("* ") || l.starts_with("# note"))
        .filter(|l| run.is_match(l))
        .map(str::to_string)
        .collect()
}

#[test]
fn rendezvous_error_names_master_addr_when_it_gave_the_address() {
    // 192.0.2.1 (TEST-NET-1) is no address of this host: binding fails at once, nothing is sent.
    let o = collbench()
        .env("RANK", "0")
        .env("WORLD_SIZE", "2")
        .env("MASTER_ADDR", "192.0.2.1")
        .env("COLLBENCH_JOB_TOKEN", TOKEN)
        .args(["run", "-e", "8", "--bootstrap-timeout", "5"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("collbench: error: MASTER_ADDR: rank 0"), "{err}");
    assert!(!err.contains("COLLBENCH_ROOT"), "{err}");
}

#[test]
fn the_header_says_the_embedded_launcher_drew_the_token() {
    let o = out(&["run", "--np", "2", "-b", "8", "-e", "8", "-n", "1", "-w", "0"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("# Job token:"))
        .expect("a token line");
    assert!(
        line.contains("random") && !line.contains("COLLBENCH_JOB_TOKEN"),
        "{line}"
    );
}

#[test]
fn iface_help_points_to_the_interface_page() {
    let o = out(&["run", "--help"]);
    let help = text(&o.stdout);
    assert!(
        help.contains("docs/interface.md") && !help.contains("Choosing the interface"),
        "{help}"
    );
}

#[test]
fn repeat_2_note_reads_as_one_sentence() {
    let o = out(&[
        "run", "--np", "2", "-b", "8", "-e", "64", "-n", "1", "-w", "0", "--repeat", "2",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let all = text(&o.stderr) + &text(&o.stdout);
    assert!(all.contains("--repeat 2"), "the note is printed: {all}");
    assert_eq!(spaced_sentences(&all), Vec::<String>::new());
}

#[test]
fn model_notes_read_as_sentences() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = collbench()
        .current_dir(root)
        .args([
            "model",
            "results/model-prediction/run-2-ring.json",
            "results/model-prediction/run-3-ring.json",
            "--target-ranks",
            "64",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let all = text(&o.stderr) + &text(&o.stdout);
    assert_eq!(spaced_sentences(&all), Vec::<String>::new());
}

/// No string literal under src/ has a run of spaces inside a sentence (a line break inside a literal
/// without its trailing backslash); table layouts (the out-of-place/in-place headers) are exempt.
#[test]
fn no_string_literal_has_a_run_of_spaces_inside_a_sentence() {
    let run = regex::Regex::new(r#""[^"]*[a-z,;:)] {3,}[a-z(][^"]*""#).unwrap();
    let mut found = Vec::new();
    let mut stack = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            for (i, line) in std::fs::read_to_string(&p).unwrap_or_default().lines().enumerate() {
                let code = line.trim_start();
                // Table layouts (a header `"#  size  count"`, a row `"     1048576   ..."`) align columns with
                // spaces on purpose: only prose is judged.
                let layout = code.starts_with("\"#") || code.starts_with("\"  ") || code.starts_with("assert");
                if code.starts_with("//") || line.contains("out-of-place") || layout {
                    continue;
                }
                if run.is_match(line) {
                    found.push(format!("{}:{}: {}", p.display(), i + 1, code));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "runs of spaces inside sentences:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_missing_interface_is_reported_once_not_once_per_rank() {
    let o = out(&["run", "--np", "3", "-e", "8", "--transport", "tcp@nonexistent0"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("nonexistent0").count(), 1, "{err}");
    assert!(err.starts_with("collbench: error: --transport:"), "{err}");
}

#[test]
fn plot_draws_a_preflight_file_as_compare_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("preflight.json");
    let json_s = json.to_str().unwrap();
    let o = out(&[
        "preflight",
        "--np",
        "2",
        "--bandwidth-bytes",
        "1M",
        "--no-pairwise",
        "--budget",
        "60",
        "-J",
        json_s,
    ]);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o.stderr));
    let c = out(&["compare", json_s, json_s]);
    assert_eq!(c.status.code(), Some(0), "{}", text(&c.stderr));
    let charts = dir.path().join("charts");
    let p = out(&["plot", json_s, "--out", charts.to_str().unwrap(), "--format", "svg"]);
    assert_eq!(p.status.code(), Some(0), "{}", text(&p.stderr));
    let svgs = std::fs::read_dir(&charts)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "svg"));
    assert!(svgs.count() > 0, "no chart drawn");
    // A file of another tool (no collbench block, no paths) is still refused with what to give.
    let other = dir.path().join("nccl-tests.json");
    std::fs::write(&other, r#"{"results": [{"size": 8}]}"#).unwrap();
    let p = out(&["plot", other.to_str().unwrap()]);
    assert_eq!(p.status.code(), Some(2));
    assert!(
        text(&p.stderr).contains("not a collbench results file"),
        "{}",
        text(&p.stderr)
    );
}

#[test]
fn install_aliases_refuses_a_missing_directory_unless_told_to_make_it() {
    let dir = tempfile::tempdir().unwrap();
    let deep = dir.path().join("nonexistent/x");
    let bin = dir.path().join("bin");
    for missing in [&deep, &bin] {
        let o = out(&["install-aliases", missing.to_str().unwrap()]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains("does not exist") && err.contains("mkdir -p") && err.contains("--mkdir"),
            "{err}"
        );
        assert!(!missing.exists(), "nothing is created");
    }
    assert!(!dir.path().join("nonexistent").exists(), "nothing is created");
    // With --mkdir it is made, and said.
    let o = out(&["install-aliases", "--mkdir", bin.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains(&format!("created {}", bin.display())));
    assert!(bin.join("all_reduce_perf").exists());
}

#[test]
fn usage_errors_carry_collbenchs_prefix_and_help_stays_on_stdout() {
    let o = out(&["run", "--no-such-flag"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.starts_with("collbench: error: unexpected argument '--no-such-flag'"),
        "{err}"
    );
    assert!(err.contains("Usage: collbench run"), "{err}");
    let o = out(&["run", "--algo"]);
    assert!(
        text(&o.stderr).starts_with("collbench: error: a value is required"),
        "{}",
        text(&o.stderr)
    );
    let o = out(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(text(&o.stdout).contains("Usage: collbench"));
    assert!(o.stderr.is_empty());
}
