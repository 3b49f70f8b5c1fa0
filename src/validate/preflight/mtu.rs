//! The path MTU check, right after connectivity: every host's first rank echoes UDP probes with don't-fragment
//! set and probes every other host (`net::pmtu`: a small payload, a full frame, then bisection); rank 0
//! names a host whose full-sized frames vanish with every partner (a path MTU black hole at that host), or else
//! each link where they do, with the largest payload that passed; and it picks the hosts the rest of the
//! preflight leaves out so that nothing it sends waits on a frame that cannot arrive.

use std::net::{IpAddr, SocketAddr};

use super::verdict::{bare_check, Cause, Check, Verdict};
use crate::error::{Error, Result};
use crate::net::pmtu::{self, Probed};
use crate::results::RankInfo;
use crate::transport::control;
use crate::transport::Transport;

/// The MTU assumed for an interface whose MTU cannot be read: Ethernet's.
const ASSUMED_MTU: u32 = 1500;

/// What the check found, on every rank: the ranks the rest of the preflight leaves out, and (rank 0) its checks.
#[derive(Debug, Default)]
pub struct Found {
    /// Ranks on hosts left out, ascending; empty when every full-sized frame arrived.
    pub excluded: Vec<usize>,
    /// Rank 0's checks: a failure per host or link named, else one pass per path probed.
    pub checks: Vec<Check>,
}

/// One host's reports, as gathered: the payload filling its interface's MTU, and each probe of a partner that
/// did not pass a full frame (host index, largest passing payload): a clean probe is not sent, so the gathered
/// message stays far below any MTU.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Report {
    full: u32,
    /// The IP and UDP headers' bytes in front of each payload.
    over: u32,
    odd: Vec<(usize, Option<u32>)>,
}

/// A host or link named, with the largest payload that passed and the full frame's.
#[derive(Clone, Debug, PartialEq)]
pub struct Named {
    /// Host indices: one for a host, two for a link.
    pub hosts: Vec<usize>,
    pub largest: u32,
    pub full: u32,
    /// Partners it was probed with.
    pub partners: usize,
    /// The IP and UDP headers' bytes: a payload plus these is a frame.
    pub over: u32,
}

/// What rank 0 judged from every host's reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Judged {
    pub named: Vec<Named>,
    /// Host indices left out of the rest of the preflight.
    pub excluded: Vec<usize>,
}

/// The address rank `r` measures path `k` from.
fn data_ip(r: &RankInfo, k: usize) -> Option<IpAddr> {
    let addr = r.endpoints.get(k).map_or(r.addr.as_str(), |e| e.addr.as_str());
    addr.parse::<SocketAddr>().ok().map(|a| a.ip())
}

/// The MTU check of every TCP path `ts` (the session's, `ranks` its ranks), run on every rank; the control
/// exchanges go over the first path, each a few bytes per host so that they pass whatever the MTU.
pub fn check<T: Transport>(ts: &mut [T], ifaces: &[String], ranks: &[RankInfo]) -> Result<Found> {
    let mut found = Found::default();
    // One rank per host probes; with every rank on one host there is no link to probe.
    let mut leaders: Vec<usize> = Vec::new();
    for (r, info) in ranks.iter().enumerate() {
        if !leaders.iter().any(|&l| ranks[l].host == info.host) {
            leaders.push(r);
        }
    }
    if leaders.len() < 2 || ts.is_empty() {
        return Ok(found);
    }
    let me = ts[0].rank();
    let mut excluded_hosts: Vec<usize> = Vec::new();
    for k in 0..ts.len() {
        let path = ts[k].path();
        let reports = probe_path(&mut ts[0], ranks, &leaders, k, &ifaces[k])?;
        let judged = (me == 0).then(|| judge(&reports.unwrap_or_default()));
        // Rank 0's choice of hosts to leave out, on every rank: a few bytes.
        let bytes = judged
            .as_ref()
            .map(|j| serde_json::to_vec(&j.excluded).expect("indices serialise"))
            .unwrap_or_default();
        let got = control::broadcast(&mut ts[0], &bytes)?;
        let out: Vec<usize> = serde_json::from_slice(&got).map_err(|e| unreadable(me, &e))?;
        excluded_hosts.extend(out);
        if let Some(j) = judged {
            let names: Vec<String> = leaders.iter().map(|&l| ranks[l].host.clone()).collect();
            found.checks.extend(checks(&path, &ifaces[k], &names, &j));
        }
    }
    excluded_hosts.sort_unstable();
    excluded_hosts.dedup();
    found.excluded = (0..ranks.len())
        .filter(|&r| {
            excluded_hosts
                .iter()
                .any(|&h| leaders.get(h).is_some_and(|&l| ranks[l].host == ranks[r].host))
        })
        .collect();
    Ok(found)
}

