//! `collbench info`: every host's interfaces and CPU limits, with advice, before a run.
//!
//! Without a launcher it describes this host. Under a launcher each rank bootstraps like `run` does, sends
//! its host's inventory to rank 0, and rank 0 prints one table per host with advice for the whole job.

use std::time::Duration;

use crate::algorithm::control;
use crate::cli::InfoArgs;
use crate::error::{Error, Result, EXIT_OK};
use crate::info::{render, to_json};
use crate::net::advice::advise;
use crate::net::inventory::{self, HostInventory};
use crate::options::Options;
use crate::session;
use crate::world::env;

/// Runs `collbench info`; returns the exit status.
pub fn info(args: &InfoArgs) -> Result<i32> {
    if args.timeout == 0 {
        return Err(Error::usage("-T/--timeout", "must be at least 1 second"));
    }
    if let Some(p) = &args.output_file {
        crate::report::file::check_writable(p, args.force, "-J/--output_file")?;
    }
    let mut mine = inventory::local();
    mine.gpu_topology = Some(crate::net::nvml::read());
    #[cfg(feature = "rdma")]
    if mine.rdma.is_empty() {
        // No sysfs RDMA tree: ask the verbs library, as ibv_devinfo does.
        mine.rdma = crate::transport::rdma::verbs::inventory();
    }
    let Some(id) = env::identity_from(|k| std::env::var(k).ok())? else {
        // A SPEC (glob or list) names the interface it picks here, which is what the advice looks up.
        let iface = match &args.iface {
            Some(spec) => crate::net::iface::resolve(spec, "--iface")?.0,
            None => "lo".into(),
        };
        let (per_host, paths) = ([(mine.host.clone(), args.np)], [(mine.host.clone(), iface)]);
        return report(std::slice::from_ref(&mine), &per_host, &paths, args);
    };
    let mut opts = Options::default();
    opts.tcp.iface = args.iface.clone();
    opts.deadlines.timeout = Duration::from_secs(args.timeout);
    // MPI only carries the endpoints, where the launcher named no rendezvous.
    let mpi = session::MpiHandle::start(false, &id)?;
    let mut sess = session::connect(&id, &opts, serde_json::json!({"command": "info"}), mpi)?;
    let bytes = serde_json::to_vec(&mine).expect("an inventory serialises");
    let Some(all) = control::gather(&mut sess.transports[0], &bytes)? else {
        return Ok(EXIT_OK);
    };
    // One inventory per host (ranks on one host see the same machine).
    let mut hosts: Vec<HostInventory> = Vec::new();
    for (r, b) in all.iter().enumerate() {
        let inv: HostInventory = serde_json::from_slice(b)
            .map_err(|e| Error::peer(format!("rank {r} sent an unreadable inventory ({e}); mixed versions?")))?;
        if !hosts.iter().any(|h| h.host == inv.host) {
            hosts.push(inv);
        }
    }
    let ranks = &sess.world.ranks;
    let per_host: Vec<(String, usize)> = hosts
        .iter()
        .map(|h| (h.host.clone(), ranks.iter().filter(|r| r.host == h.host).count()))
        .collect();
    let paths: Vec<(String, String)> = ranks.iter().map(|r| (r.host.clone(), r.iface.clone())).collect();
    report(&hosts, &per_host, &paths, args)
}

fn report(
    hosts: &[HostInventory],
    per_host: &[(String, usize)],
    paths: &[(String, String)],
    args: &InfoArgs,
) -> Result<i32> {
    let advice = advise(hosts, per_host, paths);
    crate::report::stdout::print(&render(hosts, &advice))?;
    if let Some(p) = &args.output_file {
        let text = serde_json::to_string_pretty(&to_json(hosts, &advice)).expect("inventory JSON serialises");
        crate::report::file::write_atomic(p, text.as_bytes())?;
    }
    Ok(EXIT_OK)
}
