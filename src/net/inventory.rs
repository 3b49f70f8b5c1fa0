//! One host's network interfaces, CPU limits, RDMA devices and GPUs, as `collbench info` reports them.
//!
//! Everything is read from files under roots given as arguments (`/sys`, `/proc`, `/sys/fs/cgroup` on a real
//! host) so tests can hand in a fake tree; only [`local`] looks at the real machine.

use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

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
        Path::new("/sys/fs/cgroup"),
        &addrs,
    )
}

/// The inventory under the given roots; `addrs` are (interface, address, prefix length) as `if-addrs` gives them.
pub fn read(
    sys_root: &Path,
    proc_root: &Path,
    cgroup_root: &Path,
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
        cpu: CpuLimit {
            quota_cores: cpu_quota(proc_root, cgroup_root),
            online_cpus: read_trim(&sys_root.join("devices/system/cpu/online")).map_or(0, |s| count_cpu_list(&s)),
        },
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

/// This process's CPU quota in cores, from the cgroup `proc_root/self/cgroup` names: cgroup v1's `cpu`
/// controller if it is mounted (hybrid hosts keep it there), else cgroup v2.
fn cpu_quota(proc_root: &Path, cgroup_root: &Path) -> Option<f64> {
    let table = fs::read_to_string(proc_root.join("self/cgroup")).ok()?;
    let mut v2_path = None;
    for line in table.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2_path = Some(path);
        } else if controllers.split(',').any(|c| c == "cpu") {
            // v1 mounts the controller at a folder named after it or after its co-mounted set.
            let mount = [controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu"]
                .iter()
                .map(|m| cgroup_root.join(m))
                .find(|m| m.is_dir())?;
            return min_over_ancestors(&mount, path, |dir| {
                let quota: i64 = read_trim(&dir.join("cpu.cfs_quota_us"))?.parse().ok()?;
                let period: i64 = read_trim(&dir.join("cpu.cfs_period_us"))?.parse().ok()?;
                (quota > 0 && period > 0).then(|| quota as f64 / period as f64)
            });
        }
    }
    // Hybrid hosts mount v2 at `unified`; pure v2 hosts at the root itself.
    let base = if cgroup_root.join("cgroup.controllers").exists() || !cgroup_root.join("unified").is_dir() {
        cgroup_root.to_path_buf()
    } else {
        cgroup_root.join("unified")
    };
    min_over_ancestors(&base, v2_path?, |dir| {
        let max = read_trim(&dir.join("cpu.max"))?;
        let mut f = max.split_whitespace();
        let quota: f64 = f.next()?.parse().ok()?; // "max" fails to parse: no quota
        let period: f64 = f.next().unwrap_or("100000").parse().ok()?;
        (quota > 0.0 && period > 0.0).then_some(quota / period)
    })
}

