//! Scenario 4: NVIDIA's own ComputeDomain flow on the demo cluster.
//!
//! NVIDIA's DRA driver (compute domains only) is built from the snapshot in the
//! peers directory, put into an image with `image-builder`, loaded into kind and
//! installed with its own Helm chart against the staged driver root. A
//! ComputeDomain for the two clique-0 workers with a workload pair claiming its
//! channel then shows what NVIDIA's controller, kubelet plugin and daemon make
//! of the mock's fabric identity: the daemon pods' clique label, the
//! ComputeDomainClique object named after the clique, the IMEX config the
//! daemon writes on both nodes.
//!
//! Without an `nvidia-imex` binary in the image the daemons cannot start, so
//! the ComputeDomain stays NotReady and the workload pods never run: that part
//! is reported as its own SKIPPED result (`scenario4-imex`), never as passed.
//!
//! Pure planning (image spec, chart values, objects, parsing) is unit-tested
//! here; the build, the install and the waits are the I/O edge.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use image_builder::spec::{FileKind, FileSpec, ImageSpec, Source};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt as _};
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;
use xshell::{cmd, Shell};

use crate::names::{KindCluster, FIELD_MANAGER};
use crate::plan::ImageRef;
use crate::report::{round, Outcome, ScenarioResult, WorkerDetail};
use crate::runner::{Cmd, Runner};
use crate::scenarios::poll::{poll_until, Probe, Show, Wait};

/// The image's repository name; the tag is derived from its content.
pub const DRA_IMAGE: &str = "cdsim-dra-driver";
/// The driver's namespace (the chart refuses `default`).
pub const DRA_NS: &str = "nvidia-dra-driver";
/// The Helm release (its name makes the chart's object names `dra-driver-nvidia-gpu-…`).
pub const DRA_RELEASE: &str = "dra-driver-nvidia-gpu";
/// The kubelet plugin DaemonSet.
pub const PLUGIN_DS: &str = "dra-driver-nvidia-gpu-kubelet-plugin";
/// Its pods.
pub const PLUGIN_SELECTOR: &str = "dra-driver-nvidia-gpu-component=kubelet-plugin";
/// The controller Deployment.
pub const CONTROLLER: &str = "dra-driver-nvidia-gpu-controller";
/// Its pods.
pub const CONTROLLER_SELECTOR: &str = "dra-driver-nvidia-gpu-component=controller";
/// Where the scenario's ComputeDomain and workload live.
pub const S4_NS: &str = "cdsim-scenario4";
/// The ComputeDomain.
pub const CD_NAME: &str = "cdsim-s4";
/// The workload channel claim template the ComputeDomain asks the controller for.
pub const CHANNEL_RCT: &str = "cdsim-s4-channel";
/// The workload pods' label.
pub const WORKLOAD_LABEL: (&str, &str) = ("app.kubernetes.io/name", "cdsim-s4-workload");
/// The label NVIDIA's daemon puts on its own pod.
pub const CLIQUE_LABEL: &str = "resource.nvidia.com/computeDomain.cliqueID";
/// Where the kubelet plugin keeps each domain's daemon config (bind-mounted at `/imexd`).
pub const DOMAINS_DIR: &str = "/var/lib/kubelet/plugins/compute-domain.nvidia.com/domains";
/// The staged driver root on each node.
pub const DRIVER_ROOT: &str = "/var/lib/nvml-mock/driver";
/// The staged substitute `/proc/devices` (the IMEX majors).
pub const PROC_DEVICES: &str = "/var/lib/nvml-mock/imex/proc-devices";

/// The three DRA binaries built from the snapshot (one `go build`).
pub const DRA_BINARIES: [&str; 3] = [
    "compute-domain-kubelet-plugin",
    "compute-domain-controller",
    "compute-domain-daemon",
];

/// The applets the chart's init script and containers call, as busybox links.
const BUSYBOX_LINKS: [&str; 20] = [
    "[", "basename", "cat", "cp", "date", "env", "find", "grep", "head", "ln", "ls", "mkdir",
    "mount", "printf", "rm", "sed", "sh", "sleep", "test", "true",
];

// ---------------------------------------------------------------- pure planning

/// Everything the image is made of, on the build host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInputs {
    /// The directory with [`DRA_BINARIES`].
    pub bin_dir: PathBuf,
    /// `nvidia-cdi-hook` (nvidia-container-toolkit).
    pub cdi_hook: PathBuf,
    /// The snapshot's unpacked tree (`hack/kubelet-plugin-prestart.sh`, `templates/`).
    pub source: PathBuf,
    /// The snapshot's `templates/*` file names.
    pub templates: Vec<String>,
    /// A static bash (the chart runs `bash …`).
    pub bash: PathBuf,
    /// A static busybox.
    pub busybox: PathBuf,
}

fn host_file(path: &str, host: &Path, mode: u32, links: &[&str]) -> FileSpec {
    FileSpec {
        path: path.to_owned(),
        kind: FileKind::File {
            source: Source::Host {
                path: host.to_string_lossy().into_owned(),
                // Not built by Nix (the DRA driver is not in nixpkgs): the names say so.
                nix: String::new(),
                nix_path: String::new(),
            },
            mode,
            links: links.iter().map(|it| (*it).to_owned()).collect(),
        },
    }
}

