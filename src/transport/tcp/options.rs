//! The TCP transport's options (`--iface`, `--streams`, `--spin`, `--sndbuf`, `--tcp-congestion`). Validated
//! here without touching the host; [`TcpOptions::check_host`] tries the congestion control where the options
//! are applied, before anything connects.

use std::time::Duration;

use serde::Serialize;

use crate::cli::LinkArgs;
use crate::defaults;
use crate::error::{Error, Result};
use crate::flags::size_flag;
use crate::net::spec::IfaceSpec;
use crate::sizes::format_size;

/// Most TCP streams per peer (`--streams`).
pub const MAX_STREAMS: usize = 16;
/// Longest polling phase of a TCP wait (`--spin`, microseconds).
pub const MAX_SPIN_US: u64 = 100_000;
/// Smallest and largest TCP send buffer (`--sndbuf`).
pub const MIN_SNDBUF: u64 = 4 << 10;
/// See [`MIN_SNDBUF`].
pub const MAX_SNDBUF: u64 = 256 << 20;

/// How collbench's TCP transport opens and drives its sockets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TcpOptions {
    /// Interface SPEC the plain TCP path binds to (`--iface`, as in `tcp@SPEC`); `None`: the default choice
    /// (`crate::net::choose`). Interface names may differ between hosts, so ranks need not agree on it.
    pub iface: Option<String>,
    /// TCP streams per peer (`--streams`).
    pub streams: usize,
    /// How long a TCP wait polls before it sleeps (`--spin`).
    pub spin: Duration,
    /// SO_SNDBUF of every TCP data socket (`--sndbuf`); `None` leaves the kernel's send buffer autotuning.
    pub sndbuf: Option<usize>,
    /// Congestion control of every TCP data socket (`--tcp-congestion`); `None` keeps the host's default.
    pub tcp_congestion: Option<String>,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            iface: None,
            streams: defaults::STREAMS,
            // Measured (4 ranks, 2 cores, loopback): 20-100 us halve the 8 B all_reduce time against sleeping
            // at once; longer only burns CPU that ranks sharing the cores could use.
            spin: Duration::from_micros(defaults::SPIN_US),
            // Measured (4 ranks, 2 cores, loopback, 200 iterations a point): 512 KiB (the kernel doubles it)
            // cut all_gather 4-8 MiB times by 30-50% and all_reduce by 25-35% against autotuning, which lets
            // megabytes queue per socket and copies run out of cache; 128 KiB and 1 MiB were slower.
            sndbuf: defaults::SNDBUF,
            tcp_congestion: None,
        }
    }
}

impl TcpOptions {
    /// Validates the TCP flags of `link`; only their spelling and range, nothing on this host.
    pub fn from_cli(link: &LinkArgs) -> Result<TcpOptions> {
        if !(1..=MAX_STREAMS).contains(&link.streams) {
            return Err(Error::usage(
                "--streams",
                format!(
                    "must be between 1 and {MAX_STREAMS} TCP streams per peer (got {})",
                    link.streams
                ),
            ));
        }
        if link.spin > MAX_SPIN_US {
            return Err(Error::usage(
                "--spin",
                format!(
                    "must be between 0 and {MAX_SPIN_US} microseconds (got {}); 0 sleeps at once",
                    link.spin
                ),
            ));
        }
        let sndbuf = sndbuf_flag(&link.sndbuf)?;
        if let Some(name) = &link.tcp_congestion {
            super::congestion::check_name(name).map_err(|why| Error::usage("--tcp-congestion", why))?;
        }
        Ok(TcpOptions {
            iface: iface_spec(link.iface.as_deref())?,
            streams: link.streams,
            spin: Duration::from_micros(link.spin),
            sndbuf,
            tcp_congestion: link.tcp_congestion.clone(),
        })
    }

    /// Tries `--tcp-congestion` on a fresh socket of this host, so a name the host lacks or forbids fails
    /// before any rank connects.
    pub fn check_host(&self) -> Result<()> {
        match &self.tcp_congestion {
            Some(name) => super::congestion::probe(name).map_err(|why| Error::usage("--tcp-congestion", why)),
            None => Ok(()),
        }
    }
}

/// `--sndbuf`: `auto` (the kernel's autotuning) or a size within [`MIN_SNDBUF`]..=[`MAX_SNDBUF`].
fn sndbuf_flag(value: &str) -> Result<Option<usize>> {
    if value.trim() == "auto" {
        return Ok(None);
    }
    let b = size_flag("--sndbuf", value)?;
    if !(MIN_SNDBUF..=MAX_SNDBUF).contains(&b) {
        return Err(Error::usage(
            "--sndbuf",
            format!(
                "must be auto or between {} and {} (got {})",
                format_size(MIN_SNDBUF),
                format_size(MAX_SNDBUF),
                format_size(b)
            ),
        ));
    }
    // Bounded by MAX_SNDBUF, so it fits any usize.
    Ok(Some(b as usize))
}

/// The `--iface` SPEC in its canonical form, or the error naming the flag.
pub fn iface_spec(spec: Option<&str>) -> Result<Option<String>> {
    spec.map(|i| {
        IfaceSpec::parse(i)
            .map(|p| p.to_string())
            .map_err(|e| Error::usage("--iface", e))
    })
    .transpose()
}
