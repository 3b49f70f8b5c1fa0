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
