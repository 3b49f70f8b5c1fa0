//! `--algo-model FILE`: each point's algorithm from a fitted alpha-beta model (the JSON `collbench model -J`
//! writes) instead of the fixed size thresholds. Per path kind (`tcp`, `rdma`), the model's fitted costs
//! price every algorithm the collective can run at the point's size and rank count with the forms of
//! [`super::cost`]; the cheapest replaces the threshold rule's pick only where the model prices that pick
//! too and something is strictly cheaper. Anything the model cannot price keeps the threshold rule, so a
//! model never makes a choice worse informed than the default.
//!
//! Every rank must pick alike: the picks depend only on the table (which ranks agree on, as part of the
//! options), the collective, the size and the rank count.

use serde::{Deserialize, Serialize, Serializer};

use super::cost::{algo_named, coeffs};
use super::pipeline::{self, RingCost};
use super::Algo;
use crate::collective::Collective;

/// One algorithm's fitted costs on one path.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AlgoCost {
    #[serde(serialize_with = "algo_name")]
    pub algo: Algo,
    /// Microseconds per call, whatever its steps (0 where the model did not fit one).
    pub call_us: f64,
    /// Microseconds per message step.
    pub alpha_us: f64,
    /// Microseconds per byte on the busiest link.
    pub beta_us_per_byte: f64,
}

fn algo_name<S: Serializer>(a: &Algo, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(a.name())
}

/// The fitted costs of one kind of path.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CostTable {
    /// The kind of path (`tcp`, `rdma`) the fit was made on.
    pub kind: String,
    /// The path as the model file names it (`tcp@eth0`).
    pub fitted_on: String,
    pub algos: Vec<AlgoCost>,
    /// Microseconds per byte reduced.
    pub gamma_us_per_byte: f64,
    /// The plain ring's chunk (`--chunk`), the largest `ring_pipelined` cuts: an option of the run, not of
    /// the file.
    #[serde(skip)]
    pub ring_chunk: usize,
}

impl CostTable {
    /// The predicted time of `coll` by `algo` on `p` ranks at `n` bytes (the results' size column), or
    /// `None` when this table has no usable costs for `algo`.
    pub fn predict_us(&self, coll: Collective, algo: Algo, p: usize, n: u64) -> Option<f64> {
        if algo == Algo::RingPipelined {
            // Priced from the ring's costs: the same steps and bytes, cut into chunks.
            let ring = self.algos.iter().find(|a| a.algo == Algo::Ring)?;
            let t = pipeline::predict_us(coll, p, n, self.ring_chunk, &self.ring_cost()?)?;
            return Some(t + if p > 1 { ring.call_us } else { 0.0 });
        }
        let cost = self.algos.iter().find(|a| a.algo == algo)?;
        let k = coeffs(coll, algo, p, n as f64)?;
        Some(k.time(cost.alpha_us, cost.beta_us_per_byte, self.gamma_us_per_byte) + cost.call_us * k.calls())
    }

    /// The ring's fitted costs, which size `ring_pipelined`'s chunk; `None` where the ring was not fitted.
    pub fn ring_cost(&self) -> Option<RingCost> {
        let ring = self.algos.iter().find(|a| a.algo == Algo::Ring)?;
        Some(RingCost {
            alpha_us: ring.alpha_us,
            beta_us_per_byte: ring.beta_us_per_byte,
            gamma_us_per_byte: self.gamma_us_per_byte,
        })
    }

    /// The algorithm for `coll` at `n` bytes on `p` ranks, given `default`, the threshold rule's pick: the
    /// cheapest algorithm `coll` can run if it is strictly cheaper than `default`; `default` when the table
    /// cannot price it, when nothing beats it, or on a tie. Among equally cheap others, the first in
    /// [`Algo::available`]'s order wins, so the pick never depends on anything but the arguments.
    pub fn pick(&self, coll: Collective, p: usize, n: u64, default: Algo) -> Algo {
        let Some(base) = self.predict_us(coll, default, p, n) else {
            return default;
        };
        let mut best = (default, base);
        for &algo in Algo::available(coll) {
            if let Some(t) = self.predict_us(coll, algo, p, n) {
                if t < best.1 {
                    best = (algo, t);
                }
            }
        }
        best.0
    }
}

