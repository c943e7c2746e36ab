use super::*;
use crate::runner::FakeRunner;
use test_support::assert_contains;

/// The errors the full rack's CI run saw while the API server was away, and
/// the ones a restart gives besides.
#[test]
fn a_restarting_api_server_is_unreachable_anything_else_is_not() {
    for text in [
        "ServiceError: client error (Connect): client error (Connect): tls handshake eof",
        "Error: UPGRADE FAILED: Kubernetes cluster unreachable: Get \"https://127.0.0.1:33529/version\": EOF",
        "Get \"https://127.0.0.1:33529/api?timeout=32s\": dial tcp 127.0.0.1:33529: connect: connection refused",
        "HyperError: client error (SendRequest): connection closed before message completed",
        "read tcp 127.0.0.1:50716->127.0.0.1:33529: read: connection reset by peer",
        "ApiError: etcdserver: request timed out: InternalError (ErrorResponse { status: \"Failure\" })",
        "EOF",
        // The two-rack run's helm, while the kubelet restarted kube-apiserver
        // (its liveness probe answered 500).
        "Error: Kubernetes cluster unreachable: unknown",
        "Error: the server is currently unable to handle the request (get computedomains.resource.nvidia.com)",
        "Timeout: request did not complete within requested timeout - context deadline exceeded",
    ] {
        assert_eq!(classify(text), Failure::Unreachable, "{text}");
    }
    for text in [
        "ApiError: pods \"x\" not found: NotFound (ErrorResponse { code: 404 })",
        "Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress",
        "Error: values don't meet the specifications of the schema(s): topology: EOF marker missing in file",
        "Error: Kubernetes cluster unreachable: invalid configuration: no configuration has been provided",
        "ServiceError: client error (Connect): invalid peer certificate: UnknownIssuer",
        "applying ComputeDomain cdsim-scenario4/cdsim-s4: admission webhook denied the request",
        "",
    ] {
        assert_eq!(classify(text), Failure::Other, "{text}");
    }
}

#[test]
fn the_chain_joins_every_cause() {
    let err = anyhow::format_err!("tls handshake eof").context("client error (Connect)");
    let boxed: Box<dyn std::error::Error + Send + Sync> = err.into();
    assert_eq!(
        chain(boxed.as_ref()),
        "client error (Connect): tls handshake eof"
    );
}

#[test]
fn the_bound_pauses_every_probe_and_ends_at_its_limit() {
    let bound = Bound::DEFAULT;
    assert_eq!(bound.limit, Duration::from_secs(120));
    assert_eq!(
        bound.next_pause(Duration::ZERO),
        Some(Duration::from_secs(2))
    );
    assert_eq!(
        bound.next_pause(Duration::from_millis(119_500)),
        Some(Duration::from_millis(500)),
        "the last pause ends at the limit"
    );
    assert_eq!(bound.next_pause(Duration::from_secs(120)), None);
    assert_eq!(bound.next_pause(Duration::from_secs(500)), None);
    let pauses = std::iter::successors(Some(Duration::ZERO), |waited| {
        bound.next_pause(*waited).map(|pause| *waited + pause)
    })
    .count();
    assert_eq!(pauses, 61, "120 s at 2 s a probe, and the first try");
}

const HELM: &str = "helm upgrade nvml-mock";
const AWAY: &str =
    "Error: UPGRADE FAILED: Kubernetes cluster unreachable: Get \"https://127.0.0.1:1/version\": EOF";

fn helm() -> Cmd {
    Cmd::new("helm", &["upgrade", "nvml-mock", "chart"])
}

fn short() -> Bound {
    Bound {
        limit: Duration::from_millis(200),
        every: Duration::from_millis(1),
    }
}

#[test]
fn helm_is_rerun_while_the_api_server_is_away() {
    let runner = FakeRunner::default();
    runner
        .expect_failure(HELM, AWAY)
        .expect_failure(HELM, AWAY)
        .expect(HELM, true, "upgraded");
    let out = helm_check(&runner, &helm(), short(), &|| "diag".to_owned()).expect("third run");
    assert_eq!(out.stdout, "upgraded");
    assert_eq!(runner.remaining(), 0);
}

