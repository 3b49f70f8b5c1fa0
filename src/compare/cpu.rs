//! Whether either run of a comparison was CPU-bound: the `collbench.summary.paths` cost entries of a results
//! file (`cpu_limited`: a host's CPUs 85% busy or its ranks throttled by a quota). A difference measured on
//! saturated CPUs says more about the CPUs than about the network, so the verdict says so.

use std::path::Path;

use crate::results::document::Document;

/// One line per CPU-bound path of the results document `doc` (read as `file`).
pub fn bound_paths(doc: &Document, file: &str) -> Vec<String> {
    let Some(summary) = doc.collbench.as_ref().and_then(|c| c.summary.as_ref()) else {
        return Vec::new();
    };
    summary
        .paths
        .iter()
        .filter(|p| p.cpu_limited)
        .map(|p| {
            let mut why = Vec::new();
            if let Some(b) = p.host_busy_pct {
                why.push(format!("CPUs {b:.0}% busy"));
            }
            if let Some(c) = p.host_cpu_pct {
                why.push(format!(
                    "collbench's ranks {c:.0}% of {}'s CPUs",
                    p.busiest_host.as_deref().unwrap_or("a host")
                ));
            }
            if let (Some(s), Some(n)) = (p.throttled_s, p.throttled_periods) {
                if n > 0 {
                    why.push(format!("throttled {s:.2} s in {n} periods"));
                }
            }
            format!(
                "{file}: {} was CPU-bound ({})",
                p.path.as_deref().unwrap_or("?"),
                why.join(", ")
            )
        })
        .collect()
}

/// The CPU-bound paths of both files (unreadable files say nothing: the comparison already read them).
pub fn saturation(old: &Path, new: &Path) -> Vec<String> {
    let read = |p: &Path| -> Vec<String> {
        crate::results::reader::read(p)
            .map(|d| bound_paths(&d, &p.display().to_string()))
            .unwrap_or_default()
    };
    let mut v = read(old);
    v.extend(read(new));
    v
}

/// The verdict's sentence about the CPUs, when either run was CPU-bound.
pub fn verdict_line(lines: &[String], regressed: bool) -> Option<String> {
    if lines.is_empty() {
        return None;
    }
    Some(format!(
        "CPU saturation: {}; {}",
        lines.join("; "),
        if regressed {
            "the regressions may be the CPUs', not the network's: compare runs on idle hosts before blaming the network"
        } else {
            "the figures measure the CPUs as much as the network"
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cpu_bound_path_is_named_with_why() {
        let doc = Document::from_value(&json!({"results": [], "collbench": {"summary": {"paths": [
            {"path": "tcp@eth0", "cpu_limited": true, "host_busy_pct": 97.0, "host_cpu_pct": 60.0,
             "busiest_host": "h1", "throttled_s": 0.0, "throttled_periods": 0},
            {"path": "tcp@lo", "cpu_limited": false}
        ]}}}))
        .unwrap();
        let v = bound_paths(&doc, "new.json");
        assert_eq!(v.len(), 1);
        assert!(
            v[0].starts_with("new.json: tcp@eth0 was CPU-bound (CPUs 97% busy"),
            "{v:?}"
        );
        let l = verdict_line(&v, true).unwrap();
        assert!(
            l.starts_with("CPU saturation: ") && l.contains("may be the CPUs'"),
            "{l}"
        );
        assert_eq!(verdict_line(&[], true), None);
        let none = Document::from_value(&json!({"results": []})).unwrap();
        assert!(bound_paths(&none, "x").is_empty());
    }
}
