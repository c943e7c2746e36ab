//! The NetworkPolicy negative test: a workload pod listens on TCP 50000; a
//! peer workload pod must reach it, and a pod outside the policy's selector
//! must not. When both reach it, the CNI does not enforce policies and the
//! report says so.

use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

use crate::k8s;
use crate::names::WORKLOAD_NS;

/// The probe pod, outside the policy's selector.
pub const PROBE: &str = "cdsim-netpol-probe";
const PORT: &str = "50000";
const LISTEN: &str =
    "nc -ll -p 50000 -e /bin/true >/dev/null 2>&1 & echo $! > /tmp/np-listener.pid";
const UNLISTEN: &str = "if [ -f /tmp/np-listener.pid ]; then kill \"$(cat /tmp/np-listener.pid)\" 2>/dev/null; rm -f /tmp/np-listener.pid; fi; true";

/// What the two connection attempts showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach {
    /// A peer workload pod connected.
    pub peer: bool,
    /// The probe outside the selector connected.
    pub outsider: bool,
}

/// The verdict: `Ok` note for enforced or unenforced, `Err` when even the peer
/// is refused (the policy or the listener is broken).
pub fn verdict(reach: Reach, listener_pod: &str) -> anyhow::Result<String> {
    match (reach.peer, reach.outsider) {
        (true, false) => Ok(format!(
            "enforced: a peer workload pod reached TCP {PORT} of {listener_pod}, a pod outside the selector was refused"
        )),
        (true, true) => Ok(format!(
            "unenforced: the CNI does not enforce NetworkPolicy (a pod outside the selector reached TCP {PORT} of {listener_pod})"
        )),
        (false, _) => anyhow::bail!(
            "a peer workload pod could not reach TCP {PORT} of {listener_pod}: the policy must admit peers (or busybox nc is missing)"
        ),
    }
}

fn probe_pod(image: &str, node: &str) -> anyhow::Result<Pod> {
    let pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": PROBE,
            "labels": {"app.kubernetes.io/name": PROBE},
            "annotations": {"nvml-mock.nvidia.com/inject": "false"}
        },
        "spec": {
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [{
                "name": "probe",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["/bin/sh", "-c", "sleep 600"]
            }]
        }
    });
    serde_json::from_value(pod).context("building the probe pod")
}

async fn connects(client: &Client, pod: &str, container: &str, ip: &str) -> bool {
    let argv = ["nc", "-w", "3", ip, PORT];
    let argv = ["sh", "-c", &format!("{} </dev/null", argv.join(" "))];
    matches!(k8s::exec_in(client, pod, container, &argv, Duration::from_secs(20)).await, Ok(out) if out.code == 0)
}

/// Runs the check between the first two workers.
pub async fn check(client: &Client, workers: &[String], image: &str) -> anyhow::Result<String> {
    let [first, second, ..] = workers else {
        anyhow::bail!("the network policy check needs two workers");
    };
    let listener = k8s::pod_on_node(client, first, Duration::from_secs(60)).await?;
    let peer = k8s::pod_on_node(client, second, Duration::from_secs(60)).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), WORKLOAD_NS);
    let _ = pods
        .delete(PROBE, &DeleteParams::default().grace_period(0))
        .await;
    let res = async {
        for script in [UNLISTEN, LISTEN] {
            k8s::exec(
                client,
                &listener.name,
                &["sh", "-c", script],
                Duration::from_secs(20),
            )
            .await?;
        }
        let mut peer_ok = false;
        for _ in 0..5 {
            if connects(
                client,
                &peer.name,
                crate::names::WORKLOAD_CONTAINER,
                &listener.ip,
            )
            .await
            {
                peer_ok = true;
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // Wait until an earlier probe is gone before creating it again.
        for _ in 0..30 {
            if pods.get_opt(PROBE).await?.is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        pods.create(&PostParams::default(), &probe_pod(image, second)?)
            .await
            .context("creating the probe pod")?;
        k8s::wait_pod(client, PROBE, Duration::from_secs(60)).await?;
        let outsider = connects(client, PROBE, "probe", &listener.ip).await;
        verdict(
            Reach {
                peer: peer_ok,
                outsider,
            },
            &listener.name,
        )
    }
    .await;
    let _ = k8s::exec(
        client,
        &listener.name,
        &["sh", "-c", UNLISTEN],
        Duration::from_secs(20),
    )
    .await;
    let _ = pods
        .delete(PROBE, &DeleteParams::default().grace_period(0))
        .await;
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reach(peer: bool, outsider: bool) -> Reach {
        Reach { peer, outsider }
    }

    #[test]
    fn verdicts() {
        let enforced = verdict(reach(true, false), "p").expect("ok");
        assert!(enforced.starts_with("enforced"), "{enforced}");
        let open = verdict(reach(true, true), "p").expect("ok");
        assert!(open.starts_with("unenforced"), "{open}");
        let broken = verdict(reach(false, false), "p").expect_err("peer refused");
        assert!(
            broken
                .to_string()
                .contains("could not reach TCP 50000 of p"),
            "{broken}"
        );
    }

    #[test]
    fn the_probe_is_outside_the_selector_and_uninjected() {
        let pod = probe_pod("img:1", "w2").expect("pod");
        let labels = pod.metadata.labels.expect("labels");
        assert_ne!(
            labels["app.kubernetes.io/name"],
            "compute-domain-demo-workload"
        );
        assert_eq!(
            pod.metadata.annotations.expect("annotations")["nvml-mock.nvidia.com/inject"],
            "false"
        );
        assert_eq!(
            pod.spec.expect("spec").containers[0].image.as_deref(),
            Some("img:1")
        );
    }
}
