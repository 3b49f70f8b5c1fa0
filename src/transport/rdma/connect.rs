//! Connection set-up over verbs (feature `rdma`) and the [`Fabric`] the protocol engine drives.
//!
//! Every rank opens the device, makes [`RdmaConfig::qps`] queue pairs (lanes) and one registered receive
//! window per peer, and swaps [`QpEndpoint`] records with each peer over the job's already-connected control
//! transport (so the job token has been checked). Then each queue pair goes INIT -> RTR -> RTS (lane i to
//! the peer's lane i), receives are posted, and a barrier makes sure no rank writes before its peer is ready.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::advice::completion_error;
use super::endpoint::{QpEndpoint, QpNumbers, RemoteWindow, ENDPOINT_VERSION};
use super::error::RdmaError;
use super::mr_cache::MrCache;
use super::proto::{Completion, Fabric, RdmaConfig, RdmaTransport, Write};
use super::qp::{LocalPort, Qp, Rts};
use super::sysfs::{self, LinkLayer};
use super::verbs::{Context, Cq, Mr, Pd, QpCaps, RcQp};
use crate::error::{Error, Result};
use crate::memory::HostBuf;
use crate::transport::{self, control, Transport};

/// Marks receive work requests (their id is the peer's rank).
const RECV_TAG: u64 = 1 << 62;
/// Messages shorter than this are copied into a registered staging slot instead of being registered.
const COPY_BELOW: usize = 64 << 10;
/// Idle registrations the cache keeps.
const MR_CACHE_ENTRIES: usize = 64;
/// Completions polled per call.
const POLL_BATCH: usize = 32;
/// Inline bytes asked of the device for tiny writes.
const INLINE: u32 = 64;

/// Which device and port to use.
#[derive(Clone, Debug)]
pub struct Target {
    pub device: String,
    pub port: u8,
    /// GID table index; `None` picks as [`sysfs::select_gid`] does.
    pub gid_index: Option<u8>,
}

/// One connected queue pair to a peer.
struct Lane {
    qp: Qp<Rts, RcQp>,
    /// Per posted write, in posting order (completions of one queue pair come in order): the cached
    /// registration it reads from, if any.
    in_flight: VecDeque<Option<(usize, usize)>>,
}

/// Field order is drop order where the verbs cannot see it: the queue pairs stop first (nothing writes into
/// the buffers after), then each region is deregistered before its buffer is freed.
struct PeerConn {
    lanes: Vec<Lane>,
    remote: RemoteWindow,
    /// Registered copy of the peer's window layout, for short messages.
    staging_mr: Mr,
    staging: HostBuf,
    /// Held so the window stays registered while the queue pair lives.
    _window_mr: Mr,
    window: HostBuf,
}

/// The verbs fabric: one device, one completion queue, some queue pairs per peer. The verbs objects keep
/// what they were made from ([`super::verbs`]), so they are freed in a valid order whatever the field order.
pub struct VerbsFabric {
    peers: Vec<Option<PeerConn>>,
    /// Queue pair number to (peer, lane).
    by_qpn: HashMap<u32, (usize, usize)>,
    cache: MrCache<Mr>,
    wc: Vec<rdma_sys::ibv_wc>,
    cq: Arc<Cq>,
    pd: Arc<Pd>,
    local_slot_bytes: usize,
}

// SAFETY: every verbs object it owns is used from one thread at a time (the transport is not Sync).
unsafe impl Send for VerbsFabric {}

impl VerbsFabric {
    /// A zero-length write to `peer` on its queue pair `qp`: with an immediate, a message of its own; without,
    /// nothing reaches the peer's software, but it still completes only once the peer's adapter acknowledged it.
    fn write_empty(
        &mut self,
        peer: usize,
        qp: usize,
        wr_id: u64,
        imm: Option<u32>,
    ) -> std::result::Result<(), RdmaError> {
        let p = self.peers[peer]
            .as_mut()
            .ok_or_else(|| RdmaError::refused("no queue pair to that rank"))?;
        let remote = (p.remote.addr, p.remote.rkey);
        let lane = p
            .lanes
            .get_mut(qp)
            .ok_or_else(|| RdmaError::refused("no such queue pair to that rank"))?;
        lane.in_flight.push_back(None);
        // SAFETY: a zero-length write reads no memory.
        unsafe {
            lane.qp
                .sender()
                .post_write(wr_id, std::ptr::null(), 0, Some(0), remote, imm)
        }
    }
}

