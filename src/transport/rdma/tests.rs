//! The protocol engine over the in-memory fabric: ranks as threads, messages through the transport calls
//! (collectives on top of it are tested in `engine::rdma_transport_tests`).

use std::time::Duration;

use super::mem::{cfg, fabrics, run_lanes, run_ranks};
use super::proto::RdmaTransport;
use super::window::WindowShape;
use crate::transport::{self, Transport};

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + seed * 7) as u8).collect()
}

#[test]
fn messages_of_every_size_arrive_whole_and_in_order() {
    let shape = WindowShape::new(2, 16).unwrap();
    let sizes = [0usize, 1, 15, 16, 17, 32, 33, 100, 1000];
    let out = run_ranks(2, shape, 0, Duration::from_secs(30), |t| {
        let (me, other) = (t.rank(), 1 - t.rank());
        for &len in &sizes {
            let send = pattern(len, me);
            let mut got = vec![0xAA; len];
            transport::sendrecv(t, other, &send, other, &mut got).unwrap();
            assert_eq!(got, pattern(len, other), "{len} bytes from rank {other}");
        }
        t.pending()
    });
    assert_eq!(out, [0, 0]);
}

#[test]
fn a_sender_stalls_on_a_full_window_until_credits_return() {
    // One slot of 8 bytes, credits returned late: every fragment waits for the previous one's credit.
    let shape = WindowShape::new(1, 8).unwrap();
    let out = run_ranks(2, shape, 3, Duration::from_secs(30), |t| {
        if t.rank() == 0 {
            let data = pattern(200, 1);
            // Several messages posted at once: far more fragments than the window holds.
            let reqs: Vec<_> = (0..4)
                // SAFETY: `data` outlives every request, each waited for below.
                .map(|k| unsafe { t.post_send(1, data[k * 50..].as_ptr(), 50).unwrap() })
                .collect();
            for r in reqs {
                t.wait(r).unwrap();
            }
            Vec::new()
        } else {
            let mut got = vec![0u8; 200];
            for k in 0..4 {
                transport::recv(t, 0, &mut got[k * 50..(k + 1) * 50]).unwrap();
            }
            got
        }
    });
    assert_eq!(out[1], pattern(200, 1));
}

#[test]
fn a_length_mismatch_is_a_protocol_error_and_poisons() {
    let shape = WindowShape::new(4, 16).unwrap();
    let out = run_ranks(2, shape, 0, Duration::from_secs(30), |t| {
        if t.rank() == 0 {
            transport::send(t, 1, &[1u8; 20])
                .map(|_| String::new())
                .unwrap_or_else(|e| e.to_string())
        } else {
            let mut got = [0u8; 30];
            let e = transport::recv(t, 0, &mut got).unwrap_err().to_string();
            let again = transport::recv(t, 0, &mut got).unwrap_err().to_string();
            assert!(again.contains("unusable after an earlier error"), "{again}");
            e
        }
    });
    assert!(
        out[1].contains("protocol error") && out[1].contains("rank 0") && out[1].contains("rank 1 (host h"),
        "{}",
        out[1]
    );
}

#[test]
fn a_silent_peer_times_out_naming_what_was_pending() {
    let shape = WindowShape::new(2, 16).unwrap();
    // 400 ms: probes every 100 ms, so only a stall of the waiting thread longer than 300 ms could leave none.
    let out = run_ranks(2, shape, 0, Duration::from_millis(400), |t| {
        if t.rank() == 1 {
            let mut got = [0u8; 8];
            (
                transport::recv(t, 0, &mut got).unwrap_err().to_string(),
                t.fabric().probes,
            )
        } else {
            (String::new(), 0)
        }
    });
    let (e, probes) = &out[1];
    assert!(
        e.contains("timed out") && e.contains("1 receive(s) from rank 0") && e.contains("-T/--timeout"),
        "{e}"
    );
    // The wait probed the live, silent peer; the probes' completions did not count as progress.
    assert!(*probes > 0, "no probe in a wait of 400 ms");
}

#[test]
fn a_rank_waiting_only_to_receive_names_the_peer_that_left() {
    // Rank 1 posts nothing to rank 0, so no write of its own can fail: only its probe finds rank 0 gone,
    // long before the deadline, and names rank 0 rather than timing out and naming itself.
    let shape = WindowShape::new(2, 16).unwrap();
    let out = run_ranks(2, shape, 0, Duration::from_secs(60), |t| {
        if t.rank() == 0 {
            t.fabric().leave();
            (String::new(), None)
        } else {
            let mut got = [0u8; 8];
            (
                transport::recv(t, 0, &mut got).unwrap_err().to_string(),
                t.failed_with(),
            )
        }
    });
    let (e, culprit) = &out[1];
    assert!(
        e.contains("with rank 0") && e.contains("retry counter exceeded") && !e.contains("timed out"),
        "{e}"
    );
    assert_eq!(*culprit, Some(0));
}

#[test]
fn posting_to_a_rank_outside_the_world_is_an_error_not_a_panic() {
    let shape = WindowShape::new(2, 16).unwrap();
    let out = run_ranks(1, shape, 0, Duration::from_secs(5), |t| {
        let e = transport::send(t, 3, &[0u8; 4]).unwrap_err().to_string();
        let self_send = transport::send(t, 0, &[0u8; 4]).unwrap_err().to_string();
        (e, self_send)
    });
    assert!(out[0].0.contains("no queue pair to rank 3"), "{}", out[0].0);
    assert!(out[0].1.contains("no queue pair to rank 0"), "{}", out[0].1);
}

