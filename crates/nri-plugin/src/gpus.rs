//! Which GPUs an allocation gave a container, read as NVIDIA's container toolkit reads it, and
//! resolved to device minors through the staged profile.
//!
//! Pure. The sources, as the device plugin and the DRA driver write them:
//! - the `NVIDIA_VISIBLE_DEVICES` environment variable (its last entry): unset, empty or `void`
//!   says nothing; `none` asks for no GPU (the control nodes only); `all` for every GPU; anything
//!   else is a comma list of GPU indices or UUIDs;
//! - the device plugin's `volume-mounts` strategy: a mount at
//!   `/var/run/nvidia-container-devices/<index|uuid|all>` per GPU (the variable then names that
//!   directory, and says nothing itself);
//! - CDI device names of kind `nvidia.com/gpu` (`nvidia.com/gpu=<index|uuid|all>`) or
//!   `nvidia.com/mig-<profile>`, from the container's CDI devices and from its `cdi.k8s.io/*`
//!   annotations (comma lists of names).
//!
//! The sources together: `all` in any is every GPU, else the union of what they list.
//! A MIG device (`MIG-<uuid>`, `<gpu>:<gi>:<ci>`: [`crate::mig`]) grants its parent GPU's node
//! and its two capability nodes. Unknown UUIDs, MIG devices and indices past the staged GPU
//! count are logged and left out.

use std::collections::{BTreeMap, BTreeSet};

use crate::mig::{self, MigId, MigView, Parent};
use crate::proto::Container;

/// The toolkit's variable naming a container's GPUs.
pub const VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";
/// The CDI kind of NVIDIA's GPUs.
pub const CDI_KIND: &str = "nvidia.com/gpu";
/// The prefix of the CDI kinds of NVIDIA's MIG devices (`nvidia.com/mig-1g.10gb`).
pub const CDI_MIG_KIND_PREFIX: &str = "nvidia.com/mig-";
/// Where the device plugin's `volume-mounts` strategy mounts one empty file per GPU
/// (`<root>/<index|uuid|all>`), `NVIDIA_VISIBLE_DEVICES` then naming this directory.
pub const VOLUME_MOUNTS_ROOT: &str = "/var/run/nvidia-container-devices";
/// The prefix of the annotations that carry CDI device names.
pub const CDI_ANNOTATION_PREFIX: &str = "cdi.k8s.io/";

/// What a container's allocation asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuRequest {
    /// Nothing: not a GPU allocation (today's rules apply: the device annotation decides).
    Unspecified,
    /// `none`: no GPU, the driver's control nodes only.
    NoGpus,
    /// `all`: every GPU.
    All,
    /// These GPUs.
    Listed(Vec<GpuId>),
}

/// One GPU as a request names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum GpuId {
    /// Its NVML index on the host.
    Index(u32),
    /// Its `GPU-…` UUID.
    Uuid(String),
    /// A MIG device.
    Mig(MigId),
    /// Anything else (a typo): logged, not injected.
    Unsupported(String),
}

impl GpuId {
    fn parse(text: &str) -> GpuId {
        if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
            if let Ok(index) = text.parse() {
                return GpuId::Index(index);
            }
        }
        if text.len() > 4 && text[..4].eq_ignore_ascii_case("GPU-") {
            return GpuId::Uuid(text.to_owned());
        }
        match MigId::parse(text) {
            Some(id) => GpuId::Mig(id),
            None => GpuId::Unsupported(text.to_owned()),
        }
    }
}

/// One item of a list: `all` or a GPU.
enum Item {
    All,
    Gpu(GpuId),
}

/// Reads the container's request from its environment, volume mounts, CDI devices and
/// annotations.
pub fn request(container: &Container) -> GpuRequest {
    let mut items = Vec::new();
    let mut none = false;
    match visible_devices(&container.env).map(str::trim) {
        None | Some("" | "void") => (),
        Some("none") => none = true,
        // The device plugin's volume-mounts strategy: the list is in the mounts.
        Some(VOLUME_MOUNTS_ROOT) => (),
        Some(list) => items.extend(list_items(list)),
    }
    items.extend(container.mounts.iter().filter_map(|mount| {
        let device = mount
            .destination
            .strip_prefix(VOLUME_MOUNTS_ROOT)?
            .strip_prefix('/')?;
        Some(item(device))
    }));
    let annotated = container
        .annotations
        .iter()
        .filter(|(key, _)| key.starts_with(CDI_ANNOTATION_PREFIX))
        .flat_map(|(_, value)| value.split(','));
    let cdi_names = container
        .cdi_devices
        .iter()
        .map(|device| device.name.as_str())
        .chain(annotated);
    items.extend(cdi_names.filter_map(cdi_item));
    if items.iter().any(|item| matches!(item, Item::All)) {
        return GpuRequest::All;
    }
    let mut ids: Vec<GpuId> = items
        .into_iter()
        .filter_map(|item| match item {
            Item::All => None,
            Item::Gpu(id) => Some(id),
        })
        .collect();
    ids.sort();
    ids.dedup();
    match (ids.is_empty(), none) {
        (false, _) => GpuRequest::Listed(ids),
        (true, true) => GpuRequest::NoGpus,
        (true, false) => GpuRequest::Unspecified,
    }
}

