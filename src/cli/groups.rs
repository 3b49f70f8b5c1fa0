//! Flag groups several subcommands flatten into theirs: outputs, units, deadlines, the path and launch flags.

use std::path::PathBuf;

use clap::Args;

use super::values::{self, Choices};
use super::{TIMING, TUNING};
use crate::defaults;
use crate::sizes::format_size_arg;

/// The output every command that writes files takes, declared once: the JSON file and whether files that
/// exist may be replaced. A command's other outputs (`--csv`, `--junit`, ...) are its own flags beside it.
#[derive(Debug, Clone, Default, Args)]
pub struct OutputArgs {
    /// Write the results as JSON to this file; `-` is standard output, whatever it is (a terminal, a pipe, a
    /// file opened with `>` or `>>`), and the human text then goes to stderr [default: none]
    #[arg(short = 'J', long = "output_file", aliases = ["output-file", "json"], value_name = "FILE")]
    pub output_file: Option<PathBuf>,

    /// Overwrite output files that already exist (an existing file is otherwise refused before anything runs,
    /// and never replaced when one appears while the command runs).
    #[arg(long = "force")]
    pub force: bool,
}

/// `--units`, shared by every subcommand that prints bandwidth in the unit nccl-tests does.
#[derive(Debug, Clone, Args)]
pub struct UnitsArg {
    /// Unit bandwidth is printed in: gbyte (GB/s, 10^9 bytes/s, as nccl-tests prints) or gbit (Gbit/s, 10^9
    /// bits/s, as perftest's --report_gbits and link speeds); files (JSON, CSV, Markdown) stay in GB/s.
    #[arg(long = "units", value_name = "UNIT", default_value = "gbyte",
        value_parser = Choices(crate::units::UNITS))]
    pub units: String,
}

impl UnitsArg {
    /// The unit chosen.
    pub fn unit(&self) -> crate::error::Result<crate::units::BwUnit> {
        crate::flags::units_flag(&self.units)
    }
}

/// Deadlines of the bootstrap, the connections and every wait, shared by `run`, `preflight` and `pairwise`.
#[derive(Debug, Clone, Args)]
pub struct DeadlineArgs {
    /// Deadline in seconds for any single wait in a collective or measurement; a stuck peer ends the run
    /// with an error naming it.
    #[arg(short = 'T', long = "timeout", value_name = "SECONDS", help_heading = TIMING, allow_negative_numbers = true,
        default_value_t = defaults::TIMEOUT_S as f64)]
    pub timeout: f64,

    /// Deadline in seconds for the bootstrap: reaching the rendezvous and every rank joining it.
    #[arg(long = "bootstrap-timeout", value_name = "SECONDS", help_heading = TIMING, allow_negative_numbers = true,
        default_value_t = defaults::BOOTSTRAP_TIMEOUT_S as f64)]
    pub bootstrap_timeout: f64,

    /// Deadline in seconds for opening and authenticating the data connections.
    #[arg(long = "connect-timeout", value_name = "SECONDS", help_heading = TIMING, allow_negative_numbers = true,
        default_value_t = defaults::CONNECT_TIMEOUT_S as f64)]
    pub connect_timeout: f64,
}

