//! Every command shown as runnable in README.md and docs/*.md runs as written.
//!
//! A fenced block whose info string is `sh runnable` is run with `bash -eu -o pipefail`, from the repository
//! root, with the built `collbench` first on PATH; it must exit 0, or with one of the codes listed as
//! `status=0,1` in the info string (for commands whose verdict is the machine's, such as `pairwise`). Blocks
//! of one file run in order, so a later block may read what an earlier one wrote. Blocks that need several
//! hosts are plain `sh` blocks and are not run here.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One runnable block: where it is, its text, the exit codes it may end with.
struct Block {
    file: PathBuf,
    line: usize,
    script: String,
    statuses: Vec<i32>,
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

#[test]
fn runnable_blocks_run_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_collbench"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();

    let all: Vec<Block> = documents(root).iter().flat_map(|f| blocks(f)).collect();
    // The README alone shows one per local subcommand; fewer means the marker was lost in an edit.
    assert!(all.len() >= 8, "only {} runnable blocks found", all.len());

    let mut failures = Vec::new();
    for block in &all {
        let out = Command::new("bash")
            .args(["-eu", "-o", "pipefail", "-c", &block.script])
            .current_dir(root)
            .env("PATH", &path)
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
                block.script,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} runnable blocks failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
