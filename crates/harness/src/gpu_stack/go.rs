//! The Go builds: NVIDIA's device plugin commands (`go install` at the pin,
//! cgo on: go-nvml dlopens NVML) and NFD's (its module's `replace` of
//! `./api/nfd` rules out `go install`, so its tree and its `api/nfd` module
//! are copied from the module cache and built there, static, as its Makefile
//! does). Each into `<cache>/go/<name>-<version>`, once.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use xshell::{cmd, Shell};

use crate::scenario4::image::cached;

/// The device plugin module.
pub(super) const DEVICE_PLUGIN_MODULE: &str = "github.com/NVIDIA/k8s-device-plugin";
/// NFD's module.
pub(super) const NFD_MODULE: &str = "sigs.k8s.io/node-feature-discovery";
/// The commands NVIDIA's image holds in `/usr/bin` (its Dockerfile), which the chart runs.
pub const DEVICE_PLUGIN_BINARIES: [&str; 4] = [
    "nvidia-device-plugin",
    "gpu-feature-discovery",
    "config-manager",
    "mps-control-daemon",
];
/// The NFD commands the chart runs by default (the topology updater is off).
pub const NFD_BINARIES: [&str; 3] = ["nfd-master", "nfd-worker", "nfd-gc"];
/// NFD's example worker config, which its image holds (copied beside the binaries).
pub const NFD_WORKER_CONF: &str = "nfd-worker.conf";
/// The device plugin's licence, copied beside its binaries.
pub const LICENSE: &str = "LICENSE";

/// The device plugin's link flags, as its Makefile sets them (`-X` of the version).
pub(super) fn device_plugin_ldflags(version: &str) -> String {
    format!(
        "-s -w '-extldflags=-Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files' \
         -X {DEVICE_PLUGIN_MODULE}/internal/info.version={version}"
    )
}

/// NFD's link flags, as its Makefile sets them for a container build (host
/// paths under `/host-`).
pub(super) fn nfd_ldflags(version: &str) -> String {
    format!(
        "-s -w -extldflags=-static -X {NFD_MODULE}/pkg/version.version={version} \
         -X {NFD_MODULE}/pkg/utils/hostpath.pathPrefix=/host-"
    )
}

/// Fails with what to do when there is no `go` (only a build that is not cached needs it).
fn require_go() -> Result<()> {
    if xtask_support::tools::find_on_path("go").is_none() {
        anyhow::bail!(
            "the device plugin and node-feature-discovery are built from source with Go (1.25 or \
             later), and no `go` is on PATH: install Go (or use `nix develop`) and rerun"
        );
    }
    Ok(())
}

/// The module cache directory of `module@version` (`go mod download`).
pub(super) fn module_dir(sh: &Shell, module: &str, version: &str) -> Result<PathBuf> {
    require_go()?;
    let _env = [
        sh.push_env("GOFLAGS", ""),
        sh.push_env("GOTOOLCHAIN", "local"),
    ];
    let spec = format!("{module}@{version}");
    let json = cmd!(sh, "go mod download -json {spec}")
        .quiet()
        .read()
        .with_context(|| {
            format!("go mod download {spec} failed: is the Go module proxy reachable?")
        })?;
    let value: serde_json::Value =
        serde_json::from_str(&json).with_context(|| format!("go mod download {spec}: {json}"))?;
    value
        .get("Dir")
        .and_then(serde_json::Value::as_str)
        .map(PathBuf::from)
        .with_context(|| format!("go mod download {spec} names no Dir: {json}"))
}

