//! Every collective x algorithm against a plain reference, over ranks {1,2,3,4,7,8} x counts {0, 1, odd,
//! several MiB} x dtype/op pairs x in-place and out-of-place x tunings (chunk size, streams), ranks as
//! threads connected over loopback by collbench's own TCP transport.

use collbench::algorithm::pipeline::RingCost;
use collbench::algorithm::{self, Algo, Args, Tuning, Workspace};
use collbench::collective::Collective;
use collbench::memory::HostBuf;
use collbench::options::{Options, TcpOptions};
use collbench::reduce::{Dtype, Op};
use collbench::session;

const RANKS: [usize; 6] = [1, 2, 3, 4, 7, 8];
/// Per-rank element counts: empty, one, odd, and several MiB (of 4-byte elements: 3 MiB + 4 bytes).
const COUNTS: [usize; 4] = [0, 1, 1001, (3 << 20) / 4 + 1];
const PAIRS: [(Dtype, Op); 10] = [
    (Dtype::Float, Op::Sum),
    (Dtype::Int8, Op::Prod),
    (Dtype::Half, Op::Min),
    (Dtype::Bfloat16, Op::Avg),
    (Dtype::Uint64, Op::Max),
    (Dtype::Double, Op::Sum),
    (Dtype::Int32, Op::Avg),
    (Dtype::Uint8, Op::Sum),
    (Dtype::Int64, Op::Min),
    (Dtype::Uint32, Op::Prod),
];

/// A value of any dtype: integers exact in i128, floats in f64 (every value used is a small integer).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Num {
    I(i128),
    F(f64),
}

/// Rank r's input element i: small integers, so float results are exact in any order.
fn input(dtype: Dtype, op: Op, n: usize, r: usize, i: usize) -> Num {
    let v: i64 = match op {
        Op::Prod => {
            if (r + i) % 3 == 0 {
                2
            } else if (r + 2 * i) % 5 == 0 {
                -1
            } else {
                1
            }
        }
        // Contributions that cancel over ranks: the average is the exact integer (i % 7) - 3.
        Op::Avg => {
            let d = if r % 2 == 0 && r + 1 < n {
                2
            } else if r % 2 == 1 {
                -2
            } else {
                0
            };
            (i % 7) as i64 - 3 + d
        }
        _ => ((r * 31 + i * 7) % 9) as i64 - 4,
    };
    wrap(
        dtype,
        if dtype.is_float() {
            Num::F(v as f64)
        } else {
            Num::I(v as i128)
        },
    )
}

/// Brings an integer into the dtype's range the way the hardware would (two's complement wrap).
fn wrap(dtype: Dtype, x: Num) -> Num {
    match x {
        Num::F(_) => x,
        Num::I(v) => Num::I(match dtype {
            Dtype::Int8 => v as i8 as i128,
            Dtype::Uint8 => v as u8 as i128,
            Dtype::Int32 => v as i32 as i128,
            Dtype::Uint32 => v as u32 as i128,
            Dtype::Int64 => v as i64 as i128,
            Dtype::Uint64 => v as u64 as i128,
            _ => unreachable!("float dtype with an integer value"),
        }),
    }
}

fn encode(dtype: Dtype, x: Num, out: &mut [u8]) {
    match (dtype, x) {
        (Dtype::Int8 | Dtype::Uint8, Num::I(v)) => out[0] = v as u8,
        (Dtype::Int32 | Dtype::Uint32, Num::I(v)) => out.copy_from_slice(&(v as u32).to_le_bytes()),
        (Dtype::Int64 | Dtype::Uint64, Num::I(v)) => out.copy_from_slice(&(v as u64).to_le_bytes()),
        (Dtype::Half, Num::F(v)) => out.copy_from_slice(&half::f16::from_f64(v).to_le_bytes()),
        (Dtype::Bfloat16, Num::F(v)) => out.copy_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
        (Dtype::Float, Num::F(v)) => out.copy_from_slice(&(v as f32).to_le_bytes()),
        (Dtype::Double, Num::F(v)) => out.copy_from_slice(&v.to_le_bytes()),
        _ => unreachable!(),
    }
}

