//! Mock `libnvidia-ml.so.1`: the NVML C ABI over a YAML GPU profile, with this node's NVLink
//! fabric identity taken from the cluster topology.
//!
//! At the first `nvmlInit*` (reference count 0 → 1) the library reads the profile named by
//! `MOCK_NVML_CONFIG` (or, unset, the one in its own driver root) and, when `MOCK_TOPOLOGY_CONFIG` and `NODE_NAME` are set, overlays the
//! node's cluster uuid and clique id ([`config`]). Queries then answer from that snapshot until the
//! last `nvmlShutdown`. The parsed result is kept across shutdowns: the next first init
//! revalidates both files (one `stat` each, their bytes compared while a file's last change is
//! under [`config::RACY_WINDOW`] old) and parses again only what changed, so a rewritten
//! topology is seen at the next init and an unchanged one costs no parsing.
//!
//! Layers, top to bottom:
//! - [`ffi`]: the exported C functions; the only module with `unsafe`, every export behind
//!   `catch_unwind`.
//! - [`state`]: the reference count, the loaded snapshot and the device handles.
//! - [`query`]: pure functions from a profile device to NVML values and structs.
//! - [`abi`]: return codes and `#[repr(C)]` layouts, pinned by tests.
//! - [`config`]: reading and overlaying the profile and topology.
//! - [`locate`]: without the variables, the profile and topology beside the library's own
//!   driver root (`<root>/usr/lib64/libnvidia-ml.so.*` → `<root>/config/config.yaml`,
//!   `<root>/topology/topology.yaml`).
//!
//! Init failures: no profile to read (unset or unreadable `MOCK_NVML_CONFIG`) returns
//! `NVML_ERROR_DRIVER_NOT_LOADED`; an invalid profile, or an invalid topology under
//! `MOCK_NVML_STRICT`, returns `NVML_ERROR_UNKNOWN`. Either prints one `[MOCK_NVML ERROR]` line.
//!
//! The crate is a `cdylib` only: nothing links it as a Rust library (its clients `dlopen` it, as
//! they would NVIDIA's), so the release build gets link-time optimisation across it and its
//! dependencies. Its own tests and benchmark reach it the same way (`tests/`, `benches/`).

pub mod abi;
pub mod config;
#[allow(unsafe_code)]
pub mod ffi;
pub mod locate;
pub mod query;
pub mod state;

/// Serialises the unit tests that set the process environment and drive the process-wide state.
#[cfg(test)]
pub(crate) static ENV_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
