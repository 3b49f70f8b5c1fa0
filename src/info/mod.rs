//! `collbench info` output: every host's interfaces, CPU limits, RDMA ports and GPUs as aligned text or JSON,
//! then the advice. Its entry point is `commands::info`; this sits low (on `net` only) so other tools' text
//! (`gpu-matrix`) shares its column layout.

mod gpus;

use serde_json::json;

use crate::net::advice::Advice;
use crate::net::inventory::{cores, HostInventory};

/// Version of the `collbench info` JSON; bump on any incompatible change.
/// Version 2: each RDMA port lists its whole GID table (`gids`) in place of `gid0`.
pub const INFO_SCHEMA_VERSION: u32 = 2;

/// The inventory as text: one interface table over all hosts, one CPU table, RDMA ports, GPUs, then warnings
/// and notes.
pub fn render(hosts: &[HostInventory], advice: &[Advice]) -> String {
    let mut rows = vec![row(&["host", "iface", "kind", "mtu", "speed", "state", "addresses"])];
    for h in hosts {
        for i in &h.ifaces {
            rows.push(vec![
                h.host.clone(),
                i.name.clone(),
                i.kind.to_string(),
                i.mtu.map_or("-".into(), |m| m.to_string()),
                i.speed_mbps.map_or("-".into(), speed),
                i.oper_state.clone().unwrap_or_else(|| "-".into()),
                if i.addrs.is_empty() {
                    "-".into()
                } else {
                    i.addrs.join(" ")
                },
            ]);
        }
    }
    let mut out = columns(&rows, &[3]);
    let mut cpu = vec![row(&["host", "cpus", "quota"])];
    for h in hosts {
        cpu.push(vec![
            h.host.clone(),
            if h.cpu.online_cpus == 0 {
                "?".into()
            } else {
                h.cpu.online_cpus.to_string()
            },
            h.cpu.quota_text(),
        ]);
    }
    out.push('\n');
    out.push_str(&columns(&cpu, &[1]));
    out.push('\n');
    out.push_str(&rdma(hosts));
    out.push('\n');
    out.push_str(&gpus(hosts));
    out.push('\n');
    if advice.is_empty() {
        out.push_str("no warnings\n");
    }
    for a in advice {
        out.push_str(&format!("{}: {}\n  advice: {}\n", a.severity, a.what, a.advice));
    }
    out
}

/// Hosts named in a "none here" line: every host when `all_none`, else the given ones.
fn none_on(what: &str, without: &[&str], all_none: bool, nhosts: usize) -> String {
    if all_none && nhosts == 1 {
        format!("no {what}\n")
    } else if all_none {
        format!("no {what} on any host\n")
    } else {
        format!("no {what} on {}\n", without.join(", "))
    }
}

/// Every RDMA port of every host, then every used GID table entry of those ports, then the hosts without
/// RDMA devices.
fn rdma(hosts: &[HostInventory]) -> String {
    let opt = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".into());
    let mut rows = vec![row(&[
        "host", "rdma", "port", "state", "phys", "rate", "link", "netdev", "gids",
    ])];
    let mut gids = vec![row(&["host", "rdma", "port", "gid", "address", "type", "netdev"])];
    for h in hosts {
        for d in &h.rdma {
            for p in &d.ports {
                rows.push(vec![
                    h.host.clone(),
                    d.name.clone(),
                    p.port.to_string(),
                    opt(&p.state),
                    opt(&p.phys_state),
                    opt(&p.rate),
                    opt(&p.link_layer),
                    if p.netdevs.is_empty() {
                        "-".into()
                    } else {
                        p.netdevs.join(" ")
                    },
                    p.gids.len().to_string(),
                ]);
                for g in &p.gids {
                    gids.push(vec![
                        h.host.clone(),
                        d.name.clone(),
                        p.port.to_string(),
                        g.index.to_string(),
                        g.short(),
                        opt(&g.kind),
                        opt(&g.netdev),
                    ]);
                }
            }
        }
    }
    let without: Vec<&str> = hosts
        .iter()
        .filter(|h| h.rdma.is_empty())
        .map(|h| h.host.as_str())
        .collect();
    let mut out = if rows.len() > 1 {
        columns(&rows, &[2, 8])
    } else {
        String::new()
    };
    if gids.len() > 1 {
        out.push('\n');
        out.push_str(&columns(&gids, &[2, 3]));
    }
    if !without.is_empty() {
        out.push_str(&none_on("RDMA devices", &without, rows.len() == 1, hosts.len()));
    }
    out
}

