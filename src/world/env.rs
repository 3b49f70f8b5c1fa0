//! Identity from the environment a launcher sets: collbench's own variables, OpenMPI's mpirun, PMI
//! (MPICH, Intel MPI), PMIx, Slurm's srun, a Kubernetes Indexed Job, or RANK/WORLD_SIZE (torchrun style).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use crate::error::{Error, Result};
use crate::world::{token_from_hex, Identity, Token};

/// Rank of this process (set by collbench's own launcher, or by hand).
pub const RANK: &str = "COLLBENCH_RANK";
/// Number of ranks; also the size of a Kubernetes Indexed Job.
pub const WORLD_SIZE: &str = "COLLBENCH_WORLD_SIZE";
/// `host:port` of the rendezvous service (rank 0 serves it unless collbench's launcher does).
pub const ROOT: &str = "COLLBENCH_ROOT";
/// 32 hex digits every connection must present.
pub const JOB_TOKEN: &str = "COLLBENCH_JOB_TOKEN";
/// A file holding the token (a mounted Kubernetes Secret, say).
pub const JOB_TOKEN_FILE: &str = "COLLBENCH_JOB_TOKEN_FILE";
/// This rank's index among the ranks on its host (set by collbench's own launcher, whose ranks all share
/// one host): it picks the rank's GPU, as the launchers' own local-rank variables do.
pub const LOCAL_RANK: &str = "COLLBENCH_LOCAL_RANK";
/// Name of the launcher, for the header (set by collbench's own launcher).
pub const LAUNCHER: &str = "COLLBENCH_LAUNCHER";
/// The rendezvous port when only MASTER_ADDR is given (torchrun's default).
pub const DEFAULT_PORT: u16 = 29500;

