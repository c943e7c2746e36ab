//! The injection options, from the command line or from the runtime's drop-in config.
//!
//! A runtime-launched plugin gets no arguments and no environment besides
//! `NRI_PLUGIN_*`; its options come as the Configure request's `config` string,
//! which containerd reads from `/etc/nri/conf.d/10-nvml-mock.conf`.
//! That file holds the same flags as the command line, whitespace- or
//! line-separated (`#` starts a comment line), for example
//! `--overlay-host-path=/var/lib/nvml-mock --node-name=worker1`.
//! A non-empty config replaces the command line's injection options; options
//! it does not name take their defaults.

use std::path::PathBuf;

use clap::Parser;
use node_layout::paths::{CONTAINER_ROOT, DEFAULT_HOST_ROOT};

use crate::plan::Policy;

/// The injection options.
#[derive(Debug, Clone, clap::Args)]
pub struct PolicyArgs {
    /// The staged tree on the host, mounted at the same path in the plugin's pod.
    #[arg(long, env = "NVML_MOCK_OVERLAY_HOST_PATH", default_value = DEFAULT_HOST_ROOT)]
    pub overlay_host_path: PathBuf,
    /// Where containers get the staged tree.
    #[arg(long, env = "NVML_MOCK_OVERLAY_MOUNT_PATH", default_value = CONTAINER_ROOT)]
    pub overlay_mount_path: PathBuf,
    /// This node's name, injected as NODE_NAME with the topology.
    #[arg(long, env = "NODE_NAME", default_value = "")]
    pub node_name: String,
    /// Pod annotation that opts out with `false`.
    #[arg(
        long,
        env = "NVML_MOCK_OPT_OUT_ANNOTATION",
        default_value = "nvml-mock.nvidia.com/inject"
    )]
    pub opt_out_annotation: String,
    /// Pod annotation that asks for GPU device nodes with `true`.
    #[arg(
        long,
        env = "NVML_MOCK_DEVICE_ANNOTATION",
        default_value = "nvml-mock.nvidia.com/devices"
    )]
    pub device_annotation: String,
    /// Pod annotation selecting IMEX channels (`true`, `0`, `0-3`, `0,5`).
    #[arg(
        long,
        env = "NVML_MOCK_IMEX_CHANNEL_ANNOTATION",
        default_value = "nvml-mock.nvidia.com/imex-channels"
    )]
    pub imex_channel_annotation: String,
    /// Namespaces never injected, comma-separated (kube-system always is).
    #[arg(
        long,
        env = "NVML_MOCK_EXCLUDED_NAMESPACES",
        default_value = "kube-system"
    )]
    pub excluded_namespaces: String,
}

impl PolicyArgs {
    /// Checks the options and turns them into a [`Policy`].
    pub fn into_policy(self) -> Result<Policy, String> {
        if !self.overlay_mount_path.is_absolute() {
            return Err(format!(
                "--overlay-mount-path {} must be an absolute path",
                self.overlay_mount_path.display()
            ));
        }
        Ok(Policy {
            overlay_host: self.overlay_host_path,
            overlay_mount: self.overlay_mount_path,
            node_name: self.node_name,
            opt_out_annotation: self.opt_out_annotation,
            device_annotation: self.device_annotation,
            imex_channel_annotation: self.imex_channel_annotation,
            excluded_namespaces: Policy::parse_excluded_namespaces(&self.excluded_namespaces),
        })
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "10-nvml-mock.conf",
    no_binary_name = true,
    disable_help_flag = true,
    disable_version_flag = true
)]
struct DropIn {
    #[command(flatten)]
    policy: PolicyArgs,
}

/// Parses a drop-in config; `Ok(None)` when it is empty.
pub fn parse_drop_in(config: &str) -> Result<Option<Policy>, String> {
    let tokens: Vec<&str> = config
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .flat_map(str::split_whitespace)
        .collect();
    if tokens.is_empty() {
        return Ok(None);
    }
    match DropIn::try_parse_from(tokens) {
        Ok(drop_in) => drop_in.policy.into_policy().map(Some),
        Err(err) => Err(format!(
            "invalid plugin config: {}",
            err.render().to_string().trim()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_configs_keep_the_command_line() {
        assert!(matches!(parse_drop_in(""), Ok(None)));
        assert!(matches!(parse_drop_in("\n# nothing\n  \n"), Ok(None)));
    }

    #[test]
    fn drop_in_flags() {
        let policy = parse_drop_in("# staged by the chart\n--overlay-host-path=/x --node-name worker1\n--excluded-namespaces=mokka\n")
            .expect("valid config")
            .expect("non-empty config");
        assert_eq!(policy.overlay_host, PathBuf::from("/x"));
        assert_eq!(policy.overlay_mount, PathBuf::from("/opt/nvml-mock"));
        assert_eq!(policy.node_name, "worker1");
        assert_eq!(
            policy.excluded_namespaces.into_iter().collect::<Vec<_>>(),
            ["kube-system", "mokka"]
        );
    }

    #[test]
    fn bad_drop_ins_say_what_is_wrong() {
        let unknown = parse_drop_in("--no-such-flag=1").err().unwrap_or_default();
        assert!(unknown.contains("--no-such-flag"), "{unknown}");
        let relative = parse_drop_in("--overlay-mount-path=opt")
            .err()
            .unwrap_or_default();
        assert_eq!(
            relative,
            "--overlay-mount-path opt must be an absolute path"
        );
    }
}
