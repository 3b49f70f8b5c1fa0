//! Rank 0's side of the rendezvous: admits joins through the gate (strangers and other jobs' ranks refused on
//! the way), refuses every rank at once when two jobs meet at one address, notices a joined rank that went
//! away and a service that stood still, and once every rank joined answers each with its welcome.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::join_message::Join;
use super::table::answer;
use super::wire::{admit_join, write_frame, Reply};
use crate::error::{stderr, Culprit, Error, PeerFailure, Result};
use crate::transport::auth::{Nonce, Token};
use crate::transport::tcp::drops::Drops;
use crate::transport::tcp::gate::{Event, Gate, Verdict};
use crate::world::missing::missing_ranks;
use crate::world::rank_info::RankInfo;
use crate::world::relay::{self, Source};

/// How long a connection may take to present its preamble and join before it is dropped.
const OPENING_DEADLINE: Duration = Duration::from_secs(5);

/// Makes room for the rendezvous of a job of `size` ranks, which holds one connection per rank until all joined:
/// raises the soft descriptor limit where needed, and is a usage error naming the numbers where the hard limit
/// is too low (said at once, not after the ranks came and were dropped).
pub fn make_room(size: usize, root: &str) -> Result<()> {
    crate::transport::tcp::connect::raise_fd_limit(size).map_err(|s| {
        Error::usage(
            "ulimit -n",
            format!(
                "the rendezvous at {root} holds one connection per rank until all joined: a job of {size} ranks \
                 needs {} file descriptors ({} already open) but the limit is {} and the hard limit {}, so it \
                 could not be raised; raise it for rank 0 (ulimit -n {})",
                s.need, s.open, s.soft, s.hard, s.need
            ),
        )
    })
}

