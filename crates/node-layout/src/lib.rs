//! The on-node staged tree shared by the stager and the NRI plugin.
//!
//! - [`paths`]: every path of the staged tree, on the host and inside containers.
//! - [`channels`]: the IMEX channel selector of the `imex-channels` annotation.
//! - [`env`]: the mock library's environment variables, which the plugin sets.
//! - [`proc_devices`]: the substitute `/proc/devices` and its major validation.
//! - [`facts`]: the node-facts report the stager's probe prints for xtask.
//! - [`xid`]: the Xid injection control file's format (parse, format, append).
//! - [`imex_bundle`]: the staged `nvidia-imex`, the NO GPU shim with the daemon appended.
//! - [`mig_state`]: the MIG state file's format (each GPU's MIG mode and partition) and a MIG
//!   device's UUID.
//! - [`mig_minors`]: the MIG capability table (`mig-minors`) and its minor formula.
//!
//! Pure: no I/O, so the stager and the plugin cannot disagree about a path.

pub mod channels;
pub mod env;
pub mod facts;
pub mod imex_bundle;
pub mod mig_minors;
pub mod mig_state;
pub mod paths;
pub mod proc_devices;
pub mod xid;
