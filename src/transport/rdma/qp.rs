//! Reliable-connected queue pairs as state types: a queue pair moves RESET -> INIT -> RTR -> RTS, each
//! transition consumes the old state, and only a ready-to-send queue pair can post a write. The verbs calls
//! sit behind [`QpOps`] (the `rdma` feature implements it), so the sequence and its parameters are tested
//! without hardware.
//!
//! ```compile_fail
//! use collbench::transport::rdma::qp::{Init, Qp, QpOps};
//! // A queue pair that is only initialised has no sending side.
//! fn send<O: QpOps>(qp: &mut Qp<Init, O>) -> &mut O { qp.sender() }
//! ```
//!
//! ```compile_fail
//! use collbench::transport::rdma::qp::{Qp, QpOps, Reset};
//! // Nor can a queue pair in RESET take receives.
//! fn recv<O: QpOps>(qp: &mut Qp<Reset, O>) -> &mut O { qp.receiver() }
//! ```

use std::marker::PhantomData;

use super::endpoint::{path_mtu, QpEndpoint};
use super::error::RdmaError;
use super::sysfs::LinkLayer;

/// State: just created.
pub struct Reset;
/// State: bound to a port; receives may be posted.
pub struct Init;
/// State: ready to receive from one remote queue pair.
pub struct Rtr;
/// State: ready to send.
pub struct Rts;

/// What this side knows about its own port when connecting.
#[derive(Clone, Debug)]
pub struct LocalPort {
    pub port: u8,
    pub link_layer: LinkLayer,
    /// Active MTU in bytes.
    pub mtu: u32,
    /// GID table index to send from.
    pub gid_index: u8,
}

/// Parameters of the INIT -> RTR transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtrParams {
    pub dest_qpn: u32,
    pub rq_psn: u32,
    pub path_mtu: u32,
    pub dlid: u16,
    /// Route by GID (global routing header): always on RoCE, on InfiniBand when the peer has no LID.
    pub grh: Option<([u8; 16], u8)>,
    pub port: u8,
    pub min_rnr_timer: u8,
    pub max_dest_rd_atomic: u8,
}

/// Parameters of the RTR -> RTS transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtsParams {
    pub sq_psn: u32,
    /// Local ACK timeout exponent: 4.096 us * 2^timeout (14: about 67 ms, NCCL's default 18 is ~1 s).
    pub timeout: u8,
    /// Transport retries before a retry-exceeded completion.
    pub retry_cnt: u8,
    /// Receiver-not-ready retries; 7 means forever (never needed: credits keep receives posted).
    pub rnr_retry: u8,
    pub max_rd_atomic: u8,
}

/// The verbs calls a state transition makes; `Err` carries the message naming the failing verb.
pub trait QpOps {
    /// RESET -> INIT on `port` with remote-write access.
    fn modify_to_init(&mut self, port: u8) -> Result<(), RdmaError>;
    /// INIT -> RTR.
    fn modify_to_rtr(&mut self, p: &RtrParams) -> Result<(), RdmaError>;
    /// RTR -> RTS.
    fn modify_to_rts(&mut self, p: &RtsParams) -> Result<(), RdmaError>;
}

/// A queue pair in state `S`.
pub struct Qp<S, O: QpOps> {
    ops: O,
    _state: PhantomData<S>,
}

impl<S, O: QpOps> Qp<S, O> {
    fn into_state<T>(self) -> Qp<T, O> {
        Qp {
            ops: self.ops,
            _state: PhantomData,
        }
    }
}

/// States in which receives may be posted (from INIT on).
pub trait CanReceive {}
impl CanReceive for Init {}
impl CanReceive for Rtr {}
impl CanReceive for Rts {}

impl<S: CanReceive, O: QpOps> Qp<S, O> {
    /// The underlying queue pair, for posting receives.
    pub fn receiver(&mut self) -> &mut O {
        &mut self.ops
    }
}

impl<O: QpOps> Qp<Reset, O> {
    /// A freshly created queue pair.
    pub fn new(ops: O) -> Self {
        Qp {
            ops,
            _state: PhantomData,
        }
    }

    /// RESET -> INIT.
    pub fn init(mut self, port: u8) -> Result<Qp<Init, O>, RdmaError> {
        self.ops.modify_to_init(port)?;
        Ok(self.into_state())
    }
}

impl<O: QpOps> Qp<Init, O> {
    /// INIT -> RTR, connected to queue pair `lane` of `remote`.
    pub fn ready_to_receive(
        mut self,
        remote: &QpEndpoint,
        lane: usize,
        local: &LocalPort,
    ) -> Result<Qp<Rtr, O>, RdmaError> {
        self.ops.modify_to_rtr(&rtr_params(remote, lane, local)?)?;
        Ok(self.into_state())
    }
}

impl<O: QpOps> Qp<Rtr, O> {
    /// RTR -> RTS, sending from packet sequence number `psn` (the one this side published).
    pub fn ready_to_send(mut self, psn: u32) -> Result<Qp<Rts, O>, RdmaError> {
        self.ops.modify_to_rts(&rts_params(psn))?;
        Ok(self.into_state())
    }
}

impl<O: QpOps> Qp<Rts, O> {
    /// The connected queue pair, for posting writes.
    pub fn sender(&mut self) -> &mut O {
        &mut self.ops
    }
}

