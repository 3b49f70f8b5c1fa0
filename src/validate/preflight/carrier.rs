//! A host whose path interface lost its carrier while a part of the preflight measured: an intermittent
//! link (a cable, a port, a peer going away and coming back). A bad sweep among good ones could be averaged
//! away by the median; the kernel's count of carrier losses cannot, so each host that lost it fails by name.

use super::cause::Cause;
use super::evidence::HostEvidence;
use super::verdict::{bare_check, Check, Verdict};

/// One FAIL check per host in `seen` whose interface lost its carrier during `during` (e.g. `the collectives`).
pub fn checks(path: &str, during: &str, seen: &[HostEvidence]) -> Vec<Check> {
    seen.iter()
        .filter_map(|e| {
            let downs = e.link_downs.filter(|&d| d > 0)?;
            let iface = &e.config.iface;
            Some(Check {
                cause: Some(Cause::Link),
                evidence: vec![e.clone()],
                ..bare_check(
                    format!("{path} link of {} during {during}", e.host),
                    path,
                    format!("{iface} lost its carrier {downs} time(s)"),
                    "no carrier loss".into(),
                    "the kernel's carrier counters (built in)".into(),
                    Verdict::Fail,
                    format!(
                        "{}'s {iface} went down {downs} time(s) during {during} and came back: an intermittent \
                         link (cable, NIC, switch port or its peer); check `ip -s link show {iface}` and the \
                         switch port's log on {}",
                        e.host, e.host
                    ),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, downs: Option<u64>) -> HostEvidence {
        let mut e = HostEvidence {
            host: name.into(),
            link_downs: downs,
            ..Default::default()
        };
        e.config.iface = "eth0".into();
        e
    }

    #[test]
    fn only_a_host_that_lost_its_carrier_fails_by_name() {
        let seen = [host("h0", Some(0)), host("h1", Some(3)), host("h2", None)];
        let c = checks("tcp@eth0", "the pairwise test", &seen);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, "tcp@eth0 link of h1 during the pairwise test");
        assert_eq!((c[0].verdict, c[0].cause), (Verdict::Fail, Some(Cause::Link)));
        assert_eq!(c[0].measured, "eth0 lost its carrier 3 time(s)");
        assert_eq!(c[0].evidence.len(), 1);
        assert!(checks("tcp@eth0", "x", &[host("h0", Some(0)), host("h1", None)]).is_empty());
    }
}
