//! What every rank must run alike: one typed record, built from the option parts, compared at the rendezvous
//! (or through MPI) before any data moves. Its JSON form is what travels; durations and the size range travel
//! as the words people read (`30 s`, `8 to 1024 B, x2`), so a mismatch reads `timeout (30 s vs 20 s)`.

use std::fmt::Display;
use std::time::Duration;

use serde::{Serialize, Serializer};

use super::Options;
use crate::algorithm::options::{AlgoChoice, AlgoOptions};
use crate::algorithm::CostModel;
use crate::bench::options::{Interleave, IterOptions, RankStat, SizeRange, SweepOptions};
use crate::collective::Collective;
use crate::engine::options::BufferOptions;
use crate::fault::{Fault, TestAids};
use crate::memory::MemoryKind;
use crate::reduce::{Dtype, Op};
use crate::transport::path::{PathKind, PathOptions};
use crate::transport::rdma::options::RdmaOptions;
use crate::transport::tcp::options::TcpOptions;
use crate::world::options::Deadlines;

/// The options every rank must agree on. Local choices (`--np`, which a launcher overrides, `--iface`, whose
/// names differ between hosts, and every output) are not in it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Agreement {
    #[serde(serialize_with = "display")]
    pub sizes: SizeRange,
    pub iters: u32,
    pub warmup: u32,
    pub repeat: u32,
    pub interleave: Interleave,
    pub check_iters: u32,
    pub collectives: Vec<Collective>,
    pub dtypes: Vec<Dtype>,
    pub ops: Vec<Op>,
    pub root: usize,
    pub rank_stat: RankStat,
    pub percentiles: bool,
    pub iteration: IterOptions,
    pub algo: AlgoChoice,
    pub algo_threshold: Option<u64>,
    pub chunk_bytes: usize,
    /// The model's fitted costs themselves, not the file's name: ranks that read different files disagree.
    pub algo_model: Option<CostModel>,
    pub transports: Vec<PathKind>,
    pub reference: Option<String>,
    pub line_rate_gbit: Option<f64>,
    pub gid_index: Option<u8>,
    pub rdma_qps: usize,
    #[serde(serialize_with = "seconds")]
    pub timeout: Duration,
    #[serde(serialize_with = "seconds")]
    pub bootstrap_timeout: Duration,
    #[serde(serialize_with = "seconds")]
    pub connect_timeout: Duration,
    pub streams: usize,
    #[serde(serialize_with = "micros")]
    pub spin: Duration,
    pub sndbuf: Option<usize>,
    pub tcp_congestion: Option<String>,
    pub memory: MemoryKind,
    pub device: Option<String>,
    pub staging_pieces: usize,
    pub emulate_device: bool,
    pub reduce_on_device: bool,
    pub corrupt_rank: Option<usize>,
    pub fault: Option<Fault>,
}

impl Agreement {
    /// The agreed part of `o`. Each part is taken apart field by field, so a field added to a part does not
    /// compile until it is either agreed here or named as local.
    pub fn of(o: &Options) -> Agreement {
        let SweepOptions {
            sizes,
            iters,
            warmup,
            repeat,
            interleave,
            check_iters,
            collectives,
            dtypes,
            ops,
            root,
            rank_stat,
            percentiles,
            iteration,
        } = o.sweep.clone();
        let AlgoOptions {
            algo,
            algo_threshold,
            chunk_bytes,
            algo_model,
        } = o.algorithm.clone();
        let PathOptions {
            transports,
            reference,
            line_rate_gbit,
        } = o.paths.clone();
        let RdmaOptions { gid_index, rdma_qps } = o.rdma;
        let Deadlines {
            timeout,
            bootstrap_timeout,
            connect_timeout,
        } = o.deadlines;
        let TcpOptions {
            iface: _,
            streams,
            spin,
            sndbuf,
            tcp_congestion,
        } = o.tcp.clone();
        let BufferOptions {
            memory,
            device,
            staging_pieces,
            emulate_device,
            reduce_on_device,
        } = o.buffers.clone();
        let TestAids { corrupt_rank, fault } = o.aids.clone();
        Agreement {
            sizes,
            iters,
            warmup,
            repeat,
            interleave,
            check_iters,
            collectives,
            dtypes,
            ops,
            root,
            rank_stat,
            percentiles,
            iteration,
            algo,
            algo_threshold,
            chunk_bytes,
            algo_model,
            transports,
            reference,
            line_rate_gbit,
            gid_index,
            rdma_qps,
            timeout,
            bootstrap_timeout,
            connect_timeout,
            streams,
            spin,
            sndbuf,
            tcp_congestion,
            memory,
            device,
            staging_pieces,
            emulate_device,
            reduce_on_device,
            corrupt_rank,
            fault,
        }
    }

