//! The committed reference pages (docs/man/*.1, docs/options.md) are what this build generates from the clap
//! definitions. When a flag or its help changes, regenerate them with
//! `COLLBENCH_WRITE_DOCS=1 cargo test --test docgen` and commit the result.

use std::path::Path;

use collbench::docgen::{pages, write_pages, REGENERATE};

#[test]
fn committed_reference_pages_match_this_build() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("COLLBENCH_WRITE_DOCS").is_some() {
        write_pages(root).unwrap();
    }
    let mut stale = Vec::new();
    for (rel, want) in pages().unwrap() {
        match std::fs::read(root.join(&rel)) {
            Ok(have) if have == want => {}
            Ok(_) => stale.push(format!("{} differs", rel.display())),
            Err(e) => stale.push(format!("{}: {e}", rel.display())),
        }
    }
    // A page for a subcommand that no longer exists is stale too.
    let generated: Vec<_> = pages().unwrap().into_iter().map(|(p, _)| root.join(p)).collect();
    for entry in std::fs::read_dir(root.join("docs/man")).into_iter().flatten().flatten() {
        if !generated.contains(&entry.path()) {
            stale.push(format!(
                "{} is not generated any more; delete it",
                entry.path().display()
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "reference pages out of date with the clap definitions:\n  {}\nregenerate with: {REGENERATE}",
        stale.join("\n  ")
    );
}

/// Names that appear in src/ as whole string literals shaped like environment variables but that collbench
/// does not read: it only names them in advice (the loader's and the CUDA driver's own variables).
const NAMED_NOT_READ: [&str; 2] = ["LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES"];

/// Every string literal under src/ that names an environment variable the code reads: a whole literal
/// shaped like one (`SLURM_PROCID`, `OMPI_MCA_orte_ess_jobid`), or any upper-case literal passed straight
/// to `var(`, `var_os(` or a `get(` closure (`RANK`). `env!(...)` (compile time) does not count.
fn names_read_in(src: &str) -> Vec<String> {
    let shaped = regex::Regex::new(r"^(?:[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|OMPI_MCA_[a-z0-9_]+)$").unwrap();
    let literal = regex::Regex::new(r#"(env!\(|var\(|var_os\(|get\()?"([A-Za-z0-9_]+)""#).unwrap();
    let mut names = Vec::new();
    for c in literal.captures_iter(src) {
        let (call, name) = (c.get(1).map(|m| m.as_str()), &c[2]);
        let upper = name.chars().all(|ch| ch.is_ascii_uppercase() || ch == '_') && name.len() > 2;
        let counts = match call {
            Some("env!(") => false,
            Some(_) => upper || shaped.is_match(name),
            None => shaped.is_match(name),
        };
        if counts && !NAMED_NOT_READ.contains(&name) {
            names.push(name.to_string());
        }
    }
    names
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_environment_variable_the_code_reads_is_documented_and_no_other() {
    use collbench::docgen::environment::VARS;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let table: Vec<&str> = VARS.iter().map(|v| v.name).collect();
    let mut missing = Vec::new();
    let mut all_text = String::new();
    for f in &files {
        if f.ends_with("src/docgen/environment.rs") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        // Unit tests (after `#[cfg(test)]`) name what they like: fixtures, not the program's reads.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for name in names_read_in(code) {
            if !table.contains(&name.as_str()) {
                missing.push(format!("{name} (read in {})", f.strip_prefix(root).unwrap().display()));
            }
        }
        all_text.push_str(&text);
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "variables read by the code but not in src/docgen/environment.rs:\n  {}",
        missing.join("\n  ")
    );
    let stale: Vec<_> = table.iter().filter(|n| !all_text.contains(**n)).collect();
    assert!(stale.is_empty(), "listed but no code under src/ names them: {stale:?}");
    // The scanner itself finds the forms the code uses.
    let probe = r#"std::env::var("RANK"); get("MASTER_ADDR"); const X: &str = "COLLBENCH_SEED"; env!("CARGO_PKG_VERSION"); "PASS""#;
    assert_eq!(names_read_in(probe), ["RANK", "MASTER_ADDR", "COLLBENCH_SEED"]);
}

#[test]
fn man_pages_have_the_extra_sections_and_no_markdown_backticks() {
    use collbench::docgen::environment::VARS;
    for (rel, bytes) in pages().unwrap() {
        if rel.extension().map_or(true, |x| x != "1") {
            continue;
        }
        let roff = String::from_utf8(bytes).unwrap();
        for section in [
            ".SH \"EXIT STATUS\"",
            ".SH ENVIRONMENT",
            ".SH EXAMPLES",
            ".SH \"SEE ALSO\"",
        ] {
            assert!(roff.contains(section), "{} has no {section}", rel.display());
        }
        for v in VARS {
            assert!(
                roff.contains(&format!("\\fB{}\\fR", v.name.replace('-', "\\-"))),
                "{}: {}",
                rel.display(),
                v.name
            );
        }
        let ticks: Vec<_> = roff.lines().filter(|l| l.contains('`')).collect();
        assert!(
            ticks.is_empty(),
            "{}: Markdown backticks in roff: {ticks:?}",
            rel.display()
        );
    }
}

#[test]
fn the_readme_lists_every_exit_status_of_the_man_pages() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    for (code, _) in collbench::docgen::sections::EXIT_STATUS {
        let row = format!("| {code} |");
        let nccl = *code == "7" && readme.contains("exits as it does (7 on wrong data");
        assert!(readme.contains(&row) || nccl, "README's exit table has no row {row}");
    }
}
