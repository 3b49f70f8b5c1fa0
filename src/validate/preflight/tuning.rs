//! How a host's kernel is tuned for the path beyond its interface's own settings: the TCP buffer limits and
//! what the ranks' sockets actually got, packet steering (RPS) and IRQ affinity of the data NIC, its ring
//! sizes, the connection-tracking table's size, the firewall's rule count and the kernel release. Read from
//! /proc and /sys (and one ethtool ioctl), none of it needing root, except the rule count: netfilter gives
//! its rules only to CAP_NET_ADMIN, so it is read where the rank runs as root and unknown elsewhere. Compared
//! across hosts by the configuration check.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// A host's tuning for one path, as read on that host (`None`: not readable there).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tuning {
    /// `net.ipv4.tcp_rmem` (minimum, default, maximum receive buffer of a TCP socket, bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_rmem: Option<String>,
    /// `net.ipv4.tcp_wmem` (the same for sending).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_wmem: Option<String>,
    /// `net.core.rmem_max` and `wmem_max`: the most a socket may ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rmem_max: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wmem_max: Option<u64>,
    /// `net.ipv4.tcp_window_scaling`: off caps every connection's window at 64 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_scaling: Option<bool>,
    /// The receive and send buffers the ranks' data sockets had after the measurement (SO_RCVBUF, SO_SNDBUF;
    /// autotuning grows them up to the maxima above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf: Option<u64>,
    /// Whether any receive queue of the interface steers packets to other CPUs (`rps_cpus` not empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps: Option<bool>,
    /// How many CPUs the interface's interrupts may run on (their affinity, all queues together); `None`
    /// for an interface without interrupts of its own (veth, an overlay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_cpus: Option<usize>,
    /// The interface's ring sizes, `rx N, tx N` (ethtool's current settings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rings: Option<String>,
    /// Entries in the connection-tracking table of the host's network namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conntrack: Option<u64>,
    /// Rules in the network namespace's iptables and ip6tables tables (`-A` lines of iptables-save, which
    /// reads nftables-backed tables too); `None` without the tools or the right to read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall_rules: Option<u64>,
    /// The kernel release (`uname -r`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
}

/// The names of [`Tuning::settings`] that are TCP buffer settings (the cause "TCP buffers").
pub const BUFFER_SETTINGS: [&str; 5] = ["tcp_rmem", "tcp_wmem", "rmem_max", "wmem_max", "TCP window scaling"];

/// A host's connection-tracking table is far above the others' from this many entries...
pub const CONNTRACK_LEAST: u64 = 10_000;
/// ...when also this many times their median.
pub const CONNTRACK_FACTOR: f64 = 10.0;
/// A host's firewall stands out from this many rules (each packet may walk them: kube-proxy's iptables mode
/// on a node with many services)...
pub const RULES_LEAST: u64 = 1_000;
/// ...when also this many times the others' median.
pub const RULES_FACTOR: f64 = 10.0;

impl Tuning {
    /// The settings that should be the same on every host, as (name, value); the sockets' buffers and the
    /// connection-tracking table are judged apart, being counts that move with the traffic.
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "?".into());
        let on = |v: Option<bool>| opt(v.map(|b| if b { "on" } else { "off" }.to_string()));
        vec![
            ("tcp_rmem", opt(self.tcp_rmem.clone())),
            ("tcp_wmem", opt(self.tcp_wmem.clone())),
            ("rmem_max", opt(self.rmem_max.map(|v| v.to_string()))),
            ("wmem_max", opt(self.wmem_max.map(|v| v.to_string()))),
            ("TCP window scaling", on(self.window_scaling)),
            ("RPS", on(self.rps)),
            ("IRQ CPUs", opt(self.irq_cpus.map(|v| v.to_string()))),
            ("rings", opt(self.rings.clone())),
            ("kernel", opt(self.kernel.clone())),
        ]
    }

    /// The sockets' buffers and the connection-tracking table, for a line (empty when none is known).
    pub fn counts(&self) -> String {
        let mut v = Vec::new();
        if let (Some(r), Some(s)) = (self.rcvbuf, self.sndbuf) {
            v.push(format!(
                "the ranks' sockets got {} to receive, {} to send",
                crate::sizes::format_size(r),
                crate::sizes::format_size(s)
            ));
        }
        if let Some(c) = self.conntrack {
            v.push(format!("{c} conntrack entries"));
        }
        if let Some(r) = self.firewall_rules {
            v.push(format!("{r} firewall rules"));
        }
        v.join(", ")
    }
}

