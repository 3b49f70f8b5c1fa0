//! The pairwise link test: every pair of hosts measured once, in rounds of disjoint pairs that run at the
//! same time, then the slow host or the slow link named.
//!
//! - [`schedule`]: which pairs meet in which round (circle method).
//! - [`plan`](mod@plan): which rounds fit the budget, from the time of a first round (every pair, or a
//!   sample of rounds); [`planned`]: the test as planned on every rank, suspects re-measured within it.
//! - [`measure`](mod@measure): one round's exchanges (bidirectional bandwidth, 8-byte ping-pong) over the transport trait,
//!   or over what a [`measure::Meter`] measures pairs with; `device` (feature `cuda`): pairs of GPUs over
//!   NCCL's point-to-point (`--memory cuda`).
//! - [`fit`]: the host-effects model (median polish in log space, any subset of pairs) and the
//!   multiplicity-corrected bar.
//! - [`localise`]: slow links and hosts from that model, false findings controlled for the number judged.
//! - [`median`]: the median all of these take.
//! - [`confirm`]: the links a finding rests on measured again, so a transient is not blamed.
//! - [`direction`]: which way a slow host or link is slow (into or out of a host), from the matrix.
//! - [`hostcheck`]: the hosts' set-up of the measured path (MTU, overlay fit, CPU quota) and their links'
//!   carrier losses during the test, judged beside the matrix.
//! - [`render`]: host x host matrices and the findings as text; [`gpu_names`]: the GPUs a finding on device
//!   buffers names.
//! - [`command`]: `collbench pairwise`.

pub mod command;
pub mod confirm;
#[cfg(feature = "cuda")]
pub mod device;
pub mod direction;
pub mod fit;
pub mod gpu_names;
pub mod hostcheck;
pub mod localise;
pub mod measure;
pub mod median;
pub mod metrics;
pub mod options;
pub mod plan;
pub mod planned;
pub mod render;
pub mod schedule;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::session::Session;
use crate::transport::Transport;

pub use localise::Thresholds;
pub use measure::{LatencyStats, SETTLE};

/// Version tag of the pairwise JSON (see `schema/collbench-pairwise.schema.json`).
pub const SCHEMA: &str = "collbench-pairwise/1";

/// What one pairwise test measures.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairwiseConfig {
    /// Bytes each side sends per bandwidth iteration (both directions at once).
    pub bytes: usize,
    /// Timed bandwidth iterations per pair (one more runs untimed first); their bytes over their time count.
    pub iters: usize,
    /// Timed 8-byte round trips per pair; the median counts.
    pub lat_iters: usize,
    /// One rank per host (the lowest on each) takes part; false: every rank does.
    pub per_host: bool,
    /// The links the first pass finds slow are measured again and only findings that hold are reported
    /// (see [`confirm`]); false: the first pass decides.
    #[serde(default = "confirm_by_default")]
    pub confirm: bool,
}

/// [`PairwiseConfig::confirm`] when a JSON file predates it.
fn confirm_by_default() -> bool {
    true
}

impl Default for PairwiseConfig {
    /// 4 MiB x 5 each way and 200 round trips: a 4-host run takes about a second on loopback and a few
    /// seconds over 1 Gbit/s links, long enough for TCP to leave slow start.
    fn default() -> Self {
        PairwiseConfig {
            bytes: crate::defaults::PAIRWISE_BYTES,
            iters: crate::defaults::PAIRWISE_ITERS,
            lat_iters: crate::defaults::PAIRWISE_LAT_ITERS,
            per_host: true,
            confirm: true,
        }
    }
}

/// One endpoint of the matrix: a host (its lowest rank measures for it) or, when pairs are ranks, a rank.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Participant {
    /// The name shown in the matrix: the host name, or `rankN` when pairs are ranks.
    pub name: String,
    /// The rank that measured.
    pub rank: usize,
    /// The host that rank runs on.
    pub host: String,
    /// The GPU that rank measured with, where the pairs are GPUs (`--memory cuda`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuId>,
}

/// A GPU a participant measured with: what a finding about it names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuId {
    /// The driver's device ordinal on its host (`cuda:N`).
    pub index: usize,
    /// Its PCI bus id, sysfs form (`0000:19:00.0`); empty where the driver could not say.
    pub bus_id: String,
    /// Its name (`NVIDIA H200`).
    pub name: String,
}

