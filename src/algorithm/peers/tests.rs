//! The peer sets are checked against what the algorithms really do: every algorithm runs over an in-memory
//! transport that records each peer a rank posts to or receives from.

use std::collections::{BTreeSet, VecDeque};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

use super::*;
use crate::algorithm::{self, control, Args, Tuning, Workspace};
use crate::error::Result;
use crate::reduce::{Dtype, Op};
use crate::transport::{Request, Transport};

/// Ranks of one process joined by channels; sends complete at once, receives in order per peer.
struct Recording {
    rank: usize,
    to: Vec<Sender<Vec<u8>>>,
    from: Vec<Receiver<Vec<u8>>>,
    /// Per slot: a receive not yet filled (peer, place, length), or `None` once complete.
    slots: Vec<Option<(usize, *mut u8, usize)>>,
    /// Per peer, its unfilled receive slots in posting order.
    queued: Vec<VecDeque<usize>>,
    touched: BTreeSet<usize>,
}

// SAFETY: the raw pointers are receive places of the rank thread that owns this transport.
unsafe impl Send for Recording {}

impl Recording {
    fn world(n: usize) -> Vec<Recording> {
        let mut senders: Vec<Vec<Option<Sender<Vec<u8>>>>> = (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
        let mut receivers: Vec<Vec<Option<Receiver<Vec<u8>>>>> =
            (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
        for a in 0..n {
            for b in 0..n {
                let (tx, rx) = channel();
                senders[a][b] = Some(tx);
                receivers[b][a] = Some(rx);
            }
        }
        senders
            .into_iter()
            .zip(receivers)
            .enumerate()
            .map(|(rank, (to, from))| Recording {
                rank,
                to: to.into_iter().map(Option::unwrap).collect(),
                from: from.into_iter().map(Option::unwrap).collect(),
                slots: Vec::new(),
                queued: (0..n).map(|_| VecDeque::new()).collect(),
                touched: BTreeSet::new(),
            })
            .collect()
    }

    /// Fills the oldest receive from `peer`.
    fn fill_next(&mut self, peer: usize) {
        let slot = self.queued[peer].pop_front().expect("a queued receive");
        let (_, ptr, len) = self.slots[slot].take().expect("unfilled");
        let msg = self.from[peer]
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("rank {}: nothing from rank {peer}: the algorithm deadlocked", self.rank));
        assert_eq!(msg.len(), len, "rank {}: message length from rank {peer}", self.rank);
        // SAFETY: the place was handed to post_recv, which keeps it valid until the request completes.
        unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr(), ptr, len) };
    }
}

impl Transport for Recording {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.to.len()
    }
    fn path(&self) -> String {
        "recording".into()
    }
    unsafe fn post_send(&mut self, peer: usize, ptr: *const u8, len: usize) -> Result<Request> {
        self.touched.insert(peer);
        // SAFETY: the caller keeps the region valid for the call.
        let bytes = unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec();
        self.to[peer].send(bytes).expect("peer thread alive");
        self.slots.push(None);
        Ok(Request(self.slots.len() - 1, 0))
    }
    unsafe fn post_recv(&mut self, peer: usize, ptr: *mut u8, len: usize) -> Result<Request> {
        self.touched.insert(peer);
        self.slots.push(Some((peer, ptr, len)));
        self.queued[peer].push_back(self.slots.len() - 1);
        Ok(Request(self.slots.len() - 1, 0))
    }
    fn wait(&mut self, req: Request) -> Result<()> {
        while let Some((peer, _, _)) = self.slots[req.0] {
            self.fill_next(peer);
        }
        Ok(())
    }
    fn wait_all(&mut self) -> Result<()> {
        for peer in 0..self.queued.len() {
            while !self.queued[peer].is_empty() {
                self.fill_next(peer);
            }
        }
        self.slots.clear();
        Ok(())
    }
    fn pending(&self) -> usize {
        self.slots.iter().flatten().count()
    }
}

/// Runs `f` on every rank of `n` over recording transports; returns each rank's touched peers and result.
fn on_ranks<R: Send>(n: usize, f: impl Fn(&mut Recording) -> R + Sync) -> Vec<(BTreeSet<usize>, R)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = Recording::world(n)
            .into_iter()
            .map(|mut t| {
                let f = &f;
                s.spawn(move || {
                    let out = f(&mut t);
                    (t.touched, out)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("rank thread")).collect()
    })
}

const SIZES: [usize; 13] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17];

