//! What each host looked like while a part of the preflight measured: its CPUs (busy, and its ranks'
//! cgroup throttled), its TCP retransmissions (kernel counters of its network namespace), and the
//! configuration of the interface the path uses (MTU, speed, offloads, congestion control, the underlay under
//! an overlay). Every rank samples before and after; rank 0 gathers one entry per host, which findings carry
//! beside their verdict and the cause is read from.

use serde::{Deserialize, Serialize};

use crate::bench::usage;
use crate::error::{Error, Result};
use crate::net::carrier::Carriers;
use crate::net::classify::{encapsulation, IfaceKind};
use crate::net::inventory::HostInventory;
use crate::transport::control;
use crate::transport::Transport;

/// TCP counters of one network namespace (`/proc/net/snmp`'s `Tcp:` and `/proc/net/netstat`'s `TcpExt:`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpCounters {
    /// Segments sent.
    pub out_segs: u64,
    /// Segments sent again: what loss costs the sender.
    pub retrans_segs: u64,
    /// Segments received with errors (bad checksums and the like).
    pub in_errs: u64,
    /// Retransmission timeouts: a lost packet nobody acknowledged in time.
    pub timeouts: u64,
    /// Segments received.
    #[serde(default)]
    pub in_segs: u64,
    /// Segments received out of order (after a gap): data lost on the way to this host. Its partners
    /// retransmit it, so this is where a host dropping what it receives shows.
    #[serde(default)]
    pub ofo: u64,
}

/// The value under `key` in the two-line table of `kind` (`Tcp:`, `TcpExt:`): a header line of names, then a
/// line of numbers, as /proc/net/snmp and /proc/net/netstat write them.
fn field(text: &str, kind: &str, key: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(kind));
    let names = lines.next()?;
    let values = lines.next()?;
    let at = names.split_whitespace().position(|n| n == key)?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// Parses the counters from the text of /proc/net/snmp and /proc/net/netstat; `None` without a `Tcp:` table.
pub fn parse_tcp(snmp: &str, netstat: &str) -> Option<TcpCounters> {
    Some(TcpCounters {
        out_segs: field(snmp, "Tcp:", "OutSegs")?,
        retrans_segs: field(snmp, "Tcp:", "RetransSegs")?,
        in_errs: field(snmp, "Tcp:", "InErrs").unwrap_or(0),
        timeouts: field(netstat, "TcpExt:", "TCPTimeouts").unwrap_or(0),
        in_segs: field(snmp, "Tcp:", "InSegs").unwrap_or(0),
        ofo: field(netstat, "TcpExt:", "TCPOFOQueue").unwrap_or(0),
    })
}

/// This network namespace's counters now.
fn tcp_now() -> Option<TcpCounters> {
    let snmp = std::fs::read_to_string("/proc/net/snmp").ok()?;
    let netstat = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    parse_tcp(&snmp, &netstat)
}

impl TcpCounters {
    /// What happened between `self` and `later`.
    pub fn since(&self, later: &TcpCounters) -> TcpCounters {
        TcpCounters {
            out_segs: later.out_segs.saturating_sub(self.out_segs),
            retrans_segs: later.retrans_segs.saturating_sub(self.retrans_segs),
            in_errs: later.in_errs.saturating_sub(self.in_errs),
            timeouts: later.timeouts.saturating_sub(self.timeouts),
            in_segs: later.in_segs.saturating_sub(self.in_segs),
            ofo: later.ofo.saturating_sub(self.ofo),
        }
    }

    /// Segments received out of order as a share of those received (0 when none were).
    pub fn ofo_share(&self) -> f64 {
        if self.in_segs == 0 {
            0.0
        } else {
            self.ofo as f64 / self.in_segs as f64
        }
    }

    /// How much this host loses: the larger of what it sent again and what reached it out of order.
    pub fn loss_share(&self) -> f64 {
        self.retrans_share().max(self.ofo_share())
    }

