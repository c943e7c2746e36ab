//! The demo workload (`manifests/demo/workload.yaml`) and the demo topology
//! values (`manifests/demo/topology.yaml`), parsed as what they claim to be.

use std::collections::BTreeMap;

use integration_tests::{demo_topology_values, repo_root};
use k8s_openapi::{
    api::{apps::v1::DaemonSet, networking::v1::NetworkPolicy},
    apimachinery::pkg::{apis::meta::v1::LabelSelector, util::intstr::IntOrString},
};

use crate::helm::{pod_spec, strict};

const NAME: &str = "compute-domain-demo-workload";
const LABEL: &str = "app.kubernetes.io/name";
/// The tag `cargo xtask` replaces before applying (see the file's header).
const IMAGE_PLACEHOLDER: &str = "nvml-mock-workload:set-by-xtask";

fn workload() -> (DaemonSet, NetworkPolicy) {
    let path = repo_root().join("manifests/demo/workload.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let documents: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|document| {
            <serde_yaml::Value as serde::Deserialize>::deserialize(document)
                .unwrap_or_else(|err| panic!("{} is not YAML: {err}", path.display()))
        })
        .collect();
    assert_eq!(documents.len(), 2, "a DaemonSet and a NetworkPolicy");
    (strict(&documents[0]), strict(&documents[1]))
}

fn own_label() -> BTreeMap<String, String> {
    BTreeMap::from([(LABEL.to_owned(), NAME.to_owned())])
}

fn selects_exactly_own_label(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref() == Some(&own_label())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}

#[test]
fn workload_daemon_set_is_plain_and_asks_only_for_imex_channels() {
    let (daemon_set, _) = workload();
    assert_eq!(daemon_set.metadata.name.as_deref(), Some(NAME));
    assert_eq!(
        daemon_set.metadata.namespace, None,
        "applied into compute-domain-workload"
    );
    let spec = daemon_set.spec.clone().unwrap_or_default();
    assert!(selects_exactly_own_label(&spec.selector));
    let template_meta = spec.template.metadata.clone().unwrap_or_default();
    assert_eq!(template_meta.labels, Some(own_label()));
    assert_eq!(
        template_meta.annotations,
        Some(BTreeMap::from([(
            "nvml-mock.nvidia.com/imex-channels".to_owned(),
            "true".to_owned()
        )])),
        "the imex-channels annotation is its only mock setting"
    );

    let pod = pod_spec(&daemon_set);
    assert_eq!(pod.automount_service_account_token, Some(false));
    assert_eq!(
        pod.node_selector,
        Some(BTreeMap::from([(
            "nvidia.com/gpu.present".to_owned(),
            "true".to_owned()
        )]))
    );
    assert_eq!(pod.tolerations, None, "the control plane stays out");
    assert_eq!(pod.host_network, None);
    assert_eq!(pod.host_pid, None);
    assert_eq!(pod.host_ipc, None);
    assert_eq!(pod.security_context, None);
    assert_eq!(pod.volumes, None, "no mock mounts: NRI brings them");
    assert_eq!(pod.runtime_class_name, None);
    assert_eq!(pod.init_containers, None);

    assert_eq!(pod.containers.len(), 1);
    let container = &pod.containers[0];
    assert_eq!(container.name, "demo-workload");
    assert_eq!(container.image.as_deref(), Some(IMAGE_PLACEHOLDER));
    assert_eq!(container.image_pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(
        container.command,
        Some(vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            "trap : TERM INT; sleep infinity & wait".to_owned()
        ])
    );
    assert_eq!(container.security_context, None);
    assert_eq!(container.env, None);
    assert_eq!(container.volume_mounts, None);
    assert_eq!(container.volume_devices, None);
    let resources = container.resources.clone().unwrap_or_default();
    let quantities =
        |map: Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>| {
            map.unwrap_or_default()
                .into_iter()
                .map(|(key, value)| (key, value.0))
                .collect::<BTreeMap<_, _>>()
        };
    assert_eq!(
        quantities(resources.requests),
        BTreeMap::from([
            ("cpu".to_owned(), "10m".to_owned()),
            ("memory".to_owned(), "32Mi".to_owned())
        ]),
        "no GPU request"
    );
    assert_eq!(
        quantities(resources.limits),
        BTreeMap::from([
            ("cpu".to_owned(), "100m".to_owned()),
            ("memory".to_owned(), "128Mi".to_owned())
        ])
    );
}

#[test]
fn network_policy_admits_exactly_imex_ports_from_same_namespace_peers() {
    let (_, policy) = workload();
    assert_eq!(policy.metadata.name.as_deref(), Some(NAME));
    assert_eq!(policy.metadata.namespace, None);
    let spec = policy.spec.unwrap_or_default();
    assert!(
        selects_exactly_own_label(&spec.pod_selector.clone().unwrap_or_default()),
        "the policy guards the workload's pods: {:?}",
        spec.pod_selector
    );
    assert_eq!(
        spec.policy_types,
        Some(vec!["Ingress".to_owned()]),
        "ingress only: egress stays open"
    );
    assert_eq!(spec.egress, None);

    let rules = spec.ingress.unwrap_or_default();
    assert_eq!(rules.len(), 1, "one ingress rule");
    let rule = &rules[0];
    let peers = rule.from.clone().unwrap_or_default();
    assert_eq!(peers.len(), 1, "one peer");
    let peer = &peers[0];
    assert!(
        selects_exactly_own_label(&peer.pod_selector.clone().unwrap_or_default()),
        "peers are the workload's own pods: {peer:?}"
    );
    assert_eq!(
        peer.namespace_selector, None,
        "no namespaceSelector: the policy's own namespace only"
    );
    assert_eq!(peer.ip_block, None);

    let mut ports: Vec<(String, i32, Option<i32>)> = rule
        .ports
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|port| {
            let number = match port.port {
                Some(IntOrString::Int(number)) => number,
                other => panic!("ports must be numbers, not {other:?}"),
            };
            (
                port.protocol.unwrap_or_else(|| "TCP".to_owned()),
                number,
                port.end_port,
            )
        })
        .collect();
    ports.sort();
    assert_eq!(
        ports,
        [
            ("TCP".to_owned(), 50000, None),
            ("TCP".to_owned(), 50005, None)
        ],
        "the IMEX peer port and the command port, nothing else"
    );
}

#[test]
fn demo_topology_values_match_the_upstream_demo() {
    let values = demo_topology_values();
    // upstream-demo.md §1.7, `docs/demo/compute-domain/topology.yaml`, verbatim apart from the
    // block style of the node lists: the one copy of upstream's document.
    let want: serde_yaml::Value = serde_yaml::from_str(
        r#"
topology:
  enabled: true
  domains:
    - name: demo-domain
      uuid: "00000000-0000-0000-0000-0000000000ab"
      cliques:
        - id: 0
          nodes: [nvml-mock-compute-domain-worker, nvml-mock-compute-domain-worker2]
        - id: 1
          nodes: [nvml-mock-compute-domain-worker3, nvml-mock-compute-domain-worker4]
"#,
    )
    .unwrap_or_else(|err| panic!("the expected document is not YAML: {err}"));
    assert_eq!(values, want);
}
