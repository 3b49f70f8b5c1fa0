//! What a flag means when it is not given: one constant per default, read by the help text here and by the
//! option parts' `Default` impls above, so the two cannot drift apart (options/tests.rs also checks that a
//! bare `collbench run` parses to `Options::default()`).

/// `--np`: local ranks.
pub const NP: usize = 4;
/// `-T/--timeout`, seconds.
pub const TIMEOUT_S: u64 = 60;
/// `--bootstrap-timeout`, seconds.
pub const BOOTSTRAP_TIMEOUT_S: u64 = 120;
/// `--connect-timeout`, seconds.
pub const CONNECT_TIMEOUT_S: u64 = 60;
/// `--algo`.
pub const ALGO: &str = "auto";
/// `--rdma-qps`: queue pairs per peer.
pub const RDMA_QPS: usize = 1;
/// `--streams`: TCP connections per peer.
pub const STREAMS: usize = 1;
/// `--spin`, microseconds. A millisecond: a wait that sleeps after less pays an idle CPU's wake-up on every
/// small message, and its partner falls asleep too (results/tcp-vs-mpi/spread, 2 hosts: 35-45 us at 50 us,
/// 11-23 us at 1 ms); longer waits (an idle rank in a barrier) still sleep after it, and waits that sleep one
/// after another (a transfer of milliseconds) poll for less, down to 50 us (transport::tcp's SpinBudget).
pub const SPIN_US: u64 = 1000;
/// `--sndbuf`, bytes (`None`: the kernel's autotuning).
pub const SNDBUF: Option<usize> = Some(512 << 10);
/// `--chunk`, bytes.
pub const CHUNK_BYTES: usize = 512 << 10;
/// `-b/--minbytes`.
pub const MIN_BYTES: u64 = 8;
/// `-e/--maxbytes`.
pub const MAX_BYTES: u64 = 64 << 20;
/// `-f/--stepfactor`.
pub const STEP_FACTOR: u64 = 2;
/// `-r/--root`.
pub const ROOT: usize = 0;
/// `-n/--iters`.
pub const ITERS: u32 = 20;
/// `-w/--warmup_iters`.
pub const WARMUP: u32 = 5;
/// `--repeat`.
pub const REPEAT: u32 = 1;
/// `-c/--check`: checked calls per point.
pub const CHECK_ITERS: u32 = 1;
/// `--rank-stat`.
pub const RANK_STAT: &str = "max";
/// `--staging-pieces`.
pub const STAGING_PIECES: usize = 4;
/// `--collectives`.
pub const COLLECTIVES: &str = "all_reduce,all_gather";
/// `-d/--dtypes`.
pub const DTYPES: &str = "float";
/// `-o/--ops`.
pub const OPS: &str = "sum";
/// `pairwise --bytes`.
pub const PAIRWISE_BYTES: usize = 4 << 20;
/// `pairwise --iters`.
pub const PAIRWISE_ITERS: usize = 5;
/// `pairwise --lat-iters`.
pub const PAIRWISE_LAT_ITERS: usize = 200;
/// `pairwise --budget`, seconds: two minutes, what a check before a job can cost; 16 hosts at 100 Mbit/s
/// measure every pair in it, larger or slower clusters a sample of rounds.
pub const PAIRWISE_BUDGET_S: u64 = 120;
/// `preflight --budget`, seconds: a few minutes for a small cluster.
pub const PREFLIGHT_BUDGET_S: u64 = 180;
