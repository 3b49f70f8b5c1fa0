//! The paths to measure (`--transport`, `--reference`, `--line-rate`): what each path is, as flags name it,
//! and the part of the options that lists them. Validated here, naming the flag in every error.

use serde::Serialize;

use crate::cli::LinkArgs;
use crate::error::{Error, Result};
use crate::flags::parse_list;
use crate::net::spec::IfaceSpec;

/// A path to measure (`--transport`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathKind {
    /// collbench's own TCP transport, on the interface a SPEC picks (`tcp@eth0`, `tcp@en*`, `tcp@ib0|eth0`;
    /// see `IfaceSpec`) or, without one, on `--iface` or the default choice (`crate::net::choose`).
    Tcp(Option<String>),
    /// The MPI library's own collectives (feature `mpi`).
    Mpi,
    /// collbench's own ibverbs transport on one device and port (feature `rdma`): `rdma@mlx5_0:1`.
    Rdma { device: String, port: u8 },
    /// NCCL's own collectives on device buffers (feature `cuda`, with `--memory cuda`).
    Nccl,
}

/// What a kind of path is, as the modules below the paths (`crate::paths`, where each kind is opened and run)
/// need to know it: the one table of these facts, so no other module matches on the kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Traits {
    /// collbench's own transport carries it (tcp, rdma): its algorithms run over it, device buffers are
    /// staged through host memory, and the pairwise link test can measure it.
    pub own_transport: bool,
    /// It is set up by swapping records with every peer over the first TCP path (rdma), so the session
    /// connects every pair.
    pub set_up_with_every_peer: bool,
    /// It runs on host buffers (all but nccl).
    pub host_memory: bool,
    /// It runs on device buffers, staged or directly (all but mpi).
    pub device_memory: bool,
    /// It runs the MPI library's collectives (mpi): ranks must be started by an MPI launcher.
    pub needs_mpi: bool,
}

impl Default for PathKind {
    /// Plain `tcp`: collbench's TCP transport on `--iface` or the default interface.
    fn default() -> Self {
        PathKind::Tcp(None)
    }
}

impl PathKind {
    /// Every kind of path, as `--transport all` expands (this build's).
    pub fn all() -> Vec<PathKind> {
        let mut v = vec![PathKind::Tcp(None)];
        if cfg!(feature = "mpi") {
            v.push(PathKind::Mpi);
        }
        v
    }

    /// Whether this is a TCP path.
    pub fn is_tcp(&self) -> bool {
        matches!(self, PathKind::Tcp(_))
    }

    /// The interface SPEC of a `tcp@SPEC` path; `None` for plain `tcp` and every other kind.
    pub fn tcp_spec(&self) -> Option<&str> {
        match self {
            PathKind::Tcp(spec) => spec.as_deref(),
            _ => None,
        }
    }

    /// What this kind of path is ([`Traits`]).
    pub fn traits(&self) -> Traits {
        let own = |every_peer| Traits {
            own_transport: true,
            set_up_with_every_peer: every_peer,
            host_memory: true,
            device_memory: true,
            needs_mpi: false,
        };
        match self {
            PathKind::Tcp(_) => own(false),
            PathKind::Rdma { .. } => own(true),
            PathKind::Mpi => Traits {
                own_transport: false,
                set_up_with_every_peer: false,
                host_memory: true,
                device_memory: false,
                needs_mpi: true,
            },
            PathKind::Nccl => Traits {
                own_transport: false,
                set_up_with_every_peer: false,
                host_memory: false,
                device_memory: true,
                needs_mpi: false,
            },
        }
    }

