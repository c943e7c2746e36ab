//! The `nvml-mock-stager` binary as root in a temporary root: the staged tree
//! (files, links, modes, device numbers), idempotent restaging, proc-devices
//! rejections, the invalid-topology posture, live topology restaging within one
//! second, and cleanup on SIGTERM.
//!
//! These tests create character device nodes, so they need root (CAP_MKNOD);
//! run as another user they fail with that message instead of skipping.

use std::{
    collections::BTreeMap,
    fs,
    os::unix::fs::{FileTypeExt, MetadataExt},
    path::{Path, PathBuf},
    process::{Child, Command, Output},
    time::{Duration, Instant},
};

use node_layout::{paths::Layout, proc_devices};

const STAGER: &str = env!("CARGO_BIN_EXE_nvml-mock-stager");

/// A host `/proc/devices` with 240 and 241 free and 245 taken by `hidraw`.
const HOST_PROC_DEVICES: &str = "Character devices:
  1 mem
  5 /dev/tty
 10 misc
136 pts
245 hidraw

Block devices:
  7 loop
259 blkext
";

const DEMO_TOPOLOGY: &str = "version: 1
domains:
  - name: demo-domain
    uuid: \"00000000-0000-0000-0000-0000000000ab\"
    cliques:
      - id: 0
        nodes: [worker, worker2]
      - id: 1
        nodes: [worker3, worker4]
";

const REBIND_TOPOLOGY: &str = "version: 1
domains:
  - name: rebound
    uuid: \"00000000-0000-0000-0000-0000000000cd\"
    cliques:
      - id: 99
        nodes: [worker, worker2, worker3, worker4]
";

fn require_root() {
    integration_tests::require_root(
        "these tests create device nodes and must run as root (CAP_MKNOD): run `sudo -E cargo test -p node-stager`",
    );
}

/// A temporary host: overlay dir, inputs, and the argument list for them.
struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    fn new() -> Host {
        require_root();
        let dir =
            tempfile::tempdir().unwrap_or_else(|err| panic!("cannot create a temp dir: {err}"));
        let host = Host { dir };
        fs::create_dir_all(host.overlay()).unwrap_or_else(|err| panic!("{err}"));
        fs::create_dir_all(host.path("inputs")).unwrap_or_else(|err| panic!("{err}"));
        host.write("inputs/libnvidia-ml.so.1", b"\x7fELF mock library bytes");
        host.write("inputs/check-fabric", b"#!/bin/sh\necho check-fabric\n");
        host.write("inputs/nvidia-smi", b"#!/bin/sh\necho nvidia-smi\n");
        host.write("inputs/config.yaml", nvml_profile::GB200.as_bytes());
        host.write("inputs/proc-devices", HOST_PROC_DEVICES.as_bytes());
        host.write("inputs/topology.yaml", DEMO_TOPOLOGY.as_bytes());
        host
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn overlay(&self) -> PathBuf {
        self.path("overlay")
    }

    fn layout(&self) -> Layout {
        Layout::new(self.overlay())
    }

    fn write(&self, relative: &str, contents: &[u8]) {
        let path = self.path(relative);
        fs::write(&path, contents)
            .unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
    }

    /// Replaces the topology input atomically, as a ConfigMap volume would.
    fn replace_topology(&self, text: &str) {
        self.write("inputs/.topology.yaml.new", text.as_bytes());
        fs::rename(
            self.path("inputs/.topology.yaml.new"),
            self.path("inputs/topology.yaml"),
        )
        .unwrap_or_else(|err| panic!("cannot replace the topology: {err}"));
    }

    fn command(&self, extra: &[&str]) -> Command {
        let mut command = Command::new(STAGER);
        command
            .current_dir(self.dir.path())
            .env_remove("NODE_NAME")
            .env_remove("POD_NAMESPACE")
            .env("RUST_LOG", "info")
            .arg("--node-name=worker3")
            .arg("--no-label")
            .arg(format!("--overlay-dir={}", self.overlay().display()));
        for (flag, input) in [
            ("profile", "config.yaml"),
            ("library", "libnvidia-ml.so.1"),
            ("check-fabric", "check-fabric"),
            ("nvidia-smi", "nvidia-smi"),
            ("topology-file", "topology.yaml"),
            ("proc-devices-source", "proc-devices"),
        ] {
            let path = self.path("inputs").join(input);
            command.arg(format!("--{flag}={}", path.display()));
        }
        command.args(extra);
        command
    }

    fn run_once(&self, extra: &[&str]) -> Output {
        let mut args = vec!["--once"];
        args.extend_from_slice(extra);
        self.command(&args)
            .output()
            .unwrap_or_else(|err| panic!("cannot run {STAGER}: {err}"))
    }

    fn stage_once(&self, extra: &[&str]) {
        let output = self.run_once(extra);
        assert!(
            output.status.success(),
            "the stager failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

const IMEX: [&str; 4] = [
    "--imex-channels",
    "--channel-count=8",
    "--channel-major=240",
    "--caps-major=241",
];

/// Every path under `root` with its type, mode, device number and contents.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in
            fs::read_dir(&dir).unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()))
        {
            let path = entry.unwrap_or_else(|err| panic!("{err}")).path();
            let meta = fs::symlink_metadata(&path).unwrap_or_else(|err| panic!("{err}"));
            let mode = meta.mode() & 0o7777;
            let kind = meta.file_type();
            let description = if kind.is_dir() {
                stack.push(path.clone());
                format!("dir {mode:o}")
            } else if kind.is_symlink() {
                format!(
                    "link -> {}",
                    fs::read_link(&path).unwrap_or_default().display()
                )
            } else if kind.is_char_device() {
                let rdev = meta.rdev();
                format!(
                    "char {}:{} {mode:o}",
                    rustix::fs::major(rdev),
                    rustix::fs::minor(rdev)
                )
            } else {
                format!(
                    "file {mode:o} {:?}",
                    fs::read(&path).unwrap_or_default().len()
                )
            };
            out.insert(
                path.strip_prefix(root).unwrap_or(&path).to_path_buf(),
                description,
            );
        }
    }
    out
}

