//! Acceptance tests of the Helm chart (`manifests/helm/nvml-mock`), the kind
//! config and the demo manifests.
//!
//! Real peer: `helm` at the pinned version (`manifests/versions.toml`). Every
//! chart test renders with `helm template` and parses each object into its
//! k8s-openapi type, strictly (no field the API type does not know).
//! Golden files: `UPDATE_GOLDEN=1 cargo test -p integration-tests --test chart`.

#[path = "chart/demo_manifests.rs"]
mod demo_manifests;
#[path = "chart/golden.rs"]
mod golden;
#[path = "chart/helm.rs"]
mod helm;
#[path = "chart/kind_config.rs"]
mod kind_config;

use std::collections::BTreeMap;

use k8s_openapi::api::{
    apps::v1::DaemonSet,
    core::v1::{Container, Probe},
    rbac::v1::{PolicyRule, Subject},
};

use crate::helm::{args, container, fixture, pod_spec, run_helm, Template, NAMESPACE};

const STAGER: &str = "nvml-mock";
/// The profiles the chart ships (`profiles/<name>.yaml`).
const PROFILES: [&str; 7] = ["a100", "b200", "gb200", "gb300", "h100", "l40s", "t4"];
const NRI: &str = "nvml-mock-nri";

fn stager_container(daemon_set: &DaemonSet) -> &Container {
    container(daemon_set, "stager")
}

fn nri_container(daemon_set: &DaemonSet) -> &Container {
    container(daemon_set, "nri-plugin")
}

/// The container's volume mounts as (volume, path, read-only).
fn mounts(container: &Container) -> Vec<(&str, &str, bool)> {
    container
        .volume_mounts
        .iter()
        .flatten()
        .map(|mount| {
            (
                mount.name.as_str(),
                mount.mount_path.as_str(),
                mount.read_only.unwrap_or(false),
            )
        })
        .collect()
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| (*item).to_owned()).collect()
}

/// Asserts the container's entrypoint and its arguments, in order.
fn assert_entrypoint(container: &Container, command: &str, expected_args: &[&str]) {
    assert_eq!(container.command.as_deref(), Some(&owned(&[command])[..]));
    assert_eq!(args(container), expected_args);
}

/// The container's environment as name -> fieldRef path, or `=<value>` for a
/// literal; any other source fails.
fn field_env(container: &Container) -> BTreeMap<&str, String> {
    container
        .env
        .iter()
        .flatten()
        .map(|var| {
            let field = var
                .value_from
                .as_ref()
                .and_then(|from| from.field_ref.as_ref())
                .map(|field| field.field_path.clone())
                .or_else(|| var.value.as_ref().map(|value| format!("={value}")))
                .unwrap_or_else(|| panic!("env {} is neither a fieldRef nor a value", var.name));
            (var.name.as_str(), field)
        })
        .collect()
}

/// The pod's hostPath volumes as (volume, host path); other volume kinds are left out.
fn host_paths(daemon_set: &DaemonSet) -> Vec<(&str, &str)> {
    pod_spec(daemon_set)
        .volumes
        .iter()
        .flatten()
        .filter_map(|volume| {
            let host = volume.host_path.as_ref()?;
            Some((volume.name.as_str(), host.path.as_str()))
        })
        .collect()
}

/// The arguments of one container in the rendered DaemonSet that start with one of `prefixes`.
fn args_starting_with(
    template: Template,
    daemon_set: &str,
    container_name: &str,
    prefixes: &[&str],
) -> Vec<String> {
    let rendered = template.render();
    args(container(&rendered.daemon_set(daemon_set), container_name))
        .into_iter()
        .filter(|arg| prefixes.iter().any(|prefix| arg.starts_with(prefix)))
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------
// helm lint

#[test]
fn lint_is_clean_with_defaults_and_strict() {
    for strict in [false, true] {
        let mut lint = owned(&["lint", "manifests/helm/nvml-mock"]);
        if strict {
            lint.push("--strict".to_owned());
        }
        let (ok, stdout, stderr) = run_helm(&lint);
        assert!(ok, "helm {lint:?} failed:\n{stdout}\n{stderr}");
        assert!(
            stdout.contains("1 chart(s) linted, 0 chart(s) failed"),
            "unexpected lint summary:\n{stdout}"
        );
        assert!(
            !stdout.contains("[WARNING]") && !stdout.contains("[ERROR]"),
            "helm {lint:?} reported findings:\n{stdout}"
        );
    }
}

#[test]
fn lint_is_clean_with_demo_values() {
    let lint = owned(&[
        "lint",
        "manifests/helm/nvml-mock",
        "--strict",
        "--namespace",
        NAMESPACE,
        "-f",
        "tests/chart/values/demo.yaml",
        "-f",
        "manifests/demo/topology.yaml",
    ]);
    let (ok, stdout, stderr) = run_helm(&lint);
    assert!(ok, "helm {lint:?} failed:\n{stdout}\n{stderr}");
    assert!(
        !stdout.contains("[WARNING]") && !stdout.contains("[ERROR]"),
        "helm {lint:?} reported findings:\n{stdout}"
    );
}

// ---------------------------------------------------------------------------
// What is rendered

/// Asserts that the template renders exactly these objects, as (kind, name), in any order.
fn assert_renders_exactly(template: Template, expected: &[(&str, &str)]) {
    let mut got = template.render().kinds_and_names();
    got.sort();
    let mut want: Vec<(String, String)> = expected
        .iter()
        .map(|(kind, name)| ((*kind).to_owned(), (*name).to_owned()))
        .collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn demo_renders_exactly_the_expected_objects() {
    assert_renders_exactly(
        Template::demo(),
        &[
            ("ClusterRole", "nvml-mock"),
            ("ClusterRoleBinding", "nvml-mock"),
            ("ConfigMap", "nvml-mock-config"),
            ("ConfigMap", "nvml-mock-topology"),
            ("DaemonSet", "nvml-mock"),
            ("DaemonSet", "nvml-mock-nri"),
            ("Role", "nvml-mock"),
            ("RoleBinding", "nvml-mock"),
            ("ServiceAccount", "nvml-mock"),
        ],
    );
}

#[test]
fn defaults_render_no_nri_no_topology() {
    assert_renders_exactly(
        Template::defaults(),
        &[
            ("ClusterRole", "nvml-mock"),
            ("ClusterRoleBinding", "nvml-mock"),
            ("ConfigMap", "nvml-mock-config"),
            ("DaemonSet", "nvml-mock"),
            // The stager reads its own DaemonSet on SIGTERM.
            ("Role", "nvml-mock"),
            ("RoleBinding", "nvml-mock"),
            ("ServiceAccount", "nvml-mock"),
        ],
    );
}

#[test]
fn every_namespaced_object_is_in_the_release_namespace() {
    let rendered = Template::demo().render();
    for object in &rendered.objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        let namespace = object["metadata"]["namespace"].as_str();
        if kind == "ClusterRole" || kind == "ClusterRoleBinding" {
            assert_eq!(namespace, None, "{kind} is cluster-scoped");
        } else {
            assert_eq!(
                namespace,
                Some(NAMESPACE),
                "{kind} {:?}",
                object["metadata"]["name"]
            );
        }
    }
}

#[test]
fn names_follow_the_release_like_upstream() {
    let cases = [
        // (release, extra values, expected fullname)
        ("nvml-mock", None, "nvml-mock"),
        ("demo", None, "demo-nvml-mock"),
        ("my-nvml-mock-test", None, "my-nvml-mock-test"),
        ("demo", Some("fullnameOverride=mock"), "mock"),
        ("demo", Some("nameOverride=gpu"), "demo-gpu"),
    ];
    for (release, extra, fullname) in cases {
        let mut template = Template::defaults()
            .release(release)
            .set("nri.enabled=true");
        if let Some(extra) = extra {
            template = template.set(extra);
        }
        let rendered = template.render();
        let stager = rendered.daemon_set(fullname);
        let nri = rendered.daemon_set(&format!("{fullname}-nri"));
        assert_eq!(
            pod_spec(&stager).service_account_name.as_deref(),
            Some(fullname)
        );
        assert!(rendered.has("ConfigMap", &format!("{fullname}-config")));
        let labels = nri.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("app.kubernetes.io/instance").map(String::as_str),
            Some(release)
        );
    }
}

