//! What a hostile neighbour or a bad launcher environment does to a job, through the binary: a world size no
//! job has; a flood of silent connections and garbage on every listener while a 4-rank job sets up (the job
//! must not notice, and stderr must stay a few lines); a peer holding the token that sends part of an abort
//! frame and closes.

mod common;

use std::process::{Command, Stdio};

use collbench::world::env;

/// Rank 0 alone, told the job has `size` ranks, giving up after a one-second bootstrap, with both descriptor
/// limits set to `nofile` where given; its exit code, stderr and peak resident memory in KiB.
fn rank0_of(size: &str, nofile: Option<u64>) -> (Option<i32>, String, i64) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("collbench"));
    common::netns::clean_env(&mut cmd)
        .args(["run", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "--iface", "lo"])
        .args(["--bootstrap-timeout", "1"])
        .env(env::RANK, "0")
        .env(env::WORLD_SIZE, size)
        .env(env::ROOT, format!("127.0.0.1:{port}"))
        .env(env::JOB_TOKEN, "000102030405060708090a0b0c0d0e0f")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(n) = nofile {
        use std::os::unix::process::CommandExt;
        let lim = libc::rlimit {
            rlim_cur: n,
            rlim_max: n,
        };
        // SAFETY: setrlimit is async-signal-safe and reads only `lim`, copied into the closure.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            })
        };
    }
    let mut child = cmd.spawn().expect("collbench starts");
    let stderr = std::thread::spawn({
        let mut err = child.stderr.take().expect("piped");
        move || {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut err, &mut s).expect("stderr reads");
            s
        }
    });
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for this test's own child, writing only `status` and `usage`; the Child is not waited on
    // again (it is forgotten below), so the pid is not reused under it.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as libc::pid_t, "wait4 failed");
    std::mem::forget(child);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, stderr.join().unwrap(), usage.ru_maxrss)
}

#[test]
fn a_world_size_beyond_the_bound_exits_2_naming_the_variable_and_the_bound() {
    // 2^32-1 made rank 0 allocate 584 GB and abort; 2^64-1 panicked with "capacity overflow".
    for size in ["131073", "1048577", "99999999", "4294967295", "18446744073709551615"] {
        let (code, stderr, _) = rank0_of(size, None);
        assert_eq!(code, Some(2), "WORLD_SIZE={size}:\n{stderr}");
        assert!(
            stderr.contains(env::WORLD_SIZE) && stderr.contains("at most 131072"),
            "WORLD_SIZE={size}:\n{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn a_world_size_at_the_bound_costs_memory_only_for_the_ranks_that_joined() {
    // Before, the rendezvous sized a table by the announced size: 157 MB resident at 2^20 ranks. Per joined
    // rank, rank 0 stays near its usual ~20 MB. Where the descriptors for one connection per rank do not fit
    // under the hard limit, it says so at once instead.
    let (code, stderr, maxrss_kib) = rank0_of(&env::MAX_WORLD_SIZE.to_string(), None);
    let hard = nofile().1;
    if hard < env::MAX_WORLD_SIZE as u64 + 64 {
        assert_eq!(code, Some(2), "hard limit {hard}:\n{stderr}");
        assert!(stderr.contains("ulimit -n"), "{stderr}");
    } else {
        assert_eq!(code, Some(3), "{stderr}");
    }
    assert!(maxrss_kib < 64 * 1024, "peak resident {maxrss_kib} KiB:\n{stderr}");
    assert!(stderr.len() < 4096, "{} bytes of stderr", stderr.len());
}

#[test]
fn rank_0_without_descriptors_for_every_rank_says_so_at_once_naming_the_limit() {
    let (code, stderr, _) = rank0_of("5000", Some(1024));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("5000 ranks") && stderr.contains("hard limit 1024") && stderr.contains("ulimit -n"),
        "{stderr}"
    );
}

/// This process's soft and hard descriptor limits.
fn nofile() -> (u64, u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct it is given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    (lim.rlim_cur, lim.rlim_max)
}

/// One rank started through the binary, its stderr read line by line as it comes.
struct Rank {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
}

fn start(rank: usize, size: usize, port: u16, token: &env_token::Token) -> Rank {
    use std::io::BufRead;
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("collbench"));
    common::netns::clean_env(&mut cmd)
        .args([
            "run", "-b", "8", "-e", "64K", "-n", "3", "-w", "1", "-T", "60", "--iface", "lo",
        ])
        .env(env::RANK, rank.to_string())
        .env(env::WORLD_SIZE, size.to_string())
        .env(env::ROOT, format!("127.0.0.1:{port}"))
        .env(env::JOB_TOKEN, collbench::world::token_to_hex(token))
        .env(collbench::session::SHOW_LISTENERS, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("collbench starts");
    let err = child.stderr.take().expect("piped");
    let (tx, lines) = std::sync::mpsc::channel();
    let stderr = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
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
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = r
            .lines
            .recv_timeout(left)
            .expect("the rank announces its data listener");
        if let Some(addr) = line.split(" data listener for tcp@lo on ").nth(1) {
            return addr.trim().parse().expect("a socket address");
        }
    }
}

