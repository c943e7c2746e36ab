//! Whether a kind cluster whose node containers were started again (a Docker
//! restart, a host reboot, `docker start`) is healthy enough to reuse.
//!
//! A restart alone says nothing: kind nodes usually come back with their
//! addresses and a working cluster. What matters is what the cluster shows:
//! the API answers, every node is registered and Ready, each node's recorded
//! address is one its container has now, and containerd's NRI socket listens
//! on every node (so the NRI plugin can register and heal what started
//! without it). [`judge`] decides from those facts (pure); [`probe`] gathers
//! them through the [`Runner`], asking the API from inside the control-plane
//! container, so no kubeconfig on the host is needed.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::names::{KindCluster, NRI_SOCKET};
use crate::runner::{Cmd, Runner};

/// How long `up` waits for a restarted cluster to become healthy before it
/// refuses it (nodes take up to a minute to be Ready after a reboot).
pub const SETTLE: Duration = Duration::from_secs(150);

/// How often a settling cluster is probed again.
const PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// The Go template for a container's addresses on every network it joined.
const ADDRESS_TEMPLATE: &str =
    "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{.GlobalIPv6Address}} {{end}}";

/// Why a restarted cluster cannot be reused (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unhealthy {
    /// The API server did not answer from inside the control plane.
    ApiDown(String),
    /// A node container is not registered as a Kubernetes node.
    NotRegistered(String),
    /// A node is registered but not Ready.
    NotReady(String),
    /// The node's recorded InternalIP is not an address its container has now.
    AddressChanged {
        /// The node.
        node: String,
        /// What Kubernetes recorded.
        recorded: String,
        /// What the container has now.
        now: Vec<String>,
    },
    /// containerd's NRI socket does not exist on the node.
    NriNotListening(String),
}

impl fmt::Display for Unhealthy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unhealthy::ApiDown(why) => write!(f, "the API server does not answer: {why}"),
            Unhealthy::NotRegistered(node) => write!(f, "{node}: not registered as a node"),
            Unhealthy::NotReady(node) => write!(f, "{node}: not Ready"),
            Unhealthy::AddressChanged {
                node,
                recorded,
                now,
            } => write!(
                f,
                "{node}: the cluster records address {recorded}, the container now has {} \
                 (a restarted kind node whose address changed keeps stale certificates and routes)",
                if now.is_empty() {
                    "none".to_owned()
                } else {
                    now.join(", ")
                }
            ),
            Unhealthy::NriNotListening(node) => {
                write!(
                    f,
                    "{node}: containerd's NRI socket {NRI_SOCKET} does not exist"
                )
            }
        }
    }
}

/// What [`probe`] found on one node container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// Its addresses now (`docker inspect`).
    pub addresses: Vec<String>,
    /// Whether containerd's NRI socket exists.
    pub nri_listening: bool,
}

/// The part of `kubectl get nodes -o json` that [`judge`] reads.
#[derive(Deserialize)]
struct NodeList {
    items: Vec<Node>,
}

#[derive(Deserialize)]
struct Node {
    metadata: Metadata,
    #[serde(default)]
    status: Status,
}

#[derive(Deserialize)]
struct Metadata {
    name: String,
}

#[derive(Deserialize, Default)]
struct Status {
    #[serde(default)]
    conditions: Vec<Condition>,
    #[serde(default)]
    addresses: Vec<Address>,
}

#[derive(Deserialize)]
struct Condition {
    #[serde(rename = "type")]
    kind: String,
    status: String,
}

#[derive(Deserialize)]
struct Address {
    #[serde(rename = "type")]
    kind: String,
    address: String,
}

/// Judges a restarted cluster from the API's node list (`None`: the API did
/// not answer, with why) and each node container's facts. Empty: healthy.
pub fn judge(node_list: Result<&str, &str>, facts: &BTreeMap<String, NodeFacts>) -> Vec<Unhealthy> {
    let mut problems: Vec<Unhealthy> = facts
        .iter()
        .filter(|(_, it)| !it.nri_listening)
        .map(|(node, _)| Unhealthy::NriNotListening(node.clone()))
        .collect();
    let list = match node_list.map(serde_json::from_str::<NodeList>) {
        Ok(Ok(list)) => list,
        Ok(Err(err)) => {
            problems.insert(
                0,
                Unhealthy::ApiDown(format!("unreadable node list: {err}")),
            );
            return problems;
        }
        Err(why) => {
            problems.insert(0, Unhealthy::ApiDown(why.trim().to_owned()));
            return problems;
        }
    };
    for (name, container) in facts {
        let Some(node) = list.items.iter().find(|it| &it.metadata.name == name) else {
            problems.push(Unhealthy::NotRegistered(name.clone()));
            continue;
        };
        let ready = node
            .status
            .conditions
            .iter()
            .any(|it| it.kind == "Ready" && it.status == "True");
        if !ready {
            problems.push(Unhealthy::NotReady(name.clone()));
        }
        let recorded = node
            .status
            .addresses
            .iter()
            .filter(|it| it.kind == "InternalIP")
            .map(|it| it.address.clone());
        for recorded in recorded {
            if !container.addresses.contains(&recorded) {
                problems.push(Unhealthy::AddressChanged {
                    node: name.clone(),
                    recorded,
                    now: container.addresses.clone(),
                });
            }
        }
    }
    problems
}