/// Every NVIDIA GPU of every host, then the hosts without one.
fn gpus(hosts: &[HostInventory]) -> String {
    let mut rows = vec![row(&["host", "gpu", "bus", "numa", "model"])];
    for h in hosts {
        for (i, g) in h.gpus.iter().enumerate() {
            rows.push(vec![
                h.host.clone(),
                i.to_string(),
                g.bus_id.clone(),
                g.numa_node.map_or("-".into(), |n| n.to_string()),
                g.model.clone().unwrap_or_else(|| "-".into()),
            ]);
        }
    }
    let without: Vec<&str> = hosts
        .iter()
        .filter(|h| h.gpus.is_empty())
        .map(|h| h.host.as_str())
        .collect();
    let mut out = if rows.len() > 1 {
        columns(&rows, &[1, 3])
    } else {
        String::new()
    };
    if !without.is_empty() {
        out.push_str(&none_on("NVIDIA GPUs", &without, rows.len() == 1, hosts.len()));
    }
    // NVML's topology where it answered; where it did not, why, on hosts that have GPUs.
    for h in hosts {
        match &h.gpu_topology {
            Some(t) if t.unavailable.is_none() || !h.gpus.is_empty() => {
                out.push_str(&gpus::render(t, &h.host));
            }
            _ => {}
        }
    }
    out
}

