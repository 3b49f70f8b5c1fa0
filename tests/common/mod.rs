//! Helpers shared by the integration tests.

// Each test binary includes all of this and uses only its part.
#![allow(dead_code)]

pub mod gpu;
pub mod netns;

use std::process::Command;

use serde_json::Value;

/// Removes the launcher variables of the environment the tests run in, which would otherwise decide the
/// ranks' identity (collbench looks at OMPI_*, PMI_*, SLURM_*, ... before RANK/WORLD_SIZE).
pub fn clean_env(c: &mut Command) -> &mut Command {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        let launcher = ["OMPI_", "PMI_", "PMIX_", "SLURM_", "COLLBENCH_"]
            .iter()
            .any(|p| k.starts_with(p));
        let torch = [
            "RANK",
            "WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
            "JOB_COMPLETION_INDEX",
        ]
        .contains(&&*k);
        if launcher || torch {
            c.env_remove(&*k);
        }
    }
    c
}

/// Panics, with the validator's account, unless `v` matches schema/collbench-info.schema.json.
pub fn validate_info_against_schema(v: &Value) {
    let schema: Value =
        serde_json::from_str(include_str!("../../schema/collbench-info.schema.json")).expect("schema parses");
    let mut compiler = boon::Compiler::new();
    let mut schemas = boon::Schemas::new();
    compiler.add_resource("urn:collbench-info", schema).unwrap();
    let idx = compiler.compile("urn:collbench-info", &mut schemas).unwrap();
    if let Err(e) = schemas.validate(v, idx) {
        panic!("info JSON does not match its schema: {e:#}\n{v:#}");
    }
}

/// Panics, with the validator's account, unless `v` matches schema/collbench-results.schema.json.
pub fn validate_against_schema(v: &Value) {
    let schema: Value =
        serde_json::from_str(include_str!("../../schema/collbench-results.schema.json")).expect("schema parses");
    let mut compiler = boon::Compiler::new();
    let mut schemas = boon::Schemas::new();
    compiler.add_resource("urn:collbench-results", schema).unwrap();
    let idx = compiler.compile("urn:collbench-results", &mut schemas).unwrap();
    if let Err(e) = schemas.validate(v, idx) {
        panic!("JSON output does not match the schema: {e:#}");
    }
}

/// Raises this process's descriptor limit to `need` for a test that holds that many sockets (the processes it
/// starts inherit it); root may raise the hard limit too.
pub fn raise_nofile(need: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct it is given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    if lim.rlim_cur >= need {
        return;
    }
    let want = libc::rlimit {
        rlim_cur: need,
        rlim_max: lim.rlim_max.max(need),
    };
    // SAFETY: setrlimit reads only the struct it is given.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) };
    assert_eq!(
        rc,
        0,
        "this test holds about {need} sockets open; RLIMIT_NOFILE is {} (hard {}) and cannot be raised: {}",
        lim.rlim_cur,
        lim.rlim_max,
        std::io::Error::last_os_error()
    );
}
