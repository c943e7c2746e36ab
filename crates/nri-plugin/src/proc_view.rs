//! What the NVIDIA driver shows under `/proc`, in injected containers.
//!
//! NVIDIA's node software reads files the kernel module makes: the device plugin's MIG devices
//! need `/proc/driver/nvidia-caps/mig-minors`, the DRA driver's MIG CDI specs the capability
//! files under `/proc/driver/nvidia/capabilities` and the `nvidia-caps` major in
//! `/proc/devices`. A container's `/proc` is the kernel's, which has no NVIDIA driver, and the
//! runtime refuses a mount below `/proc` in a container's spec (runc's `checkProcMount`). So the
//! plugin adds OCI `createContainer` hooks: the runtime runs them in the container's mount
//! namespace once its mounts (its `/proc` among them) are made and before it enters its root,
//! with the root as working directory (runc's `prepareRootfs`); each bind-mounts, read-only, a
//! staged file over the kernel's (`mount -o bind,ro <staged> proc/<name>`, through `sh` so that
//! a mount that fails leaves the kernel's file and the container is created all the same: the
//! plugin never fails a container because of the filesystem).
//!
//! - `/proc/driver`: the staged `driver/proc/driver` (`mig-minors`, the capability files), over
//!   the kernel's directory, which `proc_root_init` always makes; what other drivers show
//!   there is hidden in the container.
//! - `/proc/devices`: the staged substitute (the node's list with the NVIDIA majors).
//!
//! The pod's opt-out annotation leaves the container alone. Pure.

use std::path::Path;

use node_layout::paths::{Layout, PROC_DEVICES, PROC_DRIVER};

use crate::proto::{Hook, Hooks, OptionalInt};

/// The program each hook runs, on the node: the shell, which runs util-linux's `mount` (both in
/// kind's node images).
pub const HOOK_PROGRAM: &str = "/bin/sh";

/// The hook's script: `$1` bound read-only over `$2`; a failure is reported on stderr (runc
/// logs it) and ignored.
pub const BIND_SCRIPT: &str =
    "mount -o bind,ro \"$1\" \"$2\" || echo \"nvml-mock: $2 left as the kernel's\" >&2; exit 0";

/// How long a hook may take before the runtime fails the container.
pub const HOOK_TIMEOUT_SECONDS: i64 = 10;

/// What is staged under the host's staged root (`overlay_host`) of the driver's `/proc`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Present {
    /// `driver/proc/driver` is a directory.
    pub proc_driver: bool,
    /// `imex/proc-devices` is a file.
    pub proc_devices: bool,
}

/// The hooks for a container of this node, from what is staged: none when nothing is.
pub fn hooks(overlay_host: &Path, present: Present) -> Option<Hooks> {
    let layout = Layout::new(overlay_host.to_path_buf());
    let mut create_container = Vec::new();
    if present.proc_driver {
        create_container.push(bind_over(&layout.proc_driver_dir(), PROC_DRIVER));
    }
    if present.proc_devices {
        create_container.push(bind_over(&layout.proc_devices(), PROC_DEVICES));
    }
    (!create_container.is_empty()).then_some(Hooks { create_container })
}

/// [`BIND_SCRIPT`] with `<source>` and `proc/<name>`: relative to the container's root, the
/// hook's working directory.
fn bind_over(source: &Path, target: &str) -> Hook {
    Hook {
        path: HOOK_PROGRAM.to_owned(),
        args: vec![
            "sh".to_owned(),
            "-c".to_owned(),
            BIND_SCRIPT.to_owned(),
            "sh".to_owned(),
            source.to_string_lossy().into_owned(),
            target.trim_start_matches('/').to_owned(),
        ],
        env: Vec::new(),
        timeout: Some(OptionalInt {
            value: HOOK_TIMEOUT_SECONDS,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "/var/lib/nvml-mock";

    #[test]
    fn each_staged_proc_file_is_bound_over_the_kernels_relative_to_the_root() {
        let present = Present {
            proc_driver: true,
            proc_devices: true,
        };
        let hooks = hooks(Path::new(ROOT), present).expect("hooks");
        let argv: Vec<Vec<&str>> = hooks
            .create_container
            .iter()
            .map(|hook| {
                assert_eq!(hook.path, HOOK_PROGRAM);
                assert_eq!(hook.timeout, Some(OptionalInt { value: 10 }));
                hook.args.iter().map(String::as_str).collect()
            })
            .collect();
        assert_eq!(
            argv,
            [
                vec![
                    "sh",
                    "-c",
                    BIND_SCRIPT,
                    "sh",
                    "/var/lib/nvml-mock/driver/proc/driver",
                    "proc/driver"
                ],
                vec![
                    "sh",
                    "-c",
                    BIND_SCRIPT,
                    "sh",
                    "/var/lib/nvml-mock/imex/proc-devices",
                    "proc/devices"
                ],
            ]
        );
    }

    #[test]
    fn the_script_binds_and_never_fails() {
        let dir = std::env::temp_dir().join(format!("proc-view-{}", std::process::id()));
        // Without privileges (or a target) the mount fails: the script still succeeds.
        let out = std::process::Command::new(HOOK_PROGRAM)
            .args(["-c", BIND_SCRIPT, "sh", "/nonexistent-source"])
            .arg(dir.join("absent"))
            .output()
            .expect("sh");
        assert!(out.status.success(), "{out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("left as the kernel's"),
            "{out:?}"
        );
    }

    #[test]
    fn nothing_staged_adds_no_hook() {
        let devices = Present {
            proc_devices: true,
            ..Present::default()
        };
        assert_eq!(
            hooks(Path::new(ROOT), devices).map(|it| it.create_container.len()),
            Some(1)
        );
        assert_eq!(hooks(Path::new(ROOT), Present::default()), None);
    }
}