/// The DRA driver image, laid out as its Dockerfile does (binaries in
/// `/usr/bin`, templates at `/templates`, a static `/bin/bash`), with busybox
/// for the init script's tools; the builder adds glibc and `libgcc_s` for the
/// cgo kubelet plugin.
pub fn image_spec(inputs: &ImageInputs) -> ImageSpec {
    let mut files: Vec<FileSpec> = DRA_BINARIES
        .iter()
        .map(|name| {
            host_file(
                &format!("/usr/bin/{name}"),
                &inputs.bin_dir.join(name),
                0o755,
                &[],
            )
        })
        .collect();
    files.push(host_file(
        "/usr/bin/nvidia-cdi-hook",
        &inputs.cdi_hook,
        0o755,
        &[],
    ));
    files.push(host_file(
        "/usr/bin/kubelet-plugin-prestart.sh",
        &inputs.source.join("hack/kubelet-plugin-prestart.sh"),
        0o755,
        &[],
    ));
    files.push(host_file("/bin/bash", &inputs.bash, 0o755, &[]));
    files.push(host_file(
        "/bin/busybox",
        &inputs.busybox,
        0o755,
        &BUSYBOX_LINKS,
    ));
    for name in &inputs.templates {
        files.push(host_file(
            &format!("/templates/{name}"),
            &inputs.source.join("templates").join(name),
            0o644,
            &[],
        ));
    }
    files.push(FileSpec {
        path: "/tmp".to_owned(),
        kind: FileKind::Dir { mode: 0o1777 },
    });
    ImageSpec {
        name: DRA_IMAGE.to_owned(),
        description: "NVIDIA's DRA driver (compute domains), built from the pinned snapshot for scenario 4".to_owned(),
        entrypoint: Vec::new(),
        cmd: vec!["/bin/sh".to_owned()],
        env: vec!["PATH=/usr/bin:/bin".to_owned()],
        workdir: "/".to_owned(),
        labels: [
            ("org.opencontainers.image.title", DRA_IMAGE),
            (
                "org.opencontainers.image.description",
                "NVIDIA DRA driver for GPUs, compute-domain components (cdsim scenario 4; local build)",
            ),
            ("org.opencontainers.image.licenses", "Apache-2.0"),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect(),
        imex_label: None,
        files,
    }
}

/// The DRA chart's values: compute domains only, on the staged driver root.
pub fn chart_values(image: &ImageRef) -> String {
    let values = json!({
        "nvidiaDriverRoot": DRIVER_ROOT,
        "altProcDevices": PROC_DEVICES,
        "resources": {
            "gpus": { "enabled": false },
            "computeDomains": { "enabled": true },
        },
        "image": {
            "repository": image.repository,
            "tag": image.tag,
            "pullPolicy": "Never",
        },
        "kubeletPlugin": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{
                            "matchExpressions": [{
                                "key": "nvidia.com/gpu.present",
                                "operator": "In",
                                "values": ["true"],
                            }],
                        }],
                    },
                },
            },
        },
    });
    serde_yaml::to_string(&values).unwrap_or_default()
}

/// `helm upgrade --install` of the DRA chart (idempotent).
pub fn helm_args(chart: &Path, context: &str, values: &Path) -> Vec<String> {
    [
        "upgrade",
        "--install",
        DRA_RELEASE,
        &chart.to_string_lossy(),
        "--kube-context",
        context,
        "--namespace",
        DRA_NS,
        "--create-namespace",
        "-f",
        &values.to_string_lossy(),
    ]
    .iter()
    .map(|it| (*it).to_owned())
    .collect()
}

/// The ComputeDomain: two nodes, a channel claim template for the workload.
pub fn compute_domain() -> Value {
    json!({
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": { "name": CD_NAME, "namespace": S4_NS },
        "spec": {
            "numNodes": 2,
            "channel": { "resourceClaimTemplate": { "name": CHANNEL_RCT } },
        },
    })
}

/// A workload pod on `node`, placed through the scheduler (node affinity,
/// never `nodeName`, which would skip DRA allocation), claiming the channel.
pub fn workload_pod(name: &str, node: &str, image: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": S4_NS,
            "labels": { WORKLOAD_LABEL.0: WORKLOAD_LABEL.1 },
        },
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{ "matchExpressions": [{
                    "key": "kubernetes.io/hostname", "operator": "In", "values": [node],
                }]}],
            }}},
            "resourceClaims": [{ "name": "channel", "resourceClaimTemplateName": CHANNEL_RCT }],
            "containers": [{
                "name": "workload",
                "image": image,
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", "ls -l /dev/nvidia-caps-imex-channels && sleep 3600"],
                "resources": { "claims": [{ "name": "channel" }] },
            }],
        },
    })
}

/// The clique id NVIDIA's plugin derives for a node: `<cluster uuid>.<clique>`.
pub fn clique_id(topology: &topology::Topology, node: &str) -> Option<String> {
    topology
        .resolve(node)
        .map(|identity| format!("{}.{}", identity.cluster_uuid, identity.clique_id))
}

/// The two clique-0 workers of the demo topology and their clique id.
pub fn clique0_pair(workers: &[String]) -> Result<([String; 2], String)> {
    let topology = topology::demo(workers);
    let clique0: Vec<&String> = workers
        .iter()
        .filter(|node| topology.resolve(node).is_some_and(|it| it.clique_id == 0))
        .collect();
    match clique0.as_slice() {
        [a, b, ..] => {
            let id = clique_id(&topology, a)
                .with_context(|| format!("{a} is not in the demo topology"))?;
            Ok(([(*a).clone(), (*b).clone()], id))
        }
        _ => bail!("scenario 4 needs two workers in clique 0, found {clique0:?}"),
    }
}

/// The ComputeDomainClique's name for a domain and clique.
pub fn clique_object_name(cd_uid: &str, clique: &str) -> String {
    format!("{cd_uid}.{clique}")
}

