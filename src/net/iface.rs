//! Network interfaces and their addresses.

use std::net::IpAddr;

use crate::error::{Error, Result};

/// Every (interface, address) pair of this host.
pub fn addresses() -> Vec<(String, IpAddr)> {
    if_addrs::get_if_addrs()
        .map(|v| v.into_iter().map(|i| (i.name.clone(), i.ip())).collect())
        .unwrap_or_default()
}

/// The address to bind on interface `name`: its first IPv4 address, else its first IPv6 one.
pub fn address_of(name: &str) -> Result<IpAddr> {
    let all = addresses();
    let mine: Vec<IpAddr> = all.iter().filter(|(n, _)| n == name).map(|(_, a)| *a).collect();
    mine.iter()
        .find(|a| a.is_ipv4())
        .or_else(|| mine.first())
        .copied()
        .ok_or_else(|| {
            let mut names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            Error::usage(
                "--iface",
                format!(
                    "interface '{name}' does not exist or has no address on host {}; interfaces with addresses: {}",
                    crate::world::hostname(),
                    names.join(", ")
                ),
            )
        })
}

/// Interfaces never picked by default for traffic between hosts: container bridges and their veth ends.
const NOT_BY_DEFAULT: [&str; 5] = ["docker", "virbr", "br-", "veth", "cni"];

/// The interface of the default route (`/proc/net/route`), if there is one.
fn default_route_iface() -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/route").ok()?;
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[1] == "00000000")
        .map(|f| f[0].to_string())
}

/// The interface for traffic between hosts when none is given: the default route's, else the first by name
/// that is not loopback or a container bridge; with its address.
pub fn default_iface() -> Result<(IpAddr, String)> {
    if let Some(name) = default_route_iface() {
        if let Ok(ip) = address_of(&name) {
            return Ok((ip, name));
        }
    }
    let mut all: Vec<(String, IpAddr)> = addresses()
        .into_iter()
        .filter(|(n, a)| !a.is_loopback() && a.is_ipv4() && !NOT_BY_DEFAULT.iter().any(|p| n.starts_with(p)))
        .collect();
    all.sort();
    all.into_iter().next().map(|(n, a)| (a, n)).ok_or_else(|| {
        Error::usage(
            "--iface",
            format!(
                "host {} has no default route and no non-loopback IPv4 interface to reach other hosts; name one \
                 with --iface",
                crate::world::hostname()
            ),
        )
    })
}

/// The line rate of interface `name` in GB/s (1e9 bytes/s), as the driver reports its speed; `None` where
/// it does not know (virtual devices report -1 or nothing).
pub fn line_rate_gbs(name: &str) -> Option<f64> {
    let mbit: i64 = std::fs::read_to_string(format!("/sys/class/net/{name}/speed"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (mbit > 0).then(|| mbit as f64 * 1e6 / 8.0 / 1e9)
}

/// The interface that holds `ip`, if any.
pub fn name_of(ip: IpAddr) -> Option<String> {
    addresses().into_iter().find(|(_, a)| *a == ip).map(|(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_found_both_ways() {
        let lo = address_of("lo").expect("every Linux host has lo");
        assert!(lo.is_loopback());
        assert_eq!(name_of(lo).as_deref(), Some("lo"));
    }

    #[test]
    fn unknown_interfaces_list_the_real_ones() {
        let e = address_of("nosuch0").unwrap_err().to_string();
        assert!(
            e.contains("--iface") && e.contains("nosuch0") && e.contains("lo"),
            "{e}"
        );
    }
}
