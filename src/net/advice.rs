//! Warnings about a job's hosts before it runs: each says what is wrong, then what to do about it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::classify::{cni_of, encapsulation, CniRole, IfaceKind};
use super::inventory::{cores, HostInventory, Iface};

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The results will likely be wrong or misleading.
    Warning,
    /// Worth knowing; the results are still what they are.
    Note,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Note => "note",
        })
    }
}

/// One finding: what is wrong and what to do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Advice {
    pub severity: Severity,
    pub what: String,
    pub advice: String,
}

/// An overlay MTU this far below what its underlay allows gets a note: jumbo frames are going unused.
const UNUSED_MTU_NOTE_BYTES: u32 = 1000;

/// Findings about `hosts` for a job with `ranks_per_host` ranks per host whose data path uses the interfaces
/// `path_ifaces` ((host, interface) per host); warnings first.
pub fn advise(
    hosts: &[HostInventory],
    ranks_per_host: &[(String, usize)],
    path_ifaces: &[(String, String)],
) -> Vec<Advice> {
    let mut ranks: BTreeMap<&str, usize> = BTreeMap::new();
    for (h, n) in ranks_per_host {
        *ranks.entry(h.as_str()).or_default() += n;
    }
    let inter_host = ranks.values().filter(|&&n| n > 0).count() > 1;
    // A host given no ranks takes no part in the path.
    let path: Vec<(String, String)> = path_ifaces
        .iter()
        .filter(|(h, _)| ranks.get(h.as_str()) != Some(&0))
        .cloned()
        .collect();
    let mut overlays = Vec::new();
    let mut unfit = Vec::new();
    for h in hosts {
        overlay_mtu(h, &mut overlays, &mut unfit);
    }
    // An overlay too large for its own underlay is the finding on its host; that its MTU then differs from the
    // other hosts' is the same fault, not a second one with other advice.
    let fitting: Vec<(String, String)> = path.iter().filter(|p| !unfit.contains(p)).cloned().collect();
    let mut out = Vec::new();
    mtu_mismatch(hosts, &fitting, &mut out);
    if inter_host {
        local_only_paths(hosts, &path, &mut out);
        ipoib_unused(hosts, &path, &mut out);
    }
    out.extend(overlays);
    for h in hosts {
        rdma_ports(h, &mut out);
    }
    cpu_quota(hosts, &ranks, &mut out);
    out.sort_by_key(|a| a.severity); // stable: each severity keeps the order above
    out
}

fn find<'a>(hosts: &'a [HostInventory], host: &str, iface: &str) -> Option<&'a Iface> {
    hosts
        .iter()
        .find(|h| h.host == host)?
        .ifaces
        .iter()
        .find(|i| i.name == iface)
}

/// Hosts on one path whose interfaces' MTUs differ: large frames are dropped or fragmented between them.
fn mtu_mismatch(hosts: &[HostInventory], path: &[(String, String)], out: &mut Vec<Advice>) {
    let mut by_mtu: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (h, i) in path {
        // Loopback has its own warning; its MTU says nothing about the wire.
        let Some(iface) = find(hosts, h, i).filter(|i| i.kind != IfaceKind::Loopback) else {
            continue;
        };
        if let Some(mtu) = iface.mtu {
            by_mtu.entry(mtu).or_default().push(format!("{h} ({i})"));
        }
    }
    if by_mtu.len() < 2 {
        return;
    }
    // Where most hosts agree, the odd ones are named and the rest counted: naming healthy hosts in a warning
    // about one host's MTU sends people to the wrong machines.
    let most = by_mtu.values().map(Vec::len).max().unwrap_or(0);
    let majority = by_mtu
        .iter()
        .find(|(_, hs)| hs.len() == most && by_mtu.values().filter(|o| o.len() == most).count() == 1 && most >= 2)
        .map(|(m, _)| *m);
    let groups: Vec<String> = by_mtu
        .iter()
        .map(|(mtu, hs)| match majority {
            Some(m) if m == *mtu => format!("MTU {mtu} on the other {} hosts", hs.len()),
            _ => format!("MTU {mtu} on {}", hs.join(", ")),
        })
        .collect();
    let (low, high) = (by_mtu.keys().next().unwrap(), by_mtu.keys().last().unwrap());
    out.push(Advice {
        severity: Severity::Warning,
        what: format!("the MTU differs between hosts on the same path: {}", groups.join("; ")),
        advice: format!(
            "set one MTU on every host of the path (e.g. `ip link set dev IFACE mtu {high}` where the switches carry \
             jumbo frames, else {low} everywhere); frames above {low} bytes are otherwise fragmented or silently \
             dropped between these hosts"
        ),
    });
}

