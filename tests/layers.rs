//! The layering that src/lib.rs's Layout doc states is the code's: every top-level module imports only from
//! modules in lower layers. The layers are read from the doc itself (its `# Layers` list), so the doc and
//! this check cannot drift apart; an import that goes sideways or up fails here, naming the file and line.
//! There are no exceptions. The same kind of check keeps each kind of path in one place: `PathKind`'s variants
//! are matched only in its own file and in the path module's one exhaustive match.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Module name -> layer number, from the numbered list under `# Layers` in src/lib.rs.
fn layers(lib: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let mut inside = false;
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else { continue };
        let doc = doc.trim();
        if doc.starts_with("# ") {
            inside = doc == "# Layers";
            continue;
        }
        if !inside {
            continue;
        }
        let Some((num, rest)) = doc.split_once(". ") else {
            continue;
        };
        let Ok(layer) = num.parse::<usize>() else { continue };
        // The modules are the backticked names before the first colon.
        let names = rest.split(':').next().unwrap_or("");
        for part in names.split('`').skip(1).step_by(2) {
            let name = part.trim_start_matches("mod@");
            assert!(
                out.insert(name.to_string(), layer).is_none(),
                "src/lib.rs: `{name}` is listed in two layers"
            );
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level modules named by `crate::NAME` paths in `code` (comments removed first), with line numbers.
fn imports(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in code.lines().enumerate() {
        let code = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push((i + 1, name));
            }
            rest = after;
        }
    }
    out
}