    /// Retransmitted segments as a share of those sent (0 when none were sent).
    pub fn retrans_share(&self) -> f64 {
        if self.out_segs == 0 {
            0.0
        } else {
            self.retrans_segs as f64 / self.out_segs as f64
        }
    }
}

/// How the path's interface is set up on one host.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PathConfig {
    pub iface: String,
    /// The interface's kind as `info` classifies it (`ethernet`, `veth`, `vxlan`, ...).
    pub kind: String,
    pub mtu: Option<u32>,
    /// Mbit/s as the driver reports it; `virtual` says it is a placeholder, not a wire's.
    pub speed_mbps: Option<u64>,
    pub speed_virtual: bool,
    /// Segmentation and receive offloads (TSO, GSO, GRO); `None` where the driver does not say.
    pub tso: Option<bool>,
    pub gso: Option<bool>,
    pub gro: Option<bool>,
    /// The congestion control new connections get (`--tcp-congestion`, else the host's default).
    pub congestion: Option<String>,
    /// For an overlay: the underlay it is carried over (the largest live wire interface) and its MTU.
    pub underlay: Option<String>,
    pub underlay_mtu: Option<u32>,
    /// The host's kernel tuning for the path: TCP buffers, packet steering, IRQs, rings, conntrack, release.
    #[serde(default)]
    pub tuning: super::tuning::Tuning,
}

impl PathConfig {
    /// The settings that should be the same on every host of a path, as (name, value) for comparing and
    /// showing.
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "?".into());
        let on = |v: Option<bool>| opt(v.map(|b| if b { "on" } else { "off" }.to_string()));
        vec![
            ("MTU", opt(self.mtu.map(|m| m.to_string()))),
            (
                "speed",
                opt(self
                    .speed_mbps
                    .map(|s| format!("{s} Mb/s{}", if self.speed_virtual { " (virtual)" } else { "" }))),
            ),
            ("TSO", on(self.tso)),
            ("GSO", on(self.gso)),
            ("GRO", on(self.gro)),
            ("congestion control", opt(self.congestion.clone())),
            ("underlay MTU", opt(self.underlay_mtu.map(|m| m.to_string()))),
        ]
        .into_iter()
        .chain(self.tuning.settings())
        .collect()
    }

    /// One line for people: `eth0 (veth): MTU 1500, speed 10000 Mb/s (virtual), TSO on, ...`.
    pub fn line(&self) -> String {
        // The interface's own settings as they are, unknown ones too; of the host's tuning what was read.
        let own = self.settings().len() - self.tuning.settings().len();
        let s: Vec<String> = self
            .settings()
            .into_iter()
            .enumerate()
            .filter(|(i, (_, v))| *i < own || v != "?")
            .map(|(_, (k, v))| format!("{k} {v}"))
            .collect();
        let under = self.underlay.as_ref().map(|u| format!(" over {u}")).unwrap_or_default();
        let counts = self.tuning.counts();
        let counts = if counts.is_empty() {
            counts
        } else {
            format!("; {counts}")
        };
        format!("{} ({}{under}): {}{counts}", self.iface, self.kind, s.join(", "))
    }
}

