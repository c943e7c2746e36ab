//! The environment variables the mock library reads, which the NRI plugin sets in containers.
//!
//! One spelling for both sides: the plugin and the mock library (`crates/mock-nvml/src/config.rs`)
//! import these.

/// The staged profile's path (`driver/config/profile.bin` of the staged tree).
pub const MOCK_NVML_CONFIG: &str = "MOCK_NVML_CONFIG";
/// The staged topology's path (`driver/topology/topology.bin`).
pub const MOCK_TOPOLOGY_CONFIG: &str = "MOCK_TOPOLOGY_CONFIG";
/// This node's name, which selects its identity from the topology.
pub const NODE_NAME: &str = "NODE_NAME";
/// Any non-empty value makes an invalid topology fail init.
pub const MOCK_NVML_STRICT: &str = "MOCK_NVML_STRICT";
/// Overrides the Xid injection control file's path (`driver/config/xid-injections`).
pub const MOCK_NVML_XID_FILE: &str = "MOCK_NVML_XID_FILE";
/// Overrides the MIG state file's path (`driver/config/mig-state`, [`crate::mig_state`]).
pub const MOCK_NVML_MIG_STATE: &str = "MOCK_NVML_MIG_STATE";
/// The directory holding the GPU device nodes the mock library looks for (`nvidia<minor>`);
/// unset or empty: `/dev`. Tests point it at a temporary directory, so they need no privileges.
pub const MOCK_NVML_DEV_ROOT: &str = "MOCK_NVML_DEV_ROOT";
/// [`MOCK_NVML_DEV_ROOT`]'s default: where a process finds its device nodes.
pub const DEFAULT_DEV_ROOT: &str = "/dev";
