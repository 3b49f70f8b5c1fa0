//! What every rank of a command whose job ends with rank 0's verdict (`preflight`, `pairwise`, `p2p`) learns
//! from rank 0 at its end: the verdict, so that under a per-pod check (a Kubernetes Indexed Job) every pod
//! reports the job's verdict, not only rank 0's.

use super::Rank;
use crate::error::{stderr, Error, Result, EXIT_OK};

/// [`verdict`] sent over the control path of `rank`'s session.
pub fn share(me: usize, command: &str, decided: Option<Result<i32>>, rank: Box<Rank>) -> Result<i32> {
    let Rank { mut sess, .. } = *rank;
    verdict(me, command, decided, |b| match sess.transports.first_mut() {
        Some(t) => crate::transport::control::broadcast(t, b),
        // A job of one rank: nobody to tell.
        None => Ok(b.to_vec()),
    })
}

/// Every rank ends with rank 0's verdict: `decided` is rank 0's (its exit status, or the error that ended its
/// judging), `None` on the other ranks, which exit with the status rank 0 sends. `broadcast` sends rank 0's
/// bytes to every rank and returns them (the other ranks' argument is not sent); `command` names the
/// subcommand in what the other ranks say.
pub fn verdict(
    me: usize,
    command: &str,
    decided: Option<Result<i32>>,
    broadcast: impl FnOnce(&[u8]) -> Result<Vec<u8>>,
) -> Result<i32> {
    let code = match &decided {
        Some(Ok(c)) => *c,
        Some(Err(e)) => e.exit_code(),
        None => EXIT_OK,
    };
    match (decided, broadcast(&code.to_le_bytes())) {
        // Rank 0 keeps its own verdict even when a rank is gone before hearing it.
        (Some(d), Ok(_)) => d,
        (Some(d), Err(e)) => {
            stderr!("collbench: rank 0: the verdict could not reach every rank: {e}");
            d
        }
        (None, Ok(b)) => {
            let code = <[u8; 4]>::try_from(b.as_slice()).map(i32::from_le_bytes).map_err(|_| {
                Error::peer(format!(
                    "rank {me}: rank 0 sent an unreadable verdict ({} bytes); were all ranks started with the same \
                     collbench version?",
                    b.len()
                ))
            })?;
            if code != EXIT_OK {
                stderr!(
                    "collbench: rank {me}: exits {code}, the {command} verdict rank 0 reached (its output says why)"
                );
            }
            Ok(code)
        }
        (None, Err(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_ends_with_rank_0s_verdict() {
        // Rank 0 sends its own status and keeps it, even when the broadcast fails.
        let sent = std::cell::RefCell::new(Vec::new());
        let echo = |b: &[u8]| -> Result<Vec<u8>> {
            sent.borrow_mut().extend_from_slice(b);
            Ok(b.to_vec())
        };
        assert_eq!(verdict(0, "pairwise", Some(Ok(1)), echo).unwrap(), 1);
        assert_eq!(*sent.borrow(), 1i32.to_le_bytes());
        let lost = |_: &[u8]| -> Result<Vec<u8>> { Err(Error::peer("rank 2 is gone")) };
        assert_eq!(verdict(0, "pairwise", Some(Ok(1)), lost).unwrap(), 1);
        // An error that ended rank 0's judging is its exit status for the others.
        let err = Error::usage("--expect", "bad");
        let code = err.exit_code();
        let heard = std::cell::Cell::new(0);
        let _ = verdict(0, "preflight", Some(Err(err)), |b: &[u8]| {
            heard.set(i32::from_le_bytes(b.try_into().unwrap()));
            Ok(b.to_vec())
        });
        assert_eq!(heard.get(), code);
        // The others exit with what rank 0 sent, and an unreadable one is an error naming the rank.
        let from0 = |_: &[u8]| -> Result<Vec<u8>> { Ok(1i32.to_le_bytes().to_vec()) };
        assert_eq!(verdict(3, "preflight", None, from0).unwrap(), 1);
        let short = |_: &[u8]| -> Result<Vec<u8>> { Ok(vec![1]) };
        assert!(verdict(3, "preflight", None, short)
            .unwrap_err()
            .to_string()
            .contains("rank 3"));
        assert!(verdict(3, "preflight", None, lost).is_err());
    }
}
