//! A private containerd 2.x with NRI, the stager's tree and the NRI plugin,
//! driven through crictl: shared by the containerd test and its benchmark.
//!
//! Everything lives in one temporary directory: containerd's root, state,
//! sockets (gRPC, ttrpc, NRI), runc's root, the staged overlay and the image
//! archives. [`Rig`]'s `Drop` removes the pods, stops the plugin, containerd
//! and the shims it started (found by their `-address`), unmounts what
//! containerd left under the directory, then deletes it.
//!
//! Peers (pinned in `manifests/versions.toml`): containerd, its runc shim and
//! ctr (`[node].containerd`) and crictl (`[tools].crictl`) are installed with
//! `go install` into `target/containerd-peer/` on first use; runc and
//! busybox-static come from Debian and must be installed.

#![allow(dead_code)]

use std::{
    collections::BTreeMap,
    fs,
    io::Read,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use image_builder::{build, host, spec::Spec};
pub use integration_tests::pin;
use integration_tests::{
    artifact, checked, profile_dir, repo_root, require_program, stager_input_args,
};
use node_layout::proc_devices::{self, DeviceMajor};

/// The pod annotation selecting IMEX channels.
pub const IMEX_ANNOTATION: &str = "nvml-mock.nvidia.com/imex-channels";

/// The node the plugin injects (clique 1 of the demo topology).
pub const NODE_NAME: &str = "nvml-mock-compute-domain-worker3";

/// The namespace the plugin is told to exclude.
pub const EXCLUDED_NAMESPACE: &str = "cdsim-excluded";

/// The image spec for the test: busybox-static and the shared-library closure
/// of check-fabric, nvidia-smi and the mock library (all reach the container
/// through the overlay; the closure gives them glibc and libgcc_s). The pause image is busybox alone.
const IMAGE_SPEC: &str = include_str!("images.toml");

/// The pinned external programs.
#[derive(Debug, Clone)]
pub struct Peers {
    /// containerd, containerd-shim-runc-v2 and ctr live here.
    pub containerd_bin: PathBuf,
    /// crictl.
    pub crictl: PathBuf,
    /// Debian's runc.
    pub runc: PathBuf,
}

/// Fails unless the test runs as root (containerd, mknod and mounts need it).
pub fn require_root() {
    integration_tests::require_root(
        "the containerd test runs a private containerd and must run as root: `sudo -E cargo test -p integration-tests --test containerd`",
    );
}

/// `go install`s `packages` at `version` into `bin` unless `probe` is already there.
fn go_install(bin: &Path, probe: &str, packages: &[String], tags: &[&str]) {
    if bin.join(probe).is_file() {
        return;
    }
    let go = require_program(
        "go",
        "install Go 1.24+ (https://go.dev/doc/install) so the test can build its peers",
    );
    fs::create_dir_all(bin).unwrap_or_else(|err| panic!("cannot create {}: {err}", bin.display()));
    let mut command = Command::new(go);
    // As the node image builds the same pinned modules (crates/node-image/src/go.rs: static,
    // `-trimpath`, the same tags), so Go's build cache compiles their packages once for both.
    command
        .current_dir(repo_root())
        .env("GOBIN", bin)
        .env("CGO_ENABLED", "0")
        .args(["install", "-trimpath"]);
    if !tags.is_empty() {
        command.arg(format!("-tags={}", tags.join(",")));
    }
    checked(
        command.args(packages).output(),
        &format!(
            "go install {} (the Go module proxy must be reachable)",
            packages.join(" ")
        ),
    );
}

/// Locates the pinned peers, installing containerd and crictl on first use.
pub fn peers() -> Peers {
    let containerd_version = pin("node", "containerd");
    let crictl_version = pin("tools", "crictl");
    let base = repo_root().join("target/containerd-peer");
    let containerd_bin = base.join(format!("containerd-{containerd_version}/bin"));
    let module = "github.com/containerd/containerd/v2/cmd";
    go_install(
        &containerd_bin,
        "containerd",
        &["containerd", "containerd-shim-runc-v2", "ctr"]
            .map(|cmd| format!("{module}/{cmd}@{containerd_version}")),
        &["no_btrfs", "no_zfs", "no_devmapper"],
    );
    let crictl_bin = base.join(format!("crictl-{crictl_version}/bin"));
    go_install(
        &crictl_bin,
        "crictl",
        &[format!("sigs.k8s.io/cri-tools/cmd/crictl@{crictl_version}")],
        &[],
    );
    // CDSIM_RUNC=<path> runs another runc (or a wrapper) for debugging.
    let runc = match std::env::var_os("CDSIM_RUNC") {
        Some(path) => PathBuf::from(path),
        None => require_program("runc", "install Debian's runc: `apt-get install runc`"),
    };
    assert!(
        Path::new("/bin/busybox").is_file(),
        "/bin/busybox is missing: install Debian's busybox-static (`apt-get install busybox-static`)"
    );
    Peers {
        containerd_bin,
        crictl: crictl_bin.join("crictl"),
        runc,
    }
}

/// Options of one rig.
#[derive(Debug, Clone)]
pub struct RigOptions {
    /// How many IMEX channels the stager creates.
    pub channel_count: u32,
}

/// A running containerd + NRI plugin over a staged overlay, and the images.
pub struct Rig {
    dir: tempfile::TempDir,
    peers: Peers,
    containerd: Option<Child>,
    plugin: Option<Child>,
    /// The channel major chosen free from the host's /proc/devices.
    pub channel_major: DeviceMajor,
    /// The caps major chosen free from the host's /proc/devices.
    pub caps_major: DeviceMajor,
    /// The workload image reference.
    pub image: String,
    pods: Vec<String>,
}

impl Rig {
    /// Stages the overlay, builds the images, starts containerd and the plugin, imports the images.
    pub fn start(options: &RigOptions) -> Rig {
        require_root();
        let peers = peers();
        let dir = tempfile::Builder::new()
            .prefix("cdsim-ctrd-")
            .tempdir_in("/tmp")
            .unwrap_or_else(|err| panic!("cannot create a temp dir: {err}"));
        let host_devices = fs::read_to_string("/proc/devices")
            .unwrap_or_else(|err| panic!("cannot read /proc/devices: {err}"));
        let from = DeviceMajor::new(240).unwrap_or_else(|err| panic!("{err}"));
        let (channel_major, caps_major) = proc_devices::free_major_pair(&[&host_devices], from)
            .unwrap_or_else(|err| panic!("the host's /proc/devices is unreadable: {err}"))
            .unwrap_or_else(|| panic!("no two free device majors from 240 to 4095 on this host"));
        let mut rig = Rig {
            dir,
            peers,
            containerd: None,
            plugin: None,
            channel_major,
            caps_major,
            image: String::new(),
            pods: Vec::new(),
        };
        rig.stage(options);
        let archives = rig.build_images();
        rig.start_containerd(&archives.1);
        rig.start_plugin();
        rig.import(&archives.0 .0);
        rig.import(&archives.1);
        rig.image = archives.0 .1;
        rig
    }

    /// The temporary directory.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// The staged overlay (what the plugin bind-mounts).
    pub fn overlay(&self) -> PathBuf {
        self.path("overlay")
    }

    fn address(&self) -> PathBuf {
        self.path("containerd.sock")
    }

    fn stage(&self, options: &RigOptions) {
        let workers = topology::kind_workers("nvml-mock-compute-domain", 4);
        let demo = topology::demo(&workers);
        fs::write(self.path("topology.yaml"), demo.to_yaml()).unwrap_or_else(|err| panic!("{err}"));
        fs::create_dir_all(self.overlay()).unwrap_or_else(|err| panic!("{err}"));
        let stager = built("nvml-mock-stager", "node-stager");
        let output = Command::new(stager)
            .current_dir(self.dir.path())
            .arg(format!("--node-name={NODE_NAME}"))
            .arg(format!("--overlay-dir={}", self.overlay().display()))
            .args(stager_input_args(built))
            .arg(format!(
                "--topology-file={}",
                self.path("topology.yaml").display()
            ))
            .arg("--imex-channels")
            .arg(format!("--channel-count={}", options.channel_count))
            .arg(format!("--channel-major={}", self.channel_major))
            .arg(format!("--caps-major={}", self.caps_major))
            .args(["--no-label", "--once"])
            .output();
        checked(output, "the stager");
    }

    /// Builds both images; returns ((workload archive, reference), pause archive).
    fn build_images(&self) -> ((PathBuf, String), PathBuf) {
        let spec = Spec::parse(IMAGE_SPEC)
            .unwrap_or_else(|err| panic!("the test image spec is invalid: {err}"));
        let cache = host::read_ld_cache()
            .unwrap_or_else(|err| panic!("cannot read the loader cache: {err}"));
        let artifact_dir = artifact_dir();
        // The artifacts must exist; `artifact` fails with the build command otherwise.
        built("check-fabric", "check-fabric");
        built("nvidia-smi", "nvidia-smi");
        built("libnvidia_ml.so", "mock-nvml");
        let root = repo_root();
        let inputs = build::Inputs {
            repo_root: &root,
            artifact_dir: &artifact_dir,
            payload: None,
            source_date_epoch: 0,
        };
        let out = self.path("images");
        let mut built = BTreeMap::new();
        for name in ["cdsim-ctrd-test", "cdsim-ctrd-pause"] {
            let image = spec.image(name).unwrap_or_else(|err| panic!("{err}"));
            let image = build::build_image(image, &inputs, &host::RealFs, &cache)
                .unwrap_or_else(|err| panic!("cannot build the {name} image: {err}"));
            let path =
                build::write_archive_file(&image, &out).unwrap_or_else(|err| panic!("{err}"));
            built.insert(
                name,
                (path, format!("docker.io/library/{}", image.reference())),
            );
        }
        let test = built.remove("cdsim-ctrd-test").unwrap_or_default();
        let pause = built.remove("cdsim-ctrd-pause").unwrap_or_default();
        fs::write(self.path("pause-ref"), &pause.1).unwrap_or_else(|err| panic!("{err}"));
        (test, pause.0)
    }

    /// A CDI spec of kind `nvidia.com/gpu` over the staged nodes, as `nvidia-ctk cdi generate`
    /// writes one: a device per GPU index (its `nvidia<index>` node) and the control nodes
    /// common to all.
    fn cdi_spec(&self) -> String {
        let dev = self.overlay().join("driver/dev");
        let node = |indent: &str, name: &str| {
            let host = dev.join(name);
            format!(
                "{indent}- {{path: /dev/{name}, hostPath: {}}}\n",
                host.display()
            )
        };
        let mut spec = String::from("cdiVersion: \"0.5.0\"\nkind: nvidia.com/gpu\ndevices:\n");
        for index in 0..4 {
            spec.push_str(&format!(
                "  - name: \"{index}\"\n    containerEdits:\n      deviceNodes:\n"
            ));
            spec.push_str(&node("        ", &format!("nvidia{index}")));
        }
        spec.push_str("containerEdits:\n  deviceNodes:\n");
        for name in ["nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"] {
            spec.push_str(&node("    ", name));
        }
        spec
    }

    fn containerd_config(&self, pause_ref: &str) -> String {
        let dir = self.dir.path().display();
        let runc = self.peers.runc.display();
        format!(
            r#"version = 3
root = "{dir}/root"
state = "{dir}/state"
plugin_dir = ""

[grpc]
  address = "{dir}/containerd.sock"

[ttrpc]
  address = "{dir}/containerd.sock.ttrpc"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins]
  [plugins.'io.containerd.nri.v1.nri']
    disable = false
    disable_connections = false
    socket_path = "{dir}/nri.sock"
    plugin_path = "{dir}/nri-plugins"
    plugin_config_path = "{dir}/nri-conf"
    plugin_registration_timeout = "5s"
    plugin_request_timeout = "2s"

  [plugins.'io.containerd.internal.v1.opt']
    path = "{dir}/opt"

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "{pause_ref}"

  [plugins.'io.containerd.cri.v1.runtime']
    # CDI from the rig's own spec dir only (`Rig::cdi_spec`): NVIDIA's kind, as the device
    # plugin's CDI strategy and the toolkit's generated spec name it.
    enable_cdi = true
    cdi_spec_dirs = ["{dir}/cdi"]
    # The test may run without CAP_SYS_RESOURCE (lowering oom_score_adj for the sandbox fails).
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "{runc}"
          Root = "{dir}/runc"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["{dir}/cni/bin"]
      conf_dir = "{dir}/cni/conf"

  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
"#
        )
    }

    fn start_containerd(&mut self, _pause_archive: &Path) {
        let pause_ref = fs::read_to_string(self.path("pause-ref")).unwrap_or_default();
        fs::create_dir_all(self.path("cdi")).unwrap_or_else(|err| panic!("{err}"));
        fs::write(self.path("cdi/nvidia.yaml"), self.cdi_spec())
            .unwrap_or_else(|err| panic!("{err}"));
        for sub in [
            "nri-plugins",
            "nri-conf",
            "cni/bin",
            "cni/conf",
            "opt",
            "logs",
        ] {
            fs::create_dir_all(self.path(sub)).unwrap_or_else(|err| panic!("{err}"));
        }
        let config = self.path("containerd.toml");
        fs::write(&config, self.containerd_config(&pause_ref))
            .unwrap_or_else(|err| panic!("{err}"));
        let path = format!(
            "{}:/usr/sbin:/usr/bin:/sbin:/bin",
            self.peers.containerd_bin.display()
        );
        let mut containerd = Command::new(self.peers.containerd_bin.join("containerd"));
        containerd.env("PATH", path).arg("--config").arg(&config);
        self.containerd = Some(self.spawn_logged(&mut containerd, "containerd.log", "containerd"));
        let started = wait_for(Duration::from_secs(30), || {
            self.ctr(&["version"]).status.success()
        });
        assert!(
            started,
            "containerd did not come up within 30 s:\n{}",
            self.containerd_log()
        );
        let nri = wait_for(Duration::from_secs(10), || self.path("nri.sock").exists());
        assert!(
            nri,
            "containerd created no NRI socket:\n{}",
            self.containerd_log()
        );
    }

    /// Starts `command` in the rig's directory, its stderr to the log file
    /// `log` there (stdout dropped).
    fn spawn_logged(&self, command: &mut Command, log: &str, what: &str) -> Child {
        let log = fs::File::create(self.path(log)).unwrap_or_else(|err| panic!("{err}"));
        command
            .current_dir(self.dir.path())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {what}: {err}"))
    }

    fn start_plugin(&mut self) {
        let plugin = built("nvml-mock-nri", "nri-plugin");
        let mut command = Command::new(plugin);
        command
            .env("RUST_LOG", "info")
            .arg(format!("--socket-path={}", self.path("nri.sock").display()))
            .arg(format!("--overlay-host-path={}", self.overlay().display()))
            .arg("--overlay-mount-path=/opt/nvml-mock")
            .arg(format!("--node-name={NODE_NAME}"))
            .arg("--health-addr=")
            .arg(format!("--excluded-namespaces={EXCLUDED_NAMESPACE}"));
        self.plugin = Some(self.spawn_logged(&mut command, "plugin.log", "the NRI plugin"));
        let registered = wait_for(Duration::from_secs(15), || {
            self.containerd_log().contains("10-nvml-mock")
                && fs::read_to_string(self.path("plugin.log"))
                    .unwrap_or_default()
                    .contains("configured by the runtime")
        });
        assert!(
            registered,
            "the NRI plugin did not register within 15 s\n--- plugin log\n{}\n--- containerd log\n{}",
            fs::read_to_string(self.path("plugin.log")).unwrap_or_default(),
            self.containerd_log()
        );
    }

    fn import(&self, archive: &Path) {
        let archive = archive.display().to_string();
        let output = self.ctr(&["-n", "k8s.io", "images", "import", "--digests", &archive]);
        assert!(
            output.status.success(),
            "ctr images import {archive} failed:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// containerd's log so far.
    pub fn containerd_log(&self) -> String {
        fs::read_to_string(self.path("containerd.log")).unwrap_or_default()
    }

    fn ctr(&self, args: &[&str]) -> Output {
        Command::new(self.peers.containerd_bin.join("ctr"))
            .current_dir(self.dir.path())
            .arg("--address")
            .arg(self.address())
            .args(args)
            .output()
            .unwrap_or_else(|err| panic!("cannot run ctr: {err}"))
    }

    /// Runs crictl against this containerd.
    pub fn crictl_output(&self, args: &[&str]) -> Output {
        let config = self.path("crictl.yaml");
        if !config.exists() {
            let endpoint = format!("unix://{}", self.address().display());
            let text = format!(
                "runtime-endpoint: {endpoint}\nimage-endpoint: {endpoint}\ntimeout: 60\ndebug: false\npull-image-on-create: false\n"
            );
            fs::write(&config, text).unwrap_or_else(|err| panic!("{err}"));
        }
        Command::new(&self.peers.crictl)
            .current_dir(self.dir.path())
            .arg("--config")
            .arg(&config)
            .args(args)
            .output()
            .unwrap_or_else(|err| panic!("cannot run crictl: {err}"))
    }

    /// Runs crictl and returns its trimmed stdout; fails the test on an error.
    pub fn crictl(&self, args: &[&str]) -> String {
        let output = self.crictl_output(args);
        assert!(
            output.status.success(),
            "crictl {} failed:\n{}\n--- plugin log (tail)\n{}\n--- containerd log (tail)\n{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr),
            tail(
                &fs::read_to_string(self.path("plugin.log")).unwrap_or_default(),
                20
            ),
            tail(&self.containerd_log(), 30)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// Runs a host-network pod sandbox; returns its id.
    pub fn run_pod(&mut self, name: &str, namespace: &str, annotations: &[(&str, &str)]) -> String {
        let annotations: serde_json::Map<String, serde_json::Value> = annotations
            .iter()
            .map(|(key, value)| {
                (
                    (*key).to_owned(),
                    serde_json::Value::String((*value).to_owned()),
                )
            })
            .collect();
        let log_dir = self.path(&format!("logs/{name}"));
        fs::create_dir_all(&log_dir).unwrap_or_else(|err| panic!("{err}"));
        let config = serde_json::json!({
            "metadata": { "name": name, "namespace": namespace, "uid": format!("uid-{name}"), "attempt": 0 },
            "log_directory": log_dir,
            "annotations": annotations,
            "linux": { "security_context": { "namespace_options": { "network": 2 } } }
        });
        let path = self.path(&format!("pod-{name}.json"));
        fs::write(&path, config.to_string()).unwrap_or_else(|err| panic!("{err}"));
        let id = self.crictl(&["runp", &path.display().to_string()]);
        self.pods.push(id.clone());
        id
    }

    /// Creates a container in `pod`; returns its id and how long CreateContainer took.
    pub fn create_container(&self, pod: &str, pod_name: &str, name: &str) -> (String, Duration) {
        self.create_container_with(pod, pod_name, name, &[], &[])
    }

    /// [`Rig::create_container`] with these environment variables and CDI devices (fully
    /// qualified names, resolved by containerd from the rig's spec dir) in the container's config.
    pub fn create_container_with(
        &self,
        pod: &str,
        pod_name: &str,
        name: &str,
        env: &[(&str, &str)],
        cdi_devices: &[&str],
    ) -> (String, Duration) {
        let envs: Vec<serde_json::Value> = env
            .iter()
            .map(|(key, value)| serde_json::json!({ "key": key, "value": value }))
            .collect();
        let cdi: Vec<serde_json::Value> = cdi_devices
            .iter()
            .map(|name| serde_json::json!({ "name": name }))
            .collect();
        let config = serde_json::json!({
            "metadata": { "name": name },
            "image": { "image": self.image },
            "command": ["/bin/sleep", "86400"],
            "envs": envs,
            "CDI_devices": cdi,
            "log_path": format!("{name}.log"),
            "linux": {}
        });
        let path = self.path(&format!("ctr-{pod_name}-{name}.json"));
        fs::write(&path, config.to_string()).unwrap_or_else(|err| panic!("{err}"));
        let pod_config = self
            .path(&format!("pod-{pod_name}.json"))
            .display()
            .to_string();
        let start = Instant::now();
        let id = self.crictl(&["create", pod, &path.display().to_string(), &pod_config]);
        (id, start.elapsed())
    }

    /// Starts a container; returns how long StartContainer took.
    pub fn start_container(&self, id: &str) -> Duration {
        let start = Instant::now();
        self.crictl(&["start", id]);
        start.elapsed()
    }

    /// Creates and starts a container; returns its id.
    pub fn run_container(&self, pod: &str, pod_name: &str, name: &str) -> String {
        let (id, _) = self.create_container(pod, pod_name, name);
        self.start_container(&id);
        id
    }

    /// Runs `script` with `sh -c` in the container; returns (exit success, stdout, stderr).
    pub fn exec(&self, container: &str, script: &str) -> (bool, String, String) {
        let output = self.crictl_output(&[
            "exec",
            "--sync",
            "--timeout",
            "30",
            container,
            "/bin/sh",
            "-c",
            script,
        ]);
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// Stops the NRI plugin, as a DaemonSet rollout does: containers created now get nothing.
    pub fn stop_plugin(&mut self) {
        if let Some(plugin) = self.plugin.take() {
            stop(plugin, "nvml-mock-nri");
        }
    }

    /// Starts the NRI plugin again and waits until the runtime has configured it.
    pub fn restart_plugin(&mut self) {
        self.stop_plugin();
        self.start_plugin();
    }

    /// The plugin's log so far.
    pub fn plugin_log(&self) -> String {
        fs::read_to_string(self.path("plugin.log")).unwrap_or_default()
    }

    /// A container's CRI state (`CONTAINER_RUNNING`, `CONTAINER_EXITED`, ...).
    pub fn container_state(&self, id: &str) -> String {
        let text = self.crictl(&["inspect", "--output", "json", id]);
        let inspected: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("crictl inspect printed no JSON ({err}):\n{text}"));
        inspected["status"]["state"]
            .as_str()
            .unwrap_or_else(|| panic!("no status.state in crictl inspect:\n{text}"))
            .to_owned()
    }

    /// Stops and removes a pod and its containers.
    pub fn remove_pod(&mut self, pod: &str) {
        self.crictl(&["stopp", pod]);
        self.crictl(&["rmp", pod]);
        self.pods.retain(|it| it != pod);
    }

    fn teardown(&mut self) {
        // CDSIM_RIG_LOGS=<dir> keeps the runtime's and the plugin's logs for debugging.
        if let Some(keep) = std::env::var_os("CDSIM_RIG_LOGS") {
            let keep = PathBuf::from(keep);
            let _ = fs::create_dir_all(&keep);
            for name in ["containerd.log", "plugin.log", "containerd.toml"] {
                let _ = fs::copy(self.path(name), keep.join(name));
            }
        }
        for pod in std::mem::take(&mut self.pods) {
            let _ = self.crictl_output(&["stopp", &pod]);
            let _ = self.crictl_output(&["rmp", "--force", &pod]);
        }
        if let Some(plugin) = self.plugin.take() {
            stop(plugin, "nvml-mock-nri");
        }
        if let Some(containerd) = self.containerd.take() {
            stop(containerd, "containerd");
        }
        // Shims outlive containerd; ours carry our socket in their command line.
        let address = self.address().display().to_string();
        for pid in pids_with_arg(&address) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        // Mounts containerd left under the directory (rootfs, shm), deepest first.
        let prefix = self.dir.path().display().to_string();
        let mut mounts: Vec<String> = fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.split(' ').nth(4).map(str::to_owned))
            .filter(|point| point.starts_with(&prefix))
            .collect();
        mounts.sort_by_key(|point| std::cmp::Reverse(point.len()));
        for point in mounts {
            let _ = Command::new("umount").args(["-l", &point]).status();
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// SIGTERM, then SIGKILL after 10 s; always reaps.
fn stop(mut child: Child, what: &str) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let exited = wait_for(Duration::from_secs(10), || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    if !exited {
        eprintln!("{what} ignored SIGTERM for 10 s; killing it");
        let _ = child.kill();
    }
    let _ = child.wait();
}

/// Processes whose command line has `arg` as one argument.
fn pids_with_arg(arg: &str) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let mut bytes = Vec::new();
            let _ = fs::File::open(format!("/proc/{pid}/cmdline"))
                .and_then(|mut file| file.read_to_end(&mut bytes));
            bytes
                .split(|byte| *byte == 0)
                .any(|part| part == arg.as_bytes())
        })
        .collect()
}

/// Where the workspace artifacts come from: `CDSIM_ARTIFACT_DIR` (e.g. `target/release`
/// for the benchmark) or the profile the test was built in.
fn artifact_dir() -> PathBuf {
    match std::env::var_os("CDSIM_ARTIFACT_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => profile_dir(),
    }
}

/// A built workspace artifact; fails with the build command when it is missing.
fn built(file_name: &str, package: &str) -> PathBuf {
    match std::env::var_os("CDSIM_ARTIFACT_DIR") {
        Some(dir) => {
            let path = PathBuf::from(dir).join(file_name);
            assert!(
                path.exists(),
                "{} is missing: build it with `cargo build --release -p {package}` or unset CDSIM_ARTIFACT_DIR",
                path.display()
            );
            path
        }
        None => artifact(file_name, package),
    }
}

/// Polls `done` every 50 ms until it holds or `limit` passes.
pub fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
