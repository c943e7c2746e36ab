//! Scenario 5's DRA rows, the pure part: what NVIDIA's GPU kubelet plugin
//! must publish for a tray staged with a profile (a device `gpu-<minor>` per
//! GPU with the profile's attributes and memory), the chart values that turn
//! GPU resources and the plugin's NVML health check on, the ResourceClaim with
//! a CEL selector on `productName` and the pod using it, the readers of
//! ResourceSlices and claims, and the API server's feature gates from its
//! metrics.

use std::collections::BTreeMap;

use anyhow::{Context as _, Result};
use nvml_profile::{Architecture, Brand, Device, Profile};
use serde_json::{json, Value};

use crate::k8s::idle_pod::{Asks, IdlePod, IDLE};

/// The DRA driver's name, its ResourceSlices' `spec.driver` and its DeviceClass.
pub const DRIVER: &str = "gpu.nvidia.com";
/// The taint key the plugin gives a device on an Xid (value: the Xid).
pub const XID_TAINT: &str = "gpu.nvidia.com/xid";
/// The plugin's feature gate for NVML health events (alpha, off by default).
pub const HEALTH_GATE: &str = "NVMLDeviceHealthCheck";
/// The cluster's feature gate for device taints (alpha in Kubernetes 1.34).
pub const TAINTS_GATE: &str = "DRADeviceTaints";
/// The standard attribute holding a device's PCI bus id.
pub const PCI_BUS_ID: &str = "resource.kubernetes.io/pciBusID";

/// One attribute value, as a ResourceSlice carries it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Attr {
    /// `{string: …}`.
    String(String),
    /// `{version: …}` (semver).
    Version(String),
    /// `{int: …}`.
    Int(i64),
    /// `{bool: …}`.
    Bool(bool),
}

impl std::fmt::Display for Attr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Attr::String(it) => write!(f, "{it}"),
            Attr::Version(it) => write!(f, "v{it}"),
            Attr::Int(it) => write!(f, "{it}"),
            Attr::Bool(it) => write!(f, "{it}"),
        }
    }
}

/// One device as a ResourceSlice lists it, or as the profile says it must be.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SliceDevice {
    /// The attributes, by their name in the slice (the driver's own unqualified).
    pub attributes: BTreeMap<String, Attr>,
    /// Capacity `memory`, in bytes.
    pub memory: Option<u128>,
    /// Its taints, as `key=value:effect`.
    pub taints: Vec<String>,
}

/// The chart values for GPU resources: `base` (scenario 4's values, compute
/// domains on the staged driver root) with GPU resources on, the chart's
/// override for them, and the plugin's NVML health check gate.
pub fn chart_values(base: &str) -> Result<String> {
    let mut values: Value =
        serde_yaml::from_str(base).context("scenario 4's chart values are not YAML")?;
    values["resources"]["gpus"]["enabled"] = json!(true);
    values["gpuResourcesEnabledOverride"] = json!(true);
    values["featureGates"][HEALTH_GATE] = json!(true);
    serde_yaml::to_string(&values).context("rendering the chart values")
}

/// NVIDIA's go-nvlib name of a brand (`GetBrandAsString`).
fn brand_name(brand: Brand) -> &'static str {
    match brand {
        Brand::Unknown => "Unknown",
        Brand::Quadro => "Quadro",
        Brand::Tesla => "Tesla",
        Brand::Nvs => "NVS",
        Brand::Grid => "Grid",
        Brand::Geforce => "GeForce",
        Brand::Titan => "Titan",
        Brand::NvidiaVapps => "NvidiaVApps",
        Brand::NvidiaVpc => "NvidiaVPC",
        Brand::NvidiaVcs => "NvidiaVCS",
        Brand::NvidiaVws => "NvidiaVWS",
        Brand::NvidiaCloudGaming => "NvidiaCloudGaming",
        Brand::QuadroRtx => "QuadroRTX",
        Brand::NvidiaRtx => "NvidiaRTX",
        Brand::Nvidia => "Nvidia",
        Brand::GeforceRtx => "GeForceRTX",
        Brand::TitanRtx => "TitanRTX",
    }
}

/// NVIDIA's go-nvlib name of an architecture (`GetArchitectureAsString`).
fn architecture_name(architecture: Architecture) -> &'static str {
    match architecture {
        Architecture::Kepler => "Kepler",
        Architecture::Maxwell => "Maxwell",
        Architecture::Pascal => "Pascal",
        Architecture::Volta => "Volta",
        Architecture::Turing => "Turing",
        Architecture::Ampere => "Ampere",
        Architecture::Ada => "Ada Lovelace",
        Architecture::Hopper => "Hopper",
        Architecture::Blackwell => "Blackwell",
        Architecture::Rubin => "Rubin",
        Architecture::Unknown => "Unknown",
    }
}

