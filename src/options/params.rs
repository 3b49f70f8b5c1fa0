//! The results file's run-parameters record ([`RunParams`]) made from validated options: the one place that
//! knows both, so the report layer never imports the options.

use crate::algorithm::CostModel;
use crate::bench::options::Step;
use crate::results::run_params::{
    name, AlgoModelCost, AlgoModelParams, AlgoModelPath, IterParams, RunParams, StepView, RUN_PARAMS_VERSION,
};

use super::Options;

impl RunParams {
    /// The record of a run's validated options.
    pub fn from_options(o: &Options) -> RunParams {
        let names = |v: Vec<Option<String>>| v.into_iter().flatten().collect();
        RunParams {
            version: RUN_PARAMS_VERSION,
            min_bytes: Some(o.sweep.sizes.min),
            max_bytes: Some(o.sweep.sizes.max),
            step: Some(match o.sweep.sizes.step {
                Step::Factor(f) => StepView::Factor(f),
                Step::Bytes(b) => StepView::Bytes(b),
            }),
            iters: Some(u64::from(o.sweep.iters)),
            warmup: Some(u64::from(o.sweep.warmup)),
            check_iters: Some(u64::from(o.sweep.check_iters)),
            repeat: Some(u64::from(o.sweep.repeat)),
            interleave: name(&o.sweep.interleave),
            collectives: names(o.sweep.collectives.iter().map(name).collect()),
            dtypes: names(o.sweep.dtypes.iter().map(name).collect()),
            ops: names(o.sweep.ops.iter().map(name).collect()),
            root: Some(o.sweep.root as u64),
            algo: name(&o.algorithm.algo),
            algo_threshold: o.algorithm.algo_threshold,
            rank_stat: name(&o.sweep.rank_stat),
            percentiles: o.sweep.percentiles,
            transports: o.paths.transports.iter().map(ToString::to_string).collect(),
            streams: Some(o.tcp.streams as u64),
            chunk_bytes: Some(o.algorithm.chunk_bytes as u64),
            sndbuf: Some(o.tcp.sndbuf.map_or_else(|| "auto".to_string(), |b| b.to_string())),
            tcp_congestion: o.tcp.tcp_congestion.clone(),
            timeout_s: Some(o.deadlines.timeout.as_secs_f64()),
            bootstrap_timeout_s: Some(o.deadlines.bootstrap_timeout.as_secs_f64()),
            connect_timeout_s: Some(o.deadlines.connect_timeout.as_secs_f64()),
            memory: name(&o.buffers.memory),
            staging_pieces: Some(o.buffers.staging_pieces as u64),
            reduce_on_device: o.buffers.reduce_on_device,
            emulate_device: o.buffers.emulate_device,
            iteration: Some(iter_params(&o.sweep.iteration)),
            algo_model: o.algorithm.algo_model.as_ref().map(model_params),
        }
    }
}

/// The record of `--algo-model`: the file, its digest and the costs it held.
fn model_params(m: &CostModel) -> AlgoModelParams {
    AlgoModelParams {
        file: m.source.clone(),
        digest: m.digest.clone(),
        paths: m
            .tables
            .iter()
            .map(|t| AlgoModelPath {
                kind: t.kind.clone(),
                fitted_on: t.fitted_on.clone(),
                algos: t
                    .algos
                    .iter()
                    .map(|a| AlgoModelCost {
                        algo: a.algo.name().to_string(),
                        call_us: a.call_us,
                        alpha_us: a.alpha_us,
                        beta_us_per_byte: a.beta_us_per_byte,
                    })
                    .collect(),
                gamma_us_per_byte: t.gamma_us_per_byte,
            })
            .collect(),
    }
}

/// The record of `-I -K -m -z -u -C`.
fn iter_params(i: &crate::bench::options::IterOptions) -> IterParams {
    IterParams {
        per_iter: i.per_iter,
        skip: i.skip,
        agg: i.agg,
        blocking: i.blocking,
        unalign: i.unalign,
        cputime: i.cputime,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_every_field_of_the_real_options() {
        // The typed record and the one read from an older file's serialised options agree on every field.
        let o = Options::default();
        let p = RunParams::from_options(&o);
        let legacy = RunParams::from_legacy(&serde_json::to_value(&o).unwrap());
        assert_eq!(
            RunParams {
                version: RUN_PARAMS_VERSION,
                ..legacy
            },
            p
        );
        assert!(p.min_bytes.is_some() && p.max_bytes.is_some() && p.step.is_some());
        assert!(p.iters.is_some() && p.warmup.is_some() && p.check_iters.is_some());
        assert!(p.rank_stat.is_some() && p.algo.is_some() && p.streams.is_some());
        assert!(p.chunk_bytes.is_some() && p.timeout_s.is_some());
        assert_eq!(p.interleave.as_deref(), Some("sweep"));
        assert_eq!(p.sndbuf.as_deref(), Some("524288"));
        let mut auto = Options::default();
        auto.tcp.sndbuf = None;
        let p = RunParams::from_options(&auto);
        assert_eq!(p.sndbuf.as_deref(), Some("auto"));
        assert_eq!(
            RunParams::from_legacy(&serde_json::to_value(auto).unwrap()),
            RunParams { version: 0, ..p }
        );
    }

    #[test]
    fn durations_are_written_as_seconds() {
        let v = serde_json::to_value(RunParams::from_options(&Options::default())).unwrap();
        assert_eq!(v["timeout_s"], 60.0);
        assert_eq!(v["version"], RUN_PARAMS_VERSION);
        assert_eq!(v["step"], json!({"factor": 2}));
    }
}
