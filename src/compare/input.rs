//! Reading a results file (`collbench run -J`) into its points, whole-sweep repeats combined.

use std::path::Path;

use crate::error::{Error, Result};
use crate::report::paths_compared::{combine_sweeps, Estimate, Sweep};
use crate::results::document::{need, Document, Entry};
use crate::results::reader;

/// What identifies a point across two runs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub path: String,
    pub collective: String,
    pub dtype: String,
    pub redop: String,
    pub size: u64,
}

/// One point of one file: its key, rank count and its sweeps combined.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub key: Key,
    pub nranks: u64,
    pub est: Estimate,
}

/// Reads and parses one results file; errors (exit 2) name the file and say what to do.
pub fn read(path: &Path) -> Result<Vec<Point>> {
    points(&reader::read(path)?, &path.display().to_string())
}

/// [`read`], refusing a file whose run stopped before its plan was done unless `allow_incomplete`: its missing
/// points would read as points not measured, and its last ones may be the failure's.
pub fn read_for_compare(path: &Path, allow_incomplete: bool) -> Result<Vec<Point>> {
    let source = path.display().to_string();
    let doc = reader::read(path)?;
    if doc.collbench.as_ref().is_some_and(|c| !c.complete) && !allow_incomplete {
        return Err(Error::usage(
            &source,
            format!(
                "the run that wrote it stopped before its plan was done (`complete: false`, {} points measured); \
                 compare complete runs, or give --allow-incomplete to compare the points it has",
                doc.results.len()
            ),
        ));
    }
    points(&doc, &source)
}

fn points(doc: &Document, source: &str) -> Result<Vec<Point>> {
    of_entries(reader::results(doc, source, "nothing to compare")?, source)
}

/// The points of results entries (a preflight's), in first-seen order; `source` names them in errors.
pub fn of_entries(results: &[Entry], source: &str) -> Result<Vec<Point>> {
    // Each point's sweeps, in first-seen order, with the repeats already taken.
    let mut groups: Vec<(Key, u64, Vec<u64>, Vec<Sweep>)> = Vec::new();
    for (i, r) in results.iter().enumerate() {
        let bad = |msg: String| Error::usage(source, msg);
        let oop = r.out_of_place();
        let key = Key {
            path: need(r.path.clone(), i, "path").map_err(bad)?,
            collective: need(r.collective.clone(), i, "collective").map_err(bad)?,
            dtype: need(r.dtype.clone(), i, "type").map_err(bad)?,
            redop: need(r.redop.clone(), i, "redop").map_err(bad)?,
            size: need(r.size, i, "size").map_err(bad)?,
        };
        let nranks = need(r.nranks, i, "nranks").map_err(bad)? as u64;
        // Files older than `--repeat` hold one sweep.
        let repeat = u64::from(r.repeat.unwrap_or(0));
        // "nan" (a point without a number) stays NaN: such a point is shown but never called a change.
        let sweep = Sweep {
            time_us: need(oop.time, i, "out_of_place.time").map_err(bad)?,
            // Without an interval nothing can be told from the noise.
            ci95_us: oop.ci95_us.filter(|c| !c.is_nan()).unwrap_or(f64::INFINITY),
            busbw: need(oop.bus_bw, i, "out_of_place.bus_bw").map_err(bad)?,
        };
        match groups.iter_mut().find(|g| g.0 == key && g.1 == nranks) {
            // Sizes that round to the same bytes repeat a point within one sweep: the first one counts.
            Some(g) if g.2.contains(&repeat) => {}
            Some(g) => {
                g.2.push(repeat);
                g.3.push(sweep);
            }
            None => groups.push((key, nranks, vec![repeat], vec![sweep])),
        }
    }
    Ok(groups
        .into_iter()
        .map(|(key, nranks, _, sweeps)| Point {
            key,
            nranks,
            est: combine_sweeps(&sweeps),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    /// The points of one parsed results document, in first-seen order; `source` names it in errors.
    fn parse(doc: &Value, source: &str) -> Result<Vec<Point>> {
        points(&reader::parse(doc, source)?, source)
    }

    fn entry(size: u64, repeat: u32, time: f64, ci: f64) -> Value {
        json!({"path": "tcp@lo", "collective": "all_reduce", "type": "float", "redop": "sum", "size": size,
               "nranks": 2, "repeat": repeat,
               "out_of_place": {"time": time, "bus_bw": 1000.0 / time, "ci95_us": ci}})
    }

    #[test]
    fn repeats_of_a_point_are_combined_and_sizes_kept_apart() {
        let doc = json!({"results": [entry(8, 0, 100.0, 1.0), entry(16, 0, 50.0, 1.0), entry(8, 1, 110.0, 1.0)]});
        let p = parse(&doc, "a.json").unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].key.size, p[0].est.repeats, p[0].est.time_us), (8, 2, 105.0));
        assert_eq!((p[1].key.size, p[1].est.repeats), (16, 1));
    }

    #[test]
    fn nan_and_missing_intervals_are_kept_as_unknown() {
        let mut e = entry(8, 0, 1.0, 1.0);
        e["out_of_place"]["time"] = json!("nan");
        e["out_of_place"].as_object_mut().unwrap().remove("ci95_us");
        let p = parse(&json!({"results": [e]}), "a.json").unwrap();
        assert!(p[0].est.time_us.is_nan());
        assert!(p[0].est.ci95_us.is_infinite());
    }

    #[test]
    fn bad_documents_name_the_file_and_the_missing_piece() {
        let e = parse(&json!({"version": 2}), "a.json").unwrap_err();
        assert!(e.to_string().starts_with("a.json: no `results`"), "{e}");
        assert_eq!(e.exit_code(), 2);
        let e = parse(&json!({"results": []}), "b.json").unwrap_err();
        assert!(e.to_string().contains("b.json: the file holds no results"), "{e}");
        let mut x = entry(8, 0, 1.0, 1.0);
        x["out_of_place"].as_object_mut().unwrap().remove("time");
        let e = parse(&json!({"results": [x]}), "c.json").unwrap_err();
        assert!(
            e.to_string().contains("c.json: results[0] has no `out_of_place.time`"),
            "{e}"
        );
        let e = read(Path::new("/nonexistent/r.json")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/r.json: cannot read"), "{e}");
    }
}
