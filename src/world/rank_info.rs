//! Where each rank runs and how peers reach it: what the rendezvous gathers and the results file records.

use serde::{Deserialize, Serialize};

/// Most bytes of a host name kept from a peer (a DNS name has at most 253), as printed.
pub const MAX_HOST: usize = 256;
/// Most bytes of a shorter name kept from a peer or the environment (an interface, an address, a reason).
pub const MAX_NAME: usize = 256;

/// `s` made safe to print, as notes are: control characters escaped, then cut to at most `max` bytes at a
/// character boundary, saying how long it was, so a peer's (or a variable's) 1 MB name is not printed whole.
pub fn printable(s: &str, max: usize) -> String {
    let mut out = crate::error::escape(s).into_owned();
    if out.len() > max {
        let mut end = max;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out.push_str(&format!("... ({} bytes in all)", s.len()));
    }
    out
}

impl RankInfo {
    /// The same entry with every name made [`printable`].
    pub fn printable(mut self) -> RankInfo {
        self.host = printable(&self.host, MAX_HOST);
        for s in [&mut self.iface, &mut self.addr] {
            *s = printable(s, MAX_NAME);
        }
        for e in &mut self.endpoints {
            e.make_printable();
        }
        if let Some(d) = self.device.as_mut() {
            *d = printable(d, MAX_NAME);
        }
        self
    }
}

impl Endpoint {
    /// Makes every name of this endpoint [`printable`].
    pub fn make_printable(&mut self) {
        self.iface = printable(&self.iface, MAX_NAME);
        self.addr = printable(&self.addr, MAX_NAME);
        if let Some(r) = self.reason.as_mut() {
            *r = printable(r, MAX_NAME);
        }
    }
}

/// One data listener of a rank: the interface and the address peers connect to.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Endpoint {
    pub iface: String,
    /// `ip:port`.
    pub addr: String,
    /// Why the rank bound this interface ("IPoIB preferred", "chosen by tcp@ib0|eth0", ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where one rank ran. Fields a file lacks read as empty.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RankInfo {
    pub rank: usize,
    pub pid: u32,
    pub host: String,
    /// Network interface of the rank's first TCP path.
    pub iface: String,
    /// Address of the rank's first TCP path's listener (`ip:port`).
    pub addr: String,
    /// Every TCP path's endpoint, in `--transport` order (the first is `iface`/`addr`).
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
    /// With device memory: the GPU the rank uses (`cuda:0 [0000:19:00.0] NVIDIA H200`), as it reported it
    /// before the first sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_or_hostile_name_from_the_table_is_cut_and_escaped() {
        let huge = RankInfo {
            host: format!("\u{1b}[2J{}", "h".repeat(1 << 20)),
            iface: "é".repeat(1000),
            endpoints: vec![Endpoint {
                iface: "e\u{7}".repeat(100_000),
                addr: "a".into(),
                reason: None,
            }],
            ..RankInfo::default()
        }
        .printable();
        assert!(huge.host.starts_with("\\u{1b}[2Jhhh"), "{}", &huge.host[..20]);
        assert!(huge.host.len() < MAX_HOST + 64 && huge.host.ends_with("(1048580 bytes in all)"));
        assert!(huge.iface.len() < MAX_NAME + 64 && huge.iface.starts_with("éé"));
        let e = &huge.endpoints[0];
        assert!(e.iface.len() < MAX_NAME + 64 && !e.iface.chars().any(char::is_control));
        assert_eq!(e.addr, "a");
        assert_eq!(printable("node-1", MAX_HOST), "node-1");
    }
}
