use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::scenario2::{CLEAN, STOP_DAEMON};
use super::*;
use crate::fabric::Expected;
use crate::k8s::{ExecOutput, PodInfo};
use crate::report::{Outcome, ScenarioResult};
use crate::runner::{Cmd, FakeRunner, Runner};
use crate::tracker::Tracker;
use test_support::assert_contains;

const DEMO: &str = "00000000-0000-0000-0000-0000000000ab";

/// The reason of a failed result; any other outcome fails the test.
pub(super) fn failure(result: &ScenarioResult) -> &str {
    match &result.outcome {
        Outcome::Failed(reason) => reason.as_str(),
        _ => panic!("must fail: {result:#?}"),
    }
}

/// Scenario 2 on `sim`, which must fail: its reason and how long it took.
async fn scenario2_failure(sim: &Sim) -> (String, Duration) {
    let started = Instant::now();
    let result = scenario2_on(sim).await;
    (failure(&result).to_owned(), started.elapsed())
}

/// Scenario 2 on the sim's workers `w` and `w2`, with the default limits.
async fn scenario2_on(sim: &Sim) -> ScenarioResult {
    scenario2(sim, ["w", "w2"], &Tracker::default(), Limits::default()).await
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
                ok(&crate::fabric::tests::sample(clique, &uuid))
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

/// The demo sim with an nvidia-imex payload (scenario 2 runs).
fn with_payload() -> Sim {
    Sim {
        payload: true,
        ..demo_sim()
    }
}

/// Scenario 2's transitions, as its per-worker details say them.
pub(super) const TRANSITIONS: [&str; 3] = [
    "daemon A alone: -q READY, domain DEGRADED",
    "daemon B joined: domain UP, 2/2 READY, version NO_GPU",
    "daemon B terminated: domain DEGRADED",
];

/// A result's per-worker details.
pub(super) fn details(result: &ScenarioResult) -> Vec<&str> {
    result.workers.iter().map(|it| it.detail.as_str()).collect()
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
    let reason = failure(&result);
    assert_contains(
        reason,
        "w2: /dev/nvidia-caps-imex-channels/channel0 is not a character device",
    );
    assert_contains(reason, "w4: GPU 0 cliqueId 0 (want 1)");
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

fn rebind(scratch: &std::path::Path) -> Rebind {
    Rebind {
        chart: "chart".to_owned(),
        context: "kind-c".to_owned(),
        rebind_values: "topology: rebind\n".to_owned(),
        demo_values: "topology: demo\n".to_owned(),
        rebind_expected: demo_expected()
            .into_iter()
            .map(|(node, _)| {
                let it = Expected {
                    clique: crate::names::REBIND_CLIQUE,
                    uuid: crate::names::REBIND_UUID.to_owned(),
                };
                (node, it)
            })
            .collect(),
        demo_expected: demo_expected(),
        scratch: scratch.to_owned(),
    }
}

/// A runner that expects scenario 3's two `helm upgrade`s: rebind, restore.
fn two_upgrades() -> FakeRunner {
    let fake = FakeRunner::default();
    let upgrade =
        "helm upgrade nvml-mock chart --kube-context kind-c --namespace mokka --reuse-values -f";
    fake.expect(upgrade, true, "").expect(upgrade, true, "");
    fake
}

/// Scenario 3 against `sim`, helm through `runner`, the values files in `dir`.
async fn scenario3_on<R: Runner>(sim: &Sim, runner: &R, dir: &std::path::Path) -> ScenarioResult {
    scenario3(
        sim,
        runner,
        &rebind(dir),
        &Tracker::default(),
        Limits::default(),
    )
    .await
}

#[tokio::test(start_paused = true)]
async fn scenario3_rebinds_without_recycling_and_restores() {
    let sim = demo_sim();
    let runner = HelmSim {
        sim: &sim,
        fake: two_upgrades(),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let result = scenario3_on(&sim, &runner, dir.path()).await;
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
        fake: two_upgrades(),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let result = scenario3_on(&sim, &runner, dir.path()).await;
    let reason = failure(&result);
    assert_contains(
        reason,
        "pods were recycled during the rebind: pod-w recreated (uid old -> new)",
    );
    assert_eq!(
        runner.fake.remaining(),
        0,
        "the demo topology must be restored"
    );
}

#[tokio::test(start_paused = true)]
async fn scenario3_times_out_when_the_topology_never_arrives() {
    let sim = demo_sim();
    let runner = two_upgrades();
    let dir = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let result = scenario3_on(&sim, &runner, dir.path()).await;
    let reason = failure(&result);
    assert!(
        reason.starts_with("rebind: not converged within 60s: w: GPU 0 clusterUuid"),
        "{reason}"
    );
    assert!(started.elapsed() >= Duration::from_secs(60));
}

#[tokio::test(start_paused = true)]
async fn scenario2_walks_the_three_transitions() {
    let sim = with_payload();
    let tracker = Tracker::default();
    let result = scenario2(&sim, ["w", "w2"], &tracker, Limits::default()).await;
    assert_eq!(result.outcome, Outcome::Passed, "{result:?}");
    assert_eq!(details(&result), TRANSITIONS);
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
    let result = scenario2_on(&sim).await;
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
    let sim = Sim {
        blocked: true,
        ..with_payload()
    };
    let (reason, took) = scenario2_failure(&sim).await;
    assert_contains(
        &reason,
        "domain not UP within 240s after daemon B started (last DEGRADED)",
    );
    assert_contains(&reason, "last lines of /tmp/nvidia-imex.log in pod-w:");
    assert!(took >= Duration::from_secs(240));
    assert!(
        !sim.daemons.lock().expect("lock").values().any(|it| *it),
        "daemons stopped after failure"
    );
}

#[tokio::test(start_paused = true)]
async fn scenario2_fails_when_the_domain_ignores_a_dead_peer() {
    let sim = Sim {
        sticky: true,
        ..with_payload()
    };
    let result = scenario2_on(&sim).await;
    let reason = failure(&result);
    assert_contains(reason, "domain still UP 60s after daemon B was terminated");
}

/// Why scenario 2 failed when, once daemon B stopped, every ctl gives this output.
async fn failure_with_ctl_after_b_stops(code: i32, stdout: &str, stderr: &str) -> String {
    let sim = Sim {
        ctl_fault_after_b_stops: Some(ExecOutput {
            code,
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
        }),
        ..with_payload()
    };
    failure(&scenario2_on(&sim).await).to_owned()
}

#[tokio::test(start_paused = true)]
async fn scenario2_fails_with_the_output_of_a_hung_ctl_after_b_stops() {
    let reason = failure_with_ctl_after_b_stops(143, "", "Terminated").await;
    for part in [
        "the domain status was unreachable",
        "did not finish within 10s (killed)",
        "stderr: \"Terminated\"",
    ] {
        assert_contains(&reason, part);
    }
}

#[tokio::test(start_paused = true)]
async fn scenario2_fails_with_the_output_of_a_failing_or_garbled_ctl() {
    let reason = failure_with_ctl_after_b_stops(1, "", "nvidia-imex-ctl: injected failure").await;
    assert_contains(&reason, "exited 1");
    assert_contains(&reason, "injected failure");
    let reason = failure_with_ctl_after_b_stops(0, "garbage, not JSON\n", "").await;
    assert_contains(&reason, "printed not the -N -j document");
    assert_contains(&reason, "garbage, not JSON");
}

#[tokio::test(start_paused = true)]
async fn scenario2_against_the_double_is_named_so() {
    let sim = Sim {
        double: true,
        ..with_payload()
    };
    let result = scenario2_on(&sim).await;
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
    let sim = Sim {
        dies: true,
        ..with_payload()
    };
    let (reason, took) = scenario2_failure(&sim).await;
    assert!(reason.starts_with("daemon A exited after 0s"), "{reason}");
    assert_contains(&reason, "last lines of /tmp/imex.stdout in pod-w:");
    assert!(took < Duration::from_secs(5), "no wait for a dead daemon");
}

#[test]
fn the_stop_waits_for_the_exit_and_the_run_starts_clean() {
    assert!(STOP_DAEMON.contains("kill -TERM") && STOP_DAEMON.contains("while alive"));
    assert!(STOP_DAEMON.find("while alive") < STOP_DAEMON.find("rm -f /tmp/imex.pid"));
    assert!(CLEAN.contains("/var/run/nvidia-imex") && CLEAN.contains("/tmp/imex.stdout"));
}

#[tokio::test]
async fn interruption_cleanup_stops_tracked_daemons() {
    let sim = with_payload();
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

#[test]
fn scenarios_are_named_by_their_number() {
    assert_eq!(Scenario::Four.name(), "scenario4");
    assert_eq!(Scenario::Five.name(), "scenario5");
    let numbers: Vec<u8> = Scenario::ALL.iter().map(|it| it.number()).collect();
    assert_eq!(numbers, [1, 2, 3, 4, 5]);
}

#[test]
fn waits_grow_with_the_workers_beyond_the_demos_four() {
    use super::{scaled, Limits};
    let base = Duration::from_secs(60);
    assert_eq!(scaled(base, 2), base);
    assert_eq!(scaled(base, 4), base);
    assert_eq!(scaled(base, 18), Duration::from_secs(60 + 14 * 15));
    assert_eq!(Limits::for_workers(4).converge, Limits::default().converge);
    assert_eq!(
        Limits::for_workers(36).converge,
        Duration::from_secs(60 + 32 * 15)
    );
}