/// Interfaces on an inter-host path that cannot reach another host (loopback, host-local container bridges) or
/// may not (other bridges).
fn local_only_paths(hosts: &[HostInventory], path: &[(String, String)], out: &mut Vec<Advice>) {
    for (h, name) in path {
        let Some(i) = find(hosts, h, name) else { continue };
        let host_bridge = matches!(cni_of(name), Some((_, CniRole::HostBridge)));
        let (severity, why) = match &i.kind {
            IfaceKind::Loopback => (Severity::Warning, "loopback, which never leaves the host"),
            IfaceKind::Cni(cni) if host_bridge && cni == "docker" => (
                Severity::Warning,
                "a Docker bridge, which reaches only this host's containers (NAT beyond)",
            ),
            IfaceKind::Cni(_) if host_bridge => (
                Severity::Warning,
                "a container bridge, which reaches only this host's containers (NAT beyond)",
            ),
            IfaceKind::Bridge => (
                Severity::Note,
                "a software bridge; it reaches other hosts only if it enslaves the physical NIC",
            ),
            _ => continue,
        };
        out.push(Advice {
            severity,
            what: format!(
                "ranks on several hosts, but host {h} would use {name} ({}): {why}",
                i.kind
            ),
            advice: format!(
                "pick the interface that connects the hosts with --iface (or --transport tcp@IFACE) on {h}; \
                 `collbench info` lists each host's interfaces"
            ),
        });
    }
}

/// Overlays whose MTU plus encapsulation exceeds the largest underlay MTU on the host (fragmentation or drops),
/// or leaves a jumbo underlay unused.
/// Each overlay too large is also listed in `unfit` as (host, interface).
fn overlay_mtu(h: &HostInventory, out: &mut Vec<Advice>, unfit: &mut Vec<(String, String)>) {
    // Without a known lower device, the largest MTU of the devices that can carry an overlay: a veth is the
    // underlay in containers and namespace hosts.
    let underlay = |i: &&Iface| {
        matches!(
            i.kind,
            IfaceKind::Ethernet | IfaceKind::IpoIb | IfaceKind::Bond | IfaceKind::Vlan | IfaceKind::Veth
        ) && i.oper_state.as_deref() != Some("down")
    };
    let largest = h
        .ifaces
        .iter()
        .filter(underlay)
        .filter(|i| i.mtu.is_some())
        .max_by_key(|i| i.mtu);
    for o in &h.ifaces {
        let (Some(enc), Some(mtu)) = (encapsulation(&o.name, &o.kind), o.mtu) else {
            continue;
        };
        // The overlay's own lower device where the kernel names it, else the host's largest underlay.
        let lower = o
            .lower
            .as_deref()
            .and_then(|l| h.ifaces.iter().find(|i| i.name == l && i.mtu.is_some()));
        let Some(under) = lower.or(largest) else {
            continue;
        };
        let under_mtu = under.mtu.unwrap_or(0);
        let fits = under_mtu.saturating_sub(enc.overhead_v4);
        let (what, severity) = if mtu > fits {
            let what =
                format!(
                "{} on {} is {} with MTU {mtu}, but {} MTU there is {under_mtu} ({}): {} adds {} bytes over IPv4 ({} \
                 over IPv6), so its packets above {fits} bytes are fragmented or dropped",
                o.name,
                h.host,
                enc.name,
                if lower.is_some() { "its underlay's" } else { "the largest underlay" },
                under.name,
                enc.name,
                enc.overhead_v4,
                enc.overhead_v6
            );
            unfit.push((h.host.clone(), o.name.clone()));
            (what, Severity::Warning)
        } else if fits - mtu >= UNUSED_MTU_NOTE_BYTES {
            let what = format!(
                "{} on {} is {} with MTU {mtu} while its underlay {} allows {fits}: every packet carries less payload \
                 than it could",
                o.name, h.host, enc.name, under.name
            );
            (what, Severity::Note)
        } else {
            continue;
        };
        out.push(Advice {
            severity,
            what,
            advice: format!(
                "set {}'s MTU to {fits} (`ip link set dev {} mtu {fits}`, or the CNI's MTU setting){}",
                o.name,
                o.name,
                if severity == Severity::Warning {
                    format!(", or raise the underlay's MTU to {} or more", mtu + enc.overhead_v4)
                } else {
                    String::new()
                }
            ),
        });
    }
}

