//! MIG devices in a container's request, resolved as the real driver exposes them in a
//! container: the parent GPU's node and the two capability nodes of the device's GPU instance
//! and compute instance (`/dev/nvidia-caps/nvidia-cap<N>`, `N` from the staged `mig-minors`).
//!
//! Pure. A request names a MIG device as NVIDIA's toolkit reads it: `MIG-<uuid>` (the mock
//! library's UUID, [`mig_state::mig_uuid`], looked up in the node's MIG state file) or
//! `<gpu>:<gi>:<ci>` (host GPU index, GPU instance id, compute instance id). Only a device that
//! exists in the partition, on a GPU whose MIG mode is enabled, resolves.

use std::collections::BTreeMap;
use std::fmt;

use node_layout::mig_minors;
use node_layout::mig_state::{self, MigState, Mode};

/// One MIG device as a request names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum MigId {
    /// `MIG-<uuid>`.
    Uuid(String),
    /// `<gpu>:<gi>:<ci>`: host GPU index, GPU instance id, compute instance id.
    Indices {
        /// The GPU's host index.
        gpu: u32,
        /// The GPU instance id.
        gi: u32,
        /// The compute instance id.
        ci: u32,
    },
}

impl MigId {
    /// `MIG-<uuid>` or `<gpu>:<gi>:<ci>`; `None` for anything else.
    pub fn parse(text: &str) -> Option<MigId> {
        if text.len() > 4 && text[..4].eq_ignore_ascii_case("MIG-") {
            return Some(MigId::Uuid(text.to_owned()));
        }
        let mut parts = text.split(':').map(|part| {
            (!part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit()))
                .then(|| part.parse::<u32>().ok())
                .flatten()
        });
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(Some(gpu)), Some(Some(gi)), Some(Some(ci)), None) => {
                Some(MigId::Indices { gpu, gi, ci })
            }
            _ => None,
        }
    }
}

impl fmt::Display for MigId {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MigId::Uuid(uuid) => out.write_str(uuid),
            MigId::Indices { gpu, gi, ci } => write!(out, "{gpu}:{gi}:{ci}"),
        }
    }
}

/// What the staged tree says about MIG: the partition and the capability table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigView {
    /// The node's MIG state file.
    pub state: MigState,
    /// The staged `mig-minors` ([`mig_minors::parse`]).
    pub minors: BTreeMap<String, u32>,
}

/// A staged GPU as MIG resolution needs it: its UUID and device minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parent<'a> {
    /// Its `GPU-…` UUID.
    pub uuid: &'a str,
    /// `N` of its `/dev/nvidiaN`.
    pub minor: u32,
}

/// What a resolved MIG device gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigGrant {
    /// The parent GPU's device minor.
    pub gpu_minor: u32,
    /// The GPU instance's and compute instance's capability minors.
    pub caps: [u32; 2],
}

/// Resolves `id` against the partition; `parent` gives a host GPU index's staged GPU. The error
/// is the warning to log.
pub fn resolve<'a>(
    id: &MigId,
    parent: impl Fn(u32) -> Option<Parent<'a>>,
    view: &MigView,
) -> Result<MigGrant, String> {
    let live = view
        .state
        .gpus
        .iter()
        .filter(|gpu| gpu.current == Mode::Enabled)
        .filter_map(|gpu| Some((gpu, parent(gpu.gpu)?)))
        .flat_map(|(gpu, parent)| {
            gpu.instances.iter().flat_map(move |gi| {
                gi.compute
                    .iter()
                    .map(move |ci| (gpu.gpu, parent, gi, ci.id))
            })
        });
    let mut found = live.filter(|(host, parent, gi, ci)| match id {
        MigId::Uuid(uuid) => mig_state::mig_uuid(parent.uuid, gi, *ci).eq_ignore_ascii_case(uuid),
        MigId::Indices {
            gpu,
            gi: gi_id,
            ci: ci_id,
        } => host == gpu && gi.id == *gi_id && ci == ci_id,
    });
    let Some((_, parent, gi, ci)) = found.next() else {
        return Err(format!(
            "MIG device {id} is not in the node's MIG partition; not injected"
        ));
    };
    let cap = |name: String| view.minors.get(&name).copied();
    match (
        cap(mig_minors::gi_name(parent.minor, gi.id)),
        cap(mig_minors::ci_name(parent.minor, gi.id, ci)),
    ) {
        (Some(gi_cap), Some(ci_cap)) => Ok(MigGrant {
            gpu_minor: parent.minor,
            caps: [gi_cap, ci_cap],
        }),
        _ => Err(format!(
            "MIG device {id}: its capabilities are not in the staged mig-minors; not injected"
        )),
    }
}

#[cfg(test)]
#[path = "mig_tests.rs"]
mod tests;