/// Host names listed in a `nodes.cfg` (one per line, comments and blanks skipped).
pub fn nodes_cfg_entries(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// The nodes a ComputeDomainClique object lists (`daemons[].nodeName`).
pub fn clique_daemon_nodes(clique: &Value) -> BTreeSet<String> {
    clique["daemons"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|daemon| daemon["nodeName"].as_str().map(str::to_owned))
        .collect()
}

/// What the ComputeDomain's status says (`Ready`, `NotReady`, or empty).
pub fn cd_status(cd: &Value) -> String {
    cd["status"]["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

// ---------------------------------------------------------------- build

/// The pinned DRA snapshot.
struct Snapshot {
    archive: PathBuf,
    sha256: String,
    version: String,
}

impl Snapshot {
    fn key(&self) -> &str {
        &self.sha256[..16]
    }
}

fn pinned(versions: &toml::Table, key: &str) -> Result<String> {
    versions
        .get("peers")
        .and_then(|peers| peers.get(key))
        .and_then(toml::Value::as_str)
        .map(str::to_owned)
        .with_context(|| format!("manifests/versions.toml has no [peers] {key}"))
}

fn snapshot() -> Result<Snapshot> {
    let versions = crate::tools::read_versions()?;
    let name = pinned(&versions, "dra_driver_archive")?;
    let sha256 = pinned(&versions, "dra_driver_sha256")?;
    let version = pinned(&versions, "dra_driver_version")?;
    let mut candidates: Vec<PathBuf> = std::env::var_os("CDSIM_PEERS_DIR")
        .filter(|it| !it.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.push(crate::project_root().join("../shared/peers"));
    candidates.push(crate::dirs::cache_dir()?.join("peers"));
    let archive = candidates
        .iter()
        .map(|dir| dir.join(&name))
        .find(|path| path.is_file())
        .with_context(|| {
            format!(
                "{name} (NVIDIA's DRA driver snapshot, see ../shared/peers/README.md) is in none of {candidates:?}: \
                 set CDSIM_PEERS_DIR to the directory holding it"
            )
        })?;
    Ok(Snapshot {
        archive,
        sha256,
        version,
    })
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(format!("{:x}", hasher.finalize()))
}

/// `<cache>/<key>`, made by `make(staging)` into a fresh directory and renamed
/// into place, so an interrupted build never leaves a partial entry behind.
fn cached(parent: &Path, key: &str, make: impl FnOnce(&Path) -> Result<()>) -> Result<PathBuf> {
    let dir = parent.join(key);
    if dir.is_dir() {
        return Ok(dir);
    }
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let staging = parent.join(format!(".{key}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)?;
    if let Err(err) = make(&staging) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(err);
    }
    if let Err(err) = std::fs::rename(&staging, &dir) {
        let _ = std::fs::remove_dir_all(&staging);
        if !dir.is_dir() {
            return Err(err).with_context(|| format!("cannot move the build to {}", dir.display()));
        }
    }
    Ok(dir)
}

/// The snapshot's tree, unpacked once into the cache; returns its top directory.
fn source_tree(sh: &Shell, snapshot: &Snapshot) -> Result<PathBuf> {
    let parent = crate::dirs::cache_dir()?.join("src");
    let dir = cached(&parent, &format!("dra-driver-{}", snapshot.key()), |out| {
        let actual = sha256_file(&snapshot.archive)?;
        if actual != snapshot.sha256 {
            bail!(
                "{} has sha256 {actual}, not the pinned {}: replace it with the snapshot ../shared/peers/README.md names",
                snapshot.archive.display(),
                snapshot.sha256
            );
        }
        let archive = &snapshot.archive;
        cmd!(sh, "tar -xzf {archive} -C {out}")
            .quiet()
            .run()
            .context("cannot unpack the DRA snapshot")?;
        Ok(())
    })?;
    let top = std::fs::read_dir(&dir)?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.join("go.mod").is_file())
        .with_context(|| format!("{} holds no Go module: remove it and rerun", dir.display()))?;
    Ok(top)
}

/// The three DRA binaries, built once per snapshot (about 3 min cold on 2 cores).
fn dra_binaries(sh: &Shell, tree: &Path, snapshot: &Snapshot) -> Result<PathBuf> {
    let parent = crate::dirs::cache_dir()?.join("go");
    cached(&parent, &format!("dra-driver-{}", snapshot.key()), |out| {
        eprintln!(
            "    go build {} from the DRA snapshot (minutes when cold)",
            DRA_BINARIES.join(", ")
        );
        let started = Instant::now();
        let _dir = sh.push_dir(tree);
        let _env = [
            sh.push_env("GOFLAGS", "-mod=vendor"),
            sh.push_env("GOPROXY", "off"),
            sh.push_env("GOTOOLCHAIN", "local"),
            // The kubelet plugin dlopens NVML through cgo; one setting for all
            // three shares the build cache.
            sh.push_env("CGO_ENABLED", "1"),
        ];
        let ldflags = format!(
            "-s -w -X sigs.k8s.io/dra-driver-nvidia-gpu/internal/info.version={}",
            snapshot.version
        );
        let out_arg = format!("{}/", out.display());
        let packages: Vec<String> = DRA_BINARIES
            .iter()
            .map(|it| format!("./cmd/{it}"))
            .collect();
        cmd!(
            sh,
            "nice -n 10 go build -ldflags {ldflags} -o {out_arg} {packages...}"
        )
        .run()
        .context(
            "go build of the DRA driver failed (needs Go 1.26, see ../shared/peers/README.md)",
        )?;
        eprintln!("    built in {:.0} s", started.elapsed().as_secs_f64());
        Ok(())
    })
}

/// `nvidia-cdi-hook` from the module proxy at the pinned toolkit version.
fn cdi_hook(sh: &Shell) -> Result<PathBuf> {
    let versions = crate::tools::read_versions()?;
    let version = pinned(&versions, "nvidia_container_toolkit")?;
    let parent = crate::dirs::cache_dir()?.join("go");
    let dir = cached(&parent, &format!("nvidia-cdi-hook-{version}"), |out| {
        eprintln!("    go install nvidia-cdi-hook@{version}");
        let _env = [
            sh.push_env("GOBIN", out),
            sh.push_env("GOFLAGS", ""),
            sh.push_env("GOTOOLCHAIN", "local"),
        ];
        let package =
            format!("github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook@{version}");
        cmd!(sh, "nice -n 10 go install {package}")
            .run()
            .context("go install nvidia-cdi-hook failed: is the Go module proxy reachable?")?;
        Ok(())
    })?;
    Ok(dir.join("nvidia-cdi-hook"))
}

fn existing(path: &str, fix: &str) -> Result<PathBuf> {
    let path = PathBuf::from(path);
    match path.is_file() {
        true => Ok(path),
        false => bail!("{} is missing: {fix}", path.display()),
    }
}

/// The built image and the chart directory of the same snapshot.
pub struct DraImage {
    /// The archive for `kind load image-archive`.
    pub archive: PathBuf,
    /// Its reference (content tag).
    pub image: ImageRef,
    /// The snapshot's chart.
    pub chart: PathBuf,
}

/// Builds (or reuses) the binaries and writes the image archive into `out_dir`.
pub fn build(sh: &Shell, out_dir: &Path) -> Result<DraImage> {
    let bash = existing(
        "/bin/bash-static",
        "apt-get install bash-static (the chart runs bash)",
    )?;
    let busybox = existing("/bin/busybox", "apt-get install busybox-static")?;
    let snapshot = snapshot()?;
    let tree = source_tree(sh, &snapshot)?;
    let bin_dir = dra_binaries(sh, &tree, &snapshot)?;
    let cdi_hook = cdi_hook(sh)?;
    let mut templates: Vec<String> = std::fs::read_dir(tree.join("templates"))
        .with_context(|| format!("reading {}/templates", tree.display()))?
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    templates.sort();
    let mut spec = image_spec(&ImageInputs {
        bin_dir,
        cdi_hook,
        source: tree.clone(),
        templates,
        bash,
        busybox,
    });
    let cache = image_builder::host::read_ld_cache()?;
    // The init script runs the driver root's nvidia-smi (Rust: needs libgcc_s)
    // with this image's loader and libraries; no Go binary pulls it in.
    let gcc_s = cache
        .iter()
        .find(|it| it.soname == "libgcc_s.so.1")
        .context("libgcc_s.so.1 is not in the host's loader cache: apt-get install libgcc-s1")?;
    spec.files
        .push(host_file(&gcc_s.path, Path::new(&gcc_s.path), 0o644, &[]));
    let root = crate::project_root();
    let inputs = image_builder::build::Inputs {
        repo_root: &root,
        artifact_dir: &root,
        payload: None,
        source_date_epoch: 0,
    };
    let built =
        image_builder::build::build_image(&spec, &inputs, &image_builder::host::RealFs, &cache)
            .context("cannot build the DRA driver image")?;
    let archive = image_builder::build::write_archive_file(&built, out_dir)?;
    let image = ImageRef::parse(&built.reference())?;
    Ok(DraImage {
        archive,
        image,
        chart: tree.join("deployments/helm/dra-driver-nvidia-gpu"),
    })
}

// ---------------------------------------------------------------- cluster I/O

fn gvk(group: &str, version: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}

fn cd_resource() -> ApiResource {
    gvk("resource.nvidia.com", "v1beta1", "ComputeDomain")
}

fn clique_resource() -> ApiResource {
    gvk("resource.nvidia.com", "v1beta1", "ComputeDomainClique")
}

fn pod_resource() -> ApiResource {
    gvk("", "v1", "Pod")
}

async fn apply(client: &Client, resource: &ApiResource, object: &Value) -> Result<DynamicObject> {
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let ns = object["metadata"]["namespace"].as_str().unwrap_or(S4_NS);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, resource);
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {} {ns}/{name}", resource.kind))
}

async fn ensure_namespace(client: &Client) -> Result<()> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": S4_NS}});
    api.patch(
        S4_NS,
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Apply(&ns),
    )
    .await
    .with_context(|| format!("creating namespace {S4_NS}"))?;
    Ok(())
}

/// Polls `probe` every second until it yields a value, printing its progress
/// when it changes; on timeout fails with the last progress and `diagnose()`.
async fn wait_for<T, P, F, D, G>(
    what: &str,
    limit: Duration,
    mut probe: P,
    diagnose: D,
) -> Result<T>
where
    P: FnMut() -> F,
    F: std::future::Future<Output = Result<std::result::Result<T, String>>>,
    D: FnOnce() -> G,
    G: std::future::Future<Output = String>,
{
    let wait = Wait {
        show: Show::Named(what),
        since: Instant::now(),
        limit,
        every: Duration::from_secs(1),
    };
    let got = poll_until(&wait, || {
        let probed = probe();
        async move {
            match probed.await {
                Ok(Ok(value)) => Probe::Done(value),
                Ok(Err(progress)) => Probe::Pending(progress),
                Err(err) => Probe::Pending(format!("{err:#}")),
            }
        }
    })
    .await;
    match got {
        Ok(value) => Ok(value),
        Err(unmet) => {
            let diagnostics = diagnose().await;
            bail!(
                "{what}: not after {}s ({})\n{diagnostics}",
                limit.as_secs(),
                unmet.last
            );
        }
    }
}

async fn wait_deployment(
    client: &Client,
    ns: &str,
    name: &str,
    selector: &str,
    limit: Duration,
) -> Result<()> {
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), ns);
    wait_for(
        &format!("deployment {ns}/{name} available"),
        limit,
        || async {
            let Some(it) = api.get_opt(name).await? else {
                return Ok(Err("not created yet".to_owned()));
            };
            let want = it.spec.as_ref().and_then(|spec| spec.replicas).unwrap_or(1);
            let status = it.status.unwrap_or_default();
            let ready = status.available_replicas.unwrap_or(0);
            let updated = status.updated_replicas.unwrap_or(0);
            match ready >= want && updated >= want {
                true => Ok(Ok(())),
                false => Ok(Err(format!("{ready}/{want} available, {updated} updated"))),
            }
        },
        || crate::k8s::diagnose(client, ns, selector),
    )
    .await
}