impl GpuId {
    /// `cuda:1 [0000:19:00.0] NVIDIA H200`, as the rank list shows a GPU.
    pub fn label(&self) -> String {
        format!("GPU {} [{}] ({})", self.index, self.bus_id, self.name)
    }
}

/// One measured pair; `a` < `b` index [`PairwiseReport::hosts`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Link {
    pub a: usize,
    pub b: usize,
    pub a_name: String,
    pub b_name: String,
    /// GB/s from a to b while b sent to a at the same time, as b received it (bytes over time of all timed
    /// iterations).
    pub bw_ab_gbs: f64,
    /// GB/s from b to a, as a received it.
    pub bw_ba_gbs: f64,
    /// The slower direction: a link is as good as its worse way; this is what localisation judges.
    pub bw_gbs: f64,
    /// Both directions together: twice the bytes over the time of the whole exchanges.
    pub bidir_gbs: f64,
    /// Half the median round trip of an 8-byte ping-pong, in microseconds.
    pub latency_us: f64,
    /// Round trips of the ping-pong that stalled: over 50 ms and 20 x the median, a lost packet's
    /// retransmission timeout (TCP recovers bulk transfers from loss quickly on a short path; a lone small
    /// message waits out the timer, which is what loss costs a collective).
    pub stalls: u64,
    /// The ping-pong's distribution (half round trips: min, mean, p50, p99, p99.9, max) and its message rate;
    /// `latency_us` is its p50. Absent in files that predate it.
    #[serde(default)]
    pub latency: Option<LatencyStats>,
    /// Messages of `config.bytes` per second in the slower direction of the bandwidth exchange.
    #[serde(default)]
    pub bw_msg_rate: f64,
    /// Measured twice, because the first pass found it slow: the values are both measurements merged
    /// ([`confirm::merge`]).
    #[serde(default)]
    pub remeasured: bool,
    /// Measured twice: the lower of the two measurements' `bw_gbs`. Where links are too few to fit host
    /// effects, a typical link is judged by it, so the reference a slow link is held against holds twice
    /// as the finding must (see [`localise`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bw_lower_gbs: Option<f64>,
    /// Named by the first pass to be measured again (slow by some metric, a worst link of a slow host, or a
    /// reference the suspects are held against); one the reserve of rounds left out is judged on its one
    /// measurement. Where any link is a suspect, only suspects can be findings (see [`localise::findings`]).
    #[serde(default)]
    pub suspect: bool,
}

/// Which measurement a finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// GB/s, higher is better.
    Bandwidth,
    /// Microseconds, lower is better.
    Latency,
    /// Stalled round trips, lower is better.
    Stalls,
}

impl Metric {
    /// The metric's name as printed.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Bandwidth => "bandwidth",
            Metric::Latency => "latency",
            Metric::Stalls => "stalled round trips",
        }
    }

    /// A value from its "goodness" (higher is better, as localisation judges both metrics): GB/s as is,
    /// latency from round trips per microsecond, stalls from their negated count.
    pub fn value_of_goodness(self, v: f64) -> f64 {
        match self {
            Metric::Bandwidth => v,
            Metric::Latency => 1.0 / v,
            Metric::Stalls => -v,
        }
    }

    /// The unit its values are in.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Bandwidth => "GB/s",
            Metric::Latency => "us",
            Metric::Stalls => "",
        }
    }
}

/// Something the test blames.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// A host whose links are slow with (nearly) every partner: the fault is at the host (its NIC, cable,
    /// switch port, CPU or configuration), not on one path.
    SlowHost {
        host: String,
        metric: Metric,
        /// The median of the host's links.
        value: f64,
        /// What a typical link measured.
        reference: f64,
        slow_links: usize,
        links: usize,
    },
    /// One slow pair whose ends are otherwise fine: the path between them (a route, a switch hop, a
    /// filter) is at fault; neither host is blamed.
    SlowLink {
        a: String,
        b: String,
        metric: Metric,
        value: f64,
        reference: f64,
    },
}

