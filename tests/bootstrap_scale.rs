//! The bootstrap at the size of a big job: the rendezvous's work and memory grow linearly with the ranks, and
//! the rank table reaches every rank down the relay tree, whole and the same everywhere.
//!
//! Two harnesses:
//! - real ranks (`rendezvous::join` on threads, each with its own relay listener): the full protocol;
//! - rank 0 at scale: the real rendezvous (`rendezvous::serve`) on loopback, joined by lightweight ranks that
//!   say hello and join over real sockets (from many loopback source addresses, so ephemeral ports never run
//!   out) but fetch no table. It measures what rank 0 pays: its time and the peak memory its thread
//!   allocates. Rank 0 holds one socket per rank, and this process the other end too, so the sizes are bound
//!   by RLIMIT_NOFILE (a hard limit of 20,000 here: 9,000 ranks); `COLLBENCH_BOOTSTRAP_SIZES=1000,9000`
//!   chooses them (tests/bench/bootstrap.sh writes results/bootstrap); the default runs in CI;
//! - rank 0's answer without sockets up to the bound (2^17): the joins read from their bytes, held, checked
//!   for agreement, the table serialised and every welcome made, by the same code the rendezvous runs.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use collbench::world::rank_info::{Endpoint, RankInfo};
use collbench::world::relay::{self, Source, Welcome};
use collbench::world::rendezvous::{self, Join};

/// Counts the bytes allocated by threads that asked for it (the rendezvous's), and their peak.
struct Counting;

thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
/// Held by a test while it measures: the counters are one pair for the whole test binary.
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn counted() -> bool {
    COUNTED.try_with(Cell::get).unwrap_or(false)
}

// SAFETY: every call is passed straight to the system allocator; the counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if counted() {
            let now = LIVE.fetch_add(l.size() as isize, Ordering::Relaxed) + l.size() as isize;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        // SAFETY: the caller's layout, passed on unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if counted() {
            LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        }
        // SAFETY: `p` came from `alloc` above with this layout.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// A join as a real rank of a big job sends it: a pod-style host name, one endpoint, the agreed options.
fn join_of(rank: usize, size: usize, relay: Option<String>) -> Join {
    Join {
        rank,
        size,
        host: format!("trainer-worker-{rank:06}.trainer-workers.ml-team.svc"),
        pid: 1000 + rank as u32,
        endpoints: vec![Endpoint {
            iface: "eth0".into(),
            addr: format!("10.{}.{}.{}:41234", rank >> 16, (rank >> 8) & 255, rank & 255),
            reason: Some("the interface of the default route".into()),
        }],
        version: env!("CARGO_PKG_VERSION").into(),
        consensus: serde_json::json!({
            "collectives": ["all_reduce"], "min_bytes": 8, "max_bytes": 134217728, "step_factor": 2,
            "iters": 20, "warmup": 5, "dtype": "float", "op": "sum", "memory": "host", "timeout": "30 s",
            "transport": ["tcp@eth0"], "check": true, "algo": "auto"
        }),
        job: vec!["MPI_JOB=trainer".into()],
        relay,
        refused: None,
    }
}

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(300)
}

/// Reads one length-prefixed frame.
fn frame(s: &mut TcpStream) -> Vec<u8> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("a frame length");
    let mut b = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut b).expect("a frame");
    b
}

/// What rank 0 paid for one bootstrap of `size` lightweight ranks.
struct Cost {
    /// From the first join sent to the rendezvous's answer to all.
    total_s: f64,
    /// From the last join to the rendezvous's answer to all.
    answer_s: f64,
    /// Peak bytes allocated on the rendezvous's thread.
    peak_bytes: isize,
}

