//! The daemon's signals, registered before it does anything else, and the start-up hold tests
//! use to let a signal land during start-up.

use std::time::Duration;

/// The signals the daemon acts on, registered before it does anything else.
///
/// SIGUSR1's default action ends a process, and NVIDIA's compute-domain daemon
/// sends it whenever its peers' addresses change, also while this process still
/// starts (reads its config, resolves its peers: seconds on a loaded node).
/// Registered late, such a signal killed the double (Go reports exit code -1),
/// and NVIDIA's daemon, restarting it from its watchdog and its update loop at
/// once, shut itself down. A signal that lands during start-up is kept and
/// handled once the daemon serves.
pub struct Signals {
    pub term: tokio::signal::unix::Signal,
    pub int: tokio::signal::unix::Signal,
    pub quit: tokio::signal::unix::Signal,
    pub usr1: tokio::signal::unix::Signal,
    pub hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Must run inside the runtime.
    pub fn register() -> Result<Self, String> {
        use tokio::signal::unix::{signal, SignalKind};
        let on = |kind: SignalKind| signal(kind).map_err(|e| format!("cannot handle signals: {e}"));
        Ok(Self {
            term: on(SignalKind::terminate())?,
            int: on(SignalKind::interrupt())?,
            quit: on(SignalKind::quit())?,
            usr1: on(SignalKind::user_defined1())?,
            hup: on(SignalKind::hangup())?,
        })
    }
}

/// Test hook ([`imex_double::STARTUP_HOLD_ENV`]): holds the start-up, as a slow
/// resolver would.
pub fn startup_hold() {
    let hold = std::env::var(imex_double::STARTUP_HOLD_ENV)
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis);
    if let Some(hold) = hold {
        std::thread::sleep(hold);
    }
}