impl Fabric for VerbsFabric {
    unsafe fn write_data(&mut self, w: &Write) -> std::result::Result<(), RdmaError> {
        let p = self.peers[w.peer]
            .as_mut()
            .ok_or_else(|| RdmaError::refused("no queue pair to that rank"))?;
        let remote = (p.remote.addr + p.remote.shape.offset(w.slot) as u64, p.remote.rkey);
        // SAFETY: off + len <= msg_len, inside the message the caller keeps valid.
        let src = unsafe { w.msg.add(w.off) };
        let lane = p
            .lanes
            .get_mut(w.qp)
            .ok_or_else(|| RdmaError::refused("no such queue pair to that rank"))?;
        let qp = lane.qp.sender();
        if w.len > 0 && w.len <= qp.max_inline as usize {
            lane.in_flight.push_back(None);
            // SAFETY: inline data is copied during the call.
            return unsafe { qp.post_write(w.wr_id, src, w.len, None, remote, Some(w.imm)) };
        }
        if w.msg_len < COPY_BELOW {
            // The slot's staging bytes are free: its previous write was consumed (its credit came back).
            let dst = p.staging[w.slot as usize * staging_stride(p.remote.shape.slot_bytes)..].as_mut_ptr();
            // SAFETY: len <= slot bytes; staging is laid out like the peer's window.
            unsafe { std::ptr::copy_nonoverlapping(src, dst, w.len) };
            lane.in_flight.push_back(None);
            // SAFETY: staging stays registered and untouched until the slot is reused.
            return unsafe { qp.post_write(w.wr_id, dst, w.len, Some(p.staging_mr.lkey()), remote, Some(w.imm)) };
        }
        let (addr, len) = (w.msg as usize, w.msg_len);
        let lkey = match self.cache.acquire(addr, len) {
            Some(mr) => mr.lkey(),
            None => {
                // SAFETY: the caller keeps the message mapped until its completion; the cache drops the
                // registration before the memory is freed (forget_memory).
                let mr = unsafe { Mr::register(&self.pd, w.msg as *mut u8, len)? };
                let lkey = mr.lkey();
                drop(self.cache.insert(addr, len, mr));
                lkey
            }
        };
        lane.in_flight.push_back(Some((addr, len)));
        // SAFETY: registered above; valid until the completion per the caller's contract.
        unsafe {
            lane.qp
                .sender()
                .post_write(w.wr_id, src, w.len, Some(lkey), remote, Some(w.imm))
        }
    }

    fn write_imm(&mut self, peer: usize, qp: usize, wr_id: u64, imm: u32) -> std::result::Result<(), RdmaError> {
        self.write_empty(peer, qp, wr_id, Some(imm))
    }

    fn probe(&mut self, peer: usize, qp: usize, wr_id: u64) -> std::result::Result<(), RdmaError> {
        self.write_empty(peer, qp, wr_id, None)
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> std::result::Result<(), RdmaError> {
        let n = self.cq.poll(&mut self.wc)?;
        for wc in &self.wc[..n] {
            let peer = self.by_qpn.get(&wc.qp_num).copied();
            if wc.status != rdma_sys::ibv_wc_status::IBV_WC_SUCCESS {
                out.push(Completion::Failed {
                    peer: peer.map(|p| p.0),
                    msg: completion_error(wc.status, wc.vendor_err),
                });
                continue;
            }
            let Some((peer, qp)) = peer else {
                return Err(RdmaError::refused(format!(
                    "completion for unknown queue pair {}",
                    wc.qp_num
                )));
            };
            let lane = self.peers[peer]
                .as_mut()
                .and_then(|p| p.lanes.get_mut(qp))
                .ok_or_else(|| RdmaError::refused("completion for this rank's own queue pair"))?;
            if wc.wr_id & RECV_TAG != 0 {
                // Put the receive back at once: credits bound how many the peer can use meanwhile.
                lane.qp.receiver().post_recv(RECV_TAG | peer as u64)?;
                // SAFETY: a write-with-immediate completion carries immediate data.
                let imm = u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data });
                out.push(Completion::Received { peer, imm });
            } else {
                if let Some(Some((addr, len))) = lane.in_flight.pop_front() {
                    self.cache.release(addr, len);
                }
                out.push(Completion::Sent {
                    peer,
                    qp,
                    wr_id: wc.wr_id,
                });
            }
        }
        Ok(())
    }

    fn slot(&self, peer: usize, slot: u32) -> *const u8 {
        let p = self.peers[peer]
            .as_ref()
            .expect("the protocol engine only asks for connected peers");
        p.window[slot as usize * self.local_slot_bytes..].as_ptr()
    }

    fn shutdown(&mut self) {
        for lane in self.peers.iter_mut().flatten().flat_map(|p| &mut p.lanes) {
            lane.qp.sender().to_error();
        }
    }

    fn forget_memory(&mut self) {
        drop(self.cache.clear());
    }
}