/// Hosts whose CPU quota (or online CPUs) is below the ranks placed there: the run measures CPU throttling.
fn cpu_quota(hosts: &[HostInventory], ranks: &BTreeMap<&str, usize>, out: &mut Vec<Advice>) {
    for h in hosts {
        let Some(&n) = ranks.get(h.host.as_str()) else { continue };
        let fix = "give the container at least one CPU per rank (Kubernetes: resources.limits.cpu), or run fewer \
                   ranks per host";
        if let Some(q) = h.cpu.quota_cores.filter(|&q| q < n as f64) {
            out.push(Advice {
                severity: Severity::Warning,
                what: format!(
                    "host {} has a CPU quota of {} cores for {n} ranks: ranks are throttled, so the results measure \
                     the quota rather than the network",
                    h.host,
                    cores(q)
                ),
                advice: format!("raise the quota to {n} cores or more: {fix}"),
            });
        } else if h.cpu.online_cpus > 0 && h.cpu.online_cpus < n {
            out.push(Advice {
                severity: Severity::Note,
                what: format!(
                    "host {} has {} online CPUs for {n} ranks: ranks share cores, which adds latency",
                    h.host, h.cpu.online_cpus
                ),
                advice: format!(
                    "run at most {} ranks on {} (--np, or the launcher's ranks per node)",
                    h.cpu.online_cpus, h.host
                ),
            });
        }
    }
}

/// RDMA ports that are not ACTIVE: a warning when the host has no active port at all (RDMA cannot work
/// there), else a note (a spare port left unplugged is common).
fn rdma_ports(h: &HostInventory, out: &mut Vec<Advice>) {
    let any_active = h.rdma.iter().flat_map(|d| &d.ports).any(|p| p.is_active());
    for d in &h.rdma {
        for p in d.ports.iter().filter(|p| !p.is_active()) {
            let state = p.state.as_deref().unwrap_or("unknown");
            let phys = p.phys_state.as_deref().unwrap_or("unknown");
            let ib = p.link_layer.as_deref() != Some("Ethernet");
            let fix = match (state, phys) {
                (_, "Disabled") => "the port is administratively disabled: enable it (`ibportstate`, or the NIC's firmware settings) or use another port"
                    .to_string(),
                ("INIT" | "ARMED", _) if ib => "the link is up but no subnet manager has configured the port: run opensm on one node of the fabric or enable the switch's subnet manager"
                    .to_string(),
                ("DOWN", _) | (_, "Polling") => "there is no link: check the cable, the transceiver and the switch port"
                    .to_string(),
                _ => "check the port with `ibstat` (InfiniBand) or `rdma link` and the switch it connects to".into(),
            };
            out.push(Advice {
                severity: if any_active { Severity::Note } else { Severity::Warning },
                what: format!(
                    "RDMA port {}/{} on {} is {state} (physical state {phys}){}",
                    d.name,
                    p.port,
                    h.host,
                    if any_active {
                        ""
                    } else {
                        ", and the host has no active RDMA port"
                    }
                ),
                advice: fix,
            });
        }
    }
}

