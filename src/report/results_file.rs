//! Reading back a results file (`collbench run -J`) for `compare`, `model` and `plot`: the JSON document
//! and its `results` array, with errors (exit 2) that name the file and say what to give instead.

use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};

/// What to give instead of a file that is not a results file.
pub const WHAT_TO_GIVE: &str = "expected a results file written by `collbench run -J`";

/// Reads and parses the results file at `path`.
pub fn read(path: &Path) -> Result<Value> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::usage(
            &shown,
            format!("cannot read the results file: {e}; give the path of a file `collbench run -J` wrote"),
        )
    })?;
    serde_json::from_str(&text).map_err(|e| Error::usage(&shown, format!("not JSON ({e}); {WHAT_TO_GIVE}")))
}

/// The `results` array of `doc` (from `source`), refused when missing or empty; `purpose` ends the message
/// of an empty one ("nothing to fit").
pub fn results<'a>(doc: &'a Value, source: &str, purpose: &str) -> Result<&'a [Value]> {
    let bad = |msg: String| Error::usage(source, msg);
    let results = doc
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| bad(format!("no `results` array; {WHAT_TO_GIVE}")))?;
    if results.is_empty() {
        return Err(bad(format!(
            "the file holds no results (the run measured no point); {purpose}"
        )));
    }
    Ok(results)
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
        let doc: Value = serde_json::json!({"results": []});
        let e = results(&doc, "r.json", "nothing to fit").unwrap_err().to_string();
        assert_eq!(
            e,
            "r.json: the file holds no results (the run measured no point); nothing to fit"
        );
        let e = results(&serde_json::json!({}), "r.json", "x").unwrap_err().to_string();
        assert_eq!(e, format!("r.json: no `results` array; {WHAT_TO_GIVE}"));
        let doc: Value = serde_json::json!({"results": [{"size": 8}]});
        assert_eq!(results(&doc, "r.json", "x").unwrap().len(), 1);
    }
}