#[test]
fn stager_and_nri_selectors_do_not_overlap() {
    let rendered = Template::demo().render();
    let selector = |name: &str| -> BTreeMap<String, String> {
        rendered
            .daemon_set(name)
            .spec
            .and_then(|spec| spec.selector.match_labels)
            .unwrap_or_default()
    };
    let stager = selector(STAGER);
    let nri = selector(NRI);
    assert_eq!(
        stager.get("app.kubernetes.io/name").map(String::as_str),
        Some("nvml-mock")
    );
    assert_eq!(
        nri.get("app.kubernetes.io/name").map(String::as_str),
        Some("nvml-mock-nri")
    );
    // Selecting the stager's pods by name (as scenario 3 does) never selects the plugin.
    let nri_pod_labels = rendered
        .daemon_set(NRI)
        .spec
        .and_then(|spec| spec.template.metadata)
        .and_then(|meta| meta.labels)
        .unwrap_or_default();
    assert!(stager
        .iter()
        .any(|(key, value)| nri_pod_labels.get(key) != Some(value)));
}

// ---------------------------------------------------------------------------
// Image

#[test]
fn image_is_repository_tag_or_repository_digest() {
    let image = |template: Template| -> String {
        let rendered = template.set("nri.enabled=true").render();
        let stager = stager_container(&rendered.daemon_set(STAGER))
            .image
            .clone()
            .unwrap_or_default();
        let nri = nri_container(&rendered.daemon_set(NRI))
            .image
            .clone()
            .unwrap_or_default();
        assert_eq!(stager, nri, "both DaemonSets run the same image");
        stager
    };
    assert_eq!(image(Template::defaults()), "nvml-mock:0.1.0");
    assert_eq!(
        image(Template::defaults().set("image.tag=sha256-abc")),
        "nvml-mock:sha256-abc"
    );
    let digest = format!("sha256:{}", "ab".repeat(32));
    assert_eq!(
        image(
            Template::defaults()
                .set("image.repository=registry.local/mock")
                .set("image.tag=ignored")
                .set(&format!("image.digest={digest}"))
        ),
        format!("registry.local/mock@{digest}")
    );
}

#[test]
fn a_new_image_tag_changes_both_pod_templates() {
    let template = |tag: &str| Template::demo().set(&format!("image.tag={tag}")).render();
    let (one, two) = (template("sha256-aaaa"), template("sha256-bbbb"));
    for name in [STAGER, NRI] {
        let before = one.daemon_set(name).spec.map(|spec| spec.template);
        let after = two.daemon_set(name).spec.map(|spec| spec.template);
        assert_ne!(before, after, "{name} would not roll on a new image");
    }
}

// ---------------------------------------------------------------------------
// Profile and topology ConfigMaps

#[test]
fn profile_configmap_holds_the_named_profile_verbatim() {
    for profile in PROFILES {
        let path = helm::chart_dir().join(format!("profiles/{profile}.yaml"));
        let want = std::fs::read_to_string(&path).unwrap_or_else(|err| {
            panic!(
                "{} is missing ({err}): the profile owner ships it in the chart",
                path.display()
            )
        });
        let rendered = Template::defaults()
            .set(&format!("gpu.profile={profile}"))
            .render();
        let data = rendered
            .config_map("nvml-mock-config")
            .data
            .unwrap_or_default();
        assert_eq!(
            data.get("config.yaml").map(String::as_str),
            Some(format!("{}\n", want.trim_end()).as_str()),
            "profile {profile}"
        );
    }
}

#[test]
fn custom_config_replaces_the_named_profile() {
    let custom = fixture("values/custom-profile.yaml");
    let want = std::fs::read_to_string(&custom)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", custom.display()));
    let file_arg = format!("gpu.customConfig={}", custom.display());
    let (ok, stdout, stderr) = run_helm(&owned(&[
        "template",
        "nvml-mock",
        "manifests/helm/nvml-mock",
        "--namespace",
        NAMESPACE,
        "--set-file",
        &file_arg,
    ]));
    assert!(ok, "helm template failed:\n{stderr}");
    let rendered = helm::Rendered::parse(&stdout);
    let data = rendered
        .config_map("nvml-mock-config")
        .data
        .unwrap_or_default();
    assert_eq!(
        data.get("config.yaml").map(String::as_str),
        Some(format!("{}\n", want.trim_end()).as_str())
    );
}