/// Serves one job's rendezvous on `listener` until all `size` ranks joined or `timeout` passed.
pub fn serve(listener: TcpListener, size: usize, token: Token, timeout: Duration) -> Result<Vec<RankInfo>> {
    let deadline = Instant::now() + timeout;
    let where_ = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("configuring the rendezvous listener", e))?;
    // Keyed by rank and filled as ranks join: the announced size is not trusted with an allocation.
    let mut joined: Joined = BTreeMap::new();
    // Connections refused on the way, counted, so a rank that never joined can be explained in a line.
    let mut drops = Drops::new(format!("rendezvous at {where_}"));
    let mut count = 0;
    // Openings are read through a gate, without blocking: a silent stranger cannot hold up the ranks behind it.
    let mut gate = Gate::new(|n: &Nonce, b: &[u8]| admit_join(n, b, &token), OPENING_DEADLINE);
    let mut unserved = Unserved::new();
    let mut looked = Instant::now();
    // The first rank that joined only to say it refuses to start.
    let mut refused: Option<usize> = None;
    while count < size {
        unserved.tick();
        let (res, mut events) = gate.accept_all(&listener);
        res.map_err(|e| Error::io(format!("rendezvous at {where_}: accept"), e))?;
        events.extend(gate.drive());
        // Stopped or starved through the deadline: joins queued meanwhile may be from ranks that gave up
        // waiting, so they are read (each joined rank hears the verdict) but do not start the job.
        unserved.tick();
        let stood_still = Instant::now() >= deadline && unserved.blames_itself(timeout);
        for ev in events {
            let (mut sock, j) = match ev {
                Event::Admitted(sock, _, j) => (sock, j.printable()),
                Event::Rejected(from, why) => {
                    drops.note(from, &why);
                    continue;
                }
            };
            if let Some(msg) = clash(&joined, &j, size, &where_) {
                // Two jobs meet here: whichever ranks joined may belong to either, so none may start. Every rank
                // hears it now; newcomers too while they keep coming, then rank 0 (it serves this, usually in
                // its own process, which ends once it hears).
                let reply = Reply::Refused(msg.clone());
                let _ = write_frame(&mut sock, &reply);
                let first = joined.remove(&0);
                tell_all(&mut joined, &reply);
                let mut held: Vec<TcpStream> = first.into_iter().map(|(_, s)| s).collect();
                refuse_newcomers(&listener, gate, &reply, deadline, &mut held);
                for mut s in held {
                    let _ = write_frame(&mut s, &reply);
                }
                return Err(Error::usage(crate::world::env::JOB_TOKEN, msg));
            }
            if j.refused.is_some() && refused.is_none() {
                refused = Some(j.rank);
            }
            joined.insert(j.rank, (j, sock));
            count += 1;
        }
        if let Some(r) = refused {
            return Err(refuse_for(&listener, gate, joined, r, size, deadline));
        }
        if count == size && !stood_still {
            break;
        }
        unserved.tick();
        if Instant::now() >= deadline {
            let missing = missing_ranks(size, &joined);
            for (from, why) in gate.close() {
                drops.note(from, &why);
            }
            drops.finish();
            let unjoined = (0..size).filter(|r| !joined.contains_key(r)).count();
            let they = if unjoined == 1 { "it" } else { "they" };
            let ranks = if unjoined == 1 { "rank" } else { "ranks" };
            let (head, culprit) = if unserved.blames_itself(timeout) {
                // This process was stopped or starved while the ranks tried: they are not the ones to blame.
                let had_not = if unjoined == 0 {
                    String::new()
                } else {
                    format!("; {ranks} {missing} had not joined")
                };
                let head = format!(
                    "this process, which serves the rendezvous, did not run for {:.1} s while its {:.1} s bootstrap \
                     deadline ran (stopped, or starved of CPU), so ranks that came meanwhile may have given up \
                     unanswered{had_not}",
                    unserved.total.as_secs_f64(),
                    timeout.as_secs_f64()
                );
                (head, Some(Culprit::Rendezvous))
            } else {
                let head = format!(
                    "{ranks} {missing} did not join within {:.1} s; did {they} start, and can {they} reach this \
                     address?",
                    timeout.as_secs_f64()
                );
                (head, None)
            };
            let failure = PeerFailure {
                message: format!("rendezvous at {where_}: {head}"),
                culprit,
                operation: Some("the ranks' joins".into()),
                after: if drops.total() == 0 {
                    String::new()
                } else {
                    format!(
                        " Refused on the way: {} connection(s): {}",
                        drops.total(),
                        drops.summary()
                    )
                },
                ..PeerFailure::default()
            };
            tell_all(&mut joined, &Reply::Failed(failure.to_string()));
            return Err(Error::Peer(Box::new(failure)));
        }
        // A joined rank says nothing until the answer, so a readable joined socket means it went away: look
        // between waits (a short tick, since the gate's wait does not watch joined ranks).
        gate.wait(&listener, &[], deadline.min(Instant::now() + NEWS_TICK));
        // Looked at once a tick, not once a join: a poll over every joined rank per join is quadratic in the job.
        if looked.elapsed() < NEWS_TICK {
            continue;
        }
        looked = Instant::now();
        if let Some(r) = closed_rank(&joined) {
            let j = &joined[&r].0;
            let missing = missing_ranks(size, &joined);
            let err = Error::peer(format!(
                "rank {r} (host {}, pid {}) dropped its connection to the rendezvous at {where_} after joining (it \
                 exited or was killed) while ranks {} had not joined yet",
                j.host, j.pid, missing
            ))
            .during("the bootstrap")
            .blaming(r, j.host.clone());
            joined.remove(&r);
            let reply = Reply::Failed(err.to_string());
            tell_all(&mut joined, &reply);
            // Ranks still on their way (rank 0 itself, maybe) hear the same when they arrive.
            let mut late = joined.keys().copied().collect::<BTreeSet<usize>>();
            late.insert(r);
            tell_latecomers(&listener, gate, size, late, &reply, deadline, None);
            return Err(err);
        }
    }
    for (from, why) in gate.close() {
        drops.note(from, &why);
    }
    drops.finish();
    let joins: Vec<&Join> = joined.values().map(|(j, _)| j).collect();
    let answer = match answer(&joins, size) {
        Ok(a) => a,
        Err(msg) => {
            refuse_all(&mut joined, &msg);
            return Err(Error::usage("options", msg));
        }
    };
    for ((j, sock), w) in joined.values_mut().zip(answer.welcomes) {
        let direct = w.from == Source::Rendezvous;
        let sent = write_frame(sock, &Reply::Welcome(w)).and_then(|()| {
            if direct {
                relay::send(sock, &answer.table.bytes)
            } else {
                Ok(())
            }
        });
        if let Err(e) = sent {
            stderr!(
                "collbench: rendezvous at {where_}: could not answer rank {} (host {}): {e}",
                j.rank,
                j.host
            );
        }
    }
    Ok(answer.infos)
}

