//! Scenario 2: two real nvidia-imex daemons in NO GPU mode form a domain;
//! skipped (never passed) without the payload.

use std::time::Duration;

use tokio::time::Instant;

use super::poll::{poll_until, Limits, Probe, Show, Wait};
use super::seam::Workload;
use crate::imex::{self, Daemon};
use crate::k8s::{ExecOutput, PodInfo};
use crate::report::{round, Outcome, ScenarioResult, WorkerDetail};
use crate::tracker::Tracker;

/// Stops daemons an interrupted or failed scenario 2 may have left (each
/// stop waits for the daemon to exit, see [`STOP_DAEMON`]).
pub async fn stop_daemons<W: Workload>(workload: &W, pods: &[String]) {
    for pod in pods {
        let _ = workload.exec(pod, &["sh", "-c", STOP_DAEMON]).await;
    }
}

/// A shell test: the pid file's daemon is alive (a zombie, which the pod's
/// pid 1 may never reap, counts as gone).
const ALIVE: &str = "p=$(cat /tmp/imex.pid 2>/dev/null) && [ -n \"$p\" ] && [ -d /proc/$p ] \
     && [ \"$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)\" != Z ]";

/// SIGTERM, then wait up to 10 s for the daemon to exit (it releases its
/// ports only then), SIGKILL after that, and remove the pid file. Prints
/// `stopped`, `killed` or nothing (no daemon).
pub const STOP_DAEMON: &str =
    "alive() { [ -d /proc/$1 ] && [ \"$(cut -d' ' -f3 /proc/$1/stat 2>/dev/null)\" != Z ]; }; \
     p=$(cat /tmp/imex.pid 2>/dev/null); \
     if [ -n \"$p\" ] && alive $p; then kill -TERM $p 2>/dev/null; i=0; \
       while alive $p && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; \
       if alive $p; then kill -KILL $p; sleep 0.5; echo killed; else echo stopped; fi; fi; \
     rm -f /tmp/imex.pid; true";

/// Before a run: what a previous run left (its files and the daemon's
/// persistence file), as a fresh pod would not have it.
pub(super) const CLEAN: &str =
    "rm -rf /tmp/imex.cfg /tmp/nodes.cfg /tmp/nvidia-imex.log /tmp/imex.stdout /var/run/nvidia-imex";

/// How long one `nvidia-imex-ctl` may take before it counts as hung.
pub const CTL_LIMIT_SECS: u32 = 10;

/// Scenario 2's two pods (clique 0's first two workers).
pub async fn scenario2<W: Workload>(
    workload: &W,
    nodes: [&str; 2],
    tracker: &Tracker,
    limits: Limits,
) -> ScenarioResult {
    let started = Instant::now();
    let mut result = ScenarioResult::new("scenario2", Outcome::Passed, 0.0);
    let pods = match (
        workload.pod_on_node(nodes[0]).await,
        workload.pod_on_node(nodes[1]).await,
    ) {
        (Ok(a), Ok(b)) => [a, b],
        (Err(err), _) => {
            return finish(
                result,
                started,
                Outcome::Failed(format!("{}: {err:#}", nodes[0])),
            )
        }
        (_, Err(err)) => {
            return finish(
                result,
                started,
                Outcome::Failed(format!("{}: {err:#}", nodes[1])),
            )
        }
    };
    let names = [pods[0].name.clone(), pods[1].name.clone()];
    // Stale daemons of an interrupted run go first.
    stop_daemons(workload, &names).await;
    let daemon = match which_daemon(workload, &names[0], nodes[0]).await {
        Ok(daemon) => daemon,
        Err(outcome) => return finish(result, started, outcome),
    };
    if daemon == Daemon::TestDouble {
        eprintln!("    the workload image carries the IMEX TEST DOUBLE, not NVIDIA's nvidia-imex");
    }
    tracker.imex_pods(&names);
    let outcome = match transitions(workload, nodes, &pods, limits, &mut result).await {
        Ok(()) => Outcome::Passed,
        Err(reason) => Outcome::Failed(reason),
    };
    stop_daemons(workload, &names).await;
    tracker.imex_pods(&[]);
    finish(result, started, daemon.mark(outcome))
}

