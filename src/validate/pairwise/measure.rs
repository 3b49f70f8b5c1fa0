//! The measurements of one pairwise test, written only against the [`Transport`] trait: per round, every
//! pair at once runs a bidirectional bandwidth exchange, then (after a barrier) an 8-byte ping-pong; a
//! barrier separates rounds so pairs of different rounds never overlap. Each rank then sends what it measured to rank 0.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::median::median;
use super::schedule;
use super::{Link, PairwiseConfig, Participant};
use crate::algorithm::control;
use crate::error::{Error, Result};
use crate::transport::{self, Transport};

/// What the matrix's rows and columns are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// One rank per host.
    Hosts,
    /// Every rank (all on one host, or asked for).
    Ranks,
}

impl Unit {
    /// The name in the report (`hosts`, `ranks`).
    pub fn name(self) -> &'static str {
        match self {
            Unit::Hosts => "hosts",
            Unit::Ranks => "ranks",
        }
    }
}

/// The ranks that take part, ascending, given each rank's host: with `per_host` the lowest rank of every
/// host (pairs are hosts), unless all ranks share one host, where pairs are ranks; else every rank.
pub fn participants(hosts: &[String], per_host: bool) -> (Vec<usize>, Unit) {
    let single_host = hosts.iter().all(|h| *h == hosts[0]);
    if !per_host || single_host {
        return ((0..hosts.len()).collect(), Unit::Ranks);
    }
    let mut seen: Vec<&str> = Vec::new();
    let mut parts = Vec::new();
    for (r, h) in hosts.iter().enumerate() {
        if !seen.contains(&h.as_str()) {
            seen.push(h);
            parts.push(r);
        }
    }
    (parts, Unit::Hosts)
}

/// What one rank measured with one partner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The partner's rank.
    pub peer: usize,
    /// GB/s received from the partner while sending to it (the timed iterations' bytes over their time).
    pub rx_gbs: f64,
    /// Both directions' bytes over the time of the whole exchanges, GB/s.
    pub bidir_gbs: f64,
    /// Half the median round trip, us; only the pair's lower rank (which starts each round trip) has it.
    pub latency_us: Option<f64>,
    /// Round trips that stalled (see [`STALL_MIN_S`]); like the latency, the lower rank's.
    pub stalls: Option<u64>,
    /// The ping-pong's latency distribution and message rate; like the latency, the lower rank's.
    #[serde(default)]
    pub lat_stats: Option<LatencyStats>,
    /// Messages of the bandwidth size received per second from the partner (the timed iterations over their
    /// time).
    #[serde(default)]
    pub rx_msg_rate: f64,
}

pub use crate::results::latency::LatencyStats;

/// A round trip stalled when it took this long, and [`STALL_FACTOR`] x the median: on a path whose median
/// is microseconds to milliseconds that is a retransmission timeout (a lost packet, at least 200 ms on
/// Linux), far beyond a busy host's scheduling delays.
pub const STALL_MIN_S: f64 = 0.05;
/// See [`STALL_MIN_S`].
pub const STALL_FACTOR: f64 = 20.0;

/// How one pair's exchanges are measured, `T` being the path the ranks' barriers and gathers use: over that
/// transport itself ([`OverTransport`]), or over a library's point-to-point on device buffers with `T` as
/// the control path (`super::device`, feature `cuda`).
pub trait Meter<T: Transport + ?Sized> {
    /// The path measured, as the report names it.
    fn path(&self, t: &T) -> String;

    /// The bandwidth of the exchanges with `peer` (the latency filled in later), warming for `settle` where
    /// the path has a congestion control to settle; the received data checked.
    fn bandwidth(&mut self, t: &mut T, peer: usize, cfg: &PairwiseConfig, settle: Duration) -> Result<Sample>;

    /// `iters` timed 8-byte round trips with `peer`: on the lower rank (which starts each) half the median in
    /// microseconds, the stalls and the distribution; `None` on the higher.
    fn ping_pong(&mut self, t: &mut T, peer: usize, iters: usize) -> Result<Option<RoundTrips>>;

    /// Whether the pairs are GPUs (every rank's [`Meter::gpu`] is gathered for the report); the same on
    /// every rank.
    fn on_device(&self) -> bool {
        false
    }

