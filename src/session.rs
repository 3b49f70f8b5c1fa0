//! One rank's connection to the job: bootstrap through the rendezvous, then the data transport.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::net;
use crate::options::{Options, PathKind};
use crate::report::Endpoint;
use crate::transport::tcp::{connect_all, PeerAddr, TcpConfig, TcpListenerBound, TcpTransport};
use crate::world::{self, rendezvous, Identity, World};

/// A rank that knows its peers and is connected to them.
pub struct Session {
    pub world: World,
    /// One connected transport per TCP path, in `--transport` order.
    pub transports: Vec<TcpTransport>,
    /// Seconds spent opening and authenticating the data connections.
    pub connect_s: f64,
    /// The same, per TCP path (same order as `transports`).
    pub path_connect_s: Vec<f64>,
}

/// Transport tuning taken from the options.
pub fn tcp_config(opts: &Options) -> TcpConfig {
    TcpConfig {
        streams: opts.streams,
        stripe_min: 64 << 10,
        timeout: opts.timeout,
    }
}

/// How ranks exchange their endpoints.
pub enum Exchange<'a> {
    /// Through the rendezvous service at this `host:port`.
    Rendezvous(&'a str),
    /// Through MPI collectives, under an MPI launcher (feature `mpi`).
    #[cfg(feature = "mpi")]
    Mpi(&'a crate::mpi::Mpi),
}

impl<'a> Exchange<'a> {
    /// The rendezvous when the launcher named one; else MPI when it is available; else an error saying
    /// what to set.
    pub fn choose(id: &'a Identity, #[cfg(feature = "mpi")] mpi: Option<&'a crate::mpi::Mpi>) -> Result<Self> {
        if let Some(root) = &id.root {
            return Ok(Exchange::Rendezvous(root));
        }
        #[cfg(feature = "mpi")]
        if let Some(m) = mpi {
            return Ok(Exchange::Mpi(m));
        }
        Err(Error::usage(
            world::env::ROOT,
            format!(
                "{} gives rank {} of {}, but there is no rendezvous address: set {}=HOST:PORT (an address of rank 0's \
                 host; rank 0 serves it) or MASTER_ADDR and MASTER_PORT{}",
                id.launcher,
                id.rank,
                id.size,
                world::env::ROOT,
                if cfg!(feature = "mpi") {
                    ""
                } else {
                    ", or use a collbench built with --features mpi under mpirun"
                }
            ),
        ))
    }
}

/// The TCP paths to connect: those `--transport` names, or one default path (kept for control traffic)
/// when it names none.
pub fn tcp_paths(opts: &Options) -> Vec<PathKind> {
    let v: Vec<PathKind> = opts.transports.iter().filter(|p| p.is_tcp()).cloned().collect();
    if v.is_empty() {
        vec![PathKind::Tcp(None)]
    } else {
        v
    }
}

/// Binds one listener per TCP path: `tcp@IFACE` on that interface, plain `tcp` on `--iface` or `default`.
fn bind_paths(opts: &Options, default: impl Fn() -> Result<(IpAddr, String)>) -> Result<Vec<TcpListenerBound>> {
    tcp_paths(opts)
        .iter()
        .map(|p| {
            let (ip, iface) = match (p, &opts.iface) {
                (PathKind::Tcp(Some(name)), _) | (PathKind::Tcp(None), Some(name)) => {
                    (net::iface::address_of(name)?, name.clone())
                }
                _ => default()?,
            };
            TcpListenerBound::bind(ip, &iface)
        })
        .collect()
}

/// Bootstraps rank `id` and connects every TCP path.
///
/// A path's listener binds to its interface (`tcp@IFACE`, else `--iface`), or else (rendezvous) to the
/// address this host uses to reach the rendezvous, as NCCL picks the interface that reaches its root, which
/// is loopback for local ranks; (MPI) loopback when every rank is on this host, else the interface of the
/// default route.
pub fn connect(id: &Identity, opts: &Options, consensus: serde_json::Value, exchange: Exchange<'_>) -> Result<Session> {
    let started = Instant::now();
    let deadline = started + opts.timeout;
    let (mut world, bound) = match exchange {
        Exchange::Rendezvous(root) => via_rendezvous(id, opts, consensus, root, deadline)?,
        #[cfg(feature = "mpi")]
        Exchange::Mpi(m) => via_mpi(id, opts, consensus, m)?,
    };
    world.bootstrap_s = started.elapsed().as_secs_f64();
    let connect_started = Instant::now();
    let mut transports = Vec::with_capacity(bound.len());
    let mut path_connect_s = Vec::with_capacity(bound.len());
    for (k, listener) in bound.into_iter().enumerate() {
        let path_started = Instant::now();
        let peers: Vec<PeerAddr> = world
            .ranks
            .iter()
            .map(|ri| {
                let ep = ri.endpoints.get(k).ok_or_else(|| {
                    Error::Peer(format!(
                        "rank {} (host {}) published no endpoint for TCP path {k}",
                        ri.rank, ri.host
                    ))
                })?;
                let addr = ep.addr.parse().map_err(|_| {
                    Error::Peer(format!(
                        "rank {} published an unusable data address '{}' (host {})",
                        ri.rank, ep.addr, ri.host
                    ))
                })?;
                Ok(PeerAddr {
                    rank: ri.rank,
                    host: ri.host.clone(),
                    addr,
                })
            })
            .collect::<Result<_>>()?;
        transports.push(connect_all(
            listener,
            world.rank,
            &world.host,
            &peers,
            world.token,
            tcp_config(opts),
        )?);
        path_connect_s.push(path_started.elapsed().as_secs_f64());
    }
    Ok(Session {
        world,
        transports,
        connect_s: connect_started.elapsed().as_secs_f64(),
        path_connect_s,
    })
}

fn endpoints(bound: &[TcpListenerBound]) -> Vec<Endpoint> {
    bound
        .iter()
        .map(|b| Endpoint {
            iface: b.iface.clone(),
            addr: b.addr.to_string(),
        })
        .collect()
}

fn via_rendezvous(
    id: &Identity,
    opts: &Options,
    consensus: serde_json::Value,
    root: &str,
    deadline: Instant,
) -> Result<(World, Vec<TcpListenerBound>)> {
    // Named interfaces are checked before this rank joins, not after the others started waiting for it.
    for p in tcp_paths(opts) {
        if let PathKind::Tcp(Some(name)) = p {
            net::iface::address_of(&name)?;
        }
    }
    if let Some(name) = &opts.iface {
        net::iface::address_of(name)?;
    }
    if id.serves_root {
        let listener = rendezvous::bind_root(root)?;
        let (size, token, timeout) = (id.size, id.token, opts.timeout);
        // Detached: it ends once every rank has joined (or its deadline passes); every rank hears its verdict.
        std::thread::spawn(move || rendezvous::serve(listener, size, token, timeout));
    }
    let who = format!("rank {} (host {})", id.rank, world::hostname());
    let sock = rendezvous::connect(root, deadline, &who)?;
    let local = sock
        .local_addr()
        .map_err(|e| Error::io(format!("{who}: reading the local address"), e))?
        .ip();
    let bound = bind_paths(opts, || {
        Ok((local, net::iface::name_of(local).unwrap_or_else(|| local.to_string())))
    })?;
    let world = world::bootstrap(id, sock, endpoints(&bound), consensus, deadline)?;
    Ok((world, bound))
}

#[cfg(feature = "mpi")]
fn via_mpi(
    id: &Identity,
    opts: &Options,
    consensus: serde_json::Value,
    m: &crate::mpi::Mpi,
) -> Result<(World, Vec<TcpListenerBound>)> {
    if m.size() != id.size || m.rank() != id.rank {
        return Err(Error::usage(
            "launcher",
            format!(
                "{} says rank {} of {}, but MPI says rank {} of {}; was collbench started by a different launcher than \
                 the MPI library expects?",
                id.launcher,
                id.rank,
                id.size,
                m.rank(),
                m.size()
            ),
        ));
    }
    let host = world::hostname();
    let hosts = m.allgather_bytes(host.as_bytes());
    let single_host = hosts.iter().all(|h| h == host.as_bytes());
    let bound = bind_paths(opts, || {
        if single_host {
            Ok((world::local::LOOPBACK, "lo".to_string()))
        } else {
            net::iface::default_iface()
        }
    })?;
    // MPI's own channel is trusted: rank 0's random token reaches every rank through it.
    let tok = m.broadcast_bytes(&world::new_token());
    let token: world::Token = tok.as_slice().try_into().map_err(|_| {
        Error::Peer(format!(
            "rank {} (host {host}): rank 0 sent a malformed job token through MPI; mixed collbench versions?",
            id.rank
        ))
    })?;
    let me = rendezvous::Join {
        rank: id.rank,
        size: id.size,
        host: host.clone(),
        pid: std::process::id(),
        endpoints: endpoints(&bound),
        version: env!("CARGO_PKG_VERSION").to_string(),
        consensus,
    };
    let joins: Vec<rendezvous::Join> = m
        .allgather_bytes(&serde_json::to_vec(&me).expect("a join serialises"))
        .iter()
        .enumerate()
        .map(|(r, b)| {
            serde_json::from_slice(b).map_err(|e| Error::Peer(format!("rank {r} sent an unreadable endpoint: {e}")))
        })
        .collect::<Result<_>>()?;
    let refs: Vec<&rendezvous::Join> = joins.iter().collect();
    if let Some(msg) = rendezvous::disagreement(&refs) {
        return Err(Error::usage("options", msg));
    }
    let ranks = joins.iter().map(|j| j.info()).collect();
    let world = World {
        rank: id.rank,
        size: id.size,
        host,
        launcher: format!("{} (endpoints exchanged through MPI)", id.launcher),
        token,
        token_from: "random, from rank 0 through MPI".into(),
        ranks,
        bootstrap_s: 0.0,
    };
    Ok((world, bound))
}

/// Runs `n` ranks as threads of this process, each connected over loopback, and returns what `f`
/// returned on each rank (in rank order). For tests and benchmarks of the library.
pub fn run_threads<R: Send>(n: usize, opts: &Options, f: impl Fn(&mut Session) -> R + Sync) -> Vec<Result<R>> {
    let (ids, server) = match world::local::thread_identities(n, opts.timeout.max(Duration::from_secs(1))) {
        Ok(x) => x,
        Err(e) => return vec![Err(e)],
    };
    let consensus = serde_json::json!({});
    let out = std::thread::scope(|s| {
        let handles: Vec<_> = ids
            .iter()
            .map(|id| {
                let (f, consensus) = (&f, consensus.clone());
                s.spawn(move || {
                    let ex = Exchange::Rendezvous(id.root.as_deref().expect("thread ranks have a rendezvous"));
                    connect(id, opts, consensus, ex).map(|mut sess| f(&mut sess))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank thread panicked"))
            .collect()
    });
    let _ = server.join();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rendezvous_and_no_mpi_says_what_to_set() {
        let id = Identity {
            rank: 1,
            size: 2,
            root: None,
            token: [0; 16],
            token_from: String::new(),
            launcher: "mpirun (OpenMPI)".into(),
            serves_root: false,
        };
        let e = match Exchange::choose(
            &id,
            #[cfg(feature = "mpi")]
            None,
        ) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("must refuse"),
        };
        assert!(
            e.contains("COLLBENCH_ROOT") && e.contains("MASTER_ADDR") && e.contains("OpenMPI"),
            "{e}"
        );
    }
}
