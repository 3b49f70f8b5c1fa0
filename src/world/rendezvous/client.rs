//! A rank's side of the rendezvous: connects (retrying until the service is up and its name resolves), checks
//! the service's proof of the job token before proving its own, sends its join and waits for the welcome; a
//! connection dropped before any answer is joined again, and a service that went silent is named.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::address::resolve_until;
use super::join_message::Join;
use super::table::{fetch_table, with_relay};
use super::wire::{
    binding, decode_reply, frame_bytes, read_frame, Heard, CHALLENGE_LEN, CHALLENGE_MAGIC, MAGIC, PREAMBLE_LEN,
    PROOF_MSG_LEN, VERSION, VERSION_BYTES,
};
use crate::error::{stderr, Error, Result};
use crate::transport::auth::{self, Role, Token};
use crate::world::rank_info::RankInfo;
use crate::world::stalled;

/// Connects to the rendezvous at `root`, retrying (it may not be up yet, or its name not yet resolvable)
/// until `deadline`.
pub fn connect(root: &str, deadline: Instant, who: &str) -> Result<TcpStream> {
    let started = Instant::now();
    loop {
        let err = match resolve_until(root, deadline) {
            Ok(addrs) => match addrs
                .iter()
                .find_map(|a| TcpStream::connect_timeout(a, Duration::from_secs(1)).ok())
            {
                Some(s) => return Ok(s),
                None => format!("no answer at {addrs:?}"),
            },
            Err(e) => format!("cannot resolve it: {e}"),
        };
        if Instant::now() >= deadline {
            return Err(Error::peer(format!(
                "{who}: cannot reach the rendezvous at {root} after trying for {:.1} s ({err}); is rank 0 (or the \
                 launcher) running, and is the address right? Raise --bootstrap-timeout if ranks start far apart",
                started.elapsed().as_secs_f64()
            ))
            .waiting_for("a connection to the rendezvous"));
        }
        // The service may not be listening yet; try again shortly.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Presents `me` over `sock` (connected to the rendezvous at `root`) and returns every rank's info.
pub fn exchange(mut sock: TcpStream, root: &str, token: &Token, me: &Join, deadline: Instant) -> Result<Vec<RankInfo>> {
    let (me, relay) = with_relay(&sock, me);
    match send_join(&mut sock, root, token, &me, deadline) {
        // Closed before the challenge: the wait below connects again. A silent service is named at once.
        Err(e) if e.exit_code() != crate::error::EXIT_USAGE && e.culprit().is_none() => {}
        r => r?,
    }
    await_welcome(sock, root, token, &me, relay, deadline)
}

/// Says hello to the rendezvous at `root` over `sock`, checks its proof, then sends this rank's proof and
/// `me`. Nothing derived from the token is sent before the service proved it holds it.
pub fn send_join(sock: &mut TcpStream, root: &str, token: &Token, me: &Join, deadline: Instant) -> Result<()> {
    let who = format!("rank {} (host {})", me.rank, me.host);
    let io_err = |e: std::io::Error| Error::peer(format!("{who}: talking to the rendezvous at {root} failed: {e}"));
    let mine = auth::nonce();
    let mut hello = Vec::with_capacity(PREAMBLE_LEN);
    hello.extend_from_slice(&MAGIC);
    hello.extend_from_slice(&VERSION_BYTES);
    hello.extend_from_slice(&mine);
    sock.write_all(&hello).map_err(io_err)?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    sock.set_read_timeout(Some(left)).map_err(io_err)?;
    let mut ch = [0u8; CHALLENGE_LEN];
    let asked = Instant::now();
    if let Err(e) = sock.read_exact(&mut ch) {
        // Connected, yet no challenge: a service that is not running (stopped, hung) is blamed by name.
        if stalled::timed_out(&e) {
            if let Some(stall) = stalled::blame_if_silent(&who, root, "challenge", asked) {
                return Err(stall);
            }
        }
        return Err(io_err(e));
    }
    let version = u16::from_le_bytes([ch[4], ch[5]]);
    let proved = ch[..4] == CHALLENGE_MAGIC
        && version == VERSION
        && auth::verify(
            token,
            Role::Listener,
            &binding(&mine, ch[6..PREAMBLE_LEN].try_into().expect("a nonce's length")),
            &ch[PREAMBLE_LEN..],
        );
    if !proved {
        let _ = sock.write_all(&[0u8; PROOF_MSG_LEN]);
        let what = if ch[..4] != CHALLENGE_MAGIC {
            "is not a collbench rendezvous (bad answer)".to_string()
        } else if version != VERSION {
            format!("speaks rendezvous protocol version {version}, this rank {VERSION} (mixed collbench versions?)")
        } else {
            "could not prove it holds this rank's job token: it serves another job (two jobs use one rendezvous \
             address: give each its own MASTER_PORT or COLLBENCH_ROOT), or the ranks were given different \
             COLLBENCH_JOB_TOKEN"
                .to_string()
        };
        return Err(Error::usage(
            crate::world::env::JOB_TOKEN,
            format!("{who}: the rendezvous at {root} {what}"),
        ));
    }
    let mut out = Vec::with_capacity(PROOF_MSG_LEN + 256);
    out.push(1);
    out.extend_from_slice(&auth::prove(
        token,
        Role::Connector,
        &binding(&mine, ch[6..PREAMBLE_LEN].try_into().expect("a nonce's length")),
    ));
    out.extend_from_slice(&frame_bytes(me).map_err(|e| io_err(std::io::Error::other(e)))?);
    sock.write_all(&out).map_err(io_err)
}

/// Waits until `deadline` for the rendezvous's answer to `me` (already sent over `sock`): every rank's info, or
/// why the job cannot start. `relay` is the listener `me` names, where this rank then serves its children.
///
/// A connection closed before any answer was dropped unauthenticated (the service makes room that way when
/// strangers flood it) or reset: the rank connects again and sends its join again, until `deadline`. Refusals
/// for a second mean the service is gone, and end the wait at once.
pub fn await_welcome(
    mut sock: TcpStream,
    root: &str,
    token: &Token,
    me: &Join,
    relay: Option<TcpListener>,
    deadline: Instant,
) -> Result<Vec<RankInfo>> {
    let who = format!("rank {} (host {})", me.rank, me.host);
    let io_err = |e: std::io::Error| Error::peer(format!("{who}: talking to the rendezvous at {root} failed: {e}"));
    let mut said = false;
    let since = Instant::now();
    loop {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        sock.set_read_timeout(Some(left)).map_err(io_err)?;
        let why = match read_frame(&mut sock) {
            Ok(frame) => {
                let w = decode_reply(&frame, &who, root)?;
                return fetch_table(&w, &mut sock, relay, me, &who, root, deadline);
            }
            Err(Heard::Silent(why)) => match stalled::blame_if_silent(&who, root, "verdict", since) {
                Some(stall) => return Err(stall),
                None => why,
            },
            Err(Heard::Failed(why)) => why,
            Err(Heard::Closed(why)) if Instant::now() < deadline => {
                if !said {
                    said = true;
                    stderr!(
                        "collbench: {who}: the rendezvous at {root} closed the connection before answering ({why}; \
                         it drops the oldest unauthenticated connections when strangers flood it); joining again"
                    );
                }
                sock = reconnect(root, deadline, &who)?;
                // A failed hello shows as a closed connection on the next read, and is retried the same way; a
                // refusal is final.
                match send_join(&mut sock, root, token, me, deadline) {
                    Err(e) if e.exit_code() == crate::error::EXIT_USAGE => return Err(e),
                    _ => {}
                }
                continue;
            }
            Err(Heard::Closed(why)) => why,
        };
        return Err(Error::peer(format!(
            "{who}: no welcome from the rendezvous at {root} ({why}); are all {} ranks running, with the same \
             job token and collbench version?",
            me.size
        ))
        .waiting_for("the rendezvous's welcome"));
    }
}

/// Connects to the rendezvous at `root` again after it closed a connection: retries until `deadline`, but a
/// refusal that lasts [`REFUSED_FOR`] means nothing listens there any more.
fn reconnect(root: &str, deadline: Instant, who: &str) -> Result<TcpStream> {
    let mut refused_since: Option<Instant> = None;
    loop {
        let addrs = resolve_until(root, deadline).unwrap_or_default();
        let mut refused = false;
        for a in &addrs {
            match TcpStream::connect_timeout(a, Duration::from_secs(1)) {
                Ok(s) => return Ok(s),
                Err(e) => refused |= e.kind() == std::io::ErrorKind::ConnectionRefused,
            }
        }
        let since = if refused {
            *refused_since.get_or_insert_with(Instant::now)
        } else {
            refused_since = None;
            Instant::now()
        };
        if since.elapsed() >= REFUSED_FOR || Instant::now() >= deadline {
            return Err(Error::peer(format!(
                "{who}: the rendezvous at {root} closed the connection without an answer and {}; rank 0 (or the \
                 launcher) serving it has most likely exited (see its own error)",
                if refused {
                    "now refuses connections"
                } else {
                    "cannot be reached again before the bootstrap deadline"
                }
            )));
        }
        // The service is busy or going away: look again shortly.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How long a rank that lost its connection to the rendezvous accepts refusals before concluding it is gone.
const REFUSED_FOR: Duration = Duration::from_secs(1);

/// Connects and joins in one go (tests and simple callers).
pub fn join(root: &str, token: &Token, me: &Join, timeout: Duration) -> Result<Vec<RankInfo>> {
    let deadline = Instant::now() + timeout;
    let who = format!("rank {} (host {})", me.rank, me.host);
    let sock = connect(root, deadline, &who)?;
    exchange(sock, root, token, me, deadline)
}

#[cfg(test)]
mod tests {
    use super::super::join_message::tests::join_msg;
    use super::super::service::serve;
    use super::super::wire::{challenge, write_frame, Reply};
    use super::*;
    use crate::transport::auth::PROOF_LEN;
    use crate::world::relay::{self, Source, Table};
    use serde_json::json;

    #[test]
    fn a_join_dropped_before_any_answer_is_sent_again_on_a_new_connection() {
        // A full gate drops the oldest unauthenticated connection, which may be a real rank's: the service
        // below closes the first connection unread, as the gate does, and answers the second.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = l.local_addr().unwrap().to_string();
        let token = [4u8; 16];
        let server = std::thread::spawn(move || {
            let (first, _) = l.accept().unwrap();
            drop(first);
            let (mut second, _) = l.accept().unwrap();
            let mut pre = [0u8; PREAMBLE_LEN];
            second.read_exact(&mut pre).unwrap();
            let mine = auth::nonce();
            second
                .write_all(&challenge(&token, pre[6..].try_into().unwrap(), &mine))
                .unwrap();
            let mut proof = [0u8; PROOF_MSG_LEN];
            second.read_exact(&mut proof).unwrap();
            let j: Join = serde_json::from_slice(&read_frame(&mut second).ok().expect("a join")).unwrap();
            let t = Table::new(serde_json::to_vec(&vec![j.info()]).unwrap());
            write_frame(&mut second, &Reply::Welcome(t.welcome(1, Source::Rendezvous))).unwrap();
            relay::send(&mut second, &t.bytes).unwrap();
        });
        let me = Join {
            size: 1,
            ..join_msg(0, json!({}))
        };
        let got = join(&root, &token, &me, Duration::from_secs(20)).unwrap();
        assert_eq!(got.len(), 1);
        server.join().unwrap();
    }

    #[test]
    fn a_squatter_on_the_rendezvous_address_learns_nothing_it_can_replay() {
        // A process listening where rank 0 should, without the token: it records what a rank sends, answers with
        // a challenge of the right shape (it cannot make a proof), and records the rest.
        let squat = TcpListener::bind("127.0.0.1:0").unwrap();
        let root = squat.local_addr().unwrap().to_string();
        let token = crate::world::new_token();
        let recorder = std::thread::spawn(move || {
            let (mut s, _) = squat.accept().unwrap();
            let mut heard = vec![0u8; PREAMBLE_LEN];
            s.read_exact(&mut heard).unwrap();
            let mut fake = CHALLENGE_MAGIC.to_vec();
            fake.extend_from_slice(&VERSION_BYTES);
            fake.extend_from_slice(&auth::nonce());
            fake.extend_from_slice(&[0x42; PROOF_LEN]);
            s.write_all(&fake).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let _ = s.read_to_end(&mut heard);
            heard
        });
        let me = Join {
            size: 2,
            ..join_msg(1, json!({}))
        };
        let e = join(&root, &token, &me, Duration::from_secs(30)).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
        assert!(e.to_string().contains("could not prove"), "{e}");
        let heard = recorder.join().unwrap();
        // The hello (magic, version, a fresh nonce), then the refusal: no token, no proof, no join.
        assert_eq!(heard.len(), PREAMBLE_LEN + PROOF_MSG_LEN, "{heard:?}");
        assert_eq!(&heard[..6], b"CBRV\x03\x00");
        assert!(heard[PREAMBLE_LEN..].iter().all(|&b| b == 0), "{heard:?}");
        let hex = crate::world::token_to_hex(&token);
        assert!(!heard.windows(16).any(|w| w == token) && !heard.windows(32).any(|w| w == hex.as_bytes()));
        // Replayed to the real rendezvous, what it recorded gets nowhere.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let real = l.local_addr().unwrap();
        let server = std::thread::spawn(move || serve(l, 1, token, Duration::from_secs(2)));
        let mut s = TcpStream::connect(real).unwrap();
        s.write_all(&heard).unwrap();
        let e = server.join().unwrap().unwrap_err().to_string();
        assert!(e.contains("did not join") && e.contains("different job token"), "{e}");
    }

    #[test]
    fn an_unreachable_rendezvous_names_the_address_and_the_time_tried() {
        let root = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let e = connect(&root, Instant::now() + Duration::from_millis(300), "rank 1 (host h)")
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("rendezvous at {root} after trying for 0.")), "{e}");
        assert!(e.starts_with("rank 1 (host h)"), "{e}");
    }
}
