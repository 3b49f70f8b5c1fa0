//! One rank's connection to the job: bootstrap through the rendezvous, then the data transport.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::algorithm::peers::Links;
use crate::error::{stderr, Error, Result};
use crate::net;
use crate::net::choose::Choice;
use crate::options::{Options, PathKind};
use crate::results::{Endpoint, RankInfo};
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
    /// The rank pairs every TCP path connected.
    pub links: Links,
    /// The MPI library, where this rank started it: it carries the `mpi` path's collectives.
    pub mpi: MpiHandle,
}

/// The MPI library when this rank started it (feature `mpi`), held by the session so nothing else passes it
/// around; empty in a build without the feature.
#[derive(Default)]
pub struct MpiHandle {
    #[cfg(feature = "mpi")]
    mpi: Option<crate::mpi::Mpi>,
}

impl MpiHandle {
    /// MPI, when a path needs it (`needed`) or when the launcher named no rendezvous (so endpoints go through
    /// MPI); an MPI world that is not the launcher's job is refused. Without the feature: nothing.
    pub fn start(needed: bool, id: &Identity) -> Result<MpiHandle> {
        #[cfg(feature = "mpi")]
        if needed || id.root.is_none() {
            let m = crate::mpi::Mpi::init()?;
            if m.size() != id.size {
                return Err(Error::usage(
                    "--transport",
                    format!(
                        "MPI sees {} rank(s) but {} says the job has {}: MPI needs ranks started by an MPI launcher \
                         (mpirun, or srun with PMI/PMIx)",
                        m.size(),
                        id.launcher,
                        id.size
                    ),
                ));
            }
            return Ok(MpiHandle { mpi: Some(m) });
        }
        let _ = (needed, id);
        Ok(MpiHandle::default())
    }

    /// The library, where it was started.
    #[cfg(feature = "mpi")]
    pub fn get(&self) -> Option<&crate::mpi::Mpi> {
        self.mpi.as_ref()
    }
}

