//! The layering that src/lib.rs's Layout doc states is the code's: every top-level module imports only from
//! modules in lower layers. The layers are read from the doc itself (its `# Layers` list), so the doc and
//! this check cannot drift apart; an import that goes sideways or up fails here, naming the file and line.
//! There are no exceptions.

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