fn decode(dtype: Dtype, b: &[u8]) -> Num {
    match dtype {
        Dtype::Int8 => Num::I(b[0] as i8 as i128),
        Dtype::Uint8 => Num::I(b[0] as i128),
        Dtype::Int32 => Num::I(i32::from_le_bytes(b.try_into().unwrap()) as i128),
        Dtype::Uint32 => Num::I(u32::from_le_bytes(b.try_into().unwrap()) as i128),
        Dtype::Int64 => Num::I(i64::from_le_bytes(b.try_into().unwrap()) as i128),
        Dtype::Uint64 => Num::I(u64::from_le_bytes(b.try_into().unwrap()) as i128),
        Dtype::Half => Num::F(half::f16::from_le_bytes(b.try_into().unwrap()).to_f64()),
        Dtype::Bfloat16 => Num::F(half::bf16::from_le_bytes(b.try_into().unwrap()).to_f64()),
        Dtype::Float => Num::F(f32::from_le_bytes(b.try_into().unwrap()) as f64),
        Dtype::Double => Num::F(f64::from_le_bytes(b.try_into().unwrap())),
    }
}

/// The plain reference: `op` over every rank's element `i`, in rank order, then wrapped to the dtype.
fn reduced(dtype: Dtype, op: Op, n: usize, i: usize) -> Num {
    let vals: Vec<Num> = (0..n).map(|r| input(dtype, op, n, r, i)).collect();
    match (vals[0], op) {
        (Num::F(_), _) => {
            let f: Vec<f64> = vals
                .iter()
                .map(|v| if let Num::F(x) = v { *x } else { unreachable!() })
                .collect();
            Num::F(match op {
                Op::Sum => f.iter().sum(),
                Op::Avg => f.iter().sum::<f64>() / n as f64,
                Op::Prod => f.iter().product(),
                Op::Min => f.iter().copied().fold(f64::INFINITY, f64::min),
                Op::Max => f.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            })
        }
        (Num::I(_), _) => {
            let v: Vec<i128> = vals
                .iter()
                .map(|v| if let Num::I(x) = v { *x } else { unreachable!() })
                .collect();
            let wrapped = |x: i128| match wrap(dtype, Num::I(x)) {
                Num::I(y) => y,
                _ => unreachable!(),
            };
            Num::I(match op {
                Op::Sum => wrapped(v.iter().sum()),
                // Integer average: the wrapped sum divided by n, truncating, like NCCL.
                Op::Avg => wrapped(v.iter().sum()) / n as i128,
                Op::Prod => v.iter().fold(1i128, |a, &b| wrapped(a * b)),
                Op::Min => *v.iter().min().unwrap(),
                Op::Max => *v.iter().max().unwrap(),
            })
        }
    }
}

/// Which source each output element comes from; `None` where the output is unspecified.
fn expected(case: &Case, n: usize, r: usize, j: usize) -> Option<Num> {
    let (dtype, op, root, c) = (case.dtype, case.op, case.root, case.count);
    let inp = |rank: usize, i: usize| input(dtype, op, n, rank, i);
    Some(match case.coll {
        Collective::AllReduce => reduced(dtype, op, n, j),
        Collective::AllGather => inp(j / c, j % c),
        Collective::ReduceScatter => reduced(dtype, op, n, r * c + j),
        Collective::Broadcast => inp(root, j),
        Collective::Reduce if r == root => reduced(dtype, op, n, j),
        Collective::Reduce => return None,
        Collective::AllToAll => inp(j / c, r * c + j % c),
        Collective::SendRecv => inp((r + n - 1) % n, j),
    })
}

struct Case {
    coll: Collective,
    algo: Algo,
    count: usize,
    dtype: Dtype,
    op: Op,
    in_place: bool,
    tune: Tuning,
    root: usize,
}

