//! The three scenarios as state machines over a [`Workload`] (exec in the demo
//! workload pods) and a [`Runner`] (helm), so they run the same against the
//! real cluster and against scripted fakes in tests.
//!
//! - Scenario 1: in each worker's pod the NRI-injected channel node exists and
//!   check-fabric reports the worker's clique and the domain uuid, state
//!   completed, on every GPU.
//! - Scenario 2: two real nvidia-imex daemons in NO GPU mode form a domain;
//!   skipped (never passed) without the payload.
//! - Scenario 3: a `helm upgrade --reuse-values` to the rebind topology reaches
//!   every worker with no pod recycled, then the demo topology is restored.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

use crate::fabric::{self, Expected};
use crate::imex;
use crate::interrupt::Tracker;
use crate::k8s::{ExecOutput, PodInfo};
use crate::report::{round, Outcome, ScenarioResult, WorkerDetail};
use crate::runner::{Cmd, Runner};

/// Exec access to the demo workload pods.
#[allow(async_fn_in_trait)]
pub trait Workload {
    /// The running workload pod on a node (waits, bounded).
    async fn pod_on_node(&self, node: &str) -> anyhow::Result<PodInfo>;
    /// Runs a command in a workload pod.
    async fn exec(&self, pod: &str, argv: &[&str]) -> anyhow::Result<ExecOutput>;
    /// Uids of the workload and mock-stack pods, by name.
    async fn pod_uids(&self) -> anyhow::Result<BTreeMap<String, String>>;
}

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
const CLEAN: &str =
    "rm -rf /tmp/imex.cfg /tmp/nodes.cfg /tmp/nvidia-imex.log /tmp/imex.stdout /var/run/nvidia-imex";

/// How long one `nvidia-imex-ctl` may take before it counts as hung.
pub const CTL_LIMIT_SECS: u32 = 10;

/// Checks one worker once: channel node, check-fabric, identity.
async fn check_worker<W: Workload>(
    workload: &W,
    pod: &str,
    expected: &Expected,
    channel: bool,
) -> Result<String, String> {
    if channel {
        match workload
            .exec(pod, &["test", "-c", crate::names::CHANNEL0])
            .await
        {
            Ok(out) if out.code == 0 => {}
            Ok(out) if out.code < 0 => {
                return Err(format!(
                    "exec in pod {pod} reported no exit status ({}): is its node up?",
                    out.stderr.trim()
                ))
            }
            Ok(_) => {
                return Err(format!(
                    "{} is not a character device: the NRI plugin did not inject the IMEX channel",
                    crate::names::CHANNEL0
                ))
            }
            Err(err) => return Err(format!("{err:#}")),
        }
    }
    let out = match workload.exec(pod, &["check-fabric"]).await {
        Ok(out) => out,
        Err(err) => return Err(format!("{err:#}")),
    };
    if out.code != 0 {
        return Err(format!(
            "check-fabric exited {}: {}{}",
            out.code,
            out.stdout.trim(),
            out.stderr.trim()
        ));
    }
    let gpus =
        fabric::parse_text(&out.stdout).map_err(|err| format!("check-fabric output: {err}"))?;
    fabric::verify(&gpus, expected).map_err(|err| err.to_string())?;
    if channel {
        // The machine-readable form must agree with the text.
        let json = match workload.exec(pod, &["check-fabric", "--json"]).await {
            Ok(out) if out.code == 0 => out.stdout,
            Ok(out) => {
                return Err(format!(
                    "check-fabric --json exited {}: {}",
                    out.code,
                    out.stderr.trim()
                ))
            }
            Err(err) => return Err(format!("{err:#}")),
        };
        let from_json =
            fabric::parse_json(&json).map_err(|err| format!("check-fabric --json: {err}"))?;
        fabric::verify(&from_json, expected)
            .map_err(|err| format!("check-fabric --json: {err}"))?;
        if from_json.len() != gpus.len() {
            return Err(format!(
                "check-fabric --json lists {} GPUs, the text {}",
                from_json.len(),
                gpus.len()
            ));
        }
    }
    Ok(format!(
        "{n}/{n} GPUs have clique={} uuid={} state=completed",
        expected.clique,
        expected.uuid,
        n = gpus.len()
    ))
}

/// Scenario 1 over the workers and the identity each must report.
pub async fn scenario1<W: Workload>(
    workload: &W,
    expected: &[(String, Expected)],
) -> ScenarioResult {
    let started = Instant::now();
    let mut workers = Vec::new();
    let mut failures = Vec::new();
    for (node, want) in expected {
        let (pod, res) = match workload.pod_on_node(node).await {
            Ok(pod) => (
                pod.name.clone(),
                check_worker(workload, &pod.name, want, true).await,
            ),
            Err(err) => ("-".to_owned(), Err(format!("{err:#}"))),
        };
        match &res {
            Ok(detail) => eprintln!("    ✓ {node}: {detail}"),
            Err(err) => {
                eprintln!("    ✗ {node}: {err}");
                failures.push(format!("{node}: {err}"));
            }
        }
        workers.push(WorkerDetail {
            node: node.clone(),
            pod,
            passed: res.is_ok(),
            detail: res.unwrap_or_else(|err| err),
        });
    }
    let outcome = match failures.is_empty() {
        true => Outcome::Passed,
        false => Outcome::Failed(failures.join("; ")),
    };
    ScenarioResult {
        name: "scenario1".to_owned(),
        outcome,
        seconds: round(started.elapsed()),
        workers,
        timings: vec![],
    }
}

