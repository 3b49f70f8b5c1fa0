//! Path MTU probes between hosts, as `ping -M do -s SIZE` makes them: UDP datagrams with the don't-fragment
//! bit set, echoed back by the peer, at payload sizes bisected between one that passed and one that did not.
//! A switch port whose MTU is below its host's drops the larger frames without a word (no ICMP comes back),
//! so TCP stalls on its first full-sized segment; only a size that passes small and vanishes large shows why.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// IPv4 and UDP headers: a payload of the MTU less this fills a frame of the MTU.
pub const V4_OVERHEAD: u32 = 28;
/// IPv6 and UDP headers.
pub const V6_OVERHEAD: u32 = 48;
/// The smallest probe's payload: room for its id, and small enough to pass any link that passes anything.
pub const SMALL: u32 = 64;

/// How often each size is sent and how long each answer is waited for: a lost or late echo (a busy host) is
/// retried, so a size fails only when every try went unanswered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tries {
    pub tries: u32,
    pub wait: Duration,
}

/// What preflight uses: three tries of 300 ms each, long enough for an echo from a host whose CPUs are busy.
pub const TRIES: Tries = Tries {
    tries: 3,
    wait: Duration::from_millis(300),
};

/// What probing one peer found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Probed {
    /// The largest payload the peer echoed; `None` when not even [`SMALL`] came back (UDP blocked, or the peer
    /// unreachable): nothing is known of the path's MTU then.
    pub largest: Option<u32>,
    /// The payload that fills this host's interface MTU: the size tried first.
    pub full: u32,
}

/// The headers' bytes in front of a UDP payload to or from `ip`.
pub fn overhead(ip: IpAddr) -> u32 {
    if ip.is_ipv4() {
        V4_OVERHEAD
    } else {
        V6_OVERHEAD
    }
}

/// Sets don't-fragment on `sock` without consulting the kernel's path MTU cache (IP_PMTUDISC_PROBE): a frame
/// is sent whole at any size the interface takes, so each probe tests the path, not what was learnt of it.
fn dont_fragment(sock: &UdpSocket, v6: bool) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (level, name, value) = if v6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, libc::IPV6_PMTUDISC_PROBE)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_PROBE)
    };
    // SAFETY: the descriptor is the socket's own and open; the value is a c_int read for its size only.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A UDP socket on `ip` (any free port) sending with don't-fragment.
fn socket(ip: IpAddr) -> io::Result<UdpSocket> {
    let s = UdpSocket::bind(SocketAddr::new(ip, 0))?;
    dont_fragment(&s, ip.is_ipv6())?;
    Ok(s)
}

/// Echoes every datagram it receives back to its sender, with don't-fragment, until stopped or dropped.
pub struct Responder {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Responder {
    /// Answers on `ip`, on a free port, the probes of `peers` only: anyone else's datagram is dropped, so the
    /// responder reflects nothing for a stranger while it is up.
    pub fn start(ip: IpAddr, peers: Vec<IpAddr>) -> io::Result<Responder> {
        let sock = socket(ip)?;
        // Short, so a stop is seen soon; nothing is lost by waking up.
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        let port = sock.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = stop.clone();
        let thread = std::thread::Builder::new().name("pmtu-echo".into()).spawn(move || {
            let mut buf = vec![0u8; 65536];
            while !seen.load(Ordering::Relaxed) {
                match sock.recv_from(&mut buf) {
                    // A reply the path cannot carry is lost as the probe would have been: that is the answer.
                    Ok((n, from)) if peers.contains(&from.ip()) => {
                        let _ = sock.send_to(&buf[..n], from);
                    }
                    _ => {}
                }
            }
        })?;
        Ok(Responder {
            port,
            stop,
            thread: Some(thread),
        })
    }

