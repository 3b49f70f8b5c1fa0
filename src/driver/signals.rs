//! A rank's stop signals (SIGINT from a terminal's Ctrl-C, SIGTERM from a launcher or a Kubernetes eviction):
//! taken by a thread of their own, which runs what the command left to do on a signal (rank 0 marks its
//! outputs incomplete, naming the signal) and ends the rank with 128 + the signal, so no output is left
//! looking complete, or half written, by a signal.

use std::sync::{Arc, Mutex};

use crate::world::launcher_stop::signal_name;

/// What a command does on a stop signal before the rank exits: given the signal's name (`SIGTERM`) and the
/// exit status the rank ends with.
pub type Hook = Box<dyn FnOnce(&str, i32) + Send>;

/// The stop signals' watcher of one rank; [`OnSignal::set`] gives it the command's hook.
#[derive(Clone)]
pub struct OnSignal {
    hook: Arc<Mutex<Option<Hook>>>,
}

impl OnSignal {
    /// Blocks SIGINT and SIGTERM in the calling thread (so every thread it starts after leaves them to the
    /// watcher) and starts the watcher. Call before the rank starts its other threads.
    pub fn install() -> OnSignal {
        let set = stop_set();
        // SAFETY: `set` is a valid sigset_t; a null old-set pointer is allowed.
        unsafe {
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        }
        let on = OnSignal {
            hook: Arc::new(Mutex::new(None)),
        };
        let watcher = on.clone();
        std::thread::spawn(move || {
            let mut sig: libc::c_int = 0;
            // SAFETY: `set` is a valid sigset_t and `sig` a writable int; the signals are blocked in every thread
            // of the rank but this one's sigwait.
            while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
            let code = 128 + sig;
            let hook = watcher.hook.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(hook) = hook {
                hook(&signal_name(sig), code);
            }
            std::process::exit(code);
        });
        on
    }

    /// Nothing more to do on a stop signal (the outputs are complete): the rank just exits.
    pub fn clear(&self) {
        *self.hook.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// What to do on a stop signal from now on, replacing what was set before.
    pub fn set(&self, hook: Hook) {
        *self.hook.lock().unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }
}

/// SIGINT and SIGTERM as a signal set.
fn stop_set() -> libc::sigset_t {
    // SAFETY: an all-zero sigset_t is a valid value to initialise with sigemptyset.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable sigset_t for every call.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
    }
    set
}
