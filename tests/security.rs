//! Strangers during a run: while local ranks (started one by one through the binary, as a launcher would) are
//! still bootstrapping and connecting, connections with a wrong token, random bytes, nothing at all, and half a
//! hello reach the rendezvous and the data listeners. The run must finish with correct results, each stranger
//! named on stderr; and every listener is bound to the chosen interface's address, not to 0.0.0.0.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use collbench::session::SHOW_LISTENERS;
use collbench::transport::tcp::handshake::{Hello, HELLO_LEN};
use collbench::world::{env, new_token, token_to_hex, Token};
use serde_json::Value;

mod common;

const SIZE: usize = 3;

/// One rank started through the binary, its stderr read line by line as it comes.
struct Rank {
    child: Child,
    lines: Receiver<String>,
    stderr: JoinHandle<String>,
}

fn start(rank: usize, port: u16, token: &Token, json: &std::path::Path) -> Rank {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("collbench"))
        .args([
            "run", "-b", "8", "-e", "64K", "-n", "3", "-w", "1", "-T", "60", "--iface", "lo", "-J",
        ])
        .arg(json)
        .env(env::RANK, rank.to_string())
        .env(env::WORLD_SIZE, SIZE.to_string())
        .env(env::ROOT, format!("127.0.0.1:{port}"))
        .env(env::JOB_TOKEN, token_to_hex(token))
        .env(SHOW_LISTENERS, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("collbench starts");
    let err = child.stderr.take().expect("piped");
    let (tx, lines) = channel();
    let stderr = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            all.push_str(&line);
            all.push('\n');
            let _ = tx.send(line);
        }
        all
    });
    Rank { child, lines, stderr }
}

/// The data listener address the rank announces once bound (before it joins the rendezvous).
fn listener_of(r: &Rank) -> SocketAddr {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = r
            .lines
            .recv_timeout(left)
            .expect("the rank announces its data listener");
        if let Some(addr) = line.split(" data listener for tcp@lo on ").nth(1) {
            return addr.trim().parse().expect("a socket address");
        }
    }
}

/// A stranger: its connection (kept open until the run ends) and what it did.
struct Stranger {
    sock: TcpStream,
    kind: &'static str,
}

/// The four strangers against `target`: a well-formed opening with a proof made without the token, random
/// bytes, nothing at all, and the first half of a hello.
fn strangers(target: SocketAddr, wrong_token: Vec<u8>, half: Vec<u8>) -> Vec<Stranger> {
    let mut random: Vec<u8> = (0..4).flat_map(|_| new_token()).collect();
    // Never, by a one-in-four-billion chance, a collbench magic.
    random[0] = 0xFF;
    let mut out = Vec::new();
    for (kind, bytes) in [
        ("wrong token", wrong_token),
        ("random bytes", random),
        ("half-open", Vec::new()),
        ("truncated opening", half),
    ] {
        let mut sock = TcpStream::connect(target).unwrap_or_else(|e| panic!("connecting to {target}: {e}"));
        sock.write_all(&bytes).expect("stranger writes");
        out.push(Stranger { sock, kind });
    }
    out
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Rendezvous opening of a rank that does not hold the token: hello (magic, version, nonce), a proof it cannot
/// make (zeros), then a length-prefixed JSON frame.
fn rendezvous_opening(frame: &[u8]) -> Vec<u8> {
    let mut b = b"CBRV".to_vec();
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&new_token());
    b.push(1);
    b.extend_from_slice(&[0; 32]);
    b.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    b.extend_from_slice(frame);
    b
}

fn data_hello(from: u32, to: u32) -> [u8; HELLO_LEN] {
    Hello {
        from,
        to,
        stream: 0,
        nstreams: 1,
        nonce: new_token(),
    }
    .encode()
}

/// A data opening by a connection without the token: a hello, then a proof it cannot make.
fn data_opening_without_token(from: u32, to: u32) -> Vec<u8> {
    let mut b = data_hello(from, to).to_vec();
    b.push(1);
    b.extend_from_slice(&[0; 32]);
    b
}

