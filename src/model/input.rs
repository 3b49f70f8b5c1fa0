//! The measured points a model is fitted to: read from results files (`collbench run -J`) or taken from the
//! records of the run in memory.

use std::path::Path;

#[cfg(test)]
use serde_json::Value;

use crate::collective::Collective;
use crate::error::{Error, Result};
use crate::results::document::{need, Document};
use crate::results::reader;
use crate::results::Record;

/// One measured point: the out-of-place time of one collective, algorithm, size and rank count on a path.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub path: String,
    pub collective: Collective,
    /// The algorithm as results name it (`ring`, `rec_doubling`, ...).
    pub algo: String,
    /// The size column: bytes of the larger buffer.
    pub size: u64,
    pub nranks: usize,
    /// Hosts the run's ranks were on.
    pub hosts: usize,
    /// The reported (slowest rank's) time, microseconds.
    pub time_us: f64,
    /// Where the point came from (a file name, or `this run`), for messages.
    pub source: String,
}

impl Sample {
    /// The point of one record of a run on `hosts` hosts.
    pub fn from_record(rec: &Record, hosts: usize, source: &str) -> Sample {
        Sample {
            // Names from a file reach the terminal: shown with control characters escaped.
            path: crate::error::escape(&rec.path).into_owned(),
            collective: rec.collective,
            algo: crate::error::escape(&rec.algo).into_owned(),
            size: rec.size,
            nranks: rec.nranks,
            hosts,
            time_us: rec.out_of_place.time_us,
            source: source.to_string(),
        }
    }
}

/// The points of `records`, a run on `hosts` hosts (for [`crate::model::predict_from_records`]).
pub fn from_records(records: &[Record], hosts: usize) -> Vec<Sample> {
    records
        .iter()
        .map(|r| Sample::from_record(r, hosts, "this run"))
        .collect()
}

/// Reads every result of a results file. Errors (exit 2) name the file and what is missing in it.
pub fn read_file(path: &Path) -> Result<Vec<Sample>> {
    samples(&reader::read(path)?, &path.display().to_string())
}

/// The samples of one parsed results document; `source` names it in errors.
#[cfg(test)]
fn parse(doc: &Value, source: &str) -> Result<Vec<Sample>> {
    samples(&reader::parse(doc, source)?, source)
}

fn samples(doc: &Document, source: &str) -> Result<Vec<Sample>> {
    let bad = |msg: String| Error::usage(source.to_string(), msg);
    let results = reader::results(doc, source, "nothing to fit")?;
    let hosts = doc.hosts();
    let mut out = Vec::with_capacity(results.len());
    for (i, r) in results.iter().enumerate() {
        let collective: Collective = need(r.collective.as_deref(), i, "collective")
            .map_err(bad)?
            .parse()
            .map_err(|e| bad(format!("results[{i}].collective: {e}")))?;
        let nranks = need(r.nranks, i, "nranks").map_err(bad)?;
        // A time of "nan" (written for a point without a number) is kept as NaN and skipped by the fit.
        let time_us = need(r.out_of_place().time, i, "out_of_place.time").map_err(bad)?;
        out.push(Sample {
            // Names from a file reach the terminal: shown with control characters escaped.
            path: crate::error::escape(&need(r.path.clone(), i, "path").map_err(bad)?).into_owned(),
            collective,
            algo: crate::error::escape(&need(r.algo.clone(), i, "algo").map_err(bad)?).into_owned(),
            size: need(r.size, i, "size").map_err(bad)?,
            nranks,
            // Files without the rank list are taken as one rank per host.
            hosts: if hosts.is_empty() { nranks } else { hosts.len() },
            time_us,
            source: source.to_string(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn doc(results: Value) -> Value {
        json!({
            "results": results,
            "collbench": {"run": {"ranks": [{"host": "a"}, {"host": "b"}, {"host": "b"}]}}
        })
    }

    #[test]
    fn reads_the_fields_the_model_needs() {
        let d = doc(json!([{
            "size": 1024, "collective": "all_gather", "path": "tcp@eth0", "algo": "bruck", "nranks": 3,
            "out_of_place": {"time": 12.5}, "in_place": {"time": 99.0}
        }]));
        let s = parse(&d, "x.json").unwrap();
        assert_eq!(
            s,
            vec![Sample {
                path: "tcp@eth0".into(),
                collective: Collective::AllGather,
                algo: "bruck".into(),
                size: 1024,
                nranks: 3,
                hosts: 2,
                time_us: 12.5,
                source: "x.json".into(),
            }]
        );
    }

    #[test]
    fn missing_pieces_are_named_with_the_file() {
        let e = parse(&json!({"version": 2}), "a.json").unwrap_err();
        assert!(e.to_string().starts_with("a.json: no `results`"), "{e}");
        assert_eq!(e.exit_code(), 2);
        let e = parse(&doc(json!([])), "b.json").unwrap_err();
        assert!(e.to_string().contains("b.json: the file holds no results"), "{e}");
        let e = parse(&doc(json!([{"size": 8, "collective": "all_reduce"}])), "c.json").unwrap_err();
        assert!(e.to_string().contains("c.json: results[0] has no `nranks`"), "{e}");
        let e = read_file(Path::new("/nonexistent/r.json")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/r.json: cannot read"), "{e}");
    }
}