/// A dotted version as semver prints it: missing parts 0, leading zeros dropped.
fn semver(text: &str) -> String {
    let mut parts: Vec<String> = text
        .split('.')
        .map(|part| {
            part.parse::<u64>()
                .map_or(part.to_owned(), |n| n.to_string())
        })
        .collect();
    parts.resize(parts.len().max(3), "0".to_owned());
    parts.join(".")
}

/// The device name the plugin gives a full GPU.
pub fn device_name(device: &Device) -> String {
    format!("gpu-{}", device.minor_number)
}

/// What the plugin must publish for each GPU of `profile`, by device name.
pub fn expected_devices(profile: &Profile) -> BTreeMap<String, SliceDevice> {
    let system = profile.system();
    let cuda = system.cuda_driver_version;
    let cuda = format!("{}.{}", cuda / 1000, (cuda % 1000) / 10);
    profile
        .devices()
        .iter()
        .map(|device| {
            let cc = &device.compute_capability;
            let attributes = [
                ("type", Attr::String("gpu".to_owned())),
                ("uuid", Attr::String(device.uuid.clone())),
                ("productName", Attr::String(device.name.clone())),
                ("brand", Attr::String(brand_name(device.brand).to_owned())),
                (
                    "architecture",
                    Attr::String(architecture_name(device.architecture).to_owned()),
                ),
                (
                    "cudaComputeCapability",
                    Attr::Version(semver(&format!("{}.{}", cc.major, cc.minor))),
                ),
                (
                    "driverVersion",
                    Attr::Version(semver(&system.driver_version)),
                ),
                ("cudaDriverVersion", Attr::Version(semver(&cuda))),
                (PCI_BUS_ID, Attr::String(device.pci_bus_id.to_string())),
            ]
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect();
            let want = SliceDevice {
                attributes,
                memory: Some(u128::from(device.memory.total)),
                taints: Vec::new(),
            };
            (device_name(device), want)
        })
        .collect()
}

/// A Kubernetes quantity in bytes (plain, binary `Ki`…`Ei` or decimal `k`…`E`
/// suffixes; integers only, as a memory capacity is).
pub fn quantity_bytes(text: &str) -> Option<u128> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(split);
    let number: u128 = digits.parse().ok()?;
    let factor: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        _ => return None,
    };
    number.checked_mul(factor)
}

fn attr(value: &Value) -> Option<Attr> {
    if let Some(it) = value["string"].as_str() {
        return Some(Attr::String(it.to_owned()));
    }
    if let Some(it) = value["version"].as_str() {
        return Some(Attr::Version(it.to_owned()));
    }
    if let Some(it) = value["int"].as_i64() {
        return Some(Attr::Int(it));
    }
    value["bool"].as_bool().map(Attr::Bool)
}

/// The devices `slices` (ResourceSlice objects as JSON) publish for driver
/// [`DRIVER`] on `node`, by device name.
pub fn node_devices(slices: &[Value], node: &str) -> BTreeMap<String, SliceDevice> {
    slices
        .iter()
        .filter(|slice| slice["spec"]["driver"] == DRIVER && slice["spec"]["nodeName"] == node)
        .flat_map(|slice| {
            slice["spec"]["devices"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|device| {
            let name = device["name"].as_str()?.to_owned();
            let attributes = device["attributes"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(key, value)| Some((key.clone(), attr(value)?)))
                .collect();
            let memory = device["capacity"]["memory"]["value"]
                .as_str()
                .and_then(quantity_bytes);
            let taints = device["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|taint| {
                    let text = |key: &str| taint[key].as_str().unwrap_or_default().to_owned();
                    format!("{}={}:{}", text("key"), text("value"), text("effect"))
                })
                .collect();
            Some((
                name,
                SliceDevice {
                    attributes,
                    memory,
                    taints,
                },
            ))
        })
        .collect()
}

/// What differs between the expected devices and the published ones (only
/// the expected attributes are compared; others the plugin adds are allowed).
pub fn device_mismatches(
    want: &BTreeMap<String, SliceDevice>,
    got: &BTreeMap<String, SliceDevice>,
) -> Vec<String> {
    let mut off = Vec::new();
    for (name, expected) in want {
        let Some(seen) = got.get(name) else {
            off.push(format!("{name} not published"));
            continue;
        };
        for (key, value) in &expected.attributes {
            match seen.attributes.get(key) {
                Some(it) if it == value => (),
                Some(it) => off.push(format!("{name} {key}: want {value}, got {it}")),
                None => off.push(format!("{name} {key}: want {value}, missing")),
            }
        }
        if seen.memory != expected.memory {
            off.push(format!(
                "{name} memory: want {:?} bytes, got {:?}",
                expected.memory, seen.memory
            ));
        }
    }
    off.extend(
        got.keys()
            .filter(|name| !want.contains_key(*name))
            .map(|name| format!("{name} published, not in the profile")),
    );
    off
}

/// A device's attributes as one line, `key=value` in name order.
pub fn attributes_line(device: &SliceDevice) -> String {
    let mut parts: Vec<String> = device
        .attributes
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    if let Some(memory) = device.memory {
        parts.push(format!("memory={memory}"));
    }
    parts.join(" ")
}

/// The CEL selector choosing the profile's product.
pub fn product_selector(product: &str) -> String {
    format!(
        "device.attributes[\"{DRIVER}\"].productName == {}",
        json!(product)
    )
}

/// A ResourceClaim (resource.k8s.io/v1) for one GPU of the product.
pub fn claim(name: &str, ns: &str, product: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"devices": {"requests": [{
            "name": "gpu",
            "exactly": {
                "deviceClassName": DRIVER,
                "allocationMode": "ExactCount",
                "count": 1,
                "selectors": [{"cel": {"expression": product_selector(product)}}],
            },
        }]}},
    })
}

