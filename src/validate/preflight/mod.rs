//! `collbench preflight`: a short fixed plan over each requested path (connectivity at 8 B, latency at small
//! sizes, bandwidth where busbw has plateaued), judged against expectations into PASS / WARN / FAIL per check
//! and overall, with an exit status for scripts and CI.
//!
//! [`plan`] says what runs, [`rank`] runs it on each rank with `run`'s machinery, [`expect`] reads the
//! expectations file, [`measure`] turns records into estimates with intervals, [`checks`] picks thresholds and
//! makes the checks, [`findings`] turns the pairwise test's findings into checks, [`gpu`] judges every host's GPUs through NVML and [`gpu_copy`] their copy bandwidths, [`carrier`] fails a host whose link went down during a measurement, [`starved`] one whose ranks were starved of CPU apart from the others, [`tuning`] reads each host's kernel tuning for the path, [`off_sweep`] a sweep far off its siblings, [`soak`] judges `--soak`'s passes, [`verdict`] decides, [`decide`] writes the outputs, rendered by [`render`].

pub mod budget;
pub mod carrier;
pub mod cause;
pub mod checks;
pub mod decide;
pub mod document;
pub mod evidence;
pub mod expect;
pub mod findings;
pub mod gpu;
pub mod gpu_check;
pub mod gpu_copy;
pub mod measure;
pub mod metrics;
pub mod mtu;
pub mod off_sweep;
pub mod options;
pub mod plan;
pub mod rank;
pub mod render;
pub mod soak;
pub mod starved;
pub mod tuning;
pub mod verdict;
pub mod without;

use std::ffi::OsString;

use crate::driver::{Connected, Ending, RankCommand};
use crate::error::{stderr, Error, Result};
use crate::memory::available::Available;
use crate::options::{Options, PathKind};
use crate::report::declared::Declared;
use crate::session::Pairs;
use crate::sizes::{format_size, format_size_arg};
use crate::world::Identity;
use options::PreflightOptions;
use plan::Plan;

/// What every rank derives from the command line before anything runs.
pub struct Setup {
    pub pre: PreflightOptions,
    /// The path, launch and deadline options of the flags; phases add their sweep.
    pub base: Options,
    pub plan: Plan,
    /// Options covering every phase: what the session connects for.
    pub opts: Options,
    /// The baseline's points, read up front so a bad file stops the preflight before it measures.
    pub baseline: Option<Vec<crate::compare::input::Point>>,
}

/// The names an expectations entry may give a path: each `--transport` entry as written, and for plain
/// `tcp` with `--iface NAME` also `tcp@NAME`.
pub fn path_keys(opts: &Options) -> Vec<String> {
    let mut v: Vec<String> = opts.paths.transports.iter().map(|p| p.to_string()).collect();
    if let (true, Some(i)) = (opts.paths.transports.contains(&PathKind::default()), &opts.tcp.iface) {
        v.push(format!("tcp@{i}"));
    }
    v
}

/// What every rank derives before anything runs: `pre` and `base` validated from the flags, the plan up to
/// `bw` bytes, and the expectations and baseline files read (a bad file stops the preflight here).
pub fn setup(pre: PreflightOptions, bw: u64, base: Options) -> Result<Setup> {
    // The host is asked only now: validating the options touches nothing outside them.
    base.tcp.check_host()?;
    let plan = Plan::new(bw, pre.repeat);
    let opts = plan::union_options(&base, &plan);
    if let Some(f) = &pre.expect {
        // Read here to stop on a bad file before anything runs; rank 0 reads it again to judge.
        expect::read(f, &path_keys(&opts))?;
    }
    let baseline = pre
        .baseline
        .as_ref()
        .map(|f| crate::compare::input::read(f))
        .transpose()?;
    Ok(Setup {
        pre,
        base,
        plan,
        opts,
        baseline,
    })
}

/// `collbench preflight` as the driver runs it.
pub struct PreflightCommand {
    pub setup: Setup,
    /// The bandwidth size local ranks run when this host's memory lowered it.
    lowered: Option<u64>,
}