fn assert_named(stderr: &str, who: &[Stranger], listener: &str) {
    for s in who {
        let addr = s.sock.local_addr().unwrap();
        let line = format!("dropped a connection from {addr}: ");
        assert!(
            stderr.lines().any(|l| l.contains(&line)),
            "the {} stranger {addr} at the {listener} is not named on stderr:\n{stderr}",
            s.kind
        );
    }
}

#[test]
fn strangers_during_set_up_are_named_and_dropped_and_the_run_is_correct() {
    let token = new_token();
    let port = free_port();
    let root: SocketAddr = (Ipv4Addr::LOCALHOST, port).into();
    let dir = tempfile::tempdir().unwrap();
    let json = |r: usize| dir.path().join(format!("rank{r}.json"));

    // Rank 0 serves the rendezvous; once it announces its data listener, both are up, and the job cannot go
    // on before ranks 1 and 2 are started, so every stranger below arrives during bootstrap and set-up.
    let r0 = start(0, port, &token, &json(0));
    let l0 = listener_of(&r0);
    let at_rendezvous = strangers(
        root,
        rendezvous_opening(br#"{"rank":1}"#),
        rendezvous_opening(b"")[..13].to_vec(),
    );
    let at_rank0 = strangers(
        l0,
        data_opening_without_token(2, 0),
        data_hello(2, 0)[..HELLO_LEN / 2].to_vec(),
    );
    // Rank 1 accepts rank 2's connections: strangers reach its listener too.
    let r1 = start(1, port, &token, &json(1));
    let l1 = listener_of(&r1);
    let at_rank1 = strangers(
        l1,
        data_opening_without_token(2, 1),
        data_hello(2, 1)[..HELLO_LEN / 2].to_vec(),
    );
    let r2 = start(2, port, &token, &json(2));

    let mut outs = Vec::new();
    for r in [r0, r1, r2] {
        let out = r.child.wait_with_output().expect("rank ends");
        let stderr = r.stderr.join().expect("stderr reader");
        outs.push((
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
        ));
    }
    for (rank, (code, _, stderr)) in outs.iter().enumerate() {
        assert_eq!(*code, Some(0), "rank {rank} failed:\n{stderr}");
    }
    // The strangers stayed connected until here; the ranks dropped them all the same.
    assert_named(&outs[0].2, &at_rendezvous, "rendezvous");
    assert_named(&outs[0].2, &at_rank0, "data listener of rank 0");
    assert_named(&outs[1].2, &at_rank1, "data listener of rank 1");

    // Correct results: every row of rank 0's table has #wrong 0, out of place and in place.
    let rows: Vec<Vec<&str>> = outs[0]
        .1
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(!rows.is_empty(), "no results:\n{}", outs[0].1);
    for r in &rows {
        assert_eq!((r[8], r[12]), ("0", "0"), "#wrong must be 0: {r:?}");
    }

    // Every listener is bound to the chosen interface's address (lo: 127.0.0.1), never the wildcard.
    for l in [l0, l1] {
        assert_eq!(l.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST), "{l}");
    }
    let doc: Value = serde_json::from_slice(&std::fs::read(json(0)).expect("rank 0 wrote its JSON")).unwrap();
    let ranks = doc["collbench"]["run"]["ranks"].as_array().expect("rank table");
    assert_eq!(ranks.len(), SIZE);
    for r in ranks {
        let mut addrs = vec![r["addr"].as_str().expect("addr")];
        addrs.extend(
            r["endpoints"]
                .as_array()
                .expect("endpoints")
                .iter()
                .map(|e| e["addr"].as_str().expect("endpoint addr")),
        );
        for a in addrs {
            let a: SocketAddr = a.parse().unwrap_or_else(|_| panic!("{a} is a socket address"));
            assert_eq!(a.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST), "rank {} bound {a}", r["rank"]);
        }
    }
    drop((at_rendezvous, at_rank0, at_rank1));
}