    /// The port it answers on.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Probes `peer` from `local`: [`SMALL`] first (no answer: nothing known), then `full`, then sizes bisected
/// between the largest that passed and the smallest that did not, to the byte.
pub fn probe(local: IpAddr, peer: SocketAddr, full: u32, tries: Tries) -> io::Result<Probed> {
    let sock = socket(local)?;
    sock.connect(peer)?;
    // Ids from a random start: an answer forged without seeing the probe does not match one.
    let mut seed = [0u8; 8];
    getrandom::getrandom(&mut seed).expect("the OS random source is available");
    let ids = AtomicU64::new(u64::from_le_bytes(seed));
    let sure = Tries {
        tries: tries.tries * CONFIRM,
        ..tries
    };
    let largest = largest_passing(full, |size, confirming| {
        echo(&sock, &ids, size, if confirming { sure } else { tries })
    });
    Ok(Probed { largest, full })
}

/// How many times more tries the smallest failing size gets before a path is called short: on a path losing
/// 10% each way a size fails its three tries 0.7% of the time, and a probe tries a dozen sizes; the
/// confirmation's nine leave that at 3e-7, and cost a short path one wait more, not every step.
const CONFIRM: u32 = 3;

/// The largest payload up to `full` that `echoed(size, confirming)` says passes, found as [`probe`] does:
/// `None` when not even [`SMALL`] passes. The bisection's smallest failing size is tried again, confirming,
/// before it is believed: one lost echo would otherwise cut the path short; where it passes after all the
/// search goes on above it.
fn largest_passing(full: u32, mut echoed: impl FnMut(u32, bool) -> bool) -> Option<u32> {
    if !echoed(SMALL, false) {
        return None;
    }
    let full = full.max(SMALL);
    let (mut lo, mut hi) = (SMALL, full);
    if echoed(hi, false) {
        return Some(hi);
    }
    loop {
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if echoed(mid, false) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        if hi == lo || !echoed(hi, true) {
            return Some(lo);
        }
        // A loss misled the search: every size it saw fail above `hi` is in doubt too.
        (lo, hi) = (hi, full);
    }
}

/// Whether a probe of `size` payload bytes came back within `tries`.
fn echo(sock: &UdpSocket, ids: &AtomicU64, size: u32, tries: Tries) -> bool {
    let mut out = vec![0u8; size as usize];
    let mut back = vec![0u8; size as usize + 1];
    for _ in 0..tries.tries {
        let id = ids.fetch_add(1, Ordering::Relaxed).to_le_bytes();
        out[..8].copy_from_slice(&id);
        // Too large for the interface (EMSGSIZE), or refused: this try is lost like a dropped frame.
        if sock.send(&out).is_err() {
            continue;
        }
        let until = Instant::now() + tries.wait;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || sock.set_read_timeout(Some(left)).is_err() {
                break;
            }
            match sock.recv(&mut back) {
                // A late answer to an earlier try is skipped: only this try's id counts.
                Ok(n) if n == size as usize && back[..8] == id => return true,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => break,
                // An ICMP error queued on the socket: this try is lost.
                Err(_) => break,
            }
        }
    }
    false
}

/// The MTU of interface `iface` as /sys reports it.
pub fn iface_mtu(iface: &str) -> Option<u32> {
    let p = std::path::Path::new("/sys/class/net").join(iface).join("mtu");
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_passes_every_size_up_to_a_full_frame() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let r = Responder::start(lo, vec![lo]).unwrap();
        let p = probe(lo, SocketAddr::new(lo, r.port()), 8972, TRIES).unwrap();
        assert_eq!(
            p,
            Probed {
                largest: Some(8972),
                full: 8972
            }
        );
    }

    #[test]
    fn a_path_that_drops_large_frames_is_bisected_to_the_largest_payload_that_passes() {
        // A switch port at MTU 1400 under hosts at 1500: payloads over 1372 vanish.
        let mut sent = Vec::new();
        let got = largest_passing(1472, |s, sure| {
            sent.push((s, sure));
            s <= 1372
        });
        assert_eq!(got, Some(1372));
        assert_eq!(
            &sent[..2],
            [(SMALL, false), (1472, false)],
            "small first, then a full frame"
        );
        assert!(sent.len() <= 15, "bisected, not stepped: {sent:?}");
        // The smallest failing size, confirmed once before the path is called short.
        assert_eq!(sent.iter().filter(|s| s.1).collect::<Vec<_>>(), [&(1373, true)]);
        assert_eq!(largest_passing(1472, |_, _| true), Some(1472));
        assert_eq!(largest_passing(1472, |_, _| false), None);
    }

    #[test]
    fn a_lost_echo_does_not_cut_a_full_path_short() {
        // A clean 1500-byte path that lost the first full frame's echo, then one mid-size echo: the
        // confirmations find both sizes pass and the search ends at a full frame.
        for lost in [vec![1472], vec![1472, 768], vec![1472, 1471]] {
            let mut lost_once = lost.clone();
            let got = largest_passing(1472, |s, _| match lost_once.iter().position(|&l| l == s) {
                Some(i) => {
                    lost_once.remove(i);
                    false
                }
                None => true,
            });
            assert_eq!(got, Some(1472), "lost {lost:?}");
        }
    }

    #[test]
    fn a_responder_answers_its_peers_only() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        let r = Responder::start(lo, vec![other]).unwrap();
        let quick = Tries {
            tries: 1,
            wait: Duration::from_millis(200),
        };
        let p = probe(lo, SocketAddr::new(lo, r.port()), 1472, quick).unwrap();
        assert_eq!(p.largest, None, "a stranger's probe is answered");
    }

    #[test]
    fn a_peer_that_never_answers_leaves_the_path_unknown() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        // A bound socket that never answers.
        let mute = UdpSocket::bind("127.0.0.1:0").unwrap();
        let quick = Tries {
            tries: 1,
            wait: Duration::from_millis(20),
        };
        let p = probe(lo, mute.local_addr().unwrap(), 1472, quick).unwrap();
        assert_eq!(
            p,
            Probed {
                largest: None,
                full: 1472
            }
        );
    }
}
