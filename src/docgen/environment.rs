//! Every environment variable collbench reads, in one table: the man pages' ENVIRONMENT section and
//! docs/environment.md are generated from it, and `tests/docgen.rs` checks it against the names the code
//! under src/ reads (both ways), so a new variable cannot go undocumented.

/// Who sets a variable, which groups the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// collbench's own: set by hand, by a job manifest, or by collbench's embedded launcher for its ranks.
    Collbench,
    /// Set by a launcher (torchrun style, OpenMPI, MPICH/Hydra, PMIx, Slurm, Kubernetes); read for the rank,
    /// the job size, the rendezvous, the local rank and the job's identity.
    Launcher,
    /// Read under nccl-tests' program names, as nccl-tests reads it.
    NcclTests,
    /// Read by tests and build checks, not by a run.
    Testing,
}

impl Group {
    /// The heading of the group in the generated pages.
    pub fn title(self) -> &'static str {
        match self {
            Group::Collbench => "collbench's own",
            Group::Launcher => "Set by launchers",
            Group::NcclTests => "Under nccl-tests' names",
            Group::Testing => "Tests and checks",
        }
    }
}

/// One variable: its name, who sets it and what collbench does with it (Markdown: `code` spans only).
#[derive(Debug, Clone, Copy)]
pub struct Var {
    /// The exact name the code reads.
    pub name: &'static str,
    /// Who sets it.
    pub group: Group,
    /// What it does, one or two sentences.
    pub meaning: &'static str,
}

const fn var(name: &'static str, group: Group, meaning: &'static str) -> Var {
    Var { name, group, meaning }
}

use Group::{Collbench, Launcher, NcclTests, Testing};

/// The table, grouped, in the order the pages list it.
pub const VARS: &[Var] = &[
    var("COLLBENCH_RANK", Collbench, "This process's rank (0-based). With it, `COLLBENCH_WORLD_SIZE` must be set; it wins over every launcher's variables."),
    var("COLLBENCH_WORLD_SIZE", Collbench, "Number of ranks in the job; also the size of a Kubernetes Indexed Job (with `JOB_COMPLETION_INDEX`)."),
    var("COLLBENCH_ROOT", Collbench, "`HOST:PORT` of the rendezvous; rank 0 listens there, the others connect. Wins over `MASTER_ADDR`."),
    var("COLLBENCH_JOB_TOKEN", Collbench, "32 hex digits every rank of the job shares (`openssl rand -hex 16`); every connection proves it holds it (HMAC-SHA256 over fresh nonces), never sends it. Without it (or `COLLBENCH_JOB_TOKEN_FILE`) the token is derived from the launcher's job identifiers, which keeps jobs apart but is no secret; with neither, a rank given a rendezvous address refuses to start."),
    var("COLLBENCH_JOB_ID", Collbench, "A value unique to this job (a cluster or job name), for ranks started by hand without a launcher's job id: it keeps two jobs at one rendezvous apart (a derived token is no secret; give `COLLBENCH_JOB_TOKEN` to authenticate)."),
    var("COLLBENCH_JOB_TOKEN_FILE", Collbench, "A file holding the job token (a mounted Kubernetes Secret, say); used when `COLLBENCH_JOB_TOKEN` is not set."),
    var("COLLBENCH_LOCAL_RANK", Collbench, "This rank's index among the ranks on its host; picks its GPU. Set by the embedded launcher (`--np`)."),
    var("COLLBENCH_LAUNCHER", Collbench, "Name of the launcher for the header and the JSON; `local` (set by the embedded launcher) also means the launcher, not rank 0, serves the rendezvous."),
    var("COLLBENCH_CUDA_DEVICE", Collbench, "CUDA device ordinal for `--memory cuda` and `selftest --gpu` when `--device` is not given [default: the local rank modulo the device count]."),
    var("COLLBENCH_NCCL_LIB", Collbench, "Path to libnccl tried before `libnccl.so.2` and `libnccl.so` on the library path (a pip wheel's copy, say)."),
    var("COLLBENCH_SEED", Collbench, "Seed of `selftest --gpu`'s random inputs, to repeat a run [default: a fresh seed, printed]."),
    var("COLLBENCH_SHOW_LISTENERS", Collbench, "Set to anything: each rank prints the address of every data listener as soon as it is bound (a debugging aid)."),
    var("MASTER_ADDR", Launcher, "Host of the rendezvous (torchrun style) when `COLLBENCH_ROOT` is not set; an address of rank 0's host."),
    var("MASTER_PORT", Launcher, "Port of the rendezvous with `MASTER_ADDR` [default: 29500]."),
    var("RANK", Launcher, "Rank (torchrun style), with `WORLD_SIZE`."),
    var("WORLD_SIZE", Launcher, "Number of ranks (torchrun style), with `RANK`."),
    var("LOCAL_RANK", Launcher, "Local rank (torchrun style); picks the GPU."),
    var("OMPI_COMM_WORLD_RANK", Launcher, "Rank under OpenMPI's mpirun; its presence also makes a rank outlive mpirun's SIGTERM long enough to name a failed peer."),
    var("OMPI_COMM_WORLD_SIZE", Launcher, "Number of ranks under OpenMPI's mpirun."),
    var("OMPI_COMM_WORLD_LOCAL_RANK", Launcher, "Local rank under OpenMPI's mpirun; picks the GPU."),
    var("OMPI_COMM_WORLD_LOCAL_SIZE", Launcher, "Ranks on this host under OpenMPI's mpirun; sizes the memory check."),
    var("OMPI_MCA_orte_ess_jobid", Launcher, "OpenMPI's job id (older releases); derives the job token when none is given."),
    var("OMPI_MCA_ess_base_jobid", Launcher, "OpenMPI's job id; derives the job token when none is given."),
    var("TORCHELASTIC_RUN_ID", Launcher, "torchrun's run id (unless `none`); derives the job token when none is given."),
    var("PMI_RANK", Launcher, "Rank under a PMI launcher (MPICH's or Intel MPI's mpiexec)."),
    var("PMI_SIZE", Launcher, "Number of ranks under a PMI launcher."),
    var("PMIX_RANK", Launcher, "Rank under PMIx (with `SLURM_NTASKS` for the size)."),
    var("PMIX_NAMESPACE", Launcher, "PMIx's job namespace; derives the job token when none is given."),
    var("MPI_LOCALRANKID", Launcher, "Local rank under MPICH's Hydra; picks the GPU."),
    var("MPI_LOCALNRANKS", Launcher, "Ranks on this host under MPICH's Hydra; sizes the memory check."),
    var("SLURM_PROCID", Launcher, "Rank under Slurm's srun."),
    var("SLURM_NTASKS", Launcher, "Number of ranks under srun (and under PMIx)."),
    var("SLURM_LOCALID", Launcher, "Local rank under srun; picks the GPU."),
    var("SLURM_NTASKS_PER_NODE", Launcher, "Ranks on this host under srun (`2(x3)` reads as 2); sizes the memory check."),
    var("SLURM_JOB_ID", Launcher, "Slurm's job id; derives the job token when none is given."),
    var("SLURM_STEP_ID", Launcher, "Slurm's step id; derives the job token when none is given."),
    var("JOB_COMPLETION_INDEX", Launcher, "Rank in a Kubernetes Indexed Job, with `COLLBENCH_WORLD_SIZE` for the size."),
    var("NCCL_TESTS_MIN_BW", NcclTests, "Under an nccl-tests name (`all_reduce_perf`, ...): the run fails (exit 7) when the average bus bandwidth is under 90% of this many GB/s, as nccl-tests does."),
    var("COLLBENCH_REQUIRE_NVRTC", Testing, "`1`: the NVRTC compile test fails, rather than passes without checking, when libnvrtc cannot be loaded (`kernels/check.sh` sets it)."),
    var("COLLBENCH_WRITE_DOCS", Testing, "Set: `cargo test --test docgen` rewrites docs/man/, docs/options.md and docs/environment.md from the code before checking them."),
];

