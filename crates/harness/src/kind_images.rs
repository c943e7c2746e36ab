//! Node images in a kind config, for a cluster whose roles run different
//! node images (the offline pair: the full image on the control plane, the
//! worker variant without the control-plane images on every worker).
//!
//! kind's `--image` flag gives every node one image, so the pair goes into
//! the config instead, as each node's `image:`; a config that lists the
//! nodes (the repository's, or one generated for more trays) passes through
//! [`with_node_images`] before `kind create cluster --config`.

use anyhow::{bail, Context};
use serde_yaml::Value;
use xtask_support::node_images::{NodeImages, Role};

/// `config` (a kind `Cluster` document) with every node's `image` set to its
/// role's image in `images`. Fails on a node without a role kind knows.
pub fn with_node_images(config: &str, images: &NodeImages) -> anyhow::Result<String> {
    let mut document: Value =
        serde_yaml::from_str(config).context("the kind config is not YAML")?;
    let Some(nodes) = document.get_mut("nodes").and_then(Value::as_sequence_mut) else {
        bail!(
            "the kind config lists no nodes: kind would create one control plane, with no worker"
        );
    };
    for (index, node) in nodes.iter_mut().enumerate() {
        let role = node.get("role").and_then(Value::as_str).unwrap_or_default();
        let Some(role) = Role::parse_kind(role) else {
            bail!("nodes[{index}].role = {role:?}: expected control-plane or worker");
        };
        let Some(node) = node.as_mapping_mut() else {
            bail!("nodes[{index}] is not a mapping");
        };
        node.insert(
            Value::from("image"),
            Value::from(images.for_role(role).to_owned()),
        );
    }
    serde_yaml::to_string(&document).context("writing the kind config")
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_support::assert_contains;

    fn pair() -> NodeImages {
        NodeImages {
            control_plane: "cdsim/kind-node:v1-abc".into(),
            worker: "cdsim/kind-node:v1-def-worker".into(),
        }
    }

    #[test]
    fn the_repository_config_gets_each_roles_image_and_keeps_the_rest() {
        let path = xtask_support::project_root().join(crate::names::KIND_CONFIG);
        let text = std::fs::read_to_string(path).expect("readable");
        let out = with_node_images(&text, &pair()).expect("valid");
        let before: Value = serde_yaml::from_str(&text).expect("yaml");
        let after: Value = serde_yaml::from_str(&out).expect("yaml");
        let nodes = after["nodes"].as_sequence().expect("nodes");
        assert_eq!(
            nodes.len(),
            before["nodes"].as_sequence().expect("nodes").len()
        );
        assert_eq!(nodes[0]["image"].as_str(), Some("cdsim/kind-node:v1-abc"));
        for (index, worker) in nodes.iter().enumerate().skip(1) {
            assert_eq!(worker["role"].as_str(), Some("worker"));
            assert_eq!(
                worker["image"].as_str(),
                Some("cdsim/kind-node:v1-def-worker")
            );
            assert_eq!(worker["labels"], before["nodes"][index]["labels"]);
        }
        for kept in [
            "containerdConfigPatches",
            "kubeadmConfigPatches",
            "kind",
            "apiVersion",
        ] {
            assert_eq!(after[kept], before[kept], "{kept}");
        }
    }

    #[test]
    fn a_config_without_nodes_or_with_an_unknown_role_is_refused() {
        let err = with_node_images("kind: Cluster\n", &pair())
            .expect_err("no nodes")
            .to_string();
        assert_contains(&err, "lists no nodes");
        let err = with_node_images("nodes:\n- role: worker\n- role: master\n", &pair())
            .expect_err("unknown role")
            .to_string();
        assert_contains(&err, "nodes[1].role = \"master\"");
    }
}