/// How a job of the two-jobs test tells itself apart.
#[derive(Clone, Copy, PartialEq)]
enum Apart {
    /// Nothing: no token, no launcher id.
    Nothing,
    /// Its own token.
    OwnToken,
    /// One token shared by both jobs, and its own job id.
    SharedTokenOwnId,
}

/// Rank `rank` of a 4-rank job named `job`, torchrun style at 127.0.0.1:`port`.
fn job_rank(job: &str, rank: usize, port: u16, apart: Apart, json: &std::path::Path) -> Child {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("collbench"));
    c.args([
        "run",
        "-b",
        "8",
        "-e",
        "8",
        "-n",
        "1",
        "-w",
        "0",
        "--iface",
        "lo",
        "--no-progress",
    ])
    .args(["--bootstrap-timeout", "20", "-J"])
    .arg(json);
    common::netns::clean_env(&mut c);
    c.env("RANK", rank.to_string())
        .env(SHOW_LISTENERS, "1")
        .env("WORLD_SIZE", "4")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string());
    let shared = "0123456789abcdef0123456789abcdef";
    match apart {
        Apart::Nothing => {}
        Apart::OwnToken => {
            c.env(
                env::JOB_TOKEN,
                if job == "A" {
                    shared.to_string()
                } else {
                    shared.replace('0', "f")
                },
            );
        }
        Apart::SharedTokenOwnId => {
            c.env(env::JOB_TOKEN, shared).env(env::JOB_ID, job);
        }
    }
    c.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("collbench starts")
}

/// Two 4-rank jobs on one rendezvous address, started interleaved: A0 A1, B2 B3, A2 A3, B0 B1. Returns, per
/// process (job, rank): exit status, stderr, and the pids of the rank table it wrote (rank 0 only), with the
/// pids of each job.
fn two_jobs(apart: Apart) -> (Vec<Ended>, [Vec<u32>; 2]) {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut procs: Vec<(&str, usize, Child, std::path::PathBuf)> = Vec::new();
    // The stderr of the ranks the start waits on, read in threads of their own.
    let mut followed: Vec<((&str, usize), std::thread::JoinHandle<String>)> = Vec::new();
    for (job, rank) in [
        ("A", 0),
        ("A", 1),
        ("B", 2),
        ("B", 3),
        ("A", 2),
        ("A", 3),
        ("B", 0),
        ("B", 1),
    ] {
        let json = dir.path().join(format!("{job}{rank}.json"));
        let mut c = job_rank(job, rank, port, apart, &json);
        // A0 first holds the rendezvous address (it announces its data listener once it does), so the jobs meet at
        // A0's rendezvous. With a shared token, B2 and B3 must have reached it (they announce their listeners just
        // before they join) before A2 and A3 start, or A may complete before B knocks and the clash go unseen.
        let waits = (job, rank) == ("A", 0) || (apart == Apart::SharedTokenOwnId && job == "B" && rank >= 2);
        if waits {
            let err = c.stderr.take().expect("piped");
            let (tx, rx) = channel();
            followed.push((
                (job, rank),
                std::thread::spawn(move || {
                    let mut all = String::new();
                    for line in BufReader::new(err).lines().map_while(Result::ok) {
                        let _ = tx.send(line.contains(" data listener for tcp@lo on "));
                        all.push_str(&line);
                        all.push('\n');
                    }
                    all
                }),
            ));
            // Until the line, or the rank's end (refused at once without a job identity).
            while let Ok(false) = rx.recv() {}
        }
        // With its own token, B2 and B3 are refused as soon as they knock: they have their answer before A2 and
        // A3 start, so A's rendezvous is still open when they come (else A may have completed and gone).
        if apart == Apart::OwnToken && (job, rank) == ("B", 3) {
            for (_, _, b, _) in procs.iter_mut().filter(|p| p.0 == "B") {
                b.wait().expect("B2 ends");
            }
            c.wait().expect("B3 ends");
        }
        procs.push((job, rank, c, json));
    }
    let mut pids = [Vec::new(), Vec::new()];
    for (job, _, c, _) in &procs {
        pids[usize::from(*job == "B")].push(c.id());
    }
    let mut out = Vec::new();
    for (job, rank, c, json) in procs {
        let o = c.wait_with_output().expect("the rank ends");
        let mut stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        if let Some(i) = followed.iter().position(|(who, _)| *who == (job, rank)) {
            stderr = followed.swap_remove(i).1.join().unwrap();
        }
        let table: Vec<u32> = std::fs::read(&json)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|v| v["collbench"]["run"]["ranks"].as_array().cloned())
            .map(|rs| rs.iter().map(|r| r["pid"].as_u64().unwrap_or(0) as u32).collect())
            .unwrap_or_default();
        out.push((job, rank, o.status.code(), stderr, table));
    }
    (out, pids)
}

