//! The options of a test over one of collbench's own paths (`pairwise`, `p2p`): `--np`, `--transport`,
//! `--iface` and the deadlines, validated here, naming the flag.

use super::{Deadlines, Options, PathKind, PathOptions, TcpOptions};
use crate::cli::DeadlineArgs;
use crate::error::{Error, Result};

/// What the flags of a test over one own path give: `--np`, `--transport`, `--iface` and the deadlines.
pub struct PathFlags<'a> {
    /// The subcommand, for its messages (`pairwise`).
    pub command: &'a str,
    pub np: usize,
    pub transport: &'a str,
    pub iface: Option<&'a str>,
    pub deadlines: &'a DeadlineArgs,
}

/// The session options the flags ask for: one path, which must be collbench's own transport; errors name the
/// flag.
pub fn options(f: &PathFlags<'_>) -> Result<Options> {
    let np = super::np(f.np)?;
    let path: PathKind = f.transport.parse().map_err(|e| Error::usage("--transport", e))?;
    if !path.traits().own_transport {
        return Err(Error::usage(
            "--transport",
            format!(
                "{} measures collbench's own transports: give tcp, tcp@SPEC or rdma@DEVICE[:PORT], not {path}",
                f.command
            ),
        ));
    }
    Ok(Options {
        np,
        paths: PathOptions {
            transports: vec![path],
            ..PathOptions::default()
        },
        tcp: TcpOptions {
            iface: crate::transport::tcp::options::iface_spec(f.iface)?,
            ..TcpOptions::default()
        },
        deadlines: Deadlines::from_cli(f.deadlines)?,
        ..Options::default()
    })
}