/// The path configuration of `iface` in `inv`, with the offloads and congestion control read from the host.
pub fn path_config(inv: &HostInventory, iface: &str, congestion: Option<&str>) -> PathConfig {
    let me = inv.ifaces.iter().find(|i| i.name == iface);
    let kind = me.map(|i| i.kind.clone());
    let virt = kind.as_ref().is_some_and(|k| {
        matches!(
            k,
            IfaceKind::Loopback
                | IfaceKind::Vxlan
                | IfaceKind::Geneve
                | IfaceKind::WireGuard
                | IfaceKind::Veth
                | IfaceKind::Bridge
                | IfaceKind::Tun
                | IfaceKind::Cni(_)
        )
    });
    // An overlay rides on its lower device where the kernel names it, else on the host's largest live wire
    // interface, as `info` judges its MTU.
    let lower = me
        .and_then(|i| i.lower.as_deref())
        .and_then(|l| inv.ifaces.iter().find(|i| i.name == l));
    let under = kind.as_ref().and_then(|k| encapsulation(iface, k)).and_then(|_| {
        lower.or_else(|| {
            inv.ifaces
                .iter()
                .filter(|i| {
                    matches!(
                        i.kind,
                        IfaceKind::Ethernet | IfaceKind::Veth | IfaceKind::IpoIb | IfaceKind::Bond | IfaceKind::Vlan
                    ) && i.oper_state.as_deref() != Some("down")
                        && i.name != iface
                })
                .max_by_key(|i| i.mtu)
        })
    });
    let off = |cmd| offload(iface, cmd);
    PathConfig {
        iface: iface.to_string(),
        kind: kind.as_ref().map_or_else(|| "unknown".into(), ToString::to_string),
        mtu: me.and_then(|i| i.mtu),
        speed_mbps: me.and_then(|i| i.speed_mbps),
        speed_virtual: virt,
        tso: off(ETHTOOL_GTSO),
        gso: off(ETHTOOL_GGSO),
        gro: off(ETHTOOL_GGRO),
        congestion: congestion.map(String::from).or_else(|| {
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
                .ok()
                .map(|s| s.trim().to_string())
        }),
        underlay: under.map(|u| u.name.clone()),
        underlay_mtu: under.and_then(|u| u.mtu),
        tuning: super::tuning::Tuning {
            rings: rings(iface),
            firewall_rules: super::tuning::firewall_rules(&super::tuning::saved),
            ..super::tuning::read(std::path::Path::new("/proc"), std::path::Path::new("/sys"), iface)
        },
    }
}

const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_GGRO: u32 = 0x2b;

/// `struct ethtool_value` of linux/ethtool.h.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

const ETHTOOL_GRINGPARAM: u32 = 0x10;

/// `struct ethtool_ringparam` of linux/ethtool.h.
#[repr(C)]
#[derive(Default)]
struct EthtoolRingparam {
    cmd: u32,
    rx_max_pending: u32,
    rx_mini_max_pending: u32,
    rx_jumbo_max_pending: u32,
    tx_max_pending: u32,
    rx_pending: u32,
    rx_mini_pending: u32,
    rx_jumbo_pending: u32,
    tx_pending: u32,
}

/// Marks the ethtool structures [`ethtool`] may pass: plain `repr(C)` data led by the command word.
trait EthtoolData {}
impl EthtoolData for EthtoolValue {}
impl EthtoolData for EthtoolRingparam {}

/// One legacy ethtool ioctl on `iface` with `data` (its command set); whether the driver answered.
fn ethtool<T: EthtoolData>(iface: &str, data: &mut T) -> bool {
    let name = iface.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return false;
    }
    // SAFETY: a datagram socket only to carry the ioctl; closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return false;
    }
    // SAFETY: ifreq is plain data, valid all-zero.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    req.ifr_ifru.ifru_data = (data as *mut T).cast();
    // SAFETY: SIOCETHTOOL reads the name and the command, and writes at most the command's structure, which
    // `data` is (EthtoolData) and which outlives the call; fd is ours.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCETHTOOL as _, &mut req) };
    // SAFETY: closing the socket opened above, once.
    unsafe { libc::close(fd) };
    rc == 0
}

/// One offload's state by the legacy ethtool ioctl; `None` where the interface or driver does not answer.
fn offload(iface: &str, cmd: u32) -> Option<bool> {
    let mut value = EthtoolValue { cmd, data: 0 };
    ethtool(iface, &mut value).then_some(value.data != 0)
}

