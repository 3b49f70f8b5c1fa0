//! The most likely cause of a finding or a failed check, read from the evidence of the hosts involved: the
//! CPU (a rank throttled by its cgroup's quota, or starved on a host busier than the others), loss (TCP
//! retransmitting more than elsewhere), the configuration (a host whose path is set up differently, or a
//! warning `collbench info` gives about the path), or else the link itself. Also the checks the hosts'
//! configuration makes on its own, and the line rate taken from the cluster's own links where the interfaces'
//! speeds are virtual.

use super::checks::PathInfo;
use super::evidence::HostEvidence;
use super::verdict::{Check, Verdict};
use crate::net::advice::{advise, Severity};
use crate::net::inventory::HostInventory;
use crate::results::record::{CPU_LIMITED_PCT, THROTTLED_SHARE};
use crate::validate::pairwise::PairwiseReport;

/// The cause a finding names: defined beside the check that carries it ([`super::verdict`]), judged here.
pub use super::verdict::Cause;

/// Retransmitted segments, as a share of those sent, from which a host is losing packets...
pub const LOSS_SHARE: f64 = 0.01;
/// ...when also this many times the other hosts' median (a host's partners retransmit what it drops too).
const LOSS_VS_OTHERS: f64 = 1.5;
/// A host busier than the others' median by this many points, and [`CPU_LIMITED_PCT`] busy, is starved.
const STARVED_MARGIN_PCT: f64 = 20.0;

/// A rank that waited for a CPU this share of the measurement, ready to run...
const STARVED_WAIT_SHARE: f64 = 0.5;
/// ...and this much more of it than the other hosts' ranks (median), is starved: the figure comes from the
/// rank's own scheduler statistics, so it holds where no cgroup is visible (a rank started by `ip netns exec`).
const STARVED_WAIT_MARGIN: f64 = 0.25;

/// What is known of throttling across `seen`: "no host was throttled" only where every host's is known.
fn throttling_known(seen: &[HostEvidence]) -> String {
    let unknown: Vec<&str> = seen
        .iter()
        .filter(|e| e.throttled_s.is_none())
        .map(|e| e.host.as_str())
        .collect();
    match unknown.len() {
        0 => "no host was throttled".into(),
        n if n == seen.len() => "throttling unknown (no cgroup CPU statistics visible to the ranks)".into(),
        _ => format!(
            "no host was throttled where it is known (unknown on {})",
            unknown.join(", ")
        ),
    }
}

/// " of N cores" where the host's ranks' CPU quota is known, for a sentence naming the quota.
fn quota_of(e: &HostEvidence) -> String {
    e.quota_cores
        .map(|q| format!(" of {} cores", crate::net::inventory::cores(q)))
        .unwrap_or_default()
}

/// A cause and why, in a sentence.
#[derive(Clone, Debug, PartialEq)]
pub struct Judged {
    pub cause: Cause,
    pub why: String,
    /// Only that every host was busy: a warning, not a failure.
    pub busy: bool,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// One setting in which a host differs: (setting, its value, the usual one).
pub type Difference = (String, String, String);

/// The settings in which a host differs from most hosts, per host.
pub fn differences(seen: &[HostEvidence]) -> Vec<(String, Vec<Difference>)> {
    let mut out: Vec<(String, Vec<Difference>)> = Vec::new();
    if seen.len() < 2 {
        return out;
    }
    let settings: Vec<Vec<(&str, String)>> = seen.iter().map(|e| e.config.settings()).collect();
    for k in 0..settings[0].len() {
        let values: Vec<&String> = settings.iter().map(|s| &s[k].1).collect();
        // The value most hosts have; with a tie there is no majority to differ from.
        let mut counts: Vec<(&String, usize)> = Vec::new();
        for v in &values {
            match counts.iter_mut().find(|c| c.0 == *v) {
                Some(c) => c.1 += 1,
                None => counts.push((v, 1)),
            }
        }
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        if counts.len() < 2 {
            continue;
        }
        let usual = counts[0].0;
        let tie = counts[1].1 == counts[0].1;
        for (h, v) in seen.iter().zip(&values) {
            if *v == usual && !tie {
                continue;
            }
            let what = (
                settings[0][k].0.to_string(),
                (*v).clone(),
                if tie { "another".into() } else { usual.clone() },
            );
            match out.iter_mut().find(|(x, _)| *x == h.host) {
                Some((_, w)) => w.push(what),
                None => out.push((h.host.clone(), vec![what])),
            }
        }
    }
    // Counts that move with the traffic are not compared exactly: a connection-tracking table far above the
    // others' is the difference.
    let tunings: Vec<&super::tuning::Tuning> = seen.iter().map(|e| &e.config.tuning).collect();
    let conntrack = super::tuning::conntrack_outliers(&tunings)
        .into_iter()
        .map(|o| ("conntrack entries", o));
    let rules = super::tuning::rules_outliers(&tunings)
        .into_iter()
        .map(|o| ("firewall rules", o));
    for (name, (i, mine, usual)) in conntrack.chain(rules) {
        let what = (name.to_string(), mine.to_string(), format!("about {usual}"));
        match out.iter_mut().find(|(x, _)| *x == seen[i].host) {
            Some((_, w)) => w.push(what),
            None => out.push((seen[i].host.clone(), vec![what])),
        }
    }
    out
}

/// Why `host`'s TCP buffers are smaller than the other hosts': its buffer settings that differ, and what its
/// ranks' sockets got against the others; `None` where its settings are the others'. What the sockets got
/// alone is no cause: autotuning grows a buffer with what the connection carries, so a host slowed by anything
/// has smaller ones.
fn small_buffers(host: &str, seen: &[HostEvidence], diffs: &[(String, Vec<Difference>)]) -> Option<String> {
    let settings: Vec<&Difference> = diffs
        .iter()
        .filter(|(h, _)| h == host)
        .flat_map(|(_, w)| w)
        .filter(|(k, _, _)| super::tuning::BUFFER_SETTINGS.contains(&k.as_str()))
        .collect();
    let me = seen.iter().find(|e| e.host == host)?;
    let others: Vec<&HostEvidence> = seen.iter().filter(|e| e.host != host).collect();
    let got = |f: fn(&super::tuning::Tuning) -> Option<u64>| {
        let mine = f(&me.config.tuning)?;
        let theirs = median(
            others
                .iter()
                .filter_map(|e| f(&e.config.tuning))
                .map(|v| v as f64)
                .collect(),
        )?;
        Some((mine, theirs))
    };
    if settings.is_empty() {
        return None;
    }
    let (rx, tx) = (got(|t| t.rcvbuf), got(|t| t.sndbuf));
    let owned: Vec<Difference> = settings.into_iter().cloned().collect();
    let mut why = vec![describe(&owned)];
    let size = |v: f64| crate::sizes::format_size(v as u64);
    if let (Some((r, ro)), Some((t, to))) = (rx, tx) {
        why.push(format!(
            "its ranks' sockets got {} to receive and {} to send (the other hosts' {} and {})",
            size(r as f64),
            size(t as f64),
            size(ro),
            size(to)
        ));
    }
    Some(format!(
        "{host}'s TCP buffers are smaller than the other hosts': {}: a connection has at most a buffer in flight \
         per round trip, so a small one caps every transfer to and from {host}",
        why.join("; ")
    ))
}

/// Loss on the whole fabric: on three hosts or more, every host retransmitted at least this share of what it
/// sent...
const FABRIC_SHARE: f64 = 0.005;

/// The fabric's loss, where every host retransmits alike: on three hosts or more, each at least 0.5% of what
/// it sent and none 1.5x the others' median (a host set apart is that host's loss, see [`judge`]); `None`
/// otherwise.
pub fn fabric_loss(seen: &[HostEvidence]) -> Option<Judged> {
    let shares: Vec<f64> = seen
        .iter()
        .map(|e| e.tcp.filter(|t| t.out_segs > 0).map(|t| t.retrans_share()))
        .collect::<Option<Vec<f64>>>()?;
    if shares.len() < 3 || shares.iter().any(|&s| s < FABRIC_SHARE) {
        return None;
    }
    for (i, &s) in shares.iter().enumerate() {
        let others = median(
            shares
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, &v)| v)
                .collect(),
        )?;
        if s >= LOSS_VS_OTHERS * others {
            return None;
        }
    }
    let low = shares.iter().copied().fold(f64::INFINITY, f64::min);
    let high = shares.iter().copied().fold(0.0, f64::max);
    let timeouts: u64 = seen.iter().filter_map(|e| e.tcp).map(|t| t.timeouts).sum();
    Some(Judged {
        busy: false,
        cause: Cause::Loss,
        why: format!(
            "every one of the {} hosts retransmitted {:.2}-{:.2}% of the segments it sent ({timeouts} timeouts in \
             all), none set apart from the others: packets are lost on the whole fabric alike (a switch, its \
             uplinks, or a setting every host shares), not at one host or link",
            shares.len(),
            100.0 * low,
            100.0 * high
        ),
    })
}