/// Serves a job of `size` lightweight ranks and checks every welcome.
fn rank0_at(size: usize) -> Cost {
    common::raise_nofile(2 * size as u64 + 1024);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let root = l.local_addr().unwrap();
    let token = [9u8; 16];
    LIVE.store(0, Ordering::Relaxed);
    PEAK.store(0, Ordering::Relaxed);
    let server = std::thread::spawn(move || {
        COUNTED.with(|c| c.set(true));
        let t = rendezvous::serve(l, size, token, Duration::from_secs(600));
        let done = Instant::now();
        COUNTED.with(|c| c.set(false));
        (t.map(|t| t.len()), done)
    });
    let started = Instant::now();
    let mut socks = Vec::with_capacity(size);
    let mut direct = Vec::new();
    for rank in 0..size {
        // 20,000 connections per loopback source address keeps ephemeral ports in their default range.
        let src = IpAddr::V4(Ipv4Addr::new(127, 1, (rank / 20_000) as u8, 1));
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.bind(&SocketAddr::new(src, 0).into()).unwrap();
        s.connect(&root.into()).unwrap();
        let mut s: TcpStream = s.into();
        // Every rank names a relay listener it never serves: the rendezvous cannot tell, and sends it no table.
        let me = join_of(rank, size, Some(format!("127.0.0.1:{}", 1 + rank % 60_000)));
        rendezvous::send_join(&mut s, &root.to_string(), &token, &me, deadline()).unwrap();
        if relay::parent(rank).is_none() {
            // The first ranks get the whole table: read as it comes, or the rendezvous blocks writing it.
            direct.push(std::thread::spawn(move || {
                let w = rendezvous::decode_reply(&frame(&mut s), "test", "root").unwrap();
                assert_eq!(w.from, Source::Rendezvous);
                let mut bytes = Vec::new();
                while (bytes.len() as u64) < w.bytes {
                    let chunk = frame(&mut s);
                    assert!(chunk.len() <= relay::CHUNK);
                    bytes.extend_from_slice(&chunk);
                }
                (w, bytes)
            }));
        } else {
            socks.push((rank, s));
        }
    }
    let last_join = Instant::now();
    let (served, done) = server.join().unwrap();
    assert_eq!(served.unwrap(), size);
    let (first, bytes): (Welcome, Vec<u8>) = direct.remove(0).join().unwrap();
    let table: Vec<RankInfo> = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(table.len(), size);
    assert!(table.iter().enumerate().all(|(i, r)| r.rank == i));
    for d in direct {
        assert_eq!(d.join().unwrap().0, first);
    }
    for (rank, mut s) in socks {
        let w = rendezvous::decode_reply(&frame(&mut s), "test", "root").unwrap();
        assert!(serde_json::to_vec(&w).unwrap().len() < 400, "a welcome of {w:?}");
        assert_eq!((w.size, w.bytes, &w.sha256), (size, first.bytes, &first.sha256));
        let Source::Parent { rank: p, addr, .. } = &w.from else {
            panic!("rank {rank}: the table from {:?}", w.from)
        };
        assert_eq!(Some(*p), relay::parent(rank));
        assert_eq!(addr, &format!("127.0.0.1:{}", 1 + p % 60_000));
    }
    Cost {
        total_s: done.duration_since(started).as_secs_f64(),
        answer_s: done.duration_since(last_join).as_secs_f64(),
        peak_bytes: PEAK.load(Ordering::Relaxed),
    }
}

#[test]
fn rank_0_answers_every_rank_with_a_small_welcome_and_memory_linear_in_the_job() {
    let sizes: Vec<usize> = std::env::var("COLLBENCH_BOOTSTRAP_SIZES")
        .ok()
        .map(|s| s.split(',').map(|n| n.trim().parse().expect("a size")).collect())
        .unwrap_or_else(|| vec![1000, 4000]);
    let _one = MEASURING.lock().unwrap_or_else(|p| p.into_inner());
    let mut per_rank = Vec::new();
    for size in sizes {
        assert!(size <= collbench::world::env::MAX_WORLD_SIZE);
        let c = rank0_at(size);
        // Read by tests/bench/bootstrap.sh.
        eprintln!(
            "bootstrap ranks={size} total_s={:.3} answer_s={:.3} peak_bytes={}",
            c.total_s, c.answer_s, c.peak_bytes
        );
        per_rank.push((size, c.peak_bytes as f64 / size as f64));
    }
    // Linear: the peak per rank does not grow with the job (the table and the joins are each a few hundred
    // bytes a rank; a welcome holding the table for every rank would be bytes times ranks).
    for w in per_rank.windows(2) {
        assert!(
            w[1].1 < 1.5 * w[0].1 + 256.0,
            "peak bytes per rank grew with the job: {per_rank:?}"
        );
    }
    assert!(per_rank.iter().all(|&(_, b)| b < 16_384.0), "{per_rank:?}");
}

