//! Identity from the environment a launcher sets: collbench's own variables, OpenMPI's mpirun, PMI
//! (MPICH, Intel MPI), PMIx, Slurm's srun, a Kubernetes Indexed Job, or RANK/WORLD_SIZE (torchrun style).

use sha2::{Digest, Sha256};

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
/// A value unique to this job, for launchers that set no job id collbench knows (a Kubernetes Job's uid through
/// the downward API, say): it keeps two jobs at one rendezvous address apart, but is not a secret.
pub const JOB_ID: &str = "COLLBENCH_JOB_ID";
/// Longest token file read: 32 hex digits and some white space; anything longer is not a token file.
pub const MAX_TOKEN_FILE: u64 = 4096;
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

/// Variables whose value identifies one job (the same on every rank of it, different for every other job),
/// hashed into a token when none is given: OpenMPI's and PMIx's job ids, Slurm's job and step, torchrun's run
/// id, or the job id given by hand.
const JOB_IDS: [&str; 7] = [
    JOB_ID,
    "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid",
    "OMPI_MCA_orte_ess_jobid",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "TORCHELASTIC_RUN_ID",
];

/// The launcher's job identifiers present, as `NAME=value`, in a fixed order (torchrun's placeholder run id
/// "none" is no identity).
pub fn job_ids(get: impl Fn(&str) -> Option<String>) -> Vec<String> {
    JOB_IDS
        .iter()
        .filter_map(|k| get(k).map(|v| (k, v)))
        .filter(|(k, v)| {
            let placeholder = **k == "TORCHELASTIC_RUN_ID" && v.trim() == "none";
            !v.trim().is_empty() && !placeholder
        })
        .map(|(k, v)| format!("{k}={}", v.trim()))
        .collect()
}

/// Most ranks a job may have (2^17 = 131,072): the bound the bootstrap is tested to (the rank table down a
/// tree of depth 9; see `tests/bootstrap_scale.rs`), far below what would make a mistyped or hostile size
/// allocate gigabytes.
pub const MAX_WORLD_SIZE: usize = 1 << 17;

/// A variable's value as an error message shows it: escaped and cut like a peer's names, since the
/// environment may hold anything (a terminal's escape sequences, a megabyte).
fn shown(v: &str) -> String {
    crate::world::rank_info::printable(v, crate::world::rank_info::MAX_NAME)
}

fn parse_num(name: &str, v: &str) -> Result<usize> {
    v.trim()
        .parse()
        .map_err(|_| Error::usage(name, format!("'{}' is not a whole number", shown(v))))
}

/// Reads the identity from `get` (the process environment in production), or `None` when no launcher
/// variables are present at all (then collbench launches its own local ranks).
pub fn identity_from(get: impl Fn(&str) -> Option<String>) -> Result<Option<Identity>> {
    let (launcher, rank, size, rank_var, size_var) = match get(RANK) {
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
                RANK,
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
            let (rank, size) = (parse_num(rank_var, &rank_s)?, parse_num(size_var, &size_s)?);
            agrees_with_rank_world_size(&get, name, (rank_var, rank), (size_var, size))?;
            (name.to_string(), rank, size, rank_var, size_var)
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
            rank_var,
            format!("{launcher} gives rank {rank} ({rank_var}), not below the job size {size} ({size_var})"),
        ));
    }
    let root = rendezvous_address(&get)?;
    let (token, token_from) = token(&get, root.as_deref(), size)?;
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

/// A launcher's rank and size, checked against RANK/WORLD_SIZE where those are set too: the launcher's win
/// (it is the innermost), but when the two disagree one of them describes another job (a stale
/// environment, a hand-set pair under mpirun), and a silent choice would run a job of the wrong size.
fn agrees_with_rank_world_size(
    get: &impl Fn(&str) -> Option<String>,
    launcher: &str,
    (rank_var, rank): (&str, usize),
    (size_var, size): (&str, usize),
) -> Result<()> {
    if rank_var == "RANK" {
        return Ok(());
    }
    let (Some(r), Some(w)) = (get("RANK"), get("WORLD_SIZE")) else {
        return Ok(());
    };
    let given = (r.trim().parse::<usize>().ok(), w.trim().parse::<usize>().ok());
    if given == (Some(rank), Some(size)) {
        return Ok(());
    }
    Err(Error::usage(
        rank_var,
        format!(
            "{launcher} says rank {rank} of {size} ({rank_var}, {size_var}) but RANK={} WORLD_SIZE={} say otherwise; \
             unset the pair that does not describe this job (or set {RANK} and {WORLD_SIZE}, which win over both)",
            r.trim(),
            w.trim()
        ),
    ))
}