fn unreadable(me: usize, e: &serde_json::Error) -> Error {
    Error::peer(format!(
        "rank {me}: a peer sent an unreadable path MTU report ({e}); were all ranks started with the same collbench \
         version?"
    ))
}

/// Probes path `k` between the hosts' first ranks `leaders`; every host's report on rank 0, by host index.
fn probe_path<T: Transport>(
    t: &mut T,
    ranks: &[RankInfo],
    leaders: &[usize],
    k: usize,
    iface: &str,
) -> Result<Option<Vec<Report>>> {
    let me = t.rank();
    let mine = leaders.iter().position(|&l| l == me);
    let ip = data_ip(&ranks[me], k);
    // A host whose responder cannot start answers nothing: its links are unknown, never blamed.
    let responder = match (mine, ip) {
        (Some(_), Some(ip)) => {
            let peers = leaders
                .iter()
                .filter(|&&l| l != me)
                .filter_map(|&l| data_ip(&ranks[l], k))
                .collect();
            pmtu::Responder::start(ip, peers).ok()
        }
        _ => None,
    };
    let port = responder.as_ref().map_or(0u16, |r| r.port());
    let ports = match control::gather(t, &port.to_le_bytes())? {
        Some(all) => all
            .iter()
            .flat_map(|b| b.get(..2).map(|p| [p[0], p[1]]))
            .flatten()
            .collect::<Vec<u8>>(),
        None => Vec::new(),
    };
    let ports = control::broadcast(t, &ports)?;
    let port_of = |r: usize| ports.get(2 * r..2 * r + 2).map(|p| u16::from_le_bytes([p[0], p[1]]));
    let mut report = Report::default();
    if let (Some(i), Some(ip)) = (mine, ip) {
        let mtu = pmtu::iface_mtu(iface).unwrap_or(ASSUMED_MTU);
        report.over = pmtu::overhead(ip);
        report.full = mtu.saturating_sub(report.over);
        let peers: Vec<(usize, SocketAddr)> = leaders
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .filter_map(|(j, &l)| {
                let port = port_of(l).filter(|&p| p != 0)?;
                Some((j, SocketAddr::new(data_ip(&ranks[l], k)?, port)))
            })
            .collect();
        // Every partner at once: a host that fails with all of them takes the time of one.
        let full = report.full;
        let probed: Vec<(usize, Probed)> = std::thread::scope(|s| {
            let handles: Vec<_> = peers
                .iter()
                .map(|&(j, at)| s.spawn(move || (j, pmtu::probe(ip, at, full, pmtu::TRIES))))
                .collect();
            handles
                .into_iter()
                .filter_map(|h| h.join().ok())
                .filter_map(|(j, p)| p.ok().map(|p| (j, p)))
                .collect()
        });
        report.odd = probed
            .into_iter()
            .filter(|(_, p)| p.largest != Some(p.full))
            .map(|(j, p)| (j, p.largest))
            .collect();
    }
    // Every host's probes are done before any responder stops.
    control::barrier(t)?;
    drop(responder);
    let bytes = serde_json::to_vec(&report).expect("a report serialises");
    let Some(all) = control::gather(t, &bytes)? else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(leaders.len());
    for &l in leaders {
        let b = all.get(l).map(Vec::as_slice).unwrap_or_default();
        out.push(serde_json::from_slice::<Report>(b).map_err(|e| unreadable(0, &e))?);
    }
    Ok(Some(out))
}