/// Installs (or upgrades) the DRA chart and waits for the plugin on every
/// worker and the controller.
pub async fn install<R: Runner>(
    runner: &R,
    client: &Client,
    context: &str,
    image: &DraImage,
    dir: &Path,
) -> Result<()> {
    let values = dir.join("dra-values.yaml");
    std::fs::write(&values, chart_values(&image.image))
        .with_context(|| format!("writing {}", values.display()))?;
    let args = helm_args(&image.chart, context, &values);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    runner.check(&Cmd::new("helm", &args))?;
    crate::k8s::wait_daemonset(
        client,
        DRA_NS,
        PLUGIN_DS,
        PLUGIN_SELECTOR,
        Duration::from_secs(240),
    )
    .await?;
    wait_deployment(
        client,
        DRA_NS,
        CONTROLLER,
        CONTROLLER_SELECTOR,
        Duration::from_secs(120),
    )
    .await
}

/// Deletes what an earlier run left: the workload pods and the ComputeDomain
/// (the controller then removes its daemons), waiting until they are gone.
async fn clean_up(client: &Client) -> Result<()> {
    let pods: Api<DynamicObject> = Api::namespaced_with(client.clone(), S4_NS, &pod_resource());
    let cds: Api<DynamicObject> = Api::namespaced_with(client.clone(), S4_NS, &cd_resource());
    let selector = format!("{}={}", WORKLOAD_LABEL.0, WORKLOAD_LABEL.1);
    let listed = pods.list(&ListParams::default().labels(&selector)).await?;
    for pod in listed.items {
        let _ = pods
            .delete(&pod.name_any(), &DeleteParams::default().grace_period(0))
            .await;
    }
    if cds.get_opt(CD_NAME).await?.is_some() {
        let _ = cds.delete(CD_NAME, &DeleteParams::default()).await;
    }
    wait_for(
        "earlier scenario 4 objects gone",
        Duration::from_secs(90),
        || async {
            let left = pods
                .list(&ListParams::default().labels(&selector))
                .await?
                .items
                .len();
            let cd = cds.get_opt(CD_NAME).await?.is_some();
            match (left, cd) {
                (0, false) => Ok(Ok(())),
                _ => Ok(Err(format!(
                    "{left} workload pod(s), ComputeDomain present: {cd}"
                ))),
            }
        },
        || crate::k8s::diagnose(client, S4_NS, &selector),
    )
    .await
}

