//! The kind cluster config (`manifests/kind/cluster.yaml`) against a typed
//! mirror of kind's `kind.x-k8s.io/v1alpha4` schema: an unknown or misspelt
//! field fails the parse, as it would make kind ignore or reject it.

use std::collections::BTreeMap;

use integration_tests::repo_root;
use serde::Deserialize;

/// `Cluster` (kind `pkg/apis/config/v1alpha4`).
#[derive(Debug, Deserialize)]
#[allow(
    dead_code,
    reason = "mirrors kind's schema: a field is here to be accepted, not read"
)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Cluster {
    kind: String,
    api_version: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    nodes: Vec<Node>,
    #[serde(default)]
    networking: Option<Networking>,
    #[serde(default)]
    feature_gates: BTreeMap<String, bool>,
    #[serde(default)]
    runtime_config: BTreeMap<String, String>,
    #[serde(default)]
    kubeadm_config_patches: Vec<String>,
    #[serde(default, rename = "kubeadmConfigPatchesJSON6902")]
    kubeadm_config_patches_json6902: Vec<PatchJson6902>,
    #[serde(default)]
    containerd_config_patches: Vec<String>,
    #[serde(default, rename = "containerdConfigPatchesJSON6902")]
    containerd_config_patches_json6902: Vec<String>,
}

/// `Node`.
#[derive(Debug, Deserialize)]
#[allow(
    dead_code,
    reason = "mirrors kind's schema: a field is here to be accepted, not read"
)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Node {
    #[serde(default = "control_plane")]
    role: Role,
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    extra_mounts: Vec<Mount>,
    #[serde(default)]
    extra_port_mappings: Vec<PortMapping>,
    #[serde(default)]
    gpus: Option<String>,
    #[serde(default)]
    kubeadm_config_patches: Vec<String>,
    #[serde(default, rename = "kubeadmConfigPatchesJSON6902")]
    kubeadm_config_patches_json6902: Vec<PatchJson6902>,
}

fn control_plane() -> Role {
    Role::ControlPlane
}

/// `NodeRole`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Role {
    ControlPlane,
    Worker,
}

/// `Networking`.
#[derive(Debug, Deserialize)]
#[allow(
    dead_code,
    reason = "mirrors kind's schema: a field is here to be accepted, not read"
)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Networking {
    ip_family: Option<String>,
    api_server_port: Option<i32>,
    api_server_address: Option<String>,
    pod_subnet: Option<String>,
    service_subnet: Option<String>,
    #[serde(rename = "disableDefaultCNI")]
    disable_default_cni: Option<bool>,
    kube_proxy_mode: Option<String>,
    dns_search: Option<Vec<String>>,
}

/// `PatchJSON6902`.
#[derive(Debug, Deserialize)]
#[allow(
    dead_code,
    reason = "mirrors kind's schema: a field is here to be accepted, not read"
)]
#[serde(deny_unknown_fields)]
struct PatchJson6902 {
    group: String,
    version: String,
    kind: String,
    patch: String,
}

/// `Mount`.
#[derive(Debug, Deserialize)]
#[allow(
    dead_code,
    reason = "mirrors kind's schema: a field is here to be accepted, not read"
)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Mount {
    container_path: String,
    host_path: String,
    read_only: Option<bool>,
    selinux_relabel: Option<bool>,
    propagation: Option<Propagation>,
}

/// `MountPropagation`.
#[derive(Debug, Deserialize)]
#[allow(
    dead_code,
    reason = "mirrors kind's schema: a field is here to be accepted, not read"
)]
enum Propagation {
    None,
    HostToContainer,
    Bidirectional,
}

/// `PortMapping`.
#[derive(Debug, Deserialize)]
#[allow(
    dead_code,
    reason = "mirrors kind's schema: a field is here to be accepted, not read"
)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PortMapping {
    container_port: Option<i32>,
    host_port: Option<i32>,
    listen_address: Option<String>,
    protocol: Option<String>,
}

