//! Thin owners of ibverbs objects (feature `rdma`): device context, protection domain, completion queue,
//! memory region, reliable-connected queue pair. Each frees its object on drop; every failure is the
//! failing verb with the OS error and advice ([`super::advice`]).
//!
//! Teardown order is in the types: each object holds an [`Arc`] to what it was made from (a PD or CQ its
//! context, an MR its PD, a QP its PD and CQ), so the verbs library frees a parent only once nothing made
//! from it is left, whatever order the owners drop their handles in.

use std::ffi::CStr;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use rdma_sys as sys;

use super::advice::verb_error;
use super::error::RdmaError;
use super::qp::{QpOps, RtrParams, RtsParams};
use super::sysfs::{self, GidEntry, GidKind, LinkLayer};
use crate::error::stderr;

extern "C" {
    // rdma-core's exported form of the inline `ibv_query_gid_ex` (IBVERBS_1.11); rdma-sys does not bind it.
    fn _ibv_query_gid_ex(
        context: *mut sys::ibv_context,
        port_num: u32,
        gid_index: u32,
        entry: *mut sys::ibv_gid_entry,
        flags: u32,
        entry_size: usize,
    ) -> libc::c_int;
}

/// Says on stderr when a verb that frees an object refused (EBUSY: something made from it is still
/// allocated): never expected, since each object keeps what it was made from, and then worth seeing.
fn freed(rc: libc::c_int, verb: &str) {
    if rc != 0 {
        stderr!("collbench: {}", verb_error(verb, rc));
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// A null pointer from `verb` as its error.
fn non_null<T>(p: *mut T, verb: &'static str) -> Result<NonNull<T>, RdmaError> {
    NonNull::new(p).ok_or_else(|| RdmaError::verb(verb, errno()))
}

/// The names of the devices the verbs library sees (`ibv_get_device_list`); empty when it sees none.
pub fn device_names() -> Result<Vec<String>, RdmaError> {
    let mut n = 0;
    // SAFETY: n is a valid out-pointer; the list is freed below.
    let list = unsafe { sys::ibv_get_device_list(&mut n) };
    if list.is_null() {
        // ENOSYS: the kernel has no RDMA support at all; that is "no devices", not a failure.
        let e = errno();
        return if e == libc::ENOSYS || e == libc::ENODEV || e == libc::ENOENT {
            Ok(Vec::new())
        } else {
            Err(RdmaError::verb("ibv_get_device_list", e))
        };
    }
    let mut names = Vec::new();
    for i in 0..n.max(0) as usize {
        // SAFETY: the list has n valid device pointers; names are NUL-terminated strings owned by them.
        unsafe {
            let dev = *list.add(i);
            names.push(
                CStr::from_ptr(sys::ibv_get_device_name(dev))
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    // SAFETY: list came from ibv_get_device_list.
    unsafe { sys::ibv_free_device_list(list) };
    Ok(names)
}

/// The devices the verbs library sees with their ports, for `collbench info` on a host whose sysfs has no
/// RDMA tree (a container without /sys/class/infiniband, or a software provider): what `ibv_devinfo` shows.
pub fn inventory() -> Vec<crate::net::rdma::RdmaDevice> {
    let names = device_names().unwrap_or_default();
    names
        .into_iter()
        .filter_map(|name| {
            let ctx = Context::open(&name).ok()?;
            // Ports count from 1; the first that does not answer is past the last.
            let ports = (1..=8u8)
                .map_while(|p| ctx.query_port(p).ok().map(|a| (p, a)))
                .map(|(p, a)| {
                    let gids: Vec<crate::net::rdma::RdmaGid> = (0..a.gid_tbl_len.min(256))
                        .filter_map(|i| ctx.query_gid_ex(p, i))
                        .map(|(e, netdev)| crate::net::rdma::RdmaGid {
                            index: e.index as u32,
                            gid: crate::net::rdma::gid_text(&e.gid),
                            kind: Some(
                                match (e.kind, a.link_layer) {
                                    (GidKind::RoceV2, _) => "RoCE v2",
                                    (GidKind::IbOrRoceV1, LinkLayer::InfiniBand) => "IB",
                                    (GidKind::IbOrRoceV1, _) => "RoCE v1",
                                    (GidKind::Unknown, _) => "unknown",
                                }
                                .to_string(),
                            ),
                            netdev,
                        })
                        .collect();
                    // The port's network devices: those its GID entries belong to (RoCE), in table order.
                    let mut netdevs: Vec<String> = Vec::new();
                    for n in gids.iter().filter_map(|g| g.netdev.clone()) {
                        if !netdevs.contains(&n) {
                            netdevs.push(n);
                        }
                    }
                    crate::net::rdma::RdmaPort {
                        port: p as u32,
                        state: Some(if a.active { "ACTIVE" } else { "DOWN" }.to_string()),
                        phys_state: None,
                        rate: a.rate_gbit.map(|g| format!("{g} Gb/sec")),
                        link_layer: Some(
                            match a.link_layer {
                                LinkLayer::InfiniBand => "InfiniBand",
                                LinkLayer::Ethernet => "Ethernet",
                                LinkLayer::Unknown => "Unknown",
                            }
                            .to_string(),
                        ),
                        gids,
                        netdevs,
                    }
                })
                .collect();
            Some(crate::net::rdma::RdmaDevice {
                name,
                node_guid: None,
                ports,
            })
        })
        .collect()
}

/// What a port reports through `ibv_query_port`.
#[derive(Clone, Debug)]
pub struct PortAttr {
    pub active: bool,
    pub lid: u16,
    /// Active MTU in bytes.
    pub mtu: u32,
    pub link_layer: LinkLayer,
    /// Entries in the port's GID table.
    pub gid_tbl_len: u32,
    /// Signalling rate in Gbit/s from the active width and speed, as `ibv_devinfo` shows them; `None` for
    /// codes this table does not know.
    pub rate_gbit: Option<f64>,
}

/// Gbit/s of an `ibv_port_attr` active width x active speed (IB spec: width 1x/4x/8x/12x/2x; speed SDR to
/// NDR per lane).
fn port_rate_gbit(width: u8, speed: u8) -> Option<f64> {
    let lanes = match width {
        1 => 1.0,
        2 => 4.0,
        4 => 8.0,
        8 => 12.0,
        16 => 2.0,
        _ => return None,
    };
    let per_lane = match speed {
        1 => 2.5,
        2 => 5.0,
        4 | 8 => 10.0,
        16 => 14.0,
        32 => 25.0,
        64 => 50.0,
        128 => 100.0,
        _ => return None,
    };
    Some(lanes * per_lane)
}

/// An open device; shared ([`Arc`]) by the protection domains and completion queues made from it.
pub struct Context {
    ctx: NonNull<sys::ibv_context>,
    /// The device's name.
    pub name: String,
}

// SAFETY: verbs objects may be used from any thread; collbench uses each from one thread at a time.
unsafe impl Send for Context {}
// SAFETY: libibverbs' verbs are thread-safe; shared references only query the device and keep it open for
// the objects made from it.
unsafe impl Sync for Context {}

impl Context {
    /// Opens device `name`, or says what was looked for when it is not there.
    pub fn open(name: &str) -> Result<Arc<Context>, RdmaError> {
        let names = device_names()?;
        let mut n = 0;
        // SAFETY: as in device_names.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        let mut found = ptr::null_mut();
        for i in 0..if list.is_null() { 0 } else { n.max(0) as usize } {
            // SAFETY: n valid entries.
            unsafe {
                let dev = *list.add(i);
                if CStr::from_ptr(sys::ibv_get_device_name(dev)).to_bytes() == name.as_bytes() {
                    found = sys::ibv_open_device(dev);
                    if found.is_null() {
                        let e = errno();
                        sys::ibv_free_device_list(list);
                        return Err(RdmaError::verb("ibv_open_device", e).at(name));
                    }
                }
            }
        }
        if !list.is_null() {
            // SAFETY: from ibv_get_device_list; the opened context stays valid after the list is freed.
            unsafe { sys::ibv_free_device_list(list) };
        }
        match NonNull::new(found) {
            Some(ctx) => Ok(Arc::new(Context {
                ctx,
                name: name.to_string(),
            })),
            None => Err(RdmaError::NoDevice(sysfs::describe_missing(
                std::path::Path::new(sysfs::SYSFS_IB),
                name,
                &names,
            ))),
        }
    }

    /// `ibv_query_port`.
    pub fn query_port(&self, port: u8) -> Result<PortAttr, RdmaError> {
        // SAFETY: zeroed is a valid ibv_port_attr.
        let mut a: sys::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open; the call writes only `a`.
        let rc = unsafe { sys::___ibv_query_port(self.ctx.as_ptr(), port, &mut a) };
        if rc != 0 {
            return Err(RdmaError::verb("ibv_query_port", rc).at(format!("{} port {port}", self.name)));
        }
        Ok(PortAttr {
            active: a.state == sys::ibv_port_state::IBV_PORT_ACTIVE,
            lid: a.lid,
            mtu: 128 << a.active_mtu,
            link_layer: match a.link_layer {
                1 => LinkLayer::InfiniBand,
                2 => LinkLayer::Ethernet,
                _ => LinkLayer::Unknown,
            },
            gid_tbl_len: a.gid_tbl_len.max(0) as u32,
            rate_gbit: port_rate_gbit(a.active_width, a.active_speed),
        })
    }

    /// The port's non-empty GID table entries with their kinds, read through verbs as `ibv_devinfo -v`
    /// does (`ibv_query_gid_ex`); unused entries are left out.
    pub fn gid_table(&self, port: u8, len: u32) -> Vec<GidEntry> {
        (0..len.min(256))
            .filter_map(|index| self.query_gid_ex(port, index).map(|(e, _)| e))
            .collect()
    }

    /// Entry `index` of the port's GID table with the network device it belongs to (RoCE), through
    /// `ibv_query_gid_ex`; `None` for an unused entry or one the device cannot read.
    pub fn query_gid_ex(&self, port: u8, index: u32) -> Option<(GidEntry, Option<String>)> {
        // SAFETY: zeroed is a valid entry.
        let mut e: sys::ibv_gid_entry = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open; the size passed is the struct's, which the call writes.
        let rc = unsafe {
            _ibv_query_gid_ex(
                self.ctx.as_ptr(),
                port as u32,
                index,
                &mut e,
                0,
                std::mem::size_of::<sys::ibv_gid_entry>(),
            )
        };
        // SAFETY: raw is the union's byte view.
        let gid = unsafe { e.gid.raw };
        // Nonzero: an unused entry (ENODATA) or one the device cannot read; zeros: unused.
        if rc != 0 || gid == [0; 16] {
            return None;
        }
        let kind = match e.gid_type {
            sys::IBV_GID_TYPE_ROCE_V2 => GidKind::RoceV2,
            sys::IBV_GID_TYPE_IB | sys::IBV_GID_TYPE_ROCE_V1 => GidKind::IbOrRoceV1,
            _ => GidKind::Unknown,
        };
        let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
        // SAFETY: name has IF_NAMESIZE bytes, as if_indextoname requires; it writes a NUL-terminated name.
        let netdev = (e.ndev_ifindex != 0
            && !unsafe { libc::if_indextoname(e.ndev_ifindex, name.as_mut_ptr()) }.is_null())
        // SAFETY: NUL-terminated by if_indextoname on success.
        .then(|| unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned());
        Some((
            GidEntry {
                index: index as u8,
                gid,
                kind,
            },
            netdev,
        ))
    }

    /// `ibv_query_gid`.
    pub fn query_gid(&self, port: u8, index: u8) -> Result<[u8; 16], RdmaError> {
        // SAFETY: zeroed is a valid gid.
        let mut g: sys::ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open; the call writes only `g`.
        let rc = unsafe { sys::ibv_query_gid(self.ctx.as_ptr(), port, index as i32, &mut g) };
        if rc != 0 {
            return Err(RdmaError::verb("ibv_query_gid", errno()).at(format!("{} port {port}", self.name)));
        }
        // SAFETY: raw is the union's byte view.
        Ok(unsafe { g.raw })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: opened in open(); every PD and CQ made from it holds an Arc to it, so none is left.
        let rc = unsafe { sys::ibv_close_device(self.ctx.as_ptr()) };
        freed(rc, "ibv_close_device");
    }
}

/// A protection domain; keeps its device open, and is kept by the regions and queue pairs made in it.
pub struct Pd {
    pd: NonNull<sys::ibv_pd>,
    _ctx: Arc<Context>,
}

// SAFETY: as for Context.
unsafe impl Send for Pd {}
// SAFETY: as for Context: shared references only keep the domain allocated for its regions and queue pairs.
unsafe impl Sync for Pd {}

impl Pd {
    /// `ibv_alloc_pd`.
    pub fn new(ctx: &Arc<Context>) -> Result<Arc<Pd>, RdmaError> {
        // SAFETY: the context is open (`ctx` keeps it so).
        let pd = non_null(unsafe { sys::ibv_alloc_pd(ctx.ctx.as_ptr()) }, "ibv_alloc_pd")?;
        Ok(Arc::new(Pd {
            pd,
            _ctx: Arc::clone(ctx),
        }))
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: allocated in new(); every region and queue pair in it holds an Arc to it, so none is left
        // (ibv_dealloc_pd would refuse with EBUSY otherwise), and the context is still open (held in `_ctx`,
        // dropped after this body).
        let rc = unsafe { sys::ibv_dealloc_pd(self.pd.as_ptr()) };
        freed(rc, "ibv_dealloc_pd");
    }
}

/// A registered memory region; keeps its protection domain.
pub struct Mr {
    mr: NonNull<sys::ibv_mr>,
    _pd: Arc<Pd>,
}

// SAFETY: as for Context.
unsafe impl Send for Mr {}

impl Mr {
    /// `ibv_reg_mr` of `addr..addr+len` for local reads and remote writes.
    ///
    /// # Safety
    /// The memory must stay mapped while the region exists.
    pub unsafe fn register(pd: &Arc<Pd>, addr: *mut u8, len: usize) -> Result<Mr, RdmaError> {
        let access = sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 | sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
        // SAFETY: the caller keeps the memory mapped; the pd is valid (`pd` keeps it allocated).
        let mr = unsafe { sys::ibv_reg_mr(pd.pd.as_ptr(), addr.cast(), len.max(1), access as i32) };
        Ok(Mr {
            mr: non_null(mr, "ibv_reg_mr")?,
            _pd: Arc::clone(pd),
        })
    }

    /// Local key.
    pub fn lkey(&self) -> u32 {
        // SAFETY: valid until drop.
        unsafe { self.mr.as_ref().lkey }
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        // SAFETY: valid until drop.
        unsafe { self.mr.as_ref().rkey }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered in register(); its protection domain is still allocated (held in `_pd`, dropped
        // after this body).
        let rc = unsafe { sys::ibv_dereg_mr(self.mr.as_ptr()) };
        freed(rc, "ibv_dereg_mr");
    }
}

/// A completion queue; keeps its device open, and is kept by the queue pairs that complete into it.
pub struct Cq {
    cq: NonNull<sys::ibv_cq>,
    _ctx: Arc<Context>,
}

// SAFETY: as for Context.
unsafe impl Send for Cq {}
// SAFETY: as for Context: ibv_poll_cq is thread-safe, and collbench polls each queue from one thread.
unsafe impl Sync for Cq {}

impl Cq {
    /// `ibv_create_cq` with room for `entries` completions.
    pub fn new(ctx: &Arc<Context>, entries: u32) -> Result<Arc<Cq>, RdmaError> {
        // SAFETY: the context is open (`ctx` keeps it so); no channel (completions are polled).
        let cq = unsafe { sys::ibv_create_cq(ctx.ctx.as_ptr(), entries as i32, ptr::null_mut(), ptr::null_mut(), 0) };
        Ok(Arc::new(Cq {
            cq: non_null(cq, "ibv_create_cq")?,
            _ctx: Arc::clone(ctx),
        }))
    }

    /// Polls up to `wc.len()` completions; returns how many.
    pub fn poll(&self, wc: &mut [sys::ibv_wc]) -> Result<usize, RdmaError> {
        // SAFETY: wc has room for wc.len() entries; the queue is valid until drop.
        let rc = unsafe { sys::ibv_poll_cq(self.cq.as_ptr(), wc.len() as i32, wc.as_mut_ptr()) };
        if rc < 0 {
            return Err(RdmaError::verb("ibv_poll_cq", errno()));
        }
        Ok(rc as usize)
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: created in new(); every queue pair using it holds an Arc to it, so none is left (the verbs
        // refuse with EBUSY otherwise), and the context is still open (held in `_ctx`, dropped after this body).
        let rc = unsafe { sys::ibv_destroy_cq(self.cq.as_ptr()) };
        freed(rc, "ibv_destroy_cq");
    }
}

/// Sizes of a queue pair.
#[derive(Clone, Copy, Debug)]
pub struct QpCaps {
    pub send_wr: u32,
    pub recv_wr: u32,
    pub inline: u32,
}

/// A reliable-connected queue pair (its state is tracked by [`super::qp::Qp`]); keeps its protection domain
/// and completion queue.
pub struct RcQp {
    qp: NonNull<sys::ibv_qp>,
    /// Inline bytes the device granted.
    pub max_inline: u32,
    _pd: Arc<Pd>,
    _cq: Arc<Cq>,
}

// SAFETY: as for Context.
unsafe impl Send for RcQp {}

impl RcQp {
    /// `ibv_create_qp` of type RC on `cq` (both directions), every send signalled.
    pub fn new(pd: &Arc<Pd>, cq: &Arc<Cq>, caps: QpCaps) -> Result<RcQp, RdmaError> {
        // SAFETY: zeroed is a valid init attr; fields set below.
        let mut a: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        a.send_cq = cq.cq.as_ptr();
        a.recv_cq = cq.cq.as_ptr();
        a.qp_type = sys::ibv_qp_type::IBV_QPT_RC;
        a.sq_sig_all = 1;
        a.cap.max_send_wr = caps.send_wr;
        a.cap.max_recv_wr = caps.recv_wr;
        a.cap.max_send_sge = 1;
        a.cap.max_recv_sge = 1;
        a.cap.max_inline_data = caps.inline;
        // SAFETY: pd and cq are valid; a is initialised; the library writes the granted caps back.
        let qp = non_null(unsafe { sys::ibv_create_qp(pd.pd.as_ptr(), &mut a) }, "ibv_create_qp")?;
        Ok(RcQp {
            qp,
            max_inline: a.cap.max_inline_data,
            _pd: Arc::clone(pd),
            _cq: Arc::clone(cq),
        })
    }

    /// The queue pair number.
    pub fn qpn(&self) -> u32 {
        // SAFETY: valid until drop.
        unsafe { self.qp.as_ref().qp_num }
    }

    fn modify(&mut self, a: &mut sys::ibv_qp_attr, mask: u32, verb: &'static str) -> Result<(), RdmaError> {
        // SAFETY: the queue pair is valid; a is initialised for the fields in mask.
        let rc = unsafe { sys::ibv_modify_qp(self.qp.as_ptr(), a, mask as i32) };
        if rc != 0 {
            return Err(RdmaError::verb(verb, rc));
        }
        Ok(())
    }

    /// Moves the queue pair to the error state: outstanding work is flushed and the device stops
    /// touching posted memory.
    pub fn to_error(&mut self) {
        // SAFETY: zeroed attr with only the state set.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_ERR;
        let _best_effort = self.modify(&mut a, sys::ibv_qp_attr_mask::IBV_QP_STATE.0, "ibv_modify_qp(ERR)");
    }

    /// Posts a receive with no buffer (writes with immediate carry their data to the window, not here).
    pub fn post_recv(&mut self, wr_id: u64) -> Result<(), RdmaError> {
        let mut wr = sys::ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: ptr::null_mut(),
            num_sge: 0,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: wr is valid for the call.
        let rc = unsafe { sys::ibv_post_recv(self.qp.as_ptr(), &mut wr, &mut bad) };
        if rc != 0 {
            return Err(RdmaError::verb("ibv_post_recv", rc));
        }
        Ok(())
    }

    /// Posts an RDMA WRITE of `len` bytes at `src` (`lkey`, or inline when `lkey` is `None`) to
    /// `remote_addr`/`rkey`, WITH IMMEDIATE `imm` when there is one (which consumes a receive at the peer).
    ///
    /// # Safety
    /// `src..src+len` must stay valid until the completion (inline: until the call returns).
    pub unsafe fn post_write(
        &mut self,
        wr_id: u64,
        src: *const u8,
        len: usize,
        lkey: Option<u32>,
        remote: (u64, u32),
        imm: Option<u32>,
    ) -> Result<(), RdmaError> {
        let mut sge = sys::ibv_sge {
            addr: src as u64,
            length: len as u32,
            lkey: lkey.unwrap_or(0),
        };
        // SAFETY: zeroed is a valid send wr; fields set below.
        let mut wr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.opcode = match imm {
            Some(_) => sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM,
            None => sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE,
        };
        wr.send_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
        if lkey.is_none() {
            wr.send_flags |= sys::ibv_send_flags::IBV_SEND_INLINE.0;
        }
        if len > 0 {
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
        }
        wr.imm_data_invalidated_rkey_union.imm_data = imm.unwrap_or(0).to_be();
        wr.wr.rdma = sys::rdma_t {
            remote_addr: remote.0,
            rkey: remote.1,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: wr and sge live for the call; the caller keeps src valid as documented.
        let rc = unsafe { sys::ibv_post_send(self.qp.as_ptr(), &mut wr, &mut bad) };
        if rc != 0 {
            return Err(RdmaError::verb("ibv_post_send", rc));
        }
        Ok(())
    }
}

impl QpOps for RcQp {
    fn modify_to_init(&mut self, port: u8) -> Result<(), RdmaError> {
        // SAFETY: zeroed attr, fields set below.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = port;
        a.qp_access_flags =
            sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 | sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
        use sys::ibv_qp_attr_mask as m;
        let mask = m::IBV_QP_STATE.0 | m::IBV_QP_PKEY_INDEX.0 | m::IBV_QP_PORT.0 | m::IBV_QP_ACCESS_FLAGS.0;
        self.modify(&mut a, mask, "ibv_modify_qp(INIT)")
    }

    fn modify_to_rtr(&mut self, p: &RtrParams) -> Result<(), RdmaError> {
        // SAFETY: zeroed attr, fields set below.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_RTR;
        a.path_mtu = match p.path_mtu {
            256 => sys::ibv_mtu::IBV_MTU_256,
            512 => sys::ibv_mtu::IBV_MTU_512,
            1024 => sys::ibv_mtu::IBV_MTU_1024,
            2048 => sys::ibv_mtu::IBV_MTU_2048,
            _ => sys::ibv_mtu::IBV_MTU_4096,
        };
        a.dest_qp_num = p.dest_qpn;
        a.rq_psn = p.rq_psn;
        a.max_dest_rd_atomic = p.max_dest_rd_atomic;
        a.min_rnr_timer = p.min_rnr_timer;
        a.ah_attr.dlid = p.dlid;
        a.ah_attr.port_num = p.port;
        if let Some((gid, index)) = p.grh {
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid = sys::ibv_gid { raw: gid };
            a.ah_attr.grh.sgid_index = index;
            a.ah_attr.grh.hop_limit = 64;
        }
        use sys::ibv_qp_attr_mask as m;
        let mask = m::IBV_QP_STATE.0
            | m::IBV_QP_AV.0
            | m::IBV_QP_PATH_MTU.0
            | m::IBV_QP_DEST_QPN.0
            | m::IBV_QP_RQ_PSN.0
            | m::IBV_QP_MAX_DEST_RD_ATOMIC.0
            | m::IBV_QP_MIN_RNR_TIMER.0;
        self.modify(&mut a, mask, "ibv_modify_qp(RTR)")
    }

    fn modify_to_rts(&mut self, p: &RtsParams) -> Result<(), RdmaError> {
        // SAFETY: zeroed attr, fields set below.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_RTS;
        a.sq_psn = p.sq_psn;
        a.timeout = p.timeout;
        a.retry_cnt = p.retry_cnt;
        a.rnr_retry = p.rnr_retry;
        a.max_rd_atomic = p.max_rd_atomic;
        use sys::ibv_qp_attr_mask as m;
        let mask = m::IBV_QP_STATE.0
            | m::IBV_QP_TIMEOUT.0
            | m::IBV_QP_RETRY_CNT.0
            | m::IBV_QP_RNR_RETRY.0
            | m::IBV_QP_SQ_PSN.0
            | m::IBV_QP_MAX_QP_RD_ATOMIC.0;
        self.modify(&mut a, mask, "ibv_modify_qp(RTS)")
    }
}

impl Drop for RcQp {
    fn drop(&mut self) {
        // SAFETY: created in new(); its protection domain and completion queue are still allocated (held in
        // `_pd` and `_cq`, dropped after this body).
        let rc = unsafe { sys::ibv_destroy_qp(self.qp.as_ptr()) };
        freed(rc, "ibv_destroy_qp");
    }
}
