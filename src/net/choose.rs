//! The interface plain `tcp` binds to when no `@SPEC` and no `--iface` names one, like NCCL's socket
//! interface choice:
//!
//! - a single-host job: loopback;
//! - otherwise, in order: an IPoIB interface with an address; the interface that reaches the rendezvous; the
//!   default route's interface; the first interface by name. Loopback and container devices (`docker*`,
//!   `br-*`, `virbr*`, `veth*`, `cni*` and the host-side devices of known CNIs) are never chosen for a
//!   multi-host job, and neither is an interface the kernel reports down.
//!
//! [`choose`] is the rule over a described set of interfaces; [`super::iface`] describes the real ones.

use std::net::{IpAddr, Ipv4Addr};

use super::classify::{cni_of, CniRole, IfaceKind};
use super::spec::bind_address;

/// One interface as the rule sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub name: String,
    pub kind: IfaceKind,
    pub addrs: Vec<IpAddr>,
    /// Whether the kernel reports it down (operstate `down`); `unknown` (loopback, tunnels) is not down.
    pub down: bool,
    /// Whether it holds the default route (IPv4 or IPv6).
    pub default_route: bool,
    /// Whether this host reaches the rendezvous through it.
    pub reaches_rendezvous: bool,
}

/// The interface chosen, its address and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub name: String,
    pub addr: IpAddr,
    /// Why, in a few words ("IPoIB preferred", "default route", ...), for the run's output.
    pub reason: String,
}

/// Reason of a single-host job's choice.
pub const SINGLE_HOST: &str = "single host: loopback";
/// Reason of an IPoIB interface's choice.
pub const IPOIB: &str = "IPoIB preferred";
/// Reason of the rendezvous interface's choice.
pub const RENDEZVOUS: &str = "reaches the rendezvous";
/// Reason of the default route's interface's choice.
pub const DEFAULT_ROUTE: &str = "default route";
/// Reason of the last resort.
pub const FIRST_BY_NAME: &str = "first usable interface by name";

/// Name prefixes of container bridges and the host ends of container veths: they reach only this host.
const CONTAINER_PREFIXES: [&str; 5] = ["docker", "br-", "virbr", "veth", "cni"];

/// Whether `c` is loopback or a device that only reaches containers on this host.
pub fn host_local(c: &Candidate) -> bool {
    c.kind == IfaceKind::Loopback
        || (!c.addrs.is_empty() && c.addrs.iter().all(IpAddr::is_loopback))
        || CONTAINER_PREFIXES.iter().any(|p| c.name.starts_with(p))
        || matches!(cni_of(&c.name), Some((_, CniRole::HostBridge | CniRole::Local)))
}

/// One step of the rule: whether it takes this (usable) interface.
type Step = fn(&Candidate) -> bool;

fn is_ipoib(c: &Candidate) -> bool {
    c.kind == IfaceKind::IpoIb || c.name.starts_with("ib")
}

