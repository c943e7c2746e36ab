//! CI's background jobs: processes started at a low CPU priority
//! ([`Priority`]) whose output goes to a log under `target/ci/`, waited for
//! by name.
//!
//! - The prebuild (`cargo xtask prebuild`), started at the run's beginning,
//!   so the cold Go builds of the e2e steps' inputs (node images, DRA driver,
//!   GPU stack; about 30 minutes of compiling on a cold machine) use the
//!   cycles the tests and the e2e steps leave idle instead of running before
//!   them. The steps that need a part wait on its cache lock; the bench step,
//!   CI's last, waits for the whole prebuild, so its figures come from a
//!   quiet machine; the summary gives its outcome.
//! - The steps that run beside the e2e steps (the Nix sandbox rehearsals):
//!   CPU-bound work started when the first e2e step starts and waited for
//!   after the last, filling the cycles the e2e steps leave idle while they
//!   wait on pods; the summary counts each as a step. They run under
//!   `SCHED_IDLE`, below the prebuild: a cold run measured with both at
//!   `nice -n 19` had the rehearsals take half the cycles the node image's
//!   build needed while the e2e demo waited for that image.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

/// The jobs started in this run, by name: running, or how they ended.
static JOBS: Mutex<BTreeMap<&'static str, State>> = Mutex::new(BTreeMap::new());

/// The prebuild's job name.
pub(super) const PREBUILD: &str = "prebuild";

/// How a job yields the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Priority {
    /// `nice -n 19`: below every foreground step, equal to other niced work.
    Niced,
    /// `chrt --idle 0` (`SCHED_IDLE`): only the cycles nothing else wants,
    /// the niced prebuild's included.
    Idle,
}

impl Priority {
    /// The command that runs a program at this priority, before the program.
    fn wrapper(self) -> [&'static str; 3] {
        match self {
            Priority::Niced => ["nice", "-n", "19"],
            Priority::Idle => ["chrt", "--idle", "0"],
        }
    }
}

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

/// How a job ended.
#[derive(Debug, Clone)]
pub(super) struct Ended {
    pub(super) passed: bool,
    pub(super) took: Duration,
    pub(super) log: PathBuf,
}

/// `target/ci/<file>`, its directory created.
pub(super) fn log_path(file: &str) -> Result<PathBuf> {
    let dir = crate::project_root().join("target/ci");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir.join(file))
}

/// Starts `<this xtask> prebuild`, niced, its output into `target/ci/prebuild.log`.
pub(super) fn start_prebuild() -> Result<()> {
    let exe = std::env::current_exe().context("cannot locate the running xtask")?;
    start(
        PREBUILD,
        Priority::Niced,
        &exe,
        &["prebuild"],
        &crate::project_root(),
        &log_path("prebuild.log")?,
    )
}

/// Starts `program args…` at `priority` in `dir` as the job `name`, its output into `log`.
pub(super) fn start(
    name: &'static str,
    priority: Priority,
    program: &Path,
    args: &[&str],
    dir: &Path,
    log: &Path,
) -> Result<()> {
    let out =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let [wrapper, wrapper_args @ ..] = priority.wrapper();
    let mut child = Command::new(wrapper)
        .args(wrapper_args)
        .arg(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("cannot start the background {name} (`{wrapper}` missing?)"))?;
    eprintln!(
        "==> background {name} started (pid {}, {priority:?}; log {})",
        child.id(),
        log.display()
    );
    let started = Instant::now();
    let ended_log = log.to_path_buf();
    let waiter = std::thread::spawn(move || Ended {
        passed: child.wait().is_ok_and(|status| status.success()),
        took: started.elapsed(),
        log: ended_log,
    });
    let running = Running {
        waiter,
        started,
        log: log.to_path_buf(),
    };
    lock().insert(name, State::Running(running));
    Ok(())
}

/// Waits for the job `name`, if one was started, saying why; returns how it
/// ended (None: none was started).
pub(super) fn wait(name: &'static str, why: &str) -> Option<Ended> {
    let mut jobs = lock();
    let ended = match jobs.remove(name)? {
        State::Ended(ended) => ended,
        State::Running(running) => {
            if !running.waiter.is_finished() {
                eprintln!(
                    "    waiting for the background {name} ({:.0} s so far; {why}; log {})",
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
    jobs.insert(name, State::Ended(ended.clone()));
    Some(ended)
}

fn lock() -> std::sync::MutexGuard<'static, BTreeMap<&'static str, State>> {
    JOBS.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