/// The most likely cause of a slowness on `targets` (hosts), given every host's evidence `seen`; `stalls`
/// when the finding is about stalled round trips.
pub fn judge(targets: &[String], seen: &[HostEvidence], stalls: bool) -> Judged {
    judge_metric(targets, seen, stalls, stalls)
}

/// [`judge`], with `latency_like` for a finding about round trips (latency or stalls), which busy CPUs alone
/// produce.
pub fn judge_metric(targets: &[String], seen: &[HostEvidence], stalls: bool, latency_like: bool) -> Judged {
    let mine: Vec<&HostEvidence> = seen.iter().filter(|e| targets.contains(&e.host)).collect();
    let others: Vec<&HostEvidence> = seen.iter().filter(|e| !targets.contains(&e.host)).collect();
    // CPU: throttled by a quota.
    if let Some(e) = mine
        .iter()
        .filter(|e| e.throttled_share() >= THROTTLED_SHARE)
        .max_by(|a, b| a.throttled_share().total_cmp(&b.throttled_share()))
    {
        return Judged {
            busy: false,
            cause: Cause::Cpu,
            why: format!(
                "{}'s ranks were throttled by their CPU quota{} for {:.2} s of the {:.2} s measured ({} periods): a \
                 throttled rank answers late{}",
                e.host,
                quota_of(e),
                e.throttled_s.unwrap_or(0.0),
                e.wall_s,
                e.throttled_periods.unwrap_or(0),
                if stalls {
                    ", which stalls round trips without any packet lost"
                } else {
                    ""
                }
            ),
        };
    }
    // CPU: a rank ready to run that waited for a core far longer than the other hosts' ranks.
    let others_waited = median(others.iter().filter_map(|e| e.waited_share()).collect());
    if let (Some(e), Some(ow)) = (
        mine.iter()
            .filter(|e| e.waited_share().is_some_and(|w| w >= STARVED_WAIT_SHARE))
            .max_by(|a, b| {
                a.waited_share()
                    .unwrap_or(0.0)
                    .total_cmp(&b.waited_share().unwrap_or(0.0))
            }),
        others_waited,
    ) {
        let w = e.waited_share().unwrap_or(0.0);
        if w >= ow + STARVED_WAIT_MARGIN {
            return Judged {
                busy: false,
                cause: Cause::Cpu,
                why: format!(
                    "a rank on {} waited for a CPU for {:.2} s of the {:.2} s measured ({:.0}%, against {:.0}% on the \
                     other hosts), ready to run but not running: {} starves it{}",
                    e.host,
                    e.waited_s.unwrap_or(0.0),
                    e.wall_s,
                    100.0 * w,
                    100.0 * ow,
                    match e.quota_cores {
                        Some(q) => format!(
                            "its CPU quota of {} cores, or other work,",
                            crate::net::inventory::cores(q)
                        ),
                        None => "a CPU quota or other work".into(),
                    },
                    if e.throttled_s.is_none() {
                        " (its cgroup's throttling is not visible to it)"
                    } else {
                        ""
                    }
                ),
            };
        }
    }
    // CPU: starved, busier than the others.
    let others_busy = median(others.iter().filter_map(|e| e.busy_pct).collect());
    if let (Some(e), Some(ob)) = (
        mine.iter()
            .filter(|e| e.busy_pct.is_some_and(|b| b >= CPU_LIMITED_PCT))
            .max_by(|a, b| a.busy_pct.unwrap_or(0.0).total_cmp(&b.busy_pct.unwrap_or(0.0))),
        others_busy,
    ) {
        if e.busy_pct.unwrap_or(0.0) >= ob + STARVED_MARGIN_PCT {
            return Judged {
                busy: false,
                cause: Cause::Cpu,
                why: format!(
                    "{}'s CPUs were {:.0}% busy against {ob:.0}% on the other hosts: its ranks waited for a core",
                    e.host,
                    e.busy_pct.unwrap_or(0.0)
                ),
            };
        }
    }
    // TCP buffers: a named host whose buffers are smaller than the others' (its drops and slowness follow).
    let diffs = differences(seen);
    if let Some(why) = targets.iter().find_map(|h| small_buffers(h, seen, &diffs)) {
        return Judged {
            busy: false,
            cause: Cause::TcpBuffers,
            why,
        };
    }
    // Loss: retransmitting, more than the others. A host that receives cleanly resends what a partner dropped
    // on receiving: where a minority of the hosts lose what they receive, the others' retransmissions are
    // those hosts' drops, not their own loss (where most do, the sender's way out is the common factor).
    let drops_received = |e: &HostEvidence| e.tcp.is_some_and(|t| t.ofo_share() >= LOSS_SHARE);
    let droppers = seen.iter().filter(|e| drops_received(e)).count();
    let resend_for_others = droppers > 0 && 2 * droppers < seen.len();
    let share = |e: &HostEvidence| {
        e.tcp.map(|t| {
            if resend_for_others && !drops_received(e) {
                t.ofo_share()
            } else {
                t.loss_share()
            }
        })
    };
    let others_loss = median(others.iter().filter_map(|e| share(e)).collect()).unwrap_or(0.0);
    if let Some(e) = mine
        .iter()
        .filter(|e| share(e).is_some_and(|s| s >= LOSS_SHARE && s >= LOSS_VS_OTHERS * others_loss))
        .max_by(|a, b| share(a).unwrap_or(0.0).total_cmp(&share(b).unwrap_or(0.0)))
    {
        let t = e.tcp.unwrap_or_default();
        return Judged {
            cause: Cause::Loss,
            why: format!(
                "{} shows packet loss: {} of {} segments it received arrived out of order behind a lost one \
                 ({:.1}%), {} of {} it sent were retransmitted ({:.2}%), {} timeouts; the larger share is {:.1}% \
                 against {:.1}% on the other hosts (a share of segments touched by loss, not the loss rate): \
                 packets are lost{}",
                e.host,
                t.ofo,
                t.in_segs,
                100.0 * t.ofo_share(),
                t.retrans_segs,
                t.out_segs,
                100.0 * t.retrans_share(),
                t.timeouts,
                100.0 * t.loss_share(),
                100.0 * others_loss,
                if stalls {
                    ", and each lost small message waits out a retransmission timeout"
                } else {
                    ""
                }
            ),
            busy: false,
        };
    }
    let busy = mine.iter().filter_map(|e| e.busy_pct).fold(0.0, f64::max);
    // Before the configuration: a setting that differs (an MTU, offloads) does not make an 8-byte round trip
    // wait on every host's busy cores, a busy core does.
    let all_busy = every_host_busy(seen);
    if all_busy && latency_like {
        // A rank that waits for a core answers late: on hosts this busy a slow round trip is no evidence
        // against the link.
        return Judged {
            cause: Cause::Cpu,
            why: format!(
                "every host's CPUs were {CPU_LIMITED_PCT:.0}% busy or more (other work; {} {busy:.0}%), no host \
                 set apart ({}, no loss): a rank waiting for a core answers late, so this is not blamed on the \
                 link; measure again when the hosts are quieter",
                targets.join(", "),
                throttling_known(seen)
            ),
            busy: true,
        };
    }
    // Configuration: a named host set up unlike the others.
    if let Some((h, what)) = diffs.iter().find(|(h, _)| targets.contains(h)) {
        return Judged {
            busy: false,
            cause: Cause::Configuration,
            why: format!("{h} is set up unlike the other hosts: {}", describe(what)),
        };
    }
    Judged {
        busy: false,
        cause: Cause::Link,
        why: format!(
            "{}, no more retransmissions than elsewhere and the same configuration as the other hosts on {}: the link \
             itself (NIC, cable, switch port, a rate limit on the way){}",
            if mine.iter().all(|e| e.throttled_s.is_some()) {
                "no throttling"
            } else {
                "throttling unknown (no cgroup CPU statistics visible), no rank starved of CPU"
            },
            targets.join(", "),
            if busy >= CPU_LIMITED_PCT {
                format!("; note the CPUs were {busy:.0}% busy, as on the other hosts")
            } else {
                String::new()
            }
        ),
    }
}