    /// This rank's GPU, where the pairs are GPUs.
    fn gpu(&self) -> Option<super::GpuId> {
        None
    }
}

/// A ping-pong's outcome on the rank that started it: half the median round trip (us), the round trips that
/// stalled, and the distribution.
pub type RoundTrips = (f64, u64, Option<LatencyStats>);

/// Pairs measured over the transport the ranks share, on host buffers of `--bytes` (allocated on the first
/// pair, so ranks that never take part allocate nothing).
#[derive(Default)]
pub struct OverTransport {
    sbuf: Vec<u8>,
    rbuf: Vec<u8>,
}

impl<T: Transport + ?Sized> Meter<T> for OverTransport {
    fn path(&self, t: &T) -> String {
        t.path()
    }

    fn bandwidth(&mut self, t: &mut T, peer: usize, cfg: &PairwiseConfig, settle: Duration) -> Result<Sample> {
        if self.sbuf.len() != cfg.bytes {
            // Filled once; the content is checked at the receiver.
            self.sbuf = vec![pattern(t.rank()); cfg.bytes];
            self.rbuf = vec![0u8; cfg.bytes];
        }
        Ok(bandwidth(t, peer, cfg, settle, &self.sbuf, &mut self.rbuf)?.0)
    }

    fn ping_pong(&mut self, t: &mut T, peer: usize, iters: usize) -> Result<Option<RoundTrips>> {
        ping_pong(t, peer, iters)
    }
}

/// The byte every rank fills its send buffer with, so a receiver can tell whose data arrived.
pub(super) fn pattern(rank: usize) -> u8 {
    (rank as u8).wrapping_mul(37).wrapping_add(11)
}

/// How long a pair measured again exchanges untimed before its timed exchanges, as iperf3's `--omit` leaves
/// out a test's start: what the first pass read may have been a congestion control's own probe, not the
/// link. BBR, when it has not seen the path's least round trip for 10 s (a connection kept busy by the
/// collectives, then idle, checks on its first acknowledgements), holds 4 packets in flight for 200 ms: at
/// 40 us round trips, 0.14 GB/s whatever the link, and a 4 MiB x 6 exchange fits inside it. A suspect that
/// is the link stays slow after it; one the probe made does not.
pub const SETTLE: Duration = Duration::from_millis(300);

/// What the pair's lower rank says in an exchange's start ticks: the exchange is untimed (warming the
/// connection) or timed. The higher rank follows, so both run the same exchanges however long warming takes.
const TICK_TIMED: u8 = 1;
/// See [`TICK_TIMED`].
const TICK_WARM: u8 = 2;

/// Runs every round of `rounds` (over indices into `parts`, the participating ranks), each pair warming its
/// connection for `settle` (at least one exchange) before the timed ones; returns what this rank measured
/// (nothing on a rank that does not take part). Every rank runs the barriers.
pub fn run_rounds<T: Transport + ?Sized>(
    t: &mut T,
    meter: &mut dyn Meter<T>,
    parts: &[usize],
    rounds: &[Vec<(usize, usize)>],
    cfg: &PairwiseConfig,
    settle: Duration,
) -> Result<Vec<Sample>> {
    let me = t.rank();
    let my_index = parts.iter().position(|&r| r == me);
    let mut samples = Vec::new();
    for round in rounds {
        let peer = my_index.and_then(|i| schedule::partner(round, i)).map(|j| parts[j]);
        // Bandwidth, then latency, each phase closed by a barrier: a pair's round trips never share the
        // hosts' CPUs and links with another pair's bulk transfer.
        let mut sample = match peer {
            Some(p) => Some(meter.bandwidth(t, p, cfg, settle)?),
            None => None,
        };
        control::barrier(t)?;
        if let Some(s) = &mut sample {
            if let Some((lat, stalls, stats)) = meter.ping_pong(t, s.peer, cfg.lat_iters)? {
                s.latency_us = Some(lat);
                s.stalls = Some(stalls);
                s.lat_stats = stats;
            }
        }
        control::barrier(t)?;
        samples.extend(sample);
    }
    Ok(samples)
}

/// The untimed exchanges before a pair's timed ones.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Warmed {
    /// How many ran.
    exchanges: usize,
    /// Seconds from the first of them until this rank began the timed ones (on the higher rank, the last
    /// check before it learned they had begun).
    seconds: f64,
}

