//! NVIDIA's own node software against the staged mock driver root, run for real:
//! go-nvlib's device library at two versions (`tests/nvlib`, v0.13.0 and v0.10.0, the one the
//! DRA driver vendors), `nvidia-ctk cdi generate` (nvidia-container-toolkit from the module
//! proxy), GPU feature discovery (`gpu-feature-discovery --oneshot` of the device plugin's
//! module, from the module proxy; whole GPUs, and a MIG partition under the mixed strategy) and the DRA driver's compute-domain kubelet plugin, built from
//! the snapshot in the peers directory. Pins: `manifests/versions.toml` `[peers]`.
//!
//! Every consumer gets only the staged tree and none of the mock's variables (`env -i`), as in
//! the DRA driver's containers: the library must find its profile and topology from its own
//! location.
//!
//! Prerequisites fail loudly: root (the stager creates character devices), `cargo build -p
//! node-stager -p mock-nvml -p check-fabric -p nvidia-smi`, go with the module proxy, and the
//! DRA snapshot (`CDSIM_PEERS_DIR`, else `../shared/peers`, else `<cache>/peers`).
//! Go outputs are cached under `${CDSIM_CACHE_DIR:-/var/cache/cdsim}/go/<name>-<version>`, the
//! DRA driver's as scenario 4 builds it (`harness::scenario4::image::binaries`, keyed by the
//! snapshot's sha256), so warm runs build nothing and a cold one builds the driver once.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{mpsc, OnceLock},
    time::{Duration, Instant},
};

use integration_tests::node_software::{cached_go_binary, stage_tree, Staged};
use integration_tests::{checked, pin, repo_root, require_program, staged_profile};
use nvml_profile::{GpuInstanceProfiles, Profile};
use serde_json::Value;

const CLUSTER: &str = "nvml-mock-compute-domain";

// ---------------------------------------------------------------- pins, caches, prerequisites

fn require_root() {
    integration_tests::require_root(
        "the stager creates character devices: run as root (`sudo -E cargo test -p integration-tests --test nvidia_node_software`)",
    );
}

fn peer_pin(key: &str) -> String {
    pin("peers", key)
}

fn go() -> PathBuf {
    require_program(
        "go",
        "install Go 1.26 (https://go.dev/doc/install); the DRA snapshot needs go 1.26",
    )
}

// ---------------------------------------------------------------- the staged tree

/// Runs the real stager once (`--once --no-label`) for `node` with `topology`, on gb200.
fn stage(topology: &topology::Topology, node: &str) -> Staged {
    stage_profile(topology, node, "gb200")
}

/// As [`stage`], with the shipped profile `profile`.
fn stage_profile(topology: &topology::Topology, node: &str, profile: &str) -> Staged {
    require_root();
    stage_tree(&topology.to_yaml(), node, &profile_path(profile))
}

fn workers() -> Vec<String> {
    topology::kind_workers(CLUSTER, 4)
}

fn profile() -> Profile {
    Profile::parse(nvml_profile::GB200).unwrap_or_else(|err| panic!("{err}"))
}

// ---------------------------------------------------------------- go-nvlib

fn nvlib_client(version: &str) -> PathBuf {
    static BUILT: OnceLock<std::sync::Mutex<()>> = OnceLock::new();
    let _serial = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let source = repo_root().join("tests/nvlib");
    let modfile = match version {
        v if v == peer_pin("go_nvlib_new") => "go.mod",
        v if v == peer_pin("go_nvlib_old") => "go.v010.mod",
        other => panic!("no go.mod for go-nvlib {other}"),
    };
    let text = std::fs::read_to_string(source.join(modfile)).unwrap_or_default();
    assert!(
        text.lines()
            .any(|line| line.trim() == format!("github.com/NVIDIA/go-nvlib {version}")
                || line.trim() == format!("require github.com/NVIDIA/go-nvlib {version}")),
        "tests/nvlib/{modfile} must require github.com/NVIDIA/go-nvlib {version} (manifests/versions.toml)"
    );
    let binary = repo_root().join(format!("target/nvlib-go/nvlib-client-{version}"));
    checked(
        Command::new(go())
            .current_dir(&source)
            .env("CGO_ENABLED", "1")
            .env("GOFLAGS", "-mod=readonly")
            .env("GOTOOLCHAIN", "local")
            .arg("build")
            .arg(format!("-modfile={modfile}"))
            .arg("-o")
            .arg(&binary)
            .arg(".")
            .output(),
        &format!("go build tests/nvlib at go-nvlib {version} (needs the Go module proxy)"),
    );
    binary
}

