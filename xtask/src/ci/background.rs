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
//! - The steps that run beside the e2e steps (the Nix sandbox rehearsals,
//!   the non-root user's cold builds): CPU-bound work prepared when the first
//!   e2e step starts and waited for after the last, filling the cycles the
//!   e2e steps leave idle while they wait on pods; the summary counts each as
//!   a step. Their processes start only once the prebuild has ended (`after`)
//!   and run under `SCHED_IDLE`. Measured on cold runs: with both at
//!   `nice -n 19` the rehearsals took half the cycles the node image's build
//!   needed while the e2e demo waited for that image; under `SCHED_IDLE`
//!   alone (a weight of 3 against nice 19's 15 per process) the two jobs'
//!   compilers still took about a third.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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
    /// A caller of [`wait`] is joining it; other callers poll until it has ended.
    Joining,
    Ended(Ended),
}

/// How often a waiter looks at the job table again.
const POLL: Duration = Duration::from_secs(1);

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
        None,
        &exe,
        &["prebuild"],
        &crate::project_root(),
        &log_path("prebuild.log")?,
    )
}

/// Starts `program args…` at `priority` in `dir` as the job `name`, its
/// output into `log`; with `after`, only once the job `after` has ended (or
/// at once when no such job was started).
pub(super) fn start(
    name: &'static str,
    priority: Priority,
    after: Option<&'static str>,
    program: &Path,
    args: &[&str],
    dir: &Path,
    log: &Path,
) -> Result<()> {
    let out =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let [wrapper, wrapper_args @ ..] = priority.wrapper();
    let mut command = Command::new(wrapper);
    command
        .args(wrapper_args)
        .arg(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out.try_clone()?);
    let started = Instant::now();
    let ended_log = log.to_path_buf();
    let waiter = match after {
        None => {
            let child = spawn(name, priority, &mut command, log)?;
            std::thread::spawn(move || ended(child, started, ended_log))
        }
        Some(gate) => {
            eprintln!(
                "==> background {name}: starts once the background {gate} has ended \
                 ({priority:?}; log {})",
                log.display()
            );
            std::thread::spawn(move || {
                wait_until_ended(gate);
                match spawn(name, priority, &mut command, &ended_log) {
                    Ok(child) => ended(child, Instant::now(), ended_log),
                    Err(err) => {
                        eprintln!("ERROR: {err:#}");
                        let mut out = out;
                        // The log says why the job has no output; the step's failure names it.
                        let _ = writeln!(out, "ERROR: {err:#}");
                        Ended {
                            passed: false,
                            took: Duration::ZERO,
                            log: ended_log,
                        }
                    }
                }
            })
        }
    };
    let running = Running {
        waiter,
        started,
        log: log.to_path_buf(),
    };
    lock().insert(name, State::Running(running));
    Ok(())
}

/// Spawns the job's process and says so.
fn spawn(name: &str, priority: Priority, command: &mut Command, log: &Path) -> Result<Child> {
    let child = command.spawn().with_context(|| {
        format!(
            "cannot start the background {name} (`{}` missing?)",
            command.get_program().to_string_lossy()
        )
    })?;
    eprintln!(
        "==> background {name} started (pid {}, {priority:?}; log {})",
        child.id(),
        log.display()
    );
    Ok(child)
}

/// Waits for the process and times it from `started`.
fn ended(mut child: Child, started: Instant, log: PathBuf) -> Ended {
    Ended {
        passed: child.wait().is_ok_and(|status| status.success()),
        took: started.elapsed(),
        log,
    }
}

/// Returns once the job `name` has ended, or at once when none was started.
fn wait_until_ended(name: &str) {
    loop {
        match lock().get(name) {
            None | Some(State::Ended(_)) => return,
            Some(State::Running(running)) if running.waiter.is_finished() => return,
            Some(_) => {}
        }
        std::thread::sleep(POLL);
    }
}

/// Waits for the job `name`, if one was started, saying why; returns how it
/// ended (None: none was started). Never holds the job table while it waits,
/// so the jobs that start after another can look it up meanwhile.
pub(super) fn wait(name: &'static str, why: &str) -> Option<Ended> {
    let running = loop {
        let mut jobs = lock();
        match jobs.remove(name)? {
            State::Ended(ended) => {
                jobs.insert(name, State::Ended(ended.clone()));
                return Some(ended);
            }
            State::Running(running) => {
                jobs.insert(name, State::Joining);
                break running;
            }
            State::Joining => {
                jobs.insert(name, State::Joining);
                drop(jobs);
                std::thread::sleep(POLL);
            }
        }
    };
    if !running.waiter.is_finished() {
        eprintln!(
            "    waiting for the background {name} ({:.0} s so far; {why}; log {})",
            running.started.elapsed().as_secs_f64(),
            running.log.display()
        );
    }
    let (started, log) = (running.started, running.log.clone());
    let ended = running.waiter.join().unwrap_or(Ended {
        passed: false,
        took: started.elapsed(),
        log,
    });
    lock().insert(name, State::Ended(ended.clone()));
    Some(ended)
}

/// Waits for the job `name` as a step's result: prints its log, then fails
/// naming `what` when it failed (or was never started).
pub(super) fn finish(name: &'static str, what: &str, why: &str) -> Result<()> {
    let ended = wait(name, why).with_context(|| format!("{what}: never started"))?;
    match std::fs::read_to_string(&ended.log) {
        Ok(text) => eprintln!("--- {} ---\n{text}--- end ---", ended.log.display()),
        Err(err) => eprintln!("(cannot read {}: {err})", ended.log.display()),
    }
    let took = ended.took.as_secs_f64();
    anyhow::ensure!(
        ended.passed,
        "{what} failed after {took:.0} s (the log is above)"
    );
    eprintln!("    {what} passed in {took:.0} s");
    Ok(())
}

fn lock() -> std::sync::MutexGuard<'static, BTreeMap<&'static str, State>> {
    JOBS.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_after_another_starts_once_that_one_has_ended() {
        let dir = tempfile::tempdir().expect("a scratch dir");
        let log = |name: &str| dir.path().join(name);
        // The first job writes its file only after a second; the second job
        // fails unless that file is already there when it starts. `bash`, not
        // `sh`: a Nix build's PATH (stdenv's, replayed by the sandbox
        // rehearsal) has bash and coreutils, and no `sh`.
        start(
            "test first",
            Priority::Niced,
            None,
            Path::new("bash"),
            &["-c", "sleep 1 && : > first"],
            dir.path(),
            &log("first.log"),
        )
        .expect("started");
        start(
            "test second",
            Priority::Niced,
            Some("test first"),
            Path::new("bash"),
            &["-c", "test -e first"],
            dir.path(),
            &log("second.log"),
        )
        .expect("started");
        let second = wait("test second", "the test reads it").expect("it was started");
        assert!(
            second.passed,
            "the second job ran before the first had ended"
        );
        assert!(wait("test first", "the test reads it").is_some_and(|it| it.passed));
    }

    #[test]
    fn a_job_after_one_never_started_starts_at_once() {
        let dir = tempfile::tempdir().expect("a scratch dir");
        start(
            "test alone",
            Priority::Niced,
            Some("test never started"),
            Path::new("true"),
            &[],
            dir.path(),
            &dir.path().join("alone.log"),
        )
        .expect("started");
        assert!(wait("test alone", "the test reads it").is_some_and(|it| it.passed));
    }
}