/// Transport tuning taken from the options.
pub fn tcp_config(opts: &Options) -> TcpConfig {
    TcpConfig {
        streams: opts.tcp.streams,
        stripe_min: 64 << 10,
        timeout: opts.deadlines.timeout,
        connect_timeout: opts.deadlines.connect_timeout,
        spin: opts.tcp.spin,
        sndbuf: opts.tcp.sndbuf,
        congestion: opts.tcp.tcp_congestion.clone(),
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
    /// The rendezvous when the launcher named one; else MPI when it was started; else an error saying what
    /// to set.
    pub fn choose(id: &'a Identity, mpi: &'a MpiHandle) -> Result<Self> {
        if let Some(root) = &id.root {
            return Ok(Exchange::Rendezvous(root));
        }
        #[cfg(feature = "mpi")]
        if let Some(m) = mpi.get() {
            return Ok(Exchange::Mpi(m));
        }
        let _ = mpi;
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
    let v: Vec<PathKind> = opts.paths.transports.iter().filter(|p| p.is_tcp()).cloned().collect();
    if v.is_empty() {
        vec![PathKind::default()]
    } else {
        v
    }
}

/// Where one TCP path binds on this host, and why.
struct PathBind {
    choice: Choice,
    /// The path's name when a SPEC gave it (`tcp@ib0|eth0`); else it is named after rank 0's interface.
    label: Option<String>,
}

/// Chooses each TCP path's interface on this host: `tcp@SPEC` by its SPEC, plain `tcp` by `--iface SPEC`,
/// else by the default rule ([`net::choose`]) for a `single_host` job or not, given the local address of the
/// connection to the rendezvous where there is one.
fn plan_paths(opts: &Options, single_host: bool, reaches_rendezvous: Option<IpAddr>) -> Result<Vec<PathBind>> {
    tcp_paths(opts)
        .iter()
        .map(|p| {
            let by_spec = |spec: &str, flag: &str, reason: String| {
                net::iface::resolve(spec, flag).map(|(name, addr)| Choice { name, addr, reason })
            };
            Ok(match (p.tcp_spec(), &opts.tcp.iface) {
                (Some(spec), _) => PathBind {
                    choice: by_spec(spec, "--transport", format!("chosen by tcp@{spec}"))?,
                    label: Some(p.to_string()),
                },
                (_, Some(spec)) => PathBind {
                    choice: by_spec(spec, "--iface", format!("chosen by --iface {spec}"))?,
                    label: None,
                },
                _ => PathBind {
                    choice: net::iface::default_choice(single_host, reaches_rendezvous)?,
                    label: None,
                },
            })
        })
        .collect()
}

/// Binds one listener per planned path; with the reason of each.
fn bind_paths(plan: Vec<PathBind>) -> Result<Vec<(TcpListenerBound, String)>> {
    plan.into_iter()
        .map(|p| {
            let bound = TcpListenerBound::bind(p.choice.addr, &p.choice.name)?;
            let bound = match p.label {
                Some(l) => bound.labelled(l),
                None => bound,
            };
            Ok((bound, p.choice.reason))
        })
        .collect()
}

/// Set (to anything) to have each rank print the address of every data listener as soon as it is bound, before
/// the bootstrap: a testing and debugging aid (the security tests connect strangers to these listeners while a
/// job is still setting up). The addresses are in the JSON rank table too, but only once the run has finished.
pub const SHOW_LISTENERS: &str = "COLLBENCH_SHOW_LISTENERS";

/// The [`SHOW_LISTENERS`] lines: `collbench: rank R: data listener for PATH on ADDR`.
fn show_listeners(rank: usize, bound: &[(TcpListenerBound, String)]) {
    if std::env::var_os(SHOW_LISTENERS).is_none() {
        return;
    }
    for (b, _) in bound {
        let path = b.label.clone().unwrap_or_else(|| format!("tcp@{}", b.iface));
        stderr!("collbench: rank {rank}: data listener for {path} on {}", b.addr);
    }
}

/// Whether every rank of the job runs on this host, as far as a rank can tell before the bootstrap: the
/// embedded launcher (processes or threads), a job of one, a launcher whose ranks-on-this-node count
/// (`local_size`) is the whole job, or a rendezvous at a literal loopback address (which only this host
/// can reach).
pub fn single_host_job(id: &Identity, local_size: Option<usize>) -> bool {
    let loopback_root = id.root.as_deref().is_some_and(|r| {
        r.parse::<std::net::SocketAddr>().is_ok_and(|a| a.ip().is_loopback())
            || r.rsplit_once(':')
                .is_some_and(|(h, _)| h.eq_ignore_ascii_case("localhost"))
    });
    matches!(id.launcher.as_str(), "local" | "threads") || id.size <= 1 || local_size == Some(id.size) || loopback_root
}

/// One stderr line per TCP path for rank 0: which interface each host bound and why, e.g.
/// `collbench: tcp path: interface ib0 on every host (IPoIB preferred)`, or the hosts where it differs.
pub fn path_lines(paths: &[PathKind], ranks: &[RankInfo]) -> Vec<String> {
    paths
        .iter()
        .enumerate()
        .map(|(k, p)| {
            // (interface, reason) -> hosts, in rank order.
            let mut groups: Vec<((String, String), Vec<&str>)> = Vec::new();
            for r in ranks {
                let Some(ep) = r.endpoints.get(k) else { continue };
                let key = (
                    ep.iface.clone(),
                    ep.reason.clone().unwrap_or_else(|| "reason not given".into()),
                );
                match groups.iter_mut().find(|(g, _)| *g == key) {
                    Some((_, hosts)) if hosts.contains(&r.host.as_str()) => {}
                    Some((_, hosts)) => hosts.push(&r.host),
                    None => groups.push((key, vec![&r.host])),
                }
            }
            match &groups[..] {
                [((iface, why), _)] => format!("collbench: {p} path: interface {iface} on every host ({why})"),
                _ => {
                    let each: Vec<String> = groups
                        .iter()
                        .map(|((iface, why), hosts)| format!("{iface} on {} ({why})", hosts.join(", ")))
                        .collect();
                    format!(
                        "collbench: {p} path: interface differs between hosts: {}",
                        each.join("; ")
                    )
                }
            }
        })
        .collect()
}

/// Bootstraps rank `id` (through the rendezvous, else through `mpi`) and connects every TCP path; the
/// session keeps `mpi`.
///
/// A path's listener binds to the interface its SPEC picks (`tcp@SPEC`, else `--iface SPEC`), or else to the
/// default choice (`net::choose`): loopback for a single-host job, else IPoIB, the interface that reaches
/// the rendezvous, the default route's, the first by name. Rank 0 says on stderr what each host bound.
pub fn connect(id: &Identity, opts: &Options, consensus: serde_json::Value, mpi: MpiHandle) -> Result<Session> {
    connect_with(id, opts, consensus, mpi, Pairs::Needed)
}

/// Which rank pairs a session connects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pairs {
    /// Those the options' algorithms and the control exchanges need ([`crate::bench::plan::links`]).
    Needed,
    /// Every pair, for callers that run algorithms the options do not name (tests of the algorithms).
    All,
}

/// [`connect`], choosing which pairs to connect.
pub fn connect_with(
    id: &Identity,
    opts: &Options,
    consensus: serde_json::Value,
    mpi: MpiHandle,
    pairs: Pairs,
) -> Result<Session> {
    let exchange = Exchange::choose(id, &mpi)?;
    world::launcher_abort::outlive_launcher_abort(|k| std::env::var(k).ok());
    let started = Instant::now();
    let deadline = started + opts.deadlines.bootstrap_timeout;
    let (mut world, bound) = match exchange {
        Exchange::Rendezvous(root) => via_rendezvous(id, opts, consensus, root, deadline)?,
        #[cfg(feature = "mpi")]
        Exchange::Mpi(m) => via_mpi(id, opts, consensus, m)?,
    };
    world.bootstrap_s = started.elapsed().as_secs_f64();
    // Only paths `--transport` names: the one kept for control traffic alone (`--transport nccl`) measures
    // nothing, and a line about it reads as if tcp had been measured.
    if world.rank == 0 && opts.paths.transports.iter().any(|p| p.is_tcp()) {
        for line in path_lines(&tcp_paths(opts), &world.ranks) {
            stderr!("{line}");
        }
    }
    // Every rank derives the same pairs from the same (consensus-checked) options.
    let links = match pairs {
        Pairs::Needed => crate::bench::plan::links(opts.settings(), world.size),
        Pairs::All => Links::full(world.size, "all pairs, as asked"),
    };
    crate::fault::Fault::check(opts.aids.fault.as_ref(), world.rank, &crate::fault::Phase::Connect);
    let connect_started = Instant::now();
    let mut transports = Vec::with_capacity(bound.len());
    let mut path_connect_s = Vec::with_capacity(bound.len());
    for (k, (listener, _)) in bound.into_iter().enumerate() {
        let path_started = Instant::now();
        let peers: Vec<PeerAddr> = world
            .ranks
            .iter()
            .map(|ri| {
                let ep = ri.endpoints.get(k).ok_or_else(|| {
                    Error::peer(format!(
                        "rank {} (host {}) published no endpoint for TCP path {k}",
                        ri.rank, ri.host
                    ))
                })?;
                let addr = ep.addr.parse().map_err(|_| {
                    Error::peer(format!(
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
        let path = listener
            .label
            .clone()
            .unwrap_or_else(|| format!("tcp@{}", listener.iface));
        transports.push(
            connect_all(
                listener,
                world.rank,
                &world.host,
                &peers,
                &links,
                world.token,
                tcp_config(opts),
            )
            .map_err(|e| e.during(&format!("connection set-up of {path}")))?,
        );
        path_connect_s.push(path_started.elapsed().as_secs_f64());
    }
    Ok(Session {
        world,
        transports,
        connect_s: connect_started.elapsed().as_secs_f64(),
        path_connect_s,
        links,
        mpi,
    })
}

fn endpoints(bound: &[(TcpListenerBound, String)]) -> Vec<Endpoint> {
    bound
        .iter()
        .map(|(b, why)| Endpoint {
            iface: b.iface.clone(),
            addr: b.addr.to_string(),
            reason: Some(why.clone()),
        })
        .collect()
}

/// How long past the bootstrap deadline the rank serving the rendezvous waits for its service's verdict.
const VERDICT_GRACE: Duration = Duration::from_secs(5);

fn via_rendezvous(
    id: &Identity,
    opts: &Options,
    consensus: serde_json::Value,
    root: &str,
    deadline: Instant,
) -> Result<(World, Vec<(TcpListenerBound, String)>)> {
    // Interfaces are checked before this rank joins, not after the others started waiting for it; whether one
    // reaches the rendezvous only decides between usable interfaces, so this check already fails if none is.
    let single_host = single_host_job(id, world::env::local_size_from(|k| std::env::var(k).ok()));
    plan_paths(opts, single_host, None)?;
    // The rank that serves the rendezvous waits for its service's verdict a little past the shared deadline:
    // the service names a rank that never joined at that deadline, and its own client must hear that rather than
    // give up on the welcome at the same moment (on a busy host it would, and blame nobody).
    let deadline = serve_if_root(id, root, deadline)?;
    let who = format!("rank {} (host {})", id.rank, crate::net::hostname());
    let sock = rendezvous::connect(root, deadline, &who)?;
    let local = sock
        .local_addr()
        .map_err(|e| Error::io(format!("{who}: reading the local address"), e))?
        .ip();
    let bound = bind_paths(plan_paths(opts, single_host, Some(local))?)?;
    show_listeners(id.rank, &bound);
    let world = world::bootstrap(
        id,
        sock,
        endpoints(&bound),
        consensus,
        deadline,
        opts.aids.fault.as_ref(),
    )?;
    Ok((world, bound))
}

/// Starts the rendezvous service at `root` when this rank serves it, detached (it ends once every rank has
/// joined or was answered, or at `deadline`; every rank hears its verdict). Returns the deadline this rank's own
/// client waits to: a little past the service's where it serves, so it hears the service name a rank that
/// never joined rather than give up at the same moment.
fn serve_if_root(id: &Identity, root: &str, deadline: Instant) -> Result<Instant> {
    if !id.serves_root {
        return Ok(deadline);
    }
    let source = world::env::root_source(|k| std::env::var(k).ok());
    rendezvous::make_room(id.size, root)?;
    let listener = rendezvous::bind_root(root, source, deadline)?;
    let (size, token) = (id.size, id.token);
    let timeout = deadline.saturating_duration_since(Instant::now());
    std::thread::spawn(move || rendezvous::serve(listener, size, token, timeout));
    Ok(deadline + VERDICT_GRACE)
}

/// Tells every rank of the job, through the rendezvous, that this rank refuses to start because of `e`, so that
/// none waits for it until its bootstrap deadline. The rank that serves the rendezvous serves it meanwhile,
/// until every rank was told (or that deadline). Where the job has no rendezvous (MPI exchanges the endpoints)
/// or it cannot be reached, the rank's own error is all there is.
pub fn refuse(id: &Identity, opts: &Options, e: &Error) {
    let Some(root) = id.root.as_deref() else {
        return;
    };
    let who = format!("rank {} (host {})", id.rank, crate::net::hostname());
    stderr!(
        "collbench: {who} cannot start (its error follows); telling the other ranks through the rendezvous at \
         {root} first"
    );
    let told = (|| {
        // Served as for a join: it answers this rank last, once it told the others.
        let deadline = serve_if_root(id, root, Instant::now() + opts.deadlines.bootstrap_timeout)?;
        let sock = rendezvous::connect(root, deadline, &who)?;
        world::refuse(id, sock, rendezvous::Refusal::of(e), deadline)
    })();
    if let Err(why) = told {
        stderr!("collbench: {who}: the other ranks could not be told: {why}");
    }
}

#[cfg(feature = "mpi")]
fn via_mpi(
    id: &Identity,
    opts: &Options,
    consensus: serde_json::Value,
    m: &crate::mpi::Mpi,
) -> Result<(World, Vec<(TcpListenerBound, String)>)> {
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
    let host = crate::net::hostname();
    let hosts = m.allgather_bytes(host.as_bytes());
    let single_host = hosts.iter().all(|h| h == host.as_bytes());
    let bound = bind_paths(plan_paths(opts, single_host, None)?)?;
    // MPI's own channel is trusted: rank 0's random token reaches every rank through it.
    let tok = m.broadcast_bytes(&world::new_token());
    let token: world::Token = tok.as_slice().try_into().map_err(|_| {
        Error::peer(format!(
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
        // MPI keeps jobs apart itself.
        job: Vec::new(),
        // MPI's allgather carries the table.
        relay: None,
        refused: None,
    };
    let joins: Vec<rendezvous::Join> = m
        .allgather_bytes(&serde_json::to_vec(&me).expect("a join serialises"))
        .iter()
        .enumerate()
        .map(|(r, b)| {
            serde_json::from_slice(b).map_err(|e| Error::peer(format!("rank {r} sent an unreadable endpoint: {e}")))
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

/// Runs `n` ranks as threads of this process, every pair connected over loopback (so any algorithm can
/// run), and returns what `f` returned on each rank (in rank order). For tests and benchmarks of the library.
pub fn run_threads<R: Send>(n: usize, opts: &Options, f: impl Fn(&mut Session) -> R + Sync) -> Vec<Result<R>> {
    run_threads_with(n, opts, Pairs::All, f)
}

/// [`run_threads`], connecting `pairs`.
pub fn run_threads_with<R: Send>(
    n: usize,
    opts: &Options,
    pairs: Pairs,
    f: impl Fn(&mut Session) -> R + Sync,
) -> Vec<Result<R>> {
    let (ids, server) =
        match world::local::thread_identities(n, opts.deadlines.bootstrap_timeout.max(Duration::from_secs(1))) {
            Ok(x) => x,
            Err(e) => return vec![Err(e)],
        };
    let consensus = serde_json::json!({});
    let out = std::thread::scope(|s| {
        let handles: Vec<_> = ids
            .iter()
            .map(|id| {
                let (f, consensus) = (&f, consensus.clone());
                // Thread ranks have a rendezvous: MPI is never started for them.
                s.spawn(move || {
                    connect_with(id, opts, consensus, MpiHandle::default(), pairs).map(|mut sess| f(&mut sess))
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

    fn id(launcher: &str, size: usize, root: Option<&str>) -> Identity {
        Identity {
            rank: 0,
            size,
            root: root.map(str::to_string),
            token: [0; 16],
            token_from: String::new(),
            launcher: launcher.into(),
            serves_root: false,
        }
    }

    #[test]
    fn single_host_jobs_are_recognised_before_the_bootstrap() {
        assert!(single_host_job(&id("local", 4, Some("127.0.0.1:5000")), None));
        assert!(single_host_job(&id("threads", 2, Some("127.0.0.1:5000")), None));
        let srun = "srun (Slurm)";
        assert!(single_host_job(&id(srun, 1, Some("10.0.0.1:5000")), None));
        assert!(single_host_job(&id(srun, 8, Some("10.0.0.1:5000")), Some(8)));
        assert!(!single_host_job(&id(srun, 8, Some("10.0.0.1:5000")), Some(4)));
        assert!(!single_host_job(&id(srun, 8, Some("node1:5000")), None));
        // Only this host can reach a loopback rendezvous, so every rank is here.
        assert!(single_host_job(
            &id("env (COLLBENCH_RANK)", 2, Some("127.0.0.1:5000")),
            None
        ));
        assert!(single_host_job(
            &id("env (COLLBENCH_RANK)", 2, Some("[::1]:5000")),
            None
        ));
        assert!(single_host_job(
            &id("env (COLLBENCH_RANK)", 2, Some("localhost:5000")),
            None
        ));
        assert!(!single_host_job(&id("mpirun (OpenMPI)", 2, None), None));
    }

    fn rank(r: usize, host: &str, eps: &[(&str, &str)]) -> RankInfo {
        RankInfo {
            rank: r,
            pid: 1,
            host: host.into(),
            iface: eps[0].0.into(),
            addr: "-".into(),
            endpoints: eps
                .iter()
                .map(|(i, why)| Endpoint {
                    iface: i.to_string(),
                    addr: "-".into(),
                    reason: Some(why.to_string()),
                })
                .collect(),
            device: None,
        }
    }

    #[test]
    fn rank_0_says_which_interface_each_host_bound_and_why() {
        let paths: [PathKind; 2] = ["tcp".parse().unwrap(), "tcp@ib0|eth0".parse().unwrap()];
        let spec = "chosen by tcp@ib0|eth0";
        let same = [
            rank(0, "a", &[("ib0", "IPoIB preferred"), ("ib0", spec)]),
            rank(1, "a", &[("ib0", "IPoIB preferred"), ("ib0", spec)]),
            rank(2, "b", &[("ib0", "IPoIB preferred"), ("eth0", spec)]),
            rank(3, "c", &[("ib0", "IPoIB preferred"), ("eth0", spec)]),
        ];
        assert_eq!(
            path_lines(&paths, &same),
            [
                "collbench: tcp path: interface ib0 on every host (IPoIB preferred)".to_string(),
                "collbench: tcp@ib0|eth0 path: interface differs between hosts: ib0 on a (chosen by tcp@ib0|eth0); \
                 eth0 on b, c (chosen by tcp@ib0|eth0)"
                    .to_string(),
            ]
        );
        let differ = [
            rank(0, "a", &[("eth0", "reaches the rendezvous")]),
            rank(1, "b", &[("ens5", "default route")]),
        ];
        assert_eq!(
            path_lines(&paths[..1], &differ),
            [
                "collbench: tcp path: interface differs between hosts: eth0 on a (reaches the rendezvous); ens5 on b \
              (default route)"
            ]
        );
    }

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
        let e = match Exchange::choose(&id, &MpiHandle::default()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("must refuse"),
        };
        assert!(
            e.contains("COLLBENCH_ROOT") && e.contains("MASTER_ADDR") && e.contains("OpenMPI"),
            "{e}"
        );
    }
}
