//! What the scenarios run against: the kind cluster or a `--kube-context`
//! cluster, its workers and the topology staged on them.

use std::path::Path;

use anyhow::Context as _;
use kube::Client;
use topology::Layout;
use xshell::Shell;

use crate::fabric::Expected;
use crate::flags::ClusterArgs;
use crate::k8s;
use crate::names::KindCluster;

/// What the scenarios run against.
pub(super) struct Target {
    /// The kind cluster, unless `--kube-context` was given.
    pub(super) kind: Option<KindCluster>,
    /// The kube context.
    pub(super) context: String,
    /// With `--kube-context`: the registry the nodes pull images from
    /// (`--registry`; scenario 5 pushes its images there).
    pub(super) registry: Option<crate::registry::Registry>,
    /// The workers, in topology order.
    pub(super) workers: Vec<String>,
    /// The topology staged on them (the demo topology unless `--topology`).
    pub(super) topology: topology::Topology,
    /// Scenario 3's rebind topology for them.
    pub(super) rebind: topology::Topology,
    /// The kind cluster's racks, trays and cliques (none on `--kube-context`).
    pub(super) layout: Option<Layout>,
    pub(super) client: Client,
}

impl Target {
    /// The kind cluster `cluster` laid out as `layout`.
    pub(super) fn kind(cluster: &KindCluster, layout: Layout, client: Client) -> Target {
        let workers = cluster.workers();
        Target {
            kind: Some(cluster.clone()),
            registry: None,
            context: cluster.context(),
            topology: layout.demo(&workers),
            rebind: layout.rebind(&workers),
            layout: Some(layout),
            workers,
            client,
        }
    }

    pub(super) fn label(&self) -> String {
        match (&self.kind, &self.layout) {
            (Some(cluster), Some(layout)) => format!("kind cluster {} ({layout})", cluster.name()),
            (Some(cluster), None) => format!("kind cluster {}", cluster.name()),
            (None, _) => format!("context {}", self.context),
        }
    }

    /// What each worker the topology names reports under it.
    pub(super) fn demo_expected(&self) -> Vec<(String, Expected)> {
        self.expected(&self.topology)
    }

    /// What each worker `topology` names reports under it.
    pub(super) fn expected(&self, topology: &topology::Topology) -> Vec<(String, Expected)> {
        self.workers
            .iter()
            .filter_map(|node| {
                topology.resolve(node).map(|identity| {
                    (
                        node.clone(),
                        Expected {
                            clique: identity.clique_id,
                            uuid: identity.cluster_uuid.to_string(),
                        },
                    )
                })
            })
            .collect()
    }
}

pub(super) async fn target(sh: &Shell, args: &ClusterArgs) -> anyhow::Result<Target> {
    match &args.kube_context {
        Some(context) => {
            let client = k8s::client(context).await?;
            let selection = k8s::select_workers(&client, args.node_selector.as_deref()).await?;
            eprintln!("    {}", selection.describe());
            if selection.workers.len() < 2 {
                anyhow::bail!(
                    "context `{context}` has {} node(s) the workload can run on ({}); the scenarios need at least 2 staged workers: \
                     install the chart (the stager labels its nodes nvidia.com/gpu.present=true) or widen --node-selector",
                    selection.workers.len(),
                    selection.describe()
                );
            }
            let topology = chosen_topology(args.topology.as_deref(), &selection.workers)?;
            Ok(Target {
                kind: None,
                registry: None,
                context: context.clone(),
                rebind: topology::rebind(&selection.workers),
                workers: selection.workers,
                topology,
                layout: None,
                client,
            })
        }
        None => {
            let cluster =
                crate::cluster::discover(&super::common::docker_only(sh), &args.cluster_name)?;
            let client = k8s::kind_client(&cluster).await?;
            let layout = k8s::kind_layout(&client, &cluster).await?;
            eprintln!("    {} workers: {layout}", cluster.worker_count());
            Ok(Target::kind(&cluster, layout, client))
        }
    }
}

/// The topology staged on a `--kube-context` cluster: `--topology FILE`,
/// else the demo topology generated for the workers. Says which workers the
/// file leaves out (they get the profile defaults and are not checked).
pub(super) fn chosen_topology(
    file: Option<&Path>,
    workers: &[String],
) -> anyhow::Result<topology::Topology> {
    let Some(path) = file else {
        return Ok(topology::demo(workers));
    };
    let yaml = std::fs::read_to_string(path)
        .with_context(|| format!("reading --topology {}", path.display()))?;
    let topology = topology::parse(&yaml)
        .map_err(|err| anyhow::anyhow!("--topology {}: {err}: fix that entry", path.display()))?;
    let cover = crate::workers::coverage(&topology, workers);
    anyhow::ensure!(
        !cover.named.is_empty(),
        "--topology {} names none of the workers ({}): list them under domains[].cliques[].nodes",
        path.display(),
        workers.join(", ")
    );
    eprintln!(
        "    topology {}: workers {}",
        path.display(),
        cover.named.join(", ")
    );
    if !cover.unnamed.is_empty() {
        eprintln!(
            "    not in the topology (profile defaults, not checked): {}",
            cover.unnamed.join(", ")
        );
    }
    if !cover.strangers.is_empty() {
        eprintln!(
            "    in the topology but not workers (not checked): {}",
            cover.strangers.join(", ")
        );
    }
    Ok(topology)
}

/// The first two workers (in worker order) that share a clique.
pub(super) fn first_shared_clique(expected: &[(String, Expected)]) -> Option<[&str; 2]> {
    expected.iter().enumerate().find_map(|(at, (first, it))| {
        expected[at + 1..]
            .iter()
            .find(|(_, other)| other.clique == it.clique && other.uuid == it.uuid)
            .map(|(second, _)| [first.as_str(), second.as_str()])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario2_takes_the_first_two_workers_sharing_a_clique() {
        let at = |clique: u32, uuid: &str| Expected {
            clique,
            uuid: uuid.to_owned(),
        };
        let expected = vec![
            ("w1".to_owned(), at(7, "u")),
            ("w2".to_owned(), at(3, "u")),
            ("w3".to_owned(), at(7, "v")),
            ("w4".to_owned(), at(3, "u")),
        ];
        assert_eq!(first_shared_clique(&expected), Some(["w2", "w4"]));
        assert_eq!(first_shared_clique(&expected[..3]), None);
    }
}