/// Hosts with an IPoIB interface that has an address while the job's TCP path crosses hosts over another
/// interface: IPoIB usually runs over the fastest fabric there is.
fn ipoib_unused(hosts: &[HostInventory], path: &[(String, String)], out: &mut Vec<Advice>) {
    for h in hosts {
        let used: Vec<&str> = path
            .iter()
            .filter(|(ph, _)| *ph == h.host)
            .map(|(_, i)| i.as_str())
            .collect();
        if used.is_empty() {
            continue;
        }
        let ib: Vec<&Iface> = h
            .ifaces
            .iter()
            .filter(|i| i.kind == IfaceKind::IpoIb && !i.addrs.is_empty() && i.oper_state.as_deref() != Some("down"))
            .collect();
        if ib.is_empty() || ib.iter().any(|i| used.contains(&i.name.as_str())) {
            continue;
        }
        let names: Vec<&str> = ib.iter().map(|i| i.name.as_str()).collect();
        out.push(Advice {
            severity: Severity::Note,
            what: format!(
                "host {} has IPoIB ({}) but the TCP path uses {}",
                h.host,
                names.join(", "),
                used.join(", ")
            ),
            advice: format!(
                "to measure TCP over the InfiniBand fabric, run with --transport tcp@{} (or add it to compare both)",
                names[0]
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::inventory::CpuLimit;
    use crate::net::rdma::{RdmaDevice, RdmaPort};

    fn iface(name: &str, kind: IfaceKind, mtu: u32) -> Iface {
        Iface {
            name: name.into(),
            kind,
            mtu: Some(mtu),
            speed_mbps: None,
            oper_state: Some("up".into()),
            addrs: vec![],
            lower: None,
        }
    }

    fn host(name: &str, ifaces: Vec<Iface>) -> HostInventory {
        HostInventory {
            host: name.into(),
            ifaces,
            cpu: CpuLimit {
                quota_cores: None,
                online_cpus: 16,
                cgroup: Some("/".into()),
            },
            rdma: vec![],
            gpus: vec![],
            gpu_topology: None,
        }
    }

    fn healthy(name: &str) -> HostInventory {
        host(
            name,
            vec![
                iface("lo", IfaceKind::Loopback, 65536),
                iface("eth0", IfaceKind::Ethernet, 1500),
                iface("vx0", IfaceKind::Vxlan, 1450),
                iface("flannel.1", IfaceKind::Cni("flannel".into()), 1450),
                iface("wg0", IfaceKind::WireGuard, 1420),
            ],
        )
    }

    fn two_hosts(ranks: usize) -> Vec<(String, usize)> {
        vec![("a".into(), ranks), ("b".into(), ranks)]
    }

    fn path(iface: &str) -> Vec<(String, String)> {
        vec![("a".into(), iface.into()), ("b".into(), iface.into())]
    }

    #[test]
    fn a_healthy_cluster_gets_no_advice() {
        let hosts = [healthy("a"), healthy("b")];
        assert_eq!(advise(&hosts, &two_hosts(4), &path("eth0")), vec![]);
        assert_eq!(advise(&hosts, &two_hosts(4), &path("vx0")), vec![]);
        // One host on loopback is how local runs work.
        assert_eq!(
            advise(&hosts[..1], &[("a".into(), 8)], &[("a".into(), "lo".into())]),
            vec![]
        );
    }

    #[test]
    fn mtu_mismatch_on_a_path_names_hosts_and_values() {
        let mut b = healthy("b");
        b.ifaces[1].mtu = Some(9000);
        let adv = advise(&[healthy("a"), b], &two_hosts(1), &path("eth0"));
        // b's overlays also leave its jumbo underlay unused (notes, after the warning).
        assert_eq!(
            adv.iter().filter(|a| a.severity == Severity::Warning).count(),
            1,
            "{adv:?}"
        );
        assert_eq!(adv[0].severity, Severity::Warning);
        assert!(
            adv[0].what.contains("MTU 1500 on a (eth0); MTU 9000 on b (eth0)"),
            "{}",
            adv[0].what
        );
        assert!(adv[0].advice.contains("mtu 9000"), "{}", adv[0].advice);
    }

    #[test]
    fn an_mtu_most_hosts_share_is_counted_and_only_the_odd_host_named() {
        let mut hosts: Vec<HostInventory> = ["h0", "h1", "h2", "h3"].into_iter().map(healthy).collect();
        hosts[2].ifaces[1].mtu = Some(1400);
        let ranks: Vec<(String, usize)> = hosts.iter().map(|h| (h.host.clone(), 1)).collect();
        let path: Vec<(String, String)> = hosts.iter().map(|h| (h.host.clone(), "eth0".into())).collect();
        let adv = advise(&hosts, &ranks, &path);
        let w = adv
            .iter()
            .find(|a| a.what.starts_with("the MTU differs"))
            .unwrap_or_else(|| panic!("{adv:?}"));
        assert!(
            w.what.ends_with("MTU 1400 on h2 (eth0); MTU 1500 on the other 3 hosts"),
            "{}",
            w.what
        );
        for h in ["h0", "h1", "h3"] {
            assert!(!w.what.contains(&format!("{h} (")), "{}", w.what);
        }
    }

    #[test]
    fn inter_host_paths_over_loopback_or_docker_bridges_are_warned() {
        let mut a = healthy("a");
        a.ifaces.push(iface("docker0", IfaceKind::Cni("docker".into()), 1500));
        a.ifaces.push(iface("br0", IfaceKind::Bridge, 1500));
        let hosts = [a, healthy("b")];
        let on = |i: &str| vec![("a".to_string(), i.to_string()), ("b".to_string(), "eth0".to_string())];
        let lo = advise(&hosts, &two_hosts(2), &on("lo"));
        assert!(lo
            .iter()
            .any(|x| x.severity == Severity::Warning && x.what.contains("would use lo (loopback)")));
        let docker = advise(&hosts, &two_hosts(2), &on("docker0"));
        assert!(docker
            .iter()
            .any(|x| x.severity == Severity::Warning && x.what.contains("Docker bridge")));
        assert!(docker[0].advice.contains("--iface"), "{docker:?}");
        let br = advise(&hosts, &two_hosts(2), &on("br0"));
        assert_eq!(br.len(), 1);
        assert_eq!(br[0].severity, Severity::Note);
        // Zero ranks on the second host is not an inter-host run.
        assert!(advise(&hosts, &[("a".into(), 4), ("b".into(), 0)], &on("lo")).is_empty());
    }

    /// A namespace host or a container: the overlay rides on a veth.
    fn veth_host(name: &str, vx_mtu: u32) -> HostInventory {
        host(
            name,
            vec![
                iface("eth0", IfaceKind::Veth, 1500),
                iface("vx0", IfaceKind::Vxlan, vx_mtu),
            ],
        )
    }

    #[test]
    fn an_overlay_too_large_for_its_veth_underlay_is_that_hosts_one_finding() {
        let hosts = [veth_host("a", 1450), veth_host("b", 1500)];
        let adv = advise(&hosts, &two_hosts(1), &path("vx0"));
        let warnings: Vec<&Advice> = adv.iter().filter(|a| a.severity == Severity::Warning).collect();
        assert_eq!(warnings.len(), 1, "one fault, one finding: {adv:?}");
        let w = warnings[0];
        assert!(w.what.contains("vx0 on b is vxlan with MTU 1500"), "{}", w.what);
        assert!(w.what.contains("1500 (eth0)"), "{}", w.what);
        assert!(w.advice.contains("mtu 1450"), "{}", w.advice);
        assert!(!w.what.contains("differs between hosts"), "{}", w.what);
        // Without the overlay fault, a plain MTU difference is still said.
        let hosts = [veth_host("a", 1450), veth_host("b", 1400)];
        let adv = advise(&hosts, &two_hosts(1), &path("vx0"));
        assert!(adv.iter().any(|a| a.what.contains("differs between hosts")), "{adv:?}");
    }

    #[test]
    fn an_overlay_is_judged_against_its_own_lower_device() {
        let mut h = host(
            "a",
            vec![
                iface("eth0", IfaceKind::Ethernet, 1500),
                iface("eth1", IfaceKind::Ethernet, 9000),
                iface("vx0", IfaceKind::Vxlan, 1500),
            ],
        );
        // On the jumbo device: room enough.
        h.ifaces[2].lower = Some("eth1".into());
        assert!(advise(std::slice::from_ref(&h), &[], &[])
            .iter()
            .all(|a| a.severity != Severity::Warning));
        // On eth0 the largest underlay (eth1) would hide the fault; its own lower device does not.
        h.ifaces[2].lower = Some("eth0".into());
        let adv = advise(&[h], &[], &[]);
        assert_eq!(adv.len(), 1, "{adv:?}");
        assert!(
            adv[0].what.contains("its underlay's MTU there is 1500 (eth0)"),
            "{}",
            adv[0].what
        );
    }

    #[test]
    fn overlay_mtu_without_room_for_encapsulation_is_warned() {
        let mut a = healthy("a");
        a.ifaces[2].mtu = Some(1500); // VXLAN at the underlay's MTU: the classic mistake
        a.ifaces[4].mtu = Some(1450); // WireGuard needs 60
        let adv = advise(&[a], &[], &[]);
        assert_eq!(adv.len(), 2, "{adv:?}");
        assert!(adv.iter().all(|x| x.severity == Severity::Warning));
        assert!(adv[0].what.contains("vx0 on a is vxlan with MTU 1500") && adv[0].what.contains("1500 (eth0)"));
        assert!(
            adv[0].advice.contains("mtu 1450") && adv[0].advice.contains("1550"),
            "{}",
            adv[0].advice
        );
        assert!(
            adv[1].what.contains("wg0") && adv[1].advice.contains("mtu 1440"),
            "{adv:?}"
        );
    }

    #[test]
    fn overlay_is_compared_with_the_largest_live_underlay() {
        let mut a = healthy("a");
        a.ifaces.push(iface("bond0", IfaceKind::Bond, 9000));
        a.ifaces[2].mtu = Some(8950);
        let mut down = iface("eth9", IfaceKind::Ethernet, 9216);
        down.oper_state = Some("down".into());
        a.ifaces.push(down);
        let adv = advise(&[a], &[], &[]);
        // vx0 fits bond0 exactly; flannel.1 and wg0 leave the jumbo underlay unused (notes, not warnings).
        assert!(adv.iter().all(|x| x.severity == Severity::Note), "{adv:?}");
        assert_eq!(adv.len(), 2, "{adv:?}");
        assert!(
            adv[0].what.contains("flannel.1") && adv[0].advice.contains("mtu 8950"),
            "{adv:?}"
        );
    }

    #[test]
    fn cpu_quota_below_the_ranks_is_warned() {
        let mut a = healthy("a");
        a.cpu.quota_cores = Some(1.5);
        let mut b = healthy("b");
        b.cpu.online_cpus = 2;
        let adv = advise(&[a, b], &two_hosts(4), &path("eth0"));
        assert_eq!(adv.len(), 2, "{adv:?}");
        assert_eq!(adv[0].severity, Severity::Warning);
        assert!(
            adv[0].what.contains("host a has a CPU quota of 1.5 cores for 4 ranks"),
            "{}",
            adv[0].what
        );
        assert!(adv[0].advice.contains("4 cores"));
        assert_eq!(adv[1].severity, Severity::Note);
        assert!(
            adv[1].what.contains("host b has 2 online CPUs for 4 ranks"),
            "{}",
            adv[1].what
        );
        let mut enough = healthy("a");
        enough.cpu.quota_cores = Some(4.0);
        assert!(advise(&[enough], &[("a".into(), 4)], &[]).is_empty());
    }

    fn port(n: u32, state: &str, phys: &str, link: &str) -> RdmaPort {
        RdmaPort {
            port: n,
            state: Some(state.into()),
            phys_state: Some(phys.into()),
            rate: None,
            link_layer: Some(link.into()),
            gids: vec![],
            netdevs: vec![],
        }
    }

    fn hca(ports: Vec<RdmaPort>) -> RdmaDevice {
        RdmaDevice {
            name: "mlx5_0".into(),
            node_guid: None,
            ports,
        }
    }

    #[test]
    fn inactive_rdma_ports_say_why_and_what_to_do() {
        let mut a = healthy("a");
        a.rdma = vec![hca(vec![port(1, "INIT", "LinkUp", "InfiniBand")])];
        let adv = advise(&[a.clone()], &[], &[]);
        assert_eq!(adv.len(), 1, "{adv:?}");
        assert_eq!(adv[0].severity, Severity::Warning);
        assert!(
            adv[0]
                .what
                .contains("RDMA port mlx5_0/1 on a is INIT (physical state LinkUp)")
                && adv[0].what.contains("no active RDMA port"),
            "{}",
            adv[0].what
        );
        assert!(adv[0].advice.contains("subnet manager"), "{}", adv[0].advice);
        // With another port active, a dead one is only a note; its advice follows its physical state.
        a.rdma[0].ports = vec![
            port(1, "ACTIVE", "LinkUp", "InfiniBand"),
            port(2, "DOWN", "Polling", "Ethernet"),
        ];
        let adv = advise(&[a.clone()], &[], &[]);
        assert_eq!(adv.len(), 1, "{adv:?}");
        assert_eq!(adv[0].severity, Severity::Note);
        assert!(adv[0].advice.contains("cable"), "{}", adv[0].advice);
        a.rdma[0].ports[1].phys_state = Some("Disabled".into());
        assert!(advise(&[a.clone()], &[], &[])[0].advice.contains("disabled"));
        a.rdma[0].ports.truncate(1);
        assert!(advise(&[a], &[], &[]).is_empty());
    }

    #[test]
    fn an_unused_ipoib_interface_is_pointed_out_for_inter_host_paths() {
        let with_ib = |name: &str| {
            let mut h = healthy(name);
            let mut ib = iface("ib0", IfaceKind::IpoIb, 2044);
            ib.addrs = vec!["10.9.0.1/16".into()];
            h.ifaces.push(ib);
            h
        };
        let hosts = [with_ib("a"), with_ib("b")];
        let adv = advise(&hosts, &two_hosts(1), &path("eth0"));
        assert_eq!(adv.len(), 2, "{adv:?}");
        assert!(adv.iter().all(|x| x.severity == Severity::Note));
        assert!(
            adv[0]
                .what
                .contains("host a has IPoIB (ib0) but the TCP path uses eth0"),
            "{}",
            adv[0].what
        );
        assert!(adv[0].advice.contains("--transport tcp@ib0"), "{}", adv[0].advice);
        assert!(advise(&hosts, &two_hosts(1), &path("ib0")).is_empty());
        // One host: loopback is right, IPoIB is beside the point.
        assert!(advise(&hosts[..1], &[("a".into(), 2)], &[("a".into(), "lo".into())]).is_empty());
        // IPoIB without an address is not a choice.
        let mut bare = with_ib("a");
        bare.ifaces.last_mut().unwrap().addrs.clear();
        assert!(advise(&[bare, healthy("b")], &two_hosts(1), &path("eth0")).is_empty());
    }
}
