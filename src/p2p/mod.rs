//! `collbench p2p`: a point-to-point latency and bandwidth sweep between two chosen ranks, in the shape of
//! OSU's `osu_latency` (ping-pong, half the round trip) and `osu_bw` (a window of back-to-back sends, then an
//! ack), written against the [`Transport`] trait so it runs over collbench's TCP and verbs transports. The
//! other ranks wait at the closing gather, blocked in the transport. Rank 0 prints both sweeps and writes JSON.
//! Its options, from its flags, are [`options`]'s.

use std::fmt::Write;
use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

pub mod options;

use crate::driver::{Connected, Ending, RankCommand};
use crate::error::{stderr, Error, Result, EXIT_OK};
use crate::memory::available::Available;
use crate::options::Options;
use crate::report::declared::Declared;
use crate::results::latency::LatencyStats;
use crate::session::Pairs;
use crate::transport::{self, control, Transport};
use crate::units::BwUnit;
use crate::world::Identity;

/// Version tag of the p2p JSON.
pub const SCHEMA: &str = "collbench-p2p/1";
/// Largest `--maxbytes`.
const MAX_BYTES: u64 = 1 << 30;
/// Most iterations.
const MAX_ITERS: usize = 1_000_000;
/// Largest `--window`.
const MAX_WINDOW: usize = 4096;
/// The receive buffer of a window holds at most this much: each message of a window lands in its own slot,
/// so a large message's window is shortened to fit (at 4 MiB, 16 messages).
const WINDOW_BYTES: usize = 64 << 20;
/// Above this size the sweeps run a tenth of the iterations (OSU's `LARGE_MESSAGE_SIZE` rule).
const LARGE: usize = 8 << 10;

/// What one p2p run measures; every rank must be given the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct P2pConfig {
    /// The two ranks: the first starts each round trip and sends the bandwidth windows.
    pub pair: (usize, usize),
    /// Smallest and largest message, bytes; sizes double from the smallest (from 1 after 0).
    pub min_bytes: usize,
    pub max_bytes: usize,
    /// Timed round trips per size up to 8 KiB (a tenth above); bandwidth windows are a tenth of these.
    pub iters: usize,
    /// Untimed iterations before each size.
    pub warmup: usize,
    /// Messages sent back to back before the receiver acks (osu_bw's window).
    pub window: usize,
}

/// One size of the latency sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyPoint {
    pub size: usize,
    /// Half the round trip, min/avg/percentiles/max in us, and the messages per second it carried.
    #[serde(flatten)]
    pub stats: LatencyStats,
}

/// One size of the bandwidth sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BandwidthPoint {
    pub size: usize,
    /// Messages per window actually sent (the window, shortened for large messages).
    pub window: usize,
    /// Windows timed.
    pub iters: usize,
    /// 10^6 bytes per second, as OSU prints it.
    pub mb_s: f64,
    /// The same in GB/s (10^9 bytes/s), collbench's unit everywhere else.
    pub gb_s: f64,
    /// Messages of `size` per second.
    pub msg_rate: f64,
}

/// The outcome, as rank 0 prints and writes it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct P2pReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// The transport path measured, e.g. `tcp@lo`.
    pub path: String,
    pub config: P2pConfig,
    /// The hosts of the two ranks.
    pub hosts: (String, String),
    /// Ranks of the job, the two included.
    pub nranks: usize,
    pub latency: Vec<LatencyPoint>,
    pub bandwidth: Vec<BandwidthPoint>,
}

/// Both ranks of the pair must be ranks of a world of `n`.
fn check_pair(cfg: &P2pConfig, n: usize) -> Result<()> {
    let (a, b) = cfg.pair;
    if a.max(b) >= n {
        return Err(Error::usage(
            "--pair",
            format!(
                "rank {} is not in a job of {n} rank(s) (ranks 0 to {}): give two of them, or start more ranks",
                a.max(b),
                n - 1
            ),
        ));
    }
    Ok(())
}

/// `collbench p2p` as the driver runs it.
pub struct P2pCommand {
    pub opts: Options,
    pub cfg: P2pConfig,
    /// The JSON file (`-J`), where asked for.
    pub json: Option<PathBuf>,
    /// `--force`.
    pub force: bool,
    /// The unit bandwidth is printed in (`--units`).
    pub units: BwUnit,
}

