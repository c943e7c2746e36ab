//! NVIDIA's device plugin (with GPU feature discovery) and node-feature-discovery as image
//! archives, built from source offline by `cargo xtask gpu-stack-images` (the harness's
//! `gpu_stack`, pins `[peers] k8s_device_plugin` and `node_feature_discovery`), and the device
//! plugin's chart with NFD's chart as its dependency (issue 23, scenario 5's inputs).
//!
//! Real peers: the built Go binaries (their version flags), GNU tar (each archive's manifest,
//! config and layer), helm (`helm template` of the assembled chart, offline) and, when one
//! answers, dockerd (`docker load`, then `docker rmi`; no container is run).
//!
//! Prerequisites fail loudly: `cargo build -p xtask` (the test runs xtask as a user does), and
//! for a cold cache Go with the module proxy (the builds then take minutes; warm, seconds).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use integration_tests::{artifact, checked, pin, repo_root};
use serde_json::Value;

const DEVICE_PLUGIN_BINARIES: [&str; 4] = [
    "nvidia-device-plugin",
    "gpu-feature-discovery",
    "config-manager",
    "mps-control-daemon",
];
const NFD_BINARIES: [&str; 3] = ["nfd-master", "nfd-worker", "nfd-gc"];

fn gpu_stack_images(json: bool) -> Value {
    let mut command = Command::new(artifact("xtask", "xtask"));
    command.current_dir(repo_root()).arg("gpu-stack-images");
    if json {
        command.arg("--json");
    }
    let out = checked(command.output(), "cargo xtask gpu-stack-images --json");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
        panic!(
            "gpu-stack-images --json printed no JSON ({err}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The first run's answer (it may build), shared by every test.
fn stack() -> &'static Value {
    static STACK: OnceLock<Value> = OnceLock::new();
    STACK.get_or_init(|| gpu_stack_images(true))
}

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string at {pointer} in {value:#}"))
}

/// An archive unpacked: its docker manifest, its config and its layer's paths.
struct Unpacked {
    repo_tags: Vec<String>,
    config: Value,
    paths: BTreeSet<String>,
}

fn unpack(archive: &Path) -> Unpacked {
    let dir = tempfile::tempdir().expect("tempdir");
    checked(
        Command::new("tar")
            .arg("-xf")
            .arg(archive)
            .arg("-C")
            .arg(dir.path())
            .output(),
        &format!("tar -xf {}", archive.display()),
    );
    let read_json = |name: &str| -> Value {
        let path = dir.path().join(name);
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
        serde_json::from_slice(&bytes).unwrap_or_else(|err| panic!("{name}: {err}"))
    };
    let manifest = read_json("manifest.json");
    let entry = &manifest[0];
    let layers = entry["Layers"].as_array().expect("Layers");
    assert_eq!(layers.len(), 1, "{manifest:#}");
    let listing = checked(
        Command::new("tar")
            .arg("-tf")
            .arg(dir.path().join(layers[0].as_str().expect("layer")))
            .output(),
        "tar -tf <layer>",
    );
    let paths = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .map(|line| format!("/{}", line.trim_start_matches("./").trim_end_matches('/')))
        .collect();
    Unpacked {
        repo_tags: entry["RepoTags"]
            .as_array()
            .expect("RepoTags")
            .iter()
            .map(|it| it.as_str().expect("tag").to_owned())
            .collect(),
        config: read_json(entry["Config"].as_str().expect("Config")),
        paths,
    }
}

fn assert_no_nvml(unpacked: &Unpacked, image: &str) {
    let nvml: Vec<&String> = unpacked
        .paths
        .iter()
        .filter(|path| path.contains("libnvidia-ml"))
        .collect();
    assert!(
        nvml.is_empty(),
        "{image} holds an NVML library (the mock must come from the driver root): {nvml:?}"
    );
}

#[test]
#[ignore = "builds NVIDIA's device plugin and node-feature-discovery from source (about 12 min more on a cold CI machine, which the full-rack step needs); run `cargo test -p integration-tests --test gpu_stack_images -- --ignored`; CI will run it with scenario 5"]
fn a_second_run_builds_nothing_and_names_the_same_images() {
    let first = stack();
    let second = gpu_stack_images(true);
    assert_eq!(second["built"], Value::Bool(false), "{second:#}");
    for key in ["/device_plugin/image", "/nfd/image", "/chart"] {
        assert_eq!(text(first, key), text(&second, key), "{key}");
    }
    for key in ["/device_plugin/archive", "/nfd/archive"] {
        let path = Path::new(text(&second, key));
        assert!(path.is_file(), "{} is missing", path.display());
        let size = std::fs::metadata(path).expect("stat").len();
        eprintln!("{key}: {} ({:.1} MB)", path.display(), size as f64 / 1e6);
    }
}

#[test]
#[ignore = "builds NVIDIA's device plugin and node-feature-discovery from source (about 12 min more on a cold CI machine, which the full-rack step needs); run `cargo test -p integration-tests --test gpu_stack_images -- --ignored`; CI will run it with scenario 5"]
fn the_device_plugin_archive_holds_the_charts_commands_and_no_nvml() {
    let stack = stack();
    let unpacked = unpack(Path::new(text(stack, "/device_plugin/archive")));
    let image = text(stack, "/device_plugin/image");
    assert_eq!(unpacked.repo_tags, [image]);
    for name in DEVICE_PLUGIN_BINARIES {
        let path = format!("/usr/bin/{name}");
        assert!(unpacked.paths.contains(&path), "{image} lacks {path}");
    }
    assert_eq!(
        unpacked.config["config"]["Entrypoint"],
        serde_json::json!(["nvidia-device-plugin"])
    );
    // cgo binaries: the loader came with them.
    assert!(
        unpacked.paths.iter().any(|it| it.contains("ld-linux")),
        "{image} has no dynamic loader: {:?}",
        unpacked.paths
    );
    assert_no_nvml(&unpacked, image);
}

#[test]
#[ignore = "builds NVIDIA's device plugin and node-feature-discovery from source (about 12 min more on a cold CI machine, which the full-rack step needs); run `cargo test -p integration-tests --test gpu_stack_images -- --ignored`; CI will run it with scenario 5"]
fn the_nfd_archive_holds_its_commands_and_config_and_runs_as_nobody() {
    let stack = stack();
    let unpacked = unpack(Path::new(text(stack, "/nfd/archive")));
    let image = text(stack, "/nfd/image");
    assert_eq!(unpacked.repo_tags, [image]);
    for name in NFD_BINARIES {
        let path = format!("/usr/bin/{name}");
        assert!(unpacked.paths.contains(&path), "{image} lacks {path}");
    }
    assert!(unpacked
        .paths
        .contains("/etc/kubernetes/node-feature-discovery/nfd-worker.conf"));
    // The chart's runAsNonRoot needs a numeric non-root user in the image.
    assert_eq!(unpacked.config["config"]["User"], "65534:65534");
    assert_no_nvml(&unpacked, image);
}

fn version_output(binary: &Path, flag: &str) -> String {
    let out = checked(
        Command::new(binary).arg(flag).env_clear().output(),
        &format!("{} {flag}", binary.display()),
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
#[ignore = "builds NVIDIA's device plugin and node-feature-discovery from source (about 12 min more on a cold CI machine, which the full-rack step needs); run `cargo test -p integration-tests --test gpu_stack_images -- --ignored`; CI will run it with scenario 5"]
fn the_built_binaries_report_the_pinned_versions() {
    let stack = stack();
    let dp_dir = PathBuf::from(text(stack, "/device_plugin/bin_dir"));
    let dp_version = pin("peers", "k8s_device_plugin");
    for name in DEVICE_PLUGIN_BINARIES {
        // config-manager has no version flag: its help must answer.
        let (flag, want) = match name {
            "config-manager" => ("--help", "config-manager"),
            _ => ("--version", dp_version.as_str()),
        };
        let out = version_output(&dp_dir.join(name), flag);
        assert!(out.contains(want), "{name} {flag}: {out}");
    }
    let nfd_dir = PathBuf::from(text(stack, "/nfd/bin_dir"));
    let nfd_version = pin("peers", "node_feature_discovery");
    for name in NFD_BINARIES {
        let out = version_output(&nfd_dir.join(name), "-version");
        assert!(out.contains(&nfd_version), "{name} -version: {out}");
    }
}

fn docker_answers() -> bool {
    Command::new("docker")
        .args(["version", "--format", "{{.Server.Version}}"])
        .output()
        .is_ok_and(|out| out.status.success())
}

#[test]
#[ignore = "builds NVIDIA's device plugin and node-feature-discovery from source (about 12 min more on a cold CI machine, which the full-rack step needs); run `cargo test -p integration-tests --test gpu_stack_images -- --ignored`; CI will run it with scenario 5"]
fn the_archives_load_into_docker_under_their_references() {
    if !docker_answers() {
        eprintln!(
            "\n!!! NO DOCKER ENGINE ANSWERS: `docker load` of the gpu-stack archives was NOT \
             checked (the archive contents were, by the other tests) !!!\n"
        );
        return;
    }
    let stack = stack();
    for key in ["device_plugin", "nfd"] {
        let archive = text(stack, &format!("/{key}/archive"));
        let image = text(stack, &format!("/{key}/image"));
        let out = checked(
            Command::new("docker")
                .args(["load", "-i", archive])
                .output(),
            &format!("docker load -i {archive}"),
        );
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains(image), "docker load said {said}");
        checked(
            Command::new("docker")
                .args(["image", "inspect", image])
                .output(),
            &format!("docker image inspect {image}"),
        );
        checked(
            Command::new("docker").args(["rmi", image]).output(),
            &format!("docker rmi {image}"),
        );
    }
}

fn helm() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("helm"))
            .find(|it| it.is_file())
    });
    let cache = std::env::var_os("CDSIM_CACHE_DIR")
        .filter(|it| !it.is_empty())
        .map_or_else(|| PathBuf::from("/var/cache/cdsim"), PathBuf::from);
    on_path
        .or_else(|| Some(cache.join("bin/helm")).filter(|it| it.is_file()))
        .unwrap_or_else(|| {
            panic!(
                "helm is neither on PATH nor in {}/bin: `cargo xtask doctor` installs it",
                cache.display()
            )
        })
}

