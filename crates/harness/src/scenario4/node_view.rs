//! What scenario 4 reads on a tray, through the API on any cluster: a shell
//! in the `compute-domains` container of NVIDIA's kubelet plugin pod on that
//! tray. The chart mounts there everything the scenario reads: the driver
//! root (at `/driver-root`), the staged `/proc/devices` (`altProcDevices`, at
//! `/alt-proc-devices`), the kubelet's plugin directory with each domain's
//! IMEX config, and the CDI specs. Its image has a shell (NVIDIA's base is
//! `gcr.io/distroless/cc:debug`, with busybox on `PATH`; the offline build
//! carries busybox's applets).
//!
//! [`in_plugin`] is pure: a host path as the container sees it.

use anyhow::{bail, Context as _, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::Client;
use std::time::Duration;

use super::names::{DRA_NS, DRIVER_ROOT, PLUGIN_SELECTOR, PROC_DEVICES};
use crate::k8s::ExecOutput;

/// The kubelet plugin's container that mounts the driver root and the domains.
const CONTAINER: &str = "compute-domains";
/// Where that container mounts the driver root (the chart's `driver-root` volume).
const DRIVER_ROOT_MOUNT: &str = "/driver-root";
/// Where it mounts the staged `/proc/devices` (the chart's `alt-proc-devices` volume).
const PROC_DEVICES_MOUNT: &str = "/alt-proc-devices";
/// The bound of one exec.
const EXEC_LIMIT: Duration = Duration::from_secs(20);

/// `path` on the host as the plugin's container sees it: the driver root and
/// the staged `/proc/devices` are mounted elsewhere, the kubelet's plugin
/// directory and `/var/run/cdi` at their host paths.
pub(super) fn in_plugin(path: &str) -> String {
    if path == PROC_DEVICES {
        return PROC_DEVICES_MOUNT.to_owned();
    }
    match path.strip_prefix(DRIVER_ROOT) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            format!("{DRIVER_ROOT_MOUNT}{rest}")
        }
        _ => path.to_owned(),
    }
}

/// Runs `script` with `sh -c` in the plugin's container on `node`.
pub(super) async fn sh(client: &Client, node: &str, script: &str) -> Result<ExecOutput> {
    let pod = plugin_pod(client, node).await?;
    crate::k8s::exec_in_namespace(
        client,
        DRA_NS,
        (&pod, CONTAINER),
        &["sh", "-c", script],
        EXEC_LIMIT,
    )
    .await
    .with_context(|| format!("a shell in {DRA_NS}/{pod} ({CONTAINER}) on {node}"))
}

/// The file at host path `path` on `node`.
pub(super) async fn read(client: &Client, node: &str, path: &str) -> Result<String> {
    let out = sh(client, node, &format!("cat {}", in_plugin(path))).await?;
    if out.code != 0 {
        bail!("reading {path} on {node}: {}", out.stderr.trim());
    }
    Ok(out.stdout)
}

/// Whether host path `path` exists on `node`.
pub(super) async fn exists(client: &Client, node: &str, path: &str) -> Result<bool> {
    let out = sh(client, node, &format!("test -e {}", in_plugin(path))).await?;
    Ok(out.code == 0)
}

/// The running kubelet plugin pod on `node`.
async fn plugin_pod(client: &Client, node: &str) -> Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), DRA_NS);
    let listed = pods
        .list(
            &ListParams::default()
                .labels(PLUGIN_SELECTOR)
                .fields(&format!("spec.nodeName={node}")),
        )
        .await
        .with_context(|| format!("listing the kubelet plugin pods on {node}"))?;
    listed
        .items
        .iter()
        .find_map(crate::k8s::usable_pod)
        .map(|pod| pod.name)
        .with_context(|| {
            format!(
                "no running kubelet plugin pod of NVIDIA's DRA driver on {node} ({DRA_NS}, {PLUGIN_SELECTOR}): \
                 see `kubectl -n {DRA_NS} get pods -o wide`"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_map_to_the_plugin_containers_mounts() {
        assert_eq!(
            in_plugin(&format!("{DRIVER_ROOT}/usr/bin/nvidia-imex")),
            "/driver-root/usr/bin/nvidia-imex"
        );
        assert_eq!(in_plugin(DRIVER_ROOT), "/driver-root");
        assert_eq!(in_plugin(PROC_DEVICES), "/alt-proc-devices");
        assert_eq!(
            in_plugin(&format!("{}/x/nodes.cfg", super::super::DOMAINS_DIR)),
            format!("{}/x/nodes.cfg", super::super::DOMAINS_DIR)
        );
        // A sibling whose name only starts like the driver root is not in it.
        assert_eq!(
            in_plugin(&format!("{DRIVER_ROOT}-old/x")),
            format!("{DRIVER_ROOT}-old/x")
        );
    }
}
