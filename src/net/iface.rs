//! This host's network interfaces: their addresses, the interface a SPEC names, and the default choice.

use std::net::IpAddr;
use std::path::Path;

use super::choose::{choose, Candidate, Choice};
use super::classify::classify;
use super::spec::IfaceSpec;
use crate::error::{Error, Result};

/// Every (interface, address) pair of this host.
pub fn addresses() -> Vec<(String, IpAddr)> {
    if_addrs::get_if_addrs()
        .map(|v| v.into_iter().map(|i| (i.name.clone(), i.ip())).collect())
        .unwrap_or_default()
}

/// The interface `spec` (a name, a glob or an `a|b` list; see [`IfaceSpec`]) picks on this host and its
/// address. Errors name `flag`, this host, the SPEC and the interfaces that have addresses.
pub fn resolve(spec: &str, flag: &str) -> Result<(String, IpAddr)> {
    let parsed = IfaceSpec::parse(spec).map_err(|e| Error::usage(flag, e))?;
    let all = addresses();
    parsed.resolve(&all).ok_or_else(|| {
        let mut names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let what = if parsed.is_plain_name() {
            format!("interface '{spec}' does not exist or has no usable address")
        } else {
            format!("no interface matching '{spec}' has a usable address")
        };
        Error::usage(
            flag,
            format!(
                "{what} on host {}; interfaces with addresses there: {}",
                crate::net::hostname(),
                names.join(", ")
            ),
        )
    })
}

/// The address to bind for `--iface SPEC` on this host (see [`resolve`]).
pub fn address_of(spec: &str) -> Result<IpAddr> {
    resolve(spec, "--iface").map(|(_, ip)| ip)
}

/// Interfaces holding a default route in `/proc/net/route` (IPv4) and `/proc/net/ipv6_route` text.
pub fn default_route_ifaces(route_v4: &str, route_v6: &str) -> Vec<String> {
    let v4 = route_v4.lines().skip(1).filter_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // Destination and mask all zero; flags has RTF_UP (1).
        let up = f
            .get(3)
            .and_then(|x| u32::from_str_radix(x, 16).ok())
            .is_some_and(|x| x & 1 == 1);
        (f.len() > 7 && f[1] == "00000000" && f[7] == "00000000" && up).then(|| f[0].to_string())
    });
    let v6 = route_v6.lines().filter_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let zero = |s: &str| s.bytes().all(|b| b == b'0');
        // ::/0 with RTF_UP; the kernel also keeps unreachable ::/0 entries on lo, which lead nowhere.
        let up = f
            .get(8)
            .and_then(|x| u32::from_str_radix(x, 16).ok())
            .is_some_and(|x| x & 1 == 1);
        (f.len() > 9 && zero(f[0]) && f[1] == "00" && up && f[9] != "lo").then(|| f[9].to_string())
    });
    let mut out: Vec<String> = v4.chain(v6).collect();
    out.dedup();
    out
}

/// This host's interfaces as [`choose`] sees them; `reaches_rendezvous` is the local address of the
/// connection to the rendezvous, when there is one.
pub fn candidates(reaches_rendezvous: Option<IpAddr>) -> Vec<Candidate> {
    let all = addresses();
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let defaults = default_route_ifaces(&read("/proc/net/route"), &read("/proc/net/ipv6_route"));
    let net = Path::new("/sys/class/net");
    let mut names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let addrs: Vec<IpAddr> = all.iter().filter(|(n, _)| n == name).map(|(_, a)| *a).collect();
            let state = std::fs::read_to_string(net.join(name).join("operstate")).unwrap_or_default();
            Candidate {
                name: name.to_string(),
                kind: classify(name, net),
                reaches_rendezvous: reaches_rendezvous.is_some_and(|r| addrs.contains(&r)),
                addrs,
                down: state.trim() == "down",
                default_route: defaults.iter().any(|d| d == name),
            }
        })
        .collect()
}