/// Reads a host's tuning for `iface` under `proc` and `sys` (`/proc`, `/sys` on a live host); the sockets'
/// buffers are the caller's to fill.
pub fn read(proc: &Path, sys: &Path, iface: &str) -> Tuning {
    let text = |p: &Path| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    let num = |p: &Path| text(p).and_then(|s| s.parse::<u64>().ok());
    let sysctl = proc.join("sys");
    let net = sys.join("class/net").join(iface);
    Tuning {
        tcp_rmem: text(&sysctl.join("net/ipv4/tcp_rmem")),
        tcp_wmem: text(&sysctl.join("net/ipv4/tcp_wmem")),
        rmem_max: num(&sysctl.join("net/core/rmem_max")),
        wmem_max: num(&sysctl.join("net/core/wmem_max")),
        window_scaling: num(&sysctl.join("net/ipv4/tcp_window_scaling")).map(|v| v != 0),
        rcvbuf: None,
        sndbuf: None,
        rps: rps(&net),
        irq_cpus: irq_cpus(proc, iface),
        rings: None,
        conntrack: num(&sysctl.join("net/netfilter/nf_conntrack_count")),
        firewall_rules: None,
        kernel: text(&sysctl.join("kernel/osrelease")),
    }
}

/// Whether any receive queue of the interface at `net` (`/sys/class/net/IFACE`) steers packets (a mask not
/// all zero); `None` without queues to read.
fn rps(net: &Path) -> Option<bool> {
    let mut any = None;
    for q in std::fs::read_dir(net.join("queues")).ok()?.flatten() {
        if !q.file_name().to_string_lossy().starts_with("rx-") {
            continue;
        }
        if let Ok(mask) = std::fs::read_to_string(q.path().join("rps_cpus")) {
            let on = mask.trim().chars().any(|c| c.is_ascii_hexdigit() && c != '0');
            any = Some(any.unwrap_or(false) || on);
        }
    }
    any
}

/// The CPUs the interrupts named after `iface` in `/proc/interrupts` may run on, counted once each; `None`
/// where the interface has no interrupts of its own.
fn irq_cpus(proc: &Path, iface: &str) -> Option<usize> {
    let table = std::fs::read_to_string(proc.join("interrupts")).ok()?;
    let mut cpus: Vec<usize> = Vec::new();
    let mut found = false;
    for line in table.lines() {
        let Some((irq, rest)) = line.trim_start().split_once(':') else {
            continue;
        };
        let named = rest
            .split_whitespace()
            .last()
            .is_some_and(|n| n == iface || n.starts_with(&format!("{iface}-")));
        if !named || irq.parse::<u32>().is_err() {
            continue;
        }
        found = true;
        let Ok(list) = std::fs::read_to_string(proc.join("irq").join(irq).join("smp_affinity_list")) else {
            continue;
        };
        for c in cpu_list(list.trim()) {
            if !cpus.contains(&c) {
                cpus.push(c);
            }
        }
    }
    found.then_some(cpus.len())
}

/// The CPUs of a list such as `0-3,8,10-11`.
fn cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b.min(a + 4096));
                }
            }
            None => out.extend(part.parse::<usize>().ok()),
        }
    }
    out
}

