//! The embedded launcher: with no launcher around, collbench starts N local ranks itself, as child
//! processes of this one (or as threads, for tests), and serves their rendezvous on loopback.

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::process::{Child, Command};
use std::time::Duration;

use crate::error::{Error, Result, EXIT_PEER};
use crate::transport::tcp::handshake::Token;
use crate::world::{env, new_token, rendezvous, token_to_hex, Identity};

/// The thread serving a rendezvous; it returns every rank's info once all joined.
pub type RendezvousThread = std::thread::JoinHandle<Result<Vec<crate::report::RankInfo>>>;

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
    let token = new_token();
    let (root, _server) = start_rendezvous(np, token, timeout)?;
    let mut children: Vec<Child> = Vec::with_capacity(np);
    for rank in 0..np {
        let child = Command::new(&exe)
            .args(args)
            .env(env::RANK, rank.to_string())
            .env(env::WORLD_SIZE, np.to_string())
            .env(env::ROOT, root.to_string())
            .env(env::JOB_TOKEN, token_to_hex(&token))
            .env(env::LAUNCHER, "local")
            .spawn();
        match child {
            Ok(c) => children.push(c),
            Err(e) => {
                kill_all(&mut children);
                return Err(Error::io(
                    format!("starting local rank {rank} of {np} ({})", exe.display()),
                    e,
                ));
            }
        }
    }
    let mut worst = 0;
    let mut left = np;
    while left > 0 {
        let (pid, status) = wait_any()?;
        let Some(rank) = children.iter().position(|c| c.id() == pid) else {
            continue;
        };
        left -= 1;
        let code = if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            let sig = if libc::WIFSIGNALED(status) {
                libc::WTERMSIG(status)
            } else {
                0
            };
            eprintln!("collbench: local rank {rank} (pid {pid}) was killed by signal {sig}; stopping the other ranks");
            EXIT_PEER
        };
        if code >= EXIT_PEER || (code != 0 && !libc::WIFEXITED(status)) {
            kill_all(&mut children);
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

/// Waits for any child to end; returns its pid and raw wait status.
fn wait_any() -> Result<(u32, i32)> {
    loop {
        let mut status = 0;
        // SAFETY: plain waitpid on any child with a valid status pointer.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid > 0 {
            return Ok((pid as u32, status));
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
            root,
            token,
            launcher: "threads".into(),
        })
        .collect();
    Ok((ids, server))
}
