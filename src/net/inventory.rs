//! One host's network interfaces, CPU limits, RDMA devices and GPUs, as `collbench info` reports them.
//!
//! Everything is read from files under roots given as arguments (`/sys`, `/proc` on a real host) and the cgroup
//! through the reader given (`crate::cgroup::Fs`), so tests can hand in a fake tree; only [`local`] looks at the
//! real machine.

use std::net::IpAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::classify::{classify, IfaceKind};
use super::gpu::{self, Gpu};
use super::rdma::{self, RdmaDevice};
use super::sysfs::{read_trim, sorted_names};

/// One network interface of a host.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Iface {
    pub name: String,
    pub kind: IfaceKind,
    pub mtu: Option<u32>,
    /// Link speed in Mbit/s as the driver reports it; `None` where it does not know (virtual devices, link down).
    pub speed_mbps: Option<u64>,
    /// The kernel's operational state ("up", "down", "unknown", ...).
    pub oper_state: Option<String>,
    /// Addresses with their prefix length where known ("10.0.0.1/24").
    pub addrs: Vec<String>,
    /// The device a tunnel or VLAN sends through (its `iflink`), where it is in this namespace: the underlay
    /// an overlay's MTU must fit in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower: Option<String>,
}

/// How much CPU this process's cgroup may use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuLimit {
    /// The CFS quota in cores (quota / period), the tightest along the cgroup's ancestors; `None` if unlimited.
    pub quota_cores: Option<f64>,
    /// CPUs the kernel has online; 0 when `/sys` does not say.
    pub online_cpus: usize,
    /// The cpu cgroup the quota was read from (its path as /proc/self/cgroup names it); `None` when it could not
    /// be found: the quota is then unknown, not absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
}

impl CpuLimit {
    /// The quota for people: "1.5 cores", "none", or "unknown" where the cgroup could not be found.
    pub fn quota_text(&self) -> String {
        match (self.quota_cores, &self.cgroup) {
            (Some(q), _) => format!("{} cores", cores(q)),
            (None, Some(_)) => "none".into(),
            (None, None) => "unknown".into(),
        }
    }
}