/// The interface for plain `tcp`: loopback when `single_host`, else the first of the rule's steps (see the
/// module docs) that finds a usable interface. The error lists what exists and why none fits.
pub fn choose(cands: &[Candidate], single_host: bool) -> Result<Choice, String> {
    if single_host {
        let lo = cands
            .iter()
            .filter(|c| c.kind == IfaceKind::Loopback)
            .find_map(|c| c.addrs.iter().find(|a| a.is_loopback()).map(|a| (c.name.clone(), *a)));
        let (name, addr) = lo.unwrap_or_else(|| ("lo".into(), IpAddr::V4(Ipv4Addr::LOCALHOST)));
        return Ok(Choice {
            name,
            addr,
            reason: SINGLE_HOST.into(),
        });
    }
    let mut usable: Vec<(&Candidate, IpAddr)> = cands
        .iter()
        .filter(|c| !c.down && !host_local(c))
        .filter_map(|c| {
            let pairs: Vec<(String, IpAddr)> = c.addrs.iter().map(|a| (c.name.clone(), *a)).collect();
            bind_address(&c.name, &pairs).map(|a| (c, a))
        })
        .collect();
    usable.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    let steps: [(&str, Step); 4] = [
        (IPOIB, is_ipoib),
        (RENDEZVOUS, |c| c.reaches_rendezvous),
        (DEFAULT_ROUTE, |c| c.default_route),
        (FIRST_BY_NAME, |_| true),
    ];
    for (reason, pick) in steps {
        if let Some((c, addr)) = usable.iter().find(|(c, _)| pick(c)) {
            return Ok(Choice {
                name: c.name.clone(),
                addr: *addr,
                reason: reason.into(),
            });
        }
    }
    let seen: Vec<String> = cands
        .iter()
        .map(|c| {
            let why = if host_local(c) {
                "loopback or container-only"
            } else if c.down {
                "down"
            } else {
                "no usable address"
            };
            format!("{} ({why})", c.name)
        })
        .collect();
    Err(format!(
        "no interface can reach other hosts: {}",
        if seen.is_empty() {
            "there are no interfaces".to_string()
        } else {
            seen.join(", ")
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, kind: IfaceKind, addrs: &[&str]) -> Candidate {
        Candidate {
            name: name.into(),
            kind,
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            down: false,
            default_route: false,
            reaches_rendezvous: false,
        }
    }

    fn lo() -> Candidate {
        c("lo", IfaceKind::Loopback, &["127.0.0.1", "::1"])
    }

    fn pick(cands: &[Candidate]) -> (String, String, String) {
        let ch = choose(cands, false).unwrap();
        (ch.name, ch.addr.to_string(), ch.reason)
    }

    fn with(mut x: Candidate, f: impl FnOnce(&mut Candidate)) -> Candidate {
        f(&mut x);
        x
    }

    #[test]
    fn a_single_host_uses_loopback_whatever_else_exists() {
        let ib = c("ib0", IfaceKind::IpoIb, &["10.9.0.1"]);
        let ch = choose(&[ib, lo()], true).unwrap();
        assert_eq!(
            (ch.name.as_str(), ch.addr.to_string(), ch.reason.as_str()),
            ("lo", "127.0.0.1".into(), SINGLE_HOST)
        );
        // Even with no description of loopback at all.
        assert_eq!(choose(&[], true).unwrap().addr, IpAddr::V4(Ipv4Addr::LOCALHOST));
    }

    #[test]
    fn ipoib_wins_over_the_rendezvous_and_the_default_route() {
        let eth = with(c("eth0", IfaceKind::Ethernet, &["10.0.0.1"]), |x| {
            x.default_route = true;
            x.reaches_rendezvous = true;
        });
        let ib = c("ib0", IfaceKind::IpoIb, &["fe80::1", "10.9.0.1"]);
        assert_eq!(
            pick(&[lo(), eth.clone(), ib]),
            ("ib0".into(), "10.9.0.1".into(), IPOIB.into())
        );
        // Named like IPoIB but of another link type (a renamed device) still counts.
        let ib_named = c("ib1", IfaceKind::Other("virtual".into()), &["10.9.0.2"]);
        assert_eq!(pick(&[eth.clone(), ib_named]).2, IPOIB);
        // IPoIB without an address (only link-local), or down, is passed over.
        let bare = c("ib0", IfaceKind::IpoIb, &["fe80::1"]);
        let down = with(c("ib1", IfaceKind::IpoIb, &["10.9.0.3"]), |x| x.down = true);
        assert_eq!(pick(&[eth, bare, down]).2, RENDEZVOUS);
    }

    #[test]
    fn the_rendezvous_interface_comes_before_the_default_route() {
        let eth0 = with(c("eth0", IfaceKind::Ethernet, &["192.168.1.5"]), |x| {
            x.default_route = true
        });
        let eth1 = with(c("eth1", IfaceKind::Ethernet, &["10.0.0.5"]), |x| {
            x.reaches_rendezvous = true
        });
        assert_eq!(
            pick(&[eth0.clone(), eth1]),
            ("eth1".into(), "10.0.0.5".into(), RENDEZVOUS.into())
        );
        // A rendezvous reached over loopback (rank 0 reaching itself) or a container bridge says nothing.
        let lo_r = with(lo(), |x| x.reaches_rendezvous = true);
        let docker = with(c("docker0", IfaceKind::Cni("docker".into()), &["172.17.0.1"]), |x| {
            x.reaches_rendezvous = true
        });
        assert_eq!(
            pick(&[lo_r, docker, eth0]),
            ("eth0".into(), "192.168.1.5".into(), DEFAULT_ROUTE.into())
        );
    }

    #[test]
    fn the_first_interface_by_name_is_the_last_resort() {
        // A pod's eth0 is a veth, but not named like a host-side one: it is the way out.
        let cands = [
            lo(),
            c("vxlan0", IfaceKind::Vxlan, &["10.50.0.2"]),
            c("eth0", IfaceKind::Veth, &["10.213.1.10"]),
            c("veth12ab", IfaceKind::Veth, &["169.254.1.1"]),
            c("br-0123456789ab", IfaceKind::Cni("docker".into()), &["172.18.0.1"]),
            c("cni0", IfaceKind::Cni("bridge".into()), &["10.244.0.1"]),
            c("cali12345", IfaceKind::Cni("calico".into()), &["10.1.1.1"]),
            c("virbr0", IfaceKind::Bridge, &["192.168.122.1"]),
            c("docker0", IfaceKind::Cni("docker".into()), &["172.17.0.1"]),
        ];
        assert_eq!(
            pick(&cands),
            ("eth0".into(), "10.213.1.10".into(), FIRST_BY_NAME.into())
        );
        // A global IPv6 address will do where there is no IPv4 one.
        let v6 = [lo(), c("eth0", IfaceKind::Ethernet, &["fe80::5", "2001:db8::5"])];
        assert_eq!(pick(&v6).1, "2001:db8::5");
    }

    #[test]
    fn never_loopback_for_several_hosts() {
        let cands = [
            with(lo(), |x| {
                x.default_route = true;
                x.reaches_rendezvous = true
            }),
            c("docker0", IfaceKind::Cni("docker".into()), &["172.17.0.1"]),
            with(c("eth0", IfaceKind::Ethernet, &["10.0.0.1"]), |x| x.down = true),
            c("eth1", IfaceKind::Ethernet, &[]),
        ];
        let e = choose(&cands, false).unwrap_err();
        assert!(
            e.contains("lo (loopback or container-only)")
                && e.contains("docker0 (loopback or container-only)")
                && e.contains("eth0 (down)")
                && e.contains("eth1 (no usable address)"),
            "{e}"
        );
        assert!(choose(&[], false).unwrap_err().contains("no interfaces"));
    }
}
