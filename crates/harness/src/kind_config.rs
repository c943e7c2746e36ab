//! The kind cluster config for a layout: the template file
//! (`manifests/kind/cluster.yaml`, the owner of the containerd and kubeadm
//! patches) with its node list replaced by one control plane and a worker per
//! tray, each labelled with its rack and clique. Pure.

use std::collections::BTreeMap;

use anyhow::Context as _;
use topology::{Layout, Place};

use crate::names::{CLIQUE_LABEL, RACK_LABEL};

/// The template's node list starts at this line; everything before it is kept
/// byte for byte.
const NODES_LINE: &str = "nodes:";

/// `template` with its node list generated for `layout`.
pub fn render(template: &str, layout: Layout) -> anyhow::Result<String> {
    let head = template
        .lines()
        .position(|line| line == NODES_LINE)
        .map(|at| template.lines().take(at).collect::<Vec<_>>())
        .context("the kind config template has no top-level `nodes:` line")?;
    let mut out = String::with_capacity(template.len() + layout.workers() * 80);
    for line in head {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&node_list(layout));
    Ok(out)
}

/// The `nodes:` list: the control plane, then the workers in kind's order.
pub fn node_list(layout: Layout) -> String {
    let mut out = format!("{NODES_LINE}\n  - role: control-plane\n");
    out.push_str(&format!(
        "  # {layout}. The labels are informational (upstream parity); the topology decides.\n"
    ));
    for index in 0..layout.workers() {
        let place = layout.place(index);
        out.push_str(&format!(
            "  - role: worker\n    labels:\n      {RACK_LABEL}: \"{}\"\n      {CLIQUE_LABEL}: \"{}\"\n",
            place.rack, place.clique
        ));
    }
    out
}

