//! RDMA devices, ports and GID tables as the kernel shows them under `/sys/class/infiniband`.
//!
//! Plain file reading, so it needs no verbs library: the default build uses it to say what is there, and
//! every function takes the directory to read so tests use a fake tree.

use super::error::RdmaError;

use std::fs;
use std::path::{Path, PathBuf};

/// Where the kernel lists RDMA devices.
pub const SYSFS_IB: &str = "/sys/class/infiniband";

/// The link layer of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    InfiniBand,
    /// RoCE: addressed by GID only.
    Ethernet,
    Unknown,
}

/// What one port says about itself.
#[derive(Clone, Debug, PartialEq)]
pub struct PortInfo {
    /// The state line, e.g. `4: ACTIVE`.
    pub state: String,
    pub link_layer: LinkLayer,
    /// The rate line, e.g. `100 Gb/sec (4X EDR)`.
    pub rate: Option<String>,
}

impl PortInfo {
    /// Whether the port can carry traffic.
    pub fn active(&self) -> bool {
        self.state.contains("ACTIVE")
    }

    /// The port rate in Gbit/s, from the rate line.
    pub fn rate_gbit(&self) -> Option<f64> {
        let r = self.rate.as_deref()?;
        let (num, rest) = r.trim().split_once(' ')?;
        rest.starts_with("Gb/sec").then(|| num.parse().ok()).flatten()
    }
}

/// The kind of a GID table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GidKind {
    /// InfiniBand, or RoCE v1 (the kernel names both `IB/RoCE v1`).
    IbOrRoceV1,
    /// RoCE v2 (routable, UDP).
    RoceV2,
    Unknown,
}

/// One non-empty GID table entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GidEntry {
    pub index: u8,
    pub gid: [u8; 16],
    pub kind: GidKind,
}

impl GidEntry {
    /// Whether the GID is an IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`).
    pub fn ipv4_mapped(&self) -> bool {
        self.gid[..10] == [0; 10] && self.gid[10..12] == [0xff, 0xff]
    }
}

/// Device names, sorted; empty when the directory is missing (no RDMA stack in the kernel).
pub fn devices(root: &Path) -> Vec<String> {
    crate::net::sysfs::sorted_names(root)
}

fn port_dir(root: &Path, dev: &str, port: u8) -> PathBuf {
    root.join(dev).join("ports").join(port.to_string())
}

