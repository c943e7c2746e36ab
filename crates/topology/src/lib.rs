//! The cluster topology document: which Kubernetes nodes form which NVLink
//! cliques of which domains, and so which fabric identity (cluster uuid,
//! clique id) their GPUs report through NVML.
//!
//! ```yaml
//! version: 1
//! domains:
//!   - name: demo-domain
//!     uuid: "00000000-0000-0000-0000-0000000000ab"
//!     cliques:
//!       - id: 0
//!         nodes: [worker, worker2]
//! ```
//!
//! - `parse` (feature `yaml`, on by default) reads and validates a document;
//!   every error names the offending entry (`domains[1].cliques[0].nodes[2]: …`).
//! - [`staged`] is the compact binary form the mock NVML library reads
//!   (`encode`/`decode`, validated again on decode), and the framing (magic,
//!   format version) the staged profile shares.
//! - [`Topology::resolve`] maps a node name to its [`Identity`], or `None`
//!   when the node is in no clique.
//! - [`demo`], [`rebind`] and [`kind_workers`] generate the demo's
//!   topologies; [`Topology::to_yaml`] and [`Topology::helm_values`] write
//!   them out; [`Layout`] generalises them to racks of trays, each rack
//!   its own domain split into cliques.
//!
//! This crate is pure: no I/O, no environment, no async.
//!
//! ```
//! let workers = topology::kind_workers("nvml-mock-compute-domain", 4);
//! let demo = topology::demo(&workers);
//! let parsed = topology::parse(&demo.to_yaml()).expect("generated documents are valid");
//! assert_eq!(parsed, demo);
//!
//! let identity = parsed.resolve("nvml-mock-compute-domain-worker3").expect("in a clique");
//! assert_eq!(identity.clique_id, 1);
//! assert_eq!(identity.cluster_uuid.to_string(), "00000000-0000-0000-0000-0000000000ab");
//! assert_eq!(parsed.resolve("nvml-mock-compute-domain-control-plane"), None);
//!
//! let err = topology::parse("version: 1\ndomains:\n  - uuid: \"12\"\n").expect_err("too short");
//! assert!(err.to_string().starts_with("domains[0].uuid: malformed uuid \"12\""));
//! ```

#![deny(missing_docs)]

mod document;
mod error;
mod generate;
mod layout;
mod render;
pub mod staged;
mod uuid;
#[cfg(feature = "yaml")]
mod yaml;

pub use crate::document::{Clique, Domain, Identity, Topology};
pub use crate::error::{Error, Result};
pub use crate::generate::{demo, kind_workers, rebind, DEMO_UUID, REBIND_CLIQUE, REBIND_UUID};
pub use crate::layout::{rack_uuid, Layout, LayoutError, Place, MAX_RACKS, MAX_TRAYS};
pub use crate::uuid::{ClusterUuid, UuidError};
#[cfg(feature = "yaml")]
pub use crate::yaml::parse;