/// The bandwidth of the exchanges with `peer` after warming for `settle` (its latency is filled in later),
/// and the warming done.
fn bandwidth<T: Transport + ?Sized>(
    t: &mut T,
    peer: usize,
    cfg: &PairwiseConfig,
    settle: Duration,
    sbuf: &[u8],
    rbuf: &mut [u8],
) -> Result<(Sample, Warmed)> {
    let mut rx = Vec::with_capacity(cfg.iters);
    let mut whole = Vec::with_capacity(cfg.iters);
    let leads = t.rank() < peer;
    let began = Instant::now();
    let mut warmed = 0usize;
    let mut warm_s = 0.0;
    // Untimed exchanges first, at least one (connections warm up, TCP leaves slow start, and with `-n 0` the
    // data is still checked), for `settle` on the lower rank's clock; it says which each exchange is.
    while rx.len() < cfg.iters || warmed == 0 {
        let now = began.elapsed();
        let say = match leads {
            true if warmed == 0 || now < settle => TICK_WARM,
            true => TICK_TIMED,
            false => 0,
        };
        let (r, w, heard) = exchange(t, peer, sbuf, rbuf, say)?;
        match if leads { say } else { heard } {
            TICK_WARM => warmed += 1,
            TICK_TIMED => {
                if rx.is_empty() {
                    warm_s = now.as_secs_f64();
                }
                rx.push(r);
                whole.push(w);
            }
            other => {
                return Err(Error::peer(format!(
                    "rank {}: rank {peer} started a pairwise exchange over {} with {other}, neither timed nor \
                     warming; were all ranks started with the same collbench version?",
                    t.rank(),
                    t.path()
                )))
            }
        }
    }
    let want = pattern(peer);
    if let Some(off) = rbuf.iter().position(|&b| b != want) {
        return Err(Error::peer(format!(
            "rank {}: the data rank {peer} sent over {} arrived changed at byte {off} of {} (0x{:02x}, not \
             0x{want:02x}); the path corrupts data",
            t.rank(),
            t.path(),
            rbuf.len(),
            rbuf[off]
        )));
    }
    let gbs = |bytes: usize, secs: f64| if secs > 0.0 { bytes as f64 / secs / 1e9 } else { 0.0 };
    let sample = Sample {
        peer,
        // Bytes over the total time, not a median: a lossy link stalls now and then (retransmission
        // timeouts), and those stalls are what its users feel.
        rx_gbs: gbs(cfg.bytes * cfg.iters, rx.iter().sum()),
        bidir_gbs: gbs(2 * cfg.bytes * cfg.iters, whole.iter().sum()),
        latency_us: None,
        stalls: None,
        lat_stats: None,
        rx_msg_rate: {
            let secs: f64 = rx.iter().sum();
            if secs > 0.0 {
                cfg.iters as f64 / secs
            } else {
                0.0
            }
        },
    };
    Ok((
        sample,
        Warmed {
            exchanges: warmed,
            seconds: warm_s,
        },
    ))
}

/// One bidirectional exchange, its start ticks saying `say`: seconds until this rank's receive completed,
/// and until both did, and what the peer said.
fn exchange<T: Transport + ?Sized>(
    t: &mut T,
    peer: usize,
    sbuf: &[u8],
    rbuf: &mut [u8],
    say: u8,
) -> Result<(f64, f64, u8)> {
    // Both sides start together: one-byte exchanges right before. Twice, because the first may queue behind
    // the previous iteration's data still leaving a side's interface (its send completed into the socket,
    // not onto the wire): that side would start its clock late and the other early. The second ones are
    // sent once both sides hold all of the other's data, so nothing is queued ahead of them.
    let mut tick = [0u8; 1];
    for _ in 0..2 {
        transport::sendrecv(t, peer, &[say], peer, &mut tick)?;
    }
    let start = Instant::now();
    // SAFETY: both buffers are borrowed for the whole call and both requests are waited for before it
    // returns; on error the transport is poisoned and never touches them again.
    unsafe {
        let r = t.post_recv(peer, rbuf.as_mut_ptr(), rbuf.len())?;
        let s = t.post_send(peer, sbuf.as_ptr(), sbuf.len())?;
        t.wait(r)?;
        let rx = start.elapsed().as_secs_f64();
        t.wait(s)?;
        Ok((rx, start.elapsed().as_secs_f64(), tick[0]))
    }
}

