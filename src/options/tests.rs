//! Tests of the aggregate: every flag reaches its part, every bad value names its flag.

use clap::Parser;

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::cli::{Cli, Command};
use crate::collective::Collective;
use crate::engine::options::memory_kind;
use crate::error::Error;
use crate::reduce::{Dtype, Op};

fn args(argv: &[&str]) -> RunArgs {
    let full = ["collbench", "run"].iter().chain(argv);
    match Cli::try_parse_from(full)
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
        .command
    {
        Command::Run(r) => *r,
        other => panic!("{argv:?} parsed as {other:?}"),
    }
}

fn opts(argv: &[&str]) -> Options {
    Options::from_cli(&args(argv)).unwrap_or_else(|e| panic!("{argv:?}: {e}"))
}

/// Asserts a usage error naming `flag`, whose message contains `text`; returns the message.
fn usage(argv: &[&str], flag: &str, text: &str) -> String {
    let err = Options::from_cli(&args(argv)).expect_err(&format!("{argv:?} should fail"));
    assert_eq!(err.exit_code(), crate::error::EXIT_USAGE, "{argv:?}: {err}");
    let shown = err.to_string();
    match &err {
        Error::Usage { flag: f, message } => {
            assert_eq!(f, flag, "{argv:?}: {shown}");
            assert!(message.contains(text), "{argv:?}: {shown}");
        }
        other => panic!("{argv:?}: not a usage error: {other}"),
    }
    assert!(shown.contains(flag), "{shown}");
    shown
}

fn json(o: &Options) -> serde_json::Value {
    serde_json::to_value(o).unwrap()
}

#[test]
fn interface_specs_are_checked_and_normalised() {
    assert_eq!(opts(&["--iface", "ib0 |en*"]).tcp.iface.as_deref(), Some("ib0|en*"));
    usage(&["--iface", "ib0|"], "--iface", "empty alternative");
    usage(&["--transport", "tcp,tcp@a||b"], "--transport", "empty alternative");
    assert_eq!(
        opts(&["--transport", "tcp@ib?|eth0"]).paths.transports,
        [PathKind::Tcp(Some("ib?|eth0".into()))]
    );
}

#[test]
fn prediction_flags_are_checked() {
    let o = opts(&["--target-ranks", "64", "--ranks-per-node", "8"]);
    assert_eq!((o.outputs.target_ranks, o.outputs.ranks_per_node), (Some(64), Some(8)));
    usage(&["--target-ranks", "1"], "--target-ranks", "2 or more");
    usage(&["--ranks-per-node", "8"], "--ranks-per-node", "--target-ranks");
    usage(
        &["--target-ranks", "10", "--ranks-per-node", "4"],
        "--ranks-per-node",
        "divisor",
    );
    usage(
        &["--target-ranks", "10", "--ranks-per-node", "0"],
        "--ranks-per-node",
        "divide",
    );
}

#[test]
fn no_flags_give_the_defaults() {
    assert_eq!(json(&opts(&[])), json(&Options::default()));
}