#[test]
fn helm_fails_at_once_on_another_error() {
    let runner = FakeRunner::default();
    runner.expect_failure(
        HELM,
        "Error: UPGRADE FAILED: chart requires kubeVersion >= 1.40",
    );
    let err = helm_check(&runner, &helm(), short(), &|| "diag".to_owned())
        .expect_err("not transient")
        .to_string();
    assert_contains(&err, "kubeVersion");
    assert!(!err.contains("diag"), "{err}");
    assert_eq!(runner.seen().len(), 1, "not re-run");
}

#[test]
fn helm_gives_up_past_the_bound_with_the_diagnostics() {
    let runner = FakeRunner::default();
    for _ in 0..1000 {
        runner.expect_failure(HELM, AWAY);
    }
    let bound = Bound {
        limit: Duration::from_millis(30),
        every: Duration::from_millis(5),
    };
    let err = helm_check(&runner, &helm(), bound, &|| {
        "kube-apiserver: restarted 2 time(s)".to_owned()
    })
    .expect_err("bounded")
    .to_string();
    assert_contains(&err, "the API server did not answer for 0s");
    assert_contains(&err, "Kubernetes cluster unreachable");
    assert_contains(&err, "kube-apiserver: restarted 2 time(s)");
    let runs = runner.seen().len();
    assert!(
        (2..=8).contains(&runs),
        "about 30 ms / 5 ms runs, not {runs}"
    );
}

const CRICTL: &str = r#"{"containers": [
  {"id": "a1", "metadata": {"name": "kube-apiserver", "attempt": 1}, "state": "CONTAINER_RUNNING"},
  {"id": "a0", "metadata": {"name": "kube-apiserver", "attempt": 0}, "state": "CONTAINER_EXITED"},
  {"id": "e0", "metadata": {"name": "etcd", "attempt": 0}, "state": "CONTAINER_RUNNING"},
  {"id": "s0", "metadata": {"name": "kube-scheduler", "attempt": 0}, "state": "CONTAINER_RUNNING"},
  {"id": "k0", "metadata": {"name": "kube-proxy", "attempt": 0}, "state": "CONTAINER_RUNNING"}
]}"#;

#[test]
fn restarts_are_read_from_crictl_newest_attempt_first() {
    let found = components(CRICTL);
    let names: Vec<(&str, u64)> = found
        .iter()
        .map(|it| (it.name.as_str(), it.attempt))
        .collect();
    assert_eq!(
        names,
        [
            ("etcd", 0),
            ("kube-apiserver", 1),
            ("kube-apiserver", 0),
            ("kube-scheduler", 0)
        ]
    );
    assert_eq!(
        restart_lines(&found),
        [
            "kube-apiserver: running, restarted 1 time(s)",
            "etcd: running, never restarted",
            "kube-controller-manager: no container",
            "kube-scheduler: running, never restarted",
        ]
    );
    assert!(components("not json").is_empty());
}

#[test]
fn the_control_plane_state_names_restarts_the_dead_ones_logs_and_probe_failures() {
    let runner = FakeRunner::default();
    let node = "c-control-plane";
    runner
        .expect(&format!("docker exec {node} crictl ps -a -o json"), true, CRICTL)
        .expect(
            &format!("docker exec {node} crictl logs --tail 6 a0"),
            true,
            "W1204 etcd client: context deadline exceeded\n",
        )
        .expect(
            &format!("docker exec {node} journalctl -u kubelet"),
            true,
            "Dec 04 kubelet[1]: I1204 prober.go:120] \"Probe failed\" probeType=\"Liveness\" pod=\"kube-system/kube-apiserver-c-control-plane\"\nDec 04 other\n",
        );
    let text = control_plane_state(&runner, node);
    assert_contains(&text, "kube-apiserver: running, restarted 1 time(s)");
    assert_contains(&text, "last lines of kube-apiserver (attempt 0, exited)");
    assert_contains(&text, "context deadline exceeded");
    assert_contains(&text, "kubelet: 1 probe failure line(s)");
    assert_contains(&text, "probeType=\"Liveness\"");
    assert_eq!(runner.remaining(), 0);
}

#[test]
fn a_kind_context_names_its_control_plane() {
    assert_eq!(
        kind_control_plane("kind-cdsim-full-rack").as_deref(),
        Some("cdsim-full-rack-control-plane")
    );
    assert_eq!(kind_control_plane("prod-east"), None);
    assert_eq!(kind_control_plane("kind-"), None);
}