/// The last `NVIDIA_VISIBLE_DEVICES=` entry's value.
fn visible_devices(env: &[String]) -> Option<&str> {
    env.iter()
        .rev()
        .filter_map(|entry| entry.split_once('='))
        .find(|(key, _)| *key == VISIBLE_DEVICES)
        .map(|(_, value)| value)
}

fn list_items(list: &str) -> impl Iterator<Item = Item> + '_ {
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(item)
}

fn item(text: &str) -> Item {
    match text {
        "all" => Item::All,
        id => Item::Gpu(GpuId::parse(id)),
    }
}

/// A CDI name of kind `nvidia.com/gpu` or `nvidia.com/mig-…`, as an item; other kinds are not
/// ours.
fn cdi_item(name: &str) -> Option<Item> {
    let (kind, device) = name.trim().split_once('=')?;
    (kind == CDI_KIND || kind.starts_with(CDI_MIG_KIND_PREFIX)).then(|| item(device))
}

/// One GPU of the staged profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedGpu {
    /// Its NVML index on the host.
    pub index: u32,
    /// Its UUID.
    pub uuid: String,
    /// `N` of its `/dev/nvidiaN`.
    pub minor: u32,
}

/// Which GPU nodes a request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Granted {
    /// Every staged GPU node.
    All,
    /// The nodes of these minors (possibly none: `none`, or nothing resolved).
    Minors(BTreeSet<u32>),
}

/// A request resolved against the staged tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// The GPU nodes; `None` for [`GpuRequest::Unspecified`].
    pub granted: Option<Granted>,
    /// The capability minors of the requested MIG devices (`/dev/nvidia-caps/nvidia-cap<N>`).
    pub caps: BTreeSet<u32>,
    /// What could not be resolved, to log.
    pub warnings: Vec<String>,
}

/// Resolves a request against the staged GPUs and MIG partition; what cannot be resolved
/// becomes a warning.
pub fn resolve(request: &GpuRequest, gpus: &[StagedGpu], mig: &MigView) -> Resolved {
    let ids = match request {
        GpuRequest::Unspecified => return Resolved::default(),
        GpuRequest::All => {
            return Resolved {
                granted: Some(Granted::All),
                ..Resolved::default()
            }
        }
        GpuRequest::NoGpus => Vec::new(),
        GpuRequest::Listed(ids) => ids.iter().collect(),
    };
    let by_uuid: BTreeMap<String, u32> = gpus
        .iter()
        .map(|gpu| (gpu.uuid.to_ascii_lowercase(), gpu.minor))
        .collect();
    let parent = |index: u32| {
        let gpu = gpus.iter().find(|gpu| gpu.index == index)?;
        Some(Parent {
            uuid: &gpu.uuid,
            minor: gpu.minor,
        })
    };
    let mut minors = BTreeSet::new();
    let mut resolved = Resolved::default();
    for id in ids {
        let minor = match id {
            GpuId::Index(index) => parent(*index).map(|gpu| gpu.minor).ok_or_else(|| {
                format!(
                    "GPU index {index} is past the {} staged GPUs; not injected",
                    gpus.len()
                )
            }),
            GpuId::Uuid(uuid) => by_uuid
                .get(&uuid.to_ascii_lowercase())
                .copied()
                .ok_or_else(|| format!("GPU {uuid} is not in the staged profile; not injected")),
            GpuId::Mig(id) => mig::resolve(id, parent, mig).map(|grant| {
                resolved.caps.extend(grant.caps);
                grant.gpu_minor
            }),
            GpuId::Unsupported(text) => Err(format!(
                "GPU {text:?} is neither an index, a GPU UUID nor a MIG device; not injected"
            )),
        };
        match minor {
            Ok(minor) => {
                minors.insert(minor);
            }
            Err(warning) => resolved.warnings.push(warning),
        }
    }
    resolved.granted = Some(Granted::Minors(minors));
    resolved
}

#[cfg(test)]
#[path = "gpus_tests.rs"]
mod tests;
