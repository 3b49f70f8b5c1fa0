//! One rank's connection to the job: bootstrap through the rendezvous, then the data transport.

use std::time::{Duration, Instant};

use crate::error::Result;
use crate::options::Options;
use crate::transport::tcp::{connect_all, PeerAddr, TcpConfig, TcpListenerBound, TcpTransport};
use crate::world::{self, local::LOOPBACK, Identity, World};

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

/// Bootstraps rank `id` and connects its data path on loopback.
pub fn connect(id: &Identity, opts: &Options, consensus: serde_json::Value) -> Result<Session> {
    let bound = TcpListenerBound::bind(LOOPBACK, "lo")?;
    let world = world::bootstrap(id, bound.addr, &bound.iface, consensus, opts.timeout)?;
    let started = Instant::now();
    let peers: Vec<PeerAddr> = world
        .ranks
        .iter()
        .map(|ri| {
            let addr = ri.addr.parse().map_err(|_| {
                crate::error::Error::Peer(format!(
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
        connect_s: started.elapsed().as_secs_f64(),
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
