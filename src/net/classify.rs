//! What kind of interface a network device is, read from `/sys/class/net/NAME` and its name.
//!
//! The kernel says most of it: `type` (the ARPHRD link type), `DEVTYPE` in `uevent` (set by the bridge, bond,
//! VLAN, VXLAN, GENEVE and WireGuard drivers), the `bridge/`, `bonding/` and `tun_flags` entries, and the
//! `device` link that only devices on a bus (PCI, virtio...) have. Veth has no marker of its own; it is a
//! virtual Ethernet device whose `iflink` names another device (its peer). CNI plugins create ordinary
//! devices of those kinds under well-known names, which say more to the user than the kind does, so a
//! well-known CNI name wins.

use std::fmt;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The kind of a network interface; serialised as its short name (`"ethernet"`, `"cni:flannel"`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum IfaceKind {
    Loopback,
    /// A device on a bus (PCI, virtio, ...) with an Ethernet link type.
    Ethernet,
    /// IP over InfiniBand (link type 32).
    IpoIb,
    Bond,
    Vlan,
    Vxlan,
    Geneve,
    WireGuard,
    Veth,
    Bridge,
    Tun,
    /// A device a container network made, named by the CNI (or Docker) that made it.
    Cni(String),
    /// Anything else, with a short description (`"virtual"`, `"ipip"`, `"type 776"`).
    Other(String),
}

impl fmt::Display for IfaceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            IfaceKind::Loopback => "loopback",
            IfaceKind::Ethernet => "ethernet",
            IfaceKind::IpoIb => "ipoib",
            IfaceKind::Bond => "bond",
            IfaceKind::Vlan => "vlan",
            IfaceKind::Vxlan => "vxlan",
            IfaceKind::Geneve => "geneve",
            IfaceKind::WireGuard => "wireguard",
            IfaceKind::Veth => "veth",
            IfaceKind::Bridge => "bridge",
            IfaceKind::Tun => "tun",
            IfaceKind::Cni(cni) => return write!(f, "cni:{cni}"),
            IfaceKind::Other(what) => what,
        };
        f.write_str(s)
    }
}

impl From<IfaceKind> for String {
    fn from(k: IfaceKind) -> String {
        k.to_string()
    }
}

impl From<String> for IfaceKind {
    /// The inverse of `Display`; unknown names become `Other`.
    fn from(s: String) -> IfaceKind {
        match s.as_str() {
            "loopback" => IfaceKind::Loopback,
            "ethernet" => IfaceKind::Ethernet,
            "ipoib" => IfaceKind::IpoIb,
            "bond" => IfaceKind::Bond,
            "vlan" => IfaceKind::Vlan,
            "vxlan" => IfaceKind::Vxlan,
            "geneve" => IfaceKind::Geneve,
            "wireguard" => IfaceKind::WireGuard,
            "veth" => IfaceKind::Veth,
            "bridge" => IfaceKind::Bridge,
            "tun" => IfaceKind::Tun,
            _ => match s.strip_prefix("cni:") {
                Some(cni) => IfaceKind::Cni(cni.to_string()),
                None => IfaceKind::Other(s),
            },
        }
    }
}

/// What a CNI-named device does, which decides the advice about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CniRole {
    /// A tunnel to other hosts, with this encapsulation.
    Overlay(Encap),
    /// A bridge that only reaches containers on this host (traffic leaves through NAT, if at all).
    HostBridge,
    /// A host-side end of a container's veth pair, or a device for routing/service tricks on this host.
    Local,
}

/// An encapsulation and the bytes it adds to every packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encap {
    /// Short name, as in [`IfaceKind`]'s display ("vxlan", "ipip", ...).
    pub name: &'static str,
    /// Bytes added over an IPv4 underlay.
    pub overhead_v4: u32,
    /// Bytes added over an IPv6 underlay.
    pub overhead_v6: u32,
}