/// Gathers what [`judge`] needs, once.
pub fn probe<R: Runner>(runner: &R, cluster: &KindCluster) -> Vec<Unhealthy> {
    let mut facts = BTreeMap::new();
    for node in cluster.nodes() {
        let addresses = runner
            .run(&Cmd::new(
                "docker",
                &["inspect", "-f", ADDRESS_TEMPLATE, &node],
            ))
            .ok()
            .filter(|out| out.ok)
            .map(|out| out.stdout.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        let nri_listening = runner
            .run(&Cmd::new(
                "docker",
                &["exec", &node, "test", "-S", NRI_SOCKET],
            ))
            .is_ok_and(|out| out.ok);
        facts.insert(
            node,
            NodeFacts {
                addresses,
                nri_listening,
            },
        );
    }
    let control_plane = cluster.control_plane();
    let listed = runner.run(&Cmd::new(
        "docker",
        &[
            "exec",
            &control_plane,
            "kubectl",
            "--kubeconfig=/etc/kubernetes/admin.conf",
            "--request-timeout=10s",
            "get",
            "nodes",
            "-o",
            "json",
        ],
    ));
    let listed = match listed {
        Ok(out) if out.ok => Ok(out.stdout),
        Ok(out) => Err(out.headline()),
        Err(err) => Err(format!("{err:#}")),
    };
    judge(listed.as_deref().map_err(String::as_str), &facts)
}

/// Probes until the cluster is healthy or `settle` has passed, saying what it
/// waits for; returns the last problems (empty: healthy).
pub fn settle<R: Runner>(runner: &R, cluster: &KindCluster, settle: Duration) -> Vec<Unhealthy> {
    let started = Instant::now();
    loop {
        let problems = probe(runner, cluster);
        if problems.is_empty() || started.elapsed() >= settle {
            return problems;
        }
        eprintln!(
            "    restarted cluster {} not healthy yet ({} s of {} s): {}",
            cluster.name(),
            started.elapsed().as_secs(),
            settle.as_secs(),
            problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        );
        std::thread::sleep(PROBE_INTERVAL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::FakeRunner;

    fn node(name: &str, ready: &str, ip: &str) -> serde_json::Value {
        serde_json::json!({
            "metadata": {"name": name},
            "status": {
                "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}],
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            }
        })
    }

    fn facts(entries: &[(&str, &str, bool)]) -> BTreeMap<String, NodeFacts> {
        entries
            .iter()
            .map(|(name, ip, nri)| {
                (
                    (*name).to_owned(),
                    NodeFacts {
                        addresses: vec![(*ip).to_owned(), "fc00:f853:ccd:e793::3".to_owned()],
                        nri_listening: *nri,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn a_restarted_cluster_with_ready_nodes_at_their_addresses_is_healthy() {
        let list = serde_json::json!({"items": [node("c-control-plane", "True", "172.18.0.2"), node("c-worker", "True", "172.18.0.3")]}).to_string();
        let facts = facts(&[
            ("c-control-plane", "172.18.0.2", true),
            ("c-worker", "172.18.0.3", true),
        ]);
        assert_eq!(judge(Ok(&list), &facts), []);
    }

    #[test]
    fn every_problem_is_named_with_its_node() {
        let list = serde_json::json!({"items": [node("c-control-plane", "True", "172.18.0.2"), node("c-worker", "Unknown", "172.18.0.3")]}).to_string();
        let facts = facts(&[
            ("c-control-plane", "172.18.0.2", true),
            ("c-worker", "172.18.0.5", false),
            ("c-worker2", "172.18.0.4", true),
        ]);
        let problems: Vec<String> = judge(Ok(&list), &facts)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            problems,
            [
                format!("c-worker: containerd's NRI socket {NRI_SOCKET} does not exist"),
                "c-worker: not Ready".to_owned(),
                "c-worker: the cluster records address 172.18.0.3, the container now has 172.18.0.5, fc00:f853:ccd:e793::3 (a restarted kind node whose address changed keeps stale certificates and routes)".to_owned(),
                "c-worker2: not registered as a node".to_owned(),
            ]
        );
    }

    #[test]
    fn an_api_that_does_not_answer_is_named() {
        let facts = facts(&[("c-control-plane", "172.18.0.2", true)]);
        assert_eq!(
            judge(Err("The connection to the server was refused\n"), &facts),
            [Unhealthy::ApiDown(
                "The connection to the server was refused".to_owned()
            )]
        );
        assert!(matches!(
            judge(Ok("not json"), &facts)[..],
            [Unhealthy::ApiDown(ref why)] if why.starts_with("unreadable node list")
        ));
    }

    #[test]
    fn probe_asks_docker_and_the_api_inside_the_control_plane() {
        let cluster = KindCluster::new("c", 4).expect("valid");
        let fake = FakeRunner::default();
        let mut items = Vec::new();
        for (idx, name) in cluster.nodes().iter().enumerate() {
            let ip = format!("172.18.0.{}", idx + 2);
            fake.expect(
                &format!("docker inspect -f {ADDRESS_TEMPLATE} {name}"),
                true,
                &format!("{ip}  \n"),
            )
            .expect(
                &format!("docker exec {name} test -S {NRI_SOCKET}"),
                true,
                "",
            );
            items.push(node(name, "True", &ip));
        }
        fake.expect(
            "docker exec c-control-plane kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=10s get nodes -o json",
            true,
            &serde_json::json!({ "items": items }).to_string(),
        );
        assert_eq!(settle(&fake, &cluster, Duration::ZERO), []);
        assert_eq!(fake.remaining(), 0);
    }
}