/// Rank/size variable pairs, innermost launcher first: under `mpirun` inside a Slurm allocation,
/// SLURM_PROCID describes the batch step, not the MPI rank.
const SOURCES: [(&str, &str, &str); 6] = [
    ("mpirun (OpenMPI)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("mpiexec (PMI)", "PMI_RANK", "PMI_SIZE"),
    ("PMIx", "PMIX_RANK", "SLURM_NTASKS"),
    ("srun (Slurm)", "SLURM_PROCID", "SLURM_NTASKS"),
    ("Kubernetes Indexed Job", "JOB_COMPLETION_INDEX", WORLD_SIZE),
    ("RANK/WORLD_SIZE", "RANK", "WORLD_SIZE"),
];

/// Variables whose value identifies one job, hashed into a token when none is given.
const JOB_IDS: [&str; 5] = [
    "PMIX_NAMESPACE",
    "OMPI_MCA_orte_ess_jobid",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "PMI_ID",
];

/// Most ranks a job may have (2^20): far above any job collbench's all-pairs set-up serves, far below what
/// would make a mistyped or hostile size allocate gigabytes.
pub const MAX_WORLD_SIZE: usize = 1 << 20;

fn parse_num(name: &str, v: &str) -> Result<usize> {
    v.trim()
        .parse()
        .map_err(|_| Error::usage(name, format!("'{v}' is not a whole number")))
}

/// Reads the identity from `get` (the process environment in production), or `None` when no launcher
/// variables are present at all (then collbench launches its own local ranks).
pub fn identity_from(get: impl Fn(&str) -> Option<String>) -> Result<Option<Identity>> {
    let (launcher, rank, size, size_var) = match get(RANK) {
        Some(r) => {
            let size = get(WORLD_SIZE).ok_or_else(|| {
                Error::usage(
                    WORLD_SIZE,
                    format!("{RANK}={r} is set but {WORLD_SIZE} is not; set both"),
                )
            })?;
            let launcher = get(LAUNCHER).unwrap_or_else(|| "env (COLLBENCH_RANK)".into());
            (
                launcher,
                parse_num(RANK, &r)?,
                parse_num(WORLD_SIZE, &size)?,
                WORLD_SIZE,
            )
        }
        None => {
            let Some((name, rank_var, size_var, rank_s)) =
                SOURCES.iter().find_map(|&(n, rv, sv)| get(rv).map(|r| (n, rv, sv, r)))
            else {
                return Ok(None);
            };
            let size_s =
                get(size_var).ok_or_else(|| {
                    Error::usage(
                        size_var,
                        format!(
                        "found {rank_var}={rank_s} ({name}) but not {size_var}, which gives the number of ranks; set \
                         {size_var}{}",
                        if size_var == WORLD_SIZE { " to the Job's completions" } else { "" }
                    ),
                    )
                })?;
            (
                name.to_string(),
                parse_num(rank_var, &rank_s)?,
                parse_num(size_var, &size_s)?,
                size_var,
            )
        }
    };
    if size == 0 {
        return Err(Error::usage(size_var, format!("{launcher} says the job has 0 ranks")));
    }
    if size > MAX_WORLD_SIZE {
        // Checked before anything is sized by it: the rendezvous and every rank trust it until all have joined.
        return Err(Error::usage(
            size_var,
            format!(
                "{launcher} says the job has {size} ranks; collbench supports at most {MAX_WORLD_SIZE} ({size_var} \
                 must be between 1 and {MAX_WORLD_SIZE})"
            ),
        ));
    }
    if rank >= size {
        return Err(Error::usage(
            RANK,
            format!("{launcher} gives rank {rank}, not below the job size {size}"),
        ));
    }
    let root = match (get(ROOT), get("MASTER_ADDR")) {
        (Some(r), _) => Some(r.trim().to_string()),
        (None, Some(addr)) => {
            let port = get("MASTER_PORT").unwrap_or_else(|| DEFAULT_PORT.to_string());
            Some(format!("{}:{}", addr.trim(), port.trim()))
        }
        // Under mpirun, MPI itself can exchange the endpoints (feature "mpi"); the session decides.
        (None, None) => None,
    };
    if let Some(r) = &root {
        if !r.contains(':') {
            return Err(Error::usage(ROOT, format!("'{r}' has no port; expected HOST:PORT")));
        }
    }
    let (token, token_from) = token(&get, root.as_deref().unwrap_or(""), size)?;
    // Rank 0 serves the rendezvous, except under collbench's own launcher, which serves it itself.
    let serves_root = rank == 0 && get(LAUNCHER).as_deref() != Some("local");
    Ok(Some(Identity {
        rank,
        size,
        root,
        token,
        token_from,
        launcher,
        serves_root,
    }))
}

/// The variable(s) the rendezvous address came from, as [`identity_from`] chooses it, for messages about it.
pub fn root_source(get: impl Fn(&str) -> Option<String>) -> &'static str {
    match (get(ROOT), get("MASTER_ADDR"), get("MASTER_PORT")) {
        (Some(_), _, _) | (None, None, _) => ROOT,
        (None, Some(_), None) => "MASTER_ADDR",
        (None, Some(_), Some(_)) => "MASTER_ADDR/MASTER_PORT",
    }
}

/// Ranks on this host, where the launcher says (OpenMPI, MPICH/Hydra, Slurm); for the memory check.
pub fn local_size_from(get: impl Fn(&str) -> Option<String>) -> Option<usize> {
    ["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"]
        .iter()
        .filter_map(|k| get(k))
        // Slurm may write "2(x3)" (2 tasks on each of 3 nodes): the leading number is this node's.
        .find_map(|v| v.split('(').next().and_then(|n| n.trim().parse().ok()))
}