/// The rendezvous `HOST:PORT`: [`ROOT`], else `MASTER_ADDR` with `MASTER_PORT` (or [`DEFAULT_PORT`]); `None`
/// when neither is set. An IPv6 address is written in brackets (`[::1]:29500`), as the connect and bind
/// below read it. An empty host, an address that is neither a name, an IPv4 nor an IPv6 address, or a port
/// outside 1..=65535 is refused naming the variable, rather than waited on until the bootstrap deadline.
fn rendezvous_address(get: &impl Fn(&str) -> Option<String>) -> Result<Option<String>> {
    let (host, port, host_var, port_var) = match (get(ROOT), get("MASTER_ADDR")) {
        (Some(r), _) => {
            let r = r.trim().to_string();
            let (h, p) = split_host_port(&r).map_err(|why| Error::usage(ROOT, why))?;
            let p = p.map_or_else(|| DEFAULT_PORT.to_string(), str::to_string);
            (h, p, ROOT, ROOT)
        }
        (None, Some(addr)) => {
            let port = get("MASTER_PORT").unwrap_or_else(|| DEFAULT_PORT.to_string());
            let host = rendezvous_host(addr.trim())
                .map_err(|why| Error::usage("MASTER_ADDR", format!("{why}; its port goes in MASTER_PORT")))?;
            (host, port.trim().to_string(), "MASTER_ADDR", "MASTER_PORT")
        }
        // Under mpirun, MPI itself can exchange the endpoints (feature "mpi"); the session decides.
        (None, None) => return Ok(None),
    };
    if host.is_empty() {
        return Err(Error::usage(
            host_var,
            "names no host; give an address or name of rank 0's host",
        ));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(Some(format!("{host}:{p}"))),
        _ => Err(Error::usage(
            port_var,
            format!(
                "port '{}' is not a TCP port; give a number from 1 to 65535",
                shown(&port)
            ),
        )),
    }
}

/// [`ROOT`]'s value as (host, port): `HOST:PORT`, `[IPV6]:PORT`, or an IPv6 address alone (`::1`, `[::1]`),
/// which takes the default port. The host comes back as [`rendezvous_host`] gives it (IPv6 in brackets).
fn split_host_port(r: &str) -> std::result::Result<(String, Option<&str>), String> {
    let expected = "expected HOST:PORT, [IPV6]:PORT or an IPv6 address alone";
    if let Some(rest) = r.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else {
            return Err(format!("'{}' opens a bracket it does not close; {expected}", shown(r)));
        };
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| {
                format!(
                    "'{}' has '{}' after its bracketed address, not :PORT; {expected}",
                    shown(r),
                    shown(after)
                )
            })?),
        };
        return Ok((rendezvous_host(&format!("[{inside}]"))?, port));
    }
    if r.matches(':').count() > 1 {
        // Several colons: only an IPv6 address has them, and written bare it has no port.
        return Ok((rendezvous_host(r)?, None));
    }
    match r.rsplit_once(':') {
        Some((h, p)) => Ok((rendezvous_host(h)?, Some(p))),
        None => Err(format!("'{}' has no port; {expected}", shown(r))),
    }
}