/// Runs one case on this rank and returns a description of each wrong element (at most a few).
fn run_case(t: &mut collbench::transport::tcp::TcpTransport, case: &Case, ws: &mut Workspace) -> Vec<String> {
    use collbench::transport::Transport;
    let (n, r) = (t.size(), t.rank());
    let es = case.dtype.size();
    let c = case.count;
    let (send_elems, recv_elems) = match case.coll {
        Collective::AllGather => (c, c * n),
        Collective::ReduceScatter => (c * n, c),
        Collective::AllToAll => (c * n, c * n),
        _ => (c, c),
    };
    let view_elems = if case.in_place {
        send_elems.max(recv_elems)
    } else {
        recv_elems
    };
    let mut send = HostBuf::new(send_elems * es);
    let mut recv = HostBuf::new(view_elems * es);
    let input_at = if case.in_place && case.coll == Collective::AllGather {
        r * c
    } else {
        0
    };
    {
        let dst: &mut [u8] = if case.in_place {
            &mut recv[input_at * es..(input_at + send_elems) * es]
        } else {
            &mut send[..]
        };
        for i in 0..send_elems {
            encode(
                case.dtype,
                input(case.dtype, case.op, n, r, i),
                &mut dst[i * es..(i + 1) * es],
            );
        }
    }
    let args = Args {
        coll: case.coll,
        dtype: case.dtype,
        op: case.op,
        root: case.root,
        count: c,
        send: if case.in_place { None } else { Some(&send[..]) },
        recv: &mut recv[..],
    };
    let label = format!(
        "{} {} {}/{} count {c} {} chunk {} rank {r}/{n}",
        case.coll,
        case.algo,
        case.dtype,
        case.op,
        if case.in_place { "in-place" } else { "out-of-place" },
        case.tune.chunk_bytes
    );
    if let Err(e) = algorithm::run(t, case.algo, args, ws, &case.tune) {
        return vec![format!("{label}: error: {e}")];
    }
    assert_eq!(t.pending(), 0, "{label}: requests left in flight");
    let out_at = if case.in_place && case.coll == Collective::ReduceScatter {
        r * c
    } else {
        0
    };
    let mut bad = Vec::new();
    for j in 0..recv_elems {
        let Some(want) = expected(case, n, r, j) else { continue };
        let at = (out_at + j) * es;
        let got = decode(case.dtype, &recv[at..at + es]);
        let want = decode(case.dtype, &{
            let mut b = vec![0u8; es];
            encode(case.dtype, want, &mut b);
            b
        });
        if got != want {
            bad.push(format!("{label}: element {j}: expected {want:?}, got {got:?}"));
            if bad.len() >= 3 {
                break;
            }
        }
    }
    bad
}

