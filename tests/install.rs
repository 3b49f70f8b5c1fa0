//! What an install gives a user beyond the binary: shell completions that offer each enumerated flag's
//! values, and `-V` naming the optional features the binary was built with.

use assert_cmd::Command;

fn collbench() -> Command {
    Command::cargo_bin("collbench").expect("binary built")
}

/// Runs bash's completion for the words `line` (the last one is being completed, may be empty) with the
/// script `collbench completions bash` prints; returns COMPREPLY.
fn complete(line: &[&str]) -> Vec<String> {
    let script = collbench().args(["completions", "bash"]).output().unwrap();
    assert!(script.status.success());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("collbench.bash");
    std::fs::write(&path, &script.stdout).unwrap();
    let words: Vec<String> = line.iter().map(|w| format!("'{w}'")).collect();
    let cword = line.len() - 1;
    let joined = line.join(" ");
    // As bash's programmable completion calls it: the function named by `complete -F`, with COMP_WORDS,
    // COMP_CWORD, COMP_LINE and COMP_POINT set, and the command, the word and the previous word as arguments.
    let driver = format!(
        "source '{}'\n\
         func=$(complete -p collbench | sed -E 's/.*-F ([^ ]+).*/\\1/')\n\
         COMP_WORDS=({})\nCOMP_CWORD={cword}\nCOMP_LINE='{joined}'\nCOMP_POINT=${{#COMP_LINE}}\n\
         \"$func\" collbench '{}' '{}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        path.display(),
        words.join(" "),
        line[cword],
        line[cword.saturating_sub(1)],
    );
    let out = std::process::Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &driver])
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn bash_completes_the_algorithm_names_after_algo() {
    let mut offered = complete(&["collbench", "run", "--algo", ""]);
    offered.sort();
    assert_eq!(offered, ["auto", "bruck", "pring", "rd", "rhd", "ring", "tree"]);
}

#[test]
fn bash_completes_values_of_the_other_enumerated_flags() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["collbench", "run", "--memory", ""], &["cuda", "host"]),
        (&["collbench", "run", "--reduce-on", ""], &["device", "host"]),
        (&["collbench", "run", "--interleave", ""], &["point", "sweep"]),
        (
            &["collbench", "run", "--collective", "all_"],
            &["all_gather", "all_reduce"],
        ),
        (&["collbench", "preflight", "--algo", "r"], &["rd", "rhd", "ring"]),
        (&["collbench", "plot", "x.json", "--format", ""], &["png", "svg"]),
    ];
    for (line, want) in cases {
        let mut offered = complete(line);
        offered.sort();
        assert_eq!(offered, *want, "completing {line:?}");
    }
}

#[test]
fn version_names_the_features_built_in() {
    let out = collbench().arg("-V").output().unwrap();
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    let built: Vec<&str> = [
        ("mpi", cfg!(feature = "mpi")),
        ("rdma", cfg!(feature = "rdma")),
        ("cuda", cfg!(feature = "cuda")),
    ]
    .into_iter()
    .filter_map(|(n, on)| on.then_some(n))
    .collect();
    let want = if built.is_empty() {
        "none".to_string()
    } else {
        built.join(", ")
    };
    assert!(
        line.starts_with(&format!("collbench {} (features: {want}", env!("CARGO_PKG_VERSION"))),
        "{line}"
    );
    if built.len() < 3 {
        assert!(line.contains("; without: "), "{line}");
    }
    // Subcommands report the same line, the program's name included (not `collbench-run`).
    for sub in ["run", "preflight", "model"] {
        let out = collbench().args([sub, "-V"]).output().unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), line, "{sub} -V");
    }
}
