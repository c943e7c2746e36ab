//! The background prebuild of a CI run: `cargo xtask prebuild` started at the
//! run's beginning under `nice -n 19`, so the cold Go builds of the e2e steps'
//! inputs (node images, DRA driver, GPU stack; about 30 minutes of compiling
//! on a cold machine) use the cycles the tests leave idle instead of running
//! after them. The steps that need a part wait on its cache lock; the bench
//! step waits for the whole prebuild, so its figures come from a quiet
//! machine. Its log is `target/ci/prebuild.log`; the summary gives its outcome.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

/// The prebuild, if one was started: running, or how it ended.
static STATE: Mutex<Option<State>> = Mutex::new(None);

enum State {
    Running(Running),
    Ended(Ended),
}

struct Running {
    /// Waits for the process and times it.
    waiter: JoinHandle<Ended>,
    started: Instant,
    log: PathBuf,
}

/// How a prebuild ended.
#[derive(Debug, Clone)]
pub(super) struct Ended {
    pub(super) passed: bool,
    pub(super) took: Duration,
    pub(super) log: PathBuf,
}

/// Starts `nice -n 19 <this xtask> prebuild`, its output into the log.
pub(super) fn start() -> Result<()> {
    let dir = crate::project_root().join("target/ci");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let log = dir.join("prebuild.log");
    let out =
        std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    let exe = std::env::current_exe().context("cannot locate the running xtask")?;
    let mut child = Command::new("nice")
        .args(["-n", "19"])
        .arg(&exe)
        .arg("prebuild")
        .current_dir(crate::project_root())
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .context("cannot start the background prebuild (`nice` missing?)")?;
    eprintln!(
        "==> background prebuild started (pid {}, niced; log {})",
        child.id(),
        log.display()
    );
    let started = Instant::now();
    let ended_log = log.clone();
    let waiter = std::thread::spawn(move || Ended {
        passed: child.wait().is_ok_and(|status| status.success()),
        took: started.elapsed(),
        log: ended_log,
    });
    *lock() = Some(State::Running(Running {
        waiter,
        started,
        log,
    }));
    Ok(())
}

/// Waits for the prebuild, if one runs, saying why; returns how it ended (None: none started).
pub(super) fn wait(why: &str) -> Option<Ended> {
    let mut slot = lock();
    let ended = match slot.take()? {
        State::Ended(ended) => ended,
        State::Running(running) => {
            if !running.waiter.is_finished() {
                eprintln!(
                    "    waiting for the background prebuild ({:.0} s so far; {why}; log {})",
                    running.started.elapsed().as_secs_f64(),
                    running.log.display()
                );
            }
            let (started, log) = (running.started, running.log.clone());
            running.waiter.join().unwrap_or(Ended {
                passed: false,
                took: started.elapsed(),
                log,
            })
        }
    };
    *slot = Some(State::Ended(ended.clone()));
    Some(ended)
}

fn lock() -> std::sync::MutexGuard<'static, Option<State>> {
    STATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