fn cluster() -> Cluster {
    let path = repo_root().join("manifests/kind/cluster.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| {
        panic!(
            "cannot read {} ({err}): the node-image part of the tree writes it",
            path.display()
        )
    });
    serde_yaml::from_str(&text)
        .unwrap_or_else(|err| panic!("{} is not a kind v1alpha4 Cluster: {err}", path.display()))
}

/// Every containerd patch, parsed as TOML.
fn containerd_patches(cluster: &Cluster) -> Vec<toml::Table> {
    cluster
        .containerd_config_patches
        .iter()
        .enumerate()
        .map(|(index, patch)| {
            patch.parse().unwrap_or_else(|err| {
                panic!("containerdConfigPatches[{index}] is not TOML: {err}\n{patch}")
            })
        })
        .collect()
}

/// `plugins.<plugin>.<key>` across all patches (the last patch wins, as in kind).
fn plugin_setting<'a>(
    patches: &'a [toml::Table],
    plugin: &str,
    key: &str,
) -> Option<&'a toml::Value> {
    patches
        .iter()
        .rev()
        .find_map(|patch| patch.get("plugins")?.get(plugin)?.get(key))
}

#[test]
fn kind_config_is_a_v1alpha4_cluster_of_one_control_plane_and_four_workers() {
    let cluster = cluster();
    assert_eq!(cluster.kind, "Cluster");
    assert_eq!(cluster.api_version, "kind.x-k8s.io/v1alpha4");
    let roles: Vec<Role> = cluster.nodes.iter().map(|node| node.role).collect();
    assert_eq!(
        roles,
        [
            Role::ControlPlane,
            Role::Worker,
            Role::Worker,
            Role::Worker,
            Role::Worker
        ]
    );
    if let Some(name) = &cluster.name {
        assert_eq!(name, "nvml-mock-compute-domain", "the default cluster name");
    }
}

#[test]
fn kind_config_workers_carry_their_rack_and_clique_labels() {
    // Informational, as upstream: worker, worker2 -> clique 0; worker3, worker4 -> clique 1;
    // all in rack 0. The file is the template of every generated config: its
    // node list is the default layout's (harness `kind_config.rs` pins that),
    // and a generated list has only these fields, so this schema check covers it.
    let cluster = cluster();
    let places: Vec<(Option<&str>, Option<&str>)> = cluster
        .nodes
        .iter()
        .filter(|node| node.role == Role::Worker)
        .map(|node| {
            let label = |key: &str| node.labels.get(key).map(String::as_str);
            (label("nvml-mock/rack"), label("nvml-mock/clique"))
        })
        .collect();
    let at = |rack, clique| (Some(rack), Some(clique));
    assert_eq!(
        places,
        [at("0", "0"), at("0", "0"), at("0", "1"), at("0", "1")]
    );
}

#[test]
fn kind_config_enables_nri_on_the_demo_socket_and_cdi() {
    let cluster = cluster();
    let patches = containerd_patches(&cluster);
    assert!(
        !patches.is_empty(),
        "no containerdConfigPatches: NRI would be off"
    );
    let nri = "io.containerd.nri.v1.nri";
    assert_eq!(
        plugin_setting(&patches, nri, "disable"),
        Some(&toml::Value::Boolean(false)),
        "plugins.\"{nri}\".disable must be false"
    );
    assert_eq!(
        plugin_setting(&patches, nri, "socket_path"),
        Some(&toml::Value::String("/var/run/nri/nri.sock".to_owned())),
        "plugins.\"{nri}\".socket_path"
    );
    // CDI: the containerd 1.x/2.x (config version 2) key or the version 3 key.
    let cdi = plugin_setting(&patches, "io.containerd.grpc.v1.cri", "enable_cdi")
        .or_else(|| plugin_setting(&patches, "io.containerd.cri.v1.runtime", "enable_cdi"));
    assert_eq!(
        cdi,
        Some(&toml::Value::Boolean(true)),
        "enable_cdi must be true"
    );
}