/// The smallest `limit` of the cgroup at `mount/path` and its ancestors up to `mount`. Inside a container the
/// path names the host's hierarchy while the mount shows only the container's part; then the mount's own
/// folder is the container's cgroup.
fn min_over_ancestors(mount: &Path, path: &str, limit: impl Fn(&Path) -> Option<f64>) -> Option<f64> {
    let joined: PathBuf = mount.join(path.trim_start_matches('/'));
    let start = if joined.is_dir() { joined } else { mount.to_path_buf() };
    start
        .ancestors()
        .take_while(|d| d.starts_with(mount))
        .filter_map(limit)
        .reduce(f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::classify::tests::fake_iface;

    fn write(root: &Path, rel: &str, body: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, format!("{body}\n")).unwrap();
    }

    /// A fake host: /sys with lo and eth0, /proc with a hostname and `cgroup_table` as /proc/self/cgroup.
    fn fake_host(cgroup_table: &str) -> tempfile::TempDir {
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
        write(t.path(), "proc/self/cgroup", cgroup_table);
        fs::create_dir_all(t.path().join("cg")).unwrap();
        t
    }

    fn read_fake(t: &tempfile::TempDir, addrs: &[(String, IpAddr, Option<u8>)]) -> HostInventory {
        read(
            &t.path().join("sys"),
            &t.path().join("proc"),
            &t.path().join("cg"),
            addrs,
        )
    }

    #[test]
    fn interfaces_come_from_sysfs_with_addresses_attached() {
        let t = fake_host("0::/\n");
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
        let t = fake_host("0::/\n");
        let inv = read_fake(&t, &[("wlan9".to_string(), "192.168.1.2".parse().unwrap(), Some(16))]);
        let w = inv.ifaces.iter().find(|i| i.name == "wlan9").unwrap();
        assert_eq!((w.mtu, &w.addrs[..]), (None, &["192.168.1.2/16".to_string()][..]));
    }

    #[test]
    fn cgroup_v2_quota_is_read_along_the_path() {
        let t = fake_host("0::/kubepods/pod1/ctr\n");
        let cg = t.path().join("cg");
        write(&cg, "cgroup.controllers", "cpuset cpu io memory pids");
        write(&cg, "kubepods/cpu.max", "max 100000");
        write(&cg, "kubepods/pod1/cpu.max", "300000 100000");
        write(&cg, "kubepods/pod1/ctr/cpu.max", "max 100000");
        assert_eq!(
            read_fake(&t, &[]).cpu.quota_cores,
            Some(3.0),
            "the pod's limit binds its container"
        );
        write(&cg, "kubepods/pod1/ctr/cpu.max", "150000 100000");
        assert_eq!(read_fake(&t, &[]).cpu.quota_cores, Some(1.5));
    }

    #[test]
    fn cgroup_v2_without_quota_is_none() {
        let t = fake_host("0::/user.slice\n");
        let cg = t.path().join("cg");
        write(&cg, "cgroup.controllers", "cpu");
        write(&cg, "user.slice/cpu.max", "max 100000");
        assert_eq!(read_fake(&t, &[]).cpu.quota_cores, None);
    }

    #[test]
    fn cgroup_v2_inside_a_container_reads_its_own_root() {
        // With a cgroup namespace /proc/self/cgroup says "/" and the mount is the container's cgroup.
        let t = fake_host("0::/\n");
        let cg = t.path().join("cg");
        write(&cg, "cgroup.controllers", "cpu");
        write(&cg, "cpu.max", "200000 100000");
        assert_eq!(read_fake(&t, &[]).cpu.quota_cores, Some(2.0));
    }

    #[test]
    fn cgroup_v1_quota_wins_on_hybrid_hosts() {
        let table = "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n";
        let t = fake_host(table);
        let cg = t.path().join("cg");
        write(&cg, "unified/cgroup.controllers", "");
        write(&cg, "cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "50000");
        write(&cg, "cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000");
        write(&cg, "cpu,cpuacct/cpu.cfs_quota_us", "-1");
        write(&cg, "cpu,cpuacct/cpu.cfs_period_us", "100000");
        assert_eq!(read_fake(&t, &[]).cpu.quota_cores, Some(0.5));
    }

    #[test]
    fn cgroup_v1_in_a_container_without_namespace_falls_back_to_the_mount() {
        // Docker on v1 shows the host's path, but mounts only the container's cgroup.
        let t = fake_host("2:cpu:/docker/0123\n");
        let cg = t.path().join("cg");
        write(&cg, "cpu/cpu.cfs_quota_us", "400000");
        write(&cg, "cpu/cpu.cfs_period_us", "100000");
        assert_eq!(read_fake(&t, &[]).cpu.quota_cores, Some(4.0));
        write(&cg, "cpu/cpu.cfs_quota_us", "-1");
        assert_eq!(read_fake(&t, &[]).cpu.quota_cores, None);
    }

    #[test]
    fn missing_files_give_unknowns_not_errors() {
        let t = tempfile::tempdir().unwrap();
        let inv = read(&t.path().join("sys"), &t.path().join("proc"), &t.path().join("cg"), &[]);
        assert_eq!(inv.host, "unknown-host");
        assert!(inv.ifaces.is_empty());
        assert_eq!(
            inv.cpu,
            CpuLimit {
                quota_cores: None,
                online_cpus: 0
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
    fn this_machine_has_loopback_and_some_cpus() {
        let inv = local();
        assert!(inv.ifaces.iter().any(|i| i.kind == IfaceKind::Loopback), "{inv:?}");
        assert!(inv.cpu.online_cpus >= 1);
    }
}