/// A host as the rendezvous address holds it: a name or IPv4 address as given, an IPv6 address (bare or in
/// brackets) in brackets; empty for an empty one. An IPv6 address that does not parse is refused, as is a
/// colon outside one: it would be read as a port.
fn rendezvous_host(h: &str) -> std::result::Result<String, String> {
    let inside = h.strip_prefix('[').and_then(|x| x.strip_suffix(']'));
    let ip6 = inside.unwrap_or(h);
    if inside.is_none() && !h.contains(':') {
        return Ok(h.to_string());
    }
    if ip6.is_empty() {
        return Ok(String::new());
    }
    // A zone (`fe80::1%2`) is kept for the resolver; the address before it must parse.
    let addr = ip6.split_once('%').map_or(ip6, |(a, _)| a);
    if addr.parse::<std::net::Ipv6Addr>().is_err() {
        return Err(format!(
            "'{}' is not an IPv6 address; give a name, an IPv4 address or an IPv6 address (::1 or [::1])",
            shown(h)
        ));
    }
    Ok(format!("[{ip6}]"))
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

/// The job token: given, read from a file, or (not a secret) derived from the launcher's job identifiers. With
/// a rendezvous address and neither, two jobs at that address could not be told apart: refused.
fn token(get: &impl Fn(&str) -> Option<String>, root: Option<&str>, size: usize) -> Result<(Token, String)> {
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
        let text = read_token_file(&path)?;
        let tok = token_from_hex(text.trim())
            .ok_or_else(|| Error::usage(JOB_TOKEN_FILE, format!("'{}' must hold 32 hex digits", shown(&path))))?;
        return Ok((tok, format!("{JOB_TOKEN_FILE} ({})", shown(&path))));
    }
    // Every rank of one job sees the same identifiers, so they derive the same token; a rank of another
    // job (or a stale one) does not. It keeps jobs apart, but it authenticates nothing.
    let ids = job_ids(get);
    if let (Some(root), true) = (root, ids.is_empty()) {
        return Err(Error::usage(
            JOB_TOKEN,
            format!(
                "no job token and no launcher job id: another job using the rendezvous at {root} could not be told \
                 apart from this one, and the two would mix. Set {JOB_TOKEN} to 32 hex digits shared by this job's \
                 ranks only (e.g. from `openssl rand -hex 16`), or {JOB_TOKEN_FILE}, or {JOB_ID} to a value unique \
                 to this job"
            ),
        ));
    }
    let mut h = Sha256::new();
    h.update(format!("collbench job|{}|{}|{size}", ids.join("|"), root.unwrap_or("")));
    let mut tok = [0u8; 16];
    tok.copy_from_slice(&h.finalize()[..16]);
    Ok((
        tok,
        format!(
            "derived from {}; not a secret, set {JOB_TOKEN} to authenticate",
            ids.iter().map(|i| shown(i)).collect::<Vec<_>>().join(", ")
        ),
    ))
}

