//! The two image specs, pure: laid out as the projects' Dockerfiles lay out
//! their images (binaries in `/usr/bin`, where the charts' bare `command`
//! names find them on `PATH`). Neither holds an NVML library: the device
//! plugin and GFD load the mock from the driver root the chart points at
//! (`image-builder` adds only the `DT_NEEDED` closure, and go-nvml dlopens NVML).

use std::path::Path;

use image_builder::spec::{FileSpec, ImageSpec};

use super::go::{DEVICE_PLUGIN_BINARIES, LICENSE, NFD_BINARIES, NFD_WORKER_CONF};
use crate::scenario4::image::host_file;

/// The image of NVIDIA's device plugin, GPU feature discovery included (one
/// image for both, as NVIDIA ships it; the chart runs both from it).
pub const DEVICE_PLUGIN_IMAGE: &str = "cdsim-k8s-device-plugin";
/// The image of node-feature-discovery (`nfd-master`, `nfd-worker`, `nfd-gc`).
pub const NFD_IMAGE: &str = "cdsim-node-feature-discovery";
/// `PATH` of both images (a distroless image's).
const PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Where NFD's image keeps the worker config (its Dockerfile's path; the chart mounts its
/// ConfigMap there).
pub const NFD_WORKER_CONF_PATH: &str = "/etc/kubernetes/node-feature-discovery/nfd-worker.conf";
/// NFD's image runs as nobody (its Dockerfile's `USER`); the chart's
/// `runAsNonRoot: true` needs a numeric non-root user in the image.
pub const NFD_USER: &str = "65534:65534";

fn labels(
    title: &str,
    description: &str,
    version: &str,
) -> std::collections::BTreeMap<String, String> {
    [
        ("org.opencontainers.image.title", title),
        ("org.opencontainers.image.description", description),
        ("org.opencontainers.image.version", version),
        ("org.opencontainers.image.licenses", "Apache-2.0"),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value.to_owned()))
    .collect()
}

/// NVIDIA's device plugin image: its four commands, its licence, the
/// environment its Dockerfile sets; `nvidia-device-plugin` the entrypoint.
pub fn device_plugin_spec(bin_dir: &Path, version: &str) -> ImageSpec {
    let mut files: Vec<FileSpec> = DEVICE_PLUGIN_BINARIES
        .iter()
        .map(|name| host_file(&format!("/usr/bin/{name}"), &bin_dir.join(name), 0o755, &[]))
        .collect();
    files.push(host_file(
        &format!("/licenses/{LICENSE}"),
        &bin_dir.join(LICENSE),
        0o644,
        &[],
    ));
    files.push(FileSpec::sticky_tmp());
    ImageSpec {
        name: DEVICE_PLUGIN_IMAGE.to_owned(),
        description: format!(
            "NVIDIA's device plugin and GPU feature discovery {version}, built from source (cdsim scenario 5)"
        ),
        entrypoint: vec!["nvidia-device-plugin".to_owned()],
        cmd: Vec::new(),
        env: vec![
            PATH.to_owned(),
            "NVIDIA_DISABLE_REQUIRE=true".to_owned(),
            "NVIDIA_VISIBLE_DEVICES=all".to_owned(),
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility".to_owned(),
        ],
        workdir: "/".to_owned(),
        labels: labels(
            DEVICE_PLUGIN_IMAGE,
            "NVIDIA device plugin for Kubernetes with GPU feature discovery (cdsim; local build)",
            version,
        ),
        imex_label: None,
        files,
        user: None,
    }
}

/// node-feature-discovery's image: its three commands and example worker
/// config, run as nobody, no entrypoint (the chart names the command).
pub fn nfd_spec(bin_dir: &Path, version: &str) -> ImageSpec {
    let mut files: Vec<FileSpec> = NFD_BINARIES
        .iter()
        .map(|name| host_file(&format!("/usr/bin/{name}"), &bin_dir.join(name), 0o755, &[]))
        .collect();
    files.push(host_file(
        NFD_WORKER_CONF_PATH,
        &bin_dir.join(NFD_WORKER_CONF),
        0o644,
        &[],
    ));
    ImageSpec {
        name: NFD_IMAGE.to_owned(),
        description: format!(
            "node-feature-discovery {version}, built from source (cdsim scenario 5)"
        ),
        entrypoint: Vec::new(),
        cmd: Vec::new(),
        env: vec![
            PATH.to_owned(),
            "GRPC_GO_LOG_SEVERITY_LEVEL=INFO".to_owned(),
        ],
        workdir: "/".to_owned(),
        labels: labels(
            NFD_IMAGE,
            "Kubernetes node-feature-discovery (cdsim; local build)",
            version,
        ),
        imex_label: None,
        files,
        user: Some(NFD_USER.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_plugin_image_has_every_command_the_chart_runs_in_usr_bin() {
        let spec = device_plugin_spec(Path::new("/b"), "v0.19.3");
        // The chart's commands: nvidia-device-plugin, gpu-feature-discovery, config-manager
        // (init and sidecar), mps-control-daemon.
        for name in DEVICE_PLUGIN_BINARIES {
            assert_eq!(
                spec.host_source(&format!("/usr/bin/{name}"))
                    .map(str::to_owned),
                Some(format!("/b/{name}"))
            );
        }
        assert_eq!(spec.entrypoint, ["nvidia-device-plugin"]);
        assert!(spec
            .env
            .iter()
            .any(|it| it.starts_with("PATH=") && it.contains("/usr/bin")));
        assert_eq!(spec.name, DEVICE_PLUGIN_IMAGE);
        assert_eq!(spec.user, None);
    }

    #[test]
    fn the_nfd_image_has_its_commands_config_and_a_non_root_user() {
        let spec = nfd_spec(Path::new("/n"), "v0.17.3");
        for name in NFD_BINARIES {
            assert_eq!(
                spec.host_source(&format!("/usr/bin/{name}"))
                    .map(str::to_owned),
                Some(format!("/n/{name}"))
            );
        }
        assert_eq!(
            spec.host_source(NFD_WORKER_CONF_PATH),
            Some("/n/nfd-worker.conf")
        );
        assert_eq!(spec.user.as_deref(), Some(NFD_USER));
        assert_eq!(spec.labels["org.opencontainers.image.version"], "v0.17.3");
    }

    #[test]
    fn neither_image_names_an_nvml_library() {
        for spec in [
            device_plugin_spec(Path::new("/b"), "v0.19.3"),
            nfd_spec(Path::new("/n"), "v0.17.3"),
        ] {
            assert!(
                spec.files
                    .iter()
                    .all(|it| !it.path.contains("libnvidia-ml")),
                "{}",
                spec.name
            );
        }
    }
}