fn go_nvlib_enumerates(version: &str) {
    let client = nvlib_client(version);
    let worker = &workers()[2];
    let staged = stage(&topology::demo(&workers()), worker);
    let output = checked(
        Command::new(&client)
            .env_clear()
            .env("LD_LIBRARY_PATH", staged.lib_dir())
            .env("NODE_NAME", worker)
            .output(),
        &format!("the go-nvlib {version} client"),
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "not JSON ({err}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    let gpus = report["gpus"]
        .as_array()
        .unwrap_or_else(|| panic!("no gpus in {report}"));
    let devices = profile().devices();
    assert_eq!(gpus.len(), 4, "{report}");
    for (gpu, device) in gpus.iter().zip(&devices) {
        assert_eq!(gpu["uuid"], Value::from(device.uuid.clone()), "{gpu}");
        assert_eq!(gpu["name"], Value::from("NVIDIA GB200"), "{gpu}");
        // go-nvlib lower-cases the 8-digit-domain bus id and drops its leading "0000".
        let id = device.pci_bus_id;
        let bus_id = format!(
            "{:04x}:{:02x}:{:02x}.{:x}",
            id.domain, id.bus, id.device, id.function
        );
        assert_eq!(gpu["pciBusId"], Value::from(bus_id), "{gpu}");
        for (key, expected) in [
            ("migCapable", Value::from(true)),
            ("migEnabled", Value::from(false)),
            ("migDevices", Value::from(0)),
            ("fabricAttached", Value::from(true)),
            ("addressingMode", Value::from("ATS")),
            ("coherent", Value::from(true)),
            ("architecture", Value::from("Blackwell")),
            ("cudaComputeCapability", Value::from("10.0")),
        ] {
            assert_eq!(gpu[key], expected, "go-nvlib {version} {key}: {gpu}");
        }
        // gb200's table holds the four rows found in real output (mig.md), so go-nvlib lists
        // them (and their compute instance profiles) while MIG is disabled.
        let names = gpu["migProfileNames"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for want in table_names(device) {
            assert!(
                names.contains(&Value::from(want.clone())),
                "go-nvlib {version} lists {want}: {gpu}"
            );
        }
        assert_eq!(gpu["migProfiles"], Value::from(names.len()), "{gpu}");
    }
}

#[test]
fn go_nvlib_v0_13_enumerates_the_four_gpus_without_our_variables() {
    go_nvlib_enumerates(&peer_pin("go_nvlib_new"));
}

#[test]
fn go_nvlib_v0_10_the_dra_drivers_enumerates_the_four_gpus() {
    go_nvlib_enumerates(&peer_pin("go_nvlib_old"));
}

/// The GPU instance profile names a profile's MIG table gives (none when it has no known table).
fn table_names(device: &nvml_profile::Device) -> Vec<String> {
    let mut names: Vec<String> = match &device.gpu_instance_profiles {
        Some(nvml_profile::GpuInstanceProfiles::Known(rows)) => rows
            .iter()
            .map(|row| row.name.clone().unwrap_or_default())
            .collect(),
        _ => Vec::new(),
    };
    names.sort();
    names
}

/// A shipped profile staged (the file the library reads) and its parsed document.
fn shipped_profile(name: &str) -> (PathBuf, Profile) {
    let path = profile_path(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let profile = Profile::parse(&text).unwrap_or_else(|err| panic!("{name}: {err}"));
    (staged_profile(&path), profile)
}

/// `manifests/helm/nvml-mock/profiles/<name>.yaml`.
fn profile_path(name: &str) -> PathBuf {
    harness::profiles::path(name)
}

/// The go-nvlib client's JSON report on the mock library in `lib_dir`
/// serving the staged profile `profile`; `what` names the run in a failure.
fn nvlib_report(client: &Path, lib_dir: &Path, profile: &Path, what: &str) -> Value {
    let output = checked(
        Command::new(client)
            .env_clear()
            .env("LD_LIBRARY_PATH", lib_dir)
            .env("MOCK_NVML_CONFIG", profile)
            .output(),
        what,
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| panic!("{what}: not JSON ({err})"))
}

/// The names of the shipped profiles (`manifests/helm/nvml-mock/profiles/<name>.yaml`).
fn shipped_profiles() -> Vec<String> {
    let names = harness::profiles::names().expect("listing the shipped profiles");
    assert_eq!(names.len(), 7, "the seven profiles: {names:?}");
    names
}

/// Both go-nvlib versions enumerate every shipped profile with nothing but the library on the
/// loader path and the profile in `MOCK_NVML_CONFIG`: every GPU, its identity as the profile
/// gives it, MIG capability as the part has it, fabric attachment only where the profile has a
/// fabric block (no topology here: the profile's own fabric defaults).
#[test]
fn go_nvlib_v0_13_and_v0_10_enumerate_every_shipped_profile() {
    let lib_dir = integration_tests::mock_nvml_lib_dir();
    for version in [peer_pin("go_nvlib_new"), peer_pin("go_nvlib_old")] {
        let client = nvlib_client(&version);
        for name in shipped_profiles() {
            let (path, profile) = shipped_profile(&name);
            let what = format!("the go-nvlib {version} client on {name}");
            let report = nvlib_report(&client, lib_dir.path(), &path, &what);
            let gpus = report["gpus"].as_array().cloned().unwrap_or_default();
            assert_eq!(
                gpus.len(),
                profile.device_count(),
                "{version} {name}: {report}"
            );
            for (gpu, device) in gpus.iter().zip(profile.devices()) {
                let id = device.pci_bus_id;
                let cc = device.compute_capability;
                let expected = [
                    ("uuid", Value::from(device.uuid.clone())),
                    ("name", Value::from(device.name.clone())),
                    (
                        "pciBusId",
                        Value::from(format!(
                            "{:04x}:{:02x}:{:02x}.{:x}",
                            id.domain, id.bus, id.device, id.function
                        )),
                    ),
                    (
                        "cudaComputeCapability",
                        Value::from(format!("{}.{}", cc.major, cc.minor)),
                    ),
                    ("migCapable", Value::from(device.mig_mode.is_some())),
                    ("migEnabled", Value::from(false)),
                    ("fabricAttached", Value::from(device.fabric.is_some())),
                ];
                for (key, want) in expected {
                    assert_eq!(gpu[key], want, "go-nvlib {version} on {name}, {key}: {gpu}");
                }
            }
        }
    }
}

/// go-nvlib v0.13 derives its MIG profiles from `nvmlDeviceGetGpuInstanceProfileInfo`: on gb300
/// (table `unknown`) none, on h100, a100, b200 and gb200 exactly the GPU instance profiles of their tables
/// (the names it computes from memory sizes match the table's names), plus the compute instance
/// profiles it derives from them (`1c.2g.20gb`, ...).
#[test]
fn go_nvlib_v0_13_lists_the_mig_profiles_of_the_table() {
    let client = nvlib_client(&peer_pin("go_nvlib_new"));
    let lib_dir = integration_tests::mock_nvml_lib_dir();
    for name in shipped_profiles() {
        let name = name.as_str();
        let (path, profile) = shipped_profile(name);
        let what = format!("the go-nvlib client on {name}");
        let report = nvlib_report(&client, lib_dir.path(), &path, &what);
        let gpus = report["gpus"].as_array().cloned().unwrap_or_default();
        assert_eq!(gpus.len(), profile.device_count(), "{name}: {report}");
        for (gpu, device) in gpus.iter().zip(profile.devices()) {
            let listed: Vec<String> = gpu["migProfileNames"]
                .as_array()
                .unwrap_or_else(|| panic!("{name}: no migProfileNames in {gpu}"))
                .iter()
                .map(|name| name.as_str().unwrap_or_default().to_owned())
                .collect();
            let mut instances: Vec<String> = listed
                .iter()
                .filter(|listed| !listed.contains("c."))
                .cloned()
                .collect();
            instances.sort();
            // go-nvlib visits each profile once per compute instance engine profile.
            instances.dedup();
            let want = table_names(&device);
            assert_eq!(instances, want, "{name} GPU {}: {listed:?}", device.index);
            assert_eq!(
                listed.len() > want.len(),
                !want.is_empty(),
                "{name}: compute instance profiles only beside GPU instance ones: {listed:?}"
            );
        }
    }
}

// ---------------------------------------------------------------- GPU feature discovery

fn gpu_feature_discovery() -> PathBuf {
    let version = peer_pin("k8s_device_plugin");
    let binary = "gpu-feature-discovery";
    cached_go_binary(&format!("{binary}-{version}"), binary, |out| {
        checked(
            Command::new(go())
                .env("GOBIN", out)
                .env("GOTOOLCHAIN", "local")
                .env("GOFLAGS", "-mod=mod")
                .env("CGO_ENABLED", "1")
                .arg("install")
                .arg(format!(
                    "github.com/NVIDIA/k8s-device-plugin/cmd/{binary}@{version}"
                ))
                .output(),
            "go install gpu-feature-discovery (needs the Go module proxy)",
        );
    })
}

/// GFD's labels for `node`, run once on the node's staged tree (the library found on the
/// loader path, as in GFD's container, and none of the mock's variables).
fn gfd_labels(node: &str) -> BTreeMap<String, String> {
    run_gfd(&stage(&topology::demo(&workers()), node), node, &[])
}

/// GFD run once (`--oneshot`) on `staged` as `node`, with `extra` flags; the labels it wrote.
fn run_gfd(staged: &Staged, node: &str, extra: &[&str]) -> BTreeMap<String, String> {
    let output_file = staged.dir.path().join("gfd-labels");
    checked(
        Command::new(gpu_feature_discovery())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LD_LIBRARY_PATH", staged.lib_dir())
            .env("NODE_NAME", node)
            .args([
                "--oneshot",
                "--no-timestamp",
                "--use-node-feature-api=false",
                "--fail-on-init-error",
            ])
            .args(extra)
            .arg(format!("--output-file={}", output_file.display()))
            .output(),
        &format!("gpu-feature-discovery --oneshot {extra:?} on {node}"),
    );
    let text = std::fs::read_to_string(&output_file)
        .unwrap_or_else(|err| panic!("GFD wrote no {}: {err}", output_file.display()));
    text.lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect()
}

/// The device plugin's mixed MIG strategy, through its GPU feature discovery (the same
/// module, the same resource naming): an h100 tray whose GPU 0 was partitioned by the staged
/// `nvidia-smi` in one process (two 1g.10gb and one 2g.20gb instances, each with its compute
/// instance) is seen by GFD in the next as `nvidia.com/mig-<profile>.count` per profile, and
/// its seven other GPUs as whole GPUs; the MIG labels carry the profile table's values.
#[test]
fn gpu_feature_discovery_mixed_strategy_counts_the_mig_partition() {
    let node = &workers()[0];
    let staged = stage_profile(&topology::demo(&workers()), node, "h100");
    let smi = |args: &[&str]| {
        checked(
            Command::new(staged.driver().join("usr/bin/nvidia-smi"))
                .args(args)
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("LD_LIBRARY_PATH", staged.lib_dir())
                .output(),
            &format!("the staged nvidia-smi {}", args.join(" ")),
        )
    };
    smi(&["-i", "0", "-mig", "1"]);
    smi(&["mig", "-i", "0", "-cgi", "19,19,14", "-C"]);
    let labels = run_gfd(&staged, node, &["--mig-strategy=mixed"]);
    let devices = Profile::parse(&std::fs::read_to_string(profile_path("h100")).expect("h100"))
        .unwrap_or_else(|err| panic!("{err}"))
        .devices();
    // GFD's gpu.count is every full GPU, the MIG-enabled one included (its product label
    // says MIG); the resources the plugin advertises for it are the partition's.
    let expected = [
        ("nvidia.com/mig.strategy", "mixed".to_owned()),
        ("nvidia.com/gpu.count", devices.len().to_string()),
        ("nvidia.com/mig-1g.10gb.count", "2".to_owned()),
        ("nvidia.com/mig-2g.20gb.count", "1".to_owned()),
    ];
    for (key, value) in expected {
        assert_eq!(labels.get(key), Some(&value), "GFD's {key}: {labels:#?}");
    }
    let Some(GpuInstanceProfiles::Known(rows)) = &devices[0].gpu_instance_profiles else {
        panic!("h100's GPU 0 has no MIG profile table");
    };
    for name in ["1g.10gb", "2g.20gb"] {
        let row = rows
            .iter()
            .find(|row| row.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("h100's table has no {name}"));
        for (label, value) in [
            ("multiprocessors", row.multiprocessors),
            ("slices.gi", row.slices),
            ("engines.copy", row.copy_engines),
            ("engines.decoder", row.decoders),
        ] {
            let key = format!("nvidia.com/mig-{name}.{label}");
            assert_eq!(
                labels.get(&key),
                Some(&value.to_string()),
                "GFD's {key} against the profile's {name} row: {labels:#?}"
            );
        }
    }
    let mig_profiles: Vec<&String> = labels
        .keys()
        .filter(|it| it.starts_with("nvidia.com/mig-") && it.ends_with(".count"))
        .collect();
    assert_eq!(
        mig_profiles.len(),
        2,
        "only the partition's profiles: {labels:#?}"
    );
    eprintln!("GFD mixed on the partitioned h100: {labels:#?}");
}

#[test]
fn gpu_feature_discovery_labels_each_tray_from_the_profile_and_its_clique() {
    let profile = profile();
    let device = &profile.devices()[0];
    let system = profile.system();
    let topology = topology::demo(&workers());
    let cuda = system.cuda_driver_version;
    let (driver_major, driver_rest) = system
        .driver_version
        .split_once('.')
        .unwrap_or_else(|| panic!("driver version {}", system.driver_version));
    // Two trays in different cliques: the clique label must follow each one's.
    for node in [&workers()[0], &workers()[2]] {
        let labels = gfd_labels(node);
        let identity = topology
            .resolve(node)
            .unwrap_or_else(|| panic!("{node} is not in the demo topology"));
        let expected = [
            ("nvidia.com/gpu.product", device.name.replace(' ', "-")),
            ("nvidia.com/gpu.count", profile.devices().len().to_string()),
            (
                "nvidia.com/gpu.memory",
                (device.memory.total / (1024 * 1024)).to_string(),
            ),
            (
                "nvidia.com/gpu.family",
                format!("{:?}", device.architecture).to_lowercase(),
            ),
            (
                "nvidia.com/gpu.compute.major",
                device.compute_capability.major.to_string(),
            ),
            (
                "nvidia.com/gpu.compute.minor",
                device.compute_capability.minor.to_string(),
            ),
            (
                "nvidia.com/cuda.driver-version.full",
                system.driver_version.clone(),
            ),
            (
                "nvidia.com/cuda.driver-version.major",
                driver_major.to_owned(),
            ),
            (
                "nvidia.com/cuda.runtime-version.full",
                format!("{}.{}", cuda / 1000, (cuda % 1000) / 10),
            ),
            (
                "nvidia.com/mig.capable",
                device.mig_mode.is_some().to_string(),
            ),
            (
                "nvidia.com/gpu.clique",
                format!("{}.{}", identity.cluster_uuid, identity.clique_id),
            ),
        ];
        for (key, value) in expected {
            assert_eq!(
                labels.get(key),
                Some(&value),
                "GFD's {key} on {node} (driver {driver_major}.{driver_rest}): {labels:#?}"
            );
        }
    }
}

// ---------------------------------------------------------------- nvidia-ctk

fn nvidia_ctk() -> PathBuf {
    let version = peer_pin("nvidia_container_toolkit");
    cached_go_binary(&format!("nvidia-ctk-{version}"), "nvidia-ctk", |out| {
        checked(
            Command::new(go())
                .env("GOBIN", out)
                .env("GOTOOLCHAIN", "local")
                .env("GOFLAGS", "-mod=mod")
                .arg("install")
                .arg(format!(
                    "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-ctk@{version}"
                ))
                .output(),
            "go install nvidia-ctk (needs the Go module proxy)",
        );
    })
}

fn cdi_generate(staged: &Staged, mode: &str) -> Value {
    let spec = staged.dir.path().join(format!("cdi-{mode}.yaml"));
    checked(
        Command::new(nvidia_ctk())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .args(["cdi", "generate"])
            .arg(format!("--mode={mode}"))
            .arg(format!("--driver-root={}", staged.driver().display()))
            .arg(format!("--output={}", spec.display()))
            .output(),
        &format!("nvidia-ctk cdi generate --mode={mode}"),
    );
    let text = std::fs::read_to_string(&spec)
        .unwrap_or_else(|err| panic!("nvidia-ctk wrote no {}: {err}", spec.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}\n{text}", spec.display()))
}

fn names(spec: &Value) -> Vec<String> {
    spec["devices"]
        .as_array()
        .map(|devices| {
            devices
                .iter()
                .filter_map(|device| device["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn device_paths(edits: &Value) -> Vec<String> {
    edits["deviceNodes"]
        .as_array()
        .map(|nodes| {
            nodes
                .iter()
                .filter_map(|node| node["path"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn device(spec: &Value, name: &str) -> Value {
    spec["devices"]
        .as_array()
        .and_then(|devices| devices.iter().find(|device| device["name"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("no device {name:?} in {:?}", names(spec)))
}

#[test]
fn nvidia_ctk_cdi_generate_writes_the_gpus_control_devices_and_channels() {
    let staged = stage(&topology::demo(&workers()), &workers()[0]);

    let spec = cdi_generate(&staged, "nvml");
    assert_eq!(spec["kind"], Value::from("nvidia.com/gpu"));
    let mut expected: Vec<String> = (0..4).map(|index| index.to_string()).collect();
    expected.extend(profile().devices().iter().map(|device| device.uuid.clone()));
    expected.push("all".to_owned());
    let mut found = names(&spec);
    found.sort();
    expected.sort();
    assert_eq!(found, expected);
    for index in 0..4 {
        assert_eq!(
            device_paths(&device(&spec, &index.to_string())["containerEdits"]),
            [format!("/dev/nvidia{index}")]
        );
    }
    let control = device_paths(&spec["containerEdits"]);
    for node in ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"] {
        assert!(
            control.contains(&node.to_owned()),
            "{node} not in {control:?}"
        );
    }

    let spec = cdi_generate(&staged, "imex");
    let channels = device_paths(&device(&spec, "all")["containerEdits"]);
    let expected: Vec<String> = (0..8)
        .map(|index| format!("/dev/nvidia-caps-imex-channels/channel{index}"))
        .collect();
    assert_eq!(channels, expected);
}

/// On every shipped profile, `nvidia-ctk cdi generate` names each GPU by index and UUID with its
/// own device node (`/dev/nvidia<minor>`), from the tree the stager stages for that profile.
#[test]
fn nvidia_ctk_cdi_generate_names_every_gpu_of_every_shipped_profile() {
    for name in shipped_profiles() {
        let staged = stage_profile(&topology::demo(&workers()), &workers()[0], &name);
        let (_, profile) = shipped_profile(&name);
        let spec = cdi_generate(&staged, "nvml");
        let mut expected: Vec<String> = Vec::new();
        for gpu in profile.devices() {
            expected.push(gpu.index.to_string());
            expected.push(gpu.uuid.clone());
            assert_eq!(
                device_paths(&device(&spec, &gpu.uuid)["containerEdits"]),
                [format!("/dev/nvidia{}", gpu.minor_number)],
                "{name}: GPU {}",
                gpu.index
            );
        }
        expected.push("all".to_owned());
        let mut found = names(&spec);
        found.sort();
        expected.sort();
        assert_eq!(found, expected, "{name}");
    }
}

// ---------------------------------------------------------------- the DRA driver's CD plugin

/// The compute-domain kubelet plugin, from the DRA driver's one Go build that scenario 4's image
/// uses too (`harness::scenario4::image::binaries`: the snapshot unpacked once into the cache and
/// built as the DRA driver's Makefile does), so a cold machine compiles the driver once.
fn compute_domain_plugin() -> PathBuf {
    let sh = xshell::Shell::new().unwrap_or_else(|err| panic!("{err}"));
    let dir = harness::scenario4::image::binaries(&sh).unwrap_or_else(|err| {
        panic!("building the DRA driver from its snapshot (needs Go 1.26 and the peers snapshot): {err:#}")
    });
    dir.join("compute-domain-kubelet-plugin")
}

/// Starts the plugin on the staged tree for `node`, with no API server to reach, and returns
/// the clique ids it logs for the four GPUs (it then waits for the API and is killed).
fn plugin_cliques(staged: &Staged, node: &str) -> Vec<String> {
    plugin_cliques_with_gates(staged, node, "", 4)
}

/// One of the DRA driver's kubelet plugins started on a staged tree with no API server to
/// reach (it does its node-side work first, then waits for the API): its work directory (CDI
/// root, plugin and registry directories), the process and its log lines as they come.
struct RunningPlugin {
    work: tempfile::TempDir,
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
    log: Vec<String>,
}

impl RunningPlugin {
    /// Starts `plugin` for `node` on `staged`, with the chart's `FEATURE_GATES`.
    fn start(plugin: &Path, staged: &Staged, node: &str, feature_gates: &str) -> RunningPlugin {
        let work = tempfile::tempdir().unwrap_or_else(|err| panic!("{err}"));
        let kubeconfig = work.path().join("kubeconfig");
        // An API server that refuses connections.
        std::fs::write(
            &kubeconfig,
            "apiVersion: v1\nkind: Config\nclusters: [{name: x, cluster: {server: \"https://127.0.0.1:1\"}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\ncurrent-context: x\nusers: [{name: x, user: {token: x}}]\n",
        )
        .unwrap_or_else(|err| panic!("{err}"));
        let hook = work.path().join("nvidia-cdi-hook");
        std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap_or_else(|err| panic!("{err}"));
        for dir in ["cdi", "plugins", "registry"] {
            std::fs::create_dir_all(work.path().join(dir)).unwrap_or_else(|err| panic!("{err}"));
        }
        let driver = staged.driver();
        let mut child = Command::new(plugin)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("KUBECONFIG", &kubeconfig)
            .env("NODE_NAME", node)
            .env("NAMESPACE", "nvidia-dra-driver")
            .env("CDI_ROOT", work.path().join("cdi"))
            .env("NVIDIA_DRIVER_ROOT", &driver)
            .env("DRIVER_ROOT_CTR_PATH", &driver)
            .env("NVIDIA_CDI_HOOK_PATH", &hook)
            .env(
                "KUBELET_REGISTRAR_DIRECTORY_PATH",
                work.path().join("registry"),
            )
            .env(
                "KUBELET_PLUGINS_DIRECTORY_PATH",
                work.path().join("plugins"),
            )
            .env("ALT_PROC_DEVICES_PATH", staged.proc_devices())
            .env("FEATURE_GATES", feature_gates)
            // The GPU plugin's required flag (the image its MPS daemons would use).
            .env("IMAGE_NAME", "unused")
            .arg("-v=6")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", plugin.display()));
        let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        RunningPlugin {
            work,
            child,
            lines,
            log: Vec::new(),
        }
    }

    /// Reads log lines until `done(line)` has held `count` times or the plugin has been quiet
    /// past `deadline`; returns the lines that matched.
    fn until(
        &mut self,
        count: usize,
        deadline: Instant,
        done: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let mut matched = Vec::new();
        while matched.len() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if done(&line) {
                        matched.push(line.clone());
                    }
                    self.log.push(line);
                }
                Err(_) => break,
            }
        }
        matched
    }

    /// Waits up to `deadline` for `path` (the plugin writes it), reading the log meanwhile.
    fn wait_for_file(&mut self, path: &Path, deadline: Instant) {
        while !path.is_file() && Instant::now() < deadline {
            while let Ok(line) = self.lines.try_recv() {
                self.log.push(line);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        self.log.join("\n")
    }
}

impl Drop for RunningPlugin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// As [`plugin_cliques`], with the plugin's `FEATURE_GATES` (as the DRA chart sets it), for a
/// node of `gpus` GPUs.
fn plugin_cliques_with_gates(
    staged: &Staged,
    node: &str,
    feature_gates: &str,
    gpus: usize,
) -> Vec<String> {
    let mut plugin = RunningPlugin::start(&compute_domain_plugin(), staged, node, feature_gates);
    let marker = "identified fabric clique UUID/ID (device ";
    let deadline = Instant::now() + Duration::from_secs(60);
    let cliques: Vec<String> = plugin
        .until(gpus, deadline, |line| line.contains(marker))
        .iter()
        .filter_map(|line| {
            let (_, rest) = line.split_once(marker)?;
            let (_, clique) = rest.rsplit_once(": ")?;
            Some(clique.trim().to_owned())
        })
        .collect();
    // It writes its base CDI spec next, before it waits for the API server.
    let spec = plugin
        .work
        .path()
        .join("cdi/k8s.compute-domain.nvidia.com-device_base.yaml");
    plugin.wait_for_file(&spec, deadline);
    assert_eq!(
        cliques.len(),
        gpus,
        "the plugin logged {} cliques for {node} in 60 s:\n{}",
        cliques.len(),
        plugin.log()
    );
    // The spec holds the staged device nodes.
    let text = std::fs::read_to_string(&spec)
        .unwrap_or_else(|err| panic!("no {} ({err}); log:\n{}", spec.display(), plugin.log()));
    assert!(
        text.contains("/dev/nvidia-caps-imex-channels/channel7") && text.contains("/dev/nvidia3"),
        "{text}"
    );
    cliques
}

#[test]
fn compute_domain_kubelet_plugin_logs_the_demo_and_rebind_cliques() {
    let workers = workers();
    let demo = topology::demo(&workers);
    for (node, expected) in [
        (&workers[0], "00000000-0000-0000-0000-0000000000ab/0"),
        (&workers[3], "00000000-0000-0000-0000-0000000000ab/1"),
    ] {
        let staged = stage(&demo, node);
        assert_eq!(plugin_cliques(&staged, node), vec![expected; 4], "{node}");
    }
    let rebind = topology::rebind(&workers);
    let staged = stage(&rebind, &workers[1]);
    assert_eq!(
        plugin_cliques(&staged, &workers[1]),
        vec!["00000000-0000-0000-0000-0000000000ff/99"; 4]
    );
}

/// The plugin reads the demo topology's clique through every shipped profile that has a fabric
/// (GB200, GB300), one entry per GPU. gb300 carries upstream's driver 570.124.06, older than the
/// 570.158.1 the plugin's default `IMEXDaemonsWithDNSNames` gate requires: the plugin refuses to
/// start there, as on such a node, and says to turn the gate off; `ComputeDomainCliques` needs
/// that gate, so for a driver that old both are off (what a user of that driver sets through the
/// chart), and the plugin still reads each GPU's clique.
#[test]
fn compute_domain_kubelet_plugin_logs_the_clique_on_every_fabric_profile() {
    let workers = workers();
    let demo = topology::demo(&workers);
    let mut checked_profiles = Vec::new();
    for name in shipped_profiles() {
        let (_, profile) = shipped_profile(&name);
        if !profile.has_fabric() {
            continue;
        }
        let version: Vec<u32> = profile
            .driver_version()
            .split('.')
            .map(|part| part.parse().unwrap_or(0))
            .collect();
        let gates = if version < vec![570, 158, 1] {
            "IMEXDaemonsWithDNSNames=false,ComputeDomainCliques=false"
        } else {
            ""
        };
        let staged = stage_profile(&demo, &workers[3], &name);
        assert_eq!(
            plugin_cliques_with_gates(&staged, &workers[3], gates, profile.device_count()),
            vec!["00000000-0000-0000-0000-0000000000ab/1"; profile.device_count()],
            "{name} (driver {}, FEATURE_GATES={gates:?})",
            profile.driver_version()
        );
        checked_profiles.push(name);
    }
    assert_eq!(
        checked_profiles,
        ["gb200", "gb300"],
        "the profiles with a fabric"
    );
}

// ---------------------------------------------------------------- the DRA driver's GPU plugin

/// The GPU kubelet plugin with the `DynamicMIG` feature gate (v0.4.1, alpha), on a staged tray
/// of each MIG-capable profile with a known table: it enumerates every GPU's MIG profiles and
/// placements through the mock (the largest placement it sees is the table's largest, in
/// memory slices), then, owning MIG on the node, turns MIG off on every GPU it found no
/// MIG device of its own on, which the mock's `nvmlDeviceSetMigMode` grants at once; then it
/// waits for the API server. (The claims' create and destroy need a cluster with
/// `DRAPartitionableDevices`: issue 38.)
#[test]
fn gpu_kubelet_plugin_with_dynamic_mig_enumerates_and_owns_the_partitions() {
    let sh = xshell::Shell::new().unwrap_or_else(|err| panic!("{err}"));
    let binaries = harness::scenario4::image::binaries(&sh).unwrap_or_else(|err| {
        panic!("building the DRA driver from its snapshot (needs Go 1.26 and the peers snapshot): {err:#}")
    });
    let workers = workers();
    let demo = topology::demo(&workers);
    for name in ["h100", "gb200"] {
        let (_, profile) = shipped_profile(name);
        let devices = profile.devices();
        let largest = devices
            .iter()
            .filter_map(|device| match &device.gpu_instance_profiles {
                Some(nvml_profile::GpuInstanceProfiles::Known(rows)) => rows
                    .iter()
                    .filter_map(|row| Some(row.placements.as_ref()?.size))
                    .max(),
                _ => None,
            })
            .max()
            .unwrap_or_else(|| panic!("{name} has no MIG table"));
        let staged = stage_profile(&demo, &workers[0], name);
        let mut plugin = RunningPlugin::start(
            &binaries.join("gpu-kubelet-plugin"),
            &staged,
            &workers[0],
            "DynamicMIG=true",
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        let disabled = plugin.until(devices.len(), deadline, |line| {
            line.contains("Called nvml.SetMigMode(nvml.DEVICE_MIG_DISABLE)")
        });
        let log = plugin.log();
        assert_eq!(
            disabled.len(),
            devices.len(),
            "{name}: MIG off on every GPU:\n{log}"
        );
        assert!(
            disabled
                .iter()
                .all(|line| line.ends_with("got activationStatus: Success")),
            "{name}: {disabled:#?}"
        );
        for device in &devices {
            let uuid = &device.uuid;
            let enumerated = format!(
                "gpu-{}-{uuid}: Per-capacity maximum across all MIG profiles+placements",
                device.index
            );
            let slices = format!(
                "gpu-{}-{uuid}: Largest MIG placement size seen (maxMemSlicesConsumed): {largest}",
                device.index
            );
            assert!(
                log.contains(&enumerated),
                "{name}: no {enumerated:?}:\n{log}"
            );
            assert!(log.contains(&slices), "{name}: no {slices:?}:\n{log}");
        }
    }
}

#[test]
fn the_dra_charts_init_check_passes_with_only_ld_preload() {
    // hack/kubelet-plugin-prestart.sh: `env -i LD_PRELOAD=<lib> <driver>/usr/bin/nvidia-smi --version`.
    let staged = stage(&topology::demo(&workers()), &workers()[0]);
    let smi = staged.driver().join("usr/bin/nvidia-smi");
    let metadata = std::fs::symlink_metadata(&smi).unwrap_or_else(|err| panic!("{err}"));
    assert!(metadata.is_file(), "nvidia-smi must be a regular file");
    let output = checked(
        Command::new(&smi)
            .env_clear()
            .env("LD_PRELOAD", staged.lib_dir().join("libnvidia-ml.so.1"))
            .arg("--version")
            .output(),
        "env -i LD_PRELOAD=… nvidia-smi --version",
    );
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("DRIVER version      : 580.65.06"), "{text}");
    // The versioned library nvcdi looks for, named after the version the library reports.
    assert!(staged.lib_dir().join("libnvidia-ml.so.580.65.06").is_file());
}