#[test]
fn every_flag_reaches_its_field() {
    let o = opts(&[
        "-b",
        "1K",
        "-e",
        "1M",
        "-f",
        "4",
        "-n",
        "7",
        "-w",
        "0",
        "-c",
        "0",
        "-o",
        "max,min",
        "-d",
        "half",
        "-r",
        "3",
        "-a",
        "rank0",
        "-T",
        "0.5",
        "-J",
        "a.json",
        "--csv",
        "a.csv",
        "--force",
        "--collective",
        "broadcast",
        "--np",
        "8",
        "--algo",
        "rd",
        "--algo-threshold",
        "1M",
        "--spin",
        "0",
        "--streams",
        "4",
        "--rdma-qps",
        "4",
        "--chunk",
        "1M",
        "--percentiles",
        "--no-progress",
    ]);
    assert_eq!(
        o.sweep.sizes,
        SizeRange {
            min: 1024,
            max: 1 << 20,
            step: Step::Factor(4)
        }
    );
    assert_eq!(
        (o.sweep.iters, o.sweep.warmup, o.sweep.check_iters, o.sweep.root, o.np),
        (7, 0, 0, 3, 8)
    );
    assert_eq!(
        (o.sweep.ops.clone(), o.sweep.dtypes.clone()),
        (vec![Op::Max, Op::Min], vec![Dtype::Half])
    );
    assert_eq!(
        (o.sweep.rank_stat, o.algorithm.algo, o.algorithm.algo_threshold),
        (RankStat::Rank0, AlgoChoice::RecDoubling, Some(1 << 20))
    );
    assert_eq!(o.deadlines.timeout, Duration::from_millis(500));
    assert_eq!(
        (o.outputs.json.unwrap(), o.outputs.csv.unwrap()),
        (PathBuf::from("a.json"), PathBuf::from("a.csv"))
    );
    assert_eq!(o.sweep.collectives, [Collective::Broadcast]);
    assert!(o.outputs.force && o.sweep.percentiles);
    assert_eq!(
        (o.tcp.streams, o.algorithm.chunk_bytes, o.outputs.progress),
        (4, 1 << 20, Progress::Never)
    );
    assert_eq!(o.rdma.rdma_qps, 4);
    assert_eq!(o.tcp.spin, Duration::ZERO);
}

#[test]
fn sndbuf_is_a_size_or_auto_and_defaults_to_the_measured_512k() {
    assert_eq!(opts(&[]).tcp.sndbuf, Some(512 << 10));
    assert_eq!(opts(&["--sndbuf", "auto"]).tcp.sndbuf, None);
    assert_eq!(opts(&["--sndbuf", "2M"]).tcp.sndbuf, Some(2 << 20));
    usage(
        &["--sndbuf", "1K"],
        "--sndbuf",
        "must be auto or between 4 KiB and 256 MiB",
    );
    usage(&["--sndbuf", "1G"], "--sndbuf", "got 1 GiB");
    usage(&["--sndbuf", "lots"], "--sndbuf", "");
}

#[test]
fn tcp_congestion_is_tried_on_this_host_before_anything_connects() {
    assert_eq!(opts(&[]).tcp.tcp_congestion, None, "the host's default unless asked");
    assert_eq!(
        opts(&["--tcp-congestion", "reno"]).tcp.tcp_congestion.as_deref(),
        Some("reno")
    );
    // Validation asks nothing of the host; trying the name on this host's sockets is the part's own step.
    let probed = |argv: &[&str]| match opts(argv).tcp.check_host() {
        Err(err @ Error::Usage { .. }) => err,
        other => panic!("{argv:?}: {other:?}"),
    };
    let err = probed(&["--tcp-congestion", "nosuchcc"]);
    assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
    assert!(
        err.to_string().starts_with("--tcp-congestion: ")
            && err.to_string().contains("this host has no congestion control"),
        "{err}"
    );
    assert!(opts(&["--tcp-congestion", "reno"]).tcp.check_host().is_ok());
    usage(
        &["--tcp-congestion", "Re No"],
        "--tcp-congestion",
        "not a congestion control name",
    );
    // Every rank must use the same: it is one of the options the ranks compare.
    assert_eq!(
        opts(&["--tcp-congestion", "reno"]).agreement().to_wire()["tcp_congestion"],
        serde_json::json!("reno")
    );
}

#[test]
fn all_expands_and_lists_keep_order_without_duplicates() {
    assert_eq!(opts(&["-d", "all"]).sweep.dtypes, Dtype::ALL);
    assert_eq!(opts(&["-o", "all"]).sweep.ops, Op::ALL);
    assert_eq!(opts(&["--collective", "all"]).sweep.collectives, Collective::ALL);
    assert_eq!(opts(&["-d", "ALL"]).sweep.dtypes.len(), 10);
    assert_eq!(opts(&["-o", "max,sum,max", "-o", "SUM"]).sweep.ops, [Op::Max, Op::Sum]);
    assert_eq!(
        opts(&["-d", "bf16, fp32"]).sweep.dtypes,
        [Dtype::Bfloat16, Dtype::Float]
    );
}

