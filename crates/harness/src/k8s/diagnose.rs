//! The diagnostics printed when a wait fails.

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{ListParams, LogParams};
use kube::{Api, Client, ResourceExt};

use super::pod::usable_pod;

/// What a user needs when a wait fails: pod phases, conditions and container
/// states, the namespace's recent events, and log tails of unready pods.
pub async fn diagnose(client: &Client, ns: &str, selector: &str) -> String {
    let mut out = String::new();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    match pods.list(&ListParams::default().labels(selector)).await {
        Ok(list) if list.items.is_empty() => {
            out.push_str(&format!("  no pods match {selector} in {ns}\n"))
        }
        Ok(list) => {
            for pod in &list.items {
                out.push_str(&describe_pod(pod));
                if usable_pod(pod).is_none() {
                    for container in pod.spec.iter().flat_map(|spec| spec.containers.iter()) {
                        let params = LogParams {
                            container: Some(container.name.clone()),
                            tail_lines: Some(20),
                            ..LogParams::default()
                        };
                        if let Ok(logs) = pods.logs(&pod.name_any(), &params).await {
                            out.push_str(&format!(
                                "    logs of {}/{} (last 20 lines):\n",
                                pod.name_any(),
                                container.name
                            ));
                            for line in logs.lines() {
                                out.push_str(&format!("      {line}\n"));
                            }
                        }
                    }
                }
            }
        }
        Err(err) => out.push_str(&format!("  cannot list pods in {ns}: {err}\n")),
    }
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    if let Ok(list) = events.list(&ListParams::default()).await {
        let mut items = list.items;
        items.sort_by_key(|it| it.last_timestamp.clone().map(|time| time.0));
        out.push_str(&format!("  recent events in {ns}:\n"));
        for event in items.iter().rev().take(10).rev() {
            out.push_str(&format!(
                "    {} {} {}/{}: {}\n",
                event.type_.as_deref().unwrap_or("-"),
                event.reason.as_deref().unwrap_or("-"),
                event.involved_object.kind.as_deref().unwrap_or("-"),
                event.involved_object.name.as_deref().unwrap_or("-"),
                event.message.as_deref().unwrap_or("").trim()
            ));
        }
    }
    out
}

/// One pod's phase, node, unmet conditions and container states.
pub fn describe_pod(pod: &Pod) -> String {
    let status = pod.status.clone().unwrap_or_default();
    let node = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.node_name.clone())
        .unwrap_or_else(|| "-".to_owned());
    let mut out = format!(
        "  pod {} on {node}: phase {}\n",
        pod.name_any(),
        status.phase.as_deref().unwrap_or("Unknown")
    );
    for condition in status
        .conditions
        .iter()
        .flatten()
        .filter(|it| it.status != "True")
    {
        out.push_str(&format!(
            "    condition {}={} {} {}\n",
            condition.type_,
            condition.status,
            condition.reason.as_deref().unwrap_or(""),
            condition.message.as_deref().unwrap_or("")
        ));
    }
    for container in status.container_statuses.iter().flatten() {
        let state = container.state.clone().unwrap_or_default();
        let detail = if let Some(waiting) = state.waiting {
            format!(
                "waiting: {} {}",
                waiting.reason.unwrap_or_default(),
                waiting.message.unwrap_or_default()
            )
        } else if let Some(terminated) = state.terminated {
            format!(
                "terminated: exit {} {}",
                terminated.exit_code,
                terminated.reason.unwrap_or_default()
            )
        } else {
            "running".to_owned()
        };
        out.push_str(&format!(
            "    container {}: {} (restarts {})\n",
            container.name,
            detail.trim(),
            container.restart_count
        ));
    }
    out
}