/// The interface plain `tcp` binds to on this host (see [`super::choose`]); the error says what exists and
/// what to do.
pub fn default_choice(single_host: bool, reaches_rendezvous: Option<IpAddr>) -> Result<Choice> {
    choose(&candidates(reaches_rendezvous), single_host).map_err(|e| {
        Error::usage(
            "--transport",
            format!(
                "ranks run on several hosts, but on host {}: {e}; name the interface that connects the hosts with \
                 --transport tcp@IFACE or --iface IFACE (`collbench info` lists them)",
                crate::net::hostname()
            ),
        )
    })
}

/// The line rate of interface `name` in GB/s (1e9 bytes/s), as the driver reports its speed; `None` where
/// it does not know (virtual devices report -1 or nothing).
pub fn line_rate_gbs(name: &str) -> Option<f64> {
    let net = std::path::Path::new("/sys/class/net");
    // Virtual devices report a placeholder (veth says 10000 whatever carries it): no line rate to compare with.
    if is_virtual(&crate::net::classify::classify(name, net)) {
        return None;
    }
    let dir = net.join(name);
    let mbit: i64 = std::fs::read_to_string(dir.join("speed")).ok()?.trim().parse().ok()?;
    (mbit > 0).then(|| mbit as f64 * 1e6 / 8.0 / 1e9)
}

/// Kinds whose reported speed is not a wire's.
fn is_virtual(kind: &crate::net::classify::IfaceKind) -> bool {
    use crate::net::classify::IfaceKind as K;
    matches!(
        kind,
        K::Loopback | K::Vxlan | K::Geneve | K::WireGuard | K::Veth | K::Bridge | K::Tun | K::Cni(_)
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn virtual_devices_have_no_line_rate() {
        use crate::net::classify::IfaceKind as K;
        for k in [K::Veth, K::Vxlan, K::Bridge, K::Loopback, K::Cni("cali".into())] {
            assert!(super::is_virtual(&k), "{k:?}");
        }
        for k in [K::Ethernet, K::IpoIb, K::Bond, K::Vlan] {
            assert!(!super::is_virtual(&k), "{k:?}");
        }
    }

    use super::*;

    #[test]
    fn loopback_is_found_both_ways() {
        let lo = address_of("lo").expect("every Linux host has lo");
        assert!(lo.is_loopback());
        assert_eq!(resolve("nosuch|l?", "--transport").unwrap(), ("lo".to_string(), lo));
    }

    #[test]
    fn unknown_interfaces_list_the_real_ones() {
        let e = address_of("nosuch0").unwrap_err().to_string();
        assert!(
            e.contains("--iface") && e.contains("nosuch0") && e.contains("lo") && e.contains("host "),
            "{e}"
        );
        let e = resolve("nosuch*", "--transport").unwrap_err().to_string();
        assert!(
            e.contains("--transport") && e.contains("no interface matching 'nosuch*'"),
            "{e}"
        );
        let e = resolve("a||b", "--iface").unwrap_err().to_string();
        assert!(e.contains("--iface") && e.contains("empty alternative"), "{e}");
    }

    #[test]
    fn default_routes_are_read_from_both_tables() {
        let v4 = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                  eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
                  docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n";
        let v6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  fd000000000000000000000000000001 00000400 00000002 00000000 00000003     ens5\n\
                  00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n\
                  fd000000000000000000000000000000 40 00000000000000000000000000000000 00 \
                  00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n";
        assert_eq!(default_route_ifaces(v4, v6), ["eth0", "ens5"]);
        assert!(default_route_ifaces("", "").is_empty());
    }

    #[test]
    fn this_host_is_described_with_loopback() {
        let lo = "127.0.0.1".parse().unwrap();
        let cands = candidates(Some(lo));
        let l = cands.iter().find(|c| c.name == "lo").expect("lo is listed");
        assert!(l.reaches_rendezvous && !l.down);
        assert_eq!(default_choice(true, None).unwrap().addr, lo);
    }
}