/// `iters` timed 8-byte round trips (after a few untimed ones); the lower rank starts each and returns
/// half the median in microseconds, the number that stalled and the distribution; the higher one echoes and
/// returns `None`.
fn ping_pong<T: Transport + ?Sized>(t: &mut T, peer: usize, iters: usize) -> Result<Option<RoundTrips>> {
    let starts = t.rank() < peer;
    let warm = iters.clamp(1, 10);
    let mut buf = [0u8; 8];
    let mut rtt = Vec::with_capacity(iters);
    for i in 0..warm + iters {
        if starts {
            let t0 = Instant::now();
            transport::send(t, peer, &buf)?;
            transport::recv(t, peer, &mut buf)?;
            if i >= warm {
                rtt.push(t0.elapsed().as_secs_f64());
            }
        } else {
            transport::recv(t, peer, &mut buf)?;
            transport::send(t, peer, &buf)?;
        }
    }
    if !starts {
        return Ok(None);
    }
    Ok(Some(round_trips(rtt)))
}

/// What the round trips `rtt` (seconds) come to: half the median in microseconds, the stalls, the distribution.
pub(super) fn round_trips(mut rtt: Vec<f64>) -> RoundTrips {
    let mid = median(&mut rtt);
    let stall = (STALL_FACTOR * mid).max(STALL_MIN_S);
    let stalls = rtt.iter().filter(|&&x| x >= stall).count() as u64;
    (mid / 2.0 * 1e6, stalls, LatencyStats::of_round_trips(&mut rtt))
}

/// Gathers every rank's `mine` on rank 0 as JSON (`None` on the others); a part a rank sends that cannot be
/// read as `V` is a protocol error, `what` naming it.
pub fn gather_json<T, M, V>(t: &mut T, mine: &M, what: &str) -> Result<Option<Vec<V>>>
where
    T: Transport + ?Sized,
    M: Serialize + ?Sized,
    V: serde::de::DeserializeOwned,
{
    let bytes = serde_json::to_vec(mine).expect("a rank's part serialises");
    let Some(all) = control::gather(t, &bytes)? else {
        return Ok(None);
    };
    all.iter()
        .enumerate()
        .map(|(r, b)| {
            serde_json::from_slice(b).map_err(|e| {
                Error::peer(format!(
                    "rank 0: rank {r} sent unreadable {what} ({e}); were all ranks started with the same collbench \
                     version?"
                ))
            })
        })
        .collect::<Result<Vec<V>>>()
        .map(Some)
}

/// Gathers every rank's samples on rank 0 (`None` on the others).
pub fn collect<T: Transport + ?Sized>(t: &mut T, mine: &[Sample]) -> Result<Option<Vec<Vec<Sample>>>> {
    gather_json(t, mine, "pairwise samples")
}

/// Every pair of `parts` as a link, from the samples of each rank (`all[rank]`); a pair one side did not
/// report is a protocol error.
pub fn links(parts: &[Participant], all: &[Vec<Sample>]) -> Result<Vec<Link>> {
    let pairs: Vec<(usize, usize)> = (0..parts.len())
        .flat_map(|i| (i + 1..parts.len()).map(move |j| (i, j)))
        .collect();
    links_of(parts, all, &pairs)
}

