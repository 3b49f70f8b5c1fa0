//! The embedded launcher: with no launcher around, collbench starts N local ranks itself, as child
//! processes of this one (or as threads, for tests), and serves their rendezvous on loopback.

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::error::{stderr, Error, Result, EXIT_PEER};
use crate::transport::auth::Token;
use crate::world::launcher_stop::{die_with_launcher, Stopper};
use crate::world::{env, new_token, rendezvous, token_to_hex, Identity};

/// The thread serving a rendezvous; it returns every rank's info once all joined.
pub type RendezvousThread = std::thread::JoinHandle<Result<Vec<super::rank_info::RankInfo>>>;

/// Loopback, where local ranks meet and move data.
pub const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Starts a rendezvous service on loopback for `size` ranks; returns its address and the thread serving it.
pub fn start_rendezvous(size: usize, token: Token, timeout: Duration) -> Result<(SocketAddr, RendezvousThread)> {
    let l = TcpListener::bind(SocketAddr::new(LOOPBACK, 0))
        .map_err(|e| Error::io("binding the local rendezvous on 127.0.0.1", e))?;
    let addr = l
        .local_addr()
        .map_err(|e| Error::io("reading the rendezvous address", e))?;
    let h = std::thread::spawn(move || rendezvous::serve(l, size, token, timeout));
    Ok((addr, h))
}

/// Runs `np` copies of this program as ranks 0..np with `args`, waits for all, and returns the exit
/// status to use: the worst of the ranks'. A rank that dies early (signal, or a peer/transport failure)
/// gets the others stopped at once rather than left to wait out their timeouts.
pub fn launch_processes(np: usize, args: &[OsString], timeout: Duration) -> Result<i32> {
    let exe = std::env::current_exe().map_err(|e| Error::io("finding collbench's own executable", e))?;
    // Before the rendezvous thread starts, so that no thread but the watcher takes SIGTERM or SIGINT.
    let stopper = Stopper::install();
    let token = new_token();
    let (root, _server) = start_rendezvous(np, token, timeout)?;
    let mut children: Vec<Child> = Vec::with_capacity(np);
    for rank in 0..np {
        let mut cmd = Command::new(&exe);
        die_with_launcher(&mut cmd);
        let child = cmd
            .args(args)
            .env(env::RANK, rank.to_string())
            // Every embedded rank is on this host, so its local rank is its rank (one GPU each, in turn).
            .env(env::LOCAL_RANK, rank.to_string())
            .env(env::WORLD_SIZE, np.to_string())
            .env(env::ROOT, root.to_string())
            // The rendezvous is served here; a rank's own COLLBENCH_* or launcher variables must not leak in.
            .env_remove(env::JOB_TOKEN_FILE)
            .env(env::JOB_TOKEN, token_to_hex(&token))
            .env(env::LAUNCHER, "local")
            .spawn();
        match child {
            Ok(c) => {
                stopper.started(c.id());
                children.push(c);
            }
            Err(e) => {
                kill_all(&mut children);
                return Err(Error::io(
                    format!("starting local rank {rank} of {np} ({})", exe.display()),
                    e,
                ));
            }
        }
    }
    let worst = supervise(children, &stopper)?;
    Ok(match stopper.signal() {
        Some(sig) => 128 + sig,
        None => worst,
    })
}

/// How long the other ranks get, after one failed, to notice it themselves and say so before they are stopped.
const GRACE: Duration = Duration::from_secs(5);

/// Waits for every rank; returns the worst exit status. After the first failure (a signal, or a peer or
/// transport error), the rest get [`GRACE`] to end on their own, then are killed, so nothing hangs.
fn supervise(children: Vec<Child>, stopper: &Stopper) -> Result<i32> {
    let mut running: Vec<Option<Child>> = children.into_iter().map(Some).collect();
    let mut worst = 0;
    let mut stop_at: Option<Instant> = None;
    let mut killed = false;
    while running.iter().any(Option::is_some) {
        let reaped = match stop_at {
            None => Some(wait_any(true)?.expect("a blocking wait returns a child")),
            Some(deadline) => {
                if !killed && Instant::now() >= deadline {
                    let late: Vec<String> = running
                        .iter_mut()
                        .enumerate()
                        .filter_map(|(rank, c)| c.as_mut().map(|c| (rank, c)))
                        .map(|(rank, c)| {
                            let _ = c.kill();
                            rank.to_string()
                        })
                        .collect();
                    stderr!(
                        "collbench: stopped local rank(s) {} still running {} s after the first failure",
                        late.join(", "),
                        GRACE.as_secs()
                    );
                    killed = true;
                }
                match wait_any(false)? {
                    Some(x) => Some(x),
                    None => {
                        // Polling only while ranks are being wound down after a failure.
                        std::thread::sleep(Duration::from_millis(10));
                        None
                    }
                }
            }
        };
        let Some((pid, status)) = reaped else { continue };
        let Some(rank) = running.iter().position(|c| c.as_ref().is_some_and(|c| c.id() == pid)) else {
            continue;
        };
        // Reaped here, so the Child must never signal that pid again.
        running[rank] = None;
        stopper.reaped(pid);
        let code = if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            if !killed && stopper.signal().is_none() {
                let sig = if libc::WIFSIGNALED(status) {
                    libc::WTERMSIG(status)
                } else {
                    0
                };
                stderr!("collbench: local rank {rank} (pid {pid}) was killed by signal {sig}");
            }
            EXIT_PEER
        };
        if code >= EXIT_PEER && stop_at.is_none() {
            stop_at = Some(Instant::now() + GRACE);
        }
        worst = worst.max(code);
    }
    Ok(worst)
}

fn kill_all(children: &mut [Child]) {
    for c in children {
        let _ = c.kill();
    }
}

/// Reaps any child; with `block` false returns `None` when none has ended yet.
fn wait_any(block: bool) -> Result<Option<(u32, i32)>> {
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid on any child with a valid status pointer.
        let pid = unsafe { libc::waitpid(-1, &mut status, if block { 0 } else { libc::WNOHANG }) };
        if pid > 0 {
            return Ok(Some((pid as u32, status)));
        }
        if pid == 0 {
            return Ok(None);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(Error::io("waiting for local ranks", e));
        }
    }
}

/// Identities for `n` ranks sharing one fresh rendezvous on loopback, for running ranks as threads.
pub fn thread_identities(n: usize, timeout: Duration) -> Result<(Vec<Identity>, RendezvousThread)> {
    let token = new_token();
    let (root, server) = start_rendezvous(n, token, timeout)?;
    let ids = (0..n)
        .map(|rank| Identity {
            rank,
            size: n,
            root: Some(root.to_string()),
            token,
            token_from: "generated".into(),
            launcher: "threads".into(),
            serves_root: false,
        })
        .collect();
    Ok((ids, server))
}