fn read_trimmed(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// Port numbers of a device, sorted.
pub fn ports(root: &Path, dev: &str) -> Vec<u8> {
    let mut v: Vec<u8> = fs::read_dir(root.join(dev).join("ports"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// The state, link layer and rate of one port, or `None` when the port does not exist.
pub fn port_info(root: &Path, dev: &str, port: u8) -> Option<PortInfo> {
    let dir = port_dir(root, dev, port);
    let state = read_trimmed(&dir.join("state"))?;
    let link_layer = match read_trimmed(&dir.join("link_layer")).as_deref() {
        Some("InfiniBand") => LinkLayer::InfiniBand,
        Some("Ethernet") => LinkLayer::Ethernet,
        _ => LinkLayer::Unknown,
    };
    Some(PortInfo {
        state,
        link_layer,
        rate: read_trimmed(&dir.join("rate")),
    })
}

/// The non-empty entries of a port's GID table, by index.
pub fn gids(root: &Path, dev: &str, port: u8) -> Vec<GidEntry> {
    let dir = port_dir(root, dev, port);
    let mut out: Vec<GidEntry> = fs::read_dir(dir.join("gids"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let index: u8 = e.file_name().to_str()?.parse().ok()?;
                    let gid = super::endpoint::gid_from_hex(&read_trimmed(&e.path())?).ok()?;
                    // Unused entries read as all zeros (or fe80:: with a zero interface id on some drivers).
                    if gid == [0; 16] || gid[8..] == [0; 8] {
                        return None;
                    }
                    let kind = match read_trimmed(&dir.join("gid_attrs").join("types").join(index.to_string())) {
                        Some(t) if t.eq_ignore_ascii_case("RoCE v2") => GidKind::RoceV2,
                        Some(t) if t.contains("v1") => GidKind::IbOrRoceV1,
                        _ => GidKind::Unknown,
                    };
                    Some(GidEntry { index, gid, kind })
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort_by_key(|g| g.index);
    out
}

/// Picks the GID index to use: `wanted` when given (it must exist); on an Ethernet link layer the first
/// RoCE v2 entry whose address is IPv4-mapped, else the first RoCE v2 entry (as NCCL does by default);
/// on InfiniBand index 0.
pub fn select_gid(entries: &[GidEntry], link: LinkLayer, wanted: Option<u8>) -> Result<GidEntry, RdmaError> {
    let listing = || {
        if entries.is_empty() {
            "the table is empty".to_string()
        } else {
            entries
                .iter()
                .map(|g| {
                    format!(
                        "{} ({:?}{})",
                        g.index,
                        g.kind,
                        if g.ipv4_mapped() { ", IPv4" } else { "" }
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    if let Some(i) = wanted {
        return entries.iter().find(|g| g.index == i).cloned().ok_or_else(|| {
            RdmaError::refused(format!(
                "GID index {i} is not in use on this port (entries: {}); list them with `show_gids`",
                listing()
            ))
        });
    }
    let pick = match link {
        LinkLayer::Ethernet => entries
            .iter()
            .find(|g| g.kind == GidKind::RoceV2 && g.ipv4_mapped())
            .or_else(|| entries.iter().find(|g| g.kind == GidKind::RoceV2)),
        _ => entries.iter().find(|g| g.index == 0).or(entries.first()),
    };
    pick.cloned().ok_or_else(|| {
        RdmaError::refused(format!(
            "no usable GID on this port (entries: {}); is an IP address configured on the RoCE interface? \
             Check with `show_gids`, or pick one by index",
            listing()
        ))
    })
}

/// What `--transport rdma@DEV` looked for and found, for the message when the device is missing.
pub fn describe_missing(root: &Path, dev: &str, from_verbs: &[String]) -> String {
    let in_sysfs = devices(root);
    format!(
        "RDMA device '{dev}' not found: the verbs library lists {}; {} lists {}. Check the name with \
         `ibv_devices` (or `ibstat`), that the RDMA kernel modules are loaded (e.g. mlx5_ib), and inside a \
         container that /dev/infiniband is passed through",
        if from_verbs.is_empty() {
            "no devices".to_string()
        } else {
            from_verbs.join(", ")
        },
        root.display(),
        if in_sysfs.is_empty() {
            "nothing (no RDMA devices on this host)".to_string()
        } else {
            in_sysfs.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: PathBuf, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    /// A RoCE port with a link-local v1/v2 pair, then an IPv4-mapped v1/v2 pair, and one empty entry.
    fn roce_tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("mlx5_0/ports/1");
        write(p.join("state"), "4: ACTIVE\n");
        write(p.join("link_layer"), "Ethernet\n");
        write(p.join("rate"), "100 Gb/sec (4X EDR)\n");
        let entries = [
            ("0", "fe80:0000:0000:0000:0ac0:ebff:fe01:0203", "IB/RoCE v1"),
            ("1", "fe80:0000:0000:0000:0ac0:ebff:fe01:0203", "RoCE v2"),
            ("2", "0000:0000:0000:0000:0000:ffff:0a00:0001", "IB/RoCE v1"),
            ("3", "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2"),
            ("4", "0000:0000:0000:0000:0000:0000:0000:0000", ""),
        ];
        for (i, gid, kind) in entries {
            write(p.join("gids").join(i), &format!("{gid}\n"));
            write(p.join("gid_attrs/types").join(i), &format!("{kind}\n"));
        }
        write(t.path().join("mlx5_1/ports/1/state"), "1: DOWN\n");
        t
    }

    #[test]
    fn reads_devices_ports_and_gid_table() {
        let t = roce_tree();
        assert_eq!(devices(t.path()), ["mlx5_0", "mlx5_1"]);
        assert_eq!(ports(t.path(), "mlx5_0"), [1]);
        let info = port_info(t.path(), "mlx5_0", 1).unwrap();
        assert!(info.active());
        assert_eq!(info.link_layer, LinkLayer::Ethernet);
        assert_eq!(info.rate_gbit(), Some(100.0));
        assert!(!port_info(t.path(), "mlx5_1", 1).unwrap().active());
        assert_eq!(port_info(t.path(), "mlx5_0", 2), None);
        let g = gids(t.path(), "mlx5_0", 1);
        assert_eq!(
            g.iter().map(|e| e.index).collect::<Vec<_>>(),
            [0, 1, 2, 3],
            "the zero entry is skipped"
        );
        assert_eq!(g[1].kind, GidKind::RoceV2);
        assert!(g[3].ipv4_mapped() && !g[1].ipv4_mapped());
    }

    #[test]
    fn roce_defaults_to_the_ipv4_mapped_v2_entry() {
        let t = roce_tree();
        let g = gids(t.path(), "mlx5_0", 1);
        assert_eq!(select_gid(&g, LinkLayer::Ethernet, None).unwrap().index, 3);
        // Without an IPv4 address, the link-local v2 entry.
        let no_v4: Vec<_> = g.iter().filter(|e| !e.ipv4_mapped()).cloned().collect();
        assert_eq!(select_gid(&no_v4, LinkLayer::Ethernet, None).unwrap().index, 1);
        // Only v1 entries: refused, saying what to check.
        let v1: Vec<_> = g.iter().filter(|e| e.kind != GidKind::RoceV2).cloned().collect();
        assert!(select_gid(&v1, LinkLayer::Ethernet, None)
            .unwrap_err()
            .to_string()
            .contains("show_gids"));
        assert_eq!(select_gid(&g, LinkLayer::InfiniBand, None).unwrap().index, 0);
        assert_eq!(select_gid(&g, LinkLayer::Ethernet, Some(2)).unwrap().index, 2);
        let e = select_gid(&g, LinkLayer::Ethernet, Some(9)).unwrap_err().to_string();
        assert!(e.contains("GID index 9") && e.contains("3 (RoceV2, IPv4)"), "{e}");
    }

    #[test]
    fn a_missing_tree_means_no_devices_and_a_clear_message() {
        let t = tempfile::tempdir().unwrap();
        let gone = t.path().join("infiniband");
        assert!(devices(&gone).is_empty());
        assert!(gids(&gone, "mlx5_0", 1).is_empty());
        let m = describe_missing(&gone, "mlx5_0", &[]);
        assert!(
            m.contains("'mlx5_0' not found") && m.contains("no devices") && m.contains("ibv_devices"),
            "{m}"
        );
        let t = roce_tree();
        let m = describe_missing(t.path(), "mlx5_9", &["mlx5_0".into()]);
        assert!(m.contains("lists mlx5_0;") && m.contains("mlx5_0, mlx5_1"), "{m}");
    }
}