/// The rules in the firewall tables that `save` prints (`save("iptables-save")`, then `ip6tables-save`: their
/// output, `None` where one cannot run or may not read the rules); `None` when neither could.
pub fn firewall_rules(save: &dyn Fn(&str) -> Option<String>) -> Option<u64> {
    let counts: Vec<u64> = ["iptables-save", "ip6tables-save"]
        .into_iter()
        .filter_map(save)
        .map(|text| text.lines().filter(|l| l.starts_with("-A ")).count() as u64)
        .collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

/// `program`'s standard output on this host, `None` when it is missing or fails (without root it may not read
/// the rules). Empty output from a success is no table loaded: no rule.
pub fn saved(program: &str) -> Option<String> {
    let out = std::process::Command::new(program)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The hosts whose count `of` is far above the others' (`least` and `factor` times their median): (host
/// index, its count, the others' median).
fn outliers(tunings: &[&Tuning], of: fn(&Tuning) -> Option<u64>, least: u64, factor: f64) -> Vec<(usize, u64, u64)> {
    let mut out = Vec::new();
    for (i, t) in tunings.iter().enumerate() {
        let Some(mine) = of(t) else { continue };
        let mut others: Vec<u64> = tunings
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .filter_map(|(_, o)| of(o))
            .collect();
        if others.is_empty() {
            continue;
        }
        others.sort_unstable();
        let median = others[others.len() / 2];
        if mine >= least && mine as f64 >= factor * median.max(1) as f64 {
            out.push((i, mine, median));
        }
    }
    out
}

/// The hosts whose connection-tracking table is far above the others' ([`CONNTRACK_LEAST`] entries and
/// [`CONNTRACK_FACTOR`] times their median): (host index, its entries, the others' median).
pub fn conntrack_outliers(tunings: &[&Tuning]) -> Vec<(usize, u64, u64)> {
    outliers(tunings, |t| t.conntrack, CONNTRACK_LEAST, CONNTRACK_FACTOR)
}

/// The hosts whose firewall has far more rules than the others' ([`RULES_LEAST`] and [`RULES_FACTOR`] times
/// their median): (host index, its rules, the others' median).
pub fn rules_outliers(tunings: &[&Tuning]) -> Vec<(usize, u64, u64)> {
    outliers(tunings, |t| t.firewall_rules, RULES_LEAST, RULES_FACTOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_tuning_is_read_from_proc_and_sys() {
        let dir = tempfile::tempdir().unwrap();
        let (proc, sys) = (dir.path().join("proc"), dir.path().join("sys"));
        let put = |p: &Path, s: &str| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        put(&proc.join("sys/net/ipv4/tcp_rmem"), "4096\t131072\t6291456\n");
        put(&proc.join("sys/net/ipv4/tcp_wmem"), "4096\t4096\t4096\n");
        put(&proc.join("sys/net/core/rmem_max"), "212992\n");
        put(&proc.join("sys/net/ipv4/tcp_window_scaling"), "0\n");
        put(&proc.join("sys/kernel/osrelease"), "6.1.0-18-amd64\n");
        put(
            &proc.join("interrupts"),
            "           CPU0       CPU1\n 40:  1  2  PCI-MSI  eth0-TxRx-0\n 41:  1  2  PCI-MSI  eth0-TxRx-1\n \
             42:  1  2  PCI-MSI  eth10\nNMI:  0  0  Non-maskable interrupts\n",
        );
        put(&proc.join("irq/40/smp_affinity_list"), "0-1\n");
        put(&proc.join("irq/41/smp_affinity_list"), "1,3\n");
        put(&sys.join("class/net/eth0/queues/rx-0/rps_cpus"), "00000000\n");
        put(&sys.join("class/net/eth0/queues/rx-1/rps_cpus"), "00000000,0000000f\n");
        put(&sys.join("class/net/eth0/queues/tx-0/xps_cpus"), "1\n");
        let t = read(&proc, &sys, "eth0");
        assert_eq!(t.tcp_rmem.as_deref(), Some("4096 131072 6291456"));
        assert_eq!(t.tcp_wmem.as_deref(), Some("4096 4096 4096"));
        assert_eq!((t.rmem_max, t.wmem_max), (Some(212_992), None));
        assert_eq!(t.window_scaling, Some(false));
        assert_eq!(t.kernel.as_deref(), Some("6.1.0-18-amd64"));
        assert_eq!((t.rps, t.irq_cpus), (Some(true), Some(3)));
        assert_eq!(t.conntrack, None);
        // An interface without interrupts or queues: unknown, not off.
        let v = read(&proc, &sys, "veth9");
        assert_eq!((v.rps, v.irq_cpus), (None, None));
        put(&sys.join("class/net/eth0/queues/rx-1/rps_cpus"), "0\n");
        assert_eq!(read(&proc, &sys, "eth0").rps, Some(false));
    }

    #[test]
    fn a_conntrack_table_far_above_the_others_stands_out() {
        let t = |c: u64| Tuning {
            conntrack: Some(c),
            ..Default::default()
        };
        let v = [t(12), t(30), t(250_000), t(8)];
        let refs: Vec<&Tuning> = v.iter().collect();
        assert_eq!(conntrack_outliers(&refs), [(2, 250_000, 12)]);
        // Busy hosts alike: nobody.
        let v = [t(20_000), t(30_000), t(25_000)];
        let refs: Vec<&Tuning> = v.iter().collect();
        assert!(conntrack_outliers(&refs).is_empty());
    }

    #[test]
    fn firewall_rules_are_counted_from_both_tables_and_far_above_stands_out() {
        let v4 = "# Generated by iptables-nft-save\n*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -j ACCEPT\n\
                  -A FORWARD -j DROP\nCOMMIT\n*nat\n-A POSTROUTING -j MASQUERADE\nCOMMIT\n";
        let v6 = "*filter\n-A INPUT -j ACCEPT\nCOMMIT\n";
        let both = |p: &str| match p {
            "iptables-save" => Some(v4.to_string()),
            "ip6tables-save" => Some(v6.to_string()),
            _ => None,
        };
        assert_eq!(firewall_rules(&both), Some(4));
        assert_eq!(
            firewall_rules(&|p: &str| both(p).filter(|_| p == "iptables-save")),
            Some(3)
        );
        // Neither tool could read the rules (no root, not installed): unknown, not zero.
        assert_eq!(firewall_rules(&|_: &str| None), None);
        // Read, and no table loaded: no rule.
        assert_eq!(firewall_rules(&|_: &str| Some(String::new())), Some(0));
        let t = |r: u64| Tuning {
            firewall_rules: Some(r),
            ..Default::default()
        };
        let v = [t(40), t(35), t(42), t(24_000)];
        let refs: Vec<&Tuning> = v.iter().collect();
        assert_eq!(rules_outliers(&refs), [(3, 24_000, 40)]);
        // Many rules everywhere (every node a kube-proxy node): nobody.
        let v = [t(20_000), t(24_000), t(22_000)];
        let refs: Vec<&Tuning> = v.iter().collect();
        assert!(rules_outliers(&refs).is_empty());
    }
}