/// Whether every host's CPUs were [`CPU_LIMITED_PCT`] busy or more (other work): a figure measured then may be
/// the cores', not the network's. False without evidence.
pub fn every_host_busy(seen: &[HostEvidence]) -> bool {
    !seen.is_empty() && seen.iter().all(|e| e.busy_pct.is_some_and(|b| b >= CPU_LIMITED_PCT))
}

/// `MTU 9000 (others 1500), TSO off (others on)`.
fn describe(what: &[(String, String, String)]) -> String {
    what.iter()
        .map(|(k, v, usual)| format!("{k} {v} (others {usual})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The cause of a collective falling short on every host: the host whose evidence stands out (throttled,
/// retransmitting, set up differently), else the link, pointing at the pairwise findings where there are any.
pub fn judge_cluster(seen: &[HostEvidence], findings: &[String]) -> Judged {
    // Each host's own cause; the strongest wins: CPU, then loss, then configuration, each by its figure.
    let rank = |c: Cause| match c {
        Cause::Cpu => 0,
        Cause::TcpBuffers => 1,
        Cause::Loss => 2,
        Cause::Configuration => 3,
        // Named by the MTU check only, never from evidence.
        Cause::Mtu => 4,
        Cause::Link => 5,
    };
    // Loss everywhere alike is the fabric's, before any one host's cause.
    if let Some(j) = fabric_loss(seen) {
        return j;
    }
    let best = seen
        .iter()
        .map(|e| {
            let j = judge(std::slice::from_ref(&e.host), seen, false);
            let score = match j.cause {
                Cause::Cpu => {
                    e.throttled_share().max(e.waited_share().unwrap_or(0.0)) + e.busy_pct.unwrap_or(0.0) / 1e4
                }
                Cause::Loss => e.tcp.map_or(0.0, |t| t.loss_share()),
                _ => 0.0,
            };
            (j, score)
        })
        .filter(|(j, _)| j.cause != Cause::Link)
        .min_by(|a, b| rank(a.0.cause).cmp(&rank(b.0.cause)).then(b.1.total_cmp(&a.1)));
    if let Some((j, _)) = best {
        return j;
    }
    let all_busy = every_host_busy(seen);
    if all_busy && findings.is_empty() {
        // Nothing stands out and no link is slow on its own: the collective waited for cores.
        return Judged {
            cause: Cause::Cpu,
            why: format!(
                "every host's CPUs were {CPU_LIMITED_PCT:.0}% busy or more (other work), {}, no host losing packets \
                 and the pairwise test found no slow link: the collective waited for cores, not the network; \
                 measure again when the hosts are quieter",
                throttling_known(seen)
            ),
            busy: true,
        };
    }
    Judged {
        busy: false,
        cause: Cause::Link,
        why: if findings.is_empty() {
            format!(
                "{}, no host starved of CPU, retransmitting or set up differently: the network (every link alike, \
                 or the switch)",
                throttling_known(seen)
            )
        } else {
            format!(
                "{}, no host starved of CPU, retransmitting or set up differently: the slow link(s) the pairwise \
                 test names ({})",
                throttling_known(seen),
                findings.join("; ")
            )
        },
    }
}

/// The cause of `host` being slow to receive (`way` says so with the matrix's figures), where `general` is what
/// [`judge`] found without the direction. A starved CPU stays the cause. Otherwise the loss is the receiver's:
/// what it drops arrives out of order behind the gap, and its partners retransmit it, so their retransmissions
/// count against it, never against them; without loss it is the way in (a policer, the switch port toward it,
/// its NIC's receive side).
pub fn judge_receiver(host: &str, seen: &[HostEvidence], way: &str, general: Judged) -> Judged {
    if matches!(general.cause, Cause::Cpu | Cause::TcpBuffers) {
        // Small receive buffers make a host slow to receive, and what it drops is theirs.
        return match general.cause {
            Cause::TcpBuffers => Judged {
                why: format!("{way}; {}", general.why),
                ..general
            },
            _ => general,
        };
    }
    let me = seen.iter().find(|e| e.host == host);
    let ofo = me.and_then(|e| e.tcp).map_or(0.0, |t| t.ofo_share());
    // What the others sent again: for a host that drops what it receives, its partners' retransmissions.
    let partners: Vec<&HostEvidence> = seen.iter().filter(|e| e.host != host).collect();
    let (resent, sent) = partners
        .iter()
        .filter_map(|e| e.tcp)
        .fold((0u64, 0u64), |(r, s), t| (r + t.retrans_segs, s + t.out_segs));
    let partners_share = if sent == 0 { 0.0 } else { resent as f64 / sent as f64 };
    if ofo >= LOSS_SHARE || partners_share >= LOSS_SHARE {
        return Judged {
            busy: false,
            cause: Cause::Loss,
            why: format!(
                "{way}; it drops what it receives: {:.1}% of the segments it received arrived out of order behind a \
                 lost one, and its partners retransmitted {:.2}% of what they sent (their retransmissions are \
                 {host}'s drops, not their fault): a policer or rate limit on its way in, a full receive queue, or \
                 the switch port toward it",
                100.0 * ofo,
                100.0 * partners_share
            ),
        };
    }
    Judged {
        busy: false,
        cause: Cause::Link,
        why: format!(
            "{way}; no loss seen: the way in to {host} (a rate limit on the switch port toward it, its NIC's \
             receive side)"
        ),
    }
}

/// The cause written into a check: its field, the evidence of `hosts` (every host when empty), and a
/// sentence in its detail.
pub fn annotate(c: &mut Check, j: Judged, seen: &[HostEvidence], hosts: &[String]) {
    c.detail = format!("{}; most likely cause: {}: {}", c.detail, j.cause.word(), j.why);
    c.cause = Some(j.cause);
    c.evidence = seen
        .iter()
        .filter(|e| hosts.is_empty() || hosts.contains(&e.host))
        .cloned()
        .collect();
}

/// Whether `text` names `host` as a whole word (`h1` is not named by `h10`).
pub(super) fn names(text: &str, host: &str) -> bool {
    text.match_indices(host).any(|(i, _)| {
        let before = text[..i].chars().last();
        let after = text[i + host.len()..].chars().next();
        let edge = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_');
        edge(before) && edge(after)
    })
}

/// The configuration's own checks on a path: each host set up unlike the others (a warning), and each
/// warning `collbench info` gives about the path's interfaces or the ranks' CPUs (a failure).
pub fn config_checks(path: &str, seen: &[HostEvidence], inventories: &[HostInventory]) -> Vec<Check> {
    let mut out = Vec::new();
    let check = |name: String, measured: String, threshold: &str, source: &str, verdict, detail: String| Check {
        cause: Some(Cause::Configuration),
        ..super::verdict::bare_check(name, path, measured, threshold.into(), source.into(), verdict, detail)
    };
    for (h, what) in differences(seen) {
        let buffers = what
            .iter()
            .all(|(k, _, _)| super::tuning::BUFFER_SETTINGS.contains(&k.as_str()));
        let mut c = check(
            format!("{path} configuration of {h}"),
            describe(&what),
            "as on the other hosts",
            "the hosts' path settings (built in)",
            Verdict::Warn,
            format!("{h} sets up {path} unlike the other hosts: {}", describe(&what)),
        );
        if buffers {
            c.cause = Some(Cause::TcpBuffers);
        }
        c.evidence = seen.iter().filter(|e| e.host == h).cloned().collect();
        out.push(c);
    }
    // One inventory per host, with its ranks counted.
    let mut hosts: Vec<HostInventory> = Vec::new();
    let mut ranks: Vec<(String, usize)> = Vec::new();
    for inv in inventories {
        match ranks.iter_mut().find(|(h, _)| *h == inv.host) {
            Some((_, n)) => *n += 1,
            None => {
                ranks.push((inv.host.clone(), 1));
                hosts.push(inv.clone());
            }
        }
    }
    let ifaces: Vec<(String, String)> = seen.iter().map(|e| (e.host.clone(), e.config.iface.clone())).collect();
    let on_path = |what: &str| seen.iter().any(|e| names(what, &e.config.iface)) || what.contains("CPU quota");
    let mut k = 0;
    for a in advise(&hosts, &ranks, &ifaces) {
        if a.severity != Severity::Warning || !on_path(&a.what) {
            continue;
        }
        k += 1;
        let named: Vec<String> = seen
            .iter()
            .filter(|e| names(&a.what, &e.host))
            .map(|e| e.host.clone())
            .collect();
        let mut c = check(
            format!("{path} configuration warning {k}"),
            a.what.clone(),
            "no warning from `collbench info`",
            "collbench info's checks (built in)",
            Verdict::Fail,
            format!("{}; {}", a.what, a.advice),
        );
        c.evidence = seen.iter().filter(|e| named.contains(&e.host)).cloned().collect();
        // A CPU quota too small for the ranks is that host's CPU: one fault, one cause across the report.
        if a.what.contains("CPU quota") {
            c.cause = Some(Cause::Cpu);
        }
        out.push(c);
    }
    out
}

/// Paths whose line rate is unknown (virtual interfaces) get the cluster's own: the upper median of each
/// host's best link in the pairwise test, said so. Only across hosts: ranks of one host share its CPUs, and
/// their pairs measure the scheduler.
pub fn cluster_line_rates(paths: &mut [PathInfo], reports: &[PairwiseReport]) {
    for p in paths.iter_mut().filter(|p| p.line_rate_gbs.is_none()) {
        let Some(rep) = reports.iter().find(|r| r.path == p.name && r.unit == "hosts") else {
            continue;
        };
        let best: Vec<f64> = (0..rep.hosts.len())
            .filter_map(|h| {
                rep.links
                    .iter()
                    .filter(|l| l.a == h || l.b == h)
                    .map(|l| l.bw_gbs)
                    .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
            })
            .collect();
        let Some(rate) = median(best).filter(|r| *r > 0.0) else {
            continue;
        };
        p.line_rate_gbs = Some(rate);
        p.rate_from = format!(
            "the median of the cluster's own links ({} hosts' best link in the pairwise test; {})",
            rep.hosts.len(),
            p.rate_from
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::preflight::evidence::{PathConfig, TcpCounters};

    fn host(name: &str) -> HostEvidence {
        HostEvidence {
            host: name.into(),
            wall_s: 10.0,
            busy_pct: Some(40.0),
            cpu_s: 2.0,
            throttled_s: Some(0.0),
            throttled_periods: Some(0),
            waited_s: Some(1.0),
            link_downs: Some(0),
            quota_cores: None,
            tcp: Some(TcpCounters {
                out_segs: 10_000,
                retrans_segs: 5,
                in_errs: 0,
                timeouts: 0,
                in_segs: 10_000,
                ofo: 0,
            }),
            config: PathConfig {
                iface: "eth0".into(),
                kind: "veth".into(),
                mtu: Some(1500),
                speed_mbps: Some(10_000),
                speed_virtual: true,
                tso: Some(true),
                gso: Some(true),
                gro: Some(true),
                congestion: Some("cubic".into()),
                underlay: None,
                underlay_mtu: None,
                tuning: Default::default(),
            },
            gpu: None,
        }
    }

    fn cluster() -> Vec<HostEvidence> {
        ["h0", "h1", "h2", "h3"].iter().map(|h| host(h)).collect()
    }

    #[test]
    fn a_throttled_host_is_the_cpu_even_for_stalls() {
        let mut s = cluster();
        s[1].throttled_s = Some(9.0);
        s[1].throttled_periods = Some(2193);
        let j = judge(&["h1".into()], &s, true);
        assert_eq!(j.cause, Cause::Cpu, "{j:?}");
        assert!(j.why.contains("h1") && j.why.contains("2193 periods") && j.why.contains("without any packet lost"));
        // The same figures on a host the finding does not name do not make it the CPU.
        assert_eq!(judge(&["h2".into()], &s, false).cause, Cause::Link);
    }

    #[test]
    fn a_host_retransmitting_more_than_the_others_is_loss() {
        let mut s = cluster();
        s[2].tcp = Some(TcpCounters {
            out_segs: 10_000,
            retrans_segs: 900,
            in_errs: 0,
            timeouts: 40,
            in_segs: 10_000,
            ofo: 0,
        });
        // Its partners resend what it drops too, but less.
        s[0].tcp.as_mut().unwrap().retrans_segs = 250;
        let j = judge(&["h2".into()], &s, true);
        assert_eq!(j.cause, Cause::Loss, "{j:?}");
        assert!(j.why.contains("9.0%"), "{}", j.why);
        assert_eq!(judge(&["h1".into()], &s, false).cause, Cause::Link);
        // The cluster-wide cause of a slow collective names the same host.
        let c = judge_cluster(&s, &[]);
        assert_eq!(c.cause, Cause::Loss);
        assert!(c.why.starts_with("h2 "), "{}", c.why);
    }

    #[test]
    fn resending_what_one_host_dropped_on_receiving_is_not_the_senders_loss() {
        // As measured with h2 dropping 10% of what it receives, every host 100% busy: 66% of what h2 received
        // came out of order, and h0 resent 2.7% of what it sent (to h2), receiving cleanly itself.
        let mut s = cluster();
        for e in &mut s {
            e.busy_pct = Some(100.0);
        }
        s[2].tcp.as_mut().unwrap().ofo = 6_600;
        s[0].tcp.as_mut().unwrap().retrans_segs = 270;
        // A slow round trip of h0's: not loss (h2's drops), so on hosts this busy, the cores.
        let j = judge_metric(&["h0".into()], &s, false, true);
        assert_eq!((j.cause, j.busy), (Cause::Cpu, true), "{j:?}");
        assert_eq!(judge(&["h2".into()], &s, true).cause, Cause::Loss);
        // Where every partner receives out of order, h0's way out is the common factor: its loss.
        for e in &mut s[1..] {
            e.tcp.as_mut().unwrap().ofo = 300;
        }
        s[0].tcp.as_mut().unwrap().retrans_segs = 900;
        let j = judge_metric(&["h0".into()], &s, false, true);
        assert_eq!(j.cause, Cause::Loss, "{j:?}");
    }

    #[test]
    fn a_host_set_up_unlike_the_others_is_configuration() {
        let mut s = cluster();
        s[3].config.mtu = Some(9000);
        s[3].config.gro = Some(false);
        let d = differences(&s);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].0, "h3");
        let j = judge(&["h3".into()], &s, false);
        assert_eq!(j.cause, Cause::Configuration);
        assert!(
            j.why.contains("MTU 9000 (others 1500)") && j.why.contains("GRO off (others on)"),
            "{}",
            j.why
        );
        let checks = config_checks("tcp@eth0", &s, &[]);
        assert_eq!(checks.len(), 1);
        assert_eq!(
            (checks[0].name.as_str(), checks[0].verdict),
            ("tcp@eth0 configuration of h3", Verdict::Warn)
        );
    }

    /// `cluster()` with every host's TCP buffer limits and sockets as a stock host has them.
    fn tuned() -> Vec<HostEvidence> {
        let mut s = cluster();
        for e in &mut s {
            e.config.tuning = crate::validate::preflight::tuning::Tuning {
                tcp_rmem: Some("4096 131072 6291456".into()),
                tcp_wmem: Some("4096 16384 4194304".into()),
                rmem_max: Some(212_992),
                wmem_max: Some(212_992),
                window_scaling: Some(true),
                rcvbuf: Some(3 << 20),
                sndbuf: Some(4 << 20),
                rps: Some(true),
                kernel: Some("6.1.0-18-amd64".into()),
                conntrack: Some(12),
                firewall_rules: Some(40),
                ..Default::default()
            };
        }
        s
    }

    #[test]
    fn a_host_with_small_tcp_buffers_is_tcp_buffers_even_when_it_drops() {
        let mut s = tuned();
        s[2].config.tuning.tcp_rmem = Some("4096 4096 4096".into());
        s[2].config.tuning.tcp_wmem = Some("4096 4096 4096".into());
        s[2].config.tuning.rcvbuf = Some(4096);
        s[2].config.tuning.sndbuf = Some(4096);
        // What its tiny window drops, its partners resend: the buffers explain the loss.
        s[2].tcp.as_mut().unwrap().ofo = 900;
        let j = judge(&["h2".into()], &s, false);
        assert_eq!(j.cause, Cause::TcpBuffers, "{j:?}");
        assert!(
            j.why.contains("tcp_rmem 4096 4096 4096 (others 4096 131072 6291456)")
                && j.why.contains("tcp_wmem 4096 4096 4096 (others 4096 16384 4194304)")
                && j.why.contains("got 4 KiB to receive"),
            "{}",
            j.why
        );
        // Slow to receive, it stays the buffers, not the way in.
        let r = judge_receiver("h2", &s, "h2 is slow to receive", j);
        assert_eq!(r.cause, Cause::TcpBuffers, "{r:?}");
        assert!(
            r.why.starts_with("h2 is slow to receive; h2's TCP buffers"),
            "{}",
            r.why
        );
        // The configuration check says it with the same cause; another host is not it.
        let c = config_checks("tcp@eth0", &s, &[]);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!((c[0].verdict, c[0].cause), (Verdict::Warn, Some(Cause::TcpBuffers)));
        assert_ne!(judge(&["h1".into()], &s, false).cause, Cause::TcpBuffers);
        assert_eq!(judge_cluster(&s, &[]).cause, Cause::TcpBuffers);
        // Small sockets alone (a host slowed by anything gets them) are not the buffers.
        let mut s = tuned();
        s[1].config.tuning.rcvbuf = Some(8192);
        assert_eq!(judge(&["h1".into()], &s, false).cause, Cause::Link);
    }

    #[test]
    fn a_host_tuned_unlike_the_others_is_a_warning_and_the_cause_when_slow() {
        use crate::validate::preflight::tuning::Tuning;
        type Set = fn(&mut Tuning);
        let cases: [(&str, Set); 5] = [
            ("RPS off (others on)", |t: &mut Tuning| t.rps = Some(false)),
            ("kernel 5.10.0-28-amd64 (others 6.1.0-18-amd64)", |t: &mut Tuning| {
                t.kernel = Some("5.10.0-28-amd64".into())
            }),
            ("rings rx 256, tx 256 (others rx 4096, tx 4096)", |t: &mut Tuning| {
                t.rings = Some("rx 256, tx 256".into())
            }),
            ("conntrack entries 250000 (others about 12)", |t: &mut Tuning| {
                t.conntrack = Some(250_000)
            }),
            ("firewall rules 24000 (others about 40)", |t: &mut Tuning| {
                t.firewall_rules = Some(24_000)
            }),
        ];
        for (what, set) in cases {
            let mut s = tuned();
            if what.starts_with("rings") {
                for e in &mut s {
                    e.config.tuning.rings = Some("rx 4096, tx 4096".into());
                }
            }
            set(&mut s[3].config.tuning);
            let c = config_checks("tcp@eth0", &s, &[]);
            assert_eq!(c.len(), 1, "{what}: {c:?}");
            assert_eq!(
                (c[0].name.as_str(), c[0].verdict, c[0].cause),
                (
                    "tcp@eth0 configuration of h3",
                    Verdict::Warn,
                    Some(Cause::Configuration)
                ),
                "{what}"
            );
            assert!(c[0].measured.contains(what), "{what}: {}", c[0].measured);
            let j = judge(&["h3".into()], &s, false);
            assert_eq!(j.cause, Cause::Configuration, "{what}: {j:?}");
            assert!(j.why.contains(what), "{}", j.why);
            // Not the cause of another host's slowness.
            assert_eq!(judge(&["h1".into()], &s, false).cause, Cause::Link, "{what}");
        }
        // Hosts alike: no warning.
        assert!(config_checks("tcp@eth0", &tuned(), &[]).is_empty());
    }

    #[test]
    fn loss_on_every_host_alike_is_the_fabric() {
        let mut s = tuned();
        for (e, r) in s.iter_mut().zip([110, 95, 130, 100]) {
            let t = e.tcp.as_mut().unwrap();
            t.retrans_segs = r;
            t.ofo = 400;
        }
        let j = fabric_loss(&s).expect("the fabric");
        assert_eq!(j.cause, Cause::Loss);
        assert!(
            j.why.contains("0.95-1.30%") && j.why.contains("whole fabric"),
            "{}",
            j.why
        );
        for h in ["h0", "h1", "h2", "h3"] {
            assert!(!names(&j.why, h), "{}", j.why);
        }
        assert_eq!(judge_cluster(&s, &[]), j);
        // One host losing far more than the others is that host's loss, not the fabric's.
        s[2].tcp.as_mut().unwrap().retrans_segs = 1_000;
        assert_eq!(fabric_loss(&s), None);
        // A host that does not lose (a receiver its partners resend to) leaves it to the single-host rules.
        let mut s = tuned();
        for (e, r) in s.iter_mut().zip([300, 300, 2, 300]) {
            e.tcp.as_mut().unwrap().retrans_segs = r;
        }
        assert_eq!(fabric_loss(&s), None);
        // A clean cluster: nothing.
        assert_eq!(fabric_loss(&cluster()), None);
    }

    #[test]
    fn a_rank_waiting_for_a_cpu_far_longer_than_the_others_is_starved_without_any_cgroup_visible() {
        // Ranks started by `ip netns exec` see no cgroup: throttling unknown on every host, and the machine-wide
        // CPU figures alike. The starved rank's own scheduler statistics set its host apart.
        let mut s = cluster();
        for h in &mut s {
            h.throttled_s = None;
            h.throttled_periods = None;
            h.busy_pct = Some(95.0);
        }
        s[2].waited_s = Some(8.5);
        let j = judge(&["h2".into()], &s, false);
        assert_eq!(j.cause, Cause::Cpu, "{j:?}");
        assert!(
            j.why.contains("h2") && j.why.contains("85%") && j.why.contains("10%"),
            "{}",
            j.why
        );
        assert!(j.why.contains("not visible"), "{}", j.why);
        // Across the cluster, the same host is the cause, not "the network".
        let c = judge_cluster(&s, &[]);
        assert_eq!(c.cause, Cause::Cpu, "{c:?}");
        assert!(c.why.contains("h2"), "{}", c.why);
        // Every host waiting alike (more ranks than cores) sets none apart.
        for h in &mut s {
            h.waited_s = Some(6.0);
        }
        assert_ne!(judge(&["h2".into()], &s, false).cause, Cause::Cpu);
    }

    #[test]
    fn the_cause_names_the_quota_where_the_cgroup_was_found() {
        let mut s = cluster();
        s[1].throttled_s = Some(9.0);
        s[1].throttled_periods = Some(400);
        s[1].quota_cores = Some(0.1);
        let j = judge(&["h1".into()], &s, false);
        assert_eq!(j.cause, Cause::Cpu, "{j:?}");
        assert!(
            j.why
                .starts_with("h1's ranks were throttled by their CPU quota of 0.1 cores for 9.00 s"),
            "{}",
            j.why
        );
        assert!(
            s[1].line().contains("CPU quota 0.1 cores, throttled 9.00 s"),
            "{}",
            s[1].line()
        );
        // Starved by its wait alone, with the quota known: the quota is named as what starves it.
        let mut s = cluster();
        s[2].waited_s = Some(8.5);
        s[2].quota_cores = Some(0.02);
        let j = judge(&["h2".into()], &s, false);
        assert_eq!(j.cause, Cause::Cpu, "{j:?}");
        assert!(
            j.why.contains("its CPU quota of 0.02 cores, or other work, starves it"),
            "{}",
            j.why
        );
        // Without a quota found the sentence stays general.
        s[2].quota_cores = None;
        assert!(judge(&["h2".into()], &s, false)
            .why
            .contains("a CPU quota or other work starves it"));
    }

    #[test]
    fn throttling_unknown_is_said_as_unknown() {
        let mut s = cluster();
        let j = judge_cluster(&s, &[]);
        assert!(j.why.starts_with("no host was throttled,"), "{}", j.why);
        s[1].throttled_s = None;
        let j = judge_cluster(&s, &[]);
        assert!(j.why.contains("unknown on h1"), "{}", j.why);
        for h in &mut s {
            h.throttled_s = None;
        }
        let j = judge_cluster(&s, &[]);
        assert!(j.why.starts_with("throttling unknown"), "{}", j.why);
        assert!(!j.why.contains("no host was throttled"), "{}", j.why);
        let j = judge(&["h1".into()], &s, false);
        assert!(j.why.starts_with("throttling unknown"), "{}", j.why);
    }

    #[test]
    fn busy_hosts_alike_are_not_the_cause_but_said() {
        let mut s = cluster();
        for h in &mut s {
            h.busy_pct = Some(99.0);
        }
        let j = judge(&["h1".into()], &s, false);
        assert_eq!(j.cause, Cause::Link);
        assert!(j.why.contains("99% busy"), "{}", j.why);
        // One host much busier than the others is starved.
        let mut s = cluster();
        s[1].busy_pct = Some(97.0);
        assert_eq!(judge(&["h1".into()], &s, false).cause, Cause::Cpu);
    }

    #[test]
    fn slow_round_trips_on_hosts_all_busy_are_the_cpu_and_only_a_warning() {
        let mut s = cluster();
        for h in &mut s {
            h.busy_pct = Some(100.0);
        }
        let j = judge_metric(&["h0".into()], &s, false, true);
        assert_eq!((j.cause, j.busy), (Cause::Cpu, true), "{j:?}");
        assert!(j.why.contains("not blamed on the link"), "{}", j.why);
        // Bandwidth is not excused by busy CPUs alone.
        let b = judge_metric(&["h0".into()], &s, false, false);
        assert_eq!((b.cause, b.busy), (Cause::Link, false));
        // A host set up unlike the others does not make its round trips wait on busy cores: still the CPU.
        s[0].config.mtu = Some(1400);
        let j = judge_metric(&["h0".into()], &s, false, true);
        assert_eq!((j.cause, j.busy), (Cause::Cpu, true), "{j:?}");
        assert_eq!(
            judge_metric(&["h0".into()], &s, false, false).cause,
            Cause::Configuration
        );
        // Nor is loss: the lost packets are the evidence.
        s[0].tcp.as_mut().unwrap().ofo = 3_000;
        s[0].tcp.as_mut().unwrap().in_segs = 10_000;
        assert_eq!(judge_metric(&["h0".into()], &s, true, true).cause, Cause::Loss);
    }

    #[test]
    fn a_short_collective_on_busy_hosts_without_a_slow_link_is_the_cpu() {
        let mut s = cluster();
        for h in &mut s {
            h.busy_pct = Some(100.0);
        }
        let j = judge_cluster(&s, &[]);
        assert_eq!((j.cause, j.busy), (Cause::Cpu, true), "{j:?}");
        // With a slow link named, the link it is.
        let j = judge_cluster(&s, &["tcp@eth0 pairwise: slow link h1 <-> h3".into()]);
        assert_eq!((j.cause, j.busy), (Cause::Link, false), "{j:?}");
    }

    #[test]
    fn a_host_slow_to_receive_owns_its_partners_retransmissions() {
        let mut s = cluster();
        // h2 drops what it receives: its partners resend, and what reaches it comes out of order.
        for (i, e) in s.iter_mut().enumerate() {
            let t = e.tcp.as_mut().unwrap();
            if i == 2 {
                t.ofo = 400;
            } else {
                t.retrans_segs = 600;
            }
        }
        let general = judge(&["h2".into()], &s, false);
        let j = judge_receiver("h2", &s, "h2 is slow to receive", general);
        assert_eq!(j.cause, Cause::Loss, "{j:?}");
        assert!(
            j.why.starts_with("h2 is slow to receive; it drops what it receives"),
            "{}",
            j.why
        );
        assert!(j.why.contains("their retransmissions are h2's drops"), "{}", j.why);
        for other in ["h0", "h1", "h3"] {
            assert!(!names(&j.why, other), "{}", j.why);
        }
        // No loss anywhere: the way in.
        let clean = cluster();
        let j = judge_receiver(
            "h2",
            &clean,
            "h2 is slow to receive",
            judge(&["h2".into()], &clean, false),
        );
        assert_eq!(j.cause, Cause::Link);
        assert!(j.why.contains("the way in to h2"), "{}", j.why);
        // A starved CPU stays the cause.
        let mut busy = cluster();
        busy[2].throttled_s = Some(9.0);
        let j = judge_receiver(
            "h2",
            &busy,
            "h2 is slow to receive",
            judge(&["h2".into()], &busy, false),
        );
        assert_eq!(j.cause, Cause::Cpu);
    }

    #[test]
    fn host_names_are_whole_words() {
        assert!(names("MTU 1500 on c-h1 (eth0)", "c-h1"));
        assert!(!names("MTU 1500 on c-h10 (eth0)", "c-h1"));
        assert!(names("c-h1", "c-h1"));
    }

    #[test]
    fn virtual_speeds_take_the_cluster_links_median() {
        use crate::validate::pairwise::localise::tests::matrix;
        let (parts, links) = matrix(4, |a, b, _| if a == 3 || b == 3 { 0.01 } else { 0.05 }, |_, _, _| 30.0);
        let rep = PairwiseReport {
            schema: String::new(),
            path: "tcp@eth0".into(),
            unit: "hosts".into(),
            config: Default::default(),
            hosts: parts,
            links,
            findings: Vec::new(),
            dismissed: Vec::new(),
            host_config: Vec::new(),
            link_downs: Vec::new(),
            thresholds: Default::default(),
            rounds: 3,
            remeasure_rounds: 0,
            elapsed_s: 1.0,
            plan: None,
        };
        let mut paths = vec![PathInfo {
            name: "tcp@eth0".into(),
            given: "tcp@eth0".into(),
            line_rate_gbs: None,
            rate_from: "link speed of eth0 unknown".into(),
        }];
        cluster_line_rates(&mut paths, &[rep]);
        assert!((paths[0].line_rate_gbs.unwrap() - 0.05).abs() < 1e-3, "{paths:?}");
        assert!(
            paths[0].rate_from.contains("median of the cluster's own links"),
            "{paths:?}"
        );
    }
}
