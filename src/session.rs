//! One rank's connection to the job: bootstrap through the rendezvous, then the data transport.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::net;
use crate::options::Options;
use crate::transport::tcp::{connect_all, PeerAddr, TcpConfig, TcpListenerBound, TcpTransport};
use crate::world::{self, rendezvous, Identity, World};

/// A rank that knows its peers and is connected to them.
pub struct Session {
    pub world: World,
    pub transport: TcpTransport,
    /// Seconds spent opening and authenticating the data connections.
    pub connect_s: f64,
}

/// Transport tuning taken from the options.
pub fn tcp_config(opts: &Options) -> TcpConfig {
    TcpConfig {
        streams: opts.streams,
        stripe_min: 64 << 10,
        timeout: opts.timeout,
    }
}

/// Bootstraps rank `id` and connects its data path.
///
/// The data listener binds to `--iface`'s address, or else to the address this host uses to reach the
/// rendezvous (as NCCL picks the interface that reaches its root), which is loopback for local ranks.
pub fn connect(id: &Identity, opts: &Options, consensus: serde_json::Value) -> Result<Session> {
    let started = Instant::now();
    let deadline = started + opts.timeout;
    if id.serves_root {
        let listener = rendezvous::bind_root(&id.root)?;
        let (size, token, timeout) = (id.size, id.token, opts.timeout);
        // Detached: it ends once every rank has joined (or its deadline passes); every rank hears its verdict.
        std::thread::spawn(move || rendezvous::serve(listener, size, token, timeout));
    }
    let who = format!("rank {} (host {})", id.rank, world::hostname());
    let sock = rendezvous::connect(&id.root, deadline, &who)?;
    let (ip, iface) = match &opts.iface {
        Some(name) => (net::iface::address_of(name)?, name.clone()),
        None => {
            let ip = sock
                .local_addr()
                .map_err(|e| Error::io(format!("{who}: reading the local address"), e))?
                .ip();
            (ip, net::iface::name_of(ip).unwrap_or_else(|| ip.to_string()))
        }
    };
    let bound = TcpListenerBound::bind(ip, &iface)?;
    let mut world = world::bootstrap(id, sock, bound.addr, &bound.iface, consensus, deadline)?;
    world.bootstrap_s = started.elapsed().as_secs_f64();
    let connect_started = Instant::now();
    let peers: Vec<PeerAddr> = world
        .ranks
        .iter()
        .map(|ri| {
            let addr = ri.addr.parse().map_err(|_| {
                Error::Peer(format!(
                    "rank {} published an unusable data address '{}' (host {})",
                    ri.rank, ri.addr, ri.host
                ))
            })?;
            Ok(PeerAddr {
                rank: ri.rank,
                host: ri.host.clone(),
                addr,
            })
        })
        .collect::<Result<_>>()?;
    let transport = connect_all(bound, world.rank, &world.host, &peers, world.token, tcp_config(opts))?;
    Ok(Session {
        world,
        transport,
        connect_s: connect_started.elapsed().as_secs_f64(),
    })
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
                s.spawn(move || connect(id, opts, consensus).map(|mut sess| f(&mut sess)))
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