/// Why `j` cannot join the ranks `joined` so far, if it cannot: it is a rank of another job (another size,
/// other job ids, or a rank already held by another process).
fn clash(joined: &Joined, j: &Join, size: usize, where_: &str) -> Option<String> {
    let fix = "Two jobs use one rendezvous address: give each job its own (MASTER_PORT or COLLBENCH_ROOT), or \
               each its own COLLBENCH_JOB_TOKEN";
    let them = |j: &Join| format!("rank {} (host {}, pid {})", j.rank, j.host, j.pid);
    if j.size != size {
        return Some(format!(
            "rendezvous at {where_}: {} thinks the job has {} ranks, this rendezvous serves a job of {size}. {fix}",
            them(j),
            j.size
        ));
    }
    if j.rank >= size {
        return Some(format!(
            "rendezvous at {where_}: {} is out of range for a job of {size} ranks",
            them(j)
        ));
    }
    // Two jobs' identities, where they differ, say more than which rank came twice: named first, whichever
    // rank of the other job happened to arrive first.
    if let Some((first, _)) = joined.values().next().filter(|(first, _)| first.job != j.job) {
        return Some(format!(
            "rendezvous at {where_}: {} belongs to job [{}], {} to job [{}]. {fix}",
            them(first),
            first.job.join(", "),
            them(j),
            j.job.join(", ")
        ));
    }
    joined.get(&j.rank).map(|(held, _)| {
        format!(
            "rendezvous at {where_}: two processes joined as rank {}: {} and {}; they belong to two jobs started \
             with the same job token. {fix}",
            j.rank,
            them(held),
            them(j)
        )
    })
}

/// Tells every rank of the job that rank `r` (in `joined`) refused to start: those joined now, then each as it
/// comes until all `size` were told (or `deadline`); returns the error the service ends with. Rank 0 hears it
/// last: it usually runs this service, and its process ends once it hears, taking the service with it.
fn refuse_for<D: FnMut(&Nonce, &[u8]) -> Verdict<Join>>(
    listener: &TcpListener,
    gate: Gate<Join, D>,
    mut joined: Joined,
    r: usize,
    size: usize,
    deadline: Instant,
) -> Error {
    let (rank, host, refusal) = {
        let j = &joined[&r].0;
        (j.rank, j.host.clone(), j.refused.clone().unwrap_or_default())
    };
    let err = Error::peer(format!(
        "rank {rank} (host {host}) refused to start: {}",
        refusal.reason
    ))
    .during("the bootstrap")
    .blaming(rank, host.clone());
    let reply = Reply::Declined { rank, host, refusal };
    let mut held: Vec<TcpStream> = joined.remove(&0).into_iter().map(|(_, s)| s).collect();
    let mut told: BTreeSet<usize> = joined.keys().copied().collect();
    tell_all(&mut joined, &reply);
    if !held.is_empty() {
        told.insert(0);
    }
    tell_latecomers(listener, gate, size, told, &reply, deadline, Some(&mut held));
    for mut s in held {
        let _ = write_frame(&mut s, &reply);
    }
    err
}

/// How long a rendezvous that found two jobs at its address keeps refusing newcomers after the last one came.
const CLASH_QUIET: Duration = Duration::from_secs(2);

/// Refuses every join that arrives until none came for [`CLASH_QUIET`] (or `deadline`): the ranks of both jobs
/// then end at once, not at their deadline. Joins of rank 0 are kept in `held`, answered by the caller last.
fn refuse_newcomers<D: FnMut(&Nonce, &[u8]) -> Verdict<Join>>(
    listener: &TcpListener,
    mut gate: Gate<Join, D>,
    reply: &Reply,
    deadline: Instant,
    held: &mut Vec<TcpStream>,
) {
    let mut quiet_from = Instant::now();
    loop {
        let until = deadline.min(quiet_from + CLASH_QUIET);
        if Instant::now() >= until {
            return;
        }
        let (res, mut events) = gate.accept_all(listener);
        if res.is_err() {
            return;
        }
        events.extend(gate.drive());
        for ev in events {
            if let Event::Admitted(mut sock, _, j) = ev {
                quiet_from = Instant::now();
                if j.rank == 0 {
                    held.push(sock);
                } else {
                    let _ = write_frame(&mut sock, reply);
                }
            }
        }
        if !gate.is_empty() {
            quiet_from = Instant::now();
        }
        gate.wait(listener, &[], deadline.min(quiet_from + CLASH_QUIET));
    }
}

