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