/// Polls every worker until each reports `expected`; returns per-worker
/// details and the time from `since` to the last verified worker.
async fn converge<W: Workload>(
    workload: &W,
    pods: &[(String, String)],
    expected: &dyn Fn(&str) -> Expected,
    since: Instant,
    limits: Limits,
) -> (Vec<WorkerDetail>, Result<Duration, String>) {
    let deadline = since + limits.converge;
    let mut done: BTreeMap<String, (String, Duration)> = BTreeMap::new();
    let mut last_error: BTreeMap<String, String> = BTreeMap::new();
    loop {
        for (node, pod) in pods {
            if done.contains_key(node) {
                continue;
            }
            match check_worker(workload, pod, &expected(node), false).await {
                Ok(detail) => {
                    eprintln!(
                        "    ✓ {node}: {detail} ({:.1}s)",
                        since.elapsed().as_secs_f64()
                    );
                    done.insert(node.clone(), (detail, since.elapsed()));
                }
                Err(err) => {
                    last_error.insert(node.clone(), err);
                }
            }
        }
        if done.len() == pods.len() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(limits.poll.min(Duration::from_millis(250))).await;
    }
    let details = pods
        .iter()
        .map(|(node, pod)| match done.get(node) {
            Some((detail, took)) => WorkerDetail {
                node: node.clone(),
                pod: pod.clone(),
                detail: format!("{detail} after {:.1}s", took.as_secs_f64()),
                passed: true,
            },
            None => WorkerDetail {
                node: node.clone(),
                pod: pod.clone(),
                detail: last_error.get(node).cloned().unwrap_or_default(),
                passed: false,
            },
        })
        .collect();
    if done.len() == pods.len() {
        let last = done
            .values()
            .map(|(_, took)| *took)
            .max()
            .unwrap_or_default();
        return (details, Ok(last));
    }
    let missing: Vec<String> = pods
        .iter()
        .filter(|(node, _)| !done.contains_key(node))
        .map(|(node, _)| {
            format!(
                "{node}: {}",
                last_error.get(node).map_or("", String::as_str)
            )
        })
        .collect();
    (
        details,
        Err(format!(
            "not converged within {}s: {}",
            limits.converge.as_secs(),
            missing.join("; ")
        )),
    )
}

/// The topologies of scenario 3, as Helm values fragments.
#[derive(Debug, Clone)]
pub struct Rebind {
    /// The chart path.
    pub chart: String,
    /// The kube context helm uses.
    pub context: String,
    /// The rebind topology values (clique 99, uuid …00ff).
    pub rebind_values: String,
    /// The demo topology values, restored afterwards.
    pub demo_values: String,
    /// What each worker reports under the demo topology.
    pub demo_expected: Vec<(String, Expected)>,
}

/// Scenario 3: rebind live, verify without pod recycling, restore.
pub async fn scenario3<W: Workload, R: Runner>(
    workload: &W,
    runner: &R,
    rebind: &Rebind,
    scratch: &Path,
    tracker: &Tracker,
    limits: Limits,
) -> ScenarioResult {
    let started = Instant::now();
    let mut result = ScenarioResult {
        name: "scenario3".to_owned(),
        outcome: Outcome::Passed,
        seconds: 0.0,
        workers: vec![],
        timings: vec![],
    };
    let outcome = scenario3_inner(
        workload,
        runner,
        rebind,
        scratch,
        tracker,
        limits,
        &mut result,
    )
    .await;
    tracker.restore_topology(None);
    result.outcome = match outcome {
        Ok(()) => Outcome::Passed,
        Err(reason) => Outcome::Failed(reason),
    };
    result.seconds = round(started.elapsed());
    result
}

