//! The kubelets' pull events for a registry's images: the proof that the
//! nodes pulled what `--registry` pushed (`up --kube-context` reports them for
//! the mock's images, scenario 5 for the device plugin's and NFD's).

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use kube::Client;

use super::address::Registry;

/// One kubelet pull event: where, for which pod, and what it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pull {
    /// The node whose kubelet pulled.
    pub node: String,
    /// The pod it pulled for.
    pub pod: String,
    /// The event's message (`Successfully pulled image "…" in …`).
    pub message: String,
}

impl std::fmt::Display for Pull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.node, self.pod, self.message)
    }
}

/// The `Pulled` events (and `Failed` pulls) naming `registry`'s host in
/// `namespaces`, oldest first per namespace; printed too.
pub async fn pull_events(
    client: &Client,
    registry: &Registry,
    namespaces: &[&str],
) -> anyhow::Result<Vec<Pull>> {
    let mut pulls = Vec::new();
    for ns in namespaces {
        let api: Api<Event> = Api::namespaced(client.clone(), ns);
        let events = api
            .list(&ListParams::default())
            .await
            .with_context(|| format!("listing events in {ns}"))?;
        pulls.extend(pulls_of(&events.items, &registry.host));
    }
    eprintln!("    pull events from {registry}:");
    for pull in &pulls {
        eprintln!("      {pull}");
    }
    Ok(pulls)
}

/// The report's note of the pulls: proof the nodes pulled from the registry.
pub fn pulls_note(registry: &Registry, pulls: &[Pull]) -> String {
    let pulls = if pulls.is_empty() {
        "none".to_owned()
    } else {
        pulls
            .iter()
            .map(Pull::to_string)
            .collect::<Vec<_>>()
            .join(" | ")
    };
    format!("pull events from {registry}: {pulls}")
}

/// Every pull event naming `host`, oldest first.
pub fn pulls_of(events: &[Event], host: &str) -> Vec<Pull> {
    let mut pulls: Vec<&Event> = events
        .iter()
        .filter(|it| matches!(it.reason.as_deref(), Some("Pulled" | "Failed")))
        .filter(|it| it.message.as_deref().unwrap_or_default().contains(host))
        .collect();
    pulls.sort_by_key(|it| it.last_timestamp.clone().map(|time| time.0));
    pulls
        .into_iter()
        .map(|it| Pull {
            node: it
                .source
                .as_ref()
                .and_then(|s| s.host.clone())
                .unwrap_or_default(),
            pod: it.involved_object.name.clone().unwrap_or_default(),
            message: it.message.clone().unwrap_or_default(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(reason: &str, message: &str, pod: &str) -> Event {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": format!("{pod}.1") },
            "involvedObject": { "kind": "Pod", "name": pod },
            "reason": reason,
            "message": message,
            "source": { "host": "w1" },
        }))
        .expect("event")
    }

    #[test]
    fn only_pulls_from_the_registry_are_listed() {
        let events = [
            event(
                "Pulled",
                "Successfully pulled image \"172.18.0.1:5000/nvml-mock:abc\" in 1.2s",
                "stager-x",
            ),
            event(
                "Pulled",
                "Container image \"nvml-mock:abc\" already present on machine",
                "old",
            ),
            event(
                "Scheduled",
                "172.18.0.1:5000 mentioned but not a pull",
                "other",
            ),
        ];
        let lines: Vec<String> = pulls_of(&events, "172.18.0.1:5000")
            .iter()
            .map(Pull::to_string)
            .collect();
        assert_eq!(
            lines,
            ["w1 stager-x: Successfully pulled image \"172.18.0.1:5000/nvml-mock:abc\" in 1.2s"]
        );
    }

    #[test]
    fn the_note_names_the_registry_and_says_none_when_nothing_was_pulled() {
        let registry = Registry::parse("172.18.0.1:5000/ci", true).expect("valid");
        assert_eq!(
            pulls_note(&registry, &[]),
            "pull events from http://172.18.0.1:5000/ci: none"
        );
        assert_eq!(
            pulls_note(
                &registry,
                &pulls_of(
                    &[event("Pulled", "from 172.18.0.1:5000", "p")],
                    "172.18.0.1:5000"
                )
            ),
            "pull events from http://172.18.0.1:5000/ci: w1 p: from 172.18.0.1:5000"
        );
    }
}
