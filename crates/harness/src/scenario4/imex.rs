//! Scenario 4's IMEX part on the cluster: which `nvidia-imex` the staged
//! driver roots hold (NVIDIA's, the IMEX test double, or none), the
//! compute-domain kubelet plugin's CDI spec carrying it, and the live
//! ComputeDomain's checks: Ready with every tray, the workloads running with
//! exactly their channel, each daemon's names and IMEX domain, one daemon
//! deleted and recovered, the domain deleted with nothing left behind.
//!
//! What it reads is judged by [`super::live`] (pure, unit-tested).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt as _};
use tokio::time::Instant;

use super::api::{cd_resource, clique_resource, pod_resource, wait_for};
use super::live::{self, CHANNELS_DIR};
use super::names::{
    CD_NAME, DOMAINS_DIR, DRA_NS, DRIVER_ROOT, PROC_DEVICES, S4_NS, WORKLOAD_CONTAINER,
    WORKLOAD_LABEL,
};
use super::node_view;
use super::objects::DomainPlan;
use crate::imex::{parse_domain, Daemon};
use crate::report::{round, WorkerDetail};
use crate::scenarios::scaled;

/// The label NVIDIA's controller puts on a domain's daemon pods (value: the domain's uid).
const DOMAIN_LABEL: &str = "resource.nvidia.com/computeDomain";
/// The daemon's container.
const DAEMON_CONTAINER: &str = "compute-domain-daemon";
/// Where the kubelet plugin mounts the domain's config in the daemon's container.
const DAEMON_CONFIG: &str = "/imexd/imexd.cfg";
/// The compute-domain kubelet plugin's CDI specs on a node.
const CDI_SPECS: &str = "/var/run/cdi/k8s.compute-domain.nvidia.com*";
/// The bound of one exec into a pod.
const EXEC_LIMIT: Duration = Duration::from_secs(20);
/// How long a daemon's IMEX domain may take to show every peer of its
/// clique READY: nvidia-imex reconnects a peer it failed to reach with an
/// exponential back-off (about 15, 31, 62, 125 s; first convergence "can
/// take minutes"), and on a rack whose daemons start over a minute one
/// daemon may find a late peer down three times. The sum of four back-offs.
const MESH_LIMIT: Duration = Duration::from_secs(240);

/// Which `nvidia-imex` the staged driver root of every one of `nodes`
/// holds: `None` when none does; an error when the nodes disagree.
pub(super) async fn detect(client: &Client, nodes: &[String]) -> Result<Option<Daemon>> {
    let daemon = format!("{DRIVER_ROOT}/usr/bin/nvidia-imex");
    let seen_as = node_view::in_plugin(&daemon);
    let script = format!(
        "test -x {seen_as} || {{ echo absent; exit 0; }}; \
         if grep -q '{}' {seen_as}; then echo double; else echo nvidia; fi",
        imex_double::MARKER
    );
    let mut seen = BTreeMap::new();
    for node in nodes {
        let out = node_view::sh(client, node, &script).await?;
        if out.code != 0 {
            bail!("reading {daemon} on {node}: {}", out.stderr.trim());
        }
        seen.insert(node.clone(), out.stdout.trim().to_owned());
    }
    let kinds: BTreeSet<&str> = seen.values().map(String::as_str).collect();
    match kinds.into_iter().collect::<Vec<_>>()[..] {
        ["absent"] | [] => Ok(None),
        ["double"] => Ok(Some(Daemon::TestDouble)),
        ["nvidia"] => Ok(Some(Daemon::Nvidia)),
        _ => bail!(
            "the trays' driver roots disagree about {daemon}: {seen:?}; reinstall the chart so every \
             stager stages the same payload"
        ),
    }
}

/// The nodes whose compute-domain CDI spec does not name `nvidia-imex`: the
/// plugin wrote it before the stager staged the binaries.
pub(super) async fn stale_cdi(client: &Client, nodes: &[String]) -> Result<Vec<String>> {
    let mut stale = Vec::new();
    for node in nodes {
        let script = format!("grep -l nvidia-imex {}", node_view::in_plugin(CDI_SPECS));
        if node_view::sh(client, node, &script).await?.code != 0 {
            stale.push(node.clone());
        }
    }
    Ok(stale)
}

