//! The preflight's JSON document (`-J`, schema schema/collbench-preflight.schema.json): what one preflight
//! decided and what it measured, one type written by `-J` and read back by `--from-results`. Its entries are
//! the results file's ([`Entry`]), written flat as preflight files have always had them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::checks::PathInfo;
use super::evidence::HostEvidence;
use super::verdict::{Check, Verdict};
use crate::results::document::{flat_entries, Entry};

/// Version of the preflight JSON document; bump on any incompatible change.
pub const PREFLIGHT_SCHEMA_VERSION: u32 = 1;

/// Everything one preflight decided, and what it measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub collbench_preflight: u32,
    pub verdict: Verdict,
    pub strict: bool,
    pub exit_code: i32,
    pub nranks: usize,
    pub repeat: u32,
    /// The plan as printed.
    pub plan: Vec<String>,
    pub paths: Vec<PathInfo>,
    /// The smallest size of the bandwidth phase.
    pub bandwidth_from: u64,
    pub checks: Vec<Check>,
    /// What was measured and not judged, and why.
    pub notes: Vec<String>,
    /// The latency and bandwidth points, entries as `collbench run -J` writes them (so `collbench compare`
    /// and `--baseline` read this file too).
    #[serde(with = "flat_entries")]
    pub results: Vec<Entry>,
    /// The connectivity sweep's points, in the same form.
    #[serde(with = "flat_entries")]
    pub connectivity: Vec<Entry>,
    /// Every host during the collectives' phases: CPU busy and throttled, TCP retransmissions, the path's
    /// configuration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<HostEvidence>,
}

impl Report {
    /// Whether `doc` says it is a preflight document of this version (before reading the rest).
    pub fn is_this_version(doc: &Value) -> bool {
        #[derive(Deserialize)]
        struct Version {
            collbench_preflight: Option<u64>,
        }
        Version::deserialize(doc).ok().and_then(|v| v.collbench_preflight) == Some(u64::from(PREFLIGHT_SCHEMA_VERSION))
    }

    /// Reads a preflight document; the message says which field is wrong and how.
    pub fn read(doc: &Value) -> std::result::Result<Report, String> {
        Report::deserialize(doc).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_document_reads_back_as_written() {
        let mut r = super::super::render::tests::report();
        let rec =
            crate::results::testutil::record(crate::collective::Collective::AllReduce, 1 << 20, 10.0, 1.0, Some(0));
        r.results = crate::report::json::entries(std::slice::from_ref(&rec));
        r.connectivity = crate::report::json::entries(&[rec]);
        let v = serde_json::to_value(&r).unwrap();
        // Flat: the statistics inside the placement, no `collbench` object in the entry.
        assert!(v["results"][0]["out_of_place"]["ci95_us"].is_number(), "{v}");
        assert!(v["results"][0].get("collbench").is_none(), "{v}");
        assert!(Report::is_this_version(&v));
        let back = Report::read(&v).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), v);
        assert_eq!(back.results, r.results);
        let mut old = v.clone();
        old["collbench_preflight"] = 0.into();
        assert!(!Report::is_this_version(&old));
        let mut broken = v;
        broken["results"][0]["size"] = "big".into();
        assert!(Report::read(&broken)
            .unwrap_err()
            .contains("entry 0 is not a collbench result entry"));
    }
}
