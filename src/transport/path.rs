//! The paths to measure (`--transport`, `--reference`, `--line-rate`): what each path is, as flags name it
//! (the kinds' names themselves are `crate::path_names`'), and the part of the options that lists them.
//! Validated here, naming the flag in every error.

use serde::Serialize;

use crate::net::spec::IfaceSpec;
use crate::path_names::{self as names, Target};

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
/// need to know it: the one table of these facts, so no other module matches on the kinds or compares their
/// names (tests/layers.rs, tests/path_names.rs); a module that has only a path's name asks [`Traits::named`].
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
    /// It runs on device buffers directly, each call launched on a device stream and timed to the end of it
    /// (nccl): nothing staged through host memory, reductions on the GPU, and a rank stuck before a call has
    /// not launched it.
    pub on_device_stream: bool,
    /// It is carried by TCP on one interface of each host (tcp): that interface's counters and the hosts'
    /// TCP statistics are evidence about it.
    pub on_tcp_interface: bool,
    /// The library whose collectives it runs, as its users name it (`MPI`, `NCCL`); `None` for collbench's
    /// own transports.
    pub library: Option<&'static str>,
}

impl Traits {
    /// The traits of the path `name` names (a path's name in a record, a results file or a message), whether
    /// or not this build has its feature; `None` when it names no path this collbench knows.
    pub fn named(name: &str) -> Option<Traits> {
        PathKind::named(name).ok().map(|k| k.traits())
    }
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
        let own = |every_peer, tcp| Traits {
            own_transport: true,
            set_up_with_every_peer: every_peer,
            host_memory: true,
            device_memory: true,
            needs_mpi: false,
            on_device_stream: false,
            on_tcp_interface: tcp,
            library: None,
        };
        match self {
            PathKind::Tcp(_) => own(false, true),
            PathKind::Rdma { .. } => own(true, false),
            PathKind::Mpi => Traits {
                own_transport: false,
                set_up_with_every_peer: false,
                host_memory: true,
                device_memory: false,
                needs_mpi: true,
                on_device_stream: false,
                on_tcp_interface: false,
                library: Some("MPI"),
            },
            PathKind::Nccl => Traits {
                own_transport: false,
                set_up_with_every_peer: false,
                host_memory: false,
                device_memory: true,
                needs_mpi: false,
                on_device_stream: true,
                on_tcp_interface: false,
                library: Some("NCCL"),
            },
        }
    }

    /// The name of this kind of path, before any `@TARGET` (one of [`crate::path_names::KINDS`]).
    pub fn name(&self) -> &'static str {
        match self {
            PathKind::Tcp(_) => names::TCP,
            PathKind::Rdma { .. } => names::RDMA,
            PathKind::Mpi => names::MPI,
            PathKind::Nccl => names::NCCL,
        }
    }

    /// The path `s` names, whether or not this build has its feature (see [`PathKind::built`]); `FromStr`
    /// is both.
    pub fn named(s: &str) -> std::result::Result<PathKind, String> {
        let s = s.trim();
        match s.split_once('@') {
            Some((names::TCP, "")) => Err(format!(
                "'{s}' names no interface; give tcp@IFACE with a name (tcp@eth0), a glob (tcp@en*) or a list tried \
                 in order (tcp@ib0|eth0)"
            )),
            // The SPEC, normalised, is the path's label on every host: ranks compare it.
            Some((names::TCP, spec)) => IfaceSpec::parse(spec)
                .map(|p| PathKind::Tcp(Some(p.to_string())))
                .map_err(|e| format!("'{s}': {e}")),
            Some((names::RDMA, target)) => parse_rdma(target),
            Some((kind, _)) => Err(format!(
                "'{s}': only {} take a target; '{kind}@' is not a path this collbench knows",
                taking_targets()
            )),
            None => match s.to_ascii_lowercase().as_str() {
                names::TCP => Ok(PathKind::Tcp(None)),
                names::MPI => Ok(PathKind::Mpi),
                names::NCCL => Ok(PathKind::Nccl),
                names::RDMA => Err(
                    "rdma needs a device: rdma@DEVICE[:PORT], e.g. rdma@mlx5_0:1 (list devices with \
                               `ibv_devices`)"
                        .into(),
                ),
                other => Err(format!("unknown transport '{other}' (expected {})", forms())),
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
            PathKind::Tcp(Some(spec)) => write!(f, "{}@{spec}", self.name()),
            PathKind::Rdma { device, port } => write!(f, "{}@{device}:{port}", self.name()),
            PathKind::Tcp(None) | PathKind::Mpi | PathKind::Nccl => f.write_str(self.name()),
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

/// Every form a path takes, for messages: `tcp, tcp@IFACE, rdma@DEVICE[:PORT], mpi or nccl`.
fn forms() -> String {
    let forms: Vec<String> = names::KINDS
        .iter()
        .flat_map(|k| match k.target {
            Target::None => vec![k.name.to_string()],
            Target::Optional(t) => vec![k.name.to_string(), format!("{}@{t}", k.name)],
            Target::Required(t) => vec![format!("{}@{t}", k.name)],
        })
        .collect();
    listed(&forms, "or")
}

/// The kinds that take a target, for messages: `tcp (tcp@IFACE) and rdma (rdma@DEVICE[:PORT])`.
fn taking_targets() -> String {
    let kinds: Vec<String> = names::KINDS
        .iter()
        .filter_map(|k| match k.target {
            Target::None => None,
            Target::Optional(t) | Target::Required(t) => Some(format!("{0} ({0}@{t})", k.name)),
        })
        .collect();
    listed(&kinds, "and")
}

/// `a, b or c` (`last` is `or`) or `a, b and c`.
fn listed(items: &[String], last: &str) -> String {
    match items.split_last() {
        Some((end, rest)) if !rest.is_empty() => format!("{} {last} {end}", rest.join(", ")),
        _ => items.concat(),
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

/// Why `nccl` is refused in a build without the `cuda` feature.
pub fn nccl_not_built_message() -> String {
    "nccl: this collbench was built without GPU support; rebuild with `cargo build --release --features cuda` \
     (NCCL and the CUDA driver are loaded at run time, nothing is needed to build)"
        .into()
}

#[cfg(test)]
mod tests {
    use super::{PathKind, Traits};
    use crate::path_names::{Target, KINDS};

    /// One path of every kind. A new variant breaks the match below until it is added here.
    fn one_of_each() -> Vec<PathKind> {
        let every = vec![
            PathKind::Tcp(None),
            PathKind::Rdma {
                device: "mlx5_0".into(),
                port: 1,
            },
            PathKind::Mpi,
            PathKind::Nccl,
        ];
        for k in &every {
            match k {
                PathKind::Tcp(_) | PathKind::Rdma { .. } | PathKind::Mpi | PathKind::Nccl => {}
            }
        }
        every
    }

    /// Every variant has one name in `path_names::KINDS`, every name there one variant, and each name parses
    /// to its variant (with a target where it takes one) and is what the variant prints.
    #[test]
    fn every_kind_has_one_name_and_every_name_one_kind() {
        let mut of_variants: Vec<&str> = one_of_each().iter().map(PathKind::name).collect();
        let mut listed: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
        of_variants.sort_unstable();
        listed.sort_unstable();
        assert_eq!(of_variants, listed);
        for k in KINDS {
            let alone = PathKind::named(k.name);
            let with = |t: &str| PathKind::named(&format!("{}@{t}", k.name));
            let parsed = match k.target {
                Target::None => alone,
                Target::Optional(_) => {
                    assert_eq!(with("eth0").map(|p| p.name()), Ok(k.name));
                    alone
                }
                Target::Required(_) => {
                    assert!(alone.is_err(), "{} parses without a target", k.name);
                    with("dev0")
                }
            }
            .unwrap();
            assert_eq!(parsed.name(), k.name);
            assert!(parsed.to_string().starts_with(k.name), "{parsed}");
            assert_eq!(Traits::named(&parsed.to_string()), Some(parsed.traits()));
        }
        assert_eq!(Traits::named("udp"), None);
    }

    #[test]
    fn messages_list_every_form_from_the_names() {
        let e = PathKind::named("udp").unwrap_err();
        assert!(
            e.ends_with("(expected tcp, tcp@IFACE, rdma@DEVICE[:PORT], mpi or nccl)"),
            "{e}"
        );
        let e = PathKind::named("nccl@gpu0").unwrap_err();
        assert!(
            e.contains("only tcp (tcp@IFACE) and rdma (rdma@DEVICE[:PORT]) take a target"),
            "{e}"
        );
    }

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