fn char_device(path: &Path) -> (u32, u32, u32) {
    let meta = fs::symlink_metadata(path)
        .unwrap_or_else(|err| panic!("{} is missing: {err}", path.display()));
    assert!(
        meta.file_type().is_char_device(),
        "{} is not a character device",
        path.display()
    );
    let rdev = meta.rdev();
    (
        rustix::fs::major(rdev),
        rustix::fs::minor(rdev),
        meta.mode() & 0o7777,
    )
}

#[test]
fn stages_the_whole_tree() {
    let host = Host::new();
    host.stage_once(&IMEX);
    let layout = host.layout();

    // The library, its links and check-fabric.
    let library = layout.library_file("580.65.06");
    assert_eq!(
        fs::read(&library).unwrap_or_default(),
        b"\x7fELF mock library bytes"
    );
    assert_eq!(
        fs::metadata(&library).map(|meta| meta.mode() & 0o777).ok(),
        Some(0o755)
    );
    assert_eq!(
        fs::read_link(layout.library_soname_link()).ok(),
        Some(PathBuf::from("libnvidia-ml.so.580.65.06"))
    );
    assert_eq!(
        fs::read_link(layout.library_dev_link()).ok(),
        Some(PathBuf::from("libnvidia-ml.so.1"))
    );
    assert_eq!(
        fs::read(layout.library_dev_link()).unwrap_or_default(),
        b"\x7fELF mock library bytes"
    );
    assert_eq!(
        fs::metadata(layout.check_fabric())
            .map(|meta| meta.mode() & 0o777)
            .ok(),
        Some(0o755)
    );

    // The staged profile with the node's GPU count.
    let profile = staged_profile(&layout);
    assert_eq!(profile.system().num_devices, Some(4));
    assert_eq!(profile.driver_version(), "580.65.06");

    // The topology, staged; the legacy YAML files are gone.
    assert_eq!(staged_topology(&layout), yaml_topology(DEMO_TOPOLOGY));
    for legacy in layout.legacy_yaml() {
        assert!(!legacy.exists(), "{}", legacy.display());
    }

    // GPU nodes.
    for index in 0..4 {
        assert_eq!(char_device(&layout.gpu_node(index)), (195, index, 0o666));
    }
    assert!(!layout.gpu_node(4).exists());
    let [ctl, uvm, uvm_tools] = layout.gpu_control_nodes();
    assert_eq!(char_device(&ctl), (195, 255, 0o666));
    assert_eq!(char_device(&uvm), (510, 0, 0o666));
    assert_eq!(char_device(&uvm_tools), (510, 1, 0o666));

    // The IMEX surface.
    for index in 0..8 {
        assert_eq!(
            char_device(&layout.channel_node(index)),
            (240, index, 0o666)
        );
    }
    assert!(!layout.channel_node(8).exists());
    assert_eq!(
        fs::read_to_string(layout.imex_caps_file()).unwrap_or_default(),
        "DeviceFileMinor: 512\nDeviceFileMode: 438\nDeviceFileModify: 0\n"
    );
    let expected = proc_devices::render(
        HOST_PROC_DEVICES,
        proc_devices::DeviceMajor::new(240).unwrap_or_else(|err| panic!("{err}")),
        proc_devices::DeviceMajor::new(241).unwrap_or_else(|err| panic!("{err}")),
    )
    .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(
        fs::read_to_string(layout.proc_devices()).unwrap_or_default(),
        expected
    );
    assert!(expected.contains("\n240 nvidia-caps-imex-channels\n241 nvidia-caps\n\nBlock devices:"));
}