/// Cores as people write them: "2", "1.5", "0.25".
pub fn cores(q: f64) -> String {
    let s = format!("{q:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What one host offers: its name, interfaces (sorted by name), CPU limits, RDMA devices and GPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostInventory {
    pub host: String,
    pub ifaces: Vec<Iface>,
    pub cpu: CpuLimit,
    /// RDMA devices (empty: none, or no RDMA drivers loaded).
    #[serde(default)]
    pub rdma: Vec<RdmaDevice>,
    /// NVIDIA GPUs.
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    /// NVML's view of the GPUs (PCIe and NVLink topology), where `collbench info` asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_topology: Option<super::gpu_topo::Topology>,
}

/// The inventory of this machine, as this process sees it (its network namespace and cgroup).
pub fn local() -> HostInventory {
    let addrs: Vec<(String, IpAddr, Option<u8>)> = if_addrs::get_if_addrs()
        .unwrap_or_default()
        .into_iter()
        .map(|i| {
            let prefix = match &i.addr {
                if_addrs::IfAddr::V4(a) => a.prefixlen,
                if_addrs::IfAddr::V6(a) => a.prefixlen,
            };
            (i.name.clone(), i.ip(), Some(prefix))
        })
        .collect();
    read(
        Path::new("/sys"),
        Path::new("/proc"),
        &crate::cgroup::Fs::real(),
        &addrs,
    )
}

/// The inventory under the given roots; `addrs` are (interface, address, prefix length) as `if-addrs` gives them.
pub fn read(
    sys_root: &Path,
    proc_root: &Path,
    cgroups: &crate::cgroup::Fs,
    addrs: &[(String, IpAddr, Option<u8>)],
) -> HostInventory {
    let net = sys_root.join("class/net");
    let mut names = sorted_names(&net);
    // An interface with an address but no sysfs entry (sysfs from another namespace) is still worth listing.
    names.extend(addrs.iter().map(|(n, _, _)| n.clone()));
    names.sort();
    names.dedup();
    let index_of = |name: &str| read_trim(&net.join(name).join("ifindex")).and_then(|s| s.parse::<u32>().ok());
    let by_index: Vec<(u32, String)> = names.iter().filter_map(|n| Some((index_of(n)?, n.clone()))).collect();
    let ifaces = names
        .into_iter()
        .map(|name| {
            let dir = net.join(&name);
            let speed = read_trim(&dir.join("speed")).and_then(|s| s.parse::<i64>().ok());
            Iface {
                kind: classify(&name, &net),
                mtu: read_trim(&dir.join("mtu")).and_then(|s| s.parse().ok()),
                // Drivers report -1 (or fail to read) when they do not know; 0 means the same in practice.
                speed_mbps: speed.filter(|&s| s > 0).map(|s| s as u64),
                oper_state: read_trim(&dir.join("operstate")),
                addrs: addrs
                    .iter()
                    .filter(|(n, _, _)| *n == name)
                    .map(|(_, ip, p)| match p {
                        Some(p) => format!("{ip}/{p}"),
                        None => ip.to_string(),
                    })
                    .collect(),
                lower: lower_device(&net, &name, &by_index),
                name,
            }
        })
        .collect();
    HostInventory {
        host: read_trim(&proc_root.join("sys/kernel/hostname")).unwrap_or_else(|| "unknown-host".into()),
        ifaces,
        cpu: cpu_limit(cgroups, sys_root),
        rdma: rdma::read(sys_root),
        gpus: gpu::read(sys_root, proc_root),
        gpu_topology: None,
    }
}

/// The device `name` sends through, for tunnels and VLANs only: their `iflink` names it by index when it is
/// not the device itself. (A veth's `iflink` is its peer, often in another namespace: not an underlay.)
fn lower_device(net: &Path, name: &str, by_index: &[(u32, String)]) -> Option<String> {
    let kind = classify(name, net);
    if super::classify::encapsulation(name, &kind).is_none() && kind != IfaceKind::Vlan {
        return None;
    }
    let dir = net.join(name);
    let own = read_trim(&dir.join("ifindex"))?;
    let link = read_trim(&dir.join("iflink"))?;
    if own == link {
        return None;
    }
    let link: u32 = link.parse().ok()?;
    by_index.iter().find(|(i, _)| *i == link).map(|(_, n)| n.clone())
}

/// The number of CPUs in a kernel CPU list such as "0-3,8,10-11".
fn count_cpu_list(list: &str) -> usize {
    list.split(',')
        .filter_map(|part| match part.trim().split_once('-') {
            Some((a, b)) => Some(b.parse::<usize>().ok()?.checked_sub(a.parse::<usize>().ok()?)? + 1),
            None => part.trim().parse::<usize>().ok().map(|_| 1),
        })
        .sum()
}

/// This process's CPU quota, from its cpu cgroup wherever that is to be found (`crate::cgroup`), and the CPUs
/// online.
fn cpu_limit(cgroups: &crate::cgroup::Fs, sys_root: &Path) -> CpuLimit {
    let located = crate::cgroup::locate(cgroups, "cpu").ok();
    CpuLimit {
        quota_cores: located
            .as_ref()
            .and_then(|l| crate::cgroup::limits::cpu_quota(cgroups, l)),
        online_cpus: read_trim(&sys_root.join("devices/system/cpu/online")).map_or(0, |s| count_cpu_list(&s)),
        cgroup: located.map(|l| l.path().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::tests::Fixture;
    use crate::net::classify::tests::fake_iface;
    use std::fs;

    fn write(root: &Path, rel: &str, body: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, format!("{body}\n")).unwrap();
    }

    /// A fake host: /sys with lo and eth0, /proc with a hostname.
    fn fake_host() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let net = t.path().join("sys/class/net");
        fake_iface(
            &net,
            "lo",
            &[("type", "772"), ("mtu", "65536"), ("operstate", "unknown")],
        );
        let eth = [
            ("type", "1"),
            ("device/", ""),
            ("ifindex", "2"),
            ("iflink", "2"),
            ("mtu", "9000"),
            ("speed", "25000"),
            ("operstate", "up"),
        ];
        fake_iface(&net, "eth0", &eth);
        let vx = [
            ("type", "1"),
            ("ifindex", "5"),
            ("iflink", "2"),
            ("mtu", "1450"),
            ("speed", "-1"),
            ("operstate", "up"),
            ("uevent", "DEVTYPE=vxlan"),
        ];
        fake_iface(&net, "vx0", &vx);
        write(t.path(), "sys/devices/system/cpu/online", "0-3,8-11");
        write(t.path(), "proc/sys/kernel/hostname", "node7");
        t
    }

    fn read_fake(t: &tempfile::TempDir, addrs: &[(String, IpAddr, Option<u8>)]) -> HostInventory {
        read_with(t, &Fixture::default(), addrs)
    }

    fn read_with(t: &tempfile::TempDir, cgroups: &Fixture, addrs: &[(String, IpAddr, Option<u8>)]) -> HostInventory {
        cgroups.run(|fs| read(&t.path().join("sys"), &t.path().join("proc"), fs, addrs))
    }

    #[test]
    fn interfaces_come_from_sysfs_with_addresses_attached() {
        let t = fake_host();
        let addrs = vec![
            ("lo".to_string(), "127.0.0.1".parse().unwrap(), Some(8)),
            ("eth0".to_string(), "10.0.0.7".parse().unwrap(), Some(24)),
            ("eth0".to_string(), "fe80::1".parse().unwrap(), None),
        ];
        let inv = read_fake(&t, &addrs);
        assert_eq!(inv.host, "node7");
        assert_eq!(inv.cpu.online_cpus, 8);
        let names: Vec<&str> = inv.ifaces.iter().map(|i| i.name.as_str()).collect();
        assert_eq!(names, ["eth0", "lo", "vx0"]);
        assert_eq!(
            inv.ifaces[0],
            Iface {
                name: "eth0".into(),
                kind: IfaceKind::Ethernet,
                mtu: Some(9000),
                speed_mbps: Some(25000),
                oper_state: Some("up".into()),
                addrs: vec!["10.0.0.7/24".into(), "fe80::1".into()],
                lower: None,
            }
        );
        assert_eq!(inv.ifaces[1].kind, IfaceKind::Loopback);
        assert_eq!(inv.ifaces[1].speed_mbps, None, "unreadable speed");
        assert_eq!(inv.ifaces[2].kind, IfaceKind::Vxlan);
        // vx0's iflink is eth0's index: the device it sends through. eth0 is its own link: none.
        assert_eq!(inv.ifaces[2].lower.as_deref(), Some("eth0"));
        assert_eq!(inv.ifaces[2].speed_mbps, None, "speed -1");
        let back: HostInventory = serde_json::from_value(serde_json::to_value(&inv).unwrap()).unwrap();
        assert_eq!(back, inv);
    }

    #[test]
    fn an_address_without_a_sysfs_entry_is_still_listed() {
        let t = fake_host();
        let inv = read_fake(&t, &[("wlan9".to_string(), "192.168.1.2".parse().unwrap(), Some(16))]);
        let w = inv.ifaces.iter().find(|i| i.name == "wlan9").unwrap();
        assert_eq!((w.mtu, &w.addrs[..]), (None, &["192.168.1.2/16".to_string()][..]));
    }

    #[test]
    fn the_quota_comes_from_the_located_cgroup_and_unknown_is_not_none() {
        let t = fake_host();
        let mut cg = Fixture::default()
            .with("/proc/self/cgroup", "1:cpu:/q\n0::/\n")
            .with(
                "/proc/self/mountinfo",
                "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n",
            )
            .with("/sys/fs/cgroup/cpu/q/cpu.cfs_quota_us", "10000\n")
            .with("/sys/fs/cgroup/cpu/q/cpu.cfs_period_us", "100000\n");
        let cpu = read_with(&t, &cg, &[]).cpu;
        assert_eq!((cpu.quota_cores, cpu.cgroup.as_deref()), (Some(0.1), Some("/q")));
        assert_eq!(cpu.quota_text(), "0.1 cores");
        cg.set("/sys/fs/cgroup/cpu/q/cpu.cfs_quota_us", "-1\n");
        let cpu = read_with(&t, &cg, &[]).cpu;
        assert_eq!((cpu.quota_cores, cpu.quota_text().as_str()), (None, "none"));
        // No view of the hierarchy (a rank behind `ip netns exec` whose ancestors cannot be entered): unknown.
        let unseen = Fixture::default().with("/proc/self/cgroup", "1:cpu:/q\n0::/\n");
        let cpu = read_with(&t, &unseen, &[]).cpu;
        assert_eq!((cpu.quota_cores, cpu.cgroup.as_deref()), (None, None));
        assert_eq!(cpu.quota_text(), "unknown");
        let back: CpuLimit = serde_json::from_value(serde_json::to_value(&cpu).unwrap()).unwrap();
        assert_eq!(back, cpu);
    }

    #[test]
    fn missing_files_give_unknowns_not_errors() {
        let t = tempfile::tempdir().unwrap();
        let inv = read_fake(&t, &[]);
        assert_eq!(inv.host, "unknown-host");
        assert!(inv.ifaces.is_empty());
        assert_eq!(
            inv.cpu,
            CpuLimit {
                quota_cores: None,
                online_cpus: 0,
                cgroup: None,
            }
        );
    }

    #[test]
    fn cpu_lists_count_ranges_and_singles() {
        assert_eq!(count_cpu_list("0"), 1);
        assert_eq!(count_cpu_list("0-63"), 64);
        assert_eq!(count_cpu_list("0-3,8,10-11"), 7);
        assert_eq!(count_cpu_list("junk"), 0);
    }

    #[test]
    fn cores_print_without_trailing_zeros() {
        assert_eq!(cores(2.0), "2");
        assert_eq!(cores(1.5), "1.5");
        assert_eq!(cores(0.25), "0.25");
    }

    #[test]
    fn this_machine_has_loopback_and_some_cpus() {
        let inv = local();
        assert!(inv.ifaces.iter().any(|i| i.kind == IfaceKind::Loopback), "{inv:?}");
        assert!(inv.cpu.online_cpus >= 1);
    }
}
