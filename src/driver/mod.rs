//! The one driver of every command that runs ranks (`run`, `preflight`, `pairwise`, `p2p`, `info`): a
//! command says what it is by implementing [`RankCommand`] (its options, what ranks agree on, which pairs
//! connect, its outputs, its rank's work and how the job's exit status is decided) and calls [`drive`], which
//! owns the rest: launch local ranks or be one rank of a launched job, every host check before anything is
//! allocated, the start-up, and the exit status.
//!
//! The host checks are private to this module and run by [`drive`] on both ways in, so a command cannot skip
//! them: [`launch`] runs them before local ranks start, [`start::Start::check_host`] on each rank of a
//! launched job.

mod launch;
pub mod signals;
pub mod start;
pub mod verdict;

use std::ffi::OsString;

use crate::error::Result;
use crate::memory::available::Available;
use crate::options::Options;
use crate::report::declared::Declared;
use crate::session::{Pairs, Session};
use crate::world::{env, Identity};

pub use start::Rank;

/// How a job's exit status is decided, the rank's work having ended.
pub enum Ending {
    /// Each rank exits with its own status (`run`: every rank checked its own data).
    Own(i32),
    /// Every rank exits with rank 0's verdict: `decided` is rank 0's (`None` on the other ranks), sent to
    /// every rank over `rank`'s first path ([`verdict::share`]).
    Shared {
        decided: Option<Result<i32>>,
        rank: Box<Rank>,
    },
}

/// A rank connected to the job, its paths not open yet: a command may look at its peers before opening them.
pub struct Connected<'a> {
    pub sess: Session,
    start: &'a start::Start<'a>,
    /// What the rank does on SIGINT or SIGTERM before it exits 128 + the signal: nothing unless the command
    /// sets it (rank 0 marks its outputs incomplete).
    pub on_signal: signals::OnSignal,
}

impl Connected<'_> {
    /// Every path of the command's options opened once over the session; a failure is made known to every
    /// peer, so all ranks name the same culprit.
    pub fn open(self) -> Result<Rank> {
        self.start.open(self.sess)
    }
}

/// A command that runs ranks. [`drive`] runs it; its methods say what is the command's own.
pub trait RankCommand {
    /// The subcommand (`pairwise`), for messages.
    fn name(&self) -> &'static str;

    /// The options every rank connects and opens its paths with.
    fn options(&self) -> &Options;

    /// What every rank must agree on, compared at the rendezvous (or through MPI) before any data moves.
    fn agreement(&self) -> serde_json::Value {
        self.options().agreement().to_wire()
    }

    /// The rank pairs the TCP paths connect.
    fn pairs(&self) -> Pairs {
        Pairs::Needed
    }

    /// The files and chart directory the command writes, with their flags.
    fn outputs(&self) -> Declared<'_>;

    /// Whether a rank's buffers fit beside `local` ranks on a host with `avail` memory.
    fn check_memory(&self, local: usize, avail: &Available) -> Result<()> {
        self.options().check_memory(local, avail)
    }

    /// What only the job's size can tell (a root rank, a pair of ranks): checked with `--np` before local ranks
    /// start and with the launcher's size on every rank before it connects.
    fn check_size(&self, _size: usize) -> Result<()> {
        Ok(())
    }

    /// Without a launcher, before local ranks start: a command may lower what it asks of `np` ranks on a host
    /// with `avail` memory (preflight's bandwidth size); what it then runs is [`RankCommand::rank_args`].
    fn fit_host(&mut self, _np: usize, _avail: &Available) -> Result<()> {
        Ok(())
    }

    /// The command line of each local rank: `args` (the program name left out) as given, unless
    /// [`RankCommand::fit_host`] changed what the ranks run.
    fn rank_args(&self, args: &[OsString]) -> Vec<OsString> {
        args.to_vec()
    }

    /// Without a launcher: `Some` for a command that does its work here rather than in local ranks (`info`
    /// describes this host); `None` to launch `--np` ranks.
    fn alone(&self) -> Option<Result<i32>> {
        None
    }

    /// Called on rank 0 when its start-up failed before the command's work began, so its outputs can say so.
    fn start_failed(&self, _id: &Identity, _e: &crate::error::Error) {}

    /// One rank's work, from a connected session to its [`Ending`].
    fn rank(&self, id: &Identity, conn: Connected<'_>) -> Result<Ending>;
}

/// Runs `cmd` with the command line `argv` (program name first): launches `--np` local ranks when no
/// launcher started this process (as `get` reads the environment), else is one rank of the launched job.
/// Returns the exit status.
pub fn drive(cmd: &mut dyn RankCommand, argv: &[OsString], get: &dyn Fn(&str) -> Option<String>) -> Result<i32> {
    match env::identity_from(get)? {
        None => match cmd.alone() {
            Some(done) => done,
            None => launch::local(cmd, argv),
        },
        Some(id) => be_rank(cmd, &id, get),
    }
}

/// One rank of a launched job: the host checks, the size check, the start-up, the command's work, the exit.
fn be_rank(cmd: &dyn RankCommand, id: &Identity, get: &dyn Fn(&str) -> Option<String>) -> Result<i32> {
    let start = start::Start {
        opts: cmd.options(),
        agreement: cmd.agreement(),
        pairs: cmd.pairs(),
        check_outputs: &|| cmd.outputs().check(),
        check_memory: &|local, avail| cmd.check_memory(local, avail),
    };
    // Outputs rank 0 may not write are refused before anything, and nothing is written about the refusal:
    // writing it would meet the very file that was refused. A rank refusing to start tells the others first.
    if let Err(e) = start.check_outputs(id) {
        start.refuse(id, &e);
        return Err(e);
    }
    let checked = start.check_host(id, get).map(|()| cmd.check_size(id.size));
    let sess = match checked {
        Ok(Ok(())) => {
            // From here the rank starts threads: the stop signals go to a watcher of their own first.
            let on_signal = signals::OnSignal::install();
            start.connect(id).map(|s| (s, on_signal))
        }
        // Every rank sees the same options and size, so every rank would say the same: rank 0 alone says it,
        // the others exit with its status.
        Ok(Err(e)) if id.rank != 0 => return Ok(e.exit_code()),
        Ok(Err(e)) => Err(e),
        Err(e) => {
            start.refuse(id, &e);
            Err(e)
        }
    };
    let (sess, on_signal) = match sess {
        Ok(s) => s,
        Err(e) => {
            if id.rank == 0 {
                cmd.start_failed(id, &e);
            }
            return Err(e);
        }
    };
    match cmd.rank(
        id,
        Connected {
            sess,
            start: &start,
            on_signal,
        },
    )? {
        Ending::Own(code) => Ok(code),
        Ending::Shared { decided, rank } => verdict::share(id.rank, cmd.name(), decided, rank),
    }
}

#[cfg(test)]
mod tests;
