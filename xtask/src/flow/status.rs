//! `down`, `status`, and the workload pods healed after a node restart.

use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use xshell::Shell;

use crate::flags::{ClusterArgs, DownArgs};
use crate::k8s;
use crate::names::{
    self, KindCluster, MOCK_NS, NRI_DS, STAGER_DS, WORKLOAD_DS, WORKLOAD_NS, WORKLOAD_SELECTOR,
};
use crate::runner::{Cmd, Runner};

use super::common::{docker_only, rollout, runner, take_lock};
use super::target::Target;

/// `down`: delete the cluster (and the image archives with `--images`).
pub fn down(sh: &Shell, args: &DownArgs) -> anyhow::Result<()> {
    let cluster = KindCluster::new(&args.cluster.cluster_name, 0)?;
    let _lock = take_lock(cluster.name())?;
    let runner = runner(sh)?;
    if crate::cluster::exists(&runner, &cluster)? {
        runner.check(&Cmd::new(
            "kind",
            &["delete", "cluster", "--name", cluster.name()],
        ))?;
        eprintln!("    deleted cluster {}", cluster.name());
    } else {
        eprintln!("    no cluster {}", cluster.name());
    }
    if args.images {
        let dir = crate::dirs::images_dir()?;
        for (path, image) in crate::archive::scan(&dir).unwrap_or_default() {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            eprintln!("    removed {image} ({})", path.display());
        }
        let listed = runner.run(&Cmd::new(
            "docker",
            &["images", "-q", "--filter", "reference=nvml-mock*"],
        ))?;
        for id in listed.stdout.split_whitespace() {
            let _ = runner.run(&Cmd::new("docker", &["rmi", "-f", id]));
        }
    }
    Ok(())
}

/// `status`: nodes, release and rollouts.
pub async fn status(sh: &Shell, args: &ClusterArgs) -> anyhow::Result<()> {
    let kind = match &args.kube_context {
        Some(_) => None,
        None => Some(crate::cluster::discover(
            &docker_only(sh),
            &args.cluster_name,
        )?),
    };
    if let Some(cluster) = &kind {
        for (node, state) in crate::cluster::node_states(&docker_only(sh), cluster)? {
            println!("node {node}: {state}");
        }
    }
    let (context, workers) = match (&kind, &args.kube_context) {
        (Some(cluster), _) => (cluster.context(), cluster.workers()),
        (None, context) => (context.clone().unwrap_or_default(), Vec::new()),
    };
    let client = k8s::client(&context).await?;
    let workers = if workers.is_empty() {
        let selection = k8s::select_workers(&client, args.node_selector.as_deref()).await?;
        eprintln!("    {}", selection.describe());
        selection.workers
    } else {
        workers
    };
    let target = Target {
        kind: None,
        registry: None,
        context,
        topology: topology::demo(&workers),
        rebind: topology::rebind(&workers),
        workers,
        layout: None,
        client,
    };
    print_racks(&target, kind.as_ref()).await;
    for (ns, ds) in [
        (MOCK_NS, STAGER_DS),
        (MOCK_NS, NRI_DS),
        (WORKLOAD_NS, WORKLOAD_DS),
    ] {
        let api: kube::Api<k8s_openapi::api::apps::v1::DaemonSet> =
            kube::Api::namespaced(target.client.clone(), ns);
        let state = match api.get_opt(ds).await {
            Ok(Some(it)) => match k8s::daemonset_progress(&it) {
                Ok(()) => "rolled out".to_owned(),
                Err(progress) => progress,
            },
            Ok(None) => "not deployed".to_owned(),
            Err(err) => format!("unknown: {err}"),
        };
        println!("daemonset {ns}/{ds}: {state}");
    }
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(target.client.clone(), WORKLOAD_NS);
    let listed = pods
        .list(&kube::api::ListParams::default().labels(WORKLOAD_SELECTOR))
        .await
        .map(|list| list.items)
        .unwrap_or_default();
    for node in &target.workers {
        let on_node = listed.iter().find(|pod| {
            pod.spec.as_ref().and_then(|spec| spec.node_name.as_deref()) == Some(node.as_str())
        });
        let state = match on_node {
            Some(pod) if k8s::usable_pod(pod).is_some() => {
                format!("workload pod {} ready", kube::ResourceExt::name_any(pod))
            }
            Some(pod) => format!(
                "workload pod {} not ready",
                kube::ResourceExt::name_any(pod)
            ),
            None => "no workload pod".to_owned(),
        };
        println!("worker {node}: {state}");
    }
    Ok(())
}