/// The tables of a model file, one per kind of path, and where they came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CostModel {
    /// The file it was read from, as given.
    pub source: String,
    /// `sha256:` and the hex SHA-256 of the file's text: which model it was, whatever the file became since.
    pub digest: String,
    pub tables: Vec<CostTable>,
}

/// `sha256:` and the lowercase hex SHA-256 of `text`.
fn digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let hex: String = Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// The parts of `collbench model`'s JSON read here.
#[derive(Deserialize)]
struct ModelDoc {
    schema: Option<String>,
    fits: Vec<FitDoc>,
}

#[derive(Deserialize)]
struct FitDoc {
    path: String,
    algos: Vec<AlgoDoc>,
    gamma_us_per_byte: ParamDoc,
}

#[derive(Deserialize)]
struct AlgoDoc {
    algo: String,
    /// Absent from files written before the per-call term.
    #[serde(default)]
    call_us: Option<ParamDoc>,
    alpha_us: ParamDoc,
    beta_us_per_byte: ParamDoc,
}

#[derive(Deserialize)]
struct ParamDoc {
    value: f64,
    #[serde(default)]
    held: Option<String>,
}

impl ParamDoc {
    /// The value, unless the fit said it describes nothing (negative beyond its noise) or it is not finite.
    fn usable(&self) -> Option<f64> {
        (self.held.as_deref() != Some("negative") && self.value.is_finite()).then_some(self.value.max(0.0))
    }
}

/// The schema `collbench model` writes.
pub const MODEL_SCHEMA: &str = "collbench-model/1";

impl CostModel {
    /// Parses the JSON `collbench model -J` wrote (`source` names it in errors). An algorithm whose alpha
    /// or beta the fit could not use (held as negative) is left out, so the threshold rule keeps its
    /// points. Two fits of one kind of path (`tcp@eth0` and `tcp@eth1`) are refused: the ranks' interface
    /// names differ, so only the kind can choose, and it would be ambiguous.
    pub fn parse(text: &str, source: &str) -> std::result::Result<CostModel, String> {
        let doc: ModelDoc = serde_json::from_str(text)
            .map_err(|e| format!("'{source}' is not a model file `collbench model -J` wrote ({e})"))?;
        if let Some(s) = doc.schema.as_deref().filter(|s| *s != MODEL_SCHEMA) {
            return Err(format!("'{source}' has schema '{s}', expected '{MODEL_SCHEMA}'"));
        }
        let mut tables: Vec<CostTable> = Vec::new();
        for fit in doc.fits {
            let kind = fit.path.split('@').next().unwrap_or("").to_string();
            if let Some(other) = tables.iter().find(|t| t.kind == kind) {
                return Err(format!(
                    "'{source}' fits two {kind} paths ({} and {}); fit one per kind of path \
                     (`collbench model` on the results of one of them)",
                    other.fitted_on, fit.path
                ));
            }
            let algos = fit
                .algos
                .iter()
                .filter_map(|a| {
                    Some(AlgoCost {
                        algo: algo_named(&a.algo)?,
                        // A per-call cost held as negative leaves the steps' alpha fitted without it.
                        call_us: a.call_us.as_ref().and_then(ParamDoc::usable).unwrap_or(0.0),
                        alpha_us: a.alpha_us.usable()?,
                        beta_us_per_byte: a.beta_us_per_byte.usable()?,
                    })
                })
                .collect();
            tables.push(CostTable {
                kind,
                fitted_on: fit.path,
                algos,
                gamma_us_per_byte: fit.gamma_us_per_byte.usable().unwrap_or(0.0),
                ring_chunk: crate::defaults::CHUNK_BYTES,
            });
        }
        if tables.is_empty() {
            return Err(format!("'{source}' holds no fitted path"));
        }
        Ok(CostModel {
            source: source.to_string(),
            digest: digest(text),
            tables,
        })
    }