    /// The path `s` names, whether or not this build has its feature (see [`PathKind::built`]); `FromStr`
    /// is both.
    pub fn named(s: &str) -> std::result::Result<PathKind, String> {
        let s = s.trim();
        match s.split_once('@') {
            Some(("tcp", "")) => Err(format!(
                "'{s}' names no interface; give tcp@IFACE with a name (tcp@eth0), a glob (tcp@en*) or a list tried \
                 in order (tcp@ib0|eth0)"
            )),
            // The SPEC, normalised, is the path's label on every host: ranks compare it.
            Some(("tcp", spec)) => IfaceSpec::parse(spec)
                .map(|p| PathKind::Tcp(Some(p.to_string())))
                .map_err(|e| format!("'{s}': {e}")),
            Some(("rdma", target)) => parse_rdma(target),
            Some((kind, _)) => Err(format!(
                "'{s}': only tcp (tcp@IFACE) and rdma (rdma@DEVICE[:PORT]) take a target; '{kind}@' is not a path \
                 this collbench knows"
            )),
            None => match s.to_ascii_lowercase().as_str() {
                "tcp" => Ok(PathKind::Tcp(None)),
                "mpi" => Ok(PathKind::Mpi),
                "nccl" => Ok(PathKind::Nccl),
                "rdma" => Err(
                    "rdma needs a device: rdma@DEVICE[:PORT], e.g. rdma@mlx5_0:1 (list devices with \
                               `ibv_devices`)"
                        .into(),
                ),
                other => Err(format!(
                    "unknown transport '{other}' (expected tcp, tcp@IFACE, rdma@DEVICE[:PORT], mpi or nccl)"
                )),
            },
        }
    }

    /// Refuses a path whose feature this build lacks, saying how to build one that has it.
    pub fn built(self) -> std::result::Result<PathKind, String> {
        let missing = match &self {
            PathKind::Tcp(_) => None,
            PathKind::Mpi => (!cfg!(feature = "mpi")).then(|| {
                "this collbench was built without MPI; rebuild with `cargo build --release --features \
                              mpi` (needs an MPI library such as libopenmpi-dev)"
                    .to_string()
            }),
            PathKind::Nccl => (!cfg!(feature = "cuda")).then(nccl_not_built_message),
            PathKind::Rdma { .. } => (!cfg!(feature = "rdma")).then(|| {
                "this collbench was built without RDMA; rebuild with `cargo build --release --features rdma` \
                    (needs libibverbs-dev, librdmacm-dev, pkg-config and libclang-dev)"
                    .to_string()
            }),
        };
        match missing {
            Some(m) => Err(m),
            None => Ok(self),
        }
    }
}

impl std::fmt::Display for PathKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathKind::Tcp(None) => f.write_str("tcp"),
            PathKind::Tcp(Some(i)) => write!(f, "tcp@{i}"),
            PathKind::Mpi => f.write_str("mpi"),
            PathKind::Rdma { device, port } => write!(f, "rdma@{device}:{port}"),
            PathKind::Nccl => f.write_str("nccl"),
        }
    }
}

impl Serialize for PathKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::str::FromStr for PathKind {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        PathKind::named(s)?.built()
    }
}

/// `DEVICE[:PORT]` of `rdma@DEVICE[:PORT]` (port 1 when not given).
fn parse_rdma(target: &str) -> std::result::Result<PathKind, String> {
    let (device, port) = match target.split_once(':') {
        Some((d, p)) => (
            d,
            p.parse::<u8>()
                .ok()
                .filter(|&p| p >= 1)
                .ok_or_else(|| format!("'rdma@{target}': port '{p}' is not a port number (1 to 255)"))?,
        ),
        None => (target, 1),
    };
    if device.is_empty() || device.contains(|c: char| c.is_whitespace() || c == '/') {
        return Err(format!(
            "'rdma@{target}': expected rdma@DEVICE[:PORT] with a device name such as mlx5_0 (see `ibv_devices`)"
        ));
    }
    Ok(PathKind::Rdma {
        device: device.to_string(),
        port,
    })
}

/// The paths a run sweeps and how their speed is known. Every rank must agree on all of it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PathOptions {
    /// Paths to sweep in turn (`--transport`).
    pub transports: Vec<PathKind>,
    /// The path others are compared with (`--reference`, e.g. `tcp@eth0`).
    pub reference: Option<String>,
    /// Line rate of every path in Gbit/s (`--line-rate`), for links whose speed the kernel does not know
    /// (virtual devices, shaped links).
    pub line_rate_gbit: Option<f64>,
}