/// The layout of a running cluster, read back from its workers' labels
/// (`workers`: each worker's name and labels, in worker order). A worker
/// without a rack label (a cluster from before racks) is in rack 0.
pub fn layout_from_labels(
    cluster: &str,
    workers: &[(String, BTreeMap<String, String>)],
) -> anyhow::Result<Layout> {
    let fix = format!(
        "recreate it with `cargo xtask up --cluster-name {cluster} --force-recreate` and the \
         --trays/--racks/--cliques-per-rack you want"
    );
    let mut places = Vec::with_capacity(workers.len());
    for (node, labels) in workers {
        let number = |key: &str, default: Option<u32>| -> anyhow::Result<u32> {
            match (labels.get(key), default) {
                (Some(value), _) => value.parse().with_context(|| {
                    format!("worker {node}: label {key}={value:?} is not a number; {fix}")
                }),
                (None, Some(default)) => Ok(default),
                (None, None) => anyhow::bail!("worker {node} has no label {key}; {fix}"),
            }
        };
        places.push(Place {
            rack: number(RACK_LABEL, Some(0))?,
            clique: number(CLIQUE_LABEL, None)?,
        });
    }
    Layout::from_places(&places).with_context(|| {
        format!(
            "the {} workers' {RACK_LABEL}/{CLIQUE_LABEL} labels ({}) are not a layout xtask creates; {fix}",
            workers.len(),
            places
                .iter()
                .map(|it| format!("{}/{}", it.rack, it.clique))
                .collect::<Vec<_>>()
                .join(" ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEMPLATE: &str = include_str!("../../../manifests/kind/cluster.yaml");

    fn layout(trays: u32, racks: u32, cliques: Option<u32>) -> Layout {
        Layout::new(trays, racks, cliques).expect("valid layout")
    }

    fn workers_labels(config: &str) -> Vec<(String, String)> {
        let value: serde_yaml::Value = serde_yaml::from_str(config).expect("YAML");
        let nodes = value["nodes"].as_sequence().expect("nodes");
        assert_eq!(nodes[0]["role"], "control-plane");
        nodes[1..]
            .iter()
            .map(|node| {
                assert_eq!(node["role"], "worker");
                let label = |key: &str| node["labels"][key].as_str().expect(key).to_owned();
                (label(RACK_LABEL), label(CLIQUE_LABEL))
            })
            .collect()
    }

    #[test]
    fn the_template_turns_dra_device_taints_on_for_every_component() {
        let value: serde_yaml::Value = serde_yaml::from_str(TEMPLATE).expect("YAML");
        assert_eq!(value["featureGates"]["DRADeviceTaints"], true);
        // The gate makes the scheduler wait for DeviceTaintRules: their API must be served.
        assert_eq!(value["runtimeConfig"]["resource.k8s.io/v1alpha3"], "true");
        let rendered = render(TEMPLATE, layout(8, 2, None)).expect("render");
        let value: serde_yaml::Value = serde_yaml::from_str(&rendered).expect("YAML");
        assert_eq!(value["featureGates"]["DRADeviceTaints"], true);
    }

    #[test]
    fn the_template_is_the_default_layouts_config() {
        assert_eq!(
            render(TEMPLATE, Layout::default()).expect("render"),
            TEMPLATE,
            "manifests/kind/cluster.yaml's node list is no longer the default layout's"
        );
    }

    #[test]
    fn a_full_rack_and_two_racks_get_a_worker_per_tray_labelled_with_rack_and_clique() {
        let full = render(TEMPLATE, layout(18, 1, Some(1))).expect("render");
        let labels = workers_labels(&full);
        assert_eq!(labels.len(), 18);
        assert!(labels
            .iter()
            .all(|it| it == &("0".to_owned(), "0".to_owned())));
        let two = workers_labels(&render(TEMPLATE, layout(3, 2, Some(2))).expect("render"));
        let want: Vec<(String, String)> = [(0, 0), (0, 0), (0, 1), (1, 0), (1, 0), (1, 1)]
            .iter()
            .map(|(rack, clique)| (rack.to_string(), clique.to_string()))
            .collect();
        assert_eq!(two, want);
        // The patches are kept byte for byte.
        let head = TEMPLATE.split("\nnodes:").next().expect("head");
        assert!(full.starts_with(head));
    }

    #[test]
    fn a_running_clusters_layout_is_read_back_from_its_labels() {
        let labelled = |layout: Layout| -> Vec<(String, BTreeMap<String, String>)> {
            (0..layout.workers())
                .map(|at| {
                    let place = layout.place(at);
                    let labels = [
                        (RACK_LABEL.to_owned(), place.rack.to_string()),
                        (CLIQUE_LABEL.to_owned(), place.clique.to_string()),
                    ];
                    (format!("w{at}"), labels.into_iter().collect())
                })
                .collect()
        };
        for it in [
            Layout::default(),
            layout(18, 1, Some(1)),
            layout(2, 2, None),
        ] {
            assert_eq!(layout_from_labels("c", &labelled(it)).expect("layout"), it);
        }
        // Today's clusters: clique labels only.
        let mut old = labelled(Layout::default());
        for (_, labels) in &mut old {
            labels.remove(RACK_LABEL);
        }
        assert_eq!(
            layout_from_labels("c", &old).expect("old"),
            Layout::default()
        );
        old[0].1.remove(CLIQUE_LABEL);
        let err = layout_from_labels("c", &old)
            .expect_err("no clique")
            .to_string();
        assert!(
            err.contains("worker w0 has no label nvml-mock/clique"),
            "{err}"
        );
        assert!(
            err.contains("cargo xtask up --cluster-name c --force-recreate"),
            "{err}"
        );
        let mut odd = labelled(layout(2, 2, None));
        odd[1].1.insert(CLIQUE_LABEL.to_owned(), "0".to_owned());
        let err = layout_from_labels("c", &odd).expect_err("odd").to_string();
        assert!(err.contains("(0/0 0/0 1/0 1/1) are not a layout"), "{err}");
    }

    #[test]
    fn a_template_without_a_node_list_is_refused() {
        let err = render("kind: Cluster\n", Layout::default()).expect_err("no nodes");
        assert!(err.to_string().contains("no top-level `nodes:` line"));
    }
}