/// Names hosts and links from every host's reports (by host index): a link is short where a payload below the
/// smaller of its ends' full frames was the largest to pass either way; a host whose every known link is short
/// (two partners at least, and not every link of the cluster short) is named, and each short link between
/// hosts not named. Left out: the hosts named, then for the links named, one end at a time (the end with the
/// most of them; never host 0, rank 0's), until no short link is left among the rest.
fn judge(reports: &[Report]) -> Judged {
    let n = reports.len();
    // largest[a][b]: the largest payload that passed between a and b either way; None where unknown.
    let mut link: Vec<Vec<Option<u32>>> = vec![vec![None; n]; n];
    for a in 0..n {
        for b in 0..n {
            if a == b || reports[a].full == 0 || reports[b].full == 0 {
                continue;
            }
            let want = reports[a].full.min(reports[b].full);
            let seen = |x: usize, y: usize| -> Option<u32> {
                match reports[x].odd.iter().find(|(j, _)| *j == y) {
                    Some((_, got)) => *got,
                    None => Some(reports[x].full),
                }
            };
            link[a][b] = match (seen(a, b), seen(b, a)) {
                (Some(x), Some(y)) => Some(x.min(y).min(want)),
                (Some(x), None) | (None, Some(x)) => Some(x.min(want)),
                (None, None) => None,
            };
        }
    }
    let want = |a: usize, b: usize| reports[a].full.min(reports[b].full);
    let short = |a: usize, b: usize| link[a][b].is_some_and(|l| l < want(a, b));
    let known = |a: usize| (0..n).filter(|&b| b != a && link[a][b].is_some()).count();
    let shorts = |a: usize| (0..n).filter(|&b| b != a && short(a, b)).count();
    let all_short = (0..n).all(|a| shorts(a) == known(a));
    let mut judged = Judged::default();
    let hosts: Vec<usize> = (0..n)
        .filter(|&a| !all_short && known(a) >= 2 && shorts(a) == known(a))
        .collect();
    for &h in &hosts {
        let partners: Vec<usize> = (0..n).filter(|&b| b != h && link[h][b].is_some()).collect();
        judged.named.push(Named {
            hosts: vec![h],
            largest: partners.iter().filter_map(|&b| link[h][b]).max().unwrap_or(0),
            full: partners.iter().map(|&b| want(h, b)).max().unwrap_or(0),
            partners: partners.len(),
            over: reports[h].over,
        });
    }
    let mut left: Vec<(usize, usize)> = Vec::new();
    for a in 0..n {
        for b in (a + 1)..n {
            if short(a, b) && !hosts.contains(&a) && !hosts.contains(&b) {
                judged.named.push(Named {
                    hosts: vec![a, b],
                    largest: link[a].get(b).copied().flatten().unwrap_or(0),
                    full: want(a, b),
                    partners: 1,
                    over: reports[a].over,
                });
                left.push((a, b));
            }
        }
    }
    judged.excluded = hosts;
    while !left.is_empty() {
        let count = |h: usize| left.iter().filter(|(a, b)| *a == h || *b == h).count();
        // The end with the most short links; of equals the later host, so rank 0's is kept while it can be.
        let h = (0..n)
            .filter(|&h| count(h) > 0)
            .max_by_key(|&h| (count(h), h != 0, h))
            .expect("a link is left");
        judged.excluded.push(h);
        left.retain(|(a, b)| *a != h && *b != h);
    }
    judged.excluded.sort_unstable();
    judged
}