/// The interface's current ring sizes, `rx N, tx N`; `None` where the driver does not say.
fn rings(iface: &str) -> Option<String> {
    let mut r = EthtoolRingparam {
        cmd: ETHTOOL_GRINGPARAM,
        ..Default::default()
    };
    ethtool(iface, &mut r).then(|| format!("rx {}, tx {}", r.rx_pending, r.tx_pending))
}

/// One host during one measurement.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostEvidence {
    pub host: String,
    /// Seconds the measurement took on this host.
    pub wall_s: f64,
    /// How busy the host's CPUs were, by every process (%).
    pub busy_pct: Option<f64>,
    /// CPU seconds collbench's ranks on this host used.
    pub cpu_s: f64,
    /// Time the ranks' cgroup was held back by its CPU quota, and in how many periods.
    pub throttled_s: Option<f64>,
    pub throttled_periods: Option<u64>,
    /// Seconds the most delayed thread of the host's most starved rank waited for a CPU, ready to run (the
    /// kernel's scheduler statistics of the rank itself: no cgroup needs to be visible).
    #[serde(default)]
    pub waited_s: Option<f64>,
    /// The CPU quota of the ranks' cgroup in cores (the tightest of the host's ranks), where one is set and the
    /// cgroup was found (`crate::cgroup`, through the launcher's view behind `ip netns exec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_cores: Option<f64>,
    /// The host's TCP counters over the measurement.
    pub tcp: Option<TcpCounters>,
    /// Times the path's interface lost its carrier during the measurement (`None`: not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_downs: Option<u64>,
    pub config: PathConfig,
    /// For a GPU check: the host's GPUs concerned as NVML read them (the rest of this entry is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<crate::net::gpu_health::Gpus>,
}

impl HostEvidence {
    /// The share of the measurement the ranks were throttled (0 when not known).
    pub fn throttled_share(&self) -> f64 {
        match self.throttled_s {
            Some(t) if self.wall_s > 0.0 => t / self.wall_s,
            _ => 0.0,
        }
    }

    /// The share of the measurement the host's most starved rank waited for a CPU (`None` when not known).
    pub fn waited_share(&self) -> Option<f64> {
        self.waited_s.filter(|_| self.wall_s > 0.0).map(|w| w / self.wall_s)
    }

    /// One line for people: CPU, TCP, configuration (or, for a GPU check, the GPUs).
    pub fn line(&self) -> String {
        if let Some(g) = &self.gpu {
            return format!("{}: {}", self.host, g.line());
        }
        let busy = self.busy_pct.map_or("?".into(), |b| format!("{b:.0}%"));
        let throttled = match (self.throttled_s, self.throttled_periods) {
            (Some(s), Some(p)) => format!("throttled {s:.2} s of {:.2} s ({p} periods)", self.wall_s),
            _ => "throttling unknown".into(),
        };
        let throttled = match self.waited_s {
            Some(w) => format!("{throttled}, a rank waited {w:.2} s for a CPU"),
            None => throttled,
        };
        let throttled = match self.quota_cores {
            Some(q) => format!("CPU quota {} cores, {throttled}", crate::net::inventory::cores(q)),
            None => throttled,
        };
        let tcp = match &self.tcp {
            Some(t) => format!(
                "TCP {} of {} segments sent retransmitted ({:.2}%), {} of {} received out of order ({:.2}%), {} \
                 timeouts",
                t.retrans_segs,
                t.out_segs,
                100.0 * t.retrans_share(),
                t.ofo,
                t.in_segs,
                100.0 * t.ofo_share(),
                t.timeouts
            ),
            None => "TCP counters unknown".into(),
        };
        let tcp = match self.link_downs {
            Some(d) if d > 0 => format!("{tcp}; {} lost its carrier {d} time(s)", self.config.iface),
            _ => tcp,
        };
        format!(
            "{}: CPUs {busy} busy, {throttled}; {tcp}; {}",
            self.host,
            self.config.line()
        )
    }
}