/// Rank 0's work without sockets for `size` ranks: the joins read from their bytes (as they arrive), held, then
/// answered. Returns the seconds it took and the peak bytes allocated.
fn answer_without_sockets(size: usize) -> (f64, isize) {
    let wire: Vec<Vec<u8>> = (0..size)
        .map(|r| serde_json::to_vec(&join_of(r, size, Some(format!("10.0.0.1:{}", 1 + r % 60_000)))).unwrap())
        .collect();
    LIVE.store(0, Ordering::Relaxed);
    PEAK.store(0, Ordering::Relaxed);
    let started = Instant::now();
    COUNTED.with(|c| c.set(true));
    let joins: Vec<Join> = wire.iter().map(|b| serde_json::from_slice(b).unwrap()).collect();
    let refs: Vec<&Join> = joins.iter().collect();
    let a = rendezvous::answer(&refs, size).unwrap();
    let frames: usize = a.welcomes.iter().map(|w| serde_json::to_vec(w).unwrap().len()).sum();
    COUNTED.with(|c| c.set(false));
    let took = started.elapsed().as_secs_f64();
    assert_eq!(a.infos.len(), size);
    assert!(frames < 400 * size, "{frames} bytes of welcomes");
    for (r, w) in a.welcomes.iter().enumerate() {
        match (&w.from, relay::parent(r)) {
            (Source::Rendezvous, None) => {}
            (Source::Parent { rank, .. }, Some(p)) => assert_eq!(*rank, p),
            other => panic!("rank {r}: {other:?}"),
        }
    }
    (took, PEAK.load(Ordering::Relaxed))
}

#[test]
fn rank_0s_answer_up_to_the_bound_is_linear_in_the_job() {
    let bound = collbench::world::env::MAX_WORLD_SIZE;
    let _one = MEASURING.lock().unwrap_or_else(|p| p.into_inner());
    let mut per_rank = Vec::new();
    for size in [1000, 10_000, 100_000, bound] {
        let (took, peak) = answer_without_sockets(size);
        // Read by tests/bench/bootstrap.sh.
        eprintln!("answer ranks={size} answer_s={took:.3} peak_bytes={peak}");
        per_rank.push((size, peak as f64 / size as f64));
    }
    for w in per_rank.windows(2) {
        assert!(
            w[1].1 < 1.5 * w[0].1 + 256.0,
            "peak bytes per rank grew with the job: {per_rank:?}"
        );
    }
}

#[test]
fn a_job_of_a_thousand_real_ranks_gets_one_table_down_the_relay_tree() {
    let size = 1000;
    common::raise_nofile(8 * size as u64 + 1024);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let root = l.local_addr().unwrap().to_string();
    let token = [5u8; 16];
    let server = std::thread::spawn(move || rendezvous::serve(l, size, token, Duration::from_secs(120)));
    let ranks: Vec<_> = (0..size)
        .map(|rank| {
            let root = root.clone();
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || rendezvous::join(&root, &token, &join_of(rank, size, None), Duration::from_secs(120)))
                .unwrap()
        })
        .collect();
    let want = server.join().unwrap().unwrap();
    assert_eq!(want.len(), size);
    for (rank, h) in ranks.into_iter().enumerate() {
        let got = h.join().unwrap().unwrap_or_else(|e| panic!("rank {rank}: {e}"));
        assert_eq!(got, want, "rank {rank}'s table");
    }
}

#[test]
fn a_relay_parent_gone_before_it_served_is_named_by_its_children() {
    let size = 8;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let root = l.local_addr().unwrap().to_string();
    let token = [6u8; 16];
    let server = std::thread::spawn(move || rendezvous::serve(l, size, token, Duration::from_secs(60)));
    // Rank 0 (the parent of ranks 4-7) names a relay listener that is closed by the time they come.
    let gone = TcpListener::bind("127.0.0.1:0").unwrap();
    let gone_addr = gone.local_addr().unwrap().to_string();
    drop(gone);
    let mut s0 = TcpStream::connect(&root).unwrap();
    rendezvous::send_join(
        &mut s0,
        &root,
        &token,
        &join_of(0, size, Some(gone_addr.clone())),
        deadline(),
    )
    .unwrap();
    let ranks: Vec<_> = (1..size)
        .map(|rank| {
            let root = root.clone();
            std::thread::spawn(move || {
                rendezvous::join(&root, &token, &join_of(rank, size, None), Duration::from_secs(60))
            })
        })
        .collect();
    server.join().unwrap().unwrap();
    for (i, h) in ranks.into_iter().enumerate() {
        let rank = i + 1;
        let r = h.join().unwrap();
        if relay::parent(rank) == Some(0) {
            let e = r.unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains("no rank table from rank 0 (host trainer-worker-000000") && msg.contains(&gone_addr),
                "rank {rank}: {msg}"
            );
            assert_eq!(
                e.culprit(),
                Some(&collbench::error::Culprit::Rank(collbench::error::Party {
                    rank: 0,
                    host: "trainer-worker-000000.trainer-workers.ml-team.svc".into()
                })),
                "rank {rank}: {msg}"
            );
        } else {
            assert_eq!(r.unwrap().len(), size, "rank {rank}");
        }
    }
}