/// Which nvidia-imex the pod's image carries; `Err` is the outcome when it
/// carries none (skipped) or cannot be told.
async fn which_daemon<W: Workload>(workload: &W, pod: &str, node: &str) -> Result<Daemon, Outcome> {
    match workload.exec(pod, &["test", "-x", imex::REAL_DAEMON]).await {
        Ok(out) if out.code == 0 => {}
        Ok(_) => {
            return Err(Outcome::Skipped(format!(
                "no nvidia-imex payload: {} is absent from the workload image; rerun with \
                 `cargo xtask scenario2 --imex <NVIDIA's imex-linux-x86_64-595.*-archive.tar.xz \
                 or an extracted tree>` (it builds and loads the workload image with it)",
                imex::REAL_DAEMON
            )))
        }
        Err(err) => return Err(Outcome::Failed(format!("{node}: {err:#}"))),
    }
    match workload
        .exec(pod, &["grep", "-q", imex_double::MARKER, imex::REAL_DAEMON])
        .await
    {
        Ok(out) if out.code == 0 => Ok(Daemon::TestDouble),
        Ok(out) if out.code == 1 => Ok(Daemon::Nvidia),
        Ok(out) => Err(Outcome::Failed(format!(
            "cannot tell which nvidia-imex {} is: grep exited {}: {}",
            imex::REAL_DAEMON,
            out.code,
            out.stderr.trim()
        ))),
        Err(err) => Err(Outcome::Failed(format!("{node}: {err:#}"))),
    }
}

fn finish(mut result: ScenarioResult, started: Instant, outcome: Outcome) -> ScenarioResult {
    result.outcome = outcome;
    result.seconds = round(started.elapsed());
    result
}

async fn run_ok<W: Workload>(workload: &W, pod: &str, argv: &[&str]) -> Result<ExecOutput, String> {
    match workload.exec(pod, argv).await {
        Ok(out) if out.code == 0 => Ok(out),
        Ok(out) => Err(format!(
            "`{}` in {pod} exited {}: {}{}",
            argv.join(" "),
            out.code,
            out.stdout.trim(),
            out.stderr.trim()
        )),
        Err(err) => Err(format!("{err:#}")),
    }
}

/// What one `nvidia-imex-ctl` poll gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Poll<T> {
    /// It exited 0 and printed what was asked.
    Answer(T),
    /// It failed, hung past [`CTL_LIMIT_SECS`] or printed something else:
    /// never taken as a domain state. The text says what it printed.
    Unreachable(String),
}

/// Runs `nvidia-imex-ctl -c CONFIG ARGS…` under `timeout`.
async fn ctl<W: Workload>(workload: &W, pod: &str, args: &[&str]) -> Result<ExecOutput, String> {
    let limit = CTL_LIMIT_SECS.to_string();
    let mut argv = vec![
        "timeout",
        limit.as_str(),
        "nvidia-imex-ctl",
        "-c",
        imex::CONFIG,
    ];
    argv.extend_from_slice(args);
    let shown = argv[2..].join(" ");
    match workload.exec(pod, &argv).await {
        Ok(out) if out.code == 0 => Ok(out),
        Ok(out) => {
            let why = match out.code {
                // busybox and coreutils timeout: 143 (TERM) and 124.
                143 | 124 => format!("did not finish within {CTL_LIMIT_SECS}s (killed)"),
                code => format!("exited {code}"),
            };
            Err(format!(
                "`{shown}` in {pod} {why}; stdout: {}; stderr: {}",
                imex::excerpt(&out.stdout),
                imex::excerpt(&out.stderr)
            ))
        }
        Err(err) => Err(format!("`{shown}` in {pod}: {err:#}")),
    }
}

