//! `collbench info`: every host's interfaces and CPU limits, with advice, before a run.
//!
//! Without a launcher it describes this host. Under a launcher each rank starts like `run`'s (the driver), sends
//! its host's inventory to rank 0, and rank 0 prints one table per host with advice for the whole job.

use std::ffi::OsString;
use std::time::Duration;

use crate::algorithm::control;
use crate::cli::InfoArgs;
use crate::driver::{drive, Connected, Ending, RankCommand};
use crate::error::{Error, Result, EXIT_OK};
use crate::info::{render, to_json};
use crate::memory::available::Available;
use crate::net::advice::advise;
use crate::net::inventory::{self, HostInventory};
use crate::options::Options;
use crate::report::declared::Declared;
use crate::world::Identity;

/// Runs `collbench info` with the command line `argv` (program name first); returns the exit status.
pub fn info(args: &InfoArgs, argv: &[OsString]) -> Result<i32> {
    if args.timeout == 0 {
        return Err(Error::usage("-T/--timeout", "must be at least 1 second"));
    }
    let mut opts = Options::default();
    opts.tcp.iface = args.iface.clone();
    opts.deadlines.timeout = Duration::from_secs(args.timeout);
    drive(&mut InfoCommand { opts, args }, argv, &|k| std::env::var(k).ok())
}

/// `collbench info` as the driver runs it.
struct InfoCommand<'a> {
    opts: Options,
    args: &'a InfoArgs,
}

impl RankCommand for InfoCommand<'_> {
    fn name(&self) -> &'static str {
        "info"
    }

    fn options(&self) -> &Options {
        &self.opts
    }

    fn agreement(&self) -> serde_json::Value {
        serde_json::json!({"command": "info"})
    }

    fn outputs(&self) -> Declared<'_> {
        Declared::new(self.args.out.force).file("-J/--output_file", self.args.out.output_file.as_deref())
    }

    /// No buffers.
    fn check_memory(&self, _local: usize, _avail: &Available) -> Result<()> {
        Ok(())
    }

    /// Without a launcher, this host is described here; `--np` only says how many ranks it would run.
    fn alone(&self) -> Option<Result<i32>> {
        Some(self.outputs().check().and_then(|()| {
            let mine = local_inventory();
            // A SPEC (glob or list) names the interface it picks here, which is what the advice looks up.
            let iface = match &self.args.iface {
                Some(spec) => crate::net::iface::resolve(spec, "--iface")?.0,
                None => "lo".into(),
            };
            let (per_host, paths) = ([(mine.host.clone(), self.args.np)], [(mine.host.clone(), iface)]);
            report(std::slice::from_ref(&mine), &per_host, &paths, self.args)
        }))
    }

    /// Each rank sends its host's inventory to rank 0, which prints one table per host.
    fn rank(&self, _id: &Identity, conn: Connected<'_>) -> Result<Ending> {
        let mut sess = conn.sess;
        let bytes = serde_json::to_vec(&local_inventory()).expect("an inventory serialises");
        let Some(all) = control::gather(&mut sess.transports[0], &bytes)? else {
            return Ok(Ending::Own(EXIT_OK));
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
        report(&hosts, &per_host, &paths, self.args).map(Ending::Own)
    }
}

/// This host's inventory: interfaces, CPU limits, GPUs and RDMA devices.
fn local_inventory() -> HostInventory {
    let mut mine = inventory::local();
    mine.gpu_topology = Some(crate::net::nvml::read());
    #[cfg(feature = "rdma")]
    if mine.rdma.is_empty() {
        // No sysfs RDMA tree: ask the verbs library, as ibv_devinfo does.
        mine.rdma = crate::transport::rdma::verbs::inventory();
    }
    mine
}

fn report(
    hosts: &[HostInventory],
    per_host: &[(String, usize)],
    paths: &[(String, String)],
    args: &InfoArgs,
) -> Result<i32> {
    let advice = advise(hosts, per_host, paths);
    crate::report::stdout::print(&render(hosts, &advice))?;
    if let Some(p) = &args.out.output_file {
        let text = serde_json::to_string_pretty(&to_json(hosts, &advice)).expect("inventory JSON serialises");
        crate::report::file::write_atomic(
            p,
            text.as_bytes(),
            crate::report::file::Replace::from_force(args.out.force),
        )?;
    }
    Ok(EXIT_OK)
}