impl RankCommand for P2pCommand {
    fn name(&self) -> &'static str {
        "p2p"
    }

    fn options(&self) -> &Options {
        &self.opts
    }

    /// Every rank must run the same sweep: the options and the sweep are compared at the rendezvous.
    fn agreement(&self) -> serde_json::Value {
        self.opts.agreement().to_wire_with("p2p", &self.cfg)
    }

    fn pairs(&self) -> Pairs {
        Pairs::All
    }

    fn outputs(&self) -> Declared<'_> {
        Declared::new(self.force).file("-J/--output_file", self.json.as_deref())
    }

    /// The buffers are at most a window of `--maxbytes`: small beside what a host has.
    fn check_memory(&self, _local: usize, _avail: &Available) -> Result<()> {
        Ok(())
    }

    fn check_size(&self, size: usize) -> Result<()> {
        check_pair(&self.cfg, size)
    }

    fn rank(&self, _id: &Identity, conn: Connected<'_>) -> Result<Ending> {
        let mut rank = conn.open()?;
        let ranks = &rank.sess.world.ranks;
        let hosts = (ranks[self.cfg.pair.0].host.clone(), ranks[self.cfg.pair.1].host.clone());
        let report = rank.measure("the p2p sweep", |t| measure_on(t, &self.cfg, &hosts))?;
        let decided = report.map(|rep| report_on_rank0(&rep, self));
        Ok(Ending::Shared {
            decided,
            rank: Box::new(rank),
        })
    }
}

/// Rank 0's part: the JSON, then both sweeps on stdout; returns the exit status.
fn report_on_rank0(rep: &P2pReport, cmd: &P2pCommand) -> Result<i32> {
    if let Some(p) = &cmd.json {
        let json = serde_json::to_string_pretty(rep).expect("the p2p report serialises");
        crate::report::file::write_atomic(p, json.as_bytes(), crate::report::file::Replace::from_force(cmd.force))?;
        if !crate::report::file::is_stdout(p) {
            stderr!("collbench: p2p results written to {}", p.display());
        }
    }
    // Last, so a stdout that cannot take it (a full device) loses no file.
    let taken = cmd.outputs().stdout_taken();
    crate::report::stdout::print_beside(&text(rep, cmd.units), taken)?;
    Ok(EXIT_OK)
}

/// The sweeps over any transport: the pair measures, every rank joins the gather that brings the first
/// rank's figures to rank 0. `Some(report)` on rank 0.
pub fn measure_on<T: Transport + ?Sized>(
    t: &mut T,
    cfg: &P2pConfig,
    hosts: &(String, String),
) -> Result<Option<P2pReport>> {
    let (a, b) = cfg.pair;
    let me = t.rank();
    let mine = if me == a || me == b {
        let peer = if me == a { b } else { a };
        let lat = latency_sweep(t, peer, me == a, cfg)?;
        let bw = bandwidth_sweep(t, peer, me == a, cfg)?;
        if me == a {
            let rep = P2pReport {
                schema: SCHEMA.into(),
                path: t.path(),
                config: cfg.clone(),
                hosts: hosts.clone(),
                nranks: t.size(),
                latency: lat,
                bandwidth: bw,
            };
            serde_json::to_vec(&rep).expect("the p2p report serialises")
        } else {
            Vec::new()
        }
    } else {
        Vec::new()
    };
    // The idle ranks wait here, blocked in the transport, until the pair is done.
    let Some(all) = control::gather(t, &mine)? else {
        return Ok(None);
    };
    serde_json::from_slice(&all[a]).map(Some).map_err(|e| {
        Error::peer(format!(
            "rank 0: rank {a} sent unreadable p2p results ({e}); were all ranks started with the same collbench \
             version?"
        ))
    })
}

/// The sizes of a sweep: `min` (0 allowed), then doubling from 1 (or from `min`) up to `max`.
pub fn sizes(min: usize, max: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut s = min;
    if s == 0 {
        v.push(0);
        s = 1;
    }
    while s <= max {
        v.push(s);
        s = s.saturating_mul(2);
    }
    v
}

/// Timed iterations at `size`: a tenth of `iters` above 8 KiB, at least one.
fn iters_at(iters: usize, size: usize) -> usize {
    if size > LARGE {
        (iters / 10).max(1)
    } else {
        iters
    }
}

/// The byte the first rank of the pair fills its buffers with, so the second can tell its data arrived.
const FILL: u8 = 0xa5;

/// Ping-pong at every size; the starting rank returns the points, the echoing one an empty list.
fn latency_sweep<T: Transport + ?Sized>(
    t: &mut T,
    peer: usize,
    starts: bool,
    cfg: &P2pConfig,
) -> Result<Vec<LatencyPoint>> {
    let mut buf = vec![FILL; cfg.max_bytes];
    let mut out = Vec::new();
    for size in sizes(cfg.min_bytes, cfg.max_bytes) {
        let msg = &mut buf[..size];
        let n = iters_at(cfg.iters, size);
        let mut rtt = Vec::with_capacity(n);
        for i in 0..cfg.warmup + n {
            if starts {
                let t0 = Instant::now();
                transport::send(t, peer, msg)?;
                transport::recv(t, peer, msg)?;
                if i >= cfg.warmup {
                    rtt.push(t0.elapsed().as_secs_f64());
                }
            } else {
                transport::recv(t, peer, msg)?;
                transport::send(t, peer, msg)?;
            }
        }
        if let Some(stats) = LatencyStats::of_round_trips(&mut rtt) {
            out.push(LatencyPoint { size, stats });
        }
    }
    Ok(out)
}

