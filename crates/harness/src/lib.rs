//! The demo as a library: the kind cluster, Kubernetes access, the
//! scenarios and the run report, behind two seams.
//!
//! - [`runner::Runner`]: every external command (docker, kind, helm) goes
//!   through it; unit tests script a [`runner::FakeRunner`].
//! - [`scenarios::Workload`]: the demo workload pods; [`workload::KubeWorkload`]
//!   reaches them through kube-rs, the scenarios' tests put simulations behind it.
//!
//! Pure planning ([`plan`], [`fabric`], [`imex`], [`workers`]) is separate from
//! I/O ([`cluster`], [`k8s`]). `cargo xtask` (the `xtask` crate) parses the
//! command line, sequences these into `up`, `demo` and `ci`, and owns Ctrl-C.
//!
//! Part of xtask's side of the workspace (orchestration, not a library for
//! others): errors are `anyhow` with context, as in xtask.

pub mod apiserver;
pub mod cluster;
pub mod fabric;
pub mod gpu_source;
pub mod gpu_stack;
pub mod imex;
pub mod inject;
pub mod k8s;
pub mod kind_config;
pub mod kind_images;
pub mod names;
pub mod plan;
pub mod profiles;
pub mod reach;
pub mod registry;
pub mod report;
pub mod restart;
pub mod runner;
pub mod scenario4;
pub mod scenario5;
pub mod scenarios;
pub mod tracker;
pub mod workers;
pub mod workload;

pub use xtask_support::{dirs, project_root};
