//! Identity from environment variables set by a launcher.

use crate::error::{Error, Result};
use crate::world::{token_from_hex, Identity};

/// Rank of this process.
pub const RANK: &str = "COLLBENCH_RANK";
/// Number of ranks.
pub const WORLD_SIZE: &str = "COLLBENCH_WORLD_SIZE";
/// `host:port` of the rendezvous service.
pub const ROOT: &str = "COLLBENCH_ROOT";
/// 32 hex digits every connection must present.
pub const JOB_TOKEN: &str = "COLLBENCH_JOB_TOKEN";
/// Name of the launcher, for the header.
pub const LAUNCHER: &str = "COLLBENCH_LAUNCHER";

/// Reads the identity from `get` (the process environment in production), or `None` when no launcher
/// variables are present at all (then collbench launches its own local ranks).
pub fn identity_from(get: impl Fn(&str) -> Option<String>) -> Result<Option<Identity>> {
    let Some(rank_s) = get(RANK) else {
        return Ok(None);
    };
    let need = |name: &str| {
        get(name).ok_or_else(|| {
            Error::usage(
                name,
                format!(
                    "{RANK} is set but {name} is not; a launcher must set {RANK}, {WORLD_SIZE}, {ROOT} and {JOB_TOKEN}"
                ),
            )
        })
    };
    let rank: usize = rank_s
        .trim()
        .parse()
        .map_err(|_| Error::usage(RANK, format!("'{rank_s}' is not a rank number")))?;
    let size_s = need(WORLD_SIZE)?;
    let size: usize = size_s
        .trim()
        .parse()
        .ok()
        .filter(|&s| s > 0)
        .ok_or_else(|| Error::usage(WORLD_SIZE, format!("'{size_s}' is not a positive number of ranks")))?;
    if rank >= size {
        return Err(Error::usage(
            RANK,
            format!("rank {rank} is not below {WORLD_SIZE}={size}"),
        ));
    }
    let root_s = need(ROOT)?;
    let root = std::net::ToSocketAddrs::to_socket_addrs(root_s.trim())
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| Error::usage(ROOT, format!("'{root_s}' is not a reachable host:port")))?;
    let tok_s = need(JOB_TOKEN)?;
    let token = token_from_hex(tok_s.trim()).ok_or_else(|| Error::usage(JOB_TOKEN, "expected 32 hex digits"))?;
    let launcher = get(LAUNCHER).unwrap_or_else(|| "env".into());
    Ok(Some(Identity {
        rank,
        size,
        root,
        token,
        launcher,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    const TOK: &str = "000102030405060708090a0b0c0d0e0f";

    #[test]
    fn no_variables_means_local_launch() {
        assert!(identity_from(env(&[])).unwrap().is_none());
    }

    #[test]
    fn full_identity_parses() {
        let id = identity_from(env(&[
            (RANK, "2"),
            (WORLD_SIZE, "4"),
            (ROOT, "127.0.0.1:5000"),
            (JOB_TOKEN, TOK),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((id.rank, id.size, id.root.port(), id.token[15]), (2, 4, 5000, 15));
    }

    #[test]
    fn bad_or_missing_variables_name_themselves() {
        let e = identity_from(env(&[(RANK, "1")])).unwrap_err().to_string();
        assert!(e.contains(WORLD_SIZE), "{e}");
        let e = identity_from(env(&[
            (RANK, "4"),
            (WORLD_SIZE, "4"),
            (ROOT, "127.0.0.1:1"),
            (JOB_TOKEN, TOK),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("not below"), "{e}");
        let e = identity_from(env(&[
            (RANK, "0"),
            (WORLD_SIZE, "2"),
            (ROOT, "127.0.0.1:1"),
            (JOB_TOKEN, "xyz"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains(JOB_TOKEN), "{e}");
    }
}