#[test]
fn a_large_message_is_spread_over_every_queue_pair_of_the_peer() {
    let shape = WindowShape::new(4, 16).unwrap();
    for qps in [2, 3, 4] {
        let out = run_lanes(2, shape, (qps, 7), 0, Duration::from_secs(30), |t| {
            let (me, other) = (t.rank(), 1 - t.rank());
            let len = 16 * 12 + 5; // 13 fragments
            let mut got = vec![0u8; len];
            transport::sendrecv(t, other, &pattern(len, me), other, &mut got).unwrap();
            assert_eq!(got, pattern(len, other));
            t.fabric().data_per_lane.clone()
        });
        for lanes in out {
            assert_eq!(lanes.len(), qps);
            assert_eq!(lanes.iter().sum::<usize>(), 13);
            // Round-robin: no queue pair carries more than one fragment above another.
            let (lo, hi) = (lanes.iter().min().unwrap(), lanes.iter().max().unwrap());
            assert!(*lo > 0 && hi - lo <= 1, "{qps} QPs: fragments per queue pair {lanes:?}");
        }
    }
}

#[test]
fn a_stalled_window_over_several_queue_pairs_never_overruns_a_slot() {
    // Two slots, credits returned late and out of order with the data: a writer that ran ahead of the
    // credits would overwrite a slot not yet copied out, and the data (or the slot check) would show it.
    let shape = WindowShape::new(2, 8).unwrap();
    for qps in [2, 3] {
        let out = run_lanes(2, shape, (qps, 11), 3, Duration::from_secs(30), |t| {
            if t.rank() == 0 {
                let data = pattern(400, 3);
                let reqs: Vec<_> = (0..8)
                    // SAFETY: `data` outlives every request, each waited for below.
                    .map(|k| unsafe { t.post_send(1, data[k * 50..].as_ptr(), 50).unwrap() })
                    .collect();
                for r in reqs {
                    t.wait(r).unwrap();
                }
                Vec::new()
            } else {
                let mut got = vec![0u8; 400];
                // All eight posted before any wait, so fragments of later messages may arrive early.
                let reqs: Vec<_> = got
                    .chunks_mut(50)
                    // SAFETY: `got` outlives every request and is not touched until each is waited for.
                    .map(|c| unsafe { t.post_recv(0, c.as_mut_ptr(), c.len()).unwrap() })
                    .collect();
                for r in reqs.into_iter().rev() {
                    t.wait(r).unwrap();
                }
                got
            }
        });
        assert_eq!(out[1], pattern(400, 3), "{qps} QPs");
    }
}

#[test]
fn a_rank_that_gives_up_tells_its_peers_and_they_stop_at_once() {
    // Rank 0 fails (a length mismatch with rank 1); ranks 1 and 2 then wait on rank 0, which will never
    // send. Their deadline is far away: only rank 0's abort immediate can end their wait with this error.
    let shape = WindowShape::new(4, 16).unwrap();
    let out = run_lanes(3, shape, (2, 5), 0, Duration::from_secs(120), |t| {
        let mut got = [0u8; 30];
        let e = match t.rank() {
            0 => transport::recv(t, 1, &mut got).unwrap_err(),
            // Rank 0's abort may already end the wait for this send to complete.
            1 => transport::send(t, 0, &[1u8; 20])
                .and_then(|_| transport::recv(t, 0, &mut got))
                .unwrap_err(),
            _ => transport::recv(t, 0, &mut got).unwrap_err(),
        };
        let f = t.fabric();
        (e.to_string(), t.aborted_by(), f.aborts_sent, f.shut)
    });
    let (e0, by0, sent0, shut0) = &out[0];
    assert!(e0.contains("protocol error"), "{e0}");
    assert_eq!(
        (*by0, *sent0, *shut0),
        (None, 2, true),
        "rank 0 tells both peers and stops"
    );
    for (r, (e, by, sent, shut)) in out.iter().enumerate().skip(1) {
        assert!(
            e.contains(&format!("rank {r} (host h")) && e.contains("rank 0 gave up") && e.contains("control path"),
            "rank {r}: {e}"
        );
        assert!(!e.contains("timed out"), "rank {r}: {e}");
        // Told, not telling: one abort reaches everyone without a storm of relays.
        assert_eq!((*by, *sent, *shut), (Some(0), 0, true), "rank {r}");
    }
}

#[test]
fn a_rank_that_times_out_tells_its_peers_too() {
    // Rank 1 waits on rank 2, which waits on rank 1 with a much later deadline: rank 1's deadline passes
    // first, and its abort, not rank 2's own deadline, ends rank 2's wait.
    let shape = WindowShape::new(2, 16).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = fabrics(3, shape, 2, 9)
            .into_iter()
            .enumerate()
            .map(|(rank, fab)| {
                s.spawn(move || {
                    let peers = (0..3)
                        .map(|r| (r != rank).then(|| (format!("rank {r}"), shape)))
                        .collect();
                    let timeout = Duration::from_millis(if rank == 1 { 100 } else { 120_000 });
                    let mut t =
                        RdmaTransport::new(rank, "h".into(), "rdma@mem".into(), fab, peers, cfg(shape, 2, timeout));
                    let mut got = [0u8; 8];
                    let e = match rank {
                        0 => return String::new(),
                        1 => transport::recv(&mut t, 2, &mut got).unwrap_err(),
                        _ => transport::recv(&mut t, 1, &mut got).unwrap_err(),
                    };
                    e.to_string()
                })
            })
            .collect();
        let out: Vec<String> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(out[1].contains("timed out"), "{}", out[1]);
        assert!(out[2].contains("rank 1 gave up"), "{}", out[2]);
    });
}