#[test]
fn every_module_imports_only_from_lower_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let layer = layers(&lib);
    assert!(layer.len() > 10, "src/lib.rs has no `# Layers` list: {layer:?}");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut wrong = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(root.join("src")).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "main" || top == "lib" {
            continue;
        }
        let Some(&mine) = layer.get(&top) else {
            wrong.push(format!(
                "src/{}: module `{top}` is in no layer of src/lib.rs",
                rel.display()
            ));
            continue;
        };
        for (line, name) in imports(&std::fs::read_to_string(f).unwrap()) {
            if name == top {
                continue;
            }
            match layer.get(&name) {
                None => wrong.push(format!("src/{}:{line}: `crate::{name}` is in no layer", rel.display())),
                Some(&theirs) if theirs >= mine => wrong.push(format!(
                    "src/{}:{line}: `{top}` (layer {mine}) imports `{name}` (layer {theirs})",
                    rel.display()
                )),
                Some(_) => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} import(s) against the layers:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn the_checker_reads_layers_and_finds_imports() {
    let lib = "//! # Layout\n//! x\n//! # Layers\n//! 1. `error`, `sizes`: bottom\n//! 2. [`bench`](mod@bench): top\n";
    let l = layers(lib);
    assert_eq!(l.get("error"), Some(&1));
    assert_eq!(l.get("sizes"), Some(&1));
    assert_eq!(l.get("bench"), Some(&2), "{l:?}");
    let found = imports("use crate::error::Result; // crate::bench\nlet x = crate::sizes::parse(crate::net::a);\n");
    assert_eq!(
        found,
        vec![
            (1, "error".to_string()),
            (2, "sizes".to_string()),
            (2, "net".to_string())
        ]
    );
}

/// The variants of `PathKind`, read from its definition in src/transport/path.rs.
fn path_kind_variants(def: &str) -> Vec<String> {
    let body = def
        .split("pub enum PathKind {")
        .nth(1)
        .and_then(|rest| rest.split("\n}").next())
        .expect("src/transport/path.rs defines `pub enum PathKind`");
    body.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let name: String = l.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

/// `PathKind::VARIANT` mentions in `code` (comments removed), as (line, variant).
fn variant_mentions(code: &str, variants: &[String]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in code.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for (at, _) in code.match_indices("PathKind::") {
            let after = &code[at + "PathKind::".len()..];
            let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            if variants.contains(&name) {
                out.push((i + 1, name));
            }
        }
    }
    out
}

/// A kind of path is one file in src/paths/ plus its variant: the kinds are matched (or built by variant) only
/// in src/transport/path.rs (the enum, its parsing and its traits) and in the one exhaustive match of
/// src/paths/mod.rs (`fn kind`, no catch-all arm, so a new kind does not compile until its file is written).
/// The options' unit tests may build values.
#[test]
fn path_kinds_are_matched_only_in_the_path_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let def = std::fs::read_to_string(root.join("src/transport/path.rs")).unwrap();
    let variants = path_kind_variants(&def);
    assert!(
        ["Tcp", "Mpi", "Rdma", "Nccl"]
            .iter()
            .all(|v| variants.iter().any(|x| x == v)),
        "{variants:?}"
    );
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let allowed = ["transport/path.rs", "paths/mod.rs", "options/tests.rs"];
    let mut wrong = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(root.join("src"))
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if allowed.contains(&rel.as_str()) {
            continue;
        }
        for (line, v) in variant_mentions(&std::fs::read_to_string(f).unwrap(), &variants) {
            wrong.push(format!("src/{rel}:{line}: PathKind::{v}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "a kind of path is matched outside src/paths/mod.rs's `fn kind` (give the kind's file or its traits in \
         src/transport/path.rs the job instead):\n{}",
        wrong.join("\n")
    );
    // In the path module, every variant is named once, in `fn kind`'s match, which has no catch-all.
    let paths = std::fs::read_to_string(root.join("src/paths/mod.rs")).unwrap();
    let body = paths
        .split("fn kind(kind: &PathKind)")
        .nth(1)
        .and_then(|rest| rest.split("\n}").next())
        .expect("src/paths/mod.rs has `fn kind(kind: &PathKind)`");
    assert!(!body.contains("_ =>"), "`fn kind` has a catch-all arm:\n{body}");
    let mut named: Vec<String> = variant_mentions(&paths, &variants)
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    let in_kind: Vec<String> = variant_mentions(body, &variants).into_iter().map(|(_, v)| v).collect();
    named.sort();
    let mut want = variants.clone();
    want.sort();
    assert_eq!(named, want, "src/paths/mod.rs names each kind once, in `fn kind`");
    assert_eq!(in_kind.len(), variants.len(), "`fn kind` matches every kind: {body}");
}

#[test]
fn the_path_kind_checker_reads_variants_and_mentions() {
    let def = "pub enum PathKind {\n    /// doc\n    Tcp(Option<String>),\n    Mpi,\n    Rdma { device: String, port: u8 },\n}\n";
    let v = path_kind_variants(def);
    assert_eq!(v, ["Tcp", "Mpi", "Rdma"]);
    let code =
        "let a = PathKind::Mpi; // PathKind::Tcp\nlet b = PathKind::default();\nmatches!(p, PathKind::Rdma { .. })\n";
    assert_eq!(
        variant_mentions(code, &v),
        vec![(1, "Mpi".to_string()), (3, "Rdma".to_string())]
    );
}

/// Whether `rel` (a path under src/) may read the command line's types: the clap definitions themselves, the
/// subcommands' entry points, the docs generator, and the options parts (`options/`, each module's
/// `options.rs`), which turn flags into typed options naming the flag.
fn may_read_cli(rel: &str) -> bool {
    ["cli/", "commands/", "docgen/", "options/"]
        .iter()
        .any(|p| rel.starts_with(p))
        || rel.ends_with("/options.rs")
        || rel == "lib.rs"
}

/// The lines of `code` before its `#[cfg(test)]` module that name `crate::cli`, comments removed.
fn cli_mentions(code: &str) -> Vec<usize> {
    imports(code.split("#[cfg(test)]").next().unwrap_or(""))
        .into_iter()
        .filter(|(_, name)| name == "cli")
        .map(|(line, _)| line)
        .collect()
}

#[test]
fn only_the_options_parts_read_the_command_lines_types() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(root.join("src")).unwrap().to_string_lossy().into_owned();
        if may_read_cli(&rel) {
            continue;
        }
        let code = std::fs::read_to_string(f).unwrap();
        bad.extend(cli_mentions(&code).into_iter().map(|l| format!("src/{rel}:{l}")));
    }
    assert!(
        bad.is_empty(),
        "the command line's types are read outside the options parts (give the code typed options instead):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_cli_checker_sees_code_and_skips_tests_and_comments() {
    assert_eq!(cli_mentions("use crate::cli::RunArgs;\nfn f() {}\n"), vec![1]);
    assert_eq!(cli_mentions("// crate::cli::RunArgs\nfn f() {}\n"), Vec::<usize>::new());
    assert_eq!(
        cli_mentions("fn f() {}\n#[cfg(test)]\nmod tests { use crate::cli::RunArgs; }\n"),
        Vec::<usize>::new()
    );
    assert!(may_read_cli("report/options.rs") && may_read_cli("cli/run.rs"));
    assert!(!may_read_cli("report/json.rs") && !may_read_cli("validate/preflight/decide.rs"));
}