/// Runs every case of `coll` at every rank count and fails with the wrong elements found.
fn check_collective(coll: Collective) {
    let mut failures = Vec::new();
    for (ni, &n) in RANKS.iter().enumerate() {
        for streams in [1usize, 3] {
            // Waits that poll before sleeping and a fixed send buffer (the defaults) with one stream, waits that
            // sleep at once on autotuned buffers with three: both wait paths and both kinds of socket see every
            // collective.
            let (spin, sndbuf) = if streams == 1 {
                (Options::default().tcp.spin, Options::default().tcp.sndbuf)
            } else {
                (std::time::Duration::ZERO, None)
            };
            let mut opts = Options::default();
            opts.tcp = TcpOptions {
                streams,
                spin,
                sndbuf,
                ..opts.tcp
            };
            opts.deadlines.timeout = std::time::Duration::from_secs(60);
            let results = session::run_threads(n, &opts, |sess| {
                let mut bad = Vec::new();
                let mut ws = Workspace::default();
                let mut k = ni;
                for &count in &COUNTS {
                    // The several-MiB cases run once per rank count (single stream, default tuning).
                    if count > 4096 && streams != 1 {
                        continue;
                    }
                    let tunings: &[Tuning] = if count > 4096 {
                        // With a model's ring costs (1 Gbit/s, 50 us a step), which only ring_pipelined reads:
                        // its chunk then comes from them.
                        &[Tuning {
                            chunk_bytes: 256 << 10,
                            depth: 4,
                            ring_cost: Some(RingCost {
                                alpha_us: 50.0,
                                beta_us_per_byte: 0.008,
                                gamma_us_per_byte: 0.001,
                            }),
                        }]
                    } else {
                        &[
                            Tuning {
                                chunk_bytes: 64,
                                depth: 3,
                                ring_cost: None,
                            },
                            Tuning {
                                chunk_bytes: 1 << 20,
                                depth: 1,
                                ring_cost: None,
                            },
                        ]
                    };
                    for algo in Algo::available(coll) {
                        for &tune in tunings {
                            for in_place in [false, true] {
                                k += 1;
                                let (dtype, op) = if count > 4096 {
                                    PAIRS[k % 2 * 5]
                                } else {
                                    PAIRS[k % PAIRS.len()]
                                };
                                let case = Case {
                                    coll,
                                    algo: *algo,
                                    count,
                                    dtype,
                                    op,
                                    in_place,
                                    tune,
                                    root: (k * 7) % n,
                                };
                                bad.extend(run_case(&mut sess.transports[0], &case, &mut ws));
                            }
                        }
                    }
                }
                bad
            });
            for res in results {
                match res {
                    Ok(b) => failures.extend(b),
                    Err(e) => failures.push(format!("{coll} at {n} ranks, {streams} streams: set-up failed: {e}")),
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} wrong results, first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

#[test]
fn all_reduce_matches_the_reference() {
    check_collective(Collective::AllReduce);
}

#[test]
fn all_gather_matches_the_reference() {
    check_collective(Collective::AllGather);
}

#[test]
fn reduce_scatter_matches_the_reference() {
    check_collective(Collective::ReduceScatter);
}

#[test]
fn broadcast_matches_the_reference() {
    check_collective(Collective::Broadcast);
}

#[test]
fn reduce_matches_the_reference() {
    check_collective(Collective::Reduce);
}

#[test]
fn alltoall_matches_the_reference() {
    check_collective(Collective::AllToAll);
}

#[test]
fn sendrecv_matches_the_reference() {
    check_collective(Collective::SendRecv);
}

/// The tuned data paths at their boundaries: every stream count a user would pick (1, 2, 4), messages just
/// below, at and above the striping threshold (64 KiB: one stream vs all streams), chunks that split a
/// segment exactly and with a short tail, and the reduced-precision kernels (bfloat16, half) through the
/// ring, whose wide AVX2 loops have a tail of under sixteen elements.
#[test]
fn tuned_paths_match_the_reference_at_their_boundaries() {
    const STRIPE: usize = 64 << 10;
    let mut failures = Vec::new();
    for n in [3usize, 4] {
        for streams in [1usize, 2, 4] {
            let mut opts = Options::default();
            opts.tcp.streams = streams;
            opts.deadlines.timeout = std::time::Duration::from_secs(60);
            let results = session::run_threads(n, &opts, |sess| {
                let mut bad = Vec::new();
                let mut ws = Workspace::default();
                for (dtype, op) in [
                    (Dtype::Bfloat16, Op::Sum),
                    (Dtype::Half, Op::Sum),
                    (Dtype::Float, Op::Sum),
                ] {
                    let es = dtype.size();
                    // A chunk exactly at the striping threshold; segments (all_reduce) and blocks (all_gather)
                    // of two chunks minus, plus and exactly, in elements.
                    let tune = Tuning {
                        chunk_bytes: STRIPE,
                        depth: 2,
                        ring_cost: None,
                    };
                    let per = STRIPE / es;
                    for seg in [2 * per - 1, 2 * per, 2 * per + 17] {
                        for (coll, count) in [(Collective::AllReduce, seg * n + 1), (Collective::AllGather, seg)] {
                            for in_place in [false, true] {
                                let case = Case {
                                    coll,
                                    algo: Algo::Ring,
                                    count,
                                    dtype,
                                    op,
                                    in_place,
                                    tune,
                                    root: 0,
                                };
                                bad.extend(run_case(&mut sess.transports[0], &case, &mut ws));
                            }
                        }
                    }
                }
                bad
            });
            for res in results {
                match res {
                    Ok(b) => failures.extend(b),
                    Err(e) => failures.push(format!("{n} ranks, {streams} streams: set-up failed: {e}")),
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} wrong results, first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

/// The automatic choice on both sides of the switch point runs and gives the reference result.
#[test]
fn algorithm_switch_point_sizes_match_the_reference() {
    let mut failures = Vec::new();
    let n = 4;
    let results = session::run_threads(n, &Options::default(), |sess| {
        let mut bad = Vec::new();
        let mut ws = Workspace::default();
        // Each switch of `--algo auto` without a user threshold on 4 ranks: the sizes on both sides, and what
        // should run below and from it.
        let switches = [
            (
                Collective::AllReduce,
                64u64 << 10,
                Algo::RecDoubling,
                Algo::HalvingDoubling,
            ),
            (Collective::AllReduce, 8 << 20, Algo::HalvingDoubling, Algo::Ring),
            (Collective::AllGather, 256 << 10, Algo::Bruck, Algo::RecDoubling),
            (Collective::AllGather, 1 << 20, Algo::RecDoubling, Algo::Ring),
            (Collective::ReduceScatter, 64 << 10, Algo::RecDoubling, Algo::Ring),
        ];
        for (coll, threshold, below, from) in switches {
            // Sizes as the runner counts them: all_gather's and reduce_scatter's are count x size x n.
            let es = Dtype::Float.size();
            let per_count = if coll == Collective::AllReduce { es } else { es * n };
            for bytes in [threshold as usize - per_count, threshold as usize] {
                let count = bytes / per_count;
                let algo = Algo::select(coll, collbench::options::AlgoChoice::Auto, bytes as u64, None, n);
                let want = if (bytes as u64) < threshold { below } else { from };
                if algo != want {
                    bad.push(format!("{coll} at {bytes} B picked {algo}, want {want}"));
                }
                let case = Case {
                    coll,
                    algo,
                    count,
                    dtype: Dtype::Float,
                    op: Op::Sum,
                    in_place: false,
                    tune: Tuning::default(),
                    root: 0,
                };
                bad.extend(run_case(&mut sess.transports[0], &case, &mut ws));
            }
        }
        bad
    });
    for res in results {
        match res {
            Ok(b) => failures.extend(b),
            Err(e) => failures.push(format!("set-up failed: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