/// VXLAN: outer IPv4 (20) + UDP (8) + VXLAN (8) + inner Ethernet (14) headers.
pub const VXLAN: Encap = Encap {
    name: "vxlan",
    overhead_v4: 50,
    overhead_v6: 70,
};
/// GENEVE: as VXLAN without options; options add more.
pub const GENEVE: Encap = Encap {
    name: "geneve",
    overhead_v4: 50,
    overhead_v6: 70,
};
/// WireGuard: outer IP + UDP (8) + WireGuard header (16) + auth tag (16), no inner Ethernet header.
pub const WIREGUARD: Encap = Encap {
    name: "wireguard",
    overhead_v4: 60,
    overhead_v6: 80,
};
/// IP in IP (Calico's `tunl0`): one outer IPv4 header.
pub const IPIP: Encap = Encap {
    name: "ipip",
    overhead_v4: 20,
    overhead_v6: 40,
};

/// The CNI a device name belongs to and the device's role, for the well-known names.
pub fn cni_of(name: &str) -> Option<(&'static str, CniRole)> {
    use CniRole::*;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    let hex12 = |s: &str| s.len() == 12 && hex(s);
    let found = match name {
        n if n.starts_with("flannel-wg") => ("flannel", Overlay(WIREGUARD)),
        n if n.starts_with("flannel.") || n.starts_with("flannel-v6.") => ("flannel", Overlay(VXLAN)),
        "cilium_vxlan" => ("cilium", Overlay(VXLAN)),
        "cilium_geneve" => ("cilium", Overlay(GENEVE)),
        "cilium_wg0" => ("cilium", Overlay(WIREGUARD)),
        // Cilium's pod-side veths are lxc plus hex digits (not LXC's own lxcbr0).
        n if n.starts_with("cilium_") || n == "lxc_health" || n.strip_prefix("lxc").is_some_and(hex) => {
            ("cilium", Local)
        }
        "vxlan.calico" | "vxlan-v6.calico" => ("calico", Overlay(VXLAN)),
        "wireguard.cali" | "wg-v6.cali" => ("calico", Overlay(WIREGUARD)),
        "tunl0" => ("calico", Overlay(IPIP)),
        n if n.starts_with("cali") => ("calico", Local),
        "weave" => ("weave", HostBridge),
        n if n.starts_with("vxlan-6784") => ("weave", Overlay(VXLAN)),
        "kube-ipvs0" => ("kube-proxy", Local),
        "kube-bridge" => ("kube-router", HostBridge),
        "antrea-gw0" => ("antrea", Local),
        "antrea-tun0" | "genev_sys_6081" => ("antrea", Overlay(GENEVE)),
        n if n.strip_prefix("cni").is_some_and(digits) => ("bridge", HostBridge),
        "docker_gwbridge" => ("docker", HostBridge),
        n if n.strip_prefix("docker").is_some_and(digits) => ("docker", HostBridge),
        // Docker names user-defined bridge networks br- plus 12 hex digits of the network id.
        n if n.strip_prefix("br-").is_some_and(hex12) => ("docker", HostBridge),
        _ => return None,
    };
    Some(found)
}

/// The encapsulation a device adds, for overlays (VXLAN, GENEVE, WireGuard, CNI tunnels); `None` otherwise.
pub fn encapsulation(name: &str, kind: &IfaceKind) -> Option<Encap> {
    match kind {
        IfaceKind::Vxlan => Some(VXLAN),
        IfaceKind::Geneve => Some(GENEVE),
        IfaceKind::WireGuard => Some(WIREGUARD),
        IfaceKind::Other(o) if o == "ipip" => Some(IPIP),
        IfaceKind::Cni(_) => match cni_of(name) {
            Some((_, CniRole::Overlay(e))) => Some(e),
            _ => None,
        },
        _ => None,
    }
}

