//! Stop requests by signal: SIGTERM and SIGUSR1 (what Slurm's `--signal` sends before the time
//! limit). The handler only records the signal; the run loop looks at it after every step,
//! agrees with the other ranks, writes a checkpoint and stops. `hinoki run` installs the handlers
//! as its process starts, so that a signal during start-up (MPI, initial conditions, reading a
//! checkpoint, the first forces), which would otherwise end the process, stops the run after its
//! first step.

use crate::error::{Error, Result};
use signal_hook::consts::{SIGTERM, SIGUSR1};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The last stop signal received (0: none), shared with the handlers.
static RECEIVED: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

/// Installs the handlers (once per process; a signal received since is kept).
pub fn install() -> Result<()> {
    if RECEIVED.get().is_none() {
        let f = Arc::new(AtomicUsize::new(0));
        for sig in [SIGTERM, SIGUSR1] {
            signal_hook::flag::register_usize(sig, Arc::clone(&f), sig as usize)
                .map_err(|e| Error::input(format!("cannot handle signal {sig}: {e}")))?;
        }
        RECEIVED.get_or_init(|| f);
    }
    Ok(())
}

/// Forgets the signal received, once a run has stopped for it (a later run in this process
/// starts without it).
pub fn forget() {
    if let Some(f) = RECEIVED.get() {
        f.store(0, Ordering::SeqCst);
    }
}

/// The stop signal received since [`install`], if any (its number).
pub fn received() -> Option<i32> {
    let s = RECEIVED.get().map_or(0, |f| f.load(Ordering::SeqCst));
    (s != 0).then_some(s as i32)
}

/// The name of a stop signal number.
pub fn name(sig: i32) -> &'static str {
    match sig {
        SIGTERM => "SIGTERM",
        SIGUSR1 => "SIGUSR1",
        _ => "a signal",
    }
}