#[test]
fn every_algorithm_posts_only_to_the_peers_its_set_names() {
    // Tiny chunks so the pipelined rings run several chunks per block.
    let tune = Tuning {
        chunk_bytes: 8,
        depth: 2,
        ring_cost: None,
    };
    let (dtype, op) = (Dtype::Int32, Op::Sum);
    for n in SIZES {
        for coll in Collective::ALL {
            for &algo in Algo::available(coll) {
                for root in [0, n / 2, n - 1] {
                    let l = coll.layout(24 * n, dtype.size(), n);
                    let got = on_ranks(n, |t| {
                        let r = t.rank();
                        let send: Vec<u8> = (0..l.send_count)
                            .flat_map(|i| ((r + 1 + i) as i32).to_le_bytes())
                            .collect();
                        let mut recv = vec![0u8; l.recv_count * dtype.size()];
                        let args = Args {
                            coll,
                            dtype,
                            op,
                            root,
                            count: l.count,
                            send: Some(&send),
                            recv: &mut recv,
                        };
                        algorithm::run(t, algo, args, &mut Workspace::default(), &tune).expect("runs");
                        recv
                    });
                    for (r, (touched, recv)) in got.iter().enumerate() {
                        let allowed: BTreeSet<usize> = of(coll, algo, root, r, n).into_iter().collect();
                        assert!(
                            touched.is_subset(&allowed),
                            "{coll}/{algo} root {root}, rank {r} of {n}: talked to {touched:?}, set {allowed:?}"
                        );
                        if coll == Collective::AllReduce {
                            // The transport really delivers: element i sums (r + 1 + i) over ranks.
                            let want = |i: usize| (0..n).map(|q| (q + 1 + i) as i32).sum::<i32>();
                            for (i, c) in recv.chunks(4).enumerate() {
                                assert_eq!(i32::from_le_bytes(c.try_into().unwrap()), want(i), "{algo} {n}");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn control_exchanges_stay_on_the_control_tree() {
    for n in SIZES {
        let got = on_ranks(n, |t| {
            control::barrier(t).expect("barrier");
            let all = control::gather(t, &vec![t.rank() as u8; t.rank()]).expect("gather");
            let b = control::broadcast(t, b"verdict").expect("broadcast");
            (all, b)
        });
        for (r, (touched, (all, b))) in got.iter().enumerate() {
            let allowed: BTreeSet<usize> = control(r, n).into_iter().collect();
            assert!(
                touched.is_subset(&allowed),
                "rank {r} of {n}: {touched:?} vs {allowed:?}"
            );
            assert_eq!(b, b"verdict");
            match all {
                Some(all) => {
                    assert_eq!(r, 0);
                    for (q, e) in all.iter().enumerate() {
                        assert_eq!(e, &vec![q as u8; q], "rank {q}'s entry of {n}");
                    }
                }
                None => assert_ne!(r, 0),
            }
        }
    }
}

#[test]
fn peer_sets_are_symmetric() {
    for n in 1..=70 {
        for coll in Collective::ALL {
            for &algo in Algo::available(coll) {
                for root in [0, n / 3, n - 1] {
                    for r in 0..n {
                        for p in of(coll, algo, root, r, n) {
                            assert!(p < n && p != r, "{coll}/{algo}: rank {r} of {n} names {p}");
                            assert!(
                                of(coll, algo, root, p, n).contains(&r),
                                "{coll}/{algo} root {root}: {r} talks to {p} but not back ({n} ranks)"
                            );
                        }
                    }
                }
            }
        }
        for r in 0..n {
            for p in control(r, n) {
                assert!(control(p, n).contains(&r), "control: {r} -> {p} of {n}");
            }
        }
    }
}

#[test]
fn ring_runs_connect_a_linear_number_of_pairs() {
    let uses = |algo| [Collective::AllReduce, Collective::AllGather].map(|coll| Use { coll, algo, root: 0 });
    for n in [3, 8, 64, 100, 512] {
        let links = Links::plan(n, &uses(Algo::Ring));
        // The ring's n pairs and the control tree's n-1; they share the tree's pairs at distance one
        // (v even, v+1 < n), and the closing pair (n-1, 0) when n-1 is a power of two.
        let shared = n / 2 + usize::from((n - 1).is_power_of_two() && n > 2);
        assert_eq!(links.pairs(), n + (n - 1) - shared, "{n} ranks");
        assert!(links.max_peers() <= 2 + n.ilog2() as usize + 1, "{n} ranks");
        for r in 0..n {
            for &p in links.peers(r) {
                assert!(links.connected(p, r));
            }
        }
    }
    // Everything else: still far from all pairs, and alltoall is all pairs.
    let n = 64;
    let all = Links::plan(
        n,
        &[
            uses(Algo::RecDoubling)[0],
            Use {
                coll: Collective::AllGather,
                algo: Algo::Bruck,
                root: 0,
            },
        ],
    );
    assert!(all.pairs() < n * (n - 1) / 2 / 2, "{}", all.pairs());
    let a2a = Links::plan(
        n,
        &[Use {
            coll: Collective::AllToAll,
            algo: Algo::Pairwise,
            root: 0,
        }],
    );
    assert_eq!(
        a2a,
        Links {
            why: a2a.why.clone(),
            ..Links::full(n, "")
        }
    );
    assert_eq!(a2a.pairs(), n * (n - 1) / 2);
    assert_eq!(Links::plan(1, &uses(Algo::Ring)).pairs(), 0);
}

#[test]
fn the_control_tree_matches_the_peer_plan() {
    use control::tree;
    for n in 1..=70 {
        for r in 0..n {
            let (parent, children) = tree(r, n);
            let mut mine: Vec<usize> = parent.into_iter().chain(children.iter().copied()).collect();
            mine.sort_unstable();
            assert_eq!(mine, super::control(r, n), "rank {r} of {n}");
            for c in children {
                assert_eq!(tree(c, n).0, Some(r), "child {c} of {r} names its parent ({n} ranks)");
            }
        }
    }
}