/// `-N -j`, parsed.
async fn domain<W: Workload>(workload: &W, pod: &str) -> Poll<imex::Domain> {
    match ctl(workload, pod, &["-N", "-j"]).await {
        Ok(out) => match imex::parse_domain(&out.stdout) {
            Ok(domain) => Poll::Answer(domain),
            Err(err) => Poll::Unreachable(format!(
                "`nvidia-imex-ctl -N -j` in {pod} printed {err}; stderr: {}",
                imex::excerpt(&out.stderr)
            )),
        },
        Err(err) => Poll::Unreachable(err),
    }
}

/// `-q`: the word it printed.
async fn query<W: Workload>(workload: &W, pod: &str) -> Poll<String> {
    match ctl(workload, pod, &["-q"]).await {
        Ok(out) => Poll::Answer(out.stdout),
        Err(err) => Poll::Unreachable(err),
    }
}

/// The last lines of the daemon's log and of its stdout/stderr (loader
/// errors, the shim's exit 127 and early config errors land there).
async fn log_tail<W: Workload>(workload: &W, pod: &str) -> String {
    let mut out = String::new();
    for file in [imex::LOG, imex::STDOUT] {
        match workload.exec(pod, &["tail", "-n", "20", file]).await {
            Ok(tail) if tail.code == 0 => out.push_str(&format!(
                "\n  last lines of {file} in {pod}:\n{}",
                indent(&tail.stdout)
            )),
            Ok(tail) => out.push_str(&format!("\n  no {file} in {pod}: {}", tail.stderr.trim())),
            Err(err) => out.push_str(&format!("\n  no {file} from {pod}: {err:#}")),
        }
    }
    out
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("    {line}\n")).collect()
}

/// Whether the daemon the pid file names still runs.
async fn alive<W: Workload>(workload: &W, pod: &str) -> bool {
    workload
        .exec(pod, &["sh", "-c", ALIVE])
        .await
        .is_ok_and(|out| out.code == 0)
}

/// The three transitions: A alone READY and not UP, B joins and the domain
/// is UP, B terminated and the domain leaves UP. `Err` says what failed.
async fn transitions<W: Workload>(
    workload: &W,
    nodes: [&str; 2],
    pods: &[PodInfo; 2],
    limits: Limits,
    result: &mut ScenarioResult,
) -> Result<(), String> {
    let [a, b] = [&pods[0].name, &pods[1].name];
    let start = prepare(workload, nodes, pods).await?;

    // Daemon A alone: locally READY, domain not UP.
    run_ok(workload, a, &["sh", "-c", &start])
        .await
        .map_err(|err| format!("starting daemon A: {err}"))?;
    let alone = a_alone(workload, a, limits, result).await?;
    if alone.status == imex::DomainStatus::Up {
        return Err("daemon A alone: the domain is UP with one of two daemons".to_owned());
    }
    result.workers.push(WorkerDetail {
        node: nodes[0].to_owned(),
        pod: a.clone(),
        detail: format!("daemon A alone: -q READY, domain {}", alone.status.word()),
        passed: true,
    });

    // Daemon B joins: UP, 2 nodes READY, NO_GPU.
    run_ok(workload, b, &["sh", "-c", &start])
        .await
        .map_err(|err| format!("starting daemon B: {err}"))?;
    b_joins(workload, [a, b], limits, result).await?;
    result.workers.push(WorkerDetail {
        node: nodes[1].to_owned(),
        pod: b.clone(),
        detail: "daemon B joined: domain UP, 2/2 READY, version NO_GPU".to_owned(),
        passed: true,
    });

    // B terminated: the domain leaves UP, as a working ctl on A says.
    stop_b(workload, b).await?;
    let left = b_leaves(workload, a, limits, result).await?;
    result.workers.push(WorkerDetail {
        node: nodes[0].to_owned(),
        pod: a.clone(),
        detail: format!("daemon B terminated: {left}"),
        passed: true,
    });
    Ok(())
}