/// The links of `pairs` (indices into `parts`, a < b), from the samples of each rank (`all[rank]`).
pub fn links_of(parts: &[Participant], all: &[Vec<Sample>], pairs: &[(usize, usize)]) -> Result<Vec<Link>> {
    let find = |from: usize, peer: usize| {
        all.get(from)
            .and_then(|v| v.iter().find(|s| s.peer == peer))
            .ok_or_else(|| {
                Error::peer(format!(
                "rank 0: rank {from} reported no measurement with rank {peer}; were all ranks started with the same \
                 collbench version?"
            ))
            })
    };
    let mut out = Vec::new();
    for &(i, j) in pairs {
        let (a, b) = (&parts[i], &parts[j]);
        let (at_a, at_b) = (find(a.rank, b.rank)?, find(b.rank, a.rank)?);
        out.push(Link {
            a: i,
            b: j,
            a_name: a.name.clone(),
            b_name: b.name.clone(),
            bw_ab_gbs: at_b.rx_gbs,
            bw_ba_gbs: at_a.rx_gbs,
            bw_gbs: at_a.rx_gbs.min(at_b.rx_gbs),
            bidir_gbs: at_a.bidir_gbs.min(at_b.bidir_gbs),
            latency_us: at_a.latency_us.or(at_b.latency_us).unwrap_or(f64::NAN),
            stalls: at_a.stalls.or(at_b.stalls).unwrap_or(0),
            latency: at_a.lat_stats.or(at_b.lat_stats),
            bw_msg_rate: at_a.rx_msg_rate.min(at_b.rx_msg_rate),
            remeasured: false,
            bw_lower_gbs: None,
            suspect: false,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;
    use crate::session::run_threads;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn one_rank_per_host_unless_all_share_one() {
        let h = names(&["a", "a", "b", "c", "b"]);
        assert_eq!(participants(&h, true), (vec![0, 2, 3], Unit::Hosts));
        assert_eq!(participants(&h, false), (vec![0, 1, 2, 3, 4], Unit::Ranks));
        assert_eq!(
            participants(&names(&["a", "a", "a"]), true),
            (vec![0, 1, 2], Unit::Ranks)
        );
    }

    #[test]
    fn threads_measure_every_pair_and_rank_0_gets_them() {
        let cfg = PairwiseConfig {
            bytes: 64 << 10,
            iters: 2,
            lat_iters: 5,
            per_host: true,
            confirm: true,
        };
        // Five ranks: an odd count, so each round one sits out and still joins the barrier.
        let out = run_threads(5, &Options::default(), |sess| {
            let hosts: Vec<String> = sess.world.ranks.iter().map(|r| r.host.clone()).collect();
            super::super::measure_on(&mut sess.transports[0], &hosts, &cfg, &Default::default())
        });
        let mut reports: Vec<_> = out.into_iter().map(|r| r.unwrap().unwrap()).collect();
        assert!(reports[1..].iter().all(Option::is_none));
        let rep = reports.remove(0).expect("rank 0 has the report");
        assert_eq!((rep.unit.as_str(), rep.hosts.len(), rep.rounds), ("ranks", 5, 5));
        // Whether anything was measured twice depends on the machine's load; the report agrees with itself.
        assert_eq!(
            rep.links.iter().any(|l| l.remeasured),
            rep.remeasure_rounds > 0,
            "{:?}",
            rep.links
        );
        let pairs: Vec<(usize, usize)> = rep.links.iter().map(|l| (l.a, l.b)).collect();
        let want: Vec<(usize, usize)> = (0..5).flat_map(|a| (a + 1..5).map(move |b| (a, b))).collect();
        assert_eq!(pairs, want);
        for l in &rep.links {
            assert!(l.bw_ab_gbs > 0.0 && l.bw_ba_gbs > 0.0 && l.bidir_gbs > 0.0, "{l:?}");
            assert_eq!(l.bw_gbs, l.bw_ab_gbs.min(l.bw_ba_gbs));
            assert!(l.latency_us > 0.0 && l.latency_us.is_finite(), "{l:?}");
            assert_eq!(l.a_name, format!("rank{}", l.a));
            let st = l.latency.expect("every link has latency statistics");
            assert_eq!(st.samples, 5);
            assert!(
                st.min_us <= st.p50_us && st.p50_us <= st.p99_us && st.p99_us <= st.p999_us,
                "{st:?}"
            );
            assert!(
                st.p999_us <= st.max_us && (st.min_us..=st.max_us).contains(&st.avg_us),
                "{st:?}"
            );
            assert!(st.msg_rate > 0.0 && l.bw_msg_rate > 0.0, "{l:?}");
        }
    }

    #[test]
    fn a_pair_warms_for_the_settling_time_in_step() {
        /// Ranks 0 and 1 measure each other with `iters` timed exchanges after settling for `settle`: each
        /// rank's sample and warming.
        fn pair(iters: usize, settle: Duration) -> Vec<(Sample, Warmed)> {
            let cfg = PairwiseConfig {
                bytes: 64 << 10,
                iters,
                ..PairwiseConfig::default()
            };
            let out = run_threads(2, &Options::default(), |sess| {
                let t = &mut sess.transports[0];
                let (sbuf, mut rbuf) = (vec![pattern(t.rank()); cfg.bytes], vec![0u8; cfg.bytes]);
                bandwidth(t, 1 - t.rank(), &cfg, settle, &sbuf, &mut rbuf)
            });
            out.into_iter().map(|r| r.unwrap().unwrap()).collect()
        }
        for settle in [Duration::ZERO, Duration::from_millis(40)] {
            let w: Vec<Warmed> = pair(3, settle).into_iter().map(|(_, w)| w).collect();
            // The higher rank ran exactly the exchanges the lower one asked for.
            assert_eq!(w[0].exchanges, w[1].exchanges, "{settle:?}: {w:?}");
            if settle.is_zero() {
                assert_eq!(w[0].exchanges, 1, "one untimed exchange without settling: {w:?}");
            } else {
                // The lower rank stops warming only once the settling time has passed on its clock.
                assert!(w[0].seconds >= settle.as_secs_f64(), "{w:?}");
            }
        }
        // No timed exchange asked for (`-n 0`): the one untimed exchange still runs on both sides.
        for (sample, w) in pair(0, Duration::ZERO) {
            assert_eq!((w.exchanges, sample.rx_gbs), (1, 0.0), "{sample:?}");
        }
    }

    /// This thread's CPU time in seconds (user and system).
    fn thread_cpu_s() -> f64 {
        // SAFETY: getrusage writes one rusage into the zeroed struct it is given.
        let ru = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut ru), 0);
            ru
        };
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        tv(ru.ru_utime) + tv(ru.ru_stime)
    }

    /// Ranks 0 and 1 ping-pong `trips` 8-byte round trips while the others wait in the barrier that
    /// follows; returns per rank (its CPU seconds in that wait, the wait's wall seconds) and rank 0's
    /// median round trip in microseconds.
    fn idle_while_a_pair_measures(n: usize, trips: usize) -> Vec<(f64, f64, f64)> {
        let out = run_threads(n, &Options::default(), |sess| {
            let t = &mut sess.transports[0];
            control::barrier(t)?;
            let (cpu0, wall0) = (thread_cpu_s(), Instant::now());
            let mut rtt = Vec::new();
            if t.rank() < 2 {
                let mut buf = [0u8; 8];
                for _ in 0..trips {
                    let t0 = Instant::now();
                    if t.rank() == 0 {
                        transport::send(t, 1, &buf)?;
                        transport::recv(t, 1, &mut buf)?;
                    } else {
                        transport::recv(t, 0, &mut buf)?;
                        transport::send(t, 0, &buf)?;
                    }
                    rtt.push(t0.elapsed().as_secs_f64() * 1e6);
                }
            }
            control::barrier(t)?;
            Ok::<_, Error>((thread_cpu_s() - cpu0, wall0.elapsed().as_secs_f64(), median(&mut rtt)))
        });
        out.into_iter().map(|r| r.unwrap().unwrap()).collect()
    }

    #[test]
    fn ranks_not_measuring_block_in_the_kernel() {
        // Eight ranks, one pair measuring: the six others wait in the barrier after the round. A wait polls
        // for at most --spin (1 ms) and then sleeps in poll(2), so over a wait of many round trips their
        // CPU time is a small share of it (the bound is generous: spinning would make it about 1).
        let all = idle_while_a_pair_measures(8, 4000);
        for (r, &(cpu, wall, _)) in all.iter().enumerate().skip(2) {
            assert!(
                wall > 0.0 && cpu < 0.25 * wall,
                "rank {r}: {cpu} s of CPU over a {wall} s wait"
            );
        }
    }

    /// Not a test of correctness: the figures behind results/pairwise-idle-ranks (a pair's 8 B round trip
    /// with 14 other ranks idle against the pair alone). `cargo test --release --lib idle_ranks_figures --
    /// --ignored --nocapture`.
    #[test]
    #[ignore]
    fn idle_ranks_figures() {
        for _ in 0..3 {
            let alone = idle_while_a_pair_measures(2, 20000)[0].2;
            let beside = idle_while_a_pair_measures(16, 20000)[0].2;
            println!(
                "median 8 B round trip: pair alone {alone:.1} us, with 14 idle ranks {beside:.1} us, ratio {:.2}",
                beside / alone
            );
        }
    }
}
