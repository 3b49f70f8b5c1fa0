//! Interface specifications (`tcp@SPEC`, `--iface SPEC`): a name (`eth0`), a glob (`en*`, `ib?`) or a
//! `|`-separated list of them tried in order (`ib0|eth0|en*`). Interface names differ between hosts, so each
//! host binds to the first interface that matches and has a usable address; the SPEC itself, the same text on
//! every host, is what ranks compare and what labels the path.

use std::fmt;
use std::net::IpAddr;

/// A parsed interface specification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfaceSpec {
    /// Names or globs, in the order they are tried.
    alternatives: Vec<String>,
}

impl IfaceSpec {
    /// Parses `spec`; the error says what is wrong with it (the caller names the flag).
    pub fn parse(spec: &str) -> Result<IfaceSpec, String> {
        if spec.trim().is_empty() {
            return Err("the interface is empty; give a name, a glob (en*) or a list (ib0|eth0)".into());
        }
        let mut alternatives = Vec::new();
        for alt in spec.split('|') {
            let alt = alt.trim();
            if alt.is_empty() {
                return Err(format!(
                    "'{spec}' has an empty alternative; separate interface names or globs with single '|'"
                ));
            }
            if let Some(c) = alt.chars().find(|c| c.is_whitespace() || matches!(c, '/' | ',')) {
                return Err(format!(
                    "'{alt}' in '{spec}' holds {c:?}, which no interface name has; give a name, a glob (en*) or a \
                     list (ib0|eth0)"
                ));
            }
            alternatives.push(alt.to_string());
        }
        Ok(IfaceSpec { alternatives })
    }

    /// Whether this is one plain name (no glob, no list).
    pub fn is_plain_name(&self) -> bool {
        self.alternatives.len() == 1 && !self.alternatives[0].contains(['*', '?'])
    }

    /// The first interface, trying the alternatives in order (interfaces by name within one glob), that has a
    /// usable address in `addrs` ((interface, address) pairs); with the address to bind (see [`bind_address`]).
    pub fn resolve(&self, addrs: &[(String, IpAddr)]) -> Option<(String, IpAddr)> {
        let mut names: Vec<&str> = addrs.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        self.alternatives.iter().find_map(|alt| {
            names
                .iter()
                .filter(|n| glob_match(alt, n))
                .find_map(|n| bind_address(n, addrs).map(|ip| (n.to_string(), ip)))
        })
    }
}

impl fmt::Display for IfaceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.alternatives.join("|"))
    }
}

/// The address to bind on interface `name`: its first IPv4 address, else its first IPv6 one that is not
/// link-local (a link-local address needs a scope that peers on other hosts cannot know).
pub fn bind_address(name: &str, addrs: &[(String, IpAddr)]) -> Option<IpAddr> {
    let mine = || addrs.iter().filter(|(n, _)| n == name).map(|(_, a)| *a);
    mine()
        .find(IpAddr::is_ipv4)
        .or_else(|| mine().find(|a| !is_link_local_v6(a)))
}

fn is_link_local_v6(a: &IpAddr) -> bool {
    matches!(a, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80)
}

/// Shell-style matching of a whole name: `*` matches any run of characters (also none), `?` exactly one;
/// everything else matches itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was and the name position it has been made to cover up to: on a mismatch, let that
    // star swallow one more character and retry. Linear backtracking suffices for `*` and `?` alone.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == n[ni])) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            star = Some((sp, sn + 1));
            pi = sp + 1;
            ni = sn + 1;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        assert!(glob_match("eth0", "eth0"));
        assert!(!glob_match("eth0", "eth01"));
        assert!(!glob_match("eth", "eth0"));
        assert!(glob_match("en*", "enp3s0f0"));
        assert!(glob_match("en*", "en"));
        assert!(!glob_match("en*", "eth0"));
        assert!(glob_match("ib?", "ib0"));
        assert!(!glob_match("ib?", "ib10"));
        assert!(!glob_match("ib?", "ib"));
        assert!(glob_match("*", ""));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("*.calico", "vxlan.calico"));
        assert!(glob_match("e*0", "eth0"));
        assert!(!glob_match("e*0", "eth1"));
        // A star must backtrack past an early partial match.
        assert!(glob_match("*ab*ab", "xabyabab"));
        assert!(glob_match("a*b?c", "aXXbbYc"));
        assert!(!glob_match("a*b?c", "aXXbc"));
        assert!(glob_match("**x", "x"));
        assert!(!glob_match("", "x"));
        assert!(glob_match("", ""));
    }

    fn addrs(list: &[(&str, &str)]) -> Vec<(String, IpAddr)> {
        list.iter().map(|(n, a)| (n.to_string(), a.parse().unwrap())).collect()
    }

    #[test]
    fn alternatives_are_tried_in_order_and_names_within_a_glob() {
        let a = addrs(&[
            ("lo", "127.0.0.1"),
            ("eth0", "10.0.0.2"),
            ("ens5", "10.1.0.2"),
            ("enp1s0", "10.2.0.2"),
            ("ib0", "fe80::1"),
        ]);
        let pick = |s: &str| {
            IfaceSpec::parse(s)
                .unwrap()
                .resolve(&a)
                .map(|(n, ip)| format!("{n} {ip}"))
        };
        assert_eq!(pick("eth0").as_deref(), Some("eth0 10.0.0.2"));
        assert_eq!(pick("en*").as_deref(), Some("enp1s0 10.2.0.2"));
        assert_eq!(pick("nosuch|ens5|eth0").as_deref(), Some("ens5 10.1.0.2"));
        // ib0 has only a link-local address, which is no use to other hosts.
        assert_eq!(pick("ib?|eth*").as_deref(), Some("eth0 10.0.0.2"));
        assert_eq!(pick("nosuch*"), None);
        assert_eq!(pick("l?"), Some("lo 127.0.0.1".into()));
    }

    #[test]
    fn ipv4_is_preferred_then_global_ipv6() {
        let a = addrs(&[("eth0", "fe80::2"), ("eth0", "2001:db8::2"), ("eth0", "10.0.0.2")]);
        assert_eq!(bind_address("eth0", &a), Some("10.0.0.2".parse().unwrap()));
        let a = addrs(&[("eth0", "fe80::2"), ("eth0", "2001:db8::2")]);
        assert_eq!(bind_address("eth0", &a), Some("2001:db8::2".parse().unwrap()));
        assert_eq!(
            bind_address("lo", &addrs(&[("lo", "::1")])),
            Some("::1".parse().unwrap())
        );
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        assert!(IfaceSpec::parse("").unwrap_err().contains("empty"));
        assert!(IfaceSpec::parse("ib0||eth0").unwrap_err().contains("empty alternative"));
        assert!(IfaceSpec::parse("eth0|").unwrap_err().contains("empty alternative"));
        assert!(IfaceSpec::parse("eth 0").unwrap_err().contains("'eth 0'"));
        let s = IfaceSpec::parse(" ib0 | en* ").unwrap();
        assert_eq!(s.to_string(), "ib0|en*");
        assert!(!s.is_plain_name());
        assert!(IfaceSpec::parse("eth0").unwrap().is_plain_name());
    }
}
