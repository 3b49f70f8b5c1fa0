//! Every command shown as runnable in README.md and docs/*.md runs as written.
//!
//! A fenced block whose info string is `sh runnable` is run with `bash -eu -o pipefail`, with the built
//! `collbench` first on PATH, in a scratch folder that links every top-level entry of the repository (so
//! `launch/...` and `results/...` read as written, and the files a block writes do not land in the tree); it
//! must exit 0, or with one of the codes listed as `status=0,1` in the info string (for commands whose
//! verdict is the machine's, such as `pairwise`). Blocks of one file share a folder and run in order, so a
//! later block may read what an earlier one wrote.
//!
//! The quick start (`sh runnable quickstart`, one block for users and one for contributors) runs as the README
//! gives it, but with this build's binary for `cargo run --release --` (building it again in release would
//! only cost time), and its test-suite line must be the command .ci/run runs.
//!
//! Every other `sh` block says what it needs that this machine has not (`sh needs=gpu`, `needs=cluster`,
//! ...): a block with neither marker fails [`every_shell_block_runs_or_says_what_it_needs`].
//!
//! A block marked `sh runnable hosts` needs several hosts: it runs on a namespace cluster
//! (`tests/netns/cluster.sh`). Each line ending in `# on hostN` runs in host N, all at once; `host0` in the
//! text is host 0's address and `TOKEN` one job token; other lines run here first. Every line must exit 0.
//! It needs root; where it cannot run it says why and passes, except under `CI=true`, where that fails.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::netns::{namespace_test, spawn, wait_all, Cluster};

/// One runnable block: where it is, its text, the exit codes it may end with.
struct Block {
    file: PathBuf,
    line: usize,
    script: String,
    statuses: Vec<i32>,
    /// Runs on a namespace cluster, line by line (`sh runnable hosts`).
    hosts: bool,
    /// The README's quick start (`sh runnable quickstart`).
    quickstart: bool,
    /// The README's install block (`sh runnable install`): run without its `cargo install` line.
    install: bool,
}

/// The runnable blocks of one Markdown file, in order.
fn blocks(file: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(block) = open.as_mut() {
            if trimmed.starts_with("```") {
                out.push(open.take().unwrap());
            } else {
                block.script.push_str(line);
                block.script.push('\n');
            }
            continue;
        }
        let Some(info) = trimmed.strip_prefix("```") else {
            continue;
        };
        let words: Vec<&str> = info.split_whitespace().collect();
        if words.first() == Some(&"sh") && words.contains(&"runnable") {
            let statuses = words
                .iter()
                .find_map(|w| w.strip_prefix("status="))
                .map(|s| {
                    s.split(',')
                        .map(|c| c.parse().expect("status=N,M takes exit codes"))
                        .collect()
                })
                .unwrap_or_else(|| vec![0]);
            open = Some(Block {
                file: file.to_path_buf(),
                line: i + 1,
                script: String::new(),
                statuses,
                hosts: words.contains(&"hosts"),
                quickstart: words.contains(&"quickstart"),
                install: words.contains(&"install"),
            });
        }
    }
    assert!(open.is_none(), "{}: a runnable block is not closed", file.display());
    out
}

/// README.md and every Markdown page directly under docs/ (the generated options page has no runnable block).
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    files.extend(pages);
    files
}

/// PATH with the built collbench first.
fn path_with_collbench() -> std::ffi::OsString {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_collbench"))
        .parent()
        .unwrap()
        .to_path_buf();
    std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap()
}