/// The outcome of one pairwise test, as rank 0 assembles it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PairwiseReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// The transport path measured, e.g. `tcp@eth0`.
    pub path: String,
    /// `hosts` (one rank per host) or `ranks` (every rank; all on one host, or asked for).
    pub unit: String,
    pub config: PairwiseConfig,
    pub hosts: Vec<Participant>,
    /// Every pair, in (a, b) order.
    pub links: Vec<Link>,
    /// What the test blames, each finding holding after its links were measured again.
    pub findings: Vec<Finding>,
    /// First-pass findings that re-measuring did not confirm: transients (a busy CPU, a burst of other
    /// traffic), worth a look only when they recur.
    #[serde(default)]
    pub dismissed: Vec<Finding>,
    /// The thresholds the findings were decided with.
    pub thresholds: Thresholds,
    /// Warnings about the hosts' set-up of the measured path (an MTU that differs between hosts, an overlay
    /// too large for its underlay, a CPU quota below the ranks on a host): faults the matrix cannot show.
    #[serde(default)]
    pub host_config: Vec<crate::net::advice::Advice>,
    /// Hosts whose path interface lost its carrier during the test: an intermittent link, whatever the
    /// matrix shows (an outage between rounds leaves it clean).
    #[serde(default)]
    pub link_downs: Vec<hostcheck::LinkDown>,
    /// Rounds of the first pass: every pair once, or the plan's sample of them.
    pub rounds: usize,
    /// Rounds that measured the suspect links again.
    #[serde(default)]
    pub remeasure_rounds: usize,
    /// Seconds from the first round to the last.
    pub elapsed_s: f64,
    /// What was planned within `--budget` and what came of it: the rounds measured, the reserve to measure
    /// suspects again, the time of a round. Absent in files that predate it.
    #[serde(default)]
    pub plan: Option<plan::Record>,
}

impl PairwiseReport {
    /// Whether every pair is two ranks of one host: their links are its loopback and its CPUs, so a slower
    /// pair means ranks waited for a core, not a bad link, and a finding is a warning, as in `preflight`.
    /// Pairs of GPUs are not: each has its own device and links, so a slower pair is a finding on one host too.
    pub fn one_host(&self) -> bool {
        self.hosts.len() > 1
            && self.hosts.windows(2).all(|w| w[0].host == w[1].host)
            && self.hosts.iter().all(|h| h.gpu.is_none())
    }

    /// `fail` with findings across hosts or a link that went down; `warn` with findings on one host or set-up
    /// warnings alone; `pass` otherwise.
    pub fn verdict(&self) -> &'static str {
        if !self.link_downs.is_empty() {
            return "fail";
        }
        match (self.findings.is_empty(), self.one_host()) {
            (true, _) if !self.host_config.is_empty() => "warn",
            (true, _) => "pass",
            (false, true) => "warn",
            (false, false) => "fail",
        }
    }
}

/// Runs the pairwise test over transport path `path` of the session within `budget` (planned from rank 0's
/// clock, see [`planned::measure_within`]; `None`: every pair); `Some(report)` on rank 0, `None` elsewhere.
/// Every rank of the session must call it with the same `cfg`; ranks that do not take part
/// (the others on a host) still join the barriers between rounds. The session must connect every pair
/// (`session::connect_with(.., Pairs::All)`). On an error, hand it to the transport's `abort` so every rank
/// learns who failed (as `collbench pairwise` does).
pub fn measure(
    sess: &mut Session,
    path: usize,
    cfg: &PairwiseConfig,
    budget: Option<planned::Budget>,
) -> Result<Option<PairwiseReport>> {
    let hosts: Vec<String> = sess.world.ranks.iter().map(|r| r.host.clone()).collect();
    let Some(t) = sess.transports.get_mut(path) else {
        return Err(Error::usage(
            "--transport",
            format!(
                "path {path} is not one of the session's {} TCP path(s)",
                sess.transports.len()
            ),
        ));
    };
    let meter = &mut measure::OverTransport::default();
    planned::measure_within(t, meter, &hosts, cfg, &Thresholds::default(), budget, &mut |_| ())
}

/// [`measure()`] over any transport: `hosts[r]` is rank r's host. No budget: every pair (up to
/// [`plan::MAX_PAIRS`] pairs), every suspect measured again.
pub fn measure_on<T: Transport + ?Sized>(
    t: &mut T,
    hosts: &[String],
    cfg: &PairwiseConfig,
    th: &Thresholds,
) -> Result<Option<PairwiseReport>> {
    planned::measure_within(
        t,
        &mut measure::OverTransport::default(),
        hosts,
        cfg,
        th,
        None,
        &mut |_| (),
    )
}