async fn scenario3_inner<W: Workload, R: Runner>(
    workload: &W,
    runner: &R,
    rebind: &Rebind,
    scratch: &Path,
    tracker: &Tracker,
    limits: Limits,
    result: &mut ScenarioResult,
) -> Result<(), String> {
    let mut pods = Vec::new();
    for (node, _) in &rebind.demo_expected {
        let pod = workload
            .pod_on_node(node)
            .await
            .map_err(|err| format!("{node}: {err:#}"))?;
        pods.push((node.clone(), pod.name));
    }
    let before = workload
        .pod_uids()
        .await
        .map_err(|err| format!("{err:#}"))?;

    let rebind_file = scratch.join("rebind-topology.yaml");
    let demo_file = scratch.join("demo-topology.yaml");
    std::fs::write(&rebind_file, &rebind.rebind_values)
        .map_err(|err| format!("writing {}: {err}", rebind_file.display()))?;
    std::fs::write(&demo_file, &rebind.demo_values)
        .map_err(|err| format!("writing {}: {err}", demo_file.display()))?;

    let upgrade = |file: &Path| -> Result<(), String> {
        let args = crate::plan::helm_topology_args(
            &rebind.chart,
            &rebind.context,
            &file.to_string_lossy(),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        runner
            .check(&Cmd::new("helm", &args))
            .map(|_| ())
            .map_err(|err| format!("{err:#}"))
    };

    let rebound = Expected {
        clique: crate::names::REBIND_CLIQUE,
        uuid: crate::names::REBIND_UUID.to_owned(),
    };
    eprintln!("    helm upgrade --reuse-values with the rebind topology (clique 99, uuid …00ff)");
    tracker.restore_topology(Some(crate::plan::helm_topology_args(
        &rebind.chart,
        &rebind.context,
        &demo_file.to_string_lossy(),
    )));
    let since = Instant::now();
    upgrade(&rebind_file)?;
    let helm_took = since.elapsed();
    let (details, converged) = converge(workload, &pods, &|_| rebound.clone(), since, limits).await;
    result.workers = details;
    result
        .timings
        .push(("rebind helm upgrade".to_owned(), round(helm_took)));
    let rebind_res = converged.map(|took| {
        result.timings.push((
            "rebind: helm upgrade to last verified worker".to_owned(),
            round(took),
        ));
    });

    let after = workload.pod_uids().await.map_err(|err| format!("{err:#}"));
    let recycled = match after {
        Ok(after) if after == before => Ok(()),
        Ok(after) => Err(format!(
            "pods were recycled during the rebind: before {before:?}, after {after:?}"
        )),
        Err(err) => Err(err),
    };

    eprintln!("    restoring the demo topology");
    let since = Instant::now();
    let restore = upgrade(&demo_file);
    let demo_of = |node: &str| {
        rebind
            .demo_expected
            .iter()
            .find(|(it, _)| it == node)
            .map(|(_, want)| want.clone())
            .unwrap_or(Expected {
                clique: u32::MAX,
                uuid: String::new(),
            })
    };
    let restored = match restore {
        Ok(()) => {
            let (_, converged) = converge(workload, &pods, &demo_of, since, limits).await;
            converged.map(|took| {
                result.timings.push((
                    "restore: helm upgrade to last verified worker".to_owned(),
                    round(took),
                ));
            })
        }
        Err(err) => Err(err),
    };
    rebind_res.map_err(|err| format!("rebind: {err}"))?;
    recycled?;
    restored.map_err(|err| format!("restoring the demo topology: {err}"))
}

/// Which nvidia-imex the workload pods run, read from the daemon itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Daemon {
    /// NVIDIA's (no test-double marker in the binary).
    Nvidia,
    /// The IMEX test double (`crates/imex-double`).
    TestDouble,
}