#[test]
fn factor_and_byte_steps_give_the_expected_sizes() {
    let k = 1024;
    assert_eq!(
        opts(&["-b", "1K", "-e", "1M", "-f", "4"]).sweep.sizes.sizes(),
        [k, 4 * k, 16 * k, 64 * k, 256 * k, k * k]
    );
    assert_eq!(
        opts(&["-b", "1K", "-e", "4K", "-i", "1K"]).sweep.sizes.sizes(),
        [k, 2 * k, 3 * k, 4 * k]
    );
    assert_eq!(
        opts(&["-b", "0", "-e", "1K", "-i", "512"]).sweep.sizes.sizes(),
        [0, 512, 1024]
    );
    // The maximum is an upper bound, not a point that must be hit.
    assert_eq!(
        opts(&["-b", "1K", "-e", "3.5K", "-i", "1K"]).sweep.sizes.sizes(),
        [k, 2 * k, 3 * k]
    );
    assert_eq!(opts(&["-b", "8", "-e", "8"]).sweep.sizes.sizes(), [8]);
    assert_eq!(opts(&["-b", "0", "-e", "0"]).sweep.sizes.sizes(), [0]);
    assert_eq!(opts(&[]).sweep.sizes.sizes().len(), 24);
}

#[test]
fn bad_sizes_and_steps_name_their_flag() {
    usage(&["-b", "1Q"], "-b/--minbytes", "unknown unit 'Q'");
    usage(&["--minbytes=-1"], "-b/--minbytes", "negative");
    usage(&["-b", "-1"], "-b/--minbytes", "negative");
    usage(&["-e", ""], "-e/--maxbytes", "empty");
    usage(&["-e", "1.3K"], "-e/--maxbytes", "whole number of bytes");
    usage(&["-e", "16777216T"], "-e/--maxbytes", "too large");
    usage(&["-b", "1M", "-e", "1K"], "-b/--minbytes", "lower -b or raise -e");
    usage(&["-f", "1"], "-f/--stepfactor", "at least 2");
    usage(&["-f", "0"], "-f/--stepfactor", "at least 2");
    usage(&["-b", "0"], "-b/--minbytes", "-i");
    usage(&["-i", "0"], "-i/--stepbytes", "more than 0");
    usage(&["-i", "1X"], "-i/--stepbytes", "unknown unit");
    usage(&["-f", "2", "-i", "1K"], "-f/--stepfactor", "-i/--stepbytes");
    usage(&["-b", "1", "-e", "1G", "-i", "1"], "-i/--stepbytes", "10000");
    usage(&["--algo-threshold", "lots"], "--algo-threshold", "not a size");
}

#[test]
fn interleave_defaults_to_whole_sweeps_and_takes_point() {
    assert_eq!(opts(&[]).sweep.interleave, Interleave::Sweep);
    assert_eq!(opts(&["--interleave", "point"]).sweep.interleave, Interleave::Point);
    assert_eq!(opts(&["--interleave", "sweep"]).sweep.interleave, Interleave::Sweep);
    // Every rank must take the same turns: the choice is part of what ranks agree on.
    let c = opts(&["--interleave", "point"]).agreement().to_wire();
    assert_eq!(c["interleave"], "point");
}

