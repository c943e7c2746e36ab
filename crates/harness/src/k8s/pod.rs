//! A workload pod as the harness sees it, and when a listed pod counts as
//! one (running, ready, not terminating); below both the waits of the parent
//! module and the diagnostics, which skip the logs of usable pods.

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

/// A workload pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    /// The pod name.
    pub name: String,
    /// Its IP.
    pub ip: String,
    /// Its uid (changes when the pod is recreated).
    pub uid: String,
}

/// A running, ready, not-terminating pod as [`PodInfo`].
pub fn usable_pod(pod: &Pod) -> Option<PodInfo> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Running") {
        return None;
    }
    let ready = status
        .conditions
        .as_ref()?
        .iter()
        .any(|it| it.type_ == "Ready" && it.status == "True");
    if !ready {
        return None;
    }
    Some(PodInfo {
        name: pod.name_any(),
        ip: status.pod_ip.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    })
}