/// osu_bw at every size from 1 byte: the sender posts a window of sends, the receiver a window of receives,
/// then the receiver acks with 4 bytes; the sender's clock over the timed windows. The sender returns the
/// points, the receiver an empty list.
fn bandwidth_sweep<T: Transport + ?Sized>(
    t: &mut T,
    peer: usize,
    sends: bool,
    cfg: &P2pConfig,
) -> Result<Vec<BandwidthPoint>> {
    let window_at = |size: usize| cfg.window.min((WINDOW_BYTES / size).max(1));
    // The receiver's window at a size holds that many messages of that size side by side: at most
    // WINDOW_BYTES, or one message when a single one is larger (smaller sizes have the longer windows).
    let most = sizes(cfg.min_bytes.max(1), cfg.max_bytes)
        .into_iter()
        .map(|size| window_at(size) * size)
        .max()
        .unwrap_or(0);
    let sbuf = vec![FILL; if sends { cfg.max_bytes.max(1) } else { 0 }];
    let mut rbuf = vec![0u8; if sends { 0 } else { most }];
    let mut ack = [0u8; 4];
    let mut reqs = Vec::with_capacity(cfg.window);
    let mut out = Vec::new();
    for size in sizes(cfg.min_bytes.max(1), cfg.max_bytes) {
        let window = window_at(size);
        let n = (iters_at(cfg.iters, size) / 10).max(1);
        let mut start = Instant::now();
        for i in 0..cfg.warmup.min(10) + n {
            if i == cfg.warmup.min(10) {
                start = Instant::now();
            }
            reqs.clear();
            if sends {
                for _ in 0..window {
                    // SAFETY: sbuf outlives the window, whose requests are all waited for below before it is
                    // touched again; sends only read it, so the window may share it. On error the transport is
                    // poisoned and never touches it again.
                    reqs.push(unsafe { t.post_send(peer, sbuf.as_ptr(), size)? });
                }
            } else {
                for k in 0..window {
                    // SAFETY: each message of the window has its own `size` bytes of rbuf (window x size <=
                    // rbuf.len(), the most over the sizes), nothing reads rbuf until the requests are all
                    // waited for below; on error the transport is poisoned and never touches it again.
                    reqs.push(unsafe { t.post_recv(peer, rbuf.as_mut_ptr().add(k * size), size)? });
                }
            }
            for r in reqs.drain(..) {
                t.wait(r)?;
            }
            if sends {
                transport::recv(t, peer, &mut ack)?;
            } else {
                transport::send(t, peer, &ack)?;
            }
        }
        let secs = start.elapsed().as_secs_f64();
        if !sends {
            if let Some(off) = rbuf[..size].iter().position(|&x| x != FILL) {
                return Err(Error::peer(format!(
                    "rank {}: the data rank {peer} sent over {} arrived changed at byte {off} of a {size}-byte \
                     message; the path corrupts data",
                    t.rank(),
                    t.path()
                )));
            }
            continue;
        }
        let msgs = (window * n) as f64;
        let rate = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
        out.push(BandwidthPoint {
            size,
            window,
            iters: n,
            mb_s: rate(msgs * size as f64) / 1e6,
            gb_s: rate(msgs * size as f64) / 1e9,
            msg_rate: rate(msgs),
        });
    }
    Ok(out)
}