/// Checks both channels and writes both configs; returns the start command.
async fn prepare<W: Workload>(
    workload: &W,
    nodes: [&str; 2],
    pods: &[PodInfo; 2],
) -> Result<String, String> {
    let [a, b] = [&pods[0].name, &pods[1].name];
    for (node, pod) in nodes.iter().zip([a, b]) {
        if let Err(err) = run_ok(workload, pod, &["test", "-c", crate::names::CHANNEL0]).await {
            return Err(format!("{node}: NRI-injected IMEX channel missing: {err}"));
        }
    }
    let package = run_ok(workload, a, &["cat", imex::PACKAGE_CONFIG])
        .await
        .map_err(|err| format!("reading the package config: {err}"))?
        .stdout;
    let config = imex::render_config(&package);
    let nodes_file = imex::nodes_file(&[pods[0].ip.clone(), pods[1].ip.clone()]);
    let write = format!(
        "{CLEAN} && printf '%s' \"$1\" > {} && printf '%s' \"$2\" > {}",
        imex::CONFIG,
        imex::NODES,
    );
    for pod in [a, b] {
        run_ok(
            workload,
            pod,
            &["sh", "-c", &write, "sh", &config, &nodes_file],
        )
        .await
        .map_err(|err| format!("writing the IMEX config: {err}"))?;
    }
    Ok(format!(
        "nvidia-imex -c {} >{} 2>&1 & echo $! > {}",
        imex::CONFIG,
        imex::STDOUT,
        imex::PID
    ))
}

/// A wait of `limit` from now, polling every `limits.poll`, its progress
/// printed bare.
fn from_now(limit: Duration, limits: Limits) -> Wait<'static> {
    Wait {
        show: Show::Bare,
        since: Instant::now(),
        limit,
        every: limits.poll,
    }
}

/// Daemon A alone: `-q` READY within the budget, then the domain's state
/// (which must answer within the same budget).
async fn a_alone<W: Workload>(
    workload: &W,
    a: &str,
    limits: Limits,
    result: &mut ScenarioResult,
) -> Result<imex::Domain, String> {
    // The budget runs from the start exec's return: its own latency under
    // load is not the daemon's.
    let wait = from_now(limits.local_ready, limits);
    let ready = poll_until(&wait, || async {
        let q = query(workload, a).await;
        if matches!(&q, Poll::Answer(word) if imex::is_ready(word)) {
            return Probe::Done(());
        }
        let seen = match q {
            Poll::Answer(word) => format!("{:?}", word.trim()),
            Poll::Unreachable(err) => err,
        };
        if alive(workload, a).await {
            Probe::Quiet(seen)
        } else {
            Probe::GiveUp(seen)
        }
    })
    .await;
    if let Err(unmet) = ready {
        let tail = log_tail(workload, a).await;
        let why = if unmet.gave_up {
            format!("exited after {:.0}s", wait.since.elapsed().as_secs_f64())
        } else {
            format!(
                "not READY within {}s ({} polls)",
                limits.local_ready.as_secs(),
                unmet.polls
            )
        };
        return Err(format!(
            "daemon A {why} (last `nvidia-imex-ctl -q`: {}){tail}",
            unmet.last
        ));
    }
    result
        .timings
        .push(("daemon A READY".to_owned(), round(wait.since.elapsed())));
    // Alone, the domain must answer and not be UP.
    let alone = poll_until(&wait, || async {
        match domain(workload, a).await {
            Poll::Answer(state) => Probe::Done(state),
            Poll::Unreachable(err) => Probe::Quiet(err),
        }
    })
    .await;
    match alone {
        Ok(state) => Ok(state),
        Err(unmet) => {
            let tail = log_tail(workload, a).await;
            Err(format!(
                "daemon A alone: READY but the domain status is unreachable: {}{tail}",
                unmet.last
            ))
        }
    }
}