/// The counters one rank read when a measurement began.
pub struct Started {
    cpu: usage::Sample,
    tcp: Option<TcpCounters>,
    carriers: Carriers,
}

/// Samples now, at the start of a measurement.
pub fn start() -> Started {
    Started {
        cpu: usage::Sample::now(),
        tcp: tcp_now(),
        carriers: Carriers::now(),
    }
}

impl Started {
    /// This rank's evidence from its start to now, with its path's configuration and its cgroup's CPU quota.
    pub fn finish(&self, host: &str, config: PathConfig, quota_cores: Option<f64>) -> HostEvidence {
        let u = self.cpu.usage_since(host, 0.0, 0.0);
        let tcp = match (self.tcp, tcp_now()) {
            (Some(a), Some(b)) => Some(a.since(&b)),
            _ => None,
        };
        let link_downs = self.carriers.downs_until(&Carriers::now(), &config.iface);
        HostEvidence {
            host: host.to_string(),
            wall_s: u.wall_s,
            busy_pct: u.host_busy_pct,
            cpu_s: u.cpu_s,
            throttled_s: u.throttled_s,
            throttled_periods: u.throttled_periods,
            waited_s: u.waited_s,
            quota_cores,
            tcp,
            link_downs,
            config,
            gpu: None,
        }
    }
}

/// Every rank's evidence on rank 0, one entry per host (its ranks' CPU time added up, the most throttled
/// rank's throttling, the first rank's counters: ranks of one host share its namespace); `None` elsewhere.
pub fn gather<T: Transport + ?Sized>(t: &mut T, mine: &HostEvidence) -> Result<Option<Vec<HostEvidence>>> {
    let bytes = serde_json::to_vec(mine).expect("evidence serialises");
    let Some(all) = control::gather(t, &bytes)? else {
        return Ok(None);
    };
    let mut per_rank = Vec::with_capacity(all.len());
    for (r, b) in all.iter().enumerate() {
        per_rank.push(serde_json::from_slice::<HostEvidence>(b).map_err(|e| {
            Error::peer(format!(
                "rank 0: rank {r} sent unreadable evidence ({e}); were all ranks started with the same collbench \
                 version?"
            ))
        })?);
    }
    Ok(Some(by_host(per_rank)))
}