/// Bytes per staging slot: a short message's fragments are never longer than a window slot or
/// [`COPY_BELOW`].
fn staging_stride(slot_bytes: u32) -> usize {
    (slot_bytes as usize).min(COPY_BELOW)
}

/// Checks, before any rank starts, that `target` can be opened and its port is up.
pub fn check_target(target: &Target) -> Result<()> {
    let err = |m: RdmaError| Error::usage("--transport", m.to_string());
    let ctx = Context::open(&target.device).map_err(err)?;
    let port = ctx.query_port(target.port).map_err(err)?;
    if !port.active {
        return Err(err(RdmaError::refused(format!(
            "port {} of {} is not active; check the link and the subnet manager with `ibstat`",
            target.port, target.device
        ))));
    }
    Ok(())
}

/// The transport's tuning for a run with per-wait deadline `timeout` and `qps` queue pairs per peer: 8
/// slots of 512 KiB per peer.
pub fn default_config(timeout: std::time::Duration, qps: usize) -> RdmaConfig {
    let window = super::window::WindowShape::new(8, 512 << 10).expect("a valid shape");
    RdmaConfig {
        window,
        sq_depth: 2 * window.slots + 4,
        qps: qps.max(1),
        timeout,
    }
}

/// Half-connected state of one peer between creating the queue pair and reading the peer's record.
struct Pending {
    /// Per lane: the queue pair and the packet sequence number it sends from.
    qps: Vec<(Qp<super::qp::Init, RcQp>, u32)>,
    window_mr: Mr,
    window: HostBuf,
    staging: HostBuf,
}

