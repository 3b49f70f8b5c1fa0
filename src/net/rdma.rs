//! RDMA devices and their ports, read from sysfs (`/sys/class/infiniband`), so no verbs library is needed.
//!
//! Per port the kernel gives `state` ("4: ACTIVE"), `phys_state` ("5: LinkUp"), `rate` ("100 Gb/sec (4X EDR)"),
//! `link_layer` (InfiniBand or Ethernet, i.e. RoCE) and the GID table (`gids/N`, with `gid_attrs/types/N`
//! and `gid_attrs/ndevs/N`); per device `node_guid`. The network device of a port is `gid_attrs/ndevs/0`
//! (RoCE), else the device's `device/net/*` entry whose `dev_port` matches (IPoIB, multi-port NICs).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::sysfs::{read_trim, sorted_names};

/// One RDMA device (an HCA or RoCE NIC).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RdmaDevice {
    /// The verbs name (`mlx5_0`).
    pub name: String,
    pub node_guid: Option<String>,
    pub ports: Vec<RdmaPort>,
}

/// One port of an RDMA device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RdmaPort {
    /// Port number, from 1.
    pub port: u32,
    /// Logical state without its number: "ACTIVE", "INIT", "DOWN", ...
    pub state: Option<String>,
    /// Physical state without its number: "LinkUp", "Polling", "Disabled", ...
    pub phys_state: Option<String>,
    /// As the kernel says it: "100 Gb/sec (4X EDR)".
    pub rate: Option<String>,
    /// "InfiniBand" or "Ethernet" (RoCE).
    pub link_layer: Option<String>,
    /// The used entries of the port's GID table, by index (unused entries, all zeros, are left out).
    #[serde(default)]
    pub gids: Vec<RdmaGid>,
    /// Network devices on this port (IPoIB interface, or the RoCE NIC's netdev).
    pub netdevs: Vec<String>,
}

/// One used entry of a port's GID table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RdmaGid {
    /// Index in the table (what `--gid-index` and NCCL_IB_GID_INDEX name).
    pub index: u32,
    /// The GID as the kernel writes it: eight groups of four hex digits.
    pub gid: String,
    /// The entry's type as the kernel names it ("RoCE v2", "IB/RoCE v1"; "IB" on InfiniBand), where known.
    pub kind: Option<String>,
    /// The network device the entry belongs to (RoCE), where known.
    pub netdev: Option<String>,
}

impl RdmaGid {
    /// The GID in IPv6's short form, as `ibv_devinfo -v` shows it (`::ffff:10.0.0.1`); the kernel's text
    /// when it is not 16 bytes of hex.
    pub fn short(&self) -> String {
        self.gid
            .parse::<std::net::Ipv6Addr>()
            .map_or_else(|_| self.gid.clone(), |a| a.to_string())
    }
}