/// The images of every container (init containers included) of the rendered `kind` named
/// `name`.
fn images_of(docs: &[serde_yaml::Value], kind: &str, name: &str) -> Vec<String> {
    let doc = docs
        .iter()
        .find(|doc| {
            doc["kind"].as_str() == Some(kind) && doc["metadata"]["name"].as_str() == Some(name)
        })
        .unwrap_or_else(|| {
            let present: Vec<String> = docs
                .iter()
                .map(|doc| {
                    format!(
                        "{:?}/{:?}",
                        doc["kind"].as_str(),
                        doc["metadata"]["name"].as_str()
                    )
                })
                .collect();
            panic!("no {kind} {name} rendered; rendered: {present:?}")
        });
    let spec = &doc["spec"]["template"]["spec"];
    ["initContainers", "containers"]
        .iter()
        .filter_map(|key| spec[*key].as_sequence())
        .flatten()
        .map(|container| container["image"].as_str().expect("image").to_owned())
        .collect()
}

#[test]
#[ignore = "builds NVIDIA's device plugin and node-feature-discovery from source (about 12 min more on a cold CI machine, which the full-rack step needs); run `cargo test -p integration-tests --test gpu_stack_images -- --ignored`; CI will run it with scenario 5"]
fn the_chart_renders_the_plugin_gfd_and_nfd_with_our_images_offline() {
    let stack = stack();
    let sets: Vec<String> = stack["helm_values"]
        .as_object()
        .expect("helm_values")
        .iter()
        .map(|(key, value)| format!("{key}={}", value.as_str().expect("value")))
        .collect();
    let out = checked(
        Command::new(helm())
            .args(["template", "gpu", text(stack, "/chart")])
            .args([
                "--namespace",
                "nvidia-device-plugin",
                "--set",
                &sets.join(","),
            ])
            .output(),
        "helm template of the device plugin chart",
    );
    let rendered = String::from_utf8_lossy(&out.stdout);
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&rendered)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("YAML document"))
        .filter(|doc: &serde_yaml::Value| !doc.is_null())
        .collect();
    let dp = text(stack, "/device_plugin/image");
    let nfd = text(stack, "/nfd/image");
    for (kind, name, image) in [
        ("DaemonSet", "gpu-nvidia-device-plugin", dp),
        (
            "DaemonSet",
            "gpu-nvidia-device-plugin-gpu-feature-discovery",
            dp,
        ),
        ("DaemonSet", "gpu-node-feature-discovery-worker", nfd),
        ("Deployment", "gpu-node-feature-discovery-master", nfd),
        ("Deployment", "gpu-node-feature-discovery-gc", nfd),
    ] {
        let images = images_of(&docs, kind, name);
        assert!(!images.is_empty(), "{kind} {name} has no container");
        assert!(
            images.iter().all(|it| it == image),
            "{kind} {name} runs {images:?}, not only {image}"
        );
    }
}
