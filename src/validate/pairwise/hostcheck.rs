//! What each host says about itself beside the measurements: every rank sends its inventory (interfaces,
//! MTUs, CPU quota), the interface its transport uses and how often that interface lost its carrier during
//! the test. Rank 0 keeps the warnings `net::advice::advise` finds about that path (an MTU that differs between hosts, an
//! overlay too large for its underlay, a CPU quota below the ranks placed on a host) and every host whose link
//! went down. A host with a smaller MTU measures at full speed with the test's messages and still drops the
//! job's large frames, and a link down for a second between rounds leaves the matrix clean: the matrix alone
//! shows neither.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::net::advice::{advise, Advice, Severity};
use crate::net::carrier::Carriers;
use crate::net::inventory::HostInventory;
use crate::transport::{control, Transport};

/// What one rank sends rank 0: its host's inventory, the interface its transport is bound to, and how often
/// that interface lost its carrier during the test (`None`: not known).
#[derive(Serialize, Deserialize)]
struct Entry {
    inventory: HostInventory,
    iface: String,
    link_downs: Option<u64>,
}

/// A host whose path interface lost its carrier during the test.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkDown {
    pub host: String,
    pub iface: String,
    /// Times it went down.
    pub downs: u64,
}

/// What rank 0 learnt about the hosts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostChecks {
    /// Warnings about the hosts' set-up of the measured path.
    pub warnings: Vec<Advice>,
    /// Hosts whose link went down during the test, one entry per host.
    pub link_downs: Vec<LinkDown>,
}

/// Every rank's set-up and carrier losses since `before` gathered on rank 0 and judged there, `iface` being
/// the interface this rank's path is bound to: `Some` on rank 0, `None` elsewhere. Every rank of the
/// transport must call it.
pub fn check<T: Transport + ?Sized>(t: &mut T, iface: &str, before: &Carriers) -> Result<Option<HostChecks>> {
    let mine = Entry {
        inventory: crate::net::inventory::local(),
        iface: iface.to_string(),
        link_downs: before.downs_until(&Carriers::now(), iface),
    };
    let bytes = serde_json::to_vec(&mine).expect("an inventory serialises");
    let Some(all) = control::gather(t, &bytes)? else {
        return Ok(None);
    };
    let entries = all
        .iter()
        .enumerate()
        .map(|(r, b)| {
            serde_json::from_slice::<Entry>(b).map_err(|e| {
                Error::peer(format!(
                    "rank 0: rank {r} sent an unreadable host inventory ({e}); were all ranks started with the same \
                     collbench version?"
                ))
            })
        })
        .collect::<Result<Vec<Entry>>>()?;
    let mut link_downs: Vec<LinkDown> = Vec::new();
    for e in &entries {
        let Some(downs) = e.link_downs.filter(|&d| d > 0) else {
            continue;
        };
        // Ranks of one host share its interface: one entry, the most seen.
        match link_downs.iter_mut().find(|l| l.host == e.inventory.host) {
            Some(l) => l.downs = l.downs.max(downs),
            None => link_downs.push(LinkDown {
                host: e.inventory.host.clone(),
                iface: e.iface.clone(),
                downs,
            }),
        }
    }
    let ranks: Vec<(HostInventory, String)> = entries.into_iter().map(|e| (e.inventory, e.iface)).collect();
    Ok(Some(HostChecks {
        warnings: warnings(&ranks),
        link_downs,
    }))
}

/// The warnings about the measured path among one entry per rank (its host's inventory, its interface): one
/// inventory per host with its ranks counted, and only what concerns a measured interface or the hosts' CPUs.
pub fn warnings(ranks: &[(HostInventory, String)]) -> Vec<Advice> {
    let mut hosts: Vec<HostInventory> = Vec::new();
    let mut per_host: Vec<(String, usize)> = Vec::new();
    let mut ifaces: Vec<(String, String)> = Vec::new();
    for (inv, iface) in ranks {
        match per_host.iter_mut().find(|(h, _)| *h == inv.host) {
            Some((_, n)) => *n += 1,
            None => {
                per_host.push((inv.host.clone(), 1));
                ifaces.push((inv.host.clone(), iface.clone()));
                hosts.push(inv.clone());
            }
        }
    }
    advise(&hosts, &per_host, &ifaces)
        .into_iter()
        .filter(|a| a.severity == Severity::Warning)
        .filter(|a| a.what.contains("CPU quota") || ifaces.iter().any(|(_, i)| names(&a.what, i)))
        .collect()
}

/// Whether `text` names `word` as a whole word (`eth0` is not named by `veth0`).
fn names(text: &str, word: &str) -> bool {
    let part = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    !word.is_empty()
        && text
            .match_indices(word)
            .any(|(i, _)| !part(text[..i].chars().last()) && !part(text[i + word.len()..].chars().next()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::classify::IfaceKind;
    use crate::net::inventory::{CpuLimit, Iface};

    fn host(name: &str, ifaces: &[(&str, u32)]) -> HostInventory {
        HostInventory {
            host: name.into(),
            ifaces: ifaces
                .iter()
                .map(|&(n, mtu)| Iface {
                    name: n.into(),
                    kind: IfaceKind::Ethernet,
                    mtu: Some(mtu),
                    speed_mbps: None,
                    oper_state: Some("up".into()),
                    addrs: Vec::new(),
                    lower: None,
                })
                .collect(),
            cpu: CpuLimit {
                quota_cores: None,
                online_cpus: 2,
                cgroup: None,
            },
            rdma: Vec::new(),
            gpus: Vec::new(),
            gpu_topology: None,
        }
    }

    #[test]
    fn a_host_with_a_smaller_mtu_on_the_path_is_named() {
        let ranks: Vec<(HostInventory, String)> = (0..4)
            .map(|h| {
                let mtu = if h == 2 { 1280 } else { 1500 };
                (host(&format!("h{h}"), &[("eth0", mtu)]), "eth0".to_string())
            })
            .collect();
        let w = warnings(&ranks);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].what.contains("MTU 1280 on h2 (eth0)"), "{}", w[0].what);
        assert!(!w[0].what.contains("1280 on h0"), "{}", w[0].what);
    }

    #[test]
    fn the_same_mtu_everywhere_or_a_difference_off_the_path_is_no_warning() {
        let same: Vec<_> = (0..3)
            .map(|h| (host(&format!("h{h}"), &[("eth0", 1500)]), "eth0".to_string()))
            .collect();
        assert_eq!(warnings(&same), Vec::new());
        // eth1 differs, but the test ran over eth0.
        let off: Vec<_> = (0..3)
            .map(|h| {
                let mtu = if h == 1 { 1280 } else { 9000 };
                (
                    host(&format!("h{h}"), &[("eth0", 1500), ("eth1", mtu)]),
                    "eth0".to_string(),
                )
            })
            .collect();
        assert_eq!(warnings(&off), Vec::new());
    }

    #[test]
    fn ranks_of_one_host_count_once() {
        let ranks: Vec<_> = (0..4)
            .map(|r| (host(&format!("h{}", r / 2), &[("eth0", 1500)]), "eth0".to_string()))
            .collect();
        assert_eq!(warnings(&ranks), Vec::new());
    }

    #[test]
    fn whole_words_only() {
        assert!(names("MTU 1280 on h2 (eth0)", "eth0"));
        assert!(!names("MTU 1280 on h2 (veth0)", "eth0"));
        assert!(!names("eth0x", "eth0"));
        assert!(!names("anything", ""));
    }
}