/// A live ComputeDomain: what its checks read.
pub(super) struct Live<'a> {
    pub client: &'a Client,
    pub plan: &'a DomainPlan,
    pub cd_uid: &'a str,
    /// When the ComputeDomain was created.
    pub created: Instant,
}

/// A daemon pod: its node, name and IP.
#[derive(Debug, Clone)]
struct DaemonPod {
    node: String,
    name: String,
    ip: String,
}

impl Live<'_> {
    /// Every check of a ComputeDomain that goes Ready; returns the timings.
    pub(super) async fn check(
        &self,
        details: &mut Vec<WorkerDetail>,
    ) -> Result<Vec<(String, f64)>> {
        let mut timings = Vec::new();
        self.cd_ready(details).await?;
        timings.push((
            "ComputeDomain Ready".to_owned(),
            round(self.created.elapsed()),
        ));
        self.workloads_running().await?;
        timings.push((
            "workloads Running".to_owned(),
            round(self.created.elapsed()),
        ));
        self.channels(details).await?;
        let daemons = self.daemon_pods().await?;
        self.names_and_domains(&daemons, details).await?;
        timings.push((
            "every daemon's IMEX domain UP with its clique".to_owned(),
            round(self.created.elapsed()),
        ));
        let (degraded, recovered) = self.delete_one(&daemons).await?;
        timings.push((
            "domain degraded after a daemon pod's deletion".to_owned(),
            degraded,
        ));
        timings.push(("domain UP again".to_owned(), recovered));
        Ok(timings)
    }

    /// Waits until the ComputeDomain is Ready with every tray; the seconds
    /// since it was created.
    pub(super) async fn ready(&self, details: &mut Vec<WorkerDetail>) -> Result<f64> {
        self.cd_ready(details).await?;
        Ok(round(self.created.elapsed()))
    }

    /// The domain's trays: node → clique.
    fn want(&self) -> BTreeMap<String, String> {
        self.plan
            .nodes()
            .into_iter()
            .filter_map(|node| Some((node.clone(), self.plan.clique_of(&node)?.to_owned())))
            .collect()
    }

    /// Waits until the ComputeDomain is Ready with one Ready entry per tray and every
    /// ComputeDomainClique lists its trays' daemons Ready: the controller writes the one and the
    /// daemons the other, so after a daemon is replaced either may lag the other.
    async fn cd_ready(&self, details: &mut Vec<WorkerDetail>) -> Result<()> {
        let cds: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), S4_NS, &cd_resource());
        let want = self.want();
        let nodes = wait_for(
            &format!(
                "ComputeDomain {S4_NS}/{CD_NAME} Ready with {} trays, its cliques' daemons Ready",
                want.len()
            ),
            scaled(Duration::from_secs(120), want.len()),
            || async {
                let cd = serde_json::to_value(cds.get(CD_NAME).await?)?;
                let nodes = live::cd_nodes(&cd);
                if let Err(not_yet) = live::judge_cd(&super::objects::cd_status(&cd), &nodes, &want)
                {
                    return Ok(Err(not_yet));
                }
                Ok(self.clique_daemons_ready().await?.map(|()| nodes))
            },
            || self.diagnose(),
        )
        .await?;
        for (node, entry) in nodes {
            details.push(WorkerDetail {
                node,
                pod: String::new(),
                detail: format!(
                    "ComputeDomain status.nodes: Ready, clique {}, ip {}",
                    entry.clique, entry.ip
                ),
                passed: true,
            });
        }
        Ok(())
    }

    /// Whether every ComputeDomainClique of the domain lists its trays' daemons Ready: `Err`
    /// says which does not yet; a failed read is the outer error.
    async fn clique_daemons_ready(&self) -> Result<Result<(), String>> {
        let cliques: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), DRA_NS, &clique_resource());
        for (clique, nodes) in self.plan.cliques() {
            let name = super::objects::clique_object_name(self.cd_uid, &clique);
            let object = serde_json::to_value(cliques.get(&name).await?)?;
            let ready: BTreeSet<String> = object["daemons"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|it| it["status"] == "Ready")
                .filter_map(|it| it["nodeName"].as_str().map(str::to_owned))
                .collect();
            if ready != nodes {
                return Ok(Err(format!(
                    "ComputeDomainClique {name} lists {ready:?} Ready, its trays are {nodes:?}"
                )));
            }
        }
        Ok(Ok(()))
    }

    /// Waits until both workload pods run on their nodes.
    async fn workloads_running(&self) -> Result<()> {
        let pods: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), S4_NS, &pod_resource());
        let selector = format!("{}={}", WORKLOAD_LABEL.0, WORKLOAD_LABEL.1);
        let want: BTreeSet<String> = self.plan.nodes().into_iter().collect();
        wait_for(
            &format!("workload pods Running on {} trays", want.len()),
            scaled(Duration::from_secs(120), want.len()),
            || async {
                let listed = pods.list(&ListParams::default().labels(&selector)).await?;
                let running: BTreeSet<String> = listed
                    .items
                    .iter()
                    .filter_map(|pod| serde_json::to_value(pod).ok())
                    .filter(|pod| pod["status"]["phase"] == "Running")
                    .filter_map(|pod| pod["spec"]["nodeName"].as_str().map(str::to_owned))
                    .collect();
                if running == want {
                    Ok(Ok(()))
                } else {
                    Ok(Err(format!("Running on {running:?}")))
                }
            },
            || crate::k8s::diagnose(self.client, S4_NS, &selector),
        )
        .await
    }

    /// Each workload container holds exactly its claim's channel, with the
    /// major its node's staged `/proc/devices` gives.
    async fn channels(&self, details: &mut Vec<WorkerDetail>) -> Result<()> {
        let pods: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), S4_NS, &pod_resource());
        let claims: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), S4_NS, &claim_resource());
        let selector = format!("{}={}", WORKLOAD_LABEL.0, WORKLOAD_LABEL.1);
        for pod in pods
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
        {
            let value = serde_json::to_value(&pod)?;
            let node = value["spec"]["nodeName"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let claim_name = value["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
                .as_str()
                .with_context(|| format!("pod {} has no resource claim", pod.name_any()))?;
            let claim = serde_json::to_value(claims.get(claim_name).await?)?;
            let channel = live::claimed_channel(&claim)
                .with_context(|| format!("claim {claim_name} was allocated no channel-<N>"))?;
            let proc = self.node_file(&node, PROC_DEVICES).await?;
            let major = live::channels_major(&proc)
                .with_context(|| format!("{PROC_DEVICES} on {node} has no IMEX channels major"))?;
            let target = (pod.name_any(), WORKLOAD_CONTAINER.to_owned());
            let ls = self
                .exec(S4_NS, &target, &["ls", "-ln", CHANNELS_DIR])
                .await?;
            let devices = live::listed_devices(&ls).map_err(anyhow::Error::msg)?;
            live::judge_channels(&devices, channel, major)
                .map_err(|why| anyhow::anyhow!("{} on {node}: {why}", pod.name_any()))?;
            details.push(WorkerDetail {
                node,
                pod: pod.name_any(),
                detail: format!(
                    "Running; holds exactly {CHANNELS_DIR}/channel{channel} ({major}, {channel}), claim {claim_name}"
                ),
                passed: true,
            });
        }
        Ok(())
    }

    /// The domain's daemon pods with their IPs.
    async fn daemon_pods(&self) -> Result<Vec<DaemonPod>> {
        let pods: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), DRA_NS, &pod_resource());
        let selector = format!("{DOMAIN_LABEL}={}", self.cd_uid);
        let listed = pods.list(&ListParams::default().labels(&selector)).await?;
        Ok(listed
            .items
            .iter()
            .filter_map(|pod| serde_json::to_value(pod).ok())
            .filter(|pod| pod["metadata"]["deletionTimestamp"].is_null())
            .map(|pod| DaemonPod {
                node: pod["spec"]["nodeName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                name: pod["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                ip: pod["status"]["podIP"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            })
            .collect())
    }

    /// The pod IPs of the daemons in `node`'s clique.
    fn peers(&self, daemons: &[DaemonPod], node: &str) -> BTreeSet<String> {
        let clique = self.plan.clique_of(node);
        daemons
            .iter()
            .filter(|it| self.plan.clique_of(&it.node) == clique)
            .map(|it| it.ip.clone())
            .collect()
    }

    /// Each daemon's `/etc/hosts` names exactly its clique's daemons, and
    /// its IMEX domain is UP with exactly them READY.
    async fn names_and_domains(
        &self,
        daemons: &[DaemonPod],
        details: &mut Vec<WorkerDetail>,
    ) -> Result<()> {
        for daemon in daemons {
            let peers = self.peers(daemons, &daemon.node);
            let target = (daemon.name.clone(), DAEMON_CONTAINER.to_owned());
            let hosts = self.exec(DRA_NS, &target, &["cat", "/etc/hosts"]).await?;
            live::judge_hosts(&live::daemon_hosts(&hosts), &peers)
                .map_err(|why| anyhow::anyhow!("{} on {}: {why}", daemon.name, daemon.node))?;
            self.domain_up(daemon, &peers, MESH_LIMIT).await?;
            details.push(WorkerDetail {
                node: daemon.node.clone(),
                pod: daemon.name.clone(),
                detail: format!(
                    "daemon READY; /etc/hosts names the {} daemons of its clique; `nvidia-imex-ctl -N -j`: \
                     domain UP, exactly they READY",
                    peers.len()
                ),
                passed: true,
            });
        }
        Ok(())
    }

    /// Waits up to `limit` until `daemon`'s `-N -j` shows its domain UP with
    /// exactly `peers` READY.
    async fn domain_up(
        &self,
        daemon: &DaemonPod,
        peers: &BTreeSet<String>,
        limit: Duration,
    ) -> Result<()> {
        let target = (daemon.name.clone(), DAEMON_CONTAINER.to_owned());
        wait_for(
            &format!(
                "the IMEX domain of {} UP with {} peers",
                daemon.name,
                peers.len()
            ),
            limit,
            || async {
                let doc = self.ctl_domain(&target).await?;
                Ok(parse_domain(&doc).and_then(|domain| live::judge_domain(&domain, peers)))
            },
            || async { String::new() },
        )
        .await
    }

    /// `nvidia-imex-ctl -N -j` in a daemon's container (its output, whatever the exit code).
    async fn ctl_domain(&self, target: &(String, String)) -> Result<String> {
        let argv = ["nvidia-imex-ctl", "-N", "-j", "-c", DAEMON_CONFIG];
        let out = crate::k8s::exec_in_namespace(
            self.client,
            DRA_NS,
            (&target.0, &target.1),
            &argv,
            EXEC_LIMIT,
        )
        .await?;
        Ok(format!("{}{}", out.stdout, out.stderr))
    }

    /// Deletes the last tray's daemon pod: the first tray's domain leaves UP,
    /// then, with the recreated daemon, comes back UP; the seconds of each.
    async fn delete_one(&self, daemons: &[DaemonPod]) -> Result<(f64, f64)> {
        let nodes = self.plan.nodes();
        let (first, last) = (nodes.first(), nodes.last());
        let find = |node: Option<&String>| daemons.iter().find(|it| Some(&it.node) == node);
        let (Some(watcher), Some(victim)) = (find(first), find(last)) else {
            bail!("no daemon pod on {first:?} or {last:?}: {daemons:?}");
        };
        let peers = self.peers(daemons, &watcher.node);
        let pods: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), DRA_NS, &pod_resource());
        let started = Instant::now();
        pods.delete(&victim.name, &DeleteParams::default()).await?;
        eprintln!("    deleted daemon pod {} on {}", victim.name, victim.node);
        let target = (watcher.name.clone(), DAEMON_CONTAINER.to_owned());
        wait_for(
            &format!("{}'s IMEX domain to leave UP", watcher.name),
            Duration::from_secs(60),
            || async {
                let doc = self.ctl_domain(&target).await?;
                match parse_domain(&doc).and_then(|domain| live::judge_domain(&domain, &peers)) {
                    Ok(()) => Ok(Err("still UP with every peer".to_owned())),
                    Err(why) => Ok(Ok(why)),
                }
            },
            || async { String::new() },
        )
        .await?;
        let degraded = round(started.elapsed());
        let limit = scaled(Duration::from_secs(120), nodes.len());
        let recovered = wait_for(
            "the domain UP again with a new daemon",
            limit,
            || async {
                let now = self.daemon_pods().await?;
                let peers = self.peers(&now, &watcher.node);
                if now.len() < nodes.len() || peers.iter().any(String::is_empty) {
                    return Ok(Err(format!("{} daemon pods with an IP", now.len())));
                }
                let doc = self.ctl_domain(&target).await?;
                Ok(parse_domain(&doc).and_then(|domain| live::judge_domain(&domain, &peers)))
            },
            || self.diagnose(),
        )
        .await;
        recovered?;
        let mut details = Vec::new();
        self.cd_ready(&mut details).await?;
        Ok((degraded, round(started.elapsed())))
    }

    /// Deletes the workloads and the ComputeDomain: its daemons, clique
    /// objects and the trays' `resource.nvidia.com/computeDomain` label go;
    /// the seconds it took. The domain's directory on each tray stays for
    /// NVIDIA's kubelet plugin's periodic cleanup (every 10 minutes in
    /// v0.4.1: `Unprepare` leaves it, on purpose), which the detail says.
    pub(super) async fn delete(&self, details: &mut Vec<WorkerDetail>) -> Result<f64> {
        let started = Instant::now();
        super::api::clean_up(self.client).await?;
        let pods: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), DRA_NS, &pod_resource());
        let cliques: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), DRA_NS, &clique_resource());
        let nodes_api: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client.clone());
        let selector = format!("{DOMAIN_LABEL}={}", self.cd_uid);
        let nodes = self.plan.nodes();
        wait_for(
            "the deleted ComputeDomain's daemons, cliques and node labels gone",
            scaled(Duration::from_secs(90), nodes.len()),
            || async {
                let daemons = pods.list(&ListParams::default().labels(&selector)).await?.items.len();
                let left = cliques
                    .list(&ListParams::default())
                    .await?
                    .items
                    .iter()
                    .filter(|it| it.name_any().starts_with(self.cd_uid))
                    .count();
                let labelled = nodes_api.list(&ListParams::default().labels(&selector)).await?.items.len();
                match (daemons, left, labelled) {
                    (0, 0, 0) => Ok(Ok(())),
                    _ => Ok(Err(format!(
                        "{daemons} daemon pod(s), {left} clique object(s), {labelled} node(s) labelled {selector}"
                    ))),
                }
            },
            || self.diagnose(),
        )
        .await?;
        let dir = format!("{DOMAINS_DIR}/{}", self.cd_uid);
        let mut kept = Vec::new();
        for node in &nodes {
            if node_view::exists(self.client, node, &dir).await? {
                kept.push(node.clone());
            }
        }
        details.push(WorkerDetail {
            node: String::new(),
            pod: String::new(),
            detail: format!(
                "ComputeDomain deleted: its daemon pods, ComputeDomainClique objects and the {DOMAIN_LABEL} \
                 label of all {} trays gone; {dir} still on {} tray(s), left for NVIDIA's kubelet plugin's \
                 10-minute cleanup",
                nodes.len(),
                kept.len()
            ),
            passed: true,
        });
        Ok(round(started.elapsed()))
    }

    /// Runs `argv` in a pod's container; its stdout, or an error with both streams.
    async fn exec(
        &self,
        ns: &str,
        (pod, container): &(String, String),
        argv: &[&str],
    ) -> Result<String> {
        let out =
            crate::k8s::exec_in_namespace(self.client, ns, (pod, container), argv, EXEC_LIMIT)
                .await?;
        if out.code != 0 {
            bail!(
                "`{}` in {pod} exited {}: {}{}",
                argv.join(" "),
                out.code,
                out.stdout,
                out.stderr
            );
        }
        Ok(out.stdout)
    }

    /// A file on a node, read through the kubelet plugin's container there.
    async fn node_file(&self, node: &str, path: &str) -> Result<String> {
        node_view::read(self.client, node, path).await
    }

    /// The daemon pods' and workloads' state, for a failed wait.
    async fn diagnose(&self) -> String {
        let mut out = crate::k8s::diagnose(
            self.client,
            DRA_NS,
            &format!("{DOMAIN_LABEL}={}", self.cd_uid),
        )
        .await;
        out.push_str(
            &crate::k8s::diagnose(
                self.client,
                S4_NS,
                &format!("{}={}", WORKLOAD_LABEL.0, WORKLOAD_LABEL.1),
            )
            .await,
        );
        out
    }
}

fn claim_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
    ))
}