#[test]
fn device_nodes_are_0666_whatever_the_umask() {
    let host = Host::new();
    integration_tests::checked(
        Command::new("sh")
            .current_dir(host.dir.path())
            .arg("-c")
            .arg("umask 077 && exec \"$@\"")
            .arg("sh")
            .arg(STAGER)
            .args(host.command(&["--once"]).get_args())
            .args(IMEX)
            .output(),
        "the stager under umask 077",
    );
    assert_eq!(char_device(&host.layout().channel_node(7)).2, 0o666);
    assert_eq!(char_device(&host.layout().gpu_node(0)).2, 0o666);
}

#[test]
fn restaging_is_idempotent_and_prunes_what_is_no_longer_planned() {
    let host = Host::new();
    host.stage_once(&IMEX);
    let first = snapshot(&host.overlay());
    host.stage_once(&IMEX);
    assert_eq!(
        snapshot(&host.overlay()),
        first,
        "restaging changed the tree"
    );

    // Fewer channels and GPUs: the extra nodes go.
    host.stage_once(&[
        "--imex-channels",
        "--channel-count=2",
        "--channel-major=240",
        "--caps-major=241",
        "--gpu-count=2",
    ]);
    let layout = host.layout();
    assert!(layout.channel_node(1).exists());
    assert!(!layout.channel_node(2).exists());
    assert!(layout.gpu_node(1).exists());
    assert!(!layout.gpu_node(2).exists());
    assert_eq!(staged_profile(&layout).system().num_devices, Some(2));

    // IMEX off: the surface goes.
    host.stage_once(&[]);
    assert!(!layout.channel_dir().exists());
    assert!(!layout.imex_dir().exists());
    assert!(!layout.imex_caps_file().exists());
    assert!(layout.gpu_node(0).exists());
}

