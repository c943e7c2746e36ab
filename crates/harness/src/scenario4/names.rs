//! The names and paths scenario 4 and its modules agree on: NVIDIA's DRA
//! driver's release, namespace and objects, the scenario's own objects, and
//! where the mock stages what NVIDIA's software reads on a tray.

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
/// The workload pods' container (what scenario 4 execs in).
pub const WORKLOAD_CONTAINER: &str = "workload";
/// The label NVIDIA's daemon puts on its own pod.
pub const CLIQUE_LABEL: &str = "resource.nvidia.com/computeDomain.cliqueID";
/// Where the kubelet plugin keeps each domain's daemon config (bind-mounted at `/imexd`).
pub const DOMAINS_DIR: &str = "/var/lib/kubelet/plugins/compute-domain.nvidia.com/domains";
/// The staged driver root on each node.
pub const DRIVER_ROOT: &str = "/var/lib/nvml-mock/driver";
/// The staged substitute `/proc/devices` (the IMEX majors).
pub const PROC_DEVICES: &str = "/var/lib/nvml-mock/imex/proc-devices";
