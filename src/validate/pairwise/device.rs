//! Pairs of GPUs measured over NCCL's point-to-point (`pairwise --memory cuda`, feature `cuda`): per pair, an
//! untimed exchange, then `--iters` bidirectional exchanges (ncclSend and ncclRecv in one group) timed with
//! CUDA events on the stream, the received device buffer checked; then 8-byte round trips, each between two
//! events. The barriers and gathers between rounds stay on the TCP control path, so ranks not in a pair wait
//! there as in the TCP test.

use std::time::Duration;

use cudarc::driver::{CudaEvent, CudaSlice};

use super::measure::{self, Meter, RoundTrips, Sample};
use super::{GpuId, PairwiseConfig};
use crate::error::{Error, Result};
use crate::memory::cuda::Gpu;
use crate::nccl::pair::PairPath;
use crate::path_names::NCCL;
use crate::transport::Transport;

/// Exchanges over NCCL's point-to-point, on device buffers of `--bytes` allocated on this rank's first pair.
pub struct OverNccl<'a> {
    p2p: PairPath<'a>,
    bufs: Option<Buffers>,
    /// The 8-byte buffer of the round trips.
    small: Option<CudaSlice<u8>>,
}

/// The bandwidth exchanges' device buffers, and the host copy the received bytes are checked in.
struct Buffers {
    send: CudaSlice<u8>,
    recv: CudaSlice<u8>,
    check: Vec<u8>,
}

impl<'a> OverNccl<'a> {
    /// Pairs measured over `p2p`.
    pub fn new(p2p: PairPath<'a>) -> Self {
        OverNccl {
            p2p,
            bufs: None,
            small: None,
        }
    }

    fn gpu(&self) -> &Gpu {
        self.p2p.gpu()
    }

    /// The buffers for `bytes`, made (and the send buffer filled with this rank's pattern) on first use.
    fn buffers(&mut self, rank: usize, bytes: usize) -> Result<&mut Buffers> {
        if self.bufs.as_ref().map_or(true, |b| b.check.len() != bytes) {
            let gpu = self.p2p.gpu();
            let fail = |e: crate::memory::MemoryError| self.p2p.fail(e.into());
            let mut send = gpu.alloc(bytes).map_err(fail)?;
            let pattern = vec![measure::pattern(rank); bytes];
            gpu.upload(&pattern, &mut send).map_err(fail)?;
            // The copy may read the host bytes until the stream passes it.
            gpu.sync().map_err(fail)?;
            let recv = gpu.alloc(bytes).map_err(fail)?;
            self.bufs = Some(Buffers {
                send,
                recv,
                check: vec![0; bytes],
            });
        }
        Ok(self.bufs.as_mut().expect("made above"))
    }

    /// An event recorded on the stream now.
    fn mark(&self) -> Result<CudaEvent> {
        self.gpu().mark().map_err(|e| self.p2p.fail(e.into()))
    }

    /// Seconds between two events the stream has passed.
    fn between(&self, a: &CudaEvent, b: &CudaEvent) -> Result<f64> {
        Gpu::elapsed(a, b).map_err(|e| self.p2p.fail(e.into()))
    }
}

impl<T: Transport + ?Sized> Meter<T> for OverNccl<'_> {
    fn path(&self, _t: &T) -> String {
        NCCL.into()
    }

    /// NCCL has no congestion window to settle: one untimed exchange (connections made, buffers registered)
    /// precedes the timed ones whatever `settle` is.
    fn bandwidth(&mut self, t: &mut T, peer: usize, cfg: &PairwiseConfig, _settle: Duration) -> Result<Sample> {
        let me = t.rank();
        let bytes = cfg.bytes;
        self.buffers(me, bytes)?;
        let b = self.bufs.take().expect("made above");
        let timed = (|| {
            let mut b = b;
            self.p2p.exchange(peer, &b.send, &mut b.recv)?;
            self.p2p.wait("ncclSend/ncclRecv", bytes)?;
            let start = self.mark()?;
            for _ in 0..cfg.iters {
                self.p2p.exchange(peer, &b.send, &mut b.recv)?;
            }
            let end = self.mark()?;
            self.p2p.wait("ncclSend/ncclRecv", bytes)?;
            let secs = self.between(&start, &end)?;
            let gpu = self.p2p.gpu();
            gpu.download(&b.recv, &mut b.check)
                .map_err(|e| self.p2p.fail(e.into()))?;
            Ok::<_, Error>((secs, b))
        })();
        let (secs, b) = timed?;
        let want = measure::pattern(peer);
        let bad = b.check.iter().position(|&x| x != want);
        let at = bad.map(|off| (off, b.check[off]));
        self.bufs = Some(b);
        if let Some((off, got)) = at {
            return Err(self.p2p.fail(format!(
                "the data rank {peer} sent arrived changed at byte {off} of {bytes} (0x{got:02x}, not \
                 0x{want:02x}); the GPU-to-GPU path corrupts data"
            )));
        }
        let per_s = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
        let moved = (bytes * cfg.iters) as f64;
        Ok(Sample {
            peer,
            // Both directions run in one group and complete together: each way's rate is the group's.
            rx_gbs: per_s(moved) / 1e9,
            bidir_gbs: per_s(2.0 * moved) / 1e9,
            latency_us: None,
            stalls: None,
            lat_stats: None,
            rx_msg_rate: per_s(cfg.iters as f64),
        })
    }

    fn ping_pong(&mut self, t: &mut T, peer: usize, iters: usize) -> Result<Option<RoundTrips>> {
        let starts = t.rank() < peer;
        let warm = iters.clamp(1, 10);
        if self.small.is_none() {
            let small = self.gpu().alloc(8).map_err(|e| self.p2p.fail(e.into()))?;
            self.small = Some(small);
        }
        let mut buf = self.small.take().expect("made above");
        let run = (|| {
            // Every round trip queued between two events, then one wait: the host's scheduling is not in them.
            let mut marks = Vec::with_capacity(iters + 1);
            for i in 0..warm + iters {
                if i >= warm {
                    marks.push(self.mark()?);
                }
                self.p2p.one_way(peer, &mut buf, starts)?;
                self.p2p.one_way(peer, &mut buf, !starts)?;
            }
            marks.push(self.mark()?);
            self.p2p.wait("ncclSend/ncclRecv", 8)?;
            marks
                .windows(2)
                .map(|w| self.between(&w[0], &w[1]))
                .collect::<Result<Vec<f64>>>()
        })();
        self.small = Some(buf);
        let rtt = run?;
        Ok(starts.then(|| measure::round_trips(rtt)))
    }

    fn on_device(&self) -> bool {
        true
    }

    fn gpu(&self) -> Option<GpuId> {
        let g = self.p2p.identity();
        Some(GpuId {
            index: g.ordinal,
            bus_id: g.bus_id,
            name: g.name,
        })
    }
}