#[test]
fn a_used_major_is_refused_naming_its_owner() {
    let host = Host::new();
    let output = host.run_once(&["--imex-channels", "--channel-major=245", "--caps-major=241"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("device major 245 is already assigned to \"hidraw\", refusing to reuse it for nvidia-caps-imex-channels"),
        "{stderr}"
    );
    let output = host.run_once(&["--imex-channels", "--channel-major=240", "--caps-major=240"]);
    assert!(!output.status.success());
    let output = host.run_once(&["--imex-channels", "--channel-major=4096"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("device major 4096 is out of range"),
        "{stderr}"
    );
}

#[test]
fn an_invalid_topology_keeps_the_previous_one() {
    let host = Host::new();
    host.stage_once(&[]);
    host.replace_topology("version: 1\ndomains:\n  - uuid: \"12\"\n");
    let output = host.run_once(&[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("the topology is invalid"), "{stderr}");
    assert_eq!(
        staged_topology(&host.layout()),
        yaml_topology(DEMO_TOPOLOGY)
    );
}

#[test]
fn missing_inputs_fail_with_the_flag_to_fix() {
    let host = Host::new();
    fs::remove_file(host.path("inputs/libnvidia-ml.so.1")).unwrap_or_else(|err| panic!("{err}"));
    let output = host.run_once(&[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("pass --library <path>"), "{stderr}");
}

/// The staged profile under `layout` (what the mock library reads).
fn staged_profile(layout: &Layout) -> nvml_profile::Profile {
    let bytes = fs::read(layout.config()).unwrap_or_default();
    nvml_profile::staged::decode(&bytes)
        .unwrap_or_else(|err| panic!("the staged profile is invalid: {err}"))
}

/// The staged topology under `layout`, if there is a valid one.
fn staged_topology(layout: &Layout) -> Option<topology::Topology> {
    topology::staged::decode(&fs::read(layout.topology()).ok()?).ok()
}

fn yaml_topology(text: &str) -> Option<topology::Topology> {
    Some(topology::parse(text).unwrap_or_else(|err| panic!("{err}")))
}

/// Kills the stager if a test fails before it exits.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    start.elapsed()
}

#[test]
fn follows_the_topology_live_and_cleans_up_on_sigterm() {
    let host = Host::new();
    let layout = host.layout();
    let mut command = host.command(&IMEX);
    let child = command
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|err| panic!("{err}"));
    let mut running = Running(child);
    wait_until("the first staging", Duration::from_secs(20), || {
        staged_topology(&layout) == yaml_topology(DEMO_TOPOLOGY)
    });
    // Let the follower take its first look before changing the file.
    std::thread::sleep(Duration::from_millis(300));

    let mut latencies = Vec::new();
    for text in [REBIND_TOPOLOGY, DEMO_TOPOLOGY, REBIND_TOPOLOGY] {
        host.replace_topology(text);
        let latency = wait_until("the restaged topology", Duration::from_secs(5), || {
            staged_topology(&layout) == yaml_topology(text)
        });
        latencies.push(latency);
    }
    eprintln!("topology restaging latencies: {latencies:?}");
    for latency in &latencies {
        assert!(
            *latency < Duration::from_secs(1),
            "restaging took {latency:?}"
        );
    }

    // An invalid document does not replace the staged one.
    host.replace_topology("version: 2\ndomains: []\n");
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(staged_topology(&layout), yaml_topology(REBIND_TOPOLOGY));

    let pid = running.0.id().to_string();
    let status = Command::new("kill")
        .current_dir(host.dir.path())
        .args(["-TERM", &pid])
        .status()
        .unwrap_or_else(|err| panic!("{err}"));
    assert!(status.success());
    wait_until("the stager to exit", Duration::from_secs(10), || {
        matches!(running.0.try_wait(), Ok(Some(_)))
    });
    let exit = running.0.wait().unwrap_or_else(|err| panic!("{err}"));
    assert!(exit.success(), "the stager exited with {exit}");
    for path in [
        layout.driver_dir(),
        layout.imex_dir(),
        layout.topology_dir(),
        layout.legacy_topology_dir(),
    ] {
        assert!(!path.exists(), "{} survived SIGTERM", path.display());
    }
    assert!(
        host.overlay().exists(),
        "the overlay dir itself (a hostPath mount) must stay"
    );
}

/// `--imex-payload`: the driver root gets `usr/bin/nvidia-imex` (the shim
/// carrying the daemon, found again by its trailer) and `nvidia-imex-ctl`, as
/// a driver install has them; staged again without it, both go; a payload
/// missing a file is refused naming it, and the tree is left as it was.
#[test]
fn an_imex_payload_is_staged_into_the_driver_root_and_removed_without_it() {
    let host = Host::new();
    fs::create_dir_all(host.path("payload")).unwrap_or_else(|err| panic!("{err}"));
    host.write("payload/nvidia-imex", b"\x7fELF the shim");
    host.write("payload/nvidia-imex.real", b"\x7fELF the daemon");
    host.write("payload/nvidia-imex-ctl", b"\x7fELF the ctl");
    let payload = format!("--imex-payload={}", host.path("payload").display());
    host.stage_once(&[&payload]);
    let layout = host.layout();
    let staged = fs::read(layout.imex_daemon()).unwrap_or_else(|err| panic!("{err}"));
    let trailer = &staged[staged.len() - node_layout::imex_bundle::TRAILER_LEN..];
    let (offset, len) = node_layout::imex_bundle::carried(trailer, staged.len() as u64)
        .expect("the staged nvidia-imex carries the daemon");
    assert_eq!(&staged[..offset as usize], b"\x7fELF the shim");
    assert_eq!(
        &staged[offset as usize..(offset + len) as usize],
        b"\x7fELF the daemon"
    );
    assert_eq!(
        fs::read(layout.imex_ctl()).unwrap_or_else(|err| panic!("{err}")),
        b"\x7fELF the ctl"
    );
    for path in [layout.imex_daemon(), layout.imex_ctl()] {
        let mode = fs::metadata(&path)
            .unwrap_or_else(|err| panic!("{err}"))
            .mode();
        assert_eq!(mode & 0o777, 0o755, "{}", path.display());
    }

    fs::remove_file(host.path("payload/nvidia-imex-ctl")).unwrap_or_else(|err| panic!("{err}"));
    let output = host.run_once(&[&payload]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("nvidia-imex-ctl of the IMEX payload"),
        "{stderr}"
    );
    assert!(
        layout.imex_ctl().exists(),
        "a refused payload changed the tree"
    );

    host.stage_once(&[]);
    assert!(!layout.imex_daemon().exists());
    assert!(!layout.imex_ctl().exists());
    assert!(layout.check_fabric().exists());
}