#[test]
fn bad_counts_and_names_name_their_flag() {
    usage(&["--np", "0"], "--np", "between 1 and 512");
    usage(&["--np", "513"], "--np", "launcher");
    usage(&["-n", "0"], "-n/--iters", "at least 1");
    usage(&["-d", "float8"], "-d/--datatype", "bfloat16");
    usage(&["-d", "float,,half"], "-d/--datatype", "empty");
    usage(&["-o", "xor"], "-o/--op", "sum, prod, max, min, avg");
    usage(&["--collective", "allfoo"], "--collective", "all_reduce, all_gather");
    usage(&["-a", "4"], "-a/--average", "3/max");
    usage(&["-a", "median"], "-a/--average", "rank0");
    usage(
        &["--algo", "fast"],
        "--algo",
        "auto, ring, pring, rd, rhd, bruck or tree",
    );
    usage(&["--streams", "0"], "--streams", "between 1 and 16");
    usage(&["--streams", "17"], "--streams", "between 1 and 16");
    usage(&["--spin", "100001"], "--spin", "between 0 and 100000 microseconds");
    usage(&["--rdma-qps", "0"], "--rdma-qps", "between 1 and 16 queue pairs");
    usage(&["--rdma-qps", "17"], "--rdma-qps", "between 1 and 16 queue pairs");
    usage(&["--chunk", "1K"], "--chunk", "between 4 KiB and 64 MiB");
    usage(&["--chunk", "128M"], "--chunk", "between 4 KiB and 64 MiB");
    usage(&["--chunk", "4100"], "--chunk", "multiple of 16");
    usage(&["--chunk", "1Q"], "--chunk", "unknown unit");
    usage(&["-T", "0"], "-T/--timeout", "more than 0");
    usage(&["-T", "-1"], "-T/--timeout", "more than 0");
    usage(&["-T", "inf"], "-T/--timeout", "at most");
    usage(&["-T", "NaN"], "-T/--timeout", "more than 0");
    usage(&["-T", "1e9"], "-T/--timeout", "at most");
    usage(&["--bootstrap-timeout", "0"], "--bootstrap-timeout", "more than 0");
    usage(&["--connect-timeout", "inf"], "--connect-timeout", "at most");
    usage(&["--fault", "1:lunch:kill"], "--fault", "phase");
    usage(&["--interleave", "zigzag"], "--interleave", "sweep or point");
    usage(&["-J", "x", "--csv", "x"], "--csv", "-J");
}

#[test]
fn accepted_edges() {
    // The root is checked against the world size later; here it only has to parse.
    assert_eq!(opts(&["-r", "1000"]).sweep.root, 1000);
    assert_eq!(opts(&["--np", "512", "--streams", "16", "--chunk", "64M"]).np, 512);
    assert_eq!(opts(&["--chunk", "4K"]).algorithm.chunk_bytes, 4096);
    // Sizes need not be a multiple of 16: each collective rounds them itself.
    assert_eq!(opts(&["-b", "7", "-e", "1001"]).sweep.sizes.max, 1001);
    for (a, s) in [
        ("0", RankStat::Rank0),
        ("1", RankStat::Avg),
        ("2", RankStat::Min),
        ("3", RankStat::Max),
    ] {
        assert_eq!(opts(&["-a", a]).sweep.rank_stat, s);
        assert_eq!(opts(&["-a", s.name()]).sweep.rank_stat, s);
    }
    for a in [
        AlgoChoice::Auto,
        AlgoChoice::Ring,
        AlgoChoice::RecDoubling,
        AlgoChoice::Tree,
        AlgoChoice::HalvingDoubling,
        AlgoChoice::Bruck,
    ] {
        assert_eq!(opts(&["--algo", a.name()]).algorithm.algo, a);
    }
}

#[test]
fn memory_needed_counts_both_buffers_and_scratch() {
    let o = Options::default();
    // all_reduce at 64 MiB: 64 MiB send + 64 MiB receive; all_gather at 4 ranks needs 16 + 64 MiB.
    let scratch = 2 * o.algorithm.chunk_bytes as u64;
    assert_eq!(o.memory_needed(), (128 << 20) + scratch);
    let mut ag = Options::default();
    ag.sweep.collectives = vec![Collective::AllGather];
    assert_eq!(ag.memory_needed(), (80 << 20) + scratch);
    let mut rs = Options {
        np: 3,
        ..Options::default()
    };
    rs.sweep.collectives = vec![Collective::ReduceScatter];
    // 64 MiB of floats over 3 ranks: 5592405 per rank, rounded down to a multiple of 4 elements.
    let per = 5_592_404u64 * 4;
    assert_eq!(rs.memory_needed(), per * 3 + per + scratch);
    // The largest dtype rounding wins; with all dtypes nothing exceeds twice the size plus scratch.
    let mut all = Options::default();
    all.sweep.collectives = Collective::ALL.to_vec();
    all.sweep.dtypes = Dtype::ALL.to_vec();
    assert_eq!(all.memory_needed(), (128 << 20) + scratch);
}