/// Scenario 2's two pods (clique 0's first two workers).
pub async fn scenario2<W: Workload>(
    workload: &W,
    nodes: [&str; 2],
    tracker: &Tracker,
    limits: Limits,
) -> ScenarioResult {
    let started = Instant::now();
    let mut result = ScenarioResult {
        name: "scenario2".to_owned(),
        outcome: Outcome::Passed,
        seconds: 0.0,
        workers: vec![],
        timings: vec![],
    };
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
    match workload
        .exec(&names[0], &["test", "-x", imex::REAL_DAEMON])
        .await
    {
        Ok(out) if out.code == 0 => {}
        Ok(_) => {
            return finish(
                result,
                started,
                Outcome::Skipped(format!(
                    "no nvidia-imex payload: {} is absent from the workload image; rerun with \
                     `cargo xtask scenario2 --imex <NVIDIA's imex-linux-x86_64-595.*-archive.tar.xz \
                     or an extracted tree>` (it builds and loads the workload image with it)",
                    imex::REAL_DAEMON
                )),
            )
        }
        Err(err) => {
            return finish(
                result,
                started,
                Outcome::Failed(format!("{}: {err:#}", nodes[0])),
            )
        }
    }
    let daemon = match workload
        .exec(
            &names[0],
            &["grep", "-q", imex_double::MARKER, imex::REAL_DAEMON],
        )
        .await
    {
        Ok(out) if out.code == 0 => Daemon::TestDouble,
        Ok(out) if out.code == 1 => Daemon::Nvidia,
        Ok(out) => {
            return finish(
                result,
                started,
                Outcome::Failed(format!(
                    "cannot tell which nvidia-imex {} is: grep exited {}: {}",
                    imex::REAL_DAEMON,
                    out.code,
                    out.stderr.trim()
                )),
            )
        }
        Err(err) => {
            return finish(
                result,
                started,
                Outcome::Failed(format!("{}: {err:#}", nodes[0])),
            )
        }
    };
    if daemon == Daemon::TestDouble {
        eprintln!("    the workload image carries the IMEX TEST DOUBLE, not NVIDIA's nvidia-imex");
    }
    tracker.imex_pods(&names);
    let outcome = scenario2_inner(workload, nodes, &pods, limits, &mut result).await;
    stop_daemons(workload, &names).await;
    tracker.imex_pods(&[]);
    let outcome = match (outcome, daemon) {
        (Outcome::Passed, Daemon::TestDouble) => Outcome::PassedTestDouble,
        (Outcome::Failed(reason), Daemon::TestDouble) => {
            Outcome::Failed(format!("(against the IMEX test double) {reason}"))
        }
        (other, _) => other,
    };
    finish(result, started, outcome)
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

async fn scenario2_inner<W: Workload>(
    workload: &W,
    nodes: [&str; 2],
    pods: &[PodInfo; 2],
    limits: Limits,
    result: &mut ScenarioResult,
) -> Outcome {
    let [a, b] = [&pods[0].name, &pods[1].name];
    for (node, pod) in nodes.iter().zip([a, b]) {
        if let Err(err) = run_ok(workload, pod, &["test", "-c", crate::names::CHANNEL0]).await {
            return Outcome::Failed(format!("{node}: NRI-injected IMEX channel missing: {err}"));
        }
    }
    let package = match run_ok(workload, a, &["cat", imex::PACKAGE_CONFIG]).await {
        Ok(out) => out.stdout,
        Err(err) => return Outcome::Failed(format!("reading the package config: {err}")),
    };
    let config = imex::render_config(&package);
    let nodes_file = imex::nodes_file(&[pods[0].ip.clone(), pods[1].ip.clone()]);
    let write = format!(
        "{CLEAN} && printf '%s' \"$1\" > {} && printf '%s' \"$2\" > {}",
        imex::CONFIG,
        imex::NODES,
    );
    for pod in [a, b] {
        if let Err(err) = run_ok(
            workload,
            pod,
            &["sh", "-c", &write, "sh", &config, &nodes_file],
        )
        .await
        {
            return Outcome::Failed(format!("writing the IMEX config: {err}"));
        }
    }
    let start = format!(
        "nvidia-imex -c {} >{} 2>&1 & echo $! > {}",
        imex::CONFIG,
        imex::STDOUT,
        imex::PID
    );

    // Daemon A alone: locally READY, domain not UP.
    if let Err(err) = run_ok(workload, a, &["sh", "-c", &start]).await {
        return Outcome::Failed(format!("starting daemon A: {err}"));
    }
    // The budget runs from the start exec's return: its own latency under
    // load is not the daemon's.
    let since = Instant::now();
    let deadline = since + limits.local_ready;
    let mut polls = 0u32;
    loop {
        polls += 1;
        let q = query(workload, a).await;
        if matches!(&q, Poll::Answer(word) if imex::is_ready(word)) {
            break;
        }
        let dead = !alive(workload, a).await;
        if dead || Instant::now() >= deadline {
            let seen = match q {
                Poll::Answer(word) => format!("{:?}", word.trim()),
                Poll::Unreachable(err) => err,
            };
            let tail = log_tail(workload, a).await;
            let why = match dead {
                true => format!("exited after {:.0}s", since.elapsed().as_secs_f64()),
                false => format!(
                    "not READY within {}s ({polls} polls)",
                    limits.local_ready.as_secs()
                ),
            };
            return Outcome::Failed(format!(
                "daemon A {why} (last `nvidia-imex-ctl -q`: {seen}){tail}"
            ));
        }
        tokio::time::sleep(limits.poll).await;
    }
    result
        .timings
        .push(("daemon A READY".to_owned(), round(since.elapsed())));
    // Alone, the domain must answer and not be UP.
    let alone = loop {
        match domain(workload, a).await {
            Poll::Answer(state) => break state,
            Poll::Unreachable(err) if Instant::now() >= deadline => {
                let tail = log_tail(workload, a).await;
                return Outcome::Failed(format!(
                    "daemon A alone: READY but the domain status is unreachable: {err}{tail}"
                ));
            }
            Poll::Unreachable(_) => tokio::time::sleep(limits.poll).await,
        }
    };
    if alone.status == imex::DomainStatus::Up {
        return Outcome::Failed(
            "daemon A alone: the domain is UP with one of two daemons".to_owned(),
        );
    }
    result.workers.push(WorkerDetail {
        node: nodes[0].to_owned(),
        pod: a.clone(),
        detail: format!("daemon A alone: -q READY, domain {}", alone.status.word()),
        passed: true,
    });

    // Daemon B joins: UP, 2 nodes READY, NO_GPU.
    if let Err(err) = run_ok(workload, b, &["sh", "-c", &start]).await {
        return Outcome::Failed(format!("starting daemon B: {err}"));
    }
    let since = Instant::now();
    let deadline = since + limits.domain_up;
    let mut last = String::from("no answer yet");
    let up = loop {
        match domain(workload, a).await {
            Poll::Answer(state) if state.status == imex::DomainStatus::Up => break state,
            Poll::Answer(state) => {
                let seen = state.status.word().to_owned();
                if seen != last {
                    eprintln!("    domain {seen} ({:.0}s)", since.elapsed().as_secs_f64());
                }
                last = seen;
            }
            Poll::Unreachable(err) => last = format!("unreachable: {err}"),
        }
        if Instant::now() >= deadline {
            let tail_a = log_tail(workload, a).await;
            let tail_b = log_tail(workload, b).await;
            return Outcome::Failed(format!(
                "domain not UP within {}s after daemon B started (last {last}){tail_a}{tail_b}",
                limits.domain_up.as_secs()
            ));
        }
        tokio::time::sleep(limits.poll).await;
    };
    result.timings.push((
        "domain UP after B started".to_owned(),
        round(since.elapsed()),
    ));
    if up.ready() != 2 || up.no_gpu() != 2 || up.nodes.len() != 2 {
        return Outcome::Failed(format!(
            "domain UP but {} of {} nodes READY and {} NO_GPU (want 2, 2)",
            up.ready(),
            up.nodes.len(),
            up.no_gpu()
        ));
    }
    result.workers.push(WorkerDetail {
        node: nodes[1].to_owned(),
        pod: b.clone(),
        detail: "daemon B joined: domain UP, 2/2 READY, version NO_GPU".to_owned(),
        passed: true,
    });

    // B terminated: the domain leaves UP, as a working ctl on A says.
    let stopped = match run_ok(workload, b, &["sh", "-c", STOP_DAEMON]).await {
        Ok(out) => out.stdout.trim().to_owned(),
        Err(err) => return Outcome::Failed(format!("stopping daemon B: {err}")),
    };
    if stopped != "stopped" {
        let tail = log_tail(workload, b).await;
        return Outcome::Failed(format!(
            "daemon B did not exit within 10s of SIGTERM ({}){tail}",
            if stopped.is_empty() {
                "it was not running"
            } else {
                stopped.as_str()
            }
        ));
    }
    let since = Instant::now();
    let deadline = since + limits.domain_down;
    let mut last_unreachable: Option<String> = None;
    loop {
        let left = match domain(workload, a).await {
            Poll::Answer(state) if state.status != imex::DomainStatus::Up => {
                Some(format!("domain {}", state.status.word()))
            }
            Poll::Answer(_) => {
                last_unreachable = None;
                None
            }
            Poll::Unreachable(err) => match query(workload, a).await {
                Poll::Answer(word) if imex::q_word(&word).is_some_and(|it| it != "READY") => {
                    Some(format!("daemon A -q {}", word.trim()))
                }
                _ => {
                    last_unreachable = Some(err);
                    None
                }
            },
        };
        if let Some(left) = left {
            result.workers.push(WorkerDetail {
                node: nodes[0].to_owned(),
                pod: a.clone(),
                detail: format!("daemon B terminated: {left}"),
                passed: true,
            });
            break;
        }
        if Instant::now() >= deadline {
            return Outcome::Failed(match last_unreachable {
                Some(err) => format!(
                    "after daemon B was terminated the domain status was unreachable for {}s, \
                     so it was never seen leaving UP: {err}",
                    limits.domain_down.as_secs()
                ),
                None => format!(
                    "domain still UP {}s after daemon B was terminated",
                    limits.domain_down.as_secs()
                ),
            });
        }
        tokio::time::sleep(limits.poll).await;
    }
    result.timings.push((
        "domain left UP after B stopped".to_owned(),
        round(since.elapsed()),
    ));
    Outcome::Passed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::FakeRunner;
    use std::sync::Mutex;

    const DEMO: &str = "00000000-0000-0000-0000-0000000000ab";

    fn check_fabric(clique: u32, uuid: &str) -> String {
        let mut out = String::from("Discovered 4 GPU(s)\n");
        for idx in 0..4 {
            out.push_str(&format!(
                "GPU {idx} (GPU-{idx})\n  clusterUuid : {uuid}\n  cliqueId    : {clique}\n  state       : completed (3)\n"
            ));
        }
        out
    }

    /// A simulated cluster: per-node identity, channel presence, and two
    /// nvidia-imex daemons whose domain follows which ones run.
    #[derive(Default)]
    struct Sim {
        identity: Mutex<BTreeMap<String, (u32, String)>>,
        no_channel: Vec<String>,
        payload: bool,
        daemons: Mutex<BTreeMap<String, bool>>,
        /// B's daemon never connects (policy blocks it).
        blocked: bool,
        /// The domain never leaves UP once it was UP.
        sticky: bool,
        ever_up: Mutex<bool>,
        /// The payload is the IMEX test double (its marker is in the daemon).
        double: bool,
        /// The daemon exits at once (a bad config, the shim's exit 127).
        dies: bool,
        /// Once daemon B is stopped, every ctl gives this.
        ctl_fault_after_b_stops: Option<ExecOutput>,
        b_stopped: Mutex<bool>,
        execs: Mutex<Vec<String>>,
        recycle_on_upgrade: bool,
    }

    fn ok(stdout: &str) -> anyhow::Result<ExecOutput> {
        Ok(ExecOutput {
            code: 0,
            stdout: stdout.to_owned(),
            stderr: String::new(),
        })
    }

    fn code(code: i32) -> anyhow::Result<ExecOutput> {
        Ok(ExecOutput {
            code,
            ..ExecOutput::default()
        })
    }

    impl Workload for Sim {
        async fn pod_on_node(&self, node: &str) -> anyhow::Result<PodInfo> {
            Ok(PodInfo {
                name: format!("pod-{node}"),
                ip: format!("10.0.0.{}", node.len()),
                uid: format!("uid-{node}"),
            })
        }

        async fn exec(&self, pod: &str, argv: &[&str]) -> anyhow::Result<ExecOutput> {
            self.execs
                .lock()
                .expect("lock")
                .push(format!("{pod}: {}", argv.join(" ")));
            let node = pod.trim_start_matches("pod-").to_owned();
            let running = |pod: &str| {
                self.daemons
                    .lock()
                    .expect("lock")
                    .get(pod)
                    .copied()
                    .unwrap_or(false)
            };
            match argv {
                ["test", "-c", _] => code(if self.no_channel.contains(&node) { 1 } else { 0 }),
                ["test", "-x", _] => code(if self.payload { 0 } else { 1 }),
                ["check-fabric"] => {
                    let identity = self.identity.lock().expect("lock");
                    let (clique, uuid) = identity.get(&node).cloned().unwrap_or((0, String::new()));
                    ok(&check_fabric(clique, &uuid))
                }
                ["check-fabric", "--json"] => {
                    let identity = self.identity.lock().expect("lock");
                    let (clique, uuid) = identity.get(&node).cloned().unwrap_or((0, String::new()));
                    let gpus: Vec<String> = (0..4)
                        .map(|idx| {
                            format!(
                                r#"{{"index":{idx},"uuid":"GPU-{idx}","clusterUuid":"{uuid}","cliqueId":{clique},"state":3,"stateName":"completed"}}"#
                            )
                        })
                        .collect();
                    ok(&format!(r#"{{"driverVersion":"580.65.06","nodeName":"{node}","gpus":[{}]}}"#, gpus.join(",")))
                }
                ["cat", _] => ok("DAEMONIZE=1\nIMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\nLOG_FILE_NAME=/var/log/nvidia-imex.log\n"),
                ["grep", "-q", _, _] => code(if self.double { 0 } else { 1 }),
                ["sh", "-c", script, ..] if script.starts_with("rm -rf") => ok(""),
                ["sh", "-c", script] if script.starts_with("nvidia-imex -c") => {
                    if !self.dies {
                        self.daemons.lock().expect("lock").insert(pod.to_owned(), true);
                    }
                    ok("")
                }
                ["sh", "-c", script] if script.starts_with("alive()") => {
                    let was = self.daemons.lock().expect("lock").insert(pod.to_owned(), false);
                    if was == Some(true) && pod == "pod-w2" {
                        *self.b_stopped.lock().expect("lock") = true;
                    }
                    ok(if was == Some(true) { "stopped\n" } else { "" })
                }
                ["sh", "-c", script] if script.starts_with("p=$(cat") => {
                    code(if running(pod) { 0 } else { 1 })
                }
                ["timeout", _, "nvidia-imex-ctl", _, _, rest @ ..] => {
                    if *self.b_stopped.lock().expect("lock") {
                        if let Some(fault) = &self.ctl_fault_after_b_stops {
                            return Ok(fault.clone());
                        }
                    }
                    match rest {
                        ["-q"] => ok(if running(pod) { "READY\n" } else { "UNAVAILABLE\n" }),
                        ["-N", "-j"] => {
                            if !running(pod) {
                                return code(255);
                            }
                            let daemons = self.daemons.lock().expect("lock");
                            let both = daemons.values().filter(|it| **it).count() == 2 && !self.blocked;
                            let mut ever_up = self.ever_up.lock().expect("lock");
                            *ever_up |= both;
                            let was_up = self.sticky && *ever_up;
                            let (status, b) = if both || was_up {
                                ("UP", r#"{"status":"READY","host":"b","version":"NO_GPU"}"#)
                            } else {
                                ("DEGRADED", r#"{"status":"UNAVAILABLE","host":"b","version":""}"#)
                            };
                            ok(&format!(
                                r#"{{"nodes":{{"0":{{"status":"READY","host":"a","version":"NO_GPU"}},"1":{b}}},"timestamp":"t","status":"{status}"}}"#
                            ))
                        }
                        other => anyhow::bail!("unexpected ctl {other:?}"),
                    }
                }
                ["tail", ..] => ok("imex log line\n"),
                other => anyhow::bail!("unexpected exec {other:?}"),
            }
        }

        async fn pod_uids(&self) -> anyhow::Result<BTreeMap<String, String>> {
            let generation = if self.recycle_on_upgrade
                && self
                    .identity
                    .lock()
                    .expect("lock")
                    .values()
                    .any(|it| it.0 == 99)
            {
                "new"
            } else {
                "old"
            };
            Ok(BTreeMap::from([(
                "pod-w".to_owned(),
                generation.to_owned(),
            )]))
        }
    }

    fn demo_expected() -> Vec<(String, Expected)> {
        [("w", 0), ("w2", 0), ("w3", 1), ("w4", 1)]
            .iter()
            .map(|(node, clique)| {
                (
                    (*node).to_owned(),
                    Expected {
                        clique: *clique,
                        uuid: DEMO.to_owned(),
                    },
                )
            })
            .collect()
    }

    fn demo_sim() -> Sim {
        let sim = Sim::default();
        *sim.identity.lock().expect("lock") = demo_expected()
            .into_iter()
            .map(|(node, want)| (node, (want.clique, want.uuid)))
            .collect();
        sim
    }

    #[tokio::test]
    async fn scenario1_passes_on_the_demo_identities() {
        let sim = demo_sim();
        let result = scenario1(&sim, &demo_expected()).await;
        assert_eq!(result.outcome, Outcome::Passed);
        assert_eq!(result.workers.len(), 4);
        assert!(
            result.workers[2].detail.contains("4/4 GPUs have clique=1"),
            "{:?}",
            result.workers
        );
    }

    #[tokio::test]
    async fn scenario1_names_the_failing_workers() {
        let mut sim = demo_sim();
        sim.no_channel = vec!["w2".to_owned()];
        sim.identity
            .lock()
            .expect("lock")
            .insert("w4".to_owned(), (0, DEMO.to_owned()));
        let result = scenario1(&sim, &demo_expected()).await;
        let Outcome::Failed(reason) = &result.outcome else {
            panic!("must fail: {result:?}");
        };
        assert!(
            reason
                .contains("w2: /dev/nvidia-caps-imex-channels/channel0 is not a character device"),
            "{reason}"
        );
        assert!(reason.contains("w4: GPU 0 cliqueId 0 (want 1)"), "{reason}");
        assert!(!reason.contains("w3"), "{reason}");
    }

    /// A runner whose helm upgrades change the simulated identities, as the
    /// stager's live restage does.
    struct HelmSim<'a> {
        sim: &'a Sim,
        fake: FakeRunner,
    }

    impl Runner for HelmSim<'_> {
        fn run(&self, cmd: &Cmd) -> anyhow::Result<crate::runner::Output> {
            let out = self.fake.run(cmd)?;
            let file = cmd.args.last().cloned().unwrap_or_default();
            let mut identity = self.sim.identity.lock().expect("lock");
            if file.ends_with("rebind-topology.yaml") {
                identity
                    .values_mut()
                    .for_each(|it| *it = (99, crate::names::REBIND_UUID.to_owned()));
            } else {
                *identity = demo_expected()
                    .into_iter()
                    .map(|(node, want)| (node, (want.clique, want.uuid)))
                    .collect();
            }
            Ok(out)
        }
    }

    fn rebind() -> Rebind {
        Rebind {
            chart: "chart".to_owned(),
            context: "kind-c".to_owned(),
            rebind_values: "topology: rebind\n".to_owned(),
            demo_values: "topology: demo\n".to_owned(),
            demo_expected: demo_expected(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn scenario3_rebinds_without_recycling_and_restores() {
        let sim = demo_sim();
        let runner = HelmSim {
            sim: &sim,
            fake: FakeRunner::default(),
        };
        runner.fake.expect("helm upgrade nvml-mock chart --kube-context kind-c --namespace mokka --reuse-values -f", true, "");
        runner.fake.expect("helm upgrade nvml-mock chart --kube-context kind-c --namespace mokka --reuse-values -f", true, "");
        let dir = tempfile::tempdir().expect("tempdir");
        let result = scenario3(
            &sim,
            &runner,
            &rebind(),
            dir.path(),
            &Tracker::default(),
            Limits::default(),
        )
        .await;
        assert_eq!(result.outcome, Outcome::Passed, "{result:?}");
        let seen = runner.fake.seen();
        assert!(
            seen[0].ends_with("rebind-topology.yaml") && seen[1].ends_with("demo-topology.yaml"),
            "{seen:?}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("rebind-topology.yaml")).expect("file"),
            "topology: rebind\n"
        );
        assert!(
            result
                .workers
                .iter()
                .all(|it| it.detail.contains("clique=99")),
            "{:?}",
            result.workers
        );
        assert!(result
            .timings
            .iter()
            .any(|(name, _)| name == "rebind: helm upgrade to last verified worker"));
        // The restore really happened.
        assert_eq!(sim.identity.lock().expect("lock")["w3"].0, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn scenario3_fails_when_pods_are_recycled_and_still_restores() {
        let mut sim = demo_sim();
        sim.recycle_on_upgrade = true;
        let runner = HelmSim {
            sim: &sim,
            fake: FakeRunner::default(),
        };
        runner
            .fake
            .expect("helm upgrade", true, "")
            .expect("helm upgrade", true, "");
        let dir = tempfile::tempdir().expect("tempdir");
        let result = scenario3(
            &sim,
            &runner,
            &rebind(),
            dir.path(),
            &Tracker::default(),
            Limits::default(),
        )
        .await;
        let Outcome::Failed(reason) = &result.outcome else {
            panic!("must fail: {result:?}");
        };
        assert!(reason.contains("pods were recycled"), "{reason}");
        assert_eq!(
            runner.fake.remaining(),
            0,
            "the demo topology must be restored"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn scenario3_times_out_when_the_topology_never_arrives() {
        let sim = demo_sim();
        let runner = FakeRunner::default();
        runner
            .expect("helm upgrade", true, "")
            .expect("helm upgrade", true, "");
        let dir = tempfile::tempdir().expect("tempdir");
        let started = Instant::now();
        let result = scenario3(
            &sim,
            &runner,
            &rebind(),
            dir.path(),
            &Tracker::default(),
            Limits::default(),
        )
        .await;
        let Outcome::Failed(reason) = &result.outcome else {
            panic!("must fail: {result:?}");
        };
        assert!(
            reason.starts_with("rebind: not converged within 60s: w: GPU 0 clusterUuid"),
            "{reason}"
        );
        assert!(started.elapsed() >= Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn scenario2_walks_the_three_transitions() {
        let mut sim = demo_sim();
        sim.payload = true;
        let tracker = Tracker::default();
        let result = scenario2(&sim, ["w", "w2"], &tracker, Limits::default()).await;
        assert_eq!(result.outcome, Outcome::Passed, "{result:?}");
        let details: Vec<&str> = result.workers.iter().map(|it| it.detail.as_str()).collect();
        assert_eq!(
            details,
            [
                "daemon A alone: -q READY, domain DEGRADED",
                "daemon B joined: domain UP, 2/2 READY, version NO_GPU",
                "daemon B terminated: domain DEGRADED"
            ]
        );
        assert!(
            tracker.snapshot().imex_pods.is_empty(),
            "daemons stopped, nothing left to clean"
        );
        assert!(
            !sim.daemons.lock().expect("lock").values().any(|it| *it),
            "no daemon left running"
        );
        let execs = sim.execs.lock().expect("lock").clone();
        let config_write = execs
            .iter()
            .find(|it| it.contains("printf"))
            .expect("config written");
        assert!(
            config_write.contains("DAEMONIZE=0") && config_write.contains("10.0.0.1\n10.0.0.2"),
            "{config_write}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn scenario2_is_skipped_without_the_payload() {
        let sim = demo_sim();
        let result = scenario2(&sim, ["w", "w2"], &Tracker::default(), Limits::default()).await;
        let Outcome::Skipped(reason) = &result.outcome else {
            panic!("must be skipped: {result:?}");
        };
        assert!(
            reason.contains("no nvidia-imex payload")
                && reason.contains("`cargo xtask scenario2 --imex <"),
            "{reason}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn scenario2_times_out_with_the_log_tails_and_cleans_up() {
        let mut sim = demo_sim();
        sim.payload = true;
        sim.blocked = true;
        let started = Instant::now();
        let result = scenario2(&sim, ["w", "w2"], &Tracker::default(), Limits::default()).await;
        let Outcome::Failed(reason) = &result.outcome else {
            panic!("must fail: {result:?}");
        };
        assert!(
            reason.contains("domain not UP within 240s after daemon B started (last DEGRADED)"),
            "{reason}"
        );
        assert!(
            reason.contains("last lines of /tmp/nvidia-imex.log in pod-w:"),
            "{reason}"
        );
        assert!(started.elapsed() >= Duration::from_secs(240));
        assert!(
            !sim.daemons.lock().expect("lock").values().any(|it| *it),
            "daemons stopped after failure"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn scenario2_fails_when_the_domain_ignores_a_dead_peer() {
        let mut sim = demo_sim();
        sim.payload = true;
        sim.sticky = true;
        let result = scenario2(&sim, ["w", "w2"], &Tracker::default(), Limits::default()).await;
        let Outcome::Failed(reason) = &result.outcome else {
            panic!("must fail: {result:?}");
        };
        assert!(
            reason.contains("domain still UP 60s after daemon B was terminated"),
            "{reason}"
        );
    }

    fn after_b_stops(fault: ExecOutput) -> Sim {
        let mut sim = demo_sim();
        sim.payload = true;
        sim.ctl_fault_after_b_stops = Some(fault);
        sim
    }

    #[tokio::test(start_paused = true)]
    async fn scenario2_fails_with_the_output_of_a_hung_ctl_after_b_stops() {
        let sim = after_b_stops(ExecOutput {
            code: 143,
            stdout: String::new(),
            stderr: "Terminated".to_owned(),
        });
        let result = scenario2(&sim, ["w", "w2"], &Tracker::default(), Limits::default()).await;
        let Outcome::Failed(reason) = &result.outcome else {
            panic!("a hung ctl must not count as the domain leaving UP: {result:?}");
        };
        assert!(
            reason.contains("the domain status was unreachable")
                && reason.contains("did not finish within 10s (killed)")
                && reason.contains("stderr: \"Terminated\""),
            "{reason}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn scenario2_fails_with_the_output_of_a_failing_or_garbled_ctl() {
        let failing = after_b_stops(ExecOutput {
            code: 1,
            stdout: String::new(),
            stderr: "nvidia-imex-ctl: injected failure".to_owned(),
        });
        let result = scenario2(
            &failing,
            ["w", "w2"],
            &Tracker::default(),
            Limits::default(),
        )
        .await;
        let Outcome::Failed(reason) = &result.outcome else {
            panic!("must fail: {result:?}");
        };
        assert!(
            reason.contains("exited 1") && reason.contains("injected failure"),
            "{reason}"
        );
        let garbled = after_b_stops(ExecOutput {
            code: 0,
            stdout: "garbage, not JSON\n".to_owned(),
            stderr: String::new(),
        });
        let result = scenario2(
            &garbled,
            ["w", "w2"],
            &Tracker::default(),
            Limits::default(),
        )
        .await;
        let Outcome::Failed(reason) = &result.outcome else {
            panic!("must fail: {result:?}");
        };
        assert!(
            reason.contains("printed not the -N -j document")
                && reason.contains("garbage, not JSON"),
            "{reason}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn scenario2_against_the_double_is_named_so() {
        let mut sim = demo_sim();
        sim.payload = true;
        sim.double = true;
        let result = scenario2(&sim, ["w", "w2"], &Tracker::default(), Limits::default()).await;
        assert_eq!(result.outcome, Outcome::PassedTestDouble, "{result:?}");
        let execs = sim.execs.lock().expect("lock").clone();
        assert!(
            execs
                .iter()
                .any(|it| it.contains("grep -q cdsim-imex-test-double")),
            "{execs:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn scenario2_reports_an_early_exit_with_the_daemon_stdout() {
        let mut sim = demo_sim();
        sim.payload = true;
        sim.dies = true;
        let started = Instant::now();
        let result = scenario2(&sim, ["w", "w2"], &Tracker::default(), Limits::default()).await;
        let Outcome::Failed(reason) = &result.outcome else {
            panic!("must fail: {result:?}");
        };
        assert!(reason.starts_with("daemon A exited after 0s"), "{reason}");
        assert!(
            reason.contains("last lines of /tmp/imex.stdout in pod-w:"),
            "{reason}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no wait for a dead daemon"
        );
    }

    #[test]
    fn the_stop_waits_for_the_exit_and_the_run_starts_clean() {
        assert!(STOP_DAEMON.contains("kill -TERM") && STOP_DAEMON.contains("while alive"));
        assert!(STOP_DAEMON.find("while alive") < STOP_DAEMON.find("rm -f /tmp/imex.pid"));
        assert!(CLEAN.contains("/var/run/nvidia-imex") && CLEAN.contains("/tmp/imex.stdout"));
    }

    #[tokio::test]
    async fn interruption_cleanup_stops_tracked_daemons() {
        let mut sim = demo_sim();
        sim.payload = true;
        sim.daemons
            .lock()
            .expect("lock")
            .insert("pod-w".to_owned(), true);
        sim.daemons
            .lock()
            .expect("lock")
            .insert("pod-w2".to_owned(), true);
        let tracker = Tracker::default();
        tracker.step("scenario2");
        tracker.imex_pods(&["pod-w".to_owned(), "pod-w2".to_owned()]);
        let state = tracker.snapshot();
        assert_eq!(state.step, "scenario2");
        stop_daemons(&sim, &state.imex_pods).await;
        assert!(!sim.daemons.lock().expect("lock").values().any(|it| *it));
    }
}

#[cfg(test)]
#[path = "scenarios_double_tests.rs"]
mod double_tests;
