//! One bounded wait for every scenario: [`poll_until`] calls a probe until it
//! says done, gives up or the limit passes, printing progress as it changes;
//! [`Limits`], the bounds of the scenarios' waits, and [`scaled`], a wait
//! grown with the workers.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// Bounds of every wait in the scenarios.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Poll interval.
    pub poll: Duration,
    /// Daemon A's `-q` READY, from the start exec's return (60 s: upstream's
    /// 30 polls at 1 s plus exec latency come to 39–60 s under CI's load;
    /// BENCHMARKS.md "Scenario 2 transitions").
    pub local_ready: Duration,
    /// The domain UP after B starts (reconnect backoff 15 s, 31 s, 62 s, 125 s…).
    pub domain_up: Duration,
    /// The domain leaving UP after B stops.
    pub domain_down: Duration,
    /// A topology change reaching every worker.
    pub converge: Duration,
}

impl Limits {
    /// The default limits with the topology's convergence scaled to `workers`
    /// (see [`scaled`]).
    pub fn for_workers(workers: usize) -> Limits {
        let default = Limits::default();
        Limits {
            converge: scaled(default.converge, workers),
            ..default
        }
    }
}

/// A wait sized for the demo's 4 workers, grown by [`PER_EXTRA_WORKER`] per worker beyond 4:
/// nodes act in parallel but share the machine's CPUs.
pub fn scaled(base: Duration, workers: usize) -> Duration {
    let extra = u32::try_from(workers.saturating_sub(4)).unwrap_or(u32::MAX);
    base.saturating_add(PER_EXTRA_WORKER.saturating_mul(extra))
}

/// What one more worker adds to a wait. On a 2-core machine the 18 trays' compute-domain
/// daemons were labelled 185 s after their ComputeDomain was made with nothing else running,
/// and in CI, beside its background builds, 15 of 18 were after 250 s (180 s + 5 s a tray):
/// each tray costs the shared CPUs about 11 s there.
pub const PER_EXTRA_WORKER: Duration = Duration::from_secs(15);

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            poll: Duration::from_secs(1),
            local_ready: Duration::from_secs(60),
            domain_up: Duration::from_secs(240),
            domain_down: Duration::from_secs(60),
            converge: Duration::from_secs(60),
        }
    }
}

/// What one probe saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe<T, S> {
    /// The condition holds: the wait ends with this value.
    Done(T),
    /// Not yet; printed when it differs from the last progress (unless the
    /// wait is quiet).
    Pending(S),
    /// Not yet, and never printed.
    Quiet(S),
    /// Not yet, and waiting longer is pointless (the daemon exited).
    GiveUp(S),
}

/// How a wait prints its progress on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Show<'a> {
    /// `    WHAT: PROGRESS (Ns)` on change and `    ✓ WHAT after N.Ns` at the end.
    Named(&'a str),
    /// `    PROGRESS (Ns)` on change, nothing at the end.
    Bare,
}

/// The bounds of one wait.
#[derive(Debug, Clone, Copy)]
pub struct Wait<'a> {
    /// How progress is printed.
    pub show: Show<'a>,
    /// Where the budget starts (a later wait may share an earlier's budget).
    pub since: Instant,
    /// The budget, from `since`.
    pub limit: Duration,
    /// The pause between probes.
    pub every: Duration,
}

/// Why a wait ended without its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmet<S> {
    /// The last progress the probe reported (it runs at least once).
    pub last: S,
    /// How many probes ran.
    pub polls: u32,
    /// The probe gave up before the limit ([`Probe::GiveUp`]).
    pub gave_up: bool,
}

/// Calls `probe` every `wait.every` until it is done or gives up, or
/// `wait.limit` has passed since `wait.since` (checked after each probe, so
/// the probe runs at least once).
pub async fn poll_until<T, S, P, F>(wait: &Wait<'_>, mut probe: P) -> Result<T, Unmet<S>>
where
    S: PartialEq + Display,
    P: FnMut() -> F,
    F: Future<Output = Probe<T, S>>,
{
    let deadline = wait.since + wait.limit;
    let mut last: Option<S> = None;
    let mut polls = 0u32;
    loop {
        polls += 1;
        let (progress, print, gave_up) = match probe().await {
            Probe::Done(value) => {
                if let Show::Named(what) = wait.show {
                    eprintln!(
                        "    ✓ {what} after {:.1}s",
                        wait.since.elapsed().as_secs_f64()
                    );
                }
                return Ok(value);
            }
            Probe::Pending(progress) => (progress, true, false),
            Probe::Quiet(progress) => (progress, false, false),
            Probe::GiveUp(progress) => (progress, false, true),
        };
        if print && last.as_ref() != Some(&progress) {
            let took = wait.since.elapsed().as_secs_f64();
            match wait.show {
                Show::Named(what) => eprintln!("    {what}: {progress} ({took:.0}s)"),
                Show::Bare => eprintln!("    {progress} ({took:.0}s)"),
            }
        }
        if gave_up || Instant::now() >= deadline {
            return Err(Unmet {
                last: progress,
                polls,
                gave_up,
            });
        }
        last = Some(progress);
        tokio::time::sleep(wait.every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn wait(limit: u64) -> Wait<'static> {
        Wait {
            show: Show::Named("thing"),
            since: Instant::now(),
            limit: Duration::from_secs(limit),
            every: Duration::from_secs(1),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn returns_the_value_once_the_probe_is_done() {
        let calls = Cell::new(0);
        let got = poll_until(&wait(10), || {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move {
                if n == 3 {
                    Probe::Done(n)
                } else {
                    Probe::Pending(format!("at {n}"))
                }
            }
        })
        .await;
        assert_eq!(got, Ok(3));
    }

    fn unmet(last: &str, polls: u32, gave_up: bool) -> Unmet<String> {
        Unmet {
            last: last.to_owned(),
            polls,
            gave_up,
        }
    }

    /// Polls until `limit` with a probe that always answers `probe()`: the
    /// outcome and how long the wait took.
    async fn poll_constant(
        limit: u64,
        probe: fn() -> Probe<(), String>,
    ) -> (Result<(), Unmet<String>>, Duration) {
        let started = Instant::now();
        let got = poll_until(&wait(limit), || async move { probe() }).await;
        (got, started.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn times_out_with_the_last_progress_and_the_poll_count() {
        let (got, took) = poll_constant(5, || Probe::Quiet("still".to_owned())).await;
        assert_eq!(got, Err(unmet("still", 6, false)));
        assert!(took >= Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_that_gives_up_ends_the_wait_at_once() {
        let (got, took) = poll_constant(60, || Probe::GiveUp("dead".to_owned())).await;
        assert_eq!(got, Err(unmet("dead", 1, true)));
        assert!(took < Duration::from_secs(1));
    }
}