#[test]
fn check_memory_names_maxbytes_and_the_numbers() {
    use crate::memory::available::Available;
    let o = Options::default();
    let need = o.memory_needed();
    assert!(o.check_memory(4, &Available::host(4 * need)).is_ok());
    let err = o.check_memory(4, &Available::host(4 * need - 1)).unwrap_err();
    assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
    let msg = err.to_string();
    for part in [
        "-e/--maxbytes",
        "129 MiB per rank x 4 local ranks = 516 MiB",
        "but the machine has",
        "lower -e or --np",
        "64 MiB",
    ] {
        assert!(msg.contains(part), "{part}: {msg}");
    }
    assert!(o.check_memory(usize::MAX, &Available::host(u64::MAX - 1)).is_err());
}

#[test]
fn check_memory_under_a_cgroup_names_its_limit_and_what_to_do() {
    use crate::cgroup::limits::Room;
    use crate::memory::available::Available;
    let o = opts(&["-e", "64M"]);
    let room = Room {
        cgroup: "/jobs/j1".into(),
        file: "memory.limit_in_bytes",
        limit: 120 << 20,
        used: 4 << 20,
    };
    let avail = Available::of(Some(64 << 30), Some(room)).unwrap();
    let err = o.check_memory(2, &avail).unwrap_err();
    assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
    let msg = err.to_string();
    for part in [
        "x 2 local ranks",
        "the memory cgroup /jobs/j1 leaves 116 MiB (memory.limit_in_bytes 120 MiB, 4 MiB in use)",
        "lower -e or --np, or raise memory.limit_in_bytes of cgroup /jobs/j1",
    ] {
        assert!(msg.contains(part), "{part}: {msg}");
    }
    assert!(o.check_memory(1, &Available::host(64 << 30)).is_ok());
}

#[test]
fn check_tasks_counts_ranks_threads_and_the_launcher() {
    use crate::cgroup::limits::Room;
    let o = Options::default();
    // Two local ranks over TCP: two tasks each, three for the launcher.
    assert_eq!(o.tasks_needed(2, true), 7);
    assert_eq!(o.tasks_needed(2, false), 4);
    let room = |limit, used| Room {
        cgroup: "/svc".into(),
        file: "pids.max",
        limit,
        used,
    };
    assert!(o.check_tasks(2, true, &room(10, 3)).is_ok());
    let err = o.check_tasks(2, true, &room(8, 3)).unwrap_err();
    assert_eq!(err.exit_code(), crate::error::EXIT_USAGE);
    let msg = err.to_string();
    for part in [
        "--np: 2 local ranks start up to 7 processes and threads",
        "the pids cgroup /svc leaves room for 5 (pids.max 8, 3 in use)",
        "lower --np, or raise pids.max of cgroup /svc",
    ] {
        assert!(msg.contains(part), "{part}: {msg}");
    }
}

#[test]
fn reductions_on_the_device_need_device_memory_and_count_their_staging() {
    assert!(!opts(&[]).buffers.reduce_on_device);
    let host = opts(&["--memory", "cuda", "--transport", "tcp", "-e", "64M"]);
    let dev = opts(&[
        "--memory",
        "cuda",
        "--transport",
        "tcp",
        "-e",
        "64M",
        "--reduce-on",
        "device",
    ]);
    assert!(dev.buffers.reduce_on_device && !host.buffers.reduce_on_device);
    assert_eq!(
        dev.agreement().to_wire()["reduce_on_device"],
        true,
        "ranks must agree on it"
    );
    assert!(
        dev.memory_needed() >= host.memory_needed() + 3 * (64 << 20),
        "three more staging buffers"
    );
    usage(&["--reduce-on", "device"], "--reduce-on", "add --memory cuda");
    usage(&["--reduce-on", "gpu"], "--reduce-on", "expected host or device");
}