#[test]
fn topology_configmap_is_version_1_and_the_domains_of_the_values() {
    let rendered = Template::demo().render();
    let data = rendered
        .config_map("nvml-mock-topology")
        .data
        .unwrap_or_default();
    let text = data
        .get("topology.yaml")
        .unwrap_or_else(|| panic!("no topology.yaml key in {data:?}"));
    let document: serde_yaml::Value = serde_yaml::from_str(text)
        .unwrap_or_else(|err| panic!("topology.yaml is not YAML: {err}\n{text}"));
    let values_path = integration_tests::repo_root().join("manifests/demo/topology.yaml");
    let values: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(&values_path)
            .unwrap_or_else(|err| panic!("cannot read {}: {err}", values_path.display())),
    )
    .unwrap_or_else(|err| panic!("{} is not YAML: {err}", values_path.display()));

    let keys: Vec<&str> = document
        .as_mapping()
        .map(|mapping| {
            mapping
                .keys()
                .filter_map(serde_yaml::Value::as_str)
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(keys, ["version", "domains"]);
    assert_eq!(document["version"], serde_yaml::Value::from(1));
    assert_eq!(document["domains"], values["topology"]["domains"]);
    // The uuid stays a string and the clique ids stay integers.
    assert_eq!(
        document["domains"][0]["uuid"].as_str(),
        Some("00000000-0000-0000-0000-0000000000ab")
    );
    assert_eq!(document["domains"][0]["cliques"][1]["id"].as_u64(), Some(1));
}

#[test]
fn topology_with_no_domains_renders_an_empty_list() {
    let rendered = Template::defaults().set("topology.enabled=true").render();
    let data = rendered
        .config_map("nvml-mock-topology")
        .data
        .unwrap_or_default();
    assert_eq!(
        data.get("topology.yaml").map(String::as_str),
        Some("version: 1\ndomains: []\n")
    );
}

#[test]
fn topology_disabled_renders_no_configmap_rule_or_flag() {
    let rendered = Template::demo().set("topology.enabled=false").render();
    assert!(!rendered.has("ConfigMap", "nvml-mock-topology"));
    assert_eq!(
        rendered.role("nvml-mock").rules,
        Some(vec![owner_rule("nvml-mock")]),
        "only the stager's own DaemonSet stays readable"
    );
    let stager = rendered.daemon_set(STAGER);
    assert!(
        !args(stager_container(&stager))
            .iter()
            .any(|arg| arg.starts_with("--topology-configmap")),
        "stager still watches a topology"
    );
}

#[test]
fn topology_changes_do_not_touch_pod_templates_but_profile_changes_do() {
    let rebind = "topology:\n  enabled: true\n  domains:\n    - name: rebinder\n      uuid: \"00000000-0000-0000-0000-0000000000ff\"\n      cliques:\n        - id: 99\n          nodes: [nvml-mock-compute-domain-worker, nvml-mock-compute-domain-worker2, nvml-mock-compute-domain-worker3, nvml-mock-compute-domain-worker4]\n";
    let demo = Template::demo().render();
    let rebound = Template::demo().values_yaml(rebind).render();
    assert_ne!(
        demo.config_map("nvml-mock-topology").data,
        rebound.config_map("nvml-mock-topology").data,
        "the rebind values did not change the topology"
    );
    for name in [STAGER, NRI] {
        assert_eq!(
            demo.daemon_set(name),
            rebound.daemon_set(name),
            "a topology change alters DaemonSet {name}, which would restart its pods"
        );
    }

    let checksum = |rendered: &helm::Rendered| {
        rendered
            .daemon_set(STAGER)
            .spec
            .and_then(|spec| spec.template.metadata)
            .and_then(|meta| meta.annotations)
            .and_then(|annotations| annotations.get("checksum/config").cloned())
            .unwrap_or_default()
    };
    let gb200 = checksum(&demo);
    assert!(
        gb200.len() == 64 && gb200.bytes().all(|byte| byte.is_ascii_hexdigit()),
        "checksum/config is not a sha256: {gb200:?}"
    );
    let h100 = checksum(&Template::demo().set("gpu.profile=h100").render());
    assert_ne!(gb200, h100, "a new profile must restage the nodes");
}

// ---------------------------------------------------------------------------
// Stager

#[test]
fn stager_args_in_the_demo() {
    let rendered = Template::demo().render();
    let stager = rendered.daemon_set(STAGER);
    let container = stager_container(&stager);
    assert_entrypoint(
        container,
        "/usr/local/bin/nvml-mock-stager",
        &[
            "--node-name=$(NODE_NAME)",
            "--namespace=$(POD_NAMESPACE)",
            "--overlay-dir=/host/var/lib/nvml-mock",
            "--profile=/etc/nvml-mock/config.yaml",
            "--topology-configmap=nvml-mock-topology",
            "--imex-channels",
            "--channel-count=2048",
            "--channel-major=240",
            "--caps-major=241",
        ],
    );
    assert_eq!(
        field_env(container),
        BTreeMap::from([
            ("NODE_NAME", "spec.nodeName".to_owned()),
            ("POD_NAMESPACE", "metadata.namespace".to_owned()),
            // SIGTERM cleans up only when this DaemonSet is being removed.
            ("OWNER_DAEMONSET", "=nvml-mock".to_owned()),
        ])
    );
    assert_eq!(
        mounts(container),
        [
            ("host-overlay", "/host/var/lib/nvml-mock", false),
            ("gpu-config", "/etc/nvml-mock", true),
        ]
    );
    assert_eq!(
        host_paths(&stager),
        [("host-overlay", "/var/lib/nvml-mock")]
    );
    let volumes = pod_spec(&stager).volumes.clone().unwrap_or_default();
    let host = volumes
        .iter()
        .find_map(|volume| volume.host_path.clone())
        .unwrap_or_else(|| panic!("no host-overlay hostPath volume"));
    assert_eq!(host.type_.as_deref(), Some("DirectoryOrCreate"));
    let config = volumes
        .iter()
        .find(|volume| volume.name == "gpu-config")
        .and_then(|volume| volume.config_map.clone())
        .unwrap_or_else(|| panic!("no gpu-config ConfigMap volume"));
    assert_eq!(config.name, "nvml-mock-config");
}

#[test]
fn stager_overlay_follows_the_host_path() {
    let rendered = Template::demo()
        .set("nri.overlay.hostPath=/srv/mock")
        .render();
    let stager = rendered.daemon_set(STAGER);
    assert_eq!(host_paths(&stager), [("host-overlay", "/srv/mock")]);
    // The stager's own view does not move: its flag names the mount point.
    assert!(args(stager_container(&stager)).contains(&"--overlay-dir=/host/var/lib/nvml-mock"));
}

#[test]
fn stager_gets_gpu_count_only_when_set() {
    let count_args =
        |template: Template| args_starting_with(template, STAGER, "stager", &["--gpu-count"]);
    assert_eq!(count_args(Template::demo()), Vec::<String>::new());
    assert_eq!(
        count_args(Template::demo().set("gpu.count=4")),
        ["--gpu-count=4"]
    );
}

#[test]
fn channel_settings_reach_the_stager_only_when_enabled() {
    let channel_args = |template: Template| {
        args_starting_with(
            template,
            STAGER,
            "stager",
            &[
                "--imex-channels",
                "--channel-count",
                "--channel-major",
                "--caps-major",
            ],
        )
    };
    assert_eq!(
        channel_args(Template::demo().set("imex.mockChannels.enabled=false")),
        Vec::<String>::new()
    );
    assert_eq!(
        channel_args(
            Template::defaults()
                .set("imex.mockChannels.enabled=true")
                .set("imex.mockChannels.channelCount=8")
        ),
        [
            "--imex-channels",
            "--channel-count=8",
            "--channel-major=235",
            "--caps-major=236"
        ]
    );
    assert_eq!(
        channel_args(
            Template::demo()
                .set("imex.mockChannels.channelMajor=4095")
                .set("imex.mockChannels.capsMajor=1")
        ),
        [
            "--imex-channels",
            "--channel-count=2048",
            "--channel-major=4095",
            "--caps-major=1"
        ]
    );
}

#[test]
fn update_strategy_grace_and_placement_reach_both_daemon_sets() {
    let rendered = Template::demo()
        .set_json(r#"nodeSelector={"pool":"gpu"}"#)
        .set_json(r#"tolerations=[{"key":"gpu","operator":"Exists","effect":"NoSchedule"}]"#)
        .render();
    for name in [STAGER, NRI] {
        let daemon_set = rendered.daemon_set(name);
        let spec = daemon_set.spec.clone().unwrap_or_default();
        let strategy = spec.update_strategy.unwrap_or_default();
        assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"), "{name}");
        assert_eq!(
            strategy
                .rolling_update
                .and_then(|rolling| rolling.max_unavailable),
            Some(
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(
                    "100%".to_owned()
                )
            ),
            "{name}"
        );
        let pod = pod_spec(&daemon_set);
        assert_eq!(pod.termination_grace_period_seconds, Some(1), "{name}");
        assert_eq!(
            pod.node_selector,
            Some(BTreeMap::from([("pool".to_owned(), "gpu".to_owned())])),
            "{name}"
        );
        let tolerations = pod.tolerations.clone().unwrap_or_default();
        assert_eq!(tolerations.len(), 1, "{name}");
        assert_eq!(tolerations[0].key.as_deref(), Some("gpu"), "{name}");
    }
    // The demo's rollingUpdate block is dropped: the API rejects it with OnDelete.
    let on_delete = Template::demo()
        .set("updateStrategy.type=OnDelete")
        .render();
    for name in [STAGER, NRI] {
        let strategy = on_delete
            .daemon_set(name)
            .spec
            .and_then(|spec| spec.update_strategy)
            .unwrap_or_default();
        assert_eq!(strategy.type_.as_deref(), Some("OnDelete"), "{name}");
        assert_eq!(strategy.rolling_update, None, "{name}");
    }
}

#[test]
fn default_tolerations_reach_every_node() {
    let rendered = Template::defaults().set("nri.enabled=true").render();
    for name in [STAGER, NRI] {
        let daemon_set = rendered.daemon_set(name);
        let tolerations = pod_spec(&daemon_set)
            .tolerations
            .clone()
            .unwrap_or_default();
        assert_eq!(tolerations.len(), 1, "{name}");
        assert_eq!(tolerations[0].operator.as_deref(), Some("Exists"), "{name}");
        assert_eq!(tolerations[0].key, None, "{name}");
    }
}

// ---------------------------------------------------------------------------
// NRI plugin

#[test]
fn nri_args_in_the_demo() {
    let rendered = Template::demo().render();
    let nri = rendered.daemon_set(NRI);
    let container = nri_container(&nri);
    assert_entrypoint(
        container,
        "/usr/local/bin/nvml-mock-nri",
        &[
            "--socket-path=/var/run/nri/nri.sock",
            "--plugin-name=nvml-mock",
            "--plugin-index=10",
            "--overlay-host-path=/var/lib/nvml-mock",
            "--overlay-mount-path=/opt/nvml-mock",
            "--node-name=$(NODE_NAME)",
            "--opt-out-annotation=nvml-mock.nvidia.com/inject",
            "--device-annotation=nvml-mock.nvidia.com/devices",
            "--imex-channel-annotation=nvml-mock.nvidia.com/imex-channels",
            "--excluded-namespaces=mokka,kube-system",
            "--health-addr=:8080",
        ],
    );
    assert_eq!(
        field_env(container),
        BTreeMap::from([("NODE_NAME", "spec.nodeName".to_owned())])
    );
    assert_eq!(
        mounts(container),
        [
            ("nri-socket-dir", "/var/run/nri", false),
            ("overlay", "/var/lib/nvml-mock", true),
        ]
    );
    let volumes = pod_spec(&nri).volumes.clone().unwrap_or_default();
    assert_eq!(
        host_paths(&nri).len(),
        volumes.len(),
        "every NRI volume is a hostPath"
    );
    assert_eq!(
        host_paths(&nri),
        [
            ("nri-socket-dir", "/var/run/nri"),
            ("overlay", "/var/lib/nvml-mock"),
        ]
    );
}

#[test]
fn nri_is_not_rendered_unless_enabled() {
    assert!(!Template::defaults().render().has("DaemonSet", NRI));
    assert!(!Template::demo()
        .set("nri.enabled=false")
        .render()
        .has("DaemonSet", NRI));
}

#[test]
fn nri_socket_overlay_annotations_and_exclusions_follow_values() {
    let rendered = Template::demo()
        .set("nri.socketPath=/run/containerd/nri/plugin.sock")
        .set("nri.pluginName=gpu-mock")
        .set("nri.overlay.hostPath=/srv/mock")
        .set("nri.overlay.mountPath=/mock")
        .set("nri.optOutAnnotation=example.com/inject")
        .set("nri.deviceAnnotation=example.com/devices")
        .set("nri.imexChannelAnnotation=example.com/channels")
        .set_json(r#"nri.excludedNamespaces=["monitoring","kube-system","ci"]"#)
        .render();
    let nri = rendered.daemon_set(NRI);
    let container = nri_container(&nri);
    assert_eq!(
        args(container),
        [
            "--socket-path=/run/containerd/nri/plugin.sock",
            "--plugin-name=gpu-mock",
            "--plugin-index=10",
            "--overlay-host-path=/srv/mock",
            "--overlay-mount-path=/mock",
            "--node-name=$(NODE_NAME)",
            "--opt-out-annotation=example.com/inject",
            "--device-annotation=example.com/devices",
            "--imex-channel-annotation=example.com/channels",
            "--excluded-namespaces=mokka,kube-system,monitoring,ci",
            "--health-addr=:8080",
        ]
    );
    assert_eq!(
        mounts(container),
        [
            ("nri-socket-dir", "/run/containerd/nri", false),
            ("overlay", "/srv/mock", true)
        ]
    );
    assert_eq!(
        host_paths(&nri),
        [
            ("nri-socket-dir", "/run/containerd/nri"),
            ("overlay", "/srv/mock")
        ]
    );
}

#[test]
fn nri_plugin_index_is_two_digits() {
    let index =
        |template: Template| args_starting_with(template, NRI, "nri-plugin", &["--plugin-index="]);
    assert_eq!(
        index(Template::demo().set("nri.pluginIndex=5")),
        ["--plugin-index=05"]
    );
    assert_eq!(
        index(Template::demo().set_string("nri.pluginIndex=42")),
        ["--plugin-index=42"]
    );
}

#[test]
fn nri_health_port_drives_flag_port_and_probes() {
    for (template, port) in [
        (Template::demo(), 8080),
        (Template::demo().set("nri.healthPort=9310"), 9310),
    ] {
        let rendered = template.render();
        let nri = rendered.daemon_set(NRI);
        let container = nri_container(&nri);
        let health_addr = format!("--health-addr=:{port}");
        assert!(args(container).contains(&health_addr.as_str()));
        let ports = container.ports.clone().unwrap_or_default();
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].name.as_deref(), Some("health"));
        assert_eq!(ports[0].container_port, port);
        assert_eq!(ports[0].protocol.as_deref(), Some("TCP"));
        let probe_path = |probe: Option<&Probe>| {
            let get = probe
                .and_then(|probe| probe.http_get.clone())
                .unwrap_or_else(|| panic!("probe without httpGet"));
            assert_eq!(
                get.port,
                k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(
                    "health".to_owned()
                ),
                "probes target the named port"
            );
            get.path.unwrap_or_default()
        };
        assert_eq!(probe_path(container.readiness_probe.as_ref()), "/readyz");
        assert_eq!(probe_path(container.liveness_probe.as_ref()), "/healthz");
        let readiness = container.readiness_probe.clone().unwrap_or_default();
        assert_eq!(
            (
                readiness.period_seconds,
                readiness.timeout_seconds,
                readiness.failure_threshold
            ),
            (Some(10), Some(2), Some(2))
        );
        let liveness = container.liveness_probe.clone().unwrap_or_default();
        assert_eq!(
            (
                liveness.period_seconds,
                liveness.timeout_seconds,
                liveness.failure_threshold
            ),
            (Some(10), Some(2), Some(3))
        );
    }
}

#[test]
fn nri_null_liveness_probe_is_dropped_and_readiness_stays() {
    let rendered = Template::demo()
        .values_yaml("nri:\n  livenessProbe: null\n")
        .render();
    let nri = rendered.daemon_set(NRI);
    let container = nri_container(&nri);
    assert_eq!(container.liveness_probe, None);
    assert!(container.readiness_probe.is_some());
}

// ---------------------------------------------------------------------------
// RBAC

fn rule(resources: &[&str], names: Option<&[&str]>, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(owned(&[""])),
        resources: Some(owned(resources)),
        resource_names: names.map(owned),
        verbs: owned(verbs),
        non_resource_urls: None,
    }
}

/// The stager's `get` of its own DaemonSet (`name`).
fn owner_rule(name: &str) -> PolicyRule {
    PolicyRule {
        api_groups: Some(owned(&["apps"])),
        ..rule(&["daemonsets"], Some(&[name]), &["get"])
    }
}

fn service_account_subject() -> Vec<Subject> {
    vec![Subject {
        kind: "ServiceAccount".to_owned(),
        name: "nvml-mock".to_owned(),
        namespace: Some(NAMESPACE.to_owned()),
        api_group: None,
    }]
}

#[test]
fn rbac_grants_exactly_what_the_stager_needs() {
    let rendered = Template::demo().render();

    let cluster_role = rendered.cluster_role("nvml-mock");
    assert_eq!(
        cluster_role.rules,
        Some(vec![rule(&["nodes"], None, &["get", "patch"])])
    );
    assert_eq!(cluster_role.aggregation_rule, None);

    let binding = rendered.cluster_role_binding("nvml-mock");
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(binding.role_ref.name, "nvml-mock");
    assert_eq!(binding.role_ref.api_group, "rbac.authorization.k8s.io");
    assert_eq!(binding.subjects, Some(service_account_subject()));

    let role = rendered.role("nvml-mock");
    assert_eq!(
        role.rules,
        Some(vec![
            owner_rule("nvml-mock"),
            rule(
                &["configmaps"],
                Some(&["nvml-mock-topology"]),
                &["get", "list", "watch"]
            )
        ])
    );
    let binding = rendered.role_binding("nvml-mock");
    assert_eq!(binding.role_ref.kind, "Role");
    assert_eq!(binding.role_ref.name, "nvml-mock");
    assert_eq!(binding.subjects, Some(service_account_subject()));

    let account = rendered.service_account("nvml-mock");
    assert_eq!(
        account.automount_service_account_token,
        Some(false),
        "only pods that ask for the token get it"
    );
}

#[test]
fn rbac_role_follows_the_fullname() {
    let rendered = Template::demo().release("lab").render();
    let role = rendered.role("lab-nvml-mock");
    let names = role
        .rules
        .unwrap_or_default()
        .into_iter()
        .flat_map(|rule| rule.resource_names.unwrap_or_default())
        .collect::<Vec<_>>();
    assert_eq!(names, ["lab-nvml-mock", "lab-nvml-mock-topology"]);
    assert!(rendered.has("ConfigMap", "lab-nvml-mock-topology"));
    let binding = rendered.cluster_role_binding("lab-nvml-mock");
    assert_eq!(
        binding
            .subjects
            .unwrap_or_default()
            .iter()
            .map(|subject| subject.name.as_str())
            .collect::<Vec<_>>(),
        ["lab-nvml-mock"]
    );
}

// ---------------------------------------------------------------------------
// Privileges

#[test]
fn only_the_stager_container_is_privileged() {
    let rendered = Template::demo().render();
    let mut privileged = Vec::new();
    for (kind, name) in rendered.kinds_and_names() {
        if kind != "DaemonSet" {
            continue;
        }
        let daemon_set = rendered.daemon_set(&name);
        let pod = pod_spec(&daemon_set);
        assert_ne!(pod.host_network, Some(true), "{name} uses the host network");
        // Only the NRI plugin, for healing (asserted in nri_plugin_runs_without_privileges).
        if name != NRI {
            assert_ne!(
                pod.host_pid,
                Some(true),
                "{name} uses the host PID namespace"
            );
        }
        assert_ne!(
            pod.host_ipc,
            Some(true),
            "{name} uses the host IPC namespace"
        );
        assert!(pod.init_containers.is_none(), "{name} has init containers");
        for container in &pod.containers {
            let context = container.security_context.clone().unwrap_or_default();
            if context.privileged == Some(true) {
                privileged.push(format!("{name}/{}", container.name));
            }
        }
    }
    assert_eq!(privileged, ["nvml-mock/stager"]);

    let stager = rendered.daemon_set(STAGER);
    let context = stager_container(&stager)
        .security_context
        .clone()
        .unwrap_or_default();
    assert_eq!(context.read_only_root_filesystem, Some(true));
    assert_eq!(
        pod_spec(&stager).automount_service_account_token,
        Some(true),
        "the stager needs the API"
    );
}

#[test]
fn nri_plugin_runs_without_privileges() {
    let rendered = Template::demo().render();
    let nri = rendered.daemon_set(NRI);
    let pod = pod_spec(&nri);
    assert_eq!(pod.automount_service_account_token, Some(false));
    assert_eq!(pod.host_pid, Some(true), "healing sees containers' pids");
    let context = nri_container(&nri)
        .security_context
        .clone()
        .unwrap_or_else(|| panic!("the NRI container has no securityContext"));
    assert_eq!(context.privileged, None);
    assert_eq!(context.allow_privilege_escalation, Some(false));
    assert_eq!(context.read_only_root_filesystem, Some(true));
    assert_eq!(context.run_as_user, Some(0), "the NRI socket is root-only");
    let capabilities = context.capabilities.unwrap_or_default();
    assert_eq!(capabilities.drop, Some(owned(&["ALL"])));
    assert_eq!(
        capabilities.add,
        Some(owned(&["KILL"])),
        "healing may stop a missed container's process, nothing more"
    );
    let unhealed = Template::demo().set("nri.heal=false").render();
    let unhealed = unhealed.daemon_set(NRI);
    assert_eq!(
        pod_spec(&unhealed).host_pid,
        None,
        "nri.heal=false: no hostPID"
    );
    let capabilities = nri_container(&unhealed)
        .security_context
        .clone()
        .and_then(|context| context.capabilities)
        .unwrap_or_default();
    assert_eq!(capabilities.add, None, "nri.heal=false: no capability");
    assert_eq!(
        pod.security_context
            .clone()
            .and_then(|context| context.seccomp_profile)
            .map(|profile| profile.type_),
        Some("RuntimeDefault".to_owned())
    );
}

// ---------------------------------------------------------------------------
// Bad values

/// Renders with `yaml` on top of the demo values and returns helm's error,
/// requiring it to contain every one of `expected`.
fn rejects(yaml: &str, expected: &[&str]) {
    let error = Template::demo().values_yaml(yaml).error();
    for fragment in expected {
        assert!(
            error.contains(fragment),
            "the error for\n{yaml}\ndoes not contain {fragment:?}:\n{error}"
        );
    }
}

#[test]
fn schema_rejects_an_unknown_profile() {
    rejects(
        "gpu:\n  profile: v100\n",
        &[
            "values don't meet the specifications of the schema",
            "/gpu/profile",
            "'a100', 'b200', 'gb200', 'gb300', 'h100', 'l40s', 't4'",
        ],
    );
}

#[test]
fn schema_rejects_majors_outside_1_to_4095() {
    rejects(
        "imex:\n  mockChannels:\n    channelMajor: 0\n",
        &["/imex/mockChannels/channelMajor", "minimum: got 0, want 1"],
    );
    rejects(
        "imex:\n  mockChannels:\n    capsMajor: 4096\n",
        &[
            "/imex/mockChannels/capsMajor",
            "maximum: got 4,096, want 4,095",
        ],
    );
    rejects(
        "imex:\n  mockChannels:\n    channelMajor: two-forty\n",
        &["/imex/mockChannels/channelMajor", "want integer"],
    );
}

#[test]
fn equal_majors_fail_the_render() {
    rejects(
        "imex:\n  mockChannels:\n    channelMajor: 241\n    capsMajor: 241\n",
        &["imex.mockChannels.channelMajor and imex.mockChannels.capsMajor are both 241: the IMEX channel and caps devices need two different majors"],
    );
}

#[test]
fn schema_rejects_malformed_topology_entries() {
    let domain = |uuid: &str, clique: &str| {
        format!("topology:\n  enabled: true\n  domains:\n    - name: d\n      uuid: {uuid}\n      cliques:\n        - {clique}\n")
    };
    let good_uuid = "\"00000000-0000-0000-0000-0000000000ab\"";
    let good_clique = "{id: 0, nodes: [a]}";
    let uuid_at = "/topology/domains/0/uuid";
    let clique_at = "/topology/domains/0/cliques/0";
    let node_at = "/topology/domains/0/cliques/0/nodes/0";
    let id_at = "/topology/domains/0/cliques/0/id";
    let cases: [(&str, &str, [&str; 2]); 9] = [
        (
            "\"not-a-uuid\"",
            good_clique,
            [uuid_at, "does not match pattern"],
        ),
        (
            "\"0000000000000000000000000000ab\"",
            good_clique,
            [uuid_at, "does not match pattern"],
        ),
        ("12345", good_clique, [uuid_at, "want string"]),
        (
            good_uuid,
            "{id: -1, nodes: [a]}",
            [id_at, "minimum: got -1, want 0"],
        ),
        (
            good_uuid,
            "{id: 4294967296, nodes: [a]}",
            [id_at, "maximum: got 4.294967296"],
        ),
        (
            good_uuid,
            "{id: 0, nodes: [\"\"]}",
            [node_at, "does not match pattern"],
        ),
        (
            good_uuid,
            "{id: 0, nodes: [\"node a\"]}",
            [node_at, "does not match pattern"],
        ),
        (
            good_uuid,
            "{id: 0}",
            [clique_at, "missing property 'nodes'"],
        ),
        (
            good_uuid,
            "{id: 0, nodes: [a], state: ok}",
            [clique_at, "additional properties 'state' not allowed"],
        ),
    ];
    for (uuid, clique, expected) in cases {
        rejects(&domain(uuid, clique), &expected);
    }
}

#[test]
fn schema_accepts_a_32_hex_uuid_and_the_largest_clique_id() {
    let yaml = "topology:\n  enabled: true\n  domains:\n    - uuid: \"000000000000000000000000000000AB\"\n      cliques:\n        - {id: 4294967295, nodes: [a]}\n";
    let rendered = Template::defaults().values_yaml(yaml).render();
    let data = rendered
        .config_map("nvml-mock-topology")
        .data
        .unwrap_or_default();
    let document: serde_yaml::Value = serde_yaml::from_str(
        data.get("topology.yaml")
            .map(String::as_str)
            .unwrap_or_default(),
    )
    .unwrap_or_else(|err| panic!("topology.yaml is not YAML: {err}"));
    assert_eq!(
        document["domains"][0]["cliques"][0]["id"].as_u64(),
        Some(4_294_967_295)
    );
    assert_eq!(
        document["domains"][0]["uuid"].as_str(),
        Some("000000000000000000000000000000AB")
    );
}

#[test]
fn schema_rejects_unknown_keys_and_bad_nri_values() {
    rejects(
        "topolgy:\n  enabled: true\n",
        &["additional properties 'topolgy' not allowed"],
    );
    rejects(
        "nri:\n  healthPort: 70000\n",
        &["/nri/healthPort", "maximum: got 70,000, want 65,535"],
    );
    rejects("nri:\n  pluginIndex: \"1\"\n", &["/nri/pluginIndex"]);
    rejects(
        "nri:\n  socketPath: relative/nri.sock\n",
        &["/nri/socketPath", "does not match pattern"],
    );
    rejects(
        "image:\n  digest: latest\n",
        &["/image/digest", "does not match pattern"],
    );
    rejects(
        "gpu:\n  count: 0\n",
        &["/gpu/count", "minimum: got 0, want 1"],
    );
}

#[test]
fn a_node_in_two_cliques_fails_the_render_naming_the_node() {
    rejects(
        "topology:\n  enabled: true\n  domains:\n    - name: left\n      uuid: \"00000000-0000-0000-0000-000000000001\"\n      cliques:\n        - {id: 0, nodes: [node-a, node-b]}\n    - name: right\n      uuid: \"00000000-0000-0000-0000-000000000002\"\n      cliques:\n        - {id: 7, nodes: [node-c, node-b]}\n",
        &["topology: node \"node-b\" appears in two cliques (domain \"left\" clique 0 and domain \"right\" clique 7): list each node in exactly one clique"],
    );
    rejects(
        "topology:\n  enabled: true\n  domains:\n    - name: only\n      uuid: \"00000000-0000-0000-0000-000000000001\"\n      cliques:\n        - {id: 3, nodes: [node-a, node-a]}\n",
        &["topology: node \"node-a\" is listed twice in domain \"only\" clique 3: list each node in exactly one clique"],
    );
}

#[test]
fn an_unknown_profile_file_fails_with_what_to_do() {
    // The schema allows only the shipped profiles; this checks the template's
    // own guard, reached when the schema is bypassed.
    let (ok, _, stderr) = run_helm(&owned(&[
        "template",
        "nvml-mock",
        "manifests/helm/nvml-mock",
        "--skip-schema-validation",
        "--set",
        "gpu.profile=v100",
    ]));
    assert!(!ok, "rendering a missing profile succeeded");
    assert!(
        stderr.contains(
            "gpu.profile \"v100\": the chart has no profiles/v100.yaml; use one of the shipped profiles or set gpu.customConfig"
        ),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------
// NOTES.txt

/// Renders NOTES.txt: `helm template` skips it, so a copy of the chart wraps
/// it in a named template and a ConfigMap that `helm template` does render.
fn render_notes(values: &[&str]) -> String {
    fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to)
            .unwrap_or_else(|err| panic!("cannot create {}: {err}", to.display()));
        let entries = std::fs::read_dir(from)
            .unwrap_or_else(|err| panic!("cannot list {}: {err}", from.display()));
        for entry in entries {
            let entry = entry.unwrap_or_else(|err| panic!("cannot list {}: {err}", from.display()));
            let target = to.join(entry.file_name());
            if entry.path().is_dir() {
                copy_dir(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target)
                    .unwrap_or_else(|err| panic!("cannot copy {}: {err}", entry.path().display()));
            }
        }
    }
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("cannot create a temp dir: {err}"));
    let chart = dir.path().join("nvml-mock");
    copy_dir(&helm::chart_dir(), &chart);
    let templates = chart.join("templates");
    let notes = std::fs::read_to_string(templates.join("NOTES.txt"))
        .unwrap_or_else(|err| panic!("the chart has no templates/NOTES.txt: {err}"));
    std::fs::remove_file(templates.join("NOTES.txt"))
        .unwrap_or_else(|err| panic!("cannot remove the copied NOTES.txt: {err}"));
    let wrapped = format!("{{{{- define \"test.notes\" -}}}}\n{notes}\n{{{{- end }}}}\n");
    let shows = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ include \"test.notes\" . | quote }}\n";
    for (name, text) in [
        ("_test_notes.tpl", wrapped.as_str()),
        ("test-notes.yaml", shows),
    ] {
        std::fs::write(templates.join(name), text)
            .unwrap_or_else(|err| panic!("cannot write {name}: {err}"));
    }
    let mut command = owned(&[
        "template",
        "nvml-mock",
        &chart.display().to_string(),
        "--namespace",
        NAMESPACE,
        "--show-only",
        "templates/test-notes.yaml",
    ]);
    command.extend(values.iter().map(|value| (*value).to_owned()));
    let (ok, stdout, stderr) = run_helm(&command);
    assert!(ok, "rendering NOTES.txt failed:\n{stderr}");
    let rendered = helm::Rendered::parse(&stdout);
    rendered
        .config_map("notes")
        .data
        .and_then(|data| data.get("notes").cloned())
        .unwrap_or_default()
}