/// 16 GID bytes as the kernel writes them: eight groups of four hex digits.
// Read through verbs only in the rdma build; sysfs already has the text.
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
pub fn gid_text(raw: &[u8; 16]) -> String {
    raw.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

/// Whether the kernel's GID text is an unused entry: all zeros, or (some drivers) `fe80::` with a zero
/// interface id.
fn unused_gid(text: &str) -> bool {
    match text.parse::<std::net::Ipv6Addr>() {
        Ok(a) => {
            let o = a.octets();
            o == [0; 16] || o[8..] == [0; 8]
        }
        Err(_) => true,
    }
}

/// The used entries of the GID table under port directory `dir`, by index.
fn read_gids(dir: &Path) -> Vec<RdmaGid> {
    let mut out: Vec<RdmaGid> = sorted_names(&dir.join("gids"))
        .into_iter()
        .filter_map(|n| {
            let index: u32 = n.parse().ok()?;
            let gid = read_trim(&dir.join("gids").join(&n))?;
            if unused_gid(&gid) {
                return None;
            }
            Some(RdmaGid {
                index,
                gid,
                kind: read_trim(&dir.join("gid_attrs/types").join(&n)),
                netdev: read_trim(&dir.join("gid_attrs/ndevs").join(&n)),
            })
        })
        .collect();
    out.sort_by_key(|g| g.index);
    out
}

impl RdmaPort {
    /// Whether the port can carry traffic.
    pub fn is_active(&self) -> bool {
        self.state.as_deref() == Some("ACTIVE")
    }
}

/// "4: ACTIVE" -> "ACTIVE"; text without a number stays as it is.
fn without_number(s: String) -> String {
    match s.split_once(':') {
        Some((n, rest)) if n.trim().bytes().all(|b| b.is_ascii_digit()) => rest.trim().to_string(),
        _ => s,
    }
}

/// The RDMA devices under `sys_root` (normally `/sys`), sorted by name; empty when there are none.
pub fn read(sys_root: &Path) -> Vec<RdmaDevice> {
    let ib = sys_root.join("class/infiniband");
    sorted_names(&ib)
        .into_iter()
        .map(|name| {
            let dev = ib.join(&name);
            // Network devices of the PCI function with the port each serves (dev_port counts from 0).
            let netdevs: Vec<(String, Option<u32>)> = sorted_names(&dev.join("device/net"))
                .into_iter()
                .map(|n| {
                    let dev_port =
                        read_trim(&dev.join("device/net").join(&n).join("dev_port")).and_then(|p| p.parse().ok());
                    (n, dev_port)
                })
                .collect();
            let mut ports: Vec<RdmaPort> = sorted_names(&dev.join("ports"))
                .into_iter()
                .filter_map(|p| p.parse::<u32>().ok())
                .map(|port| {
                    let dir = dev.join("ports").join(port.to_string());
                    RdmaPort {
                        port,
                        state: read_trim(&dir.join("state")).map(without_number),
                        phys_state: read_trim(&dir.join("phys_state")).map(without_number),
                        rate: read_trim(&dir.join("rate")),
                        link_layer: read_trim(&dir.join("link_layer")),
                        gids: read_gids(&dir),
                        netdevs: read_trim(&dir.join("gid_attrs/ndevs/0")).into_iter().collect(),
                    }
                })
                .collect();
            ports.sort_by_key(|p| p.port);
            let single = ports.len() == 1;
            for p in ports.iter_mut().filter(|p| p.netdevs.is_empty()) {
                p.netdevs = netdevs
                    .iter()
                    .filter(|(_, dp)| single || dp.map(|d| d + 1) == Some(p.port))
                    .map(|(n, _)| n.clone())
                    .collect();
            }
            RdmaDevice {
                node_guid: read_trim(&dev.join("node_guid")),
                name,
                ports,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(root: &Path, rel: &str, body: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, format!("{body}\n")).unwrap();
    }

    #[test]
    fn no_infiniband_class_means_no_devices() {
        let t = tempfile::tempdir().unwrap();
        assert!(read(t.path()).is_empty());
    }

    #[test]
    fn ports_are_read_with_their_netdevs() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        // An InfiniBand HCA with two ports, IPoIB on each, and a RoCE NIC whose GID names its netdev.
        let hca = "class/infiniband/mlx5_0";
        write(r, &format!("{hca}/node_guid"), "0248:2d03:00aa:bbcc");
        for (port, state, phys) in [(1, "4: ACTIVE", "5: LinkUp"), (2, "2: INIT", "5: LinkUp")] {
            write(r, &format!("{hca}/ports/{port}/state"), state);
            write(r, &format!("{hca}/ports/{port}/phys_state"), phys);
            write(r, &format!("{hca}/ports/{port}/rate"), "200 Gb/sec (4X HDR)");
            write(r, &format!("{hca}/ports/{port}/link_layer"), "InfiniBand");
            write(
                r,
                &format!("{hca}/ports/{port}/gids/0"),
                "fe80:0000:0000:0000:0248:2d03:00aa:bbcc",
            );
        }
        write(r, &format!("{hca}/device/net/ib0/dev_port"), "0");
        write(r, &format!("{hca}/device/net/ib1/dev_port"), "1");
        let roce = "class/infiniband/mlx5_1";
        write(r, &format!("{roce}/ports/1/state"), "1: DOWN");
        write(r, &format!("{roce}/ports/1/phys_state"), "3: Disabled");
        write(r, &format!("{roce}/ports/1/link_layer"), "Ethernet");
        write(r, &format!("{roce}/ports/1/gid_attrs/ndevs/0"), "ens1f0np0");
        // Its GID table: the link-local v1/v2 pair, an unused entry (zeros) and the IPv4-mapped v2 entry.
        let gids = [
            ("fe80:0000:0000:0000:ba59:9fff:fe12:3456", "IB/RoCE v1"),
            ("fe80:0000:0000:0000:ba59:9fff:fe12:3456", "RoCE v2"),
            ("0000:0000:0000:0000:0000:0000:0000:0000", ""),
            ("0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2"),
        ];
        for (i, (gid, kind)) in gids.iter().enumerate() {
            write(r, &format!("{roce}/ports/1/gids/{i}"), gid);
            if !kind.is_empty() {
                write(r, &format!("{roce}/ports/1/gid_attrs/types/{i}"), kind);
                write(r, &format!("{roce}/ports/1/gid_attrs/ndevs/{i}"), "ens1f0np0");
            }
        }
        let devs = read(r);
        assert_eq!(devs.len(), 2);
        let d = &devs[0];
        assert_eq!(
            (d.name.as_str(), d.node_guid.as_deref()),
            ("mlx5_0", Some("0248:2d03:00aa:bbcc"))
        );
        assert_eq!(
            d.ports[0],
            RdmaPort {
                port: 1,
                state: Some("ACTIVE".into()),
                phys_state: Some("LinkUp".into()),
                rate: Some("200 Gb/sec (4X HDR)".into()),
                link_layer: Some("InfiniBand".into()),
                gids: vec![RdmaGid {
                    index: 0,
                    gid: "fe80:0000:0000:0000:0248:2d03:00aa:bbcc".into(),
                    kind: None,
                    netdev: None,
                }],
                netdevs: vec!["ib0".into()],
            }
        );
        assert!(d.ports[0].is_active() && !d.ports[1].is_active());
        assert_eq!(
            (d.ports[1].state.as_deref(), &d.ports[1].netdevs[..]),
            (Some("INIT"), &["ib1".to_string()][..])
        );
        let e = &devs[1];
        assert_eq!(e.node_guid, None);
        assert_eq!(e.ports[0].netdevs, ["ens1f0np0"]);
        assert_eq!(e.ports[0].phys_state.as_deref(), Some("Disabled"));
        assert_eq!(e.ports[0].rate, None);
        let table: Vec<(u32, String, Option<&str>, Option<&str>)> = e.ports[0]
            .gids
            .iter()
            .map(|g| (g.index, g.short(), g.kind.as_deref(), g.netdev.as_deref()))
            .collect();
        assert_eq!(
            table,
            [
                (
                    0,
                    "fe80::ba59:9fff:fe12:3456".into(),
                    Some("IB/RoCE v1"),
                    Some("ens1f0np0")
                ),
                (
                    1,
                    "fe80::ba59:9fff:fe12:3456".into(),
                    Some("RoCE v2"),
                    Some("ens1f0np0")
                ),
                (3, "::ffff:10.0.0.1".into(), Some("RoCE v2"), Some("ens1f0np0")),
            ]
        );
        assert_eq!(
            gid_text(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            "fe80:0000:0000:0000:0000:0000:0000:0001"
        );
        let back: Vec<RdmaDevice> = serde_json::from_value(serde_json::to_value(&devs).unwrap()).unwrap();
        assert_eq!(back, devs);
    }

    #[test]
    fn a_single_port_device_owns_every_netdev() {
        let t = tempfile::tempdir().unwrap();
        write(t.path(), "class/infiniband/mlx4_0/ports/1/state", "4: ACTIVE");
        // No dev_port file (older drivers).
        fs::create_dir_all(t.path().join("class/infiniband/mlx4_0/device/net/ib0")).unwrap();
        assert_eq!(read(t.path())[0].ports[0].netdevs, ["ib0"]);
    }
}
