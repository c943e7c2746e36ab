//! The topologies the demo uses, derived from the kind cluster's worker names.

use crate::{Clique, ClusterUuid, Domain, Topology};

/// The demo domain's uuid, `00000000-0000-0000-0000-0000000000ab`.
pub const DEMO_UUID: ClusterUuid = ClusterUuid::from_bytes(last_byte(0xab));
/// The rebind domain's uuid, `00000000-0000-0000-0000-0000000000ff`.
pub const REBIND_UUID: ClusterUuid = ClusterUuid::from_bytes(last_byte(0xff));
/// The clique every worker joins in the rebind topology.
pub const REBIND_CLIQUE: u32 = 99;

/// The kind worker node names of a cluster: `<c>-worker`, `<c>-worker2`, ….
pub fn kind_workers(cluster_name: &str, count: usize) -> Vec<String> {
    (1..=count)
        .map(|number| match number {
            1 => format!("{cluster_name}-worker"),
            _ => format!("{cluster_name}-worker{number}"),
        })
        .collect()
}

/// The scenario-1 topology: domain `demo-domain` (uuid …00ab) with the first
/// half of the workers (rounded up) in clique 0 and the rest in clique 1.
///
/// Both cliques are always present, even when one is empty. The workers must
/// be distinct, or the result fails [`Topology::validate`].
pub fn demo(workers: &[String]) -> Topology {
    let (first, second) = workers.split_at(workers.len().div_ceil(2));
    Topology {
        version: 1,
        domains: vec![Domain {
            name: "demo-domain".to_owned(),
            uuid: DEMO_UUID,
            cliques: vec![
                Clique {
                    id: 0,
                    nodes: first.to_vec(),
                },
                Clique {
                    id: 1,
                    nodes: second.to_vec(),
                },
            ],
        }],
    }
}

/// The scenario-3 topology: domain `rebinder` (uuid …00ff) with every worker
/// in clique 99.
pub fn rebind(workers: &[String]) -> Topology {
    Topology {
        version: 1,
        domains: vec![Domain {
            name: "rebinder".to_owned(),
            uuid: REBIND_UUID,
            cliques: vec![Clique {
                id: REBIND_CLIQUE,
                nodes: workers.to_vec(),
            }],
        }],
    }
}

const fn last_byte(byte: u8) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[15] = byte;
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    const CLUSTER: &str = "nvml-mock-compute-domain";

    /// The shipped demo values, which `tests/chart/demo_manifests.rs` pins to upstream-demo.md
    /// §1.7 (`docs/demo/compute-domain/topology.yaml`).
    const DEMO_VALUES: &str = include_str!("../../../manifests/demo/topology.yaml");

    /// What the chart does with the values: `version: 1` plus the domains.
    fn topology_from_values(values: &str) -> Topology {
        let values: serde_yaml::Value = serde_yaml::from_str(values).expect("values are YAML");
        assert_eq!(values["topology"]["enabled"], serde_yaml::Value::Bool(true));
        let domains = serde_yaml::to_string(&values["topology"]["domains"]).expect("re-serialise");
        let indented: String = domains.lines().map(|line| format!("  {line}\n")).collect();
        parse(&format!("version: 1\ndomains:\n{indented}")).expect("chart-rendered document")
    }

    #[test]
    fn kind_workers_follow_kind_naming() {
        assert_eq!(
            kind_workers("c", 4),
            ["c-worker", "c-worker2", "c-worker3", "c-worker4"]
        );
        assert!(kind_workers("c", 0).is_empty());
    }

    #[test]
    fn demo_topology_equals_upstream_demo_values() {
        let generated = demo(&kind_workers(CLUSTER, 4));
        generated
            .validate()
            .expect("generated demo topology is valid");
        assert_eq!(generated, topology_from_values(DEMO_VALUES));
        assert_eq!(topology_from_values(&generated.helm_values()), generated);
    }

    #[test]
    fn demo_topology_resolves_workers_to_cliques_0_0_1_1() {
        let workers = kind_workers(CLUSTER, 4);
        let topology = demo(&workers);
        let cliques: Vec<Option<u32>> = workers
            .iter()
            .map(|worker| topology.resolve(worker).map(|id| id.clique_id))
            .collect();
        assert_eq!(cliques, [Some(0), Some(0), Some(1), Some(1)]);
        for worker in &workers {
            let identity = topology.resolve(worker).expect("worker is in the topology");
            assert_eq!(
                identity.cluster_uuid.to_string(),
                "00000000-0000-0000-0000-0000000000ab"
            );
        }
        assert_eq!(topology.resolve(&format!("{CLUSTER}-control-plane")), None);
    }

    #[test]
    fn demo_topology_splits_odd_counts_with_the_larger_half_first() {
        let topology = demo(&kind_workers("c", 3));
        assert_eq!(
            topology.domains[0].cliques[0].nodes,
            ["c-worker", "c-worker2"]
        );
        assert_eq!(topology.domains[0].cliques[1].nodes, ["c-worker3"]);
    }

    #[test]
    fn rebind_topology_puts_every_worker_in_clique_99() {
        let workers = kind_workers(CLUSTER, 4);
        let topology = rebind(&workers);
        topology
            .validate()
            .expect("generated rebind topology is valid");
        assert_eq!(topology.domains[0].name, "rebinder");
        for worker in &workers {
            let identity = topology.resolve(worker).expect("worker is in the topology");
            assert_eq!(identity.clique_id, 99);
            assert_eq!(
                identity.cluster_uuid.to_string(),
                "00000000-0000-0000-0000-0000000000ff"
            );
        }
    }

    #[test]
    fn helm_values_quote_uuids() {
        let values = rebind(&kind_workers("c", 1)).helm_values();
        assert_eq!(
            values,
            "topology:
  enabled: true
  domains:
    - name: rebinder
      uuid: \"00000000-0000-0000-0000-0000000000ff\"
      cliques:
        - id: 99
          nodes:
            - c-worker
"
        );
    }
}