#[test]
fn staging_pieces_are_bounded_and_agreed_by_every_rank() {
    assert_eq!(opts(&[]).buffers.staging_pieces, 4);
    let o = opts(&["--staging-pieces", "1"]);
    assert_eq!(o.buffers.staging_pieces, 1);
    assert_eq!(
        o.agreement().to_wire()["staging_pieces"],
        1,
        "ranks must split calls alike"
    );
    usage(
        &["--staging-pieces", "0"],
        "--staging-pieces",
        "between 1 (no overlap) and 64",
    );
    usage(&["--staging-pieces", "65"], "--staging-pieces", "(got 65)");
}

#[test]
fn memory_and_device_flags_reach_the_options_and_cuda_stays_off_mpi() {
    let o = opts(&[]);
    assert_eq!(
        (o.buffers.memory, o.buffers.device.as_deref()),
        (crate::memory::MemoryKind::Host, None)
    );
    assert_eq!(serde_json::to_value(&o).unwrap()["memory"], "host");
    let o = opts(&["--memory", "cuda", "--device", "1", "--transport", "tcp,tcp@lo"]);
    assert_eq!(
        (o.buffers.memory, o.buffers.device.as_deref()),
        (crate::memory::MemoryKind::Cuda, Some("1"))
    );
    assert_eq!(
        o.agreement().to_wire()["memory"],
        "cuda",
        "ranks must agree on the memory"
    );
    usage(&["--memory", "gpu"], "--memory", "expected host or cuda");
    let kinds = [PathKind::Tcp(None), PathKind::Mpi];
    let e = memory_kind("cuda", &kinds).unwrap_err().to_string();
    assert!(
        e.starts_with("--memory:") && e.contains("not on mpi") && e.contains("drop mpi"),
        "{e}"
    );
    // rdma paths stage device buffers like tcp paths.
    let rdma = PathKind::Rdma {
        device: "mlx5_0".into(),
        port: 1,
    };
    assert_eq!(
        memory_kind("cuda", &[PathKind::Tcp(None), rdma]).unwrap(),
        crate::memory::MemoryKind::Cuda
    );
    assert_eq!(memory_kind("host", &kinds).unwrap(), crate::memory::MemoryKind::Host);
    // nccl takes device memory and nothing else.
    let e = memory_kind("host", &[PathKind::Tcp(None), PathKind::Nccl])
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("--transport:") && e.contains("--memory cuda"), "{e}");
    assert_eq!(
        memory_kind("cuda", &[PathKind::Tcp(None), PathKind::Nccl]).unwrap(),
        crate::memory::MemoryKind::Cuda
    );
    let host = opts(&["-e", "1M"]).memory_needed();
    let cuda = opts(&["-e", "1M", "--memory", "cuda"]).memory_needed();
    assert!(cuda > host, "staging and check buffers count twice: {cuda} vs {host}");
}

#[test]
fn cuda_memory_runs_on_rdma_paths_in_a_build_with_rdma() {
    let argv = ["--memory", "cuda", "--transport", "tcp,rdma@mlx5_0:1"];
    if cfg!(feature = "rdma") {
        let o = opts(&argv);
        assert_eq!(o.buffers.memory, crate::memory::MemoryKind::Cuda);
        assert!(
            o.paths.transports.iter().any(|p| matches!(p, PathKind::Rdma { .. })),
            "{:?}",
            o.paths.transports
        );
    } else {
        // Without the feature the path itself is refused, naming the feature, before memory is looked at.
        usage(&argv, "--transport", "--features rdma");
    }
}

#[test]
fn the_step_factor_help_states_the_real_default() {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let run = cmd.find_subcommand_mut("run").unwrap();
    // -f has no clap default (so that -i can replace it); its stated default must be the real one.
    let f = run.get_arguments().find(|a| a.get_id() == "stepfactor").unwrap();
    let n = match Options::default().sweep.sizes.step {
        crate::options::Step::Factor(n) => n,
        other => panic!("default step {other:?} is not a factor"),
    };
    assert!(f.get_help().unwrap().to_string().contains(&format!("[default: {n}]")));
}
