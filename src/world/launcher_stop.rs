//! Local ranks end with their launcher. `collbench run --np N` killed, terminated or interrupted by pid must
//! not leave its ranks running as orphans that finish the sweep and mark their files complete: each rank
//! asks the kernel for SIGKILL when the launcher dies (however it dies, SIGKILL included), and the launcher
//! turns SIGTERM and SIGINT into stopping every rank it started (SIGTERM, then SIGKILL after a grace) before it
//! exits. What rank 0 wrote so far stays on disk (files are replaced atomically), marked incomplete by its
//! signal watcher.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::error::{stderr, EXIT_PEER};

/// The signals the launcher stops its ranks on (SIGKILL needs nothing: the ranks' death signal covers it).
const STOP_SIGNALS: [libc::c_int; 2] = [libc::SIGTERM, libc::SIGINT];

/// The stop signals as a signal set.
fn stop_set() -> libc::sigset_t {
    // SAFETY: an all-zero sigset_t is a valid value to initialise with sigemptyset.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable sigset_t for both calls.
    unsafe {
        libc::sigemptyset(&mut set);
        for s in STOP_SIGNALS {
            libc::sigaddset(&mut set, s);
        }
    }
    set
}

/// Makes the rank `cmd` starts die with this process: the kernel sends it SIGKILL when the launcher's
/// thread that spawned it ends (call from the thread that lives as long as the launcher, the main one),
/// and a rank whose launcher is already gone by the time it starts ends at once. The stop signals the
/// launcher blocks for itself ([`Stopper::install`]) are unblocked in the rank.
pub fn die_with_launcher(cmd: &mut Command) {
    let launcher = std::process::id() as libc::pid_t;
    let unblock = stop_set();
    let hook = move || {
        // SAFETY: sigprocmask, prctl, getppid and _exit are async-signal-safe, so they may run between
        // fork and exec; `unblock` is a valid sigset_t owned by this closure.
        unsafe {
            libc::sigprocmask(libc::SIG_UNBLOCK, &unblock, std::ptr::null_mut());
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The launcher may have died before the death signal was asked for: then nobody sends it.
            if libc::getppid() != launcher {
                libc::_exit(EXIT_PEER);
            }
        }
        Ok(())
    };
    // SAFETY: the hook calls only async-signal-safe functions and allocates nothing (see above).
    unsafe {
        cmd.pre_exec(hook);
    }
}

/// The launcher's side: SIGTERM and SIGINT are blocked in this process and taken by a thread of their own,
/// which kills every rank still running and records the signal, so the launcher reaps the ranks, says why
/// they ended and exits with 128 + the signal.
#[derive(Clone, Default)]
pub struct Stopper {
    /// Pids of the ranks still running, and the stop signal once one came.
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    pids: Vec<libc::pid_t>,
    signal: Option<libc::c_int>,
}

impl Stopper {
    /// Blocks the stop signals in the calling thread, so every thread started after it (the rendezvous
    /// server, the ranks' supervisor) leaves them to the watcher this starts. Call before any other thread
    /// is started and before any rank is spawned.
    pub fn install() -> Stopper {
        let set = stop_set();
        // SAFETY: `set` is a valid sigset_t; a null old-set pointer is allowed. Then, with the signals
        // blocked, their disposition is made the default: one inherited as ignored (a shell's background
        // job) would discard them before sigwait could take them, and the ranks inherit it.
        unsafe {
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            for s in STOP_SIGNALS {
                libc::signal(s, libc::SIG_DFL);
            }
        }
        let stopper = Stopper::default();
        let watcher = stopper.clone();
        std::thread::spawn(move || loop {
            let mut sig: libc::c_int = 0;
            // SAFETY: `set` is a valid sigset_t and `sig` a writable int; the signals are blocked in every
            // thread of this process, so sigwait is their only taker.
            if unsafe { libc::sigwait(&set, &mut sig) } == 0 {
                watcher.stop(sig);
            }
        });
        stopper
    }

    /// A rank started: killed if a stop signal comes.
    pub fn started(&self, pid: u32) {
        let mut s = self.lock();
        s.pids.push(pid as libc::pid_t);
        if s.signal.is_some() {
            kill(pid as libc::pid_t);
        }
    }

    /// A rank was reaped: its pid may be reused, so it is never signalled again.
    pub fn reaped(&self, pid: u32) {
        self.lock().pids.retain(|&p| p != pid as libc::pid_t);
    }

    /// The stop signal that came, if one did.
    pub fn signal(&self) -> Option<libc::c_int> {
        self.lock().signal
    }

    fn stop(&self, sig: libc::c_int) {
        let mut s = self.lock();
        if s.signal.is_none() {
            stderr!(
                "collbench: the launcher got {}: stopping its {} running local rank(s); files keep the points \
                 measured so far, marked incomplete",
                signal_name(sig),
                s.pids.len()
            );
        }
        if s.signal.is_some() {
            return;
        }
        s.signal = Some(sig);
        // SIGTERM first: each rank's watcher marks its outputs incomplete and exits. A rank that cannot act on it
        // (stopped by SIGSTOP, or hung) is killed once the grace is over.
        for &p in &s.pids {
            signal(p, libc::SIGTERM);
        }
        let stopper = self.clone();
        std::thread::spawn(move || {
            std::thread::sleep(STOP_GRACE);
            for &p in &stopper.lock().pids {
                kill(p);
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock still holds valid pids: stopping ranks matters more than the panic that poisoned it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How long the ranks get after the launcher's SIGTERM to mark their outputs and exit before they are killed.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// SIGKILL: a rank stopped by SIGSTOP (or a `--fault` stop) would not act on SIGTERM.
fn kill(pid: libc::pid_t) {
    signal(pid, libc::SIGKILL);
}

/// Sends `sig` to `pid`.
fn signal(pid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions; the pid is a child not yet reaped (a reaped one is
    // removed from the list under the same lock first).
    unsafe { libc::kill(pid, sig) };
}

/// `SIGTERM`, `SIGINT`, or the number.
pub fn signal_name(sig: libc::c_int) -> String {
    match sig {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGINT => "SIGINT".into(),
        n => format!("signal {n}"),
    }
}