impl Default for PathOptions {
    fn default() -> Self {
        PathOptions {
            transports: vec![PathKind::Tcp(None)],
            reference: None,
            line_rate_gbit: None,
        }
    }
}

impl PathOptions {
    /// Validates `--transport` and `--line-rate` of `link`, with `--reference` as given.
    pub fn from_cli(link: &LinkArgs, reference: Option<String>) -> Result<PathOptions> {
        // `all` means every kind of path this build has.
        let transports = parse_list("--transport", &link.transport, &PathKind::all())?;
        let line_rate_gbit = match link.line_rate {
            Some(r) if !(r.is_finite() && r > 0.0) => {
                return Err(Error::usage(
                    "--line-rate",
                    format!("must be a positive rate in Gbit/s (got {r})"),
                ))
            }
            r => r,
        };
        Ok(PathOptions {
            transports,
            reference,
            line_rate_gbit,
        })
    }
}

/// Why `nccl` is refused in a build without the `cuda` feature.
pub fn nccl_not_built_message() -> String {
    "nccl: this collbench was built without GPU support; rebuild with `cargo build --release --features cuda` \
     (NCCL and the CUDA driver are loaded at run time, nothing is needed to build)"
        .into()
}

#[cfg(test)]
mod tests {
    use super::PathKind;

    #[test]
    fn transports_name_an_interface_or_not() {
        assert_eq!("tcp".parse::<PathKind>(), Ok(PathKind::Tcp(None)));
        assert_eq!("tcp@eth0".parse::<PathKind>(), Ok(PathKind::Tcp(Some("eth0".into()))));
        assert_eq!(PathKind::Tcp(Some("vxlan0".into())).to_string(), "tcp@vxlan0");
        assert!("tcp@".parse::<PathKind>().unwrap_err().contains("tcp@IFACE"));
        assert_eq!(
            "tcp@ib0 | en*".parse::<PathKind>(),
            Ok(PathKind::Tcp(Some("ib0|en*".into())))
        );
        assert_eq!(PathKind::Tcp(Some("ib0|en*".into())).to_string(), "tcp@ib0|en*");
        assert!("tcp@ib0||eth0"
            .parse::<PathKind>()
            .unwrap_err()
            .contains("empty alternative"));
        assert!("tcp@eth 0".parse::<PathKind>().unwrap_err().contains("'eth 0'"));
        assert!("mpi@eth0".parse::<PathKind>().unwrap_err().contains("only tcp"));
        assert!("rdma".parse::<PathKind>().unwrap_err().contains("rdma@DEVICE[:PORT]"));
        assert!("rdma@mlx5_0:0".parse::<PathKind>().unwrap_err().contains("port '0'"));
        assert!("rdma@mlx5_0:x".parse::<PathKind>().unwrap_err().contains("port 'x'"));
        assert!("rdma@:1".parse::<PathKind>().unwrap_err().contains("device name"));
        if cfg!(feature = "rdma") {
            let p = PathKind::Rdma {
                device: "mlx5_0".into(),
                port: 1,
            };
            assert_eq!("rdma@mlx5_0".parse::<PathKind>(), Ok(p.clone()));
            assert_eq!(p.to_string(), "rdma@mlx5_0:1");
            assert_eq!(
                "rdma@mlx5_0:2".parse::<PathKind>().unwrap().to_string(),
                "rdma@mlx5_0:2"
            );
        } else {
            assert!("rdma@mlx5_0:1"
                .parse::<PathKind>()
                .unwrap_err()
                .contains("--features rdma"));
        }
        assert!("udp".parse::<PathKind>().unwrap_err().contains("unknown transport"));
        match "nccl".parse::<PathKind>() {
            Ok(p) => assert_eq!((cfg!(feature = "cuda"), p.to_string()), (true, "nccl".to_string())),
            Err(e) => assert!(!cfg!(feature = "cuda") && e.contains("--features cuda"), "{e}"),
        }
        assert_eq!(
            serde_json::to_value(PathKind::Tcp(Some("ib0".into()))).unwrap(),
            "tcp@ib0"
        );
    }
}