/// Why scenario 4 cannot run here, if it cannot: NVIDIA's DRA driver is built
/// from its source snapshot (no registry serves it), which needs the snapshot
/// and, until the build is cached, Go.
fn missing_prerequisite() -> Option<String> {
    let snapshot = match snapshot() {
        Ok(snapshot) => snapshot,
        Err(err) => return Some(format!("{err:#}")),
    };
    let built = crate::dirs::cache_dir()
        .map(|dir| {
            dir.join("go")
                .join(format!("dra-driver-{}", snapshot.key()))
                .is_dir()
        })
        .unwrap_or(false);
    if !built && crate::tools::find_on_path("go").is_none() {
        return Some(
            "NVIDIA's DRA driver is built from its source snapshot with Go 1.26, and no `go` is on PATH: \
             install Go (or use `nix develop`) and rerun `cargo xtask scenario4`"
                .to_owned(),
        );
    }
    None
}

/// Runs scenario 4 on the kind cluster; returns its result, the SKIPPED
/// IMEX part and the rebind part.
pub async fn run<R: Runner>(
    sh: &Shell,
    runner: &R,
    cluster: &KindCluster,
    client: &Client,
    tracker: &crate::interrupt::Tracker,
) -> Result<Vec<ScenarioResult>> {
    let started = Instant::now();
    let mut timings: Vec<(String, f64)> = Vec::new();
    let mut mark = Instant::now();
    let mut lap = |name: &str, timings: &mut Vec<(String, f64)>| {
        timings.push((name.to_owned(), round(mark.elapsed())));
        mark = Instant::now();
    };

    if let Some(reason) = missing_prerequisite() {
        return Ok(vec![ScenarioResult {
            name: "scenario4".to_owned(),
            outcome: Outcome::Skipped(reason),
            seconds: round(started.elapsed()),
            workers: Vec::new(),
            timings: Vec::new(),
        }]);
    }
    let scratch = crate::dirs::scratch_dir("scenario4")?;
    let image = build(sh, &crate::dirs::images_dir()?)?;
    eprintln!("    {} ({})", image.image, image.archive.display());
    lap("build", &mut timings);
    let loaded =
        crate::cluster::load_image(runner, cluster, &image.archive, &image.image.to_string())?;
    match loaded.is_empty() {
        true => eprintln!("    {}: already on every node", image.image),
        false => eprintln!("    {}: loaded into {}", image.image, loaded.join(", ")),
    }
    lap("load", &mut timings);
    install(runner, client, &cluster.context(), &image, &scratch).await?;
    lap("install", &mut timings);

    let workers = cluster.workers();
    let (pair, clique) = clique0_pair(&workers)?;
    ensure_namespace(client).await?;
    clean_up(client).await?;
    lap("clean", &mut timings);

    let mut details = Vec::new();
    let (checks, status) = domain_flow(
        runner,
        client,
        &pair,
        &clique,
        &image.image.to_string(),
        true,
        &mut details,
    )
    .await;
    let cleaned = clean_up(client).await;
    lap("domain", &mut timings);

    let outcome = match (&checks, &cleaned) {
        (Ok(()), Ok(())) => Outcome::Passed,
        (Err(err), _) => Outcome::Failed(format!("{err:#}")),
        (Ok(()), Err(err)) => Outcome::Failed(format!("cleanup: {err:#}")),
    };
    let main = ScenarioResult {
        name: "scenario4".to_owned(),
        outcome,
        seconds: round(started.elapsed()),
        workers: details,
        timings,
    };
    let imex = ScenarioResult {
        name: "scenario4-imex".to_owned(),
        outcome: Outcome::Skipped(format!(
            "the {DRA_IMAGE} image has no nvidia-imex (proprietary; no payload or IMEX double wired into it): \
             the daemons exit at `exec nvidia-imex`, so the ComputeDomain stays NotReady (status seen: {}) and the \
             workload pods never run",
            if status.is_empty() { "none" } else { status.as_str() }
        )),
        seconds: 0.0,
        workers: Vec::new(),
        timings: Vec::new(),
    };
    let rebind = rebind_part(
        runner,
        client,
        cluster,
        &pair,
        &image.image.to_string(),
        tracker,
        &scratch,
    )
    .await;
    Ok(vec![main, imex, rebind])
}