/// The inventory and advice as JSON, with a `schema_version`.
pub fn to_json(hosts: &[HostInventory], advice: &[Advice]) -> serde_json::Value {
    json!({ "schema_version": INFO_SCHEMA_VERSION, "hosts": hosts, "advice": advice })
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// Link speed as people say it: "100 Mbit/s", "25 Gbit/s", "2.5 Gbit/s".
fn speed(mbps: u64) -> String {
    if mbps >= 1000 {
        format!("{} Gbit/s", cores(mbps as f64 / 1000.0))
    } else {
        format!("{mbps} Mbit/s")
    }
}

/// Rows as columns two spaces apart, left-aligned except the `right` ones (numbers); no trailing spaces.
pub(crate) fn columns(rows: &[Vec<String>], right: &[usize]) -> String {
    let ncol = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..ncol)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if right.contains(&c) {
                    format!("{s:>w$}", w = width[c])
                } else {
                    format!("{s:<w$}", w = width[c])
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::advice::Severity;
    use crate::net::classify::IfaceKind;
    use crate::net::gpu::Gpu;
    use crate::net::inventory::{CpuLimit, Iface};
    use crate::net::rdma::{RdmaDevice, RdmaGid, RdmaPort};

    fn iface(name: &str, kind: IfaceKind, mtu: u32, speed: Option<u64>, state: &str, addrs: &[&str]) -> Iface {
        Iface {
            name: name.into(),
            kind,
            mtu: Some(mtu),
            speed_mbps: speed,
            oper_state: Some(state.into()),
            addrs: addrs.iter().map(|a| a.to_string()).collect(),
            lower: None,
        }
    }

    fn inventory() -> Vec<HostInventory> {
        vec![
            HostInventory {
                host: "node1".into(),
                ifaces: vec![
                    iface(
                        "eth0",
                        IfaceKind::Ethernet,
                        9000,
                        Some(25000),
                        "up",
                        &["10.0.0.1/24", "fe80::1/64"],
                    ),
                    iface(
                        "flannel.1",
                        IfaceKind::Cni("flannel".into()),
                        8950,
                        None,
                        "unknown",
                        &["10.244.0.0/32"],
                    ),
                    iface("lo", IfaceKind::Loopback, 65536, None, "unknown", &["127.0.0.1/8"]),
                ],
                cpu: CpuLimit {
                    quota_cores: Some(1.5),
                    online_cpus: 64,
                    cgroup: Some("/kubepods/pod1".into()),
                },
                rdma: vec![],
                gpus: vec![],
                gpu_topology: None,
            },
            HostInventory {
                host: "n2".into(),
                ifaces: vec![iface("ib0", IfaceKind::IpoIb, 2044, Some(100), "down", &[])],
                cpu: CpuLimit {
                    quota_cores: None,
                    online_cpus: 0,
                    cgroup: None,
                },
                rdma: vec![],
                gpus: vec![],
                gpu_topology: None,
            },
        ]
    }

    #[test]
    fn render_aligns_hosts_cpus_and_advice() {
        let advice = vec![Advice {
            severity: Severity::Warning,
            what: "host node1 has a CPU quota of 1.5 cores for 4 ranks".into(),
            advice: "raise the quota".into(),
        }];
        let want = "\
host   iface      kind           mtu  speed       state    addresses
node1  eth0       ethernet      9000  25 Gbit/s   up       10.0.0.1/24 fe80::1/64
node1  flannel.1  cni:flannel   8950  -           unknown  10.244.0.0/32
node1  lo         loopback     65536  -           unknown  127.0.0.1/8
n2     ib0        ipoib         2044  100 Mbit/s  down     -

host   cpus  quota
node1    64  1.5 cores
n2        ?  unknown

no RDMA devices on any host

no NVIDIA GPUs on any host

warning: host node1 has a CPU quota of 1.5 cores for 4 ranks
  advice: raise the quota
";
        assert_eq!(render(&inventory(), &advice), want);
        assert!(render(&inventory(), &[]).ends_with("\nno warnings\n"));
    }

    #[test]
    fn rdma_ports_and_gpus_are_listed_per_host() {
        let mut hosts = inventory();
        hosts[0].rdma = vec![RdmaDevice {
            name: "mlx5_0".into(),
            node_guid: Some("0248:2d03:00aa:bbcc".into()),
            ports: vec![RdmaPort {
                port: 1,
                state: Some("ACTIVE".into()),
                phys_state: Some("LinkUp".into()),
                rate: Some("200 Gb/sec (4X HDR)".into()),
                link_layer: Some("InfiniBand".into()),
                gids: vec![
                    RdmaGid {
                        index: 0,
                        gid: "fe80:0000:0000:0000:0248:2d03:00aa:bbcc".into(),
                        kind: Some("IB".into()),
                        netdev: None,
                    },
                    RdmaGid {
                        index: 1,
                        gid: "0000:0000:0000:0000:0000:ffff:0a00:0001".into(),
                        kind: None,
                        netdev: Some("ib0".into()),
                    },
                ],
                netdevs: vec!["ib0".into()],
            }],
        }];
        hosts[1].gpus = vec![Gpu {
            bus_id: "0000:19:00.0".into(),
            model: Some("NVIDIA H200".into()),
            numa_node: Some(1),
            device_id: None,
        }];
        let text = render(&hosts, &[]);
        let want = "\
host   rdma    port  state   phys    rate                 link        netdev  gids
node1  mlx5_0     1  ACTIVE  LinkUp  200 Gb/sec (4X HDR)  InfiniBand  ib0        2

host   rdma    port  gid  address                 type  netdev
node1  mlx5_0     1    0  fe80::248:2d03:aa:bbcc  IB    -
node1  mlx5_0     1    1  ::ffff:10.0.0.1         -     ib0
no RDMA devices on n2

host  gpu  bus           numa  model
n2      0  0000:19:00.0     1  NVIDIA H200
no NVIDIA GPUs on node1
";
        assert!(text.contains(want), "{text}");
        let v = to_json(&hosts, &[]);
        assert_eq!(v["hosts"][0]["rdma"][0]["ports"][0]["state"], "ACTIVE");
        assert_eq!(
            v["hosts"][0]["rdma"][0]["ports"][0]["gids"][1]["gid"],
            "0000:0000:0000:0000:0000:ffff:0a00:0001"
        );
        assert_eq!(v["hosts"][1]["gpus"][0]["model"], "NVIDIA H200");
        // One host alone says it plainly.
        assert!(render(&inventory()[1..], &[]).contains("\nno RDMA devices\n\nno NVIDIA GPUs\n"));
    }

    #[test]
    fn nvml_topology_is_shown_where_it_answered_and_its_absence_where_gpus_are() {
        use crate::net::gpu_topo::{self, Topology};
        let mut hosts = inventory();
        let gpus = gpu_topo::tests::four();
        hosts[0].gpu_topology = Some(Topology {
            unavailable: None,
            nvml_version: Some("12.580.65".into()),
            pairs: gpu_topo::pairs(&gpus, |_, _| None),
            gpus,
        });
        let missing = Topology {
            unavailable: Some("NVML (libnvidia-ml.so.1, part of the NVIDIA driver) not found".into()),
            ..Topology::default()
        };
        // n2 has no GPU: NVML's absence is not news there.
        hosts[1].gpu_topology = Some(missing.clone());
        let text = render(&hosts, &[]);
        assert!(text.contains("node1: GPU topology (NVML 12.580.65)\n"), "{text}");
        assert!(text.contains("gpu0  X     NV4   ?"), "{text}");
        assert!(!text.contains("n2: GPU topology"), "{text}");
        hosts[1].gpus = vec![Gpu {
            bus_id: "0000:19:00.0".into(),
            model: None,
            numa_node: None,
            device_id: None,
        }];
        let text = render(&hosts, &[]);
        assert!(
            text.contains("n2: GPU topology unavailable: NVML (libnvidia-ml.so.1"),
            "{text}"
        );
        let v = to_json(&hosts, &[]);
        assert_eq!(v["hosts"][0]["gpu_topology"]["pairs"][0]["nvlinks"], 4);
        let back: Vec<HostInventory> = serde_json::from_value(v["hosts"].clone()).unwrap();
        assert_eq!(back, hosts);
    }

    #[test]
    fn json_is_versioned_and_round_trips() {
        let advice = vec![Advice {
            severity: Severity::Note,
            what: "w".into(),
            advice: "a".into(),
        }];
        let v = to_json(&inventory(), &advice);
        assert_eq!(v["schema_version"], INFO_SCHEMA_VERSION);
        assert_eq!(v["hosts"][0]["ifaces"][1]["kind"], "cni:flannel");
        assert_eq!(v["hosts"][1]["cpu"]["quota_cores"], serde_json::Value::Null);
        assert_eq!(v["advice"][0]["severity"], "note");
        let back: Vec<HostInventory> = serde_json::from_value(v["hosts"].clone()).unwrap();
        assert_eq!(back, inventory());
    }

    #[test]
    fn speeds_read_as_people_say_them() {
        assert_eq!(speed(100), "100 Mbit/s");
        assert_eq!(speed(2500), "2.5 Gbit/s");
        assert_eq!(speed(400000), "400 Gbit/s");
    }
}