/// Reads the token file at `path`: a regular file (or a link to one) of at most [`MAX_TOKEN_FILE`] bytes. A
/// FIFO, device, socket or directory is refused without reading (a FIFO would block, `/dev/zero` never end).
fn read_token_file(path: &str) -> Result<String> {
    crate::input::read_to_string(std::path::Path::new(path), MAX_TOKEN_FILE).map_err(|e| {
        Error::usage(
            JOB_TOKEN_FILE,
            format!(
                "{}; a token file holds the job token (32 hex digits)",
                crate::error::escape(&e.to_string())
            ),
        )
    })
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
        for size in ["131073", "1048577", "4294967295", "18446744073709551615"] {
            for (rank_var, size_var) in [(RANK, WORLD_SIZE), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")] {
                let e = identity_from(env(&[(rank_var, "0"), (size_var, size), (JOB_TOKEN, TOK)])).unwrap_err();
                assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
                let msg = e.to_string();
                assert!(msg.contains(size_var) && msg.contains("at most 131072"), "{msg}");
            }
        }
        let id = identity_from(env(&[(RANK, "0"), (WORLD_SIZE, "131072"), (JOB_TOKEN, TOK)]));
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
            all.push((JOB_ID, "job-1"));
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
            ("OMPI_MCA_ess_base_jobid", "289734657"),
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
    fn a_rendezvous_port_or_host_that_cannot_be_reached_is_refused_naming_the_variable() {
        let base = [(RANK, "0"), (WORLD_SIZE, "2"), (JOB_TOKEN, TOK)];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut all = base.to_vec();
            all.extend_from_slice(extra);
            identity_from(env(&all))
        };
        for (extra, var) in [
            (&[("MASTER_ADDR", "h"), ("MASTER_PORT", "99999")][..], "MASTER_PORT"),
            (&[("MASTER_ADDR", "h"), ("MASTER_PORT", "-1")][..], "MASTER_PORT"),
            (&[("MASTER_ADDR", "h"), ("MASTER_PORT", "0")][..], "MASTER_PORT"),
            (&[("MASTER_ADDR", "h"), ("MASTER_PORT", "")][..], "MASTER_PORT"),
            (&[("MASTER_ADDR", "")][..], "MASTER_ADDR"),
            (&[("MASTER_ADDR", " ")][..], "MASTER_ADDR"),
            (&[(ROOT, "h:0")][..], ROOT),
            (&[(ROOT, ":5000")][..], ROOT),
            (&[(ROOT, "h:65536")][..], ROOT),
        ] {
            let e = with(extra).unwrap_err();
            assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{extra:?}: {e}");
            assert!(e.to_string().starts_with(&format!("{var}: ")), "{extra:?}: {e}");
        }
        let id = with(&[("MASTER_ADDR", " h "), ("MASTER_PORT", "65535")])
            .unwrap()
            .unwrap();
        assert_eq!(id.root.as_deref(), Some("h:65535"));
        let id = with(&[(ROOT, "[::1]:5000")]).unwrap().unwrap();
        assert_eq!(id.root.as_deref(), Some("[::1]:5000"));
    }

    #[test]
    fn ipv6_rendezvous_addresses_are_read_bare_or_in_brackets() {
        let root = |vars: &[(&str, &str)]| rendezvous_address(&env(vars));
        for (given, want) in [
            ("[::1]:29501", "[::1]:29501"),
            ("::1", "[::1]:29500"),
            ("[::1]", "[::1]:29500"),
            (" fe80::1:2 ", "[fe80::1:2]:29500"),
            ("[2001:db8::7]:80", "[2001:db8::7]:80"),
            ("[fe80::1%2]:5000", "[fe80::1%2]:5000"),
            ("node0:5000", "node0:5000"),
            ("10.0.0.1:5000", "10.0.0.1:5000"),
        ] {
            assert_eq!(root(&[(ROOT, given)]).unwrap().as_deref(), Some(want), "{given}");
        }
        for (addr, want) in [("::1", "[::1]:7"), ("[::1]", "[::1]:7"), ("node0", "node0:7")] {
            let got = root(&[("MASTER_ADDR", addr), ("MASTER_PORT", "7")]).unwrap();
            assert_eq!(got.as_deref(), Some(want), "{addr}");
        }
        // Refused at once, naming the variable, rather than waited on for the whole bootstrap.
        for (vars, var, says) in [
            (&[(ROOT, "[::1")][..], ROOT, "does not close"),
            (&[(ROOT, "[::1]5000")][..], ROOT, "not :PORT"),
            (&[(ROOT, "[::1]:")][..], ROOT, "not a TCP port"),
            (&[(ROOT, "[node0]:5000")][..], ROOT, "not an IPv6 address"),
            (&[(ROOT, "[]:5000")][..], ROOT, "names no host"),
            (&[(ROOT, ":::1")][..], ROOT, "not an IPv6 address"),
            (&[(ROOT, "node0")][..], ROOT, "has no port"),
            (
                &[("MASTER_ADDR", "[::1]:5000")][..],
                "MASTER_ADDR",
                "not an IPv6 address",
            ),
            (
                &[("MASTER_ADDR", "node0:5000")][..],
                "MASTER_ADDR",
                "not an IPv6 address",
            ),
        ] {
            let e = root(vars).unwrap_err();
            let msg = e.to_string();
            assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{vars:?}: {msg}");
            assert!(
                msg.starts_with(&format!("{var}: ")) && msg.contains(says),
                "{vars:?}: {msg}"
            );
        }
    }

    #[test]
    fn a_launcher_that_disagrees_with_rank_and_world_size_is_refused_naming_both() {
        let e = identity_from(env(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "1"),
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "h"),
        ]))
        .unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE);
        assert!(
            msg.starts_with("OMPI_COMM_WORLD_RANK: ") && msg.contains("RANK=1 WORLD_SIZE=2") && msg.contains("unset"),
            "{msg}"
        );
        // Agreeing pairs are one job seen twice.
        let id = identity_from(env(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "h"),
            (JOB_TOKEN, TOK),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((id.rank, id.size), (1, 2));
        // A rank beyond the size names the launcher's own variables.
        let e = identity_from(env(&[("OMPI_COMM_WORLD_RANK", "4"), ("OMPI_COMM_WORLD_SIZE", "4")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("OMPI_COMM_WORLD_RANK: ") && e.contains("OMPI_COMM_WORLD_SIZE"),
            "{e}"
        );
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
    fn a_rendezvous_without_a_token_or_a_job_id_is_refused_naming_what_to_set() {
        // Two such jobs at one address cannot be told apart (their derived tokens would be equal): refused.
        let bare = [
            (RANK, "1"),
            (WORLD_SIZE, "4"),
            ("MASTER_ADDR", "node0"),
            ("MASTER_PORT", "29500"),
        ];
        let e = identity_from(env(&bare)).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains(JOB_TOKEN) && msg.contains(JOB_ID) && msg.contains("node0:29500") && msg.contains("mix"),
            "{msg}"
        );
        // torchrun's placeholder run id is no identity either.
        let mut torch = bare.to_vec();
        torch.push(("TORCHELASTIC_RUN_ID", "none"));
        assert!(identity_from(env(&torch)).is_err());
        // A job id of each launcher separates jobs: different ids, different tokens.
        let with = |k: &'static str, v: &'static str| {
            let mut all = bare.to_vec();
            all.push((k, v));
            identity_from(env(&all)).unwrap().unwrap().token
        };
        assert_ne!(with(JOB_ID, "a"), with(JOB_ID, "b"));
        assert_ne!(
            with("OMPI_MCA_ess_base_jobid", "1"),
            with("OMPI_MCA_ess_base_jobid", "2")
        );
        assert_ne!(with("SLURM_JOB_ID", "1"), with("SLURM_JOB_ID", "2"));
        assert_eq!(with(JOB_ID, "a"), with(JOB_ID, "a"));
        // Without a rendezvous (MPI exchanges the endpoints and rank 0's random token) nothing is needed.
        assert!(identity_from(env(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2")])).is_ok());
    }

    #[test]
    fn a_token_file_that_is_a_fifo_a_device_a_directory_or_huge_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: c is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let huge = dir.path().join("huge");
        std::fs::write(&huge, "0".repeat(1 << 20)).unwrap();
        let cases = [
            (fifo.to_str().unwrap().to_string(), "a FIFO"),
            ("/dev/zero".to_string(), "a device"),
            (dir.path().to_str().unwrap().to_string(), "a directory"),
            (huge.to_str().unwrap().to_string(), "bytes"),
        ];
        for (path, what) in cases {
            // On its own thread, so a read that blocks (a FIFO with no writer) fails the test instead of hanging it.
            let (tx, rx) = std::sync::mpsc::channel();
            let p = path.clone();
            std::thread::spawn(move || {
                let _ = tx.send(identity_from(env(&[
                    (RANK, "0"),
                    (WORLD_SIZE, "2"),
                    (ROOT, "h:1"),
                    (JOB_TOKEN_FILE, &p),
                ])));
            });
            let e = rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("reading the token file '{path}' blocked"))
                .unwrap_err();
            assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
            let msg = e.to_string();
            assert!(msg.contains(JOB_TOKEN_FILE) && msg.contains(what), "{path}: {msg}");
        }
    }

    #[test]
    fn local_rank_counts_come_from_the_launcher() {
        // The GPU choice reads the embedded launcher's variable first.
        assert_eq!(crate::memory::cuda_probe::LOCAL_RANK_ENV[0], LOCAL_RANK);
        assert_eq!(local_size_from(env(&[("OMPI_COMM_WORLD_LOCAL_SIZE", "8")])), Some(8));
        assert_eq!(local_size_from(env(&[("SLURM_NTASKS_PER_NODE", "2(x3)")])), Some(2));
        assert_eq!(local_size_from(env(&[])), None);
    }

    #[test]
    fn a_variable_printed_in_an_error_is_escaped_and_cut() {
        let huge = format!("\u{1b}]0;x\u{7}{}", "n".repeat(1 << 20));
        let cases = [
            (ROOT, huge.clone()),
            (ROOT, format!("[{huge}")),
            ("MASTER_PORT", huge.clone()),
            ("MASTER_ADDR", format!("x:{huge}")),
        ];
        for (var, value) in cases {
            let e = rendezvous_address(&env(&[("MASTER_ADDR", "h"), (var, &value)]))
                .unwrap_err()
                .to_string();
            assert!(!e.chars().any(char::is_control), "{var}: {:?}", &e[..80]);
            assert!(e.len() < 1024 && e.contains("\\u{1b}]0;x"), "{var}: {} bytes", e.len());
        }
    }
}
