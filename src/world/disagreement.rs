//! The message naming every rank started with other options or another version than rank 0, field by field,
//! with the values as people read them.

use super::rendezvous::join_message::Join;

/// Names every rank whose version or options differ from rank 0's, and the fields that differ.
pub(crate) fn disagreement(joins: &[&Join]) -> Option<String> {
    let base = joins.first()?;
    let mut lines = Vec::new();
    for j in &joins[1..] {
        let mut fields = Vec::new();
        if j.version != base.version {
            fields.push(format!("version ({} vs {})", j.version, base.version));
        }
        if let (Some(a), Some(b)) = (j.consensus.as_object(), base.consensus.as_object()) {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                if a.get(k) != b.get(k) {
                    let show = |v: Option<&serde_json::Value>| v.map(human).unwrap_or_else(|| "unset".into());
                    fields.push(format!("{k} ({} vs {})", show(a.get(k)), show(b.get(k))));
                }
            }
        } else if j.consensus != base.consensus {
            fields.push("options".into());
        }
        if !fields.is_empty() {
            lines.push(format!(
                "rank {} (host {}) differs from rank 0 in: {}",
                j.rank,
                j.host,
                fields.join(", ")
            ));
        }
    }
    if lines.is_empty() {
        None
    } else {
        Some(format!(
            "ranks were started with different options: {}. Start every rank with the same command line and \
             the same collbench version",
            lines.join("; ")
        ))
    }
}

/// An agreed value as people read it: text without JSON's quotes (`30 s`), a list joined by commas, nothing as
/// `none`; anything else as JSON.
fn human(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "none".into(),
        Value::Array(items) if items.iter().all(|i| !(i.is_array() || i.is_object())) => {
            items.iter().map(human).collect::<Vec<_>>().join(",")
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::rendezvous::join_message::tests::join_msg;
    use serde_json::json;

    #[test]
    fn disagreement_names_ranks_and_fields() {
        let a = join_msg(0, json!({"iters": 20, "dtypes": ["float"]}));
        let b = join_msg(1, json!({"iters": 20, "dtypes": ["half"]}));
        let msg = disagreement(&[&a, &b]).unwrap();
        assert!(msg.contains("rank 1"), "{msg}");
        assert!(msg.contains("dtypes"), "{msg}");
        assert!(!msg.contains("iters"), "{msg}");
        assert!(disagreement(&[&a, &a.clone()]).is_none());
    }

    #[test]
    fn a_different_version_is_a_disagreement_naming_it() {
        let a = join_msg(0, json!({"iters": 20}));
        let b = Join {
            version: "0.2.0".into(),
            ..join_msg(1, json!({"iters": 20}))
        };
        let msg = disagreement(&[&a, &b]).unwrap();
        assert!(
            msg.contains("rank 1") && msg.contains("version (0.2.0 vs 0.1.0)"),
            "{msg}"
        );
    }
}
