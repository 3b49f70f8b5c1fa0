//! Where each rank runs and how peers reach it: what the rendezvous gathers and the results file records.

use serde::{Deserialize, Serialize};

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