mod env_token {
    pub use collbench::world::Token;
}

use std::net::{SocketAddr, TcpStream};

/// Silent connections to `to` from the loopback address `src`, opened by 8 threads; those that could be opened
/// (a listener whose backlog is full makes the rest wait for SYN retries: they give up after 3 s).
fn silent(src: [u8; 4], to: SocketAddr, n: usize) -> std::thread::JoinHandle<Vec<TcpStream>> {
    std::thread::spawn(move || {
        let workers: Vec<_> = (0..8)
            .map(|w| {
                std::thread::spawn(move || {
                    let mut out = Vec::new();
                    for _ in (w..n).step_by(8) {
                        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
                        s.bind(&SocketAddr::from((src, 0)).into()).unwrap();
                        if s.connect_timeout(&to.into(), std::time::Duration::from_secs(20))
                            .is_ok()
                        {
                            out.push(s.into());
                        }
                    }
                    out
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    })
}

/// Garbage against `to`, 25 connections of each kind: HTTP, random bytes, a collbench opening with a wrong
/// token (`wrong`), and the first half of a right one (`half`); kept open. Connections a closed listener
/// refuses are skipped (the highest rank's listener closes as soon as its set-up is done).
fn garbage(to: SocketAddr, wrong: &[u8], half: &[u8]) -> Vec<TcpStream> {
    use std::io::Write;
    let mut random: Vec<u8> = (0..4).flat_map(|_| collbench::world::new_token()).collect();
    random[0] = 0xFF;
    let kinds: [&[u8]; 4] = [b"GET / HTTP/1.0\r\n\r\n", &random, wrong, half];
    let mut out = Vec::new();
    for k in kinds {
        for _ in 0..25 {
            if let Ok(mut s) = TcpStream::connect_timeout(&to, std::time::Duration::from_secs(3)) {
                let _ = s.write_all(k);
                out.push(s);
            }
        }
    }
    out
}

#[test]
fn a_flood_of_strangers_on_every_listener_costs_a_4_rank_job_nothing_and_stderr_stays_short() {
    use collbench::transport::tcp::handshake::{Hello, HELLO_LEN};
    const SILENT: usize = 5000;
    common::raise_nofile(16384);
    let token = collbench::world::new_token();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let root: SocketAddr = ([127, 0, 0, 1], port).into();
    // Openings of processes without the token: a hello, then a proof they cannot make (zeros).
    let rendezvous_opening = |frame: &[u8]| {
        let mut b = b"CBRV".to_vec();
        b.extend_from_slice(&2u16.to_le_bytes());
        b.extend_from_slice(&collbench::world::new_token());
        b.push(1);
        b.extend_from_slice(&[0; 32]);
        b.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        b.extend_from_slice(frame);
        b
    };
    let hello = |to| {
        Hello {
            from: 3,
            to,
            stream: 0,
            nstreams: 1,
            nonce: collbench::world::new_token(),
        }
        .encode()
    };
    let unproved = |to| {
        let mut b = hello(to).to_vec();
        b.push(1);
        b.extend_from_slice(&[0; 32]);
        b
    };

    // Rank 0 serves the rendezvous; once it announces its data listener both are up. 5,000 silent connections
    // reach each (half from 127.0.0.1, the ranks' own address, half from 127.0.0.2) before any other rank
    // starts: the rendezvous's and the listener's unauthenticated slots (4,096) are full when ranks 1-3 come.
    let r0 = start(0, 4, port, &token);
    let l0 = listener_of(&r0);
    let at_root: Vec<TcpStream> = [
        silent([127, 0, 0, 1], root, SILENT / 2),
        silent([127, 0, 0, 2], root, SILENT / 2),
    ]
    .into_iter()
    .flat_map(|f| f.join().unwrap())
    .collect();
    // Rank 0's data listener is not served before every rank joined: its backlog (4,096) fills, and the rest of
    // the flood waits in the kernel's SYN retries until set-up starts, so it goes on while the others start.
    let at_l0 = [
        silent([127, 0, 0, 1], l0, SILENT / 2),
        silent([127, 0, 0, 2], l0, SILENT / 2),
    ];
    let n_root = at_root.len();
    let mut held: Vec<TcpStream> = at_root;
    held.extend(garbage(
        root,
        &rendezvous_opening(br#"{"rank":1}"#),
        &rendezvous_opening(b"")[..13],
    ));
    let l0_garbage = {
        let (w, h) = (unproved(0), hello(0));
        std::thread::spawn(move || garbage(l0, &w, &h[..HELLO_LEN / 2]))
    };
    let mut ranks = vec![r0];
    for r in 1..4 {
        let rank = start(r, 4, port, &token);
        let l = listener_of(&rank);
        held.extend(garbage(l, &unproved(r as u32), &hello(r as u32)[..HELLO_LEN / 2]));
        ranks.push(rank);
    }
    let mut n_l0 = 0;
    for f in at_l0 {
        let socks = f.join().unwrap();
        n_l0 += socks.len();
        held.extend(socks);
    }
    let l0_garbage = l0_garbage.join().unwrap();
    n_l0 += l0_garbage.len();
    held.extend(l0_garbage);
    // More unauthenticated connections than the 4,096 slots of each, silent and garbage together (not always
    // all 5,000 silent ones on the data listener: its accept queue holds 4,097 until set-up starts serving it,
    // and some of the rest give up in the SYN retries).
    assert!(
        n_root > 4096 && n_l0 > 4096,
        "unauthenticated connections made: {n_root} to the rendezvous and {n_l0} to rank 0's listener"
    );

    let mut outs = Vec::new();
    for r in ranks {
        let out = r.child.wait_with_output().expect("rank ends");
        outs.push((
            out.status.code(),
            common::netns::text(&out.stdout),
            r.stderr.join().unwrap(),
        ));
    }
    drop(held);
    for (rank, (code, _, stderr)) in outs.iter().enumerate() {
        assert_eq!(*code, Some(0), "rank {rank} failed:\n{stderr}");
        // A line per dropped connection would be thousands: a few named, then one summary per listener.
        let lines = stderr.lines().count();
        eprintln!(
            "rank {rank}: exit {code:?}, stderr {lines} lines, {} bytes",
            stderr.len()
        );
        assert!(
            lines <= 40 && stderr.len() <= 16 * 1024,
            "rank {rank}: {lines} lines, {} bytes:\n{stderr}",
            stderr.len()
        );
    }
    let summaries: Vec<&str> = outs[0]
        .2
        .lines()
        .filter(|l| l.contains(" connections in all ("))
        .collect();
    assert_eq!(
        summaries.len(),
        2,
        "one summary for the rendezvous, one for the data listener:\n{}",
        outs[0].2
    );
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
}

/// Rank 1 of a 2-rank job played by this test with the job's token: it joins the rendezvous at `root` with
/// the options rank 0 was started with (`run_args`, after `collbench`), connects and proves itself to rank 0's
/// data listener, and returns that authenticated connection and its own data listener (to keep open).
fn join_as_rank_1(root: &str, token: &env_token::Token, run_args: &[&str]) -> (TcpStream, std::net::TcpListener) {
    use clap::Parser;
    use collbench::transport::tcp::handshake::{answer_challenge, decode_ack, Hello, ACK_LEN, CHALLENGE_LEN};
    use collbench::world::rank_info::Endpoint;
    use collbench::world::rendezvous::{self, Join};
    use std::io::{Read, Write};

    let cli = collbench::cli::Cli::try_parse_from(std::iter::once("collbench").chain(run_args.iter().copied()))
        .expect("rank 0's command line parses");
    let collbench::cli::Command::Run(args) = cli.command else {
        panic!("not a run")
    };
    let opts = collbench::options::Options::from_cli(&args).expect("rank 0's options are valid");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let me = Join {
        rank: 1,
        size: 2,
        host: collbench::world::hostname(),
        pid: std::process::id(),
        endpoints: vec![Endpoint {
            iface: "lo".into(),
            addr: listener.local_addr().unwrap().to_string(),
            reason: Some("chosen by --iface lo".into()),
        }],
        version: env!("CARGO_PKG_VERSION").into(),
        consensus: opts.agreement().to_wire(),
        job: Vec::new(),
        relay: None,
        refused: None,
    };
    let ranks = rendezvous::join(root, token, &me, std::time::Duration::from_secs(60)).expect("rank 0 welcomes rank 1");
    let mut sock = TcpStream::connect(ranks[0].addr.as_str()).expect("rank 0's data listener answers");
    let hello = Hello {
        from: 1,
        to: 0,
        stream: 0,
        nstreams: 1,
        nonce: collbench::world::new_token(),
    };
    sock.write_all(&hello.encode()).unwrap();
    let mut challenge = [0u8; CHALLENGE_LEN];
    sock.read_exact(&mut challenge).unwrap();
    sock.write_all(&answer_challenge(token, &hello, &challenge).expect("rank 0 proves the token"))
        .unwrap();
    let mut ack = [0u8; ACK_LEN];
    sock.read_exact(&mut ack).unwrap();
    decode_ack(&ack).expect("rank 0 accepts rank 1");
    (sock, listener)
}

#[test]
fn a_peer_that_closes_in_the_middle_of_an_abort_frame_is_named_at_once() {
    // Before, rank 0 read the partial frame's bytes as progress for ever: 100% CPU, the close never seen, -T
    // never reached.
    use std::io::Write;
    let token = collbench::world::new_token();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let root = format!("127.0.0.1:{port}");
    let run_args = [
        "run", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "-T", "5", "--iface", "lo",
    ];
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("collbench"));
    common::netns::clean_env(&mut cmd)
        .args(run_args)
        .env(env::RANK, "0")
        .env(env::WORLD_SIZE, "2")
        .env(env::ROOT, &root)
        .env(env::JOB_TOKEN, collbench::world::token_to_hex(&token))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("collbench starts");
    let pid = child.id();
    let mut err = child.stderr.take().expect("piped");
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).expect("stderr reads");
        s
    });
    let (ended_tx, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || ended_tx.send(child.wait().expect("rank 0 is waited on")));

    let (mut sock, _listener) = join_as_rank_1(&root, &token, &run_args);
    // An abort frame announcing 60,000 bytes of note, 100 of them, then the close.
    let mut frame = u32::MAX.to_le_bytes().to_vec();
    frame.extend_from_slice(&60_000u32.to_le_bytes());
    frame.extend_from_slice(&[0; 8]);
    frame.extend_from_slice(&[b'x'; 100]);
    sock.write_all(&frame).unwrap();
    drop(sock);

    let Ok(status) = ended.recv_timeout(std::time::Duration::from_secs(60)) else {
        // SAFETY: kill has no memory-safety preconditions; the pid is this test's child, not yet reaped.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        panic!(
            "rank 0 was still running a minute after rank 1 closed (-T 5):\n{}",
            stderr.join().unwrap()
        );
    };
    let stderr = stderr.join().unwrap();
    assert_eq!(status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("closed by the peer in the middle of an abort frame (116 of its 60016 bytes)")
            && stderr.contains("rank 1 (host "),
        "{stderr}"
    );
}