/// The launcher variables in the order identity is looked for, for the pages' note on precedence.
pub const PRECEDENCE: &str =
    "The rank and job size come from the first of: `COLLBENCH_RANK` and `COLLBENCH_WORLD_SIZE`; \
    OpenMPI (`OMPI_COMM_WORLD_RANK`); PMI (`PMI_RANK`); PMIx (`PMIX_RANK`); Slurm (`SLURM_PROCID`); a Kubernetes \
    Indexed Job (`JOB_COMPLETION_INDEX`); `RANK` and `WORLD_SIZE`. With none of them, collbench starts `--np` \
    local ranks itself.";

/// Groups in the order the pages list them.
pub const GROUPS: [Group; 4] = [Collbench, Launcher, NcclTests, Testing];

/// docs/environment.md: the table as Markdown.
pub fn markdown(regenerate: &str) -> String {
    let mut s = format!(
        "<!-- Generated from src/docgen/environment.rs; do not edit. Regenerate: {regenerate} -->\n\n\
         # Environment variables\n\n\
         This page answers: which environment variables does collbench read, who sets them, and what do they \
         do. It is the list the man pages' ENVIRONMENT section shows, checked against the code by \
         tests/docgen.rs.\n\n{PRECEDENCE}\n"
    );
    for g in GROUPS {
        s.push_str(&format!("\n## {}\n\n| variable | meaning |\n|---|---|\n", g.title()));
        for v in VARS.iter().filter(|v| v.group == g) {
            s.push_str(&format!("| `{}` | {} |\n", v.name, v.meaning.replace('|', "\\|")));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_group_has_one() {
        let mut names: Vec<_> = VARS.iter().map(|v| v.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "a variable is listed twice");
        for g in GROUPS {
            assert!(VARS.iter().any(|v| v.group == g), "{g:?} is empty");
        }
        assert!(markdown("x").contains("| `COLLBENCH_LAUNCHER` |"));
    }
}
