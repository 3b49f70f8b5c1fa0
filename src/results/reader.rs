//! Reading back a results file (`collbench run -J`) for `compare`, `model` and `plot`: the file parsed into
//! its [`Document`], with errors (exit 2) that name the file and say what to give instead.

use std::path::Path;

use serde_json::Value;

pub use super::document::WHAT_TO_GIVE;
use super::document::{Document, Entry};
use crate::error::{Error, Result};

/// Reads and parses the results file at `path`.
pub fn read(path: &Path) -> Result<Document> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::usage(
            &shown,
            format!("cannot read the results file: {e}; give the path of a file `collbench run -J` wrote"),
        )
    })?;
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| Error::usage(&shown, format!("not JSON ({e}); {WHAT_TO_GIVE}")))?;
    parse(&doc, &shown)
}

/// A parsed results document; `source` names it in errors.
pub fn parse(doc: &Value, source: &str) -> Result<Document> {
    Document::from_value(doc).map_err(|m| Error::usage(source, m))
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
}