    /// This model with `ring_pipelined` cutting at most `chunk` bytes (`--chunk`).
    pub fn with_ring_chunk(mut self, chunk: usize) -> CostModel {
        for t in &mut self.tables {
            t.ring_chunk = chunk;
        }
        self
    }

    /// The table for the path named `path` (`tcp@eth0`, `rdma@mlx5_0`): the one fitted on its kind.
    pub fn table(&self, path: &str) -> Option<&CostTable> {
        let kind = path.split('@').next().unwrap_or("");
        self.tables.iter().find(|t| t.kind == kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(costs: &[(Algo, f64, f64)]) -> CostTable {
        CostTable {
            kind: "tcp".into(),
            fitted_on: "tcp@eth0".into(),
            algos: costs
                .iter()
                .map(|&(algo, alpha_us, beta_us_per_byte)| AlgoCost {
                    algo,
                    call_us: 0.0,
                    alpha_us,
                    beta_us_per_byte,
                })
                .collect(),
            gamma_us_per_byte: 0.0,
            ring_chunk: crate::defaults::CHUNK_BYTES,
        }
    }

    #[test]
    fn the_lowest_predicted_time_wins() {
        // Bruck: 3 steps on 8 ranks at 100 us; ring: 7 steps at 10 us; same bytes, Bruck's beta higher.
        let t = table(&[(Algo::Ring, 10.0, 0.001), (Algo::Bruck, 100.0, 0.002)]);
        let ag = Collective::AllGather;
        // 8 KiB: ring 70 + 7 = 77 us, Bruck 300 + 14 = 314 us: the ring, though the default says Bruck.
        assert_eq!(t.predict_us(ag, Algo::Ring, 8, 8192).unwrap().round(), 77.0);
        assert_eq!(t.pick(ag, 8, 8192, Algo::Bruck), Algo::Ring);
        assert_eq!(t.pick(ag, 8, 8192, Algo::Ring), Algo::Ring);
        // With Bruck's steps cheap, Bruck wins at a small size whatever the default.
        let t = table(&[(Algo::Ring, 100.0, 0.001), (Algo::Bruck, 10.0, 0.001)]);
        assert_eq!(t.pick(ag, 8, 8192, Algo::Ring), Algo::Bruck);
        // At 64 MiB the bytes dominate, and Bruck's 3 steps beat the plain ring's 7 (equal betas); but the ring
        // cut into chunks hides its steps behind its bytes, which Bruck cannot.
        assert!(t.predict_us(ag, Algo::Bruck, 8, 64 << 20) < t.predict_us(ag, Algo::Ring, 8, 64 << 20));
        assert_eq!(t.pick(ag, 8, 64 << 20, Algo::Ring), Algo::RingPipelined);
        let bytes = 7.0 / 8.0 * (64 << 20) as f64 * 0.001;
        assert_eq!(t.predict_us(ag, Algo::RingPipelined, 8, 64 << 20), Some(bytes));
    }

    #[test]
    fn ties_and_unpriced_algorithms_keep_the_threshold_rules_pick() {
        let ar = Collective::AllReduce;
        // Identical costs for ring and halving-doubling on 2 ranks: the same steps and bytes, a tie; at 8 KiB
        // the segments are too small to cut, so the pipelined ring ties too.
        let t = table(&[(Algo::Ring, 5.0, 0.001), (Algo::HalvingDoubling, 5.0, 0.001)]);
        let at = |a| t.predict_us(ar, a, 2, 8 << 10);
        assert_eq!(at(Algo::Ring), at(Algo::HalvingDoubling));
        assert_eq!(at(Algo::Ring), at(Algo::RingPipelined));
        assert_eq!(t.pick(ar, 2, 8 << 10, Algo::HalvingDoubling), Algo::HalvingDoubling);
        assert_eq!(t.pick(ar, 2, 8 << 10, Algo::Ring), Algo::Ring);
        // At 1 MiB, cut in two, it is strictly cheaper and wins whatever the default.
        assert!(t.predict_us(ar, Algo::RingPipelined, 2, 1 << 20) < t.predict_us(ar, Algo::Ring, 2, 1 << 20));
        assert_eq!(t.pick(ar, 2, 1 << 20, Algo::HalvingDoubling), Algo::RingPipelined);
        // The default is not priced: the model cannot say it is beaten.
        let t = table(&[(Algo::Ring, 0.0, 0.0)]);
        assert_eq!(t.pick(ar, 8, 1024, Algo::RecDoubling), Algo::RecDoubling);
        // An algorithm the collective does not run is never picked, however cheap.
        let t = table(&[(Algo::Ring, 50.0, 0.01), (Algo::Tree, 0.0, 0.0)]);
        assert_eq!(t.pick(Collective::AllGather, 8, 1024, Algo::Ring), Algo::Ring);
        // An empty table changes nothing.
        assert_eq!(table(&[]).pick(ar, 8, 1024, Algo::RecDoubling), Algo::RecDoubling);
    }

    #[test]
    fn every_rank_given_the_same_inputs_picks_the_same() {
        let text = model_json("tcp@eth0", "-1.0", "\"held\": \"negative\", ");
        let m = CostModel::parse(&text, "m.json").unwrap();
        // Parsing is a function of the text: another rank's copy gives an equal table, hence equal picks.
        let again = CostModel::parse(&text, "m.json").unwrap();
        assert_eq!(m, again);
        let t = m
            .table("tcp@eth7")
            .expect("looked up by the kind of path, not the interface");
        let t2 = again.table("tcp@ens1").unwrap();
        for coll in Collective::ALL {
            for p in [2usize, 3, 4, 7, 8, 16] {
                for n in [8u64, 4096, 64 << 10, 1 << 20, 16 << 20] {
                    for &d in Algo::available(coll) {
                        assert_eq!(t.pick(coll, p, n, d), t2.pick(coll, p, n, d));
                    }
                }
            }
        }
        // Bruck's negative alpha left it out; the ring and recursive doubling remain.
        let names: Vec<Algo> = t.algos.iter().map(|a| a.algo).collect();
        assert_eq!(names, vec![Algo::Ring, Algo::RecDoubling]);
        assert!(m.table("rdma@mlx5_0").is_none());
    }

    fn model_json(path: &str, bruck_alpha: &str, bruck_held: &str) -> String {
        format!(
            r#"{{"schema": "collbench-model/1", "fits": [{{"path": "{path}", "algos": [
              {{"algo": "ring", "alpha_us": {{"value": 20.0, "sd": 1.0}}, "beta_us_per_byte": {{"value": 0.001, "sd": 0.0}}}},
              {{"algo": "bruck", "alpha_us": {{"value": {bruck_alpha}, "sd": 0.1, {bruck_held}"x": 0}}, "beta_us_per_byte": {{"value": 0.002, "sd": 0.0}}}},
              {{"algo": "rec_doubling", "alpha_us": {{"value": 15.0, "sd": 1.0}}, "beta_us_per_byte": {{"value": 0.002, "sd": 0.0}}}}
            ], "gamma_us_per_byte": {{"value": 0.0005, "sd": 0.0}}}}]}}"#
        )
    }

    #[test]
    fn a_model_file_is_refused_when_it_cannot_choose() {
        let two = r#"{"schema": "collbench-model/1", "fits": [
            {"path": "tcp@eth0", "algos": [], "gamma_us_per_byte": {"value": 0.0}},
            {"path": "tcp@eth1", "algos": [], "gamma_us_per_byte": {"value": 0.0}}]}"#;
        let e = CostModel::parse(two, "m.json").unwrap_err();
        assert!(e.contains("tcp@eth0 and tcp@eth1"), "{e}");
        let e = CostModel::parse(r#"{"schema": "collbench-results/1", "fits": []}"#, "r.json").unwrap_err();
        assert!(e.contains("schema"), "{e}");
        let e = CostModel::parse(r#"{"fits": []}"#, "m.json").unwrap_err();
        assert!(e.contains("no fitted path"), "{e}");
        let e = CostModel::parse("[1, 2]", "m.json").unwrap_err();
        assert!(e.contains("not a model file"), "{e}");
    }
}