#[test]
fn notes_say_what_was_installed_and_how_to_check_it() {
    let notes = render_notes(&[
        "-f",
        "tests/chart/values/demo.yaml",
        "-f",
        "manifests/demo/topology.yaml",
    ]);
    for expected in [
        "release nvml-mock in namespace mokka",
        "DaemonSet nvml-mock (the stager)",
        "gb200 GPU profile under /var/lib/nvml-mock",
        "2048 IMEX channel devices (majors 240/241)",
        "DaemonSet nvml-mock-nri: the containerd NRI plugin 10-nvml-mock",
        "outside\n    mokka, kube-system.",
        "ConfigMap nvml-mock-topology: 1 NVLink domain(s)",
        "kubectl -n mokka rollout status daemonset/nvml-mock\n",
        "kubectl -n mokka rollout status daemonset/nvml-mock-nri\n",
        "kubectl get nodes -l nvidia.com/gpu.present=true",
        "kubectl -n mokka get configmap nvml-mock-topology -o jsonpath='{.data.topology\\.yaml}'",
        "nvml-mock.nvidia.com/imex-channels: \"true\"",
    ] {
        assert!(
            notes.contains(expected),
            "NOTES.txt lacks {expected:?}:\n{notes}"
        );
    }

    let defaults = render_notes(&[]);
    assert!(
        defaults.contains("No NRI plugin (nri.enabled=false)"),
        "NOTES.txt does not say NRI is off:\n{defaults}"
    );
    assert!(!defaults.contains("nvml-mock-nri"), "{defaults}");
    assert!(!defaults.contains("nvml-mock-topology"), "{defaults}");
}