/// One entry per host, in the order hosts first appear.
pub fn by_host(per_rank: Vec<HostEvidence>) -> Vec<HostEvidence> {
    let mut out: Vec<HostEvidence> = Vec::new();
    for e in per_rank {
        match out.iter_mut().find(|h| h.host == e.host) {
            None => out.push(e),
            Some(h) => {
                h.cpu_s += e.cpu_s;
                h.wall_s = h.wall_s.max(e.wall_s);
                if e.throttled_s.unwrap_or(0.0) > h.throttled_s.unwrap_or(0.0) {
                    h.throttled_s = e.throttled_s;
                    h.throttled_periods = e.throttled_periods;
                }
                // The most starved rank is the one that held the others back.
                h.waited_s = match (h.waited_s, e.waited_s) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                h.link_downs = match (h.link_downs, e.link_downs) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                h.busy_pct = match (h.busy_pct, e.busy_pct) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                h.quota_cores = match (h.quota_cores, e.quota_cores) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
    }
    out
}

/// Every rank's inventory on rank 0 (empty elsewhere).
pub fn inventories<T: crate::transport::Transport + ?Sized>(
    t: &mut T,
    mine: &crate::net::inventory::HostInventory,
) -> Result<Vec<crate::net::inventory::HostInventory>> {
    let bytes = serde_json::to_vec(mine).expect("an inventory serialises");
    let Some(all) = control::gather(t, &bytes)? else {
        return Ok(Vec::new());
    };
    all.iter()
        .enumerate()
        .map(|(r, b)| {
            serde_json::from_slice(b).map_err(|e| {
                Error::peer(format!(
                    "rank 0: rank {r} sent an unreadable inventory ({e}); were all ranks started with the same \
                     collbench version?"
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNMP: &str = "Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin ActiveOpens InSegs OutSegs \
                        RetransSegs InErrs OutRsts\nTcp: 1 200 4 1000 2000 30 2 0\nUdp: InDatagrams\nUdp: 5\n";
    const NETSTAT: &str =
        "TcpExt: SyncookiesSent TCPTimeouts TCPOFOQueue\nTcpExt: 0 7 40\nIpExt: InNoRoutes\nIpExt: 0\n";

    #[test]
    fn tcp_counters_come_from_the_snmp_and_netstat_tables() {
        let c = parse_tcp(SNMP, NETSTAT).unwrap();
        assert_eq!(
            c,
            TcpCounters {
                out_segs: 2000,
                retrans_segs: 30,
                in_errs: 2,
                timeouts: 7,
                in_segs: 1000,
                ofo: 40,
            }
        );
        let later = TcpCounters {
            out_segs: 3000,
            retrans_segs: 130,
            in_errs: 2,
            timeouts: 9,
            in_segs: 2000,
            ofo: 340,
        };
        let d = c.since(&later);
        assert_eq!((d.out_segs, d.retrans_segs, d.timeouts, d.ofo), (1000, 100, 2, 300));
        assert!((d.retrans_share() - 0.1).abs() < 1e-12);
        // A host dropping what it receives shows as data arriving out of order, not as its retransmissions.
        assert!((d.ofo_share() - 0.3).abs() < 1e-12 && (d.loss_share() - 0.3).abs() < 1e-12);
        assert_eq!(parse_tcp("Udp: X\nUdp: 1\n", NETSTAT), None);
        assert_eq!(TcpCounters::default().retrans_share(), 0.0);
    }

    #[test]
    fn ranks_of_one_host_make_one_entry() {
        let e = |host: &str, cpu: f64, thr: Option<f64>| HostEvidence {
            host: host.into(),
            wall_s: 2.0,
            cpu_s: cpu,
            throttled_s: thr,
            throttled_periods: thr.map(|t| (t * 10.0) as u64),
            ..Default::default()
        };
        let v = by_host(vec![e("a", 1.0, Some(0.1)), e("b", 1.0, None), e("a", 0.5, Some(1.5))]);
        assert_eq!(v.len(), 2);
        assert_eq!(
            (v[0].cpu_s, v[0].throttled_s, v[0].throttled_periods),
            (1.5, Some(1.5), Some(15))
        );
        assert!((v[0].throttled_share() - 0.75).abs() < 1e-12);
        assert!(v[0].line().contains("throttled 1.50 s"), "{}", v[0].line());
        // The tightest quota among a host's ranks is the host's.
        let q = |quota| HostEvidence {
            host: "a".into(),
            quota_cores: quota,
            ..Default::default()
        };
        let v = by_host(vec![q(Some(2.0)), q(None), q(Some(0.5))]);
        assert_eq!(v[0].quota_cores, Some(0.5));
    }

    #[test]
    fn carrier_losses_show_in_the_evidence_line() {
        let mut e = HostEvidence {
            host: "h1".into(),
            link_downs: Some(2),
            ..Default::default()
        };
        e.config.iface = "eth0".into();
        assert!(e.line().contains("eth0 lost its carrier 2 time(s)"), "{}", e.line());
        e.link_downs = Some(0);
        assert!(!e.line().contains("carrier"), "{}", e.line());
    }

    #[test]
    fn loopback_offloads_are_read_or_unknown_never_a_failure() {
        // Whatever the machine says, asking never fails: a value or None.
        let _ = offload("lo", ETHTOOL_GGSO);
        assert_eq!(offload("", ETHTOOL_GGSO), None);
        assert_eq!(offload("a-name-longer-than-ifnamsiz", ETHTOOL_GGSO), None);
    }
}