/// The paths to measure and how collbench's transports and algorithms run on them, shared by `run` and
/// `preflight` (which passes them to each of its phases).
#[derive(Debug, Clone, Args)]
pub struct LinkArgs {
    /// Paths to measure in turn, comma-separated: tcp (collbench's own transport), tcp@SPEC (bound to the
    /// interface SPEC picks on each host: a name, a glob such as en*, or a list tried in order such as
    /// 'ib0|eth0'), mpi (the MPI library's collectives; needs a build with --features mpi and an MPI launcher),
    /// nccl (NCCL's collectives on the device buffers; needs --features cuda, --memory cuda and libnccl.so.2).
    /// Plain tcp uses --iface, else loopback on one host, else IPoIB, the interface that reaches the
    /// rendezvous, the default route's, the first by name (never loopback or container bridges)
    #[arg(long = "transport", alias = "transports", value_name = "LIST", value_delimiter = ',',
        help_heading = TUNING, default_value = "tcp", value_parser = Choices(values::TRANSPORTS), hide_possible_values = true)]
    pub transport: Vec<String>,

    /// Algorithm: auto (latency algorithm below --algo-threshold, ring above; on 2^k ranks with no threshold given,
    /// all_reduce runs rhd from 64K to 8M and all_gather rd from 256K to 1M), ring, pring (the ring with its chunk
    /// per call from --algo-model; all_reduce, all_gather), rd (recursive doubling;
    /// all_gather on other rank counts: Bruck), rhd (all_reduce by recursive halving + doubling), bruck (all_gather
    /// by Bruck's steps on any rank count) or tree.
    #[arg(long = "algo", value_name = "ALGO", help_heading = TUNING,
        default_value_t = defaults::ALGO.to_string(), value_parser = Choices(values::ALGOS), hide_possible_values = true)]
    pub algo: String,

    /// GID table index of rdma@ paths (like NCCL_IB_GID_INDEX) [default: 0 on InfiniBand; on RoCE the
    /// RoCE v2 entry with an IPv4 address]
    #[arg(long = "gid-index", value_name = "N", help_heading = TUNING)]
    pub gid_index: Option<u8>,

    /// Queue pairs per peer of rdma@ paths (1..=16, like NCCL_IB_QPS_PER_CONNECTION): a message's fragments
    /// go round-robin over them, so a large one uses them all
    #[arg(long = "rdma-qps", value_name = "N", help_heading = TUNING, default_value_t = defaults::RDMA_QPS)]
    pub rdma_qps: usize,

    /// Line rate in Gbit/s to report busbw against, for links whose speed the kernel does not know
    /// (virtual or shaped links) [default: the interface's reported speed]
    #[arg(long = "line-rate", value_name = "GBIT", help_heading = TUNING)]
    pub line_rate: Option<f64>,

    /// Interface plain `tcp` binds to: a name, a glob (en*) or a list tried in order (ib0|eth0), each host
    /// taking the first that matches [default: lo for a single-host job; else IPoIB, the interface that
    /// reaches the rendezvous, the default route's (see docs/interface.md)]
    #[arg(long = "iface", value_name = "SPEC", help_heading = TUNING)]
    pub iface: Option<String>,

    /// TCP streams per peer (1..=16).
    #[arg(long = "streams", value_name = "N", help_heading = TUNING,
        default_value_t = defaults::STREAMS)]
    pub streams: usize,

    /// Microseconds a TCP wait keeps polling the sockets, yielding the CPU between polls, before it sleeps in
    /// poll(2), at most (0..=100000; 0 sleeps at once). Polling answers sooner than a woken rank is scheduled;
    /// while waits sleep anyway (long transfers) each polls half as long as the last, down to 50.
    #[arg(long = "spin", value_name = "US", help_heading = TUNING,
        default_value_t = defaults::SPIN_US)]
    pub spin: u64,

    /// Send buffer (SO_SNDBUF) of every TCP data socket, 4 KiB..=256 MiB, or auto for the kernel's autotuning;
    /// the kernel doubles it and caps it at net.core.wmem_max.
    #[arg(long = "sndbuf", value_name = "SIZE|auto", help_heading = TUNING,
        default_value_t = defaults::SNDBUF.map_or("auto".into(), |b| format_size_arg(b as u64)))]
    pub sndbuf: String,

    /// TCP congestion control of every data socket (TCP_CONGESTION, as iperf3's -C), e.g. cubic, reno, bbr;
    /// it must be in net.ipv4.tcp_available_congestion_control, and for users without CAP_NET_ADMIN in
    /// tcp_allowed_congestion_control [default: the host's, net.ipv4.tcp_congestion_control]
    #[arg(long = "tcp-congestion", value_name = "NAME", help_heading = TUNING)]
    pub tcp_congestion: Option<String>,

    /// Pipeline chunk size (4 KiB..=64 MiB, a multiple of 16 bytes).
    #[arg(long = "chunk", value_name = "SIZE", help_heading = TUNING,
        default_value_t = format_size_arg(defaults::CHUNK_BYTES as u64))]
    pub chunk: String,
}