/// The job token: given, read from a file, or (not a secret) derived from the launcher's job identifiers.
fn token(get: &impl Fn(&str) -> Option<String>, root: &str, size: usize) -> Result<(Token, String)> {
    if let Some(t) = get(JOB_TOKEN) {
        let tok = token_from_hex(t.trim()).ok_or_else(|| Error::usage(JOB_TOKEN, "expected 32 hex digits"))?;
        // collbench's own launcher passes the token it drew to its ranks through this variable.
        let from = if get(LAUNCHER).as_deref() == Some("local") {
            "random, drawn for this run by collbench's own launcher (--np)".to_string()
        } else {
            JOB_TOKEN.to_string()
        };
        return Ok((tok, from));
    }
    if let Some(path) = get(JOB_TOKEN_FILE) {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::usage(JOB_TOKEN_FILE, format!("cannot read '{path}': {e}")))?;
        let tok = token_from_hex(text.trim())
            .ok_or_else(|| Error::usage(JOB_TOKEN_FILE, format!("'{path}' must hold 32 hex digits")))?;
        return Ok((tok, format!("{JOB_TOKEN_FILE} ({path})")));
    }
    // Every rank of one job sees the same identifiers, so they derive the same token; a rank of another
    // job (or a stale one) does not. It keeps jobs apart, but it authenticates nothing.
    let ids: Vec<String> = JOB_IDS
        .iter()
        .filter_map(|k| get(k).map(|v| format!("{k}={v}")))
        .collect();
    let seed = format!("{}|{root}|{size}", ids.join("|"));
    let mut tok = [0u8; 16];
    for (i, half) in tok.chunks_mut(8).enumerate() {
        let mut h = DefaultHasher::new();
        (i, &seed).hash(&mut h);
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    let from = if ids.is_empty() {
        "the rendezvous address".to_string()
    } else {
        ids.join(", ")
    };
    Ok((
        tok,
        format!("derived from {from}; not a secret, set {JOB_TOKEN} to authenticate"),
    ))
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
    fn a_world_size_above_the_bound_is_a_usage_error_naming_the_variable_and_the_bound() {
        for size in ["1048577", "4294967295", "18446744073709551615"] {
            for (rank_var, size_var) in [(RANK, WORLD_SIZE), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")] {
                let e = identity_from(env(&[(rank_var, "0"), (size_var, size), (JOB_TOKEN, TOK)])).unwrap_err();
                assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
                let msg = e.to_string();
                assert!(msg.contains(size_var) && msg.contains("at most 1048576"), "{msg}");
            }
        }
        let id = identity_from(env(&[(RANK, "0"), (WORLD_SIZE, "1048576"), (JOB_TOKEN, TOK)]));
        assert_eq!(id.unwrap().unwrap().size, MAX_WORLD_SIZE);
    }

    #[test]
    fn no_variables_means_local_launch() {
        assert!(identity_from(env(&[])).unwrap().is_none());
    }

    #[test]
    fn collbench_variables_parse() {
        let id = identity_from(env(&[
            (RANK, "2"),
            (WORLD_SIZE, "4"),
            (ROOT, "127.0.0.1:5000"),
            (JOB_TOKEN, TOK),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (id.rank, id.size, id.root.as_deref(), id.token[15]),
            (2, 4, Some("127.0.0.1:5000"), 15)
        );
        assert!(!id.serves_root);
    }

    /// Variables a launcher sets, the launcher name expected, rank and size.
    type LauncherCase = (&'static [(&'static str, &'static str)], &'static str, usize, usize);

    #[test]
    fn every_launcher_is_recognised() {
        let cases: [LauncherCase; 6] = [
            (
                &[("OMPI_COMM_WORLD_RANK", "3"), ("OMPI_COMM_WORLD_SIZE", "8")],
                "OpenMPI",
                3,
                8,
            ),
            (&[("PMI_RANK", "1"), ("PMI_SIZE", "2")], "PMI", 1, 2),
            (&[("PMIX_RANK", "5"), ("SLURM_NTASKS", "6")], "PMIx", 5, 6),
            (&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "16")], "Slurm", 0, 16),
            (&[("JOB_COMPLETION_INDEX", "2"), (WORLD_SIZE, "4")], "Indexed Job", 2, 4),
            (&[("RANK", "1"), ("WORLD_SIZE", "2")], "RANK/WORLD_SIZE", 1, 2),
        ];
        for (vars, name, rank, size) in cases {
            let mut all = vars.to_vec();
            all.push(("MASTER_ADDR", "node0"));
            let id = identity_from(env(&all)).unwrap().unwrap();
            assert!(id.launcher.contains(name), "{} for {vars:?}", id.launcher);
            assert_eq!(
                (id.rank, id.size, id.root.as_deref()),
                (rank, size, Some("node0:29500"))
            );
            assert_eq!(id.serves_root, rank == 0);
        }
    }

    #[test]
    fn mpirun_inside_slurm_uses_the_mpi_rank() {
        let id = identity_from(env(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            (ROOT, "h:1"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((id.rank, id.size), (3, 4));
    }

    #[test]
    fn missing_or_contradictory_variables_say_what_is_needed() {
        let e = identity_from(env(&[(RANK, "1")])).unwrap_err().to_string();
        assert!(e.contains(WORLD_SIZE), "{e}");
        let e = identity_from(env(&[("JOB_COMPLETION_INDEX", "1")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("JOB_COMPLETION_INDEX=1") && e.contains(WORLD_SIZE), "{e}");
        // No rendezvous address: left to the session, which bootstraps through MPI or says what is missing.
        let id = identity_from(env(&[("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2")]))
            .unwrap()
            .unwrap();
        assert!(id.root.is_none());
        let e = identity_from(env(&[("RANK", "4"), ("WORLD_SIZE", "4"), (ROOT, "h:1")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not below"), "{e}");
        let e = identity_from(env(&[("RANK", "x"), ("WORLD_SIZE", "4"), (ROOT, "h:1")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("RANK") && e.contains("'x'"), "{e}");
        let e = identity_from(env(&[
            (RANK, "0"),
            (WORLD_SIZE, "2"),
            (ROOT, "h:1"),
            (JOB_TOKEN, "xyz"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains(JOB_TOKEN), "{e}");
        let e = identity_from(env(&[(RANK, "0"), (WORLD_SIZE, "2"), (ROOT, "nohostport")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("HOST:PORT"), "{e}");
    }

    #[test]
    fn tokens_come_from_the_variable_a_file_or_the_job_ids() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        std::fs::write(&f, format!("{TOK}\n")).unwrap();
        let path = f.to_str().unwrap();
        let id = identity_from(env(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            (ROOT, "h:1"),
            (JOB_TOKEN_FILE, path),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(id.token, token_from_hex(TOK).unwrap());
        let base = [
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "2"),
            (ROOT, "h:1"),
            ("SLURM_JOB_ID", "77"),
        ];
        let a = identity_from(env(&base)).unwrap().unwrap();
        let b = identity_from(env(&base)).unwrap().unwrap();
        assert_eq!(a.token, b.token, "ranks of one job derive the same token");
        let mut other = base;
        other[3] = ("SLURM_JOB_ID", "78");
        assert_ne!(
            identity_from(env(&other)).unwrap().unwrap().token,
            a.token,
            "other jobs differ"
        );
        assert!(a.token_from.contains("not a secret"), "{}", a.token_from);
    }

    #[test]
    fn local_rank_counts_come_from_the_launcher() {
        // The GPU choice reads the embedded launcher's variable first.
        assert_eq!(crate::memory::cuda_probe::LOCAL_RANK_ENV[0], LOCAL_RANK);
        assert_eq!(local_size_from(env(&[("OMPI_COMM_WORLD_LOCAL_SIZE", "8")])), Some(8));
        assert_eq!(local_size_from(env(&[("SLURM_NTASKS_PER_NODE", "2(x3)")])), Some(2));
        assert_eq!(local_size_from(env(&[])), None);
    }
}
