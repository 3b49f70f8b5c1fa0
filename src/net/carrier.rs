//! How often each interface lost its carrier, as the kernel counts it: a cable, port or peer that went away
//! and came back. Sampled before and after a measurement, the difference is evidence of an intermittent link
//! that a median of sweeps or a short test between outages would miss.

use std::path::Path;

use super::sysfs::{read_trim, sorted_names};

/// Where this network namespace's interfaces are listed.
pub const CLASS_NET: &str = "/sys/class/net";

/// Every interface's carrier losses at one moment, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Carriers(Vec<(String, u64)>);

impl Carriers {
    /// This namespace's counters now.
    pub fn now() -> Carriers {
        Carriers::read(Path::new(CLASS_NET))
    }

    /// The counters under `class_net` (a `/sys/class/net`): `carrier_down_count`, or half of
    /// `carrier_changes` on kernels without it; interfaces with neither are left out (unknown, not zero).
    pub fn read(class_net: &Path) -> Carriers {
        Carriers(
            sorted_names(class_net)
                .into_iter()
                .filter_map(|name| {
                    let read = |f: &str| read_trim(&class_net.join(&name).join(f)).and_then(|v| v.parse::<u64>().ok());
                    let downs = read("carrier_down_count").or_else(|| read("carrier_changes").map(|c| c / 2))?;
                    Some((name, downs))
                })
                .collect(),
        )
    }

    /// Times `iface` went down between `self` and `later`; `None` where either sample lacks it.
    pub fn downs_until(&self, later: &Carriers, iface: &str) -> Option<u64> {
        let of = |c: &Carriers| c.0.iter().find(|(n, _)| n == iface).map(|&(_, d)| d);
        Some(of(later)?.saturating_sub(of(self)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carrier_losses_are_counted_per_interface_between_samples() {
        let dir = tempfile::tempdir().unwrap();
        let iface = |name: &str, files: &[(&str, &str)]| {
            let d = dir.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            for (f, v) in files {
                std::fs::write(d.join(f), format!("{v}\n")).unwrap();
            }
        };
        iface("eth0", &[("carrier_down_count", "3"), ("carrier_changes", "7")]);
        iface("old0", &[("carrier_changes", "4")]);
        iface("lo", &[]);
        let before = Carriers::read(dir.path());
        assert_eq!(before, Carriers(vec![("eth0".into(), 3), ("old0".into(), 2)]));
        iface("eth0", &[("carrier_down_count", "5")]);
        let after = Carriers::read(dir.path());
        assert_eq!(before.downs_until(&after, "eth0"), Some(2));
        assert_eq!(before.downs_until(&after, "old0"), Some(0));
        assert_eq!(before.downs_until(&after, "lo"), None, "not counted: unknown, not zero");
    }
}