/// The device plugin's commands, `go install`ed at `version`.
pub(super) fn device_plugin(sh: &Shell, cache: &Path, version: &str) -> Result<PathBuf> {
    cached(
        &cache.join("go"),
        &format!("k8s-device-plugin-{version}"),
        |out| {
            let source = module_dir(sh, DEVICE_PLUGIN_MODULE, version)?;
            eprintln!(
                "    go install {} @{version}",
                DEVICE_PLUGIN_BINARIES.join(", ")
            );
            let started = std::time::Instant::now();
            let _env = [
                sh.push_env("GOBIN", out),
                sh.push_env("GOFLAGS", ""),
                sh.push_env("GOTOOLCHAIN", "local"),
                sh.push_env("CGO_ENABLED", "1"),
            ];
            let ldflags = format!("-ldflags={}", device_plugin_ldflags(version));
            let packages: Vec<String> = DEVICE_PLUGIN_BINARIES
                .iter()
                .map(|it| format!("{DEVICE_PLUGIN_MODULE}/cmd/{it}@{version}"))
                .collect();
            cmd!(sh, "nice -n 10 go install {ldflags} {packages...}")
                .run()
                .context(
                    "go install of the device plugin failed: is the Go module proxy reachable?",
                )?;
            std::fs::copy(source.join(LICENSE), out.join(LICENSE))
                .context("cannot copy the device plugin's LICENSE")?;
            eprintln!("    built in {:.0} s", started.elapsed().as_secs_f64());
            Ok(())
        },
    )
}

/// NFD's tree with its `api/nfd` module in place (the `replace` target).
fn nfd_tree(sh: &Shell, cache: &Path, version: &str) -> Result<PathBuf> {
    cached(
        &cache.join("src"),
        &format!("node-feature-discovery-{version}"),
        |out| {
            let module = module_dir(sh, NFD_MODULE, version)?;
            let api = module_dir(sh, &format!("{NFD_MODULE}/api/nfd"), version)?;
            let api_out = out.join("api/nfd");
            cmd!(sh, "cp -R {module}/. {out}/").quiet().run()?;
            cmd!(sh, "mkdir -p {api_out}").quiet().run()?;
            cmd!(sh, "cp -R {api}/. {api_out}/").quiet().run()?;
            cmd!(sh, "chmod -R u+w {out}").quiet().run()?;
            Ok(())
        },
    )
}

/// NFD's commands and worker config, built from its tree at `version`.
pub(super) fn nfd(sh: &Shell, cache: &Path, version: &str) -> Result<PathBuf> {
    cached(
        &cache.join("go"),
        &format!("node-feature-discovery-{version}"),
        |out| {
            require_go()?;
            let tree = nfd_tree(sh, cache, version)?;
            eprintln!("    go build {} @{version}", NFD_BINARIES.join(", "));
            let started = std::time::Instant::now();
            let _dir = sh.push_dir(&tree);
            let _env = [
                sh.push_env("GOFLAGS", ""),
                sh.push_env("GOTOOLCHAIN", "local"),
                sh.push_env("CGO_ENABLED", "0"),
            ];
            let ldflags = nfd_ldflags(version);
            let out_arg = format!("{}/", out.display());
            let packages: Vec<String> = NFD_BINARIES
                .iter()
                .map(|it| format!("./cmd/{it}"))
                .collect();
            cmd!(
            sh,
            "nice -n 10 go build -tags osusergo,netgo -ldflags {ldflags} -o {out_arg} {packages...}"
        )
            .run()
            .context(
                "go build of node-feature-discovery failed: is the Go module proxy reachable?",
            )?;
            std::fs::copy(
                tree.join("deployment/components/worker-config/nfd-worker.conf.example"),
                out.join(NFD_WORKER_CONF),
            )
            .context("cannot copy NFD's example worker config")?;
            eprintln!("    built in {:.0} s", started.elapsed().as_secs_f64());
            Ok(())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_flags_stamp_the_pinned_versions_where_each_project_reads_them() {
        let dp = device_plugin_ldflags("v0.19.3");
        assert!(dp.contains("-X github.com/NVIDIA/k8s-device-plugin/internal/info.version=v0.19.3"));
        // go-nvml resolves NVML at run time: the link must not need it.
        assert!(dp.contains("--unresolved-symbols=ignore-in-object-files"));
        let nfd = nfd_ldflags("v0.17.3");
        assert!(nfd.contains("-X sigs.k8s.io/node-feature-discovery/pkg/version.version=v0.17.3"));
        assert!(nfd.contains("hostpath.pathPrefix=/host-"), "{nfd}");
    }
}