/// INIT -> RTR parameters for connecting to queue pair `lane` of `remote` from `local`; refused when the
/// record has no such lane.
pub fn rtr_params(remote: &QpEndpoint, lane: usize, local: &LocalPort) -> Result<RtrParams, RdmaError> {
    let Some(q) = remote.qps.get(lane) else {
        return Err(RdmaError::refused(format!(
            "rank {}'s endpoint has {} queue pair(s), none for lane {lane}",
            remote.from,
            remote.qps.len()
        )));
    };
    let by_gid = local.link_layer == LinkLayer::Ethernet || remote.lid == 0;
    Ok(RtrParams {
        dest_qpn: q.qpn,
        rq_psn: q.psn,
        path_mtu: path_mtu(local.mtu, remote.mtu),
        dlid: remote.lid,
        grh: by_gid.then_some((remote.gid, local.gid_index)),
        port: local.port,
        min_rnr_timer: 12,
        max_dest_rd_atomic: 1,
    })
}

/// RTR -> RTS parameters.
pub fn rts_params(psn: u32) -> RtsParams {
    RtsParams {
        sq_psn: psn,
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        max_rd_atomic: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::super::endpoint::{QpNumbers, RemoteWindow, ENDPOINT_VERSION};
    use super::super::window::WindowShape;
    use super::*;

    #[derive(Default)]
    struct Recorder {
        calls: Vec<String>,
        fail_at: Option<&'static str>,
    }

    impl Recorder {
        fn step(&mut self, name: &'static str, detail: String) -> Result<(), RdmaError> {
            self.calls.push(format!("{name} {detail}"));
            if self.fail_at == Some(name) {
                return Err(RdmaError::refused(format!(
                    "ibv_modify_qp to {name} failed: Invalid argument (EINVAL)"
                )));
            }
            Ok(())
        }
    }

    impl QpOps for Recorder {
        fn modify_to_init(&mut self, port: u8) -> Result<(), RdmaError> {
            self.step("INIT", format!("port {port}"))
        }
        fn modify_to_rtr(&mut self, p: &RtrParams) -> Result<(), RdmaError> {
            self.step(
                "RTR",
                format!("qpn {} mtu {} grh {}", p.dest_qpn, p.path_mtu, p.grh.is_some()),
            )
        }
        fn modify_to_rts(&mut self, p: &RtsParams) -> Result<(), RdmaError> {
            self.step("RTS", format!("psn {}", p.sq_psn))
        }
    }

    fn remote(lid: u16) -> QpEndpoint {
        QpEndpoint {
            version: ENDPOINT_VERSION,
            from: 1,
            to: 0,
            lid,
            gid: [1; 16],
            qps: vec![QpNumbers { qpn: 99, psn: 5 }, QpNumbers { qpn: 100, psn: 6 }],
            mtu: 1024,
            window: RemoteWindow {
                addr: 4096,
                rkey: 1,
                shape: WindowShape::new(2, 64).unwrap(),
            },
        }
    }

    fn local(link_layer: LinkLayer) -> LocalPort {
        LocalPort {
            port: 1,
            link_layer,
            mtu: 4096,
            gid_index: 3,
        }
    }

    #[test]
    fn transitions_run_in_order_with_the_peers_parameters() {
        let qp = Qp::new(Recorder::default()).init(1).unwrap();
        let qp = qp.ready_to_receive(&remote(0), 0, &local(LinkLayer::Ethernet)).unwrap();
        let mut qp = qp.ready_to_send(77).unwrap();
        assert_eq!(
            qp.sender().calls,
            ["INIT port 1", "RTR qpn 99 mtu 1024 grh true", "RTS psn 77"]
        );
    }

    #[test]
    fn each_lane_connects_to_the_peers_queue_pair_of_the_same_lane() {
        let qp = Qp::new(Recorder::default()).init(1).unwrap();
        let mut qp = qp
            .ready_to_receive(&remote(0), 1, &local(LinkLayer::Ethernet))
            .unwrap()
            .ready_to_send(78)
            .unwrap();
        assert_eq!(qp.sender().calls[1], "RTR qpn 100 mtu 1024 grh true");
        let rtr = rtr_params(&remote(0), 1, &local(LinkLayer::Ethernet)).unwrap();
        assert_eq!((rtr.dest_qpn, rtr.rq_psn), (100, 6));
        let qp = Qp::new(Recorder::default()).init(1).unwrap();
        let err = qp
            .ready_to_receive(&remote(0), 2, &local(LinkLayer::Ethernet))
            .err()
            .expect("no third lane");
        assert!(err.to_string().contains("none for lane 2"), "{err}");
    }

    #[test]
    fn a_failed_transition_gives_back_no_queue_pair() {
        let ops = Recorder {
            fail_at: Some("RTR"),
            ..Recorder::default()
        };
        let qp = Qp::new(ops).init(1).unwrap();
        let err = qp
            .ready_to_receive(&remote(0), 0, &local(LinkLayer::Ethernet))
            .err()
            .expect("RTR fails");
        assert!(err.to_string().contains("ibv_modify_qp to RTR"), "{err}");
    }

    #[test]
    fn routing_by_gid_on_roce_and_by_lid_on_infiniband() {
        let roce = rtr_params(&remote(0), 0, &local(LinkLayer::Ethernet)).unwrap();
        assert_eq!(roce.grh, Some(([1; 16], 3)));
        let ib = rtr_params(&remote(7), 0, &local(LinkLayer::InfiniBand)).unwrap();
        assert_eq!((ib.grh, ib.dlid, ib.path_mtu), (None, 7, 1024));
        let ib_no_lid = rtr_params(&remote(0), 0, &local(LinkLayer::InfiniBand)).unwrap();
        assert!(ib_no_lid.grh.is_some());
        assert_eq!(rts_params(9).sq_psn, 9);
    }
}