/// Creates the ComputeDomain and the workload pair, asserts what NVIDIA's
/// software shows, and returns the checks and the domain's last status.
async fn domain_flow<R: Runner>(
    runner: &R,
    client: &Client,
    pair: &[String; 2],
    clique: &str,
    image_ref: &str,
    imex_config: bool,
    details: &mut Vec<WorkerDetail>,
) -> (Result<()>, String) {
    let checks = async {
        let cd = apply(client, &cd_resource(), &compute_domain()).await?;
        let cd_uid = cd.uid().context("the ComputeDomain has no uid")?;
        for (index, node) in pair.iter().enumerate() {
            apply(
                client,
                &pod_resource(),
                &workload_pod(&format!("cdsim-s4-workload-{index}"), node, image_ref),
            )
            .await?;
        }
        eprintln!(
            "    ComputeDomain {S4_NS}/{CD_NAME} (uid {cd_uid}) and workload pods on {}",
            pair.join(", ")
        );
        assert_flow(runner, client, pair, clique, &cd_uid, imex_config, details).await
    }
    .await;
    let status = Api::<DynamicObject>::namespaced_with(client.clone(), S4_NS, &cd_resource())
        .get_opt(CD_NAME)
        .await
        .ok()
        .flatten()
        .and_then(|it| serde_json::to_value(it).ok())
        .map(|it| cd_status(&it))
        .unwrap_or_default();
    (checks, status)
}