    /// The record as it travels to the other ranks: a JSON object, one key per field.
    pub fn to_wire(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("the agreement serialises to JSON: no maps, no paths")
    }

    /// [`Agreement::to_wire`] with a command's own part (`pairwise`'s test) under `key`, compared like every
    /// other field.
    pub fn to_wire_with(&self, key: &str, part: &impl Serialize) -> serde_json::Value {
        let mut wire = self.to_wire();
        wire[key] = serde_json::to_value(part).expect("a command's part serialises to JSON");
        wire
    }
}

/// A value as its `Display` text.
fn display<T: Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// A duration in seconds, with its unit: `30 s`, `0.5 s`. Exact: an f64 holds any deadline up to a week to the
/// nanosecond.
fn seconds<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{} s", d.as_secs_f64()))
}

/// A short duration in microseconds, with its unit: `50 us`.
fn micros<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{} us", d.as_nanos() as f64 / 1e3))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::report::options::Progress;
    use crate::world::rendezvous::{disagreement, Join};

    fn join(rank: usize, o: &Options) -> Join {
        Join {
            rank,
            size: 2,
            host: format!("h{rank}"),
            pid: 1,
            endpoints: vec![],
            version: "0.1.0".into(),
            consensus: Agreement::of(o).to_wire(),
            job: Vec::new(),
            relay: None,
            refused: None,
        }
    }

    #[test]
    fn a_mismatch_names_the_field_with_the_values_people_read() {
        let mut a = Options::default();
        a.deadlines.timeout = Duration::from_secs(30);
        a.tcp.spin = Duration::from_micros(50);
        let mut b = Options::default();
        b.deadlines.timeout = Duration::from_secs(20);
        b.tcp.spin = Duration::from_micros(75);
        b.sweep.dtypes = vec![Dtype::Half, Dtype::Float];
        b.sweep.sizes.max = 1 << 20;
        let msg = disagreement(&[&join(0, &b), &join(1, &a)]).unwrap();
        for part in [
            "rank 1 (host h1) differs from rank 0 in: ",
            "timeout (30 s vs 20 s)",
            "spin (50 us vs 75 us)",
            "dtypes (float vs half,float)",
            "sizes (8 to 67108864 B, x2 vs 8 to 1048576 B, x2)",
        ] {
            assert!(msg.contains(part), "{part}: {msg}");
        }
        assert!(!msg.contains("nanos") && !msg.contains("bootstrap_timeout"), "{msg}");
        assert!(disagreement(&[&join(0, &a), &join(1, &a)]).is_none());
    }

    #[test]
    fn local_choices_are_not_agreed_and_everything_else_is() {
        let base = Agreement::of(&Options::default());
        let mut local = Options {
            np: 9,
            ..Options::default()
        };
        local.tcp.iface = Some("eth0".into());
        local.outputs.json = Some(PathBuf::from("r.json"));
        local.outputs.csv = Some(PathBuf::from("r.csv"));
        local.outputs.force = true;
        local.outputs.progress = Progress::Never;
        assert_eq!(Agreement::of(&local), base);
        assert_eq!(Agreement::of(&local).to_wire(), base.to_wire());
        let wire = base.to_wire();
        assert_eq!(wire["iters"], 20);
        assert_eq!(wire["timeout"], "60 s");
        assert_eq!(wire["dtypes"], serde_json::json!(["float"]));
        for key in ["np", "iface", "json", "csv", "markdown", "plot", "force", "progress"] {
            assert!(wire.get(key).is_none(), "{key} is local");
        }
        let differs = |f: &dyn Fn(&mut Options)| {
            let mut o = Options::default();
            f(&mut o);
            Agreement::of(&o).to_wire() != wire
        };
        assert!(differs(&|o| o.sweep.iters = 21));
        assert!(differs(&|o| o.sweep.root = 1));
        assert!(differs(&|o| o.deadlines.timeout = Duration::from_secs(61)));
        assert!(differs(&|o| o.deadlines.timeout += Duration::from_nanos(1)));
        assert!(differs(&|o| o.sweep.sizes.step = crate::bench::options::Step::Bytes(2)));
        assert!(differs(&|o| o.tcp.tcp_congestion = Some("reno".into())));
        assert!(differs(&|o| o.buffers.staging_pieces = 1));
    }
}