#[test]
fn runnable_blocks_run_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = path_with_collbench();

    let all: Vec<Block> = documents(root)
        .iter()
        .flat_map(|f| blocks(f))
        .filter(|b| !b.hosts)
        .collect();
    // The README alone shows one per local subcommand; fewer means the marker was lost in an edit.
    assert!(all.len() >= 8, "only {} runnable blocks found", all.len());

    let mut failures = Vec::new();
    let mut scratch: Option<(PathBuf, tempfile::TempDir)> = None;
    let mut quick = Quickstart::default();
    for block in &all {
        if scratch.as_ref().is_none_or(|(f, _)| *f != block.file) {
            scratch = Some((block.file.clone(), linked_scratch(root)));
        }
        let dir = scratch.as_ref().unwrap().1.path();
        let script = if block.quickstart {
            quickstart(root, &block.script, &mut quick)
        } else if block.install {
            install(&block.script)
        } else {
            block.script.clone()
        };
        assert!(
            !script.contains("tests/run"),
            "{}:{}: the 30-minute suite is never run from here",
            block.file.display(),
            block.line
        );
        // A home of its own: completions and man pages installed `~/...` land in the scratch folder.
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let out = Command::new("bash")
            .args(["-eu", "-o", "pipefail", "-c", &script])
            .current_dir(dir)
            .env("PATH", &path)
            .env("HOME", &home)
            // Progress bars are drawn only on terminals; make sure of it.
            .env("NO_COLOR", "1")
            .output()
            .expect("bash runs");
        let code = out.status.code().unwrap_or(-1);
        if !block.statuses.contains(&code) {
            failures.push(format!(
                "{}:{}: exit {code} (allowed {:?})\n--- script\n{}--- stdout\n{}--- stderr\n{}",
                block.file.display(),
                block.line,
                block.statuses,
                script,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(quick.saw_tests, "the quick start has no test-suite command");
    assert!(
        all.iter().any(|b| b.install),
        "the README's install block is not `sh runnable install`"
    );
    assert!(quick.saw_run, "the quick start runs no `cargo run --release -- run`");
    assert!(
        failures.is_empty(),
        "{} runnable blocks failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A scratch folder holding a link to every top-level entry of the repository.
fn linked_scratch(root: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(root).unwrap().flatten() {
        std::os::unix::fs::symlink(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    dir
}

/// What the quick start's blocks held, together.
#[derive(Default)]
struct Quickstart {
    saw_tests: bool,
    saw_run: bool,
}

/// One block of the quick start as this test runs it: `cargo run --release --` is this build's binary, and
/// the test-suite line, which is this very suite, is checked against .ci/run instead of run again.
fn quickstart(root: &Path, script: &str, seen: &mut Quickstart) -> String {
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    let ci_last = ci
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap();
    let mut out = String::new();
    for line in script.lines() {
        let cmd = line.split('#').next().unwrap().trim();
        if cmd.starts_with("bash tests/") {
            assert_eq!(cmd, ci_last, "the README's test command is not what .ci/run runs");
            seen.saw_tests = true;
        } else if let Some(rest) = cmd.strip_prefix("cargo run --release -- ") {
            out.push_str(&format!("collbench {rest}\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    seen.saw_run |= out.contains("collbench run");
    out
}

/// The install block as this test runs it: this build's binary is already first on the PATH, so its
/// `cargo install --path .` line (a second release build) is left out; the rest runs in the scratch home.
fn install(script: &str) -> String {
    let mut out = String::new();
    let mut saw = false;
    for line in script.lines() {
        if line.trim_start().starts_with("cargo install") {
            assert!(
                line.contains("cargo install --path ."),
                "install from this checkout: {line}"
            );
            saw = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(saw, "the install block has no `cargo install --path .`");
    // What the README then says: `man` finds the pages with MANPATH naming the folder they went to.
    out.push_str(
        "test -s ~/.local/share/man/man1/collbench-run.1\n\
         if command -v man >/dev/null; then MANPATH=\"$HOME/.local/share/man:\" man -w collbench-run | grep -qx \"$HOME/.local/share/man/man1/collbench-run.1\"; fi\n\
         for f in ~/.local/share/bash-completion/completions/collbench ~/.zfunc/_collbench ~/.config/fish/completions/collbench.fish; do test -s \"$f\"; done\n",
    );
    out
}

#[test]
fn every_shell_block_runs_or_says_what_it_needs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut bare = Vec::new();
    for file in documents(root) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            let Some(info) = line.trim_start().strip_prefix("```") else {
                continue;
            };
            let words: Vec<&str> = info.split_whitespace().collect();
            let shell = matches!(words.first(), Some(&("sh" | "bash" | "shell" | "console")));
            if shell && !words.iter().any(|w| *w == "runnable" || w.starts_with("needs=")) {
                bare.push(format!("{}:{}: {line}", file.display(), i + 1));
            }
        }
    }
    assert!(
        bare.is_empty(),
        "shell blocks that neither run (`sh runnable`) nor say what they need (`sh needs=gpu`):\n{}",
        bare.join("\n")
    );
}

/// The host a line runs in (`# on hostN` at its end), if any.
fn host_of(line: &str) -> Option<usize> {
    let (_, tail) = line.rsplit_once("# on host")?;
    tail.trim().parse().ok()
}

#[test]
fn multi_host_blocks_run_on_a_namespace_cluster() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let all: Vec<Block> = documents(root)
        .iter()
        .flat_map(|f| blocks(f))
        .filter(|b| b.hosts)
        .collect();
    assert!(
        !all.is_empty(),
        "no `sh runnable hosts` block found (README's two hosts by hand has one)"
    );
    let Some(_one) = namespace_test() else { return };
    let path = path_with_collbench();
    // Any 32 hex digits serve; the processes of one block share it.
    let token = format!("{:032x}", u128::from(std::process::id()) * 0x9e37_79b9_7f4a_7c15);
    for (i, block) in all.iter().enumerate() {
        let where_ = format!("{}:{}", block.file.display(), block.line);
        let lines: Vec<&str> = block.script.lines().filter(|l| !l.trim().is_empty()).collect();
        let hosts = lines.iter().filter_map(|l| host_of(l)).max().map_or(0, |h| h + 1);
        assert!(
            hosts >= 2,
            "{where_}: a hosts block needs lines ending in `# on hostN` for two hosts or more"
        );
        let cluster = Cluster::up("cbd", &format!("b{i}"), hosts, &[]);
        let host0 = cluster.addr(0, "eth0");
        // `=TOKEN`, the value: the variable's own name holds the word too.
        let fill = |l: &str| l.replace("host0", &host0).replace("=TOKEN", &format!("={token}"));
        for line in lines.iter().filter(|l| host_of(l).is_none()) {
            let out = Command::new("bash")
                .args(["-eu", "-c", line])
                .env("PATH", &path)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{where_}: `{line}` failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let procs = lines
            .iter()
            .filter_map(|l| host_of(l).map(|h| (h, fill(l))))
            .map(|(h, l)| {
                let mut c = cluster.exec(h, Path::new("bash"), &["-eu", "-c", &l]);
                c.env("PATH", &path);
                spawn(c, &format!("host{h}"), dir.path())
            })
            .collect();
        for (n, done) in wait_all(procs, Duration::from_secs(240)).iter().enumerate() {
            assert!(
                done.status.success(),
                "{where_}: process {n} ended with {}:\n{}\n{}",
                done.status,
                done.stdout,
                done.stderr
            );
            assert!(
                done.stdout.contains("Out of bounds values : 0 OK") || n > 0,
                "{where_}: rank 0 printed no table"
            );
        }
    }
}

/// The commands of every man page's EXAMPLES section (docs/man/*.1, generated from src/docgen/sections.rs),
/// in order, without roff escapes; a command shown on two pages is listed once.
fn man_examples(root: &Path) -> Vec<String> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs/man"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    pages.sort();
    let mut out: Vec<String> = Vec::new();
    for page in pages {
        let roff = std::fs::read_to_string(&page).unwrap();
        let Some((_, examples)) = roff.split_once(".SH EXAMPLES\n") else {
            continue;
        };
        let examples = examples.split("\n.SH ").next().unwrap();
        let mut inside = false;
        for line in examples.lines() {
            match line {
                ".EX" => inside = true,
                ".EE" => inside = false,
                _ if inside => {
                    let cmd = line
                        .replace("\\-", "-")
                        .replace("\\*(Aq", "'")
                        .replace("\\&", "")
                        .replace("\\e", "\\");
                    if !out.contains(&cmd) {
                        out.push(cmd);
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Examples not run by this test, by their first words, and why: what they need that this machine has not,
/// or the test that runs them already.
const EXAMPLES_NOT_HERE: &[(&str, &str)] = &[
    (
        "RANK=0 WORLD_SIZE=2 MASTER_ADDR=host0",
        "needs a second host (the README's same two commands run on namespace hosts: multi_host_blocks_run_on_a_namespace_cluster)",
    ),
    ("mpirun -np 4 -H n1:2,n2:2", "needs hosts n1 and n2, each with eth0 and ib0"),
    ("mpirun -np 8 ", "needs eight MPI slots (OpenMPI refuses to oversubscribe 2 cores unless told)"),
    ("srun ", "needs Slurm and eight hosts with an RDMA device"),
    ("collbench run --transport nccl", "needs a GPU, NCCL and a build with --features cuda"),
    ("collbench gpu-matrix", "needs GPUs"),
    (
        "collbench run",
        "runs in runnable_blocks_run_as_written: the README's quick start is this very command",
    ),
];

/// How an example that runs here is run: what it needs made first (in the same folder), the exit codes it
/// may end with (a verdict that is this machine's), the files it must write, and a path to write elsewhere.
struct Runs {
    command: &'static str,
    setup: String,
    statuses: &'static [i32],
    writes: &'static [&'static str],
    /// A system folder the example writes to, replaced by `./scratch-bin`: a test writes nothing outside its
    /// scratch folder.
    instead_of: Option<&'static str>,
}

/// Small runs of two and three ranks, results kept as the examples name them.
const SMALL: &str = "collbench run --np 2 -b 8 -e 64K -n 2 -w 1";

fn example_plans() -> Vec<Runs> {
    let r = |command, setup: &str, statuses, writes, instead_of| Runs {
        command,
        setup: setup.to_string(),
        statuses,
        writes,
        instead_of,
    };
    let before_after = format!("{SMALL} -J before.json >/dev/null\n{SMALL} -J after.json >/dev/null\n");
    let two_three = format!(
        "{SMALL} -J run-2.json >/dev/null\ncollbench run --np 3 -b 8 -e 64K -n 2 -w 1 -J run-3.json >/dev/null\n"
    );
    let out = format!("{SMALL} -J out.json >/dev/null\n");
    vec![
        r("collbench preflight --np 2", "", &[0], &[], None),
        r(
            "collbench install-aliases /usr/local/bin",
            "",
            &[0],
            &["scratch-bin/all_reduce_perf"],
            Some("/usr/local/bin"),
        ),
        r("collbench run --np 2 ", "", &[0], &["out.json"], None),
        r("collbench info", "", &[0], &[], None),
        // An expectations file with absolute thresholds: this loaded machine may fail them.
        r(
            "collbench preflight --expect",
            &format!("{SMALL} -J before.json >/dev/null\n"),
            &[0, 1],
            &["preflight.xml", "after.json"],
            None,
        ),
        r("collbench pairwise --np 3", "", &[0, 1], &[], None),
        r("collbench p2p", "", &[0], &[], None),
        r(
            "collbench compare before.json after.json",
            &before_after,
            &[0, 1],
            &["diff.md"],
            None,
        ),
        r("collbench model run-2.json run-3.json", &two_three, &[0], &[], None),
        r("collbench plot out.json", &out, &[0], &["charts"], None),
        r("collbench selftest", "", &[0], &[], None),
        r(
            "mkdir -p ~/.local/share/bash-completion",
            "",
            &[0],
            &["home/.local/share/bash-completion/completions/collbench"],
            None,
        ),
        r("mkdir -p ~/.zfunc", "", &[0], &["home/.zfunc/_collbench"], None),
    ]
}

#[test]
fn man_page_examples_run_or_say_why_not() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = path_with_collbench();
    let examples = man_examples(root);
    // Thirteen pages; fewer examples means the parser lost them.
    assert!(
        examples.len() >= 15,
        "only {} examples found: {examples:?}",
        examples.len()
    );
    let plans = example_plans();
    let mut failures = Vec::new();
    let mut skipped = Vec::new();
    for cmd in &examples {
        // The longest matching prefix decides: `collbench run --np 2 ` runs, plain `collbench run` is run elsewhere.
        let plan = plans
            .iter()
            .filter(|p| cmd.starts_with(p.command) || cmd == p.command.trim_end())
            .max_by_key(|p| p.command.len());
        let not_here = EXAMPLES_NOT_HERE
            .iter()
            .filter(|(p, _)| cmd.starts_with(p))
            .max_by_key(|(p, _)| p.len());
        let plan = match (plan, not_here) {
            (Some(p), Some((n, _))) if p.command.len() > n.len() => p,
            (Some(p), None) => p,
            (_, Some((_, why))) => {
                skipped.push(format!("{cmd}: {why}"));
                continue;
            }
            (None, None) => {
                failures.push(format!(
                    "`{cmd}`: neither run here (example_plans) nor said why not (EXAMPLES_NOT_HERE)"
                ));
                continue;
            }
        };
        assert!(
            !cmd.contains("tests/run"),
            "the 30-minute suite is never run from here: {cmd}"
        );
        let dir = linked_scratch(root);
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut shown = cmd.clone();
        if let Some(system) = plan.instead_of {
            std::fs::create_dir_all(dir.path().join("scratch-bin")).unwrap();
            shown = shown.replace(system, "./scratch-bin");
        }
        let script = format!("{}{shown}\n", plan.setup);
        let out = Command::new("bash")
            .args(["-eu", "-o", "pipefail", "-c", &script])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("HOME", &home)
            .env("NO_COLOR", "1")
            .output()
            .expect("bash runs");
        let code = out.status.code().unwrap_or(-1);
        let missing: Vec<&&str> = plan.writes.iter().filter(|f| !dir.path().join(f).exists()).collect();
        if !plan.statuses.contains(&code) || !missing.is_empty() {
            failures.push(format!(
                "`{cmd}`: exit {code} (allowed {:?}), not written: {missing:?}\n--- script\n{script}--- stdout\n{}--- stderr\n{}",
                plan.statuses,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    // The skips are part of the test's report: what was not run, and why.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("man page examples not run here:\n  {}\n", skipped.join("\n  ")).as_bytes(),
    );
    assert!(
        failures.is_empty(),
        "{} man page examples failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
