//! The `tcp` and `tcp@SPEC` paths: collbench's TCP transport. Its connections are made with the session
//! (each path's listener binds before the bootstrap, where the endpoints travel), so opening one takes the
//! session's next TCP transport; a failure is made known on the path's own connections.

use super::{given, Kind, Open, Opening, Rate, Staging};
use crate::bench::{Outcome, Sweep};
use crate::engine::Native;
use crate::error::{Error, Result};
use crate::options::{Options, PathKind};
use crate::session::Session;
use crate::transport::Transport;

/// The file's kind: a TCP path as `--transport` gave it.
pub(super) fn unit(kind: &PathKind, spec: Option<&str>) -> Box<dyn Kind> {
    Box::new(Tcp {
        given: kind.to_string(),
        spec: spec.map(str::to_string),
    })
}

struct Tcp {
    given: String,
    /// The interface SPEC of `tcp@SPEC`, if given.
    spec: Option<String>,
}

impl Kind for Tcp {
    /// Every local rank would resolve the same SPEC on this host and print the same error: checked once,
    /// before they start.
    fn check_local_launch(&self, _opts: &Options) -> Result<()> {
        match &self.spec {
            Some(spec) => crate::net::iface::resolve(spec, "--transport").map(drop),
            None => Ok(()),
        }
    }

    fn open(&self, at: &mut Opening<'_>, _opts: &Options) -> Result<Box<dyn Open>> {
        let k = at.next_tcp;
        let t = at
            .sess
            .transports
            .get(k)
            .ok_or_else(|| Error::peer(format!("{}: the session has no TCP transport {k}", self.given)))?;
        at.next_tcp += 1;
        Ok(Box::new(TcpPath { k, name: t.path() }))
    }
}

/// An opened TCP path: the session's TCP transport `k`.
struct TcpPath {
    k: usize,
    name: String,
}

impl TcpPath {
    /// The interface rank 0 bound, and its speed in GB/s where the kernel knows it.
    fn speed(&self, sess: &Session) -> (String, Option<f64>) {
        let iface = sess.transports[self.k].iface().to_string();
        let speed = crate::net::iface::line_rate_gbs(&iface);
        (iface, speed)
    }
}

impl Open for TcpPath {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn sweep(&mut self, sess: &mut Session, staging: &Staging, s: Sweep<'_>) -> Result<Outcome> {
        let mut engine = Native::new(&mut sess.transports[self.k], s.opts.algorithm);
        staging.sweep(&mut engine, s)
    }

    fn transport<'a>(&'a mut self, sess: &'a mut Session) -> Option<&'a mut dyn Transport> {
        sess.transports.get_mut(self.k).map(|t| t as &mut dyn Transport)
    }

    fn abort(&self, sess: &mut Session, e: Error) -> Error {
        super::abort_on(sess, self.k, e)
    }

    fn tcp_index(&self) -> Option<usize> {
        Some(self.k)
    }

    fn line_rate(&self, sess: &Session, given_gbit: Option<f64>) -> Rate {
        let (iface, speed) = self.speed(sess);
        given(given_gbit)
            .or_else(|| speed.map(|r| (r, format!("link speed of {iface}"))))
            .ok_or(format!("link speed of {iface} unknown"))
    }

    /// Known or not, a TCP path has a rate in the summary (0 when unknown).
    fn run_line_rate(&self, sess: &Session, given_gbit: Option<f64>) -> Option<f64> {
        Some(
            given_gbit
                .map(|g| g / 8.0)
                .or_else(|| self.speed(sess).1)
                .unwrap_or(0.0),
        )
    }
}