/// Both sweeps as printed: OSU's columns (`# Size` left-aligned in 10, the figure right-aligned in 18 with
/// two decimals), collbench's extra columns after them.
pub fn text(rep: &P2pReport, units: BwUnit) -> String {
    let (a, b) = rep.config.pair;
    let idle = rep.nranks - 2;
    let mut s = format!(
        "# collbench p2p: rank {a} ({}) <-> rank {b} ({}) over {}{}\n",
        rep.hosts.0,
        rep.hosts.1,
        rep.path,
        match idle {
            0 => String::new(),
            n => format!("; {n} other rank(s) idle"),
        }
    );
    let _ = writeln!(
        s,
        "# Latency: half the round trip of a ping-pong, mean of {} round trips per size ({} above {} B), after {} \
         warm-up",
        rep.config.iters,
        iters_at(rep.config.iters, LARGE + 1),
        LARGE,
        rep.config.warmup
    );
    let _ = writeln!(
        s,
        "{:<10}{:>18}{:>12}{:>12}{:>12}{:>14}",
        "# Size", "Latency (us)", "min (us)", "p50 (us)", "p99 (us)", "Messages/s"
    );
    for p in &rep.latency {
        let st = &p.stats;
        let _ = writeln!(
            s,
            "{:<10}{:>18.2}{:>12.2}{:>12.2}{:>12.2}{:>14.0}",
            p.size, st.avg_us, st.min_us, st.p50_us, st.p99_us, st.msg_rate
        );
    }
    s.push('\n');
    let mega = units.mega_label();
    let _ = writeln!(
        s,
        "# Bandwidth: a window of {} back-to-back sends (fewer where {} MiB would not hold them), then a 4 B ack; \
         {} = 10^6 {}/s",
        rep.config.window,
        WINDOW_BYTES >> 20,
        mega,
        if units == BwUnit::Gbit { "bits" } else { "bytes" }
    );
    let _ = writeln!(
        s,
        "{:<10}{:>18}{:>14}",
        "# Size",
        format!("Bandwidth ({mega})"),
        "Messages/s"
    );
    for p in &rep.bandwidth {
        let _ = writeln!(s, "{:<10}{:>18.2}{:>14.0}", p.size, units.of_mbs(p.mb_s), p.msg_rate);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::run_threads;

    #[test]
    fn sizes_double_from_zero_or_one_as_osu_does() {
        assert_eq!(sizes(0, 8), [0, 1, 2, 4, 8]);
        assert_eq!(sizes(1, 5), [1, 2, 4]);
        assert_eq!(sizes(3, 12), [3, 6, 12]);
        assert_eq!(sizes(0, 0), [0]);
    }

    #[test]
    fn pair_must_be_two_ranks_of_the_job() {
        assert_eq!(super::options::parse_pair("0,1").unwrap(), (0, 1));
        assert_eq!(super::options::parse_pair(" 3 , 2").unwrap(), (3, 2));
        for bad in ["1,1", "0", "a,b", "0,1,2", "-1,0"] {
            assert!(
                super::options::parse_pair(bad)
                    .unwrap_err()
                    .to_string()
                    .contains("--pair"),
                "{bad}"
            );
        }
        let cfg = |pair| P2pConfig {
            pair,
            min_bytes: 0,
            max_bytes: 8,
            iters: 1,
            warmup: 0,
            window: 1,
        };
        assert!(check_pair(&cfg((0, 1)), 2).is_ok());
        let e = check_pair(&cfg((0, 5)), 2).unwrap_err().to_string();
        assert!(e.contains("--pair") && e.contains("rank 5"), "{e}");
    }

    #[test]
    fn three_ranks_measure_one_pair_and_rank_0_reports() {
        let cfg = P2pConfig {
            pair: (2, 1),
            min_bytes: 0,
            max_bytes: 64 << 10,
            iters: 20,
            warmup: 2,
            window: 8,
        };
        let hosts = ("h2".to_string(), "h1".to_string());
        let out = run_threads(3, &Options::default(), |sess| {
            measure_on(&mut sess.transports[0], &cfg, &hosts)
        });
        let mut reps: Vec<_> = out.into_iter().map(|r| r.unwrap().unwrap()).collect();
        assert!(reps[1..].iter().all(Option::is_none));
        let rep = reps.remove(0).expect("rank 0 reports though it did not measure");
        let lat: Vec<usize> = rep.latency.iter().map(|p| p.size).collect();
        assert_eq!(lat, sizes(0, 64 << 10));
        let bw: Vec<usize> = rep.bandwidth.iter().map(|p| p.size).collect();
        assert_eq!(bw, sizes(1, 64 << 10));
        for p in &rep.latency {
            let st = &p.stats;
            assert!(
                st.min_us <= st.p50_us && st.p50_us <= st.p99_us && st.p99_us <= st.max_us,
                "{p:?}"
            );
            assert_eq!(st.samples, iters_at(20, p.size));
        }
        for p in &rep.bandwidth {
            assert!(
                p.mb_s > 0.0 && p.msg_rate > 0.0 && (p.gb_s * 1e3 - p.mb_s).abs() < 1e-6 * p.mb_s,
                "{p:?}"
            );
            assert_eq!(p.window, 8);
        }
        let t = text(&rep, BwUnit::Gbyte);
        assert!(
            t.contains("\n# Size          Latency (us)") && t.contains("\n# Size      Bandwidth (MB/s)"),
            "{t}"
        );
        assert!(t.contains("1 other rank(s) idle"), "{t}");
    }
}
