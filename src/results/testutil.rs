//! Synthetic runs and records for the reporters' tests.

use serde_json::json;

use super::record::{Endpoint, RankInfo, Record, RunInfo, Timing};
use super::run_params::RunParams;
use crate::collective::Collective;
use crate::reduce::{Dtype, Op};

/// A placement's timing: `busbw` as given, algbw = busbw / 2, percentiles around `time_us`.
pub fn timing(time_us: f64, busbw: f64, wrong: Option<u64>) -> Timing {
    Timing {
        time_us,
        algbw: busbw / 2.0,
        busbw,
        wrong,
        rank0_us: time_us - 1.0,
        avg_us: time_us - 0.5,
        min_us: time_us - 2.0,
        max_us: time_us,
        p50_us: time_us - 0.25,
        p99_us: time_us + 3.0,
        ci95_us: 0.5,
        iters: 20,
        staging_us: None,
        staging_wait_us: None,
        per_iter: None,
    }
}

/// A float record on `tcp@lo` at 4 ranks; op and root follow the collective (sum, root 0), and the
/// in-place placement has busbw + 1 so averages can tell the placements apart.
pub fn record(coll: Collective, size: u64, time_us: f64, busbw: f64, wrong: Option<u64>) -> Record {
    Record {
        path: "tcp@lo".into(),
        collective: coll,
        algo: "ring".into(),
        size,
        count: size / 4,
        dtype: Dtype::Float,
        op: coll.reduces().then_some(Op::Sum),
        root: coll.rooted().then_some(0),
        nranks: 4,
        out_of_place: timing(time_us, busbw, wrong),
        in_place: timing(time_us, busbw + 1.0, wrong),
        first_wrong: None,
        repeat: 0,
        timing: None,
    }
}

/// A two-rank local run with default-looking options.
pub fn run_info(percentiles: bool) -> RunInfo {
    RunInfo {
        version: "0.1.0".into(),
        args: vec!["collbench".into(), "run".into(), "--np".into(), "2".into()],
        start_time: "2025-03-04T05:06:07Z".into(),
        nranks: 2,
        launcher: "local".into(),
        bootstrap_s: 0.0123,
        connect_s: 0.0456,
        auth: "COLLBENCH_JOB_TOKEN".into(),
        connections: Some(crate::results::Connections {
            pairs: 1,
            all_pairs: 1,
            max_peers: 1,
            streams: 1,
            paths: 1,
            sockets: 1,
            why: "control tree, rec_doubling, bruck".into(),
            congestion: Some("cubic".into()),
        }),
        ranks: vec![
            RankInfo {
                rank: 0,
                pid: 1234,
                host: "node1".into(),
                iface: "lo".into(),
                addr: "127.0.0.1:40000".into(),
                endpoints: Vec::new(),
                device: None,
            },
            RankInfo {
                rank: 1,
                pid: 1235,
                host: "node1".into(),
                iface: "lo".into(),
                addr: "127.0.0.1:40001".into(),
                endpoints: vec![
                    Endpoint {
                        iface: "lo".into(),
                        addr: "127.0.0.1:40001".into(),
                        reason: None,
                    },
                    Endpoint {
                        iface: "eth1".into(),
                        addr: "10.0.0.2:40002".into(),
                        reason: None,
                    },
                ],
                device: Some("cuda:1 [0000:1a:00.0] NVIDIA H200".into()),
            },
        ],
        params: RunParams {
            version: crate::results::run_params::RUN_PARAMS_VERSION,
            ..RunParams::from_legacy(&legacy_options(percentiles))
        },
        legacy_options: None,
        rdma_route: None,
        min_bw: None,
    }
}

/// The `options` object a file written before the params record carries (default-looking options).
pub fn legacy_options(percentiles: bool) -> serde_json::Value {
    json!({
        "np": 2,
        "sizes": {"min": 8, "max": 4194304, "step": {"factor": 2}},
        "iters": 20,
        "warmup": 5,
        "check_iters": 1,
        "collectives": ["all_reduce"],
        "dtypes": ["float"],
        "ops": ["sum"],
        "root": 0,
        "algo": "auto",
        "algo_threshold": 65536,
        "rank_stat": "max",
        "percentiles": percentiles,
        "timeout": {"secs": 60, "nanos": 0},
        "bootstrap_timeout": {"secs": 120, "nanos": 0},
        "connect_timeout": {"secs": 60, "nanos": 0},
        "json": null,
        "csv": null,
        "force": false,
        "streams": 1,
        "chunk_bytes": 524288,
        "sndbuf": 524288,
        "progress": "auto"
    })
}