/// One process of the two-jobs test: job, rank, exit status, stderr, and the pids of the table it wrote.
type Ended = (&'static str, usize, Option<i32>, String, Vec<u32>);

/// No table lists a process of the other job.
fn never_mixed(out: &[Ended], pids: &[Vec<u32>; 2]) {
    for (job, rank, code, stderr, table) in out {
        let own = &pids[usize::from(*job == "B")];
        assert!(
            table.iter().all(|p| own.contains(p)),
            "{job}{rank} (exit {code:?}) ran with another job's ranks: table {table:?}, {job}'s pids {own:?}\n{stderr}"
        );
    }
}

#[test]
fn two_jobs_without_a_token_or_job_id_at_one_rendezvous_are_refused_before_they_meet() {
    let (out, pids) = two_jobs(Apart::Nothing);
    never_mixed(&out, &pids);
    for (job, rank, code, stderr, _) in &out {
        assert_eq!(*code, Some(2), "{job}{rank}:\n{stderr}");
        assert!(
            stderr.contains("COLLBENCH_JOB_TOKEN") && stderr.contains("COLLBENCH_JOB_ID"),
            "{job}{rank}:\n{stderr}"
        );
    }
}

#[test]
fn two_jobs_with_their_own_tokens_at_one_rendezvous_never_mix_and_the_first_completes_alone() {
    let (out, pids) = two_jobs(Apart::OwnToken);
    never_mixed(&out, &pids);
    for (job, rank, code, stderr, table) in &out {
        if *job == "A" {
            assert_eq!(*code, Some(0), "A{rank}:\n{stderr}");
            if *rank == 0 {
                assert_eq!(table.len(), 4, "{stderr}");
            }
        } else {
            assert_ne!(*code, Some(0), "B{rank}:\n{stderr}");
        }
        // B's ranks 2 and 3 reach A's rendezvous, which cannot prove B's token: they stop at once, naming it.
        if *job == "B" && *rank >= 2 {
            assert_eq!(*code, Some(2), "B{rank}:\n{stderr}");
            assert!(
                stderr.contains("could not prove") && stderr.contains("MASTER_PORT"),
                "B{rank}:\n{stderr}"
            );
        }
    }
}

#[test]
fn two_jobs_sharing_a_token_but_not_a_job_id_are_refused_naming_the_clash() {
    let (out, pids) = two_jobs(Apart::SharedTokenOwnId);
    never_mixed(&out, &pids);
    for (job, rank, code, stderr, _) in &out {
        assert_ne!(
            *code,
            Some(0),
            "{job}{rank} started with a rank of the other job:\n{stderr}"
        );
    }
    // A0 serves the rendezvous both jobs meet at: it refuses both, naming the two jobs' ids.
    let a0 = &out[0];
    assert_eq!(a0.2, Some(2), "{}", a0.3);
    assert!(
        a0.3.contains("one rendezvous address")
            && a0.3.contains("COLLBENCH_JOB_ID=A")
            && a0.3.contains("COLLBENCH_JOB_ID=B"),
        "{}",
        a0.3
    );
}