/// Answers `reply` to every rank below `size` not in `told` that arrives before `deadline`; where `hold` is
/// given, rank 0's connections are kept there unanswered, for the caller to answer last.
///
/// `gate` is the service's own: a rank whose connection it already holds (connected, join not yet read) is
/// among them.
fn tell_latecomers<D: FnMut(&Nonce, &[u8]) -> Verdict<Join>>(
    listener: &TcpListener,
    mut gate: Gate<Join, D>,
    size: usize,
    mut told: BTreeSet<usize>,
    reply: &Reply,
    deadline: Instant,
    mut hold: Option<&mut Vec<TcpStream>>,
) {
    while told.len() < size && Instant::now() < deadline {
        let (res, mut events) = gate.accept_all(listener);
        if res.is_err() {
            return;
        }
        events.extend(gate.drive());
        for ev in events {
            if let Event::Admitted(mut sock, _, j) = ev {
                if j.rank < size {
                    told.insert(j.rank);
                }
                match hold.as_deref_mut() {
                    Some(held) if j.rank == 0 => held.push(sock),
                    _ => {
                        let _ = write_frame(&mut sock, reply);
                    }
                }
            }
        }
        if told.len() >= size {
            return;
        }
        gate.wait(listener, &[], deadline);
    }
}

/// The ranks that joined so far, with their connections, by rank.
type Joined = BTreeMap<usize, (Join, TcpStream)>;

fn refuse_all(joined: &mut Joined, msg: &str) {
    tell_all(joined, &Reply::Refused(msg.to_string()));
}

fn tell_all(joined: &mut Joined, reply: &Reply) {
    // Rank 0 last: it usually runs this service, and once it hears a refusal its process exits, taking the
    // service with it before the others were told.
    for (_, sock) in joined.values_mut().rev() {
        let _ = write_frame(sock, reply);
    }
}

/// How often the rendezvous looks at joined ranks while it waits for the others.
const NEWS_TICK: Duration = Duration::from_millis(100);

/// How long the rendezvous loop did not come round (the process stopped, or starved of CPU): the loop
/// wakes at least every [`NEWS_TICK`], so a longer gap is time in which no rank could be answered.
struct Unserved {
    last: Instant,
    total: Duration,
}

impl Unserved {
    /// A gap past the tick by more than this is counted (a busy machine's scheduling delays are not).
    const SLACK: Duration = Duration::from_millis(500);

    fn new() -> Unserved {
        Unserved {
            last: Instant::now(),
            total: Duration::ZERO,
        }
    }

    /// Called between the steps of each pass of the loop: a process stops wherever it is.
    fn tick(&mut self) {
        self.count(Instant::now());
    }

    fn count(&mut self, now: Instant) {
        let gap = now.saturating_duration_since(self.last);
        if gap > NEWS_TICK + Self::SLACK {
            self.total += gap - NEWS_TICK;
        }
        self.last = now;
    }

    /// Whether the ranks that did not join are more likely missing because nobody answered them: the loop
    /// stood still for at least a quarter of the deadline (and a second).
    fn blames_itself(&self, timeout: Duration) -> bool {
        self.total >= Duration::from_secs(1).max(timeout / 4)
    }
}

