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

/// The four strangers against `target`: a well-formed opening with the wrong token, random bytes, nothing at
/// all, and the first half of an opening with the right token.
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

/// Rendezvous opening: magic, version, token, then a length-prefixed JSON frame.
fn rendezvous_opening(token: &Token, frame: &[u8]) -> Vec<u8> {
    let mut b = b"CBRV".to_vec();
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(token);
    b.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    b.extend_from_slice(frame);
    b
}

fn data_hello(token: Token, from: u32, to: u32) -> [u8; HELLO_LEN] {
    Hello {
        token,
        from,
        to,
        stream: 0,
        nstreams: 1,
    }
    .encode()
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
    let wrong = new_token();
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
        rendezvous_opening(&wrong, br#"{"rank":1}"#),
        rendezvous_opening(&token, b"")[..13].to_vec(),
    );
    let at_rank0 = strangers(
        l0,
        data_hello(wrong, 2, 0).to_vec(),
        data_hello(token, 2, 0)[..HELLO_LEN / 2].to_vec(),
    );
    // Rank 1 accepts rank 2's connections: strangers reach its listener too.
    let r1 = start(1, port, &token, &json(1));
    let l1 = listener_of(&r1);
    let at_rank1 = strangers(
        l1,
        data_hello(wrong, 2, 1).to_vec(),
        data_hello(token, 2, 1)[..HELLO_LEN / 2].to_vec(),
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