impl PreflightCommand {
    /// The preflight `setup` describes.
    pub fn new(setup: Setup) -> Self {
        PreflightCommand { setup, lowered: None }
    }
}

impl RankCommand for PreflightCommand {
    fn name(&self) -> &'static str {
        "preflight"
    }

    fn options(&self) -> &Options {
        &self.setup.opts
    }

    fn pairs(&self) -> Pairs {
        // The pairwise link test talks over every pair, not only those the collectives' algorithms use.
        if self.setup.pre.no_pairwise {
            Pairs::Needed
        } else {
            Pairs::All
        }
    }

    fn outputs(&self) -> Declared<'_> {
        self.setup.pre.outputs.declared()
    }

    fn check_memory(&self, local: usize, avail: &Available) -> Result<()> {
        // The bandwidth phase sizes the buffers: a shortfall names its flag.
        self.setup.opts.check_memory(local, avail).map_err(|e| match e {
            Error::Usage { message, .. } => Error::usage("--bandwidth-bytes", message),
            other => other,
        })
    }

    /// Lowers the bandwidth phase to what `np` ranks' buffers can take of this host's memory.
    fn fit_host(&mut self, np: usize, avail: &Available) -> Result<()> {
        let setup = &mut self.setup;
        let want = setup.plan.phases.iter().map(|p| p.max).max().unwrap_or(0);
        match plan::fit_memory(&setup.base, want, setup.pre.repeat, np, avail.bytes) {
            Some(b) if b == want => Ok(()),
            Some(b) => {
                stderr!(
                    "collbench: note: the bandwidth phase is lowered from {} to {}: {np} ranks' buffers must fit, and {}",
                    format_size(want),
                    format_size(b),
                    avail.describe()
                );
                setup.opts = plan::union_options(&setup.base, &Plan::new(b, setup.pre.repeat));
                self.lowered = Some(b);
                Ok(())
            }
            None => Err(Error::usage(
                "--bandwidth-bytes",
                format!(
                    "even {} per rank does not fit {np} local ranks: {}; lower --np{}",
                    format_size(plan::MIN_BANDWIDTH_BYTES),
                    avail.describe(),
                    avail.remedy()
                ),
            )),
        }
    }

    fn rank_args(&self, args: &[OsString]) -> Vec<OsString> {
        match self.lowered {
            Some(b) => with_bandwidth_bytes(args, b),
            None => args.to_vec(),
        }
    }

    fn start_failed(&self, id: &Identity, e: &Error) {
        rank::set_up_failed(&self.setup, id, e);
    }

    fn rank(&self, id: &Identity, conn: Connected<'_>) -> Result<Ending> {
        rank::run_rank(&self.setup, id, conn)
    }
}

/// `argv` with `--bandwidth-bytes` set to `bytes`, for the ranks to run the lowered plan.
fn with_bandwidth_bytes(argv: &[OsString], bytes: u64) -> Vec<OsString> {
    let mut out = Vec::with_capacity(argv.len() + 1);
    let mut skip_next = false;
    for a in argv {
        if skip_next {
            skip_next = false;
            continue;
        }
        match a.to_str() {
            Some("--bandwidth-bytes") => skip_next = true,
            Some(s) if s.starts_with("--bandwidth-bytes=") => {}
            _ => out.push(a.clone()),
        }
    }
    out.push(format!("--bandwidth-bytes={}", format_size_arg(bytes)).into());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lowered_bandwidth_size_replaces_any_given_one() {
        let argv: Vec<OsString> = [
            "collbench",
            "preflight",
            "--bandwidth-bytes",
            "1G",
            "--np",
            "2",
            "--bandwidth-bytes=2G",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let out = with_bandwidth_bytes(&argv, 16 << 20);
        let want: Vec<OsString> = ["collbench", "preflight", "--np", "2", "--bandwidth-bytes=16M"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(out, want);
    }
}