/// The rack map, one line per rack: on kind from the workers' rack and clique
/// labels, elsewhere the topology generated for the workers.
async fn print_racks(target: &Target, kind: Option<&KindCluster>) {
    let topology = match kind {
        Some(cluster) => match k8s::kind_layout(&target.client, cluster).await {
            Ok(layout) => layout.demo(&cluster.workers()),
            Err(err) => {
                println!("racks: unknown: {err:#}");
                return;
            }
        },
        None => target.topology.clone(),
    };
    let trays = crate::report::map::trays(&topology, None);
    for line in crate::report::map::RackMap::of_trays(&trays).text_lines() {
        println!("{line}");
    }
}

/// How often a pod is checked (and recreated) before giving up.
pub(super) const MAX_HEAL: u64 = 5;

/// Workload pods created while their node's NRI plugin was not registered (a
/// node restart, an interrupted run) lack the injection: they are recreated,
/// once the node's plugin is ready. Returns the nodes whose pod was recreated.
pub async fn heal_workload(client: &Client, workers: &[String]) -> anyhow::Result<Vec<String>> {
    let limit = Duration::from_secs(180);
    let mut healed = Vec::new();
    for node in workers {
        for attempt in 1..=MAX_HEAL {
            k8s::pod_on_node_in(
                client,
                MOCK_NS,
                "app.kubernetes.io/name=nvml-mock-nri",
                node,
                limit,
            )
            .await?;
            let pod = k8s::pod_on_node(client, node, limit).await?;
            let out = k8s::exec(
                client,
                &pod.name,
                &["test", "-c", names::CHANNEL0],
                Duration::from_secs(30),
            )
            .await?;
            if out.code == 0 {
                break;
            }
            if attempt == MAX_HEAL {
                anyhow::bail!(
                    "the workload pod on {node} still lacks the NRI injection after {} recreations: check the plugin's log \
                     (`cargo xtask status`, pods of daemonset {MOCK_NS}/{NRI_DS})",
                    MAX_HEAL - 1
                );
            }
            eprintln!(
                "    {node}: pod {} lacks the NRI injection (created before the plugin registered); recreating it",
                pod.name
            );
            k8s::delete_pod(client, WORKLOAD_NS, &pod.name).await?;
            if !healed.contains(node) {
                healed.push(node.clone());
            }
            // A restarted node's plugin may still be registering: back off.
            tokio::time::sleep(Duration::from_secs(5 * attempt)).await;
        }
    }
    Ok(healed)
}

/// Applies the demo workload with `image` and waits until it runs, injected,
/// on every worker.
pub(super) async fn roll_workload(
    client: &Client,
    image: &str,
    workers: &[String],
) -> anyhow::Result<()> {
    let path = crate::project_root().join(names::WORKLOAD_MANIFEST);
    let yaml =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let (daemonset, policy) = k8s::workload_objects(&yaml, image)?;
    k8s::apply_workload(client, &daemonset, &policy).await?;
    let limit = rollout(workers.len());
    k8s::wait_daemonset(client, WORKLOAD_NS, WORKLOAD_DS, WORKLOAD_SELECTOR, limit).await?;
    heal_workload(client, workers).await.map(|_| ())
}