/// A pod on `node` using the claim `claim` ([`IdlePod`]).
pub fn claim_pod(name: &str, ns: &str, node: &str, image: &str, claim: &str) -> Value {
    IdlePod {
        name,
        namespace: ns,
        label: ("app.kubernetes.io/name", "cdsim-s5-dra"),
        node,
        image,
        container: "gpu",
        script: IDLE,
        asks: Asks::Claim { name: "gpu", claim },
    }
    .manifest()
}

/// A claim's allocated devices of [`DRIVER`], as (pool, device).
pub fn allocated(claim: &Value) -> Vec<(String, String)> {
    claim["status"]["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|result| result["driver"] == DRIVER)
        .filter_map(|result| {
            Some((
                result["pool"].as_str()?.to_owned(),
                result["device"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

/// Whether the component whose `/metrics` is `metrics` has feature gate
/// `gate` on (`kubernetes_feature_enabled{name="<gate>",…} 1`); `None`: not listed.
pub fn feature_enabled(metrics: &str, gate: &str) -> Option<bool> {
    let name = format!("name=\"{gate}\"");
    metrics
        .lines()
        .filter(|line| line.starts_with("kubernetes_feature_enabled{"))
        .find(|line| {
            line.split_once('}')
                .is_some_and(|(labels, _)| labels.split(',').any(|it| it.ends_with(&name)))
        })
        .and_then(|line| line.rsplit(' ').next())
        .map(|value| value.trim() == "1")
}

/// Every tray's devices as `(node, device)` taints after Xid `xid` on `device`
/// of `node` with the GPU lost (Xid 79): `Ok` when `device` carries
/// `XID_TAINT=<xid>`, every device of `node` carries a taint (the plugin
/// taints them all when a wait answers GPU_IS_LOST), and no device of another
/// tray is tainted.
pub fn lost_tainted(
    seen: &BTreeMap<String, BTreeMap<String, SliceDevice>>,
    (node, device): (&str, &str),
    xid: u64,
) -> std::result::Result<(), String> {
    let want = format!("{XID_TAINT}={xid}:");
    let mut off = Vec::new();
    for (at, devices) in seen {
        for (name, it) in devices {
            let has_xid = it.taints.iter().any(|taint| taint.starts_with(&want));
            match (at == node, name == device, it.taints.as_slice()) {
                (true, true, taints) if !has_xid => {
                    off.push(format!("{at}/{name}: taints {taints:?}, want {want}…"));
                }
                (true, false, []) => off.push(format!("{at}/{name}: untainted, want gpu-lost")),
                (false, _, [_, ..]) => {
                    off.push(format!("{at}/{name} tainted too: {:?}", it.taints))
                }
                _ => (),
            }
        }
    }
    if !seen.get(node).is_some_and(|it| it.contains_key(device)) {
        off.push(format!("{node}/{device} not published"));
    }
    if off.is_empty() {
        Ok(())
    } else {
        Err(off.join("; "))
    }
}

/// The tainted devices, as `node/device: taints` (empty: none).
pub fn tainted(seen: &BTreeMap<String, BTreeMap<String, SliceDevice>>) -> Vec<String> {
    seen.iter()
        .flat_map(|(node, devices)| {
            devices
                .iter()
                .filter(|(_, it)| !it.taints.is_empty())
                .map(move |(name, it)| format!("{node}/{name}: {}", it.taints.join(",")))
        })
        .collect()
}

#[cfg(test)]
#[path = "dra_tests.rs"]
mod tests;
