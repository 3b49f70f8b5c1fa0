//! The `rdma@DEVICE[:PORT]` path (feature `rdma`): collbench's verbs transport, its queue pairs to every
//! peer set up over the control path. Its device and port are checked before local ranks start; its line
//! rate is the port's; a failure is attributed on the control path: a peer's abort is heard there (its
//! reason and culprit), and a peer a work completion failed with is blamed there.

use super::{given, Kind, Open, Opening, Rate, Staging};
use crate::bench::{Outcome, Sweep};
use crate::engine::Native;
use crate::error::{Error, Result};
use crate::options::{Options, PathKind};
use crate::session::Session;
use crate::transport::rdma::connect::{self, Target, VerbsFabric};
use crate::transport::rdma::{sysfs, RdmaTransport};
use crate::transport::Transport;

/// The file's kind: `rdma@device:port`.
pub(super) fn unit(_kind: &PathKind, device: &str, port: u8) -> Box<dyn Kind> {
    Box::new(Rdma {
        device: device.to_string(),
        port,
    })
}

struct Rdma {
    device: String,
    port: u8,
}

impl Rdma {
    /// The device and port, with `--gid-index` (or the GID chosen per link layer).
    fn target(&self, opts: &Options) -> Target {
        Target {
            device: self.device.clone(),
            port: self.port,
            gid_index: opts.rdma.gid_index,
        }
    }
}

impl Kind for Rdma {
    fn check_local_launch(&self, opts: &Options) -> Result<()> {
        connect::check_target(&self.target(opts))
    }

    /// Device buffers are staged through host memory as on tcp paths; whether this host could carry
    /// GPUDirect RDMA is said, not used.
    fn device_route(&self, opts: &Options) -> Option<String> {
        (opts.buffers.memory == crate::memory::MemoryKind::Cuda).then(crate::memory::gpudirect::explain_host)
    }

    fn open(&self, at: &mut Opening<'_>, opts: &Options) -> Result<Box<dyn Open>> {
        let host = at.sess.world.host.clone();
        let ctrl = at
            .sess
            .transports
            .first_mut()
            .ok_or_else(|| Error::usage("--transport", "rdma needs a TCP path for its set-up"))?;
        let t = connect::connect(
            ctrl,
            &host,
            &self.target(opts),
            connect::default_config(opts.deadlines.timeout, opts.rdma.rdma_qps),
        )?;
        Ok(Box::new(RdmaPath {
            device: self.device.clone(),
            port: self.port,
            t: Box::new(t),
        }))
    }
}

/// An opened RDMA path: the verbs transport connected to every peer.
struct RdmaPath {
    device: String,
    port: u8,
    t: Box<RdmaTransport<VerbsFabric>>,
}

impl RdmaPath {
    /// The port's rate in Gbit/s from sysfs; else, with `ask_device`, from the device itself (a container
    /// without /sys/class/infiniband).
    fn rate_gbit(&self, ask_device: bool) -> Option<f64> {
        let sys = std::path::Path::new(sysfs::SYSFS_IB);
        sysfs::port_info(sys, &self.device, self.port)
            .and_then(|i| i.rate_gbit())
            .or_else(|| {
                if !ask_device {
                    return None;
                }
                let ctx = crate::transport::rdma::verbs::Context::open(&self.device).ok()?;
                ctx.query_port(self.port).ok()?.rate_gbit
            })
    }
}

impl Open for RdmaPath {
    fn name(&self) -> String {
        self.t.path()
    }

    fn sweep(&mut self, sess: &mut Session, staging: &Staging, s: Sweep<'_>) -> Result<Outcome> {
        let mut engine = Native::new(&mut *self.t, s.opts.algorithm);
        // Device memory is staged through host memory as on tcp paths; GPUDirect RDMA is not used.
        let swept = staging.sweep(&mut engine, s);
        match swept {
            Err(e) => Err(match (engine.transport.aborted_by(), engine.transport.failed_with()) {
                (Some(origin), _) => super::hear_abort(&mut sess.transports[0], origin, e),
                // The peer a verbs completion failed with is whom this rank's abort note blames.
                (None, Some(peer)) => {
                    let host = sess.world.ranks.get(peer).map(|r| r.host.clone()).unwrap_or_default();
                    sess.transports[0].blame_peer(peer, host);
                    e
                }
                (None, None) => e,
            }),
            ok => ok,
        }
    }

    fn transport<'a>(&'a mut self, _sess: &'a mut Session) -> Option<&'a mut dyn Transport> {
        Some(&mut *self.t)
    }

    fn heard(&mut self, sess: &mut Session, e: Error) -> Error {
        match self.t.aborted_by() {
            Some(origin) => super::hear_abort(&mut sess.transports[0], origin, e),
            None => e,
        }
    }

    fn line_rate(&self, _sess: &Session, given_gbit: Option<f64>) -> Rate {
        let (device, port) = (&self.device, self.port);
        given(given_gbit)
            .or_else(|| {
                self.rate_gbit(true)
                    .map(|g| (g / 8.0, format!("rate of {device} port {port}")))
            })
            .ok_or(format!("rate of {device} port {port} unknown"))
    }

    /// Known or not, an RDMA path has a rate in the summary (0 when unknown); only sysfs is read here.
    fn run_line_rate(&self, _sess: &Session, given_gbit: Option<f64>) -> Option<f64> {
        Some(given_gbit.or_else(|| self.rate_gbit(false)).map_or(0.0, |g| g / 8.0))
    }
}