/// Daemon B started: the domain UP on A with 2 nodes READY and NO_GPU.
async fn b_joins<W: Workload>(
    workload: &W,
    [a, b]: [&str; 2],
    limits: Limits,
    result: &mut ScenarioResult,
) -> Result<(), String> {
    let wait = from_now(limits.domain_up, limits);
    let up = poll_until(&wait, || async {
        match domain(workload, a).await {
            Poll::Answer(state) if state.status == imex::DomainStatus::Up => Probe::Done(state),
            Poll::Answer(state) => Probe::Pending(format!("domain {}", state.status.word())),
            Poll::Unreachable(err) => Probe::Quiet(format!("unreachable: {err}")),
        }
    })
    .await;
    let up = match up {
        Ok(up) => up,
        Err(unmet) => {
            let tail_a = log_tail(workload, a).await;
            let tail_b = log_tail(workload, b).await;
            let last = unmet.last.strip_prefix("domain ").unwrap_or(&unmet.last);
            return Err(format!(
                "domain not UP within {}s after daemon B started (last {last}){tail_a}{tail_b}",
                limits.domain_up.as_secs()
            ));
        }
    };
    result.timings.push((
        "domain UP after B started".to_owned(),
        round(wait.since.elapsed()),
    ));
    if up.ready() != 2 || up.no_gpu() != 2 || up.nodes.len() != 2 {
        return Err(format!(
            "domain UP but {} of {} nodes READY and {} NO_GPU (want 2, 2)",
            up.ready(),
            up.nodes.len(),
            up.no_gpu()
        ));
    }
    Ok(())
}

/// Stops daemon B, which must exit within 10 s of SIGTERM.
async fn stop_b<W: Workload>(workload: &W, b: &str) -> Result<(), String> {
    let stopped = run_ok(workload, b, &["sh", "-c", STOP_DAEMON])
        .await
        .map_err(|err| format!("stopping daemon B: {err}"))?
        .stdout
        .trim()
        .to_owned();
    if stopped == "stopped" {
        return Ok(());
    }
    let tail = log_tail(workload, b).await;
    Err(format!(
        "daemon B did not exit within 10s of SIGTERM ({}){tail}",
        if stopped.is_empty() {
            "it was not running"
        } else {
            stopped.as_str()
        }
    ))
}

/// What a poll of A saw while the domain had not yet left UP.
#[derive(Debug, Clone, PartialEq, Eq)]
enum StillUp {
    /// A's ctl answered: the domain is UP.
    Up,
    /// A's ctl did not answer, with what it printed.
    Unreachable(String),
}

impl std::fmt::Display for StillUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StillUp::Up => f.write_str("UP"),
            StillUp::Unreachable(err) => f.write_str(err),
        }
    }
}

/// Daemon B stopped: the domain leaves UP on A (or A's `-q` leaves READY);
/// returns what was seen.
async fn b_leaves<W: Workload>(
    workload: &W,
    a: &str,
    limits: Limits,
    result: &mut ScenarioResult,
) -> Result<String, String> {
    let wait = from_now(limits.domain_down, limits);
    let left = poll_until(&wait, || async {
        match domain(workload, a).await {
            Poll::Answer(state) if state.status != imex::DomainStatus::Up => {
                Probe::Done(format!("domain {}", state.status.word()))
            }
            Poll::Answer(_) => Probe::Quiet(StillUp::Up),
            Poll::Unreachable(err) => match query(workload, a).await {
                Poll::Answer(word) if imex::q_word(&word).is_some_and(|it| it != "READY") => {
                    Probe::Done(format!("daemon A -q {}", word.trim()))
                }
                _ => Probe::Quiet(StillUp::Unreachable(err)),
            },
        }
    })
    .await;
    let left = left.map_err(|unmet| match unmet.last {
        StillUp::Unreachable(err) => format!(
            "after daemon B was terminated the domain status was unreachable for {}s, \
             so it was never seen leaving UP: {err}",
            limits.domain_down.as_secs()
        ),
        StillUp::Up => format!(
            "domain still UP {}s after daemon B was terminated",
            limits.domain_down.as_secs()
        ),
    })?;
    result.timings.push((
        "domain left UP after B stopped".to_owned(),
        round(wait.since.elapsed()),
    ));
    Ok(left)
}
