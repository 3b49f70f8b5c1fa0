//! Reading back a results file (`collbench run -J`) for `compare`, `model` and `plot`: the file parsed into
//! its [`Document`], with errors (exit 2) that name the file and say what to give instead.

use std::path::Path;

use serde_json::Value;

pub use super::document::WHAT_TO_GIVE;
use super::document::{Document, Entry};
use super::record::SCHEMA_VERSION;
use crate::error::{Error, Result};

/// The largest results file read: a results file is parsed whole, and JSON takes many times its size in
/// memory. A run of every collective at 30 sizes over three paths with ten repeats writes about 10 MiB.
pub const MAX_RESULTS_BYTES: u64 = 64 << 20;

/// Reads and parses the results file at `path` (at most [`MAX_RESULTS_BYTES`]).
pub fn read(path: &Path) -> Result<Document> {
    let shown = path.display().to_string();
    let text = crate::input::read_to_string(path, MAX_RESULTS_BYTES).map_err(|e| {
        let what = match e {
            crate::input::ReadError::TooLarge { .. } => format!(
                "larger than {} MiB, the most a results file may hold (it is read whole); give a file \
                 `collbench run -J` wrote, or split the runs",
                MAX_RESULTS_BYTES >> 20
            ),
            // Its own advice is this one, less precise: said once.
            crate::input::ReadError::NotAFile { path, kind } => {
                format!("'{path}' is {kind}, not a regular file; give the path of a file `collbench run -J` wrote")
            }
            e => format!("{e}; give the path of a file `collbench run -J` wrote"),
        };
        Error::usage(&shown, format!("cannot read the results file: {what}"))
    })?;
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| Error::usage(&shown, format!("not JSON ({e}); {WHAT_TO_GIVE}")))?;
    parse(&doc, &shown)
}

/// A parsed results document; `source` names it in errors. A file of a newer schema than this collbench
/// reads is refused: its fields may mean what this version cannot know.
pub fn parse(doc: &Value, source: &str) -> Result<Document> {
    let d = Document::from_value(doc).map_err(|m| Error::usage(source, m))?;
    if let Some(v) = d
        .collbench
        .as_ref()
        .map(|c| c.schema_version)
        .filter(|v| *v > SCHEMA_VERSION)
    {
        return Err(Error::usage(
            source,
            format!(
                "results schema version {v}, newer than this collbench ({}) reads (version {SCHEMA_VERSION} and \
                 earlier); read it with the collbench that wrote it, or a newer one",
                env!("CARGO_PKG_VERSION")
            ),
        ));
    }
    Ok(d)
}

/// The `results` of `doc` (from `source`), refused when empty; `purpose` ends the message ("nothing to
/// fit").
pub fn results<'a>(doc: &'a Document, source: &str, purpose: &str) -> Result<&'a [Entry]> {
    if doc.results.is_empty() {
        return Err(Error::usage(
            source,
            format!("the file holds no results (the run measured no point); {purpose}"),
        ));
    }
    Ok(&doc.results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_unparsable_and_empty_files_are_named_with_what_to_give() {
        let dir = tempfile::tempdir().unwrap();
        let e = read(&dir.path().join("gone.json")).unwrap_err().to_string();
        assert!(
            e.contains("gone.json: cannot read the results file")
                && e.ends_with("give the path of a file `collbench run -J` wrote"),
            "{e}"
        );
        // A directory: what it is, and the advice once.
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("is a directory, not a regular file; give the path of a file `collbench run -J` wrote")
                && e.matches("give the path").count() == 1,
            "{e}"
        );
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, "{ nope").unwrap();
        let e = read(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.json: not JSON (") && e.ends_with(WHAT_TO_GIVE), "{e}");
        let doc = parse(&serde_json::json!({"results": []}), "r.json").unwrap();
        let e = results(&doc, "r.json", "nothing to fit").unwrap_err().to_string();
        assert_eq!(
            e,
            "r.json: the file holds no results (the run measured no point); nothing to fit"
        );
        let e = parse(&serde_json::json!({}), "r.json").unwrap_err().to_string();
        assert_eq!(e, format!("r.json: no `results` array; {WHAT_TO_GIVE}"));
        let doc = parse(&serde_json::json!({"results": [{"size": 8}]}), "r.json").unwrap();
        assert_eq!(results(&doc, "r.json", "x").unwrap().len(), 1);
    }

    #[test]
    fn a_newer_schema_and_a_file_beyond_the_bound_are_refused_naming_them() {
        let newer = serde_json::json!({"results": [], "collbench": {"schema_version": 99}});
        let e = parse(&newer, "r.json").unwrap_err().to_string();
        assert!(e.starts_with("r.json: results schema version 99, newer than"), "{e}");
        let current = serde_json::json!({"results": [], "collbench": {"schema_version": SCHEMA_VERSION}});
        assert!(parse(&current, "r.json").is_ok());
        // A sparse file: its size is checked before a byte is read.
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.json");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_RESULTS_BYTES + 1)
            .unwrap();
        let e = read(&big).unwrap_err().to_string();
        assert!(
            e.contains("big.json: cannot read the results file: larger than 64 MiB"),
            "{e}"
        );
    }
}