#[test]
fn duplicate_domain_uuids_and_clique_ids_fail_the_render() {
    rejects(
        "topology:\n  enabled: true\n  domains:\n    - name: left\n      uuid: \"00000000-0000-0000-0000-0000000000ab\"\n      cliques: []\n    - name: right\n      uuid: \"000000000000000000000000000000AB\"\n      cliques: []\n",
        &["topology: domains \"left\" and \"right\" share the uuid 000000000000000000000000000000AB: each NVLink domain needs its own uuid"],
    );
    rejects(
        "topology:\n  enabled: true\n  domains:\n    - name: only\n      uuid: \"00000000-0000-0000-0000-0000000000ab\"\n      cliques:\n        - {id: 4, nodes: [a]}\n        - {id: 4, nodes: [b]}\n",
        &["topology: domain \"only\" lists clique 4 twice: give each clique of a domain its own id"],
    );
}

// ---------------------------------------------------------------------------
// The topology crate's values go through the chart and come back unchanged

#[test]
fn generated_topologies_render_into_documents_the_topology_crate_reads_back() {
    for workers in 1..=5 {
        let names = topology::kind_workers("lab", workers);
        for generated in [topology::demo(&names), topology::rebind(&names)] {
            let rendered = Template::demo()
                .values_yaml(&generated.helm_values())
                .render();
            let data = rendered
                .config_map("nvml-mock-topology")
                .data
                .unwrap_or_default();
            let text = data
                .get("topology.yaml")
                .unwrap_or_else(|| panic!("no topology.yaml key"));
            let parsed = topology::parse(text).unwrap_or_else(|err| {
                panic!("the chart's topology.yaml does not parse: {err}\n{text}")
            });
            assert_eq!(parsed, generated, "{workers} workers:\n{text}");
        }
    }
}

#[test]
fn helm_is_the_pinned_version() {
    // The schema messages asserted above are helm's own: they hold for the
    // pinned version. `go install` builds report `v3.19` for v3.19.0.
    let (ok, stdout, stderr) = run_helm(&owned(&["version", "--template", "{{.Version}}"]));
    assert!(ok, "helm version failed:\n{stderr}");
    let reported = stdout.trim();
    let pinned = helm::pinned_helm_version();
    assert!(
        !reported.is_empty() && (pinned == reported || pinned.starts_with(&format!("{reported}."))),
        "{} is helm {reported}, the tests pin {pinned}: install it with \
         `go install helm.sh/helm/v3/cmd/helm@{pinned}` or put the pinned helm first on PATH",
        helm::helm().display()
    );
}