/// Waits until the stager has labelled both nodes `nvidia.com/gpu.clique=<clique>`.
async fn wait_clique_labels(client: &Client, pair: &[String; 2], clique: &str) -> Result<()> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    wait_for(
        &format!("nvidia.com/gpu.clique={clique} on {}", pair.join(", ")),
        Duration::from_secs(90),
        || async {
            let mut seen = Vec::new();
            for node in pair {
                let it = nodes.get(node).await?;
                seen.push(
                    it.labels()
                        .get("nvidia.com/gpu.clique")
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            match seen.iter().all(|it| it == clique) {
                true => Ok(Ok(())),
                false => Ok(Err(format!("labels now {seen:?}"))),
            }
        },
        || async { String::new() },
    )
    .await
}

/// The kubelet plugin reads the clique once: delete its pods and wait for the rollout.
async fn restart_plugin(client: &Client) -> Result<()> {
    let pods: Api<DynamicObject> = Api::namespaced_with(client.clone(), DRA_NS, &pod_resource());
    for pod in pods
        .list(&ListParams::default().labels(PLUGIN_SELECTOR))
        .await?
        .items
    {
        pods.delete(&pod.name_any(), &DeleteParams::default())
            .await?;
    }
    // Let the DaemonSet notice before waiting for its rollout.
    tokio::time::sleep(Duration::from_secs(2)).await;
    crate::k8s::wait_daemonset(
        client,
        DRA_NS,
        PLUGIN_DS,
        PLUGIN_SELECTOR,
        Duration::from_secs(180),
    )
    .await
}

/// After scenario 3's rebinding and a plugin restart, a new ComputeDomain's
/// daemons report the rebind clique; the demo topology is restored after.
async fn rebind_part<R: Runner>(
    runner: &R,
    client: &Client,
    cluster: &KindCluster,
    pair: &[String; 2],
    image_ref: &str,
    tracker: &crate::interrupt::Tracker,
    dir: &Path,
) -> ScenarioResult {
    let started = Instant::now();
    let workers = cluster.workers();
    let rebind = topology::rebind(&workers);
    let clique = clique_id(&rebind, &pair[0]).unwrap_or_default();
    let rebind_file = dir.join("rebind-topology.yaml");
    let demo_file = dir.join("demo-topology.yaml");
    let helm = |file: &Path| {
        crate::plan::helm_topology_args(
            crate::names::CHART,
            &cluster.context(),
            &file.to_string_lossy(),
        )
    };
    let mut details = Vec::new();
    let checks = async {
        std::fs::write(&rebind_file, rebind.helm_values())?;
        std::fs::write(&demo_file, topology::demo(&workers).helm_values())?;
        tracker.restore_topology(Some(helm(&demo_file)));
        let args = helm(&rebind_file);
        runner.check(&Cmd::new(
            "helm",
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        ))?;
        wait_clique_labels(client, pair, &clique).await?;
        restart_plugin(client).await?;
        let (checks, _) = domain_flow(
            runner,
            client,
            pair,
            &clique,
            image_ref,
            false,
            &mut details,
        )
        .await;
        checks
    }
    .await;
    let cleaned = clean_up(client).await;
    // Restore the demo topology and the plugin's view of it, whatever happened.
    let restored = async {
        let args = helm(&demo_file);
        runner.check(&Cmd::new(
            "helm",
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        ))?;
        let demo_clique = clique_id(&topology::demo(&workers), &pair[0]).unwrap_or_default();
        wait_clique_labels(client, pair, &demo_clique).await?;
        restart_plugin(client).await
    }
    .await;
    tracker.restore_topology(None);
    let outcome = match (checks, cleaned, restored) {
        (Ok(()), Ok(()), Ok(())) => Outcome::Passed,
        (Err(err), _, _) => Outcome::Failed(format!("{err:#}")),
        (_, Err(err), _) => Outcome::Failed(format!("cleanup: {err:#}")),
        (_, _, Err(err)) => Outcome::Failed(format!("restoring the demo topology: {err:#}")),
    };
    ScenarioResult {
        name: "scenario4-rebind".to_owned(),
        outcome,
        seconds: round(started.elapsed()),
        workers: details,
        timings: Vec::new(),
    }
}

async fn assert_flow<R: Runner>(
    runner: &R,
    client: &Client,
    pair: &[String; 2],
    clique: &str,
    cd_uid: &str,
    imex_config: bool,
    details: &mut Vec<WorkerDetail>,
) -> Result<()> {
    let pods: Api<DynamicObject> = Api::namespaced_with(client.clone(), DRA_NS, &pod_resource());
    let want: BTreeSet<String> = pair.iter().cloned().collect();
    // 1. The daemon pods (DaemonSet computedomain-daemon-<uid>) on both nodes,
    //    labelled with the clique by NVIDIA's daemon.
    let daemons = wait_for(
        &format!(
            "daemon pods on {} labelled {CLIQUE_LABEL}={clique}",
            pair.join(", ")
        ),
        Duration::from_secs(180),
        || async {
            let listed = pods.list(&ListParams::default()).await?;
            let on: Vec<(String, String, String)> = listed
                .items
                .iter()
                .filter(|pod| pod.name_any().contains(cd_uid))
                .map(|pod| {
                    let value = serde_json::to_value(pod).unwrap_or_default();
                    let node = value["spec"]["nodeName"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let label = pod.labels().get(CLIQUE_LABEL).cloned().unwrap_or_default();
                    (node, pod.name_any(), label)
                })
                .collect();
            let good: BTreeSet<String> = on
                .iter()
                .filter(|(node, _, label)| label == clique && want.contains(node))
                .map(|(node, _, _)| node.clone())
                .collect();
            match good == want {
                true => Ok(Ok(on)),
                false if on.is_empty() => Ok(Err("no daemon pod yet".to_owned())),
                false => Ok(Err(format!(
                    "daemon pods (node, pod, clique label): {on:?}"
                ))),
            }
        },
        || async {
            let mut out = crate::k8s::diagnose(client, DRA_NS, PLUGIN_SELECTOR).await;
            out.push_str(
                &crate::k8s::diagnose(
                    client,
                    S4_NS,
                    &format!("{}={}", WORKLOAD_LABEL.0, WORKLOAD_LABEL.1),
                )
                .await,
            );
            out
        },
    )
    .await?;
    for (node, pod, label) in &daemons {
        details.push(WorkerDetail {
            node: node.clone(),
            pod: pod.clone(),
            detail: format!("daemon pod labelled {CLIQUE_LABEL}={label}"),
            passed: label == clique,
        });
    }
    // 2. The ComputeDomainClique named after the domain and the clique.
    let name = clique_object_name(cd_uid, clique);
    let cliques: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), DRA_NS, &clique_resource());
    let seen = wait_for(
        &format!("ComputeDomainClique {DRA_NS}/{name}"),
        Duration::from_secs(60),
        || async {
            match cliques.get_opt(&name).await? {
                Some(it) => Ok(Ok(clique_daemon_nodes(&serde_json::to_value(it)?))),
                None => Ok(Err("not created yet".to_owned())),
            }
        },
        || async {
            match cliques.list(&ListParams::default()).await {
                Ok(list) => format!(
                    "  cliques in {DRA_NS}: {:?}",
                    list.items
                        .iter()
                        .map(|it| it.name_any())
                        .collect::<Vec<_>>()
                ),
                Err(err) => format!("  cannot list cliques: {err}"),
            }
        },
    )
    .await?;
    details.push(WorkerDetail {
        node: String::new(),
        pod: String::new(),
        detail: format!("ComputeDomainClique {name} exists (daemons listed now: {seen:?})"),
        passed: true,
    });
    // 3. The daemon's IMEX config on both nodes (the plugin's per-domain dir, the daemon's /imexd).
    if !imex_config {
        return Ok(());
    }
    for node in pair {
        let dir = format!("{DOMAINS_DIR}/{cd_uid}");
        let text = wait_for(
            &format!("IMEX config of the domain on {node}"),
            Duration::from_secs(60),
            || async {
                let out = runner.run(&Cmd::new(
                    "docker",
                    &[
                        "exec",
                        node,
                        "sh",
                        "-c",
                        &format!("test -s {dir}/imexd.cfg && cat {dir}/nodes.cfg"),
                    ],
                ))?;
                match out.ok {
                    true => Ok(Ok(out.stdout)),
                    false => Ok(Err(format!("{dir}/imexd.cfg or nodes.cfg not written yet"))),
                }
            },
            || async {
                runner
                    .run(&Cmd::new("docker", &["exec", node, "ls", "-la", &dir]))
                    .map(|out| format!("  ls {dir}: {}{}", out.stdout, out.stderr))
                    .unwrap_or_default()
            },
        )
        .await?;
        let entries = nodes_cfg_entries(&text);
        details.push(WorkerDetail {
            node: node.clone(),
            pod: String::new(),
            detail: format!(
                "{dir}: imexd.cfg written, nodes.cfg lists {} peers ({}…)",
                entries.len(),
                entries
                    .iter()
                    .take(2)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            passed: entries.len() >= 2,
        });
        if entries.len() < 2 {
            bail!("nodes.cfg on {node} lists {entries:?}: fewer than the domain's two nodes");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workers() -> Vec<String> {
        KindCluster::new("nvml-mock-compute-domain")
            .expect("name")
            .workers()
    }

    #[test]
    fn the_clique0_pair_and_its_id_follow_the_demo_topology() {
        let (pair, id) = clique0_pair(&workers()).expect("pair");
        assert_eq!(
            pair,
            [
                "nvml-mock-compute-domain-worker",
                "nvml-mock-compute-domain-worker2"
            ]
        );
        assert_eq!(id, "00000000-0000-0000-0000-0000000000ab.0");
        assert!(clique0_pair(&workers()[..1]).is_err());
    }

    #[test]
    fn chart_values_select_compute_domains_on_the_staged_root() {
        let image = ImageRef::parse("cdsim-dra-driver:abc123").expect("ref");
        let values: Value = serde_yaml::from_str(&chart_values(&image)).expect("yaml");
        assert_eq!(values["nvidiaDriverRoot"], "/var/lib/nvml-mock/driver");
        assert_eq!(
            values["altProcDevices"],
            "/var/lib/nvml-mock/imex/proc-devices"
        );
        assert_eq!(values["resources"]["gpus"]["enabled"], false);
        assert_eq!(values["resources"]["computeDomains"]["enabled"], true);
        assert_eq!(values["image"]["repository"], "cdsim-dra-driver");
        assert_eq!(values["image"]["tag"], "abc123");
        assert_eq!(values["image"]["pullPolicy"], "Never");
        let term = &values["kubeletPlugin"]["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
            ["matchExpressions"][0];
        assert_eq!(term["key"], "nvidia.com/gpu.present");
        assert_eq!(term["values"][0], "true");
        let args = helm_args(Path::new("/c"), "kind-x", Path::new("/v.yaml"));
        assert_eq!(args[..3], ["upgrade", "--install", DRA_RELEASE]);
        assert!(args.windows(2).any(|it| it == ["--namespace", DRA_NS]));
        assert_ne!(DRA_NS, "default");
    }

    #[test]
    fn workload_pods_are_placed_by_affinity_and_claim_the_channel() {
        let pod = workload_pod("w0", "node-a", "img:1");
        assert!(
            pod["spec"].get("nodeName").is_none(),
            "nodeName skips DRA allocation"
        );
        let term = &pod["spec"]["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
            ["matchExpressions"][0];
        assert_eq!(term["values"][0], "node-a");
        assert_eq!(
            pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"],
            CHANNEL_RCT
        );
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["claims"][0]["name"],
            "channel"
        );
        let cd = compute_domain();
        assert_eq!(
            cd["spec"]["channel"]["resourceClaimTemplate"]["name"],
            CHANNEL_RCT
        );
        assert_eq!(cd["spec"]["numNodes"], 2);
    }

    #[test]
    fn the_image_has_the_binaries_the_script_bash_busybox_and_templates() {
        let spec = image_spec(&ImageInputs {
            bin_dir: PathBuf::from("/b"),
            cdi_hook: PathBuf::from("/h/nvidia-cdi-hook"),
            source: PathBuf::from("/s"),
            templates: vec!["compute-domain-daemon.tmpl.yaml".to_owned()],
            bash: PathBuf::from("/bin/bash-static"),
            busybox: PathBuf::from("/bin/busybox"),
        });
        let host_of = |path: &str| {
            spec.files
                .iter()
                .find(|it| it.path == path)
                .and_then(|it| match &it.kind {
                    FileKind::File {
                        source: Source::Host { path, .. },
                        ..
                    } => Some(path.clone()),
                    _ => None,
                })
        };
        for name in DRA_BINARIES {
            assert_eq!(
                host_of(&format!("/usr/bin/{name}")),
                Some(format!("/b/{name}"))
            );
        }
        assert_eq!(
            host_of("/usr/bin/nvidia-cdi-hook").as_deref(),
            Some("/h/nvidia-cdi-hook")
        );
        assert_eq!(
            host_of("/usr/bin/kubelet-plugin-prestart.sh").as_deref(),
            Some("/s/hack/kubelet-plugin-prestart.sh")
        );
        assert_eq!(host_of("/bin/bash").as_deref(), Some("/bin/bash-static"));
        assert_eq!(
            host_of("/templates/compute-domain-daemon.tmpl.yaml").as_deref(),
            Some("/s/templates/compute-domain-daemon.tmpl.yaml")
        );
        let links = spec.files.iter().find_map(|it| match &it.kind {
            FileKind::File { links, .. } if it.path == "/bin/busybox" => Some(links.clone()),
            _ => None,
        });
        let links = links.expect("busybox");
        // hack/kubelet-plugin-prestart.sh calls these.
        for tool in [
            "ln", "find", "ls", "basename", "date", "sleep", "head", "env",
        ] {
            assert!(links.iter().any(|it| it == tool), "{tool}");
        }
    }

    #[test]
    fn parses_nodes_cfg_clique_objects_and_cd_status() {
        assert_eq!(
            nodes_cfg_entries("# x\ncompute-domain-daemon-0000\n\ncompute-domain-daemon-0001\n"),
            ["compute-domain-daemon-0000", "compute-domain-daemon-0001"]
        );
        let clique = json!({"daemons": [{"nodeName": "a", "cliqueID": "u.0"}, {"nodeName": "b"}]});
        assert_eq!(
            clique_daemon_nodes(&clique),
            ["a".to_owned(), "b".to_owned()].into_iter().collect()
        );
        assert!(clique_daemon_nodes(&json!({})).is_empty());
        assert_eq!(
            cd_status(&json!({"status": {"status": "NotReady"}})),
            "NotReady"
        );
        assert_eq!(cd_status(&json!({})), "");
        assert_eq!(clique_object_name("uid", "u.0"), "uid.u.0");
    }
}

#[cfg(test)]
mod build_tests {
    /// The real build: the image from the cached Go outputs, as scenario 4 makes it.
    #[test]
    #[ignore = "builds NVIDIA's DRA driver from the snapshot (minutes when the Go cache is cold); `cargo xtask scenario4` runs the same build on the CI cluster"]
    fn builds_the_dra_image_from_the_snapshot() {
        let sh = xshell::Shell::new().expect("shell");
        let out = tempfile::tempdir().expect("tempdir");
        let image = super::build(&sh, out.path()).expect("build");
        assert_eq!(image.image.repository, super::DRA_IMAGE);
        assert!(image.archive.is_file());
        assert!(image.chart.join("Chart.yaml").is_file());
        eprintln!("{} {}", image.image, image.archive.display());
    }
}