/// ARPHRD link types (include/uapi/linux/if_arp.h) that matter here.
const ARPHRD_ETHER: u32 = 1;
const ARPHRD_INFINIBAND: u32 = 32;
const ARPHRD_TUNNEL: u32 = 768;
const ARPHRD_IPGRE: u32 = 778;
const ARPHRD_LOOPBACK: u32 = 772;
const ARPHRD_NONE: u32 = 65534;

/// The kind of interface `name`, from `sys_class_net_dir/NAME` (normally `/sys/class/net`) and its name.
pub fn classify(name: &str, sys_class_net_dir: &Path) -> IfaceKind {
    let dir = sys_class_net_dir.join(name);
    let read = |f: &str| fs::read_to_string(dir.join(f)).ok().map(|s| s.trim().to_string());
    let num = |f: &str| read(f).and_then(|s| s.parse::<u32>().ok());
    let link_type = num("type");
    if link_type == Some(ARPHRD_LOOPBACK) || (link_type.is_none() && name == "lo") {
        return IfaceKind::Loopback;
    }
    if let Some((cni, _)) = cni_of(name) {
        return IfaceKind::Cni(cni.to_string());
    }
    let devtype = read("uevent").and_then(|u| {
        u.lines()
            .find_map(|l| l.strip_prefix("DEVTYPE=").map(|v| v.trim().to_string()))
    });
    match devtype.as_deref() {
        Some("bond") => return IfaceKind::Bond,
        Some("bridge") => return IfaceKind::Bridge,
        Some("vlan") => return IfaceKind::Vlan,
        Some("vxlan") => return IfaceKind::Vxlan,
        Some("geneve") => return IfaceKind::Geneve,
        Some("wireguard") => return IfaceKind::WireGuard,
        _ => {}
    }
    // Older kernels and some drivers omit DEVTYPE; the bridge and bond drivers always add these folders.
    if dir.join("bonding").is_dir() {
        return IfaceKind::Bond;
    }
    if dir.join("bridge").is_dir() {
        return IfaceKind::Bridge;
    }
    if dir.join("tun_flags").exists() {
        return IfaceKind::Tun;
    }
    let on_a_bus = dir.join("device").exists();
    match link_type {
        Some(ARPHRD_INFINIBAND) => IfaceKind::IpoIb,
        Some(ARPHRD_ETHER) if on_a_bus => IfaceKind::Ethernet,
        Some(ARPHRD_ETHER) => {
            // A veth's iflink is its peer's ifindex; other virtual Ethernet devices (dummy, ifb) point at
            // themselves. macvlan/ipvlan also point elsewhere (their parent) and land here too.
            let peer = num("iflink").zip(num("ifindex")).is_some_and(|(l, i)| l != 0 && l != i);
            if peer || name.starts_with("veth") {
                IfaceKind::Veth
            } else {
                IfaceKind::Other("virtual".into())
            }
        }
        Some(ARPHRD_TUNNEL) => IfaceKind::Other("ipip".into()),
        Some(ARPHRD_IPGRE) => IfaceKind::Other("gre".into()),
        Some(ARPHRD_NONE) => IfaceKind::Other("none".into()),
        Some(t) => IfaceKind::Other(format!("type {t}")),
        None if name == "lo" => IfaceKind::Loopback,
        None => IfaceKind::Other("unknown".into()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fake `/sys/class/net/NAME`: `files` are (relative path, contents); a path ending in `/` is a folder.
    pub(crate) fn fake_iface(net: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = net.join(name);
        fs::create_dir_all(&dir).unwrap();
        for (f, body) in files {
            if let Some(d) = f.strip_suffix('/') {
                fs::create_dir_all(dir.join(d)).unwrap();
            } else {
                fs::write(dir.join(f), format!("{body}\n")).unwrap();
            }
        }
        dir
    }

    fn kind_of(name: &str, files: &[(&str, &str)]) -> IfaceKind {
        let t = tempfile::tempdir().unwrap();
        fake_iface(t.path(), name, files);
        classify(name, t.path())
    }

    fn uevent(name: &str, devtype: &str) -> String {
        format!("DEVTYPE={devtype}\nINTERFACE={name}\nIFINDEX=7")
    }

    #[test]
    fn kernel_markers_decide_the_kind() {
        assert_eq!(kind_of("lo", &[("type", "772")]), IfaceKind::Loopback);
        assert_eq!(kind_of("eth0", &[("type", "1"), ("device/", "")]), IfaceKind::Ethernet);
        assert_eq!(kind_of("ib0", &[("type", "32"), ("device/", "")]), IfaceKind::IpoIb);
        assert_eq!(kind_of("ib0.8001", &[("type", "32")]), IfaceKind::IpoIb);
        assert_eq!(
            kind_of("bond0", &[("type", "1"), ("uevent", &uevent("bond0", "bond"))]),
            IfaceKind::Bond
        );
        assert_eq!(kind_of("bond1", &[("type", "1"), ("bonding/", "")]), IfaceKind::Bond);
        assert_eq!(
            kind_of("eth0.42", &[("type", "1"), ("uevent", &uevent("eth0.42", "vlan"))]),
            IfaceKind::Vlan
        );
        assert_eq!(
            kind_of("vx0", &[("type", "1"), ("uevent", &uevent("vx0", "vxlan"))]),
            IfaceKind::Vxlan
        );
        assert_eq!(
            kind_of("gn0", &[("type", "1"), ("uevent", &uevent("gn0", "geneve"))]),
            IfaceKind::Geneve
        );
        let wg = [("type", "65534"), ("uevent", "DEVTYPE=wireguard\nINTERFACE=wg0")];
        assert_eq!(kind_of("wg0", &wg), IfaceKind::WireGuard);
        assert_eq!(
            kind_of("br0", &[("type", "1"), ("uevent", &uevent("br0", "bridge"))]),
            IfaceKind::Bridge
        );
        assert_eq!(kind_of("br1", &[("type", "1"), ("bridge/", "")]), IfaceKind::Bridge);
        assert_eq!(
            kind_of("tun0", &[("type", "65534"), ("tun_flags", "0x1001")]),
            IfaceKind::Tun
        );
        assert_eq!(
            kind_of("tap0", &[("type", "1"), ("tun_flags", "0x1002")]),
            IfaceKind::Tun
        );
    }

    #[test]
    fn veth_is_a_virtual_ethernet_device_with_a_peer() {
        // As the kernel shows a veth pair made with `ip link add v0 type veth peer name v1`.
        assert_eq!(
            kind_of("v0", &[("type", "1"), ("iflink", "2"), ("ifindex", "3")]),
            IfaceKind::Veth
        );
        // The namespace cluster's and a pod's eth0 are veths too.
        assert_eq!(
            kind_of("eth0", &[("type", "1"), ("iflink", "12"), ("ifindex", "2")]),
            IfaceKind::Veth
        );
        assert_eq!(kind_of("vethab12", &[("type", "1")]), IfaceKind::Veth);
        // dummy and ifb point at themselves.
        let ifb = [("type", "1"), ("iflink", "2"), ("ifindex", "2")];
        assert_eq!(kind_of("ifb0", &ifb), IfaceKind::Other("virtual".into()));
    }

    #[test]
    fn well_known_cni_names_win_over_the_device_kind() {
        let vxlan = |n: &str| kind_of(n, &[("type", "1"), ("uevent", &uevent(n, "vxlan"))]);
        assert_eq!(vxlan("flannel.1"), IfaceKind::Cni("flannel".into()));
        assert_eq!(vxlan("cilium_vxlan"), IfaceKind::Cni("cilium".into()));
        assert_eq!(vxlan("vxlan.calico"), IfaceKind::Cni("calico".into()));
        assert_eq!(
            kind_of("flannel-wg", &[("type", "65534")]),
            IfaceKind::Cni("flannel".into())
        );
        assert_eq!(
            kind_of("cilium_host", &[("type", "1")]),
            IfaceKind::Cni("cilium".into())
        );
        assert_eq!(
            kind_of("cali1a2b3c4d5e6", &[("type", "1")]),
            IfaceKind::Cni("calico".into())
        );
        assert_eq!(kind_of("tunl0", &[("type", "768")]), IfaceKind::Cni("calico".into()));
        assert_eq!(
            kind_of("weave", &[("type", "1"), ("bridge/", "")]),
            IfaceKind::Cni("weave".into())
        );
        assert_eq!(
            kind_of("kube-ipvs0", &[("type", "1")]),
            IfaceKind::Cni("kube-proxy".into())
        );
        assert_eq!(
            kind_of("cni0", &[("type", "1"), ("bridge/", "")]),
            IfaceKind::Cni("bridge".into())
        );
        assert_eq!(
            kind_of("docker0", &[("type", "1"), ("bridge/", "")]),
            IfaceKind::Cni("docker".into())
        );
        assert_eq!(
            kind_of("br-0123456789ab", &[("type", "1")]),
            IfaceKind::Cni("docker".into())
        );
        // Names that only look alike stay what the kernel says.
        assert_eq!(kind_of("br-lan", &[("type", "1"), ("bridge/", "")]), IfaceKind::Bridge);
        assert_eq!(kind_of("lxcbr0", &[("type", "1"), ("bridge/", "")]), IfaceKind::Bridge);
        assert_eq!(kind_of("lxc9f3a", &[("type", "1")]), IfaceKind::Cni("cilium".into()));
        assert_eq!(kind_of("cnix", &[("type", "1"), ("device/", "")]), IfaceKind::Ethernet);
    }

    #[test]
    fn unreadable_devices_are_other_except_lo() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(classify("lo", t.path()), IfaceKind::Loopback);
        assert_eq!(classify("x0", t.path()), IfaceKind::Other("unknown".into()));
        assert_eq!(kind_of("sit0", &[("type", "776")]), IfaceKind::Other("type 776".into()));
    }

    #[test]
    fn overlays_know_their_encapsulation() {
        assert_eq!(encapsulation("vx0", &IfaceKind::Vxlan), Some(VXLAN));
        assert_eq!(
            encapsulation("flannel.1", &IfaceKind::Cni("flannel".into())),
            Some(VXLAN)
        );
        assert_eq!(
            encapsulation("cilium_geneve", &IfaceKind::Cni("cilium".into())),
            Some(GENEVE)
        );
        assert_eq!(
            encapsulation("flannel-wg", &IfaceKind::Cni("flannel".into())),
            Some(WIREGUARD)
        );
        assert_eq!(encapsulation("tunl0", &IfaceKind::Cni("calico".into())), Some(IPIP));
        assert_eq!(encapsulation("cni0", &IfaceKind::Cni("bridge".into())), None);
        assert_eq!(encapsulation("eth0", &IfaceKind::Ethernet), None);
        assert_eq!(VXLAN.overhead_v4, 20 + 8 + 8 + 14);
    }

    #[test]
    fn kinds_serialise_as_their_short_names_and_back() {
        let all = [
            IfaceKind::Loopback,
            IfaceKind::Ethernet,
            IfaceKind::IpoIb,
            IfaceKind::Bond,
            IfaceKind::Vlan,
            IfaceKind::Vxlan,
            IfaceKind::Geneve,
            IfaceKind::WireGuard,
            IfaceKind::Veth,
            IfaceKind::Bridge,
            IfaceKind::Tun,
            IfaceKind::Cni("flannel".into()),
            IfaceKind::Other("virtual".into()),
        ];
        for k in all {
            let j = serde_json::to_string(&k).unwrap();
            assert_eq!(j, format!("\"{k}\""));
            assert_eq!(serde_json::from_str::<IfaceKind>(&j).unwrap(), k);
        }
        assert_eq!(IfaceKind::Cni("flannel".into()).to_string(), "cni:flannel");
    }
}