/// Opens `target`, connects a queue pair to every peer of `ctrl`'s job (exchanging endpoints over `ctrl`),
/// and returns the ready transport.
pub fn connect<C: Transport + ?Sized>(
    ctrl: &mut C,
    host: &str,
    target: &Target,
    cfg: RdmaConfig,
) -> Result<RdmaTransport<VerbsFabric>> {
    let (rank, n) = (ctrl.rank(), ctrl.size());
    let path = format!("rdma@{}:{}", target.device, target.port);
    let me = format!("rank {rank} (host {host}, {path})");
    let env_err = |m: RdmaError| Error::usage("--transport", format!("{me}: {m}"));
    let ctx = Context::open(&target.device).map_err(env_err)?;
    let port = ctx.query_port(target.port).map_err(env_err)?;
    if !port.active {
        return Err(env_err(RdmaError::refused(format!(
            "port {} of {} is not active; check the link and the subnet manager with `ibstat`",
            target.port, target.device
        ))));
    }
    let (gid_index, gid) = match (port.link_layer, target.gid_index) {
        (LinkLayer::InfiniBand, None) => (0, ctx.query_gid(target.port, 0).unwrap_or([0; 16])),
        (link, wanted) => {
            let entries = ctx.gid_table(target.port, port.gid_tbl_len);
            let g = sysfs::select_gid(&entries, link, wanted).map_err(env_err)?;
            (g.index, g.gid)
        }
    };
    let local_port = LocalPort {
        port: target.port,
        link_layer: port.link_layer,
        mtu: port.mtu,
        gid_index,
    };
    let pd = Pd::new(&ctx).map_err(env_err)?;
    let shape = cfg.window;
    let lanes = cfg.qps.max(1);
    // Per queue pair at most `slots` data writes (credits) and `slots` credit returns unread, and one abort.
    let rq = 2 * shape.slots + 1;
    let cq = Cq::new(&ctx, (n * lanes).max(1) as u32 * (cfg.sq_depth + rq)).map_err(env_err)?;
    let caps = QpCaps {
        send_wr: cfg.sq_depth,
        recv_wr: rq,
        inline: INLINE,
    };

    // 1. A queue pair in INIT and a registered window per peer.
    let mut pending: Vec<Option<Pending>> = Vec::with_capacity(n);
    for peer in 0..n {
        if peer == rank {
            pending.push(None);
            continue;
        }
        let mut qps = Vec::with_capacity(lanes);
        for _ in 0..lanes {
            let rc = RcQp::new(&pd, &cq, caps).map_err(env_err)?;
            let qp = Qp::new(rc).init(target.port).map_err(env_err)?;
            let mut psn = [0u8; 4];
            getrandom::getrandom(&mut psn).map_err(|e| env_err(RdmaError::refused(format!("random PSN: {e}"))))?;
            qps.push((qp, u32::from_le_bytes(psn) & 0xff_ffff));
        }
        let mut window = HostBuf::new(shape.bytes());
        // SAFETY: the window outlives its registration (both live in the same PeerConn, region first).
        let window_mr = unsafe { Mr::register(&pd, window.as_mut_ptr(), shape.bytes()) }.map_err(env_err)?;
        pending.push(Some(Pending {
            qps,
            window_mr,
            window,
            staging: HostBuf::default(),
        }));
    }

    // 2. Swap endpoint records, one peer distance at a time (everyone sends to r+d and hears from r-d).
    let mut remotes: Vec<Option<QpEndpoint>> = (0..n).map(|_| None).collect();
    for d in 1..n {
        let (to, from) = ((rank + d) % n, (rank + n - d) % n);
        let pt = pending[to].as_mut().expect("a peer");
        let mine = QpEndpoint {
            version: ENDPOINT_VERSION,
            from: rank,
            to,
            lid: port.lid,
            gid,
            qps: pt
                .qps
                .iter_mut()
                .map(|(qp, psn)| QpNumbers {
                    qpn: qp.receiver().qpn(),
                    psn: *psn,
                })
                .collect(),
            mtu: port.mtu,
            window: RemoteWindow {
                addr: pt.window.as_ptr() as u64,
                rkey: pt.window_mr.rkey(),
                shape,
            },
        };
        let bytes = serde_json::to_vec(&mine).expect("an endpoint serialises");
        let mut len = [0u8; 8];
        transport::sendrecv(ctrl, to, &(bytes.len() as u64).to_le_bytes(), from, &mut len)?;
        let len = u64::from_le_bytes(len);
        if len > 1 << 16 {
            return Err(Error::peer(format!(
                "{me}: rank {from} announced an RDMA endpoint of {len} bytes; mixed collbench versions?"
            )));
        }
        let mut theirs = vec![0u8; len as usize];
        transport::sendrecv(ctrl, to, &bytes, from, &mut theirs)?;
        let ep: QpEndpoint = serde_json::from_slice(&theirs)
            .map_err(|e| Error::peer(format!("{me}: unreadable RDMA endpoint from rank {from}: {e}")))?;
        ep.validate(rank, from, lanes)
            .map_err(|e| Error::peer(format!("{me}: {e}")))?;
        remotes[from] = Some(ep);
    }

    // 3. Connect: RTR with the peer's numbers, receives posted, RTS with our PSN.
    let mut peers = Vec::with_capacity(n);
    let mut by_qpn = HashMap::new();
    let mut names = Vec::with_capacity(n);
    for (peer, (pend, remote)) in pending.into_iter().zip(remotes).enumerate() {
        let (Some(mut pend), Some(remote)) = (pend, remote) else {
            peers.push(None);
            names.push(None);
            continue;
        };
        let ctx_err = |m: RdmaError| Error::peer(format!("{me}: connecting to rank {peer}: {m}"));
        if remote.window.shape.slots > shape.slots {
            return Err(ctx_err(RdmaError::refused(format!(
                "its window has {} slots, this rank's {}: were all ranks started with the same options?",
                remote.window.shape.slots, shape.slots
            ))));
        }
        let mut conns = Vec::with_capacity(lanes);
        for (lane, (qp, psn)) in pend.qps.into_iter().enumerate() {
            let mut qp = qp.ready_to_receive(&remote, lane, &local_port).map_err(ctx_err)?;
            for _ in 0..rq {
                qp.receiver().post_recv(RECV_TAG | peer as u64).map_err(ctx_err)?;
            }
            let mut qp = qp.ready_to_send(psn).map_err(ctx_err)?;
            by_qpn.insert(qp.sender().qpn(), (peer, lane));
            conns.push(Lane {
                qp,
                in_flight: VecDeque::new(),
            });
        }
        let staging_bytes = remote.window.shape.slots as usize * staging_stride(remote.window.shape.slot_bytes);
        pend.staging = HostBuf::new(staging_bytes);
        // SAFETY: staging lives next to its registration in the PeerConn.
        let staging_mr = unsafe { Mr::register(&pd, pend.staging.as_mut_ptr(), staging_bytes) }.map_err(env_err)?;
        names.push(Some((format!("rank {peer}"), remote.window.shape)));
        peers.push(Some(PeerConn {
            lanes: conns,
            remote: remote.window,
            staging_mr,
            staging: pend.staging,
            _window_mr: pend.window_mr,
            window: pend.window,
        }));
    }
    // 4. Nobody writes before every queue pair of the job is ready.
    control::barrier(ctrl)?;
    // SAFETY: zeroed is a valid ibv_wc (plain data).
    let wc = (0..POLL_BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
    let fabric = VerbsFabric {
        peers,
        by_qpn,
        cache: MrCache::new(MR_CACHE_ENTRIES),
        wc,
        cq,
        pd,
        local_slot_bytes: shape.slot_bytes as usize,
    };
    Ok(RdmaTransport::new(rank, host.to_string(), path, fabric, names, cfg))
}