/// A joined rank whose connection was closed (a rank says nothing after its join, so anything readable is
/// its end, or bytes no collbench rank sends), without waiting.
fn closed_rank(joined: &Joined) -> Option<usize> {
    use std::os::fd::AsRawFd;
    let ranks: Vec<usize> = joined.keys().copied().collect();
    let mut fds: Vec<libc::pollfd> = joined
        .values()
        .map(|(_, sock)| libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    if fds.is_empty() {
        return None;
    }
    // SAFETY: fds is a valid array of pollfd of its length.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    for (fd, &r) in fds.iter().zip(&ranks) {
        if fd.revents == 0 {
            continue;
        }
        let mut b = [0u8; 1];
        // SAFETY: b is writable for its length.
        let rc = unsafe { libc::recv(fd.fd, b.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        let gone = rc >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock;
        if gone {
            return Some(r);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::client::{await_welcome, connect, join, send_join};
    use super::super::join_message::tests::join_msg;
    use super::*;
    use serde_json::json;
    use std::io::Write;

    #[test]
    fn a_loop_that_stood_still_for_a_quarter_of_the_deadline_blames_itself() {
        let t0 = Instant::now();
        let mut u = Unserved {
            last: t0,
            total: Duration::ZERO,
        };
        // Passes 400 ms apart, as on a busy machine: within the slack, nothing counted.
        for i in 1..=20 {
            u.count(t0 + Duration::from_millis(400 * i));
        }
        assert_eq!(u.total, Duration::ZERO);
        assert!(!u.blames_itself(Duration::from_secs(4)));
        // Stopped for 14 s: that gap, less the tick, is time nobody was answered.
        u.count(u.last + Duration::from_secs(14));
        assert_eq!(u.total, Duration::from_secs(14) - NEWS_TICK);
        assert!(u.blames_itself(Duration::from_secs(6)));
        // The same stall in a 2-minute deadline leaves the ranks plenty of time: they are to blame.
        assert!(!u.blames_itself(Duration::from_secs(120)));
    }

    #[test]
    fn a_joined_rank_that_drops_fails_the_job_naming_it_also_for_latecomers() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [7u8; 16];
        let server = std::thread::spawn(move || serve(l, 3, token, Duration::from_secs(60)));
        let mut s = connect(&root, Instant::now() + Duration::from_secs(20), "rank 2").unwrap();
        send_join(
            &mut s,
            &root,
            &token,
            &Join {
                size: 3,
                ..join_msg(2, json!({}))
            },
            Instant::now() + Duration::from_secs(20),
        )
        .unwrap();
        drop(s);
        // Whether they join before the service notices the drop or after, ranks 0 and 1 hear it.
        for r in [0, 1] {
            let e = join(
                &root,
                &token,
                &Join {
                    size: 3,
                    ..join_msg(r, json!({}))
                },
                Duration::from_secs(20),
            )
            .unwrap_err();
            assert_eq!(e.exit_code(), crate::error::EXIT_PEER, "{e}");
            assert!(e.to_string().contains("rank 2 (host h"), "{e}");
        }
        let e = server.join().unwrap().unwrap_err().to_string();
        assert!(
            e.contains("rank 2 (host h") && e.contains("dropped") && e.contains("bootstrap"),
            "{e}"
        );
        assert!(e.contains("had not joined"), "{e}");
    }

    #[test]
    fn a_rank_connected_but_not_yet_joined_when_a_drop_is_seen_hears_it_too() {
        // Rank 0 connects first and is slow to send its join (it binds its interfaces in between), so the
        // service holds its connection, unauthenticated, when rank 2's drop is noticed.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [7u8; 16];
        let server = std::thread::spawn(move || serve(l, 3, token, Duration::from_secs(60)));
        let msg = |r| Join {
            size: 3,
            ..join_msg(r, json!({}))
        };
        let deadline = || Instant::now() + Duration::from_secs(20);
        let mut slow = connect(&root, deadline(), "rank 0").unwrap();
        let mut s1 = connect(&root, deadline(), "rank 1").unwrap();
        send_join(&mut s1, &root, &token, &msg(1), deadline()).unwrap();
        let mut s2 = connect(&root, deadline(), "rank 2").unwrap();
        send_join(&mut s2, &root, &token, &msg(2), deadline()).unwrap();
        drop(s2);
        // Rank 1 hearing of the drop means the service saw it, with rank 0's connection already accepted.
        let e1 = await_welcome(s1, &root, &token, &msg(1), None, deadline())
            .unwrap_err()
            .to_string();
        assert!(e1.contains("rank 2 (host h"), "{e1}");
        send_join(&mut slow, &root, &token, &msg(0), deadline()).unwrap();
        let e0 = await_welcome(slow, &root, &token, &msg(0), None, deadline())
            .unwrap_err()
            .to_string();
        assert!(e0.contains("rank 2 (host h") && e0.contains("dropped"), "{e0}");
        assert!(server.join().unwrap().is_err());
    }

    /// Joins of a job of 4 from process `pid` of job `job`, on its own thread.
    fn join_as(
        root: &str,
        token: Token,
        rank: usize,
        pid: u32,
        job: &[&str],
    ) -> std::thread::JoinHandle<Result<Vec<RankInfo>>> {
        let root = root.to_string();
        let me = Join {
            size: 4,
            pid,
            job: job.iter().map(|s| s.to_string()).collect(),
            ..join_msg(rank, json!({}))
        };
        std::thread::spawn(move || join(&root, &token, &me, Duration::from_secs(30)))
    }

    /// Connects and sends the join of `rank` (process `pid` of job `job`); returns once it went through the
    /// proofs and was sent, before any answer.
    fn joined(root: &str, token: Token, rank: usize, pid: u32, job: &[&str]) -> TcpStream {
        let me = Join {
            size: 4,
            pid,
            job: job.iter().map(|s| s.to_string()).collect(),
            ..join_msg(rank, json!({}))
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut s = connect(root, deadline, "test").unwrap();
        send_join(&mut s, root, &token, &me, deadline).unwrap();
        s
    }

    #[test]
    fn two_jobs_with_one_token_at_one_rendezvous_are_refused_at_once_never_merged() {
        // Job A's ranks 0-2 join; then job B's rank 2 (another process, same token, no launcher id) claims rank 2
        // too. Neither job may start; every rank hears why at once, and so does A's rank 3 arriving afterwards
        // (not at a deadline: its own is 30 s, the service's 10 minutes).
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [6u8; 16];
        let server = std::thread::spawn(move || serve(l, 4, token, Duration::from_secs(600)));
        let a: Vec<TcpStream> = (0..3).map(|r| joined(&root, token, r, 100 + r as u32, &[])).collect();
        // A's rank 3 is already connected (not yet joined) when the clash happens.
        let mut a3 = connect(&root, Instant::now() + Duration::from_secs(30), "rank 3").unwrap();
        let b2 = join_as(&root, token, 2, 202, &[]);
        let e = b2.join().unwrap().unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
        let e = e.to_string();
        assert!(
            e.contains("two processes joined as rank 2") && e.contains("pid 102") && e.contains("pid 202"),
            "{e}"
        );
        assert!(e.contains("MASTER_PORT") && e.contains("COLLBENCH_JOB_TOKEN"), "{e}");
        let me3 = Join {
            size: 4,
            pid: 103,
            ..join_msg(3, json!({}))
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        send_join(&mut a3, &root, &token, &me3, deadline).unwrap();
        let a3 = await_welcome(a3, &root, &token, &me3, None, deadline)
            .unwrap_err()
            .to_string();
        assert!(a3.contains("two processes joined as rank 2"), "{a3}");
        for (r, s) in a.into_iter().enumerate() {
            let me = Join {
                size: 4,
                pid: 100 + r as u32,
                ..join_msg(r, json!({}))
            };
            let e = await_welcome(s, &root, &token, &me, None, Instant::now() + Duration::from_secs(30))
                .unwrap_err()
                .to_string();
            assert!(e.contains("two processes joined as rank 2"), "rank {r}: {e}");
        }
        let e = server.join().unwrap().unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
    }

    #[test]
    fn ranks_of_two_jobs_told_apart_by_their_launcher_ids_are_refused_at_once() {
        // Same token, different Slurm jobs: the second job's first rank is refused with both ids named.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [6u8; 16];
        let server = std::thread::spawn(move || serve(l, 4, token, Duration::from_secs(600)));
        let a0 = joined(&root, token, 0, 100, &["SLURM_JOB_ID=7"]);
        let e = join_as(&root, token, 1, 201, &["SLURM_JOB_ID=8"])
            .join()
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("SLURM_JOB_ID=7") && e.contains("SLURM_JOB_ID=8") && e.contains("one rendezvous address"),
            "{e}"
        );
        drop(a0);
        assert!(server.join().unwrap().is_err());
    }

    #[test]
    fn a_rank_refusing_to_start_is_named_to_every_rank_and_rank_0_hears_it_last() {
        use super::super::join_message::Refusal;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [8u8; 16];
        let server = std::thread::spawn(move || serve(l, 3, token, Duration::from_secs(600)));
        let msg = |r| Join {
            size: 3,
            ..join_msg(r, json!({}))
        };
        let deadline = || Instant::now() + Duration::from_secs(60);
        let mut s0 = connect(&root, deadline(), "rank 0").unwrap();
        send_join(&mut s0, &root, &token, &msg(0), deadline()).unwrap();
        let refusing = Join {
            refused: Some(Refusal {
                flag: Some("--memory".into()),
                reason: "8 GiB do not fit".into(),
            }),
            ..msg(2)
        };
        let e2 = join(&root, &token, &refusing, Duration::from_secs(60)).unwrap_err();
        assert!(
            e2.to_string()
                .contains("rank 2 (host h) refused to start: 8 GiB do not fit"),
            "{e2}"
        );
        // Rank 0 (which usually serves this in its own process) is held until rank 1, still to come, was told.
        let r0 = std::thread::spawn({
            let root = root.clone();
            move || await_welcome(s0, &root, &token, &msg(0), None, deadline())
        });
        assert!(!r0.is_finished(), "rank 0 heard before rank 1 was told");
        let e1 = join(&root, &token, &msg(1), Duration::from_secs(60)).unwrap_err();
        let e0 = r0.join().unwrap().unwrap_err();
        for e in [e0, e1] {
            assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
            assert_eq!(e.to_string().matches("--memory: rank ").count(), 1, "{e}");
            assert!(
                e.to_string()
                    .contains("rank 2 (host h) refused to start: 8 GiB do not fit"),
                "{e}"
            );
        }
        let e = server.join().unwrap().unwrap_err();
        assert_eq!(e.culprit().map(|c| c.to_string()).as_deref(), Some("rank 2 (host h)"));
    }

    #[test]
    fn ranks_meet_and_strangers_are_dropped() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [9u8; 16];
        let server = std::thread::spawn(move || serve(l, 2, token, Duration::from_secs(20)));
        // A port scanner first: garbage, then a wrong token.
        let mut s = TcpStream::connect(&root).unwrap();
        s.write_all(b"GET / HTTP/1.0\r\n\r\n-------").unwrap();
        drop(s);
        let r2 = root.clone();
        let wrong = std::thread::spawn(move || join(&r2, &[1u8; 16], &join_msg(1, json!({})), Duration::from_secs(2)));
        assert!(wrong.join().unwrap().is_err());
        let r1 = root.clone();
        let t1 = std::thread::spawn(move || join(&r1, &token, &join_msg(1, json!({"a": 1})), Duration::from_secs(20)));
        let t0 = join(&root, &token, &join_msg(0, json!({"a": 1})), Duration::from_secs(20)).unwrap();
        let t1 = t1.join().unwrap().unwrap();
        assert_eq!(t0, t1);
        assert_eq!(t0.len(), 2);
        assert_eq!(server.join().unwrap().unwrap().len(), 2);
    }

    #[test]
    fn differing_options_are_refused_before_any_data_moves() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [3u8; 16];
        let server = std::thread::spawn(move || serve(l, 2, token, Duration::from_secs(20)));
        let r1 = root.clone();
        let t1 =
            std::thread::spawn(move || join(&r1, &token, &join_msg(1, json!({"iters": 5})), Duration::from_secs(20)));
        let e0 = join(
            &root,
            &token,
            &join_msg(0, json!({"iters": 20})),
            Duration::from_secs(20),
        )
        .unwrap_err();
        let e1 = t1.join().unwrap().unwrap_err();
        for e in [e0.to_string(), e1.to_string()] {
            assert!(e.contains("iters") && e.contains("rank 1"), "{e}");
        }
        assert_eq!(e0.exit_code(), crate::error::EXIT_USAGE);
        assert!(server.join().unwrap().is_err());
    }

    #[test]
    fn a_rank_that_never_joins_is_a_peer_failure_naming_it() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [5u8; 16];
        let server = std::thread::spawn(move || serve(l, 3, token, Duration::from_millis(300)));
        let me = Join {
            size: 3,
            ..join_msg(0, json!({}))
        };
        let e = join(&root, &token, &me, Duration::from_secs(20)).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_PEER, "{e}");
        assert!(e.to_string().contains("ranks 1, 2 did not join"), "{e}");
        assert!(server.join().unwrap().is_err());
    }

    #[test]
    fn a_wrong_token_is_told_at_once_and_named_when_the_job_fails() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || serve(l, 1, [1u8; 16], Duration::from_millis(500)));
        let e = join(
            &root,
            &[2u8; 16],
            &Join {
                size: 1,
                ..join_msg(0, json!({}))
            },
            Duration::from_secs(20),
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
        let e = e.to_string();
        assert!(
            e.contains("could not prove") && e.contains("COLLBENCH_JOB_TOKEN"),
            "{e}"
        );
        let e = server.join().unwrap().unwrap_err().to_string();
        assert!(
            e.contains("did not join") && e.contains("Refused on the way") && e.contains("different job token"),
            "{e}"
        );
    }
}