/// Rank 0's checks for path `path`: a failure for each host or link named, or one pass.
fn checks(path: &str, iface: &str, names: &[String], j: &Judged) -> Vec<Check> {
    let source = format!("{iface}'s MTU less the IP and UDP headers");
    if j.named.is_empty() {
        return vec![bare_check(
            format!("{path} mtu"),
            path,
            "full-sized frames pass between every pair of hosts".into(),
            "full frames pass".into(),
            source,
            Verdict::Pass,
            "UDP probes with don't-fragment set, as large as each host's interface MTU allows, were echoed \
             between every pair of hosts (or a pair did not answer UDP at all, which says nothing of its MTU)"
                .into(),
        )];
    }
    let left_out: Vec<&str> = j.excluded.iter().map(|&h| names[h].as_str()).collect();
    let rest = names.len() - j.excluded.len();
    j.named
        .iter()
        .map(|x| {
            let (what, whom) = match x.hosts[..] {
                [h] => (
                    format!("host {}", names[h]),
                    format!("with every one of its {} partners", x.partners),
                ),
                [a, b, ..] => (
                    format!("link {} - {}", names[a], names[b]),
                    "between these two hosts only".to_string(),
                ),
                [] => (String::new(), String::new()),
            };
            let frame = x.largest + x.over;
            let mut c = bare_check(
                format!("{path} mtu: {what}"),
                path,
                format!("largest payload passing {} B", x.largest),
                format!(">= {} B", x.full),
                source.clone(),
                Verdict::Fail,
                format!(
                    "payloads of {} B (a full frame of the interface's MTU) vanish {whom}, while {} B pass: a path MTU \
                     black hole (a switch port or link at an MTU of about {frame} under the hosts' {}, and no ICMP \
                     back), so TCP stalls on its first full-sized segment; set that port's MTU to the hosts' or the \
                     hosts' to {frame} or less. Left out of the rest of the preflight: {}{}",
                    x.full,
                    x.largest,
                    x.full + x.over,
                    left_out.join(", "),
                    if rest >= 2 {
                        format!("; the other {rest} hosts are measured without it")
                    } else {
                        "; too few hosts are left to measure".to_string()
                    }
                ),
            );
            c.cause = Some(Cause::Mtu);
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host's full payload and its odd probes.
    type Host = (u32, Vec<(usize, Option<u32>)>);

    /// [`judge`] of each host's report over IPv4.
    fn judge_reports(reports: &[Host]) -> Judged {
        let rs: Vec<Report> = reports
            .iter()
            .map(|(full, odd)| Report {
                full: *full,
                over: pmtu::V4_OVERHEAD,
                odd: odd.clone(),
            })
            .collect();
        judge(&rs)
    }

    fn clean(n: usize) -> Vec<Host> {
        vec![(1472, Vec::new()); n]
    }

    #[test]
    fn a_host_whose_large_frames_vanish_with_every_partner_is_the_host() {
        // h2's switch port at MTU 1400: each probe to or from h2 passes 1372 B at most.
        let mut r = clean(4);
        r[2].1 = vec![(0, Some(1372)), (1, Some(1372)), (3, Some(1372))];
        for h in [0, 1, 3] {
            r[h].1 = vec![(2, Some(1372))];
        }
        let j = judge_reports(&r);
        assert_eq!(
            j.named,
            [Named {
                hosts: vec![2],
                largest: 1372,
                full: 1472,
                partners: 3,
                over: 28
            }]
        );
        assert_eq!(j.excluded, [2]);
        let names: Vec<String> = (0..4).map(|h| format!("h{h}")).collect();
        let c = checks("tcp@eth0", "eth0", &names, &j);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, "tcp@eth0 mtu: host h2");
        assert_eq!((c[0].verdict, c[0].cause), (Verdict::Fail, Some(Cause::Mtu)));
        assert!(
            c[0].measured.contains("1372 B") && c[0].detail.contains("1400"),
            "{c:?}"
        );
    }

    #[test]
    fn a_link_whose_large_frames_vanish_is_the_link_and_one_end_is_left_out() {
        let mut r = clean(4);
        r[1].1 = vec![(3, Some(1252))];
        r[3].1 = vec![(1, Some(1252))];
        let j = judge_reports(&r);
        assert_eq!(j.named.len(), 1);
        assert_eq!((j.named[0].hosts.clone(), j.named[0].largest), (vec![1, 3], 1252));
        assert_eq!(j.excluded, [3]);
    }

    #[test]
    fn a_clean_cluster_and_unknown_links_name_nothing() {
        assert_eq!(judge_reports(&clean(4)), Judged::default());
        // h1 answers no UDP at all: nothing is known of its links, and nothing is blamed.
        let mut r = clean(3);
        r[0].1 = vec![(1, None)];
        r[2].1 = vec![(1, None)];
        r[1].1 = vec![(0, None), (2, None)];
        assert_eq!(judge_reports(&r), Judged::default());
        // Hosts with different MTUs pass the smaller one's full frame: no black hole.
        let mut r = clean(3);
        r[0] = (8972, vec![(1, Some(1472)), (2, Some(1472))]);
        assert_eq!(judge_reports(&r), Judged::default());
    }

    #[test]
    fn every_link_short_names_no_single_host_but_every_link() {
        let mut r = clean(3);
        for (h, host) in r.iter_mut().enumerate() {
            host.1 = (0..3).filter(|&p| p != h).map(|p| (p, Some(1372))).collect();
        }
        let j = judge_reports(&r);
        assert!(j.named.iter().all(|x| x.hosts.len() == 2), "{j:?}");
        assert_eq!(j.named.len(), 3);
        // Host 0 is kept while another end can go.
        assert!(!j.excluded.contains(&0) && !j.excluded.is_empty(), "{j:?}");
    }
}
