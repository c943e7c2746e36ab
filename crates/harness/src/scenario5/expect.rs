//! Scenario 5's pure parts: what GPU feature discovery must label a tray
//! with, given the profile and the tray's place in the topology; the mock
//! chart's profile choice read back from its release values; allocatable
//! counts; `nvidia-smi -L` and `NVIDIA_VISIBLE_DEVICES` as UUID sets; the
//! device plugin's health log lines; the chart values and the GPU pods; the
//! cliques a rebind moves the trays to; how many GPUs each allocation pod
//! asks for and what they must get together.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context as _, Result};
use nvml_profile::Profile;
use serde_json::Value;

use crate::k8s::idle_pod::{Asks, IdlePod, IDLE};

use crate::fabric::Expected;
use crate::plan::ImageRef;
use crate::scenario4::DRIVER_ROOT;

/// The extended resource the device plugin advertises.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The mock chart's profile as its release values choose it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileChoice {
    /// A profile shipped with the chart, `profiles/<name>.yaml`, and `gpu.count`.
    Shipped {
        /// Its name (`gb200`).
        name: String,
        /// `gpu.count`, when set.
        count: Option<u32>,
    },
    /// `gpu.customConfig`: a whole profile document, and `gpu.count`.
    Custom {
        /// The YAML.
        yaml: String,
        /// `gpu.count`, when set.
        count: Option<u32>,
    },
}

/// The choice in `helm get values -o json` of the mock's release (only what
/// the user set; the chart's default profile is `default`).
pub fn profile_choice(values: &Value, default: &str) -> Result<ProfileChoice> {
    let gpu = &values["gpu"];
    let count = match &gpu["count"] {
        Value::Null => None,
        it => Some(
            it.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .with_context(|| format!("gpu.count is not a GPU count: {it}"))?,
        ),
    };
    if let Some(yaml) = gpu["customConfig"].as_str().filter(|it| !it.is_empty()) {
        return Ok(ProfileChoice::Custom {
            yaml: yaml.to_owned(),
            count,
        });
    }
    let name = gpu["profile"].as_str().unwrap_or(default).to_owned();
    Ok(ProfileChoice::Shipped { name, count })
}

/// The profile the stager stages for a choice; `read` gives a shipped profile's YAML.
pub fn resolve_profile(
    choice: &ProfileChoice,
    read: impl FnOnce(&str) -> Result<String>,
) -> Result<Profile> {
    let (yaml, count) = match choice {
        ProfileChoice::Shipped { name, count } => (read(name)?, count),
        ProfileChoice::Custom { yaml, count } => (yaml.clone(), count),
    };
    let profile = Profile::parse(&yaml).context("parsing the mock's profile")?;
    match count {
        Some(n) => Ok(profile.with_num_devices(*n)?),
        None => Ok(profile),
    }
}

/// The labels GFD must put on a tray staged with `profile` whose topology
/// entry is `clique` (`<cluster uuid>.<clique id>`; `None`: no fabric label).
pub fn expected_labels(
    profile: &Profile,
    clique: Option<&str>,
) -> Result<BTreeMap<String, String>> {
    let devices = profile.devices();
    let device = devices.first().context("the profile lists no GPU")?;
    let system = profile.system();
    let driver = &system.driver_version;
    let major = driver.split('.').next().unwrap_or(driver);
    let cuda = system.cuda_driver_version;
    let mut labels: BTreeMap<String, String> = [
        ("gpu.product", device.name.replace(' ', "-")),
        ("gpu.count", devices.len().to_string()),
        (
            "gpu.memory",
            (device.memory.total / (1024 * 1024)).to_string(),
        ),
        (
            "gpu.family",
            format!("{:?}", device.architecture).to_lowercase(),
        ),
        (
            "gpu.compute.major",
            device.compute_capability.major.to_string(),
        ),
        (
            "gpu.compute.minor",
            device.compute_capability.minor.to_string(),
        ),
        ("cuda.driver-version.full", driver.clone()),
        ("cuda.driver-version.major", major.to_owned()),
        (
            "cuda.runtime-version.full",
            format!("{}.{}", cuda / 1000, (cuda % 1000) / 10),
        ),
    ]
    .into_iter()
    .map(|(key, value)| (format!("nvidia.com/{key}"), value))
    .collect();
    if let Some(clique) = clique.filter(|_| profile.has_fabric()) {
        labels.insert("nvidia.com/gpu.clique".to_owned(), clique.to_owned());
    }
    Ok(labels)
}

/// The expected labels a tray lacks or has with another value, as
/// `key: want X, got Y` (empty: all match).
pub fn label_mismatches(
    want: &BTreeMap<String, String>,
    got: &BTreeMap<String, String>,
) -> Vec<String> {
    want.iter()
        .filter(|(key, value)| got.get(*key) != Some(value))
        .map(|(key, value)| match got.get(key) {
            Some(seen) => format!("{key}: want {value}, got {seen}"),
            None => format!("{key}: want {value}, absent"),
        })
        .collect()
}

/// A node's allocatable `nvidia.com/gpu` (a Node object as JSON); `None`
/// when it advertises none.
pub fn allocatable_gpus(node: &Value) -> Option<u32> {
    allocatable(node, GPU_RESOURCE)
}

/// A node's allocatable count of `resource` (absent: `None`).
pub fn allocatable(node: &Value, resource: &str) -> Option<u32> {
    node["status"]["allocatable"][resource]
        .as_str()
        .and_then(|it| it.parse().ok())
}

/// The UUIDs `nvidia-smi -L` lists (`GPU 0: NVIDIA GB200 (UUID: GPU-…)`).
pub fn smi_uuids(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| line.starts_with("GPU "))
        .filter_map(|line| line.split_once("(UUID: "))
        .filter_map(|(_, rest)| rest.split_once(')'))
        .map(|(uuid, _)| uuid.trim().to_owned())
        .collect()
}

/// The GPUs an allocation named in `NVIDIA_VISIBLE_DEVICES` (UUIDs, the
/// device plugin's default id strategy).
pub fn visible_devices(value: &str) -> BTreeSet<String> {
    value
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|it| !it.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Checks one GPU pod: its NVML lists exactly `want` GPUs, the ones its
/// allocation named; returns them.
pub fn check_pod_gpus(env: &str, smi: &str, want: usize) -> Result<BTreeSet<String>> {
    let allocated = visible_devices(env);
    let listed = smi_uuids(smi);
    let seen: BTreeSet<String> = listed.iter().cloned().collect();
    if allocated.len() != want {
        bail!(
            "NVIDIA_VISIBLE_DEVICES names {} GPUs, want {want}: {env:?}",
            allocated.len()
        );
    }
    if listed.len() != want || seen != allocated {
        bail!("nvidia-smi -L lists {listed:?}, the allocation named {allocated:?}");
    }
    Ok(allocated)
}

/// Whether the device plugin's log marks `uuid` unhealthy for `xid`
/// (`XidCriticalError: Xid=79 on Device=GPU-…; marking device as unhealthy.`).
pub fn marks_unhealthy(log: &str, uuid: &str, xid: u64) -> bool {
    let want = format!("XidCriticalError: Xid={xid} on Device={uuid};");
    log.lines().any(|line| line.contains(&want))
}

/// Whether the device plugin's log skipped an Xid `xid` event
/// (`Skipping event {Device:… EventType:8 EventData:43 …}`).
pub fn skipped_xid(log: &str, xid: u64) -> bool {
    let data = format!("EventData:{xid} ");
    log.lines()
        .any(|line| line.contains("Skipping event") && line.contains(&data))
}

/// How often GFD relabels (its `--sleep-interval`; its default is 60 s), so
/// that a rebind shows in its labels within seconds.
pub const GFD_SLEEP_INTERVAL: &str = "10s";

/// The device plugin chart's values beyond the images: the driver root, as
/// a user with a driver installed under it sets it, and GFD's relabelling
/// interval, as a user who wants labels to follow changes soon sets it.
/// The chart passes the top-level `sleepInterval` (a string or an int) to
/// GFD as `GFD_SLEEP_INTERVAL`; its values file lists `gfd.sleepInterval`,
/// which no template of v0.19.3 reads.
pub fn chart_values(
    device_plugin: &ImageRef,
    nfd: &ImageRef,
    pull: crate::gpu_stack::PullPolicy,
) -> Vec<(String, String)> {
    let mut values = crate::gpu_stack::helm_values(device_plugin, nfd, pull);
    values.push(("nvidiaDriverRoot".to_owned(), DRIVER_ROOT.to_owned()));
    values.push(("sleepInterval".to_owned(), GFD_SLEEP_INTERVAL.to_owned()));
    values
}

/// Each worker's `nvidia.com/gpu.clique` value (`<cluster uuid>.<clique id>`)
/// under a topology, from what each worker reports under it.
pub fn cliques_of(expected: &[(String, Expected)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(node, it)| (node.clone(), format!("{}.{}", it.uuid, it.clique)))
        .collect()
}

/// The workers whose clique is the same under both topologies (a relabel
/// there would prove nothing), as `node (clique)`.
pub fn unmoved(demo: &[(String, String)], rebind: &[(String, String)]) -> Vec<String> {
    demo.iter()
        .filter(|(node, clique)| {
            rebind
                .iter()
                .any(|(it, other)| it == node && other == clique)
        })
        .map(|(node, clique)| format!("{node} ({clique})"))
        .collect()
}

/// The GPUs each allocation pod asks for on a tray of `count` GPUs: pods of
/// 2 filling it (an odd count leaves one GPU free), one pod of 1 on a
/// 1-GPU tray, none on a tray without GPUs.
pub fn pod_gpus(count: u32) -> Vec<u32> {
    match count {
        0 => Vec::new(),
        1 => vec![1],
        _ => vec![2; (count / 2) as usize],
    }
}

/// Checks the allocation pods' GPUs on a tray whose GPUs are `all`: each
/// pod's are the tray's, no two pods share one, and together they cover the
/// tray (but the one GPU an odd count leaves free).
pub fn check_allocations(
    pods: &[(String, BTreeSet<String>)],
    all: &BTreeSet<String>,
) -> Result<()> {
    for (at, (name, gpus)) in pods.iter().enumerate() {
        if !gpus.is_subset(all) {
            bail!("pod {name} got {gpus:?}, not among the tray's GPUs {all:?}");
        }
        for (other, theirs) in &pods[at + 1..] {
            let shared: Vec<&String> = gpus.intersection(theirs).collect();
            if !shared.is_empty() {
                bail!("pods {name} and {other} both got {shared:?}");
            }
        }
    }
    let union: BTreeSet<&String> = pods.iter().flat_map(|(_, gpus)| gpus).collect();
    let free = all.len() - union.len();
    let may_be_free = usize::from(all.len() > 1 && all.len() % 2 == 1);
    if free != may_be_free {
        bail!(
            "the pods got {} of the tray's {} GPUs ({union:?} of {all:?}), want {}",
            union.len(),
            all.len(),
            all.len() - may_be_free
        );
    }
    Ok(())
}

/// The node annotation where NFD's master lists the labels it set.
pub const NFD_FEATURE_LABELS: &str = "nfd.node.kubernetes.io/feature-labels";
/// The labels the mock's stager owns, which NFD may have set too: kept.
const STAGER_LABELS: [&str; 2] = ["nvidia.com/gpu.present", "nvidia.com/gpu.clique"];

/// The labels to remove from a node after NFD is gone: those its master
/// listed (a name without a namespace is in `feature.node.kubernetes.io/`),
/// but not the stager's.
pub fn nfd_labels_to_remove(annotation: &str) -> Vec<String> {
    annotation
        .split(',')
        .map(str::trim)
        .filter(|it| !it.is_empty())
        .map(|it| match it.contains('/') {
            true => it.to_owned(),
            false => format!("feature.node.kubernetes.io/{it}"),
        })
        .filter(|it| !STAGER_LABELS.contains(&it.as_str()))
        .collect()
}

/// A pod on `node` asking for `gpus` `nvidia.com/gpu` ([`IdlePod`]).
pub fn gpu_pod(name: &str, ns: &str, node: &str, image: &str, gpus: u32) -> Value {
    IdlePod {
        name,
        namespace: ns,
        label: ("app.kubernetes.io/name", "cdsim-s5-gpu"),
        node,
        image,
        container: "gpu",
        script: IDLE,
        asks: Asks::Resource {
            resource: GPU_RESOURCE,
            count: gpus,
        },
    }
    .manifest()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gb200() -> Profile {
        let path = crate::project_root().join("manifests/helm/nvml-mock/profiles/gb200.yaml");
        Profile::parse(&std::fs::read_to_string(path).expect("read")).expect("parse")
    }

    #[test]
    fn gb200_labels_follow_the_profile_and_the_trays_clique() {
        let clique = "00000000-0000-0000-0000-0000000000ab.1";
        let labels = expected_labels(&gb200(), Some(clique)).expect("labels");
        let get = |key: &str| labels[&format!("nvidia.com/{key}")].as_str();
        assert_eq!(get("gpu.product"), "NVIDIA-GB200");
        assert_eq!(get("gpu.count"), "4");
        // 198674513920 bytes: 189470.5 MiB, rounded down as GFD does.
        assert_eq!(get("gpu.memory"), "189470");
        assert_eq!(get("gpu.family"), "blackwell");
        assert_eq!(
            (get("gpu.compute.major"), get("gpu.compute.minor")),
            ("10", "0")
        );
        assert_eq!(get("cuda.driver-version.full"), "580.65.06");
        assert_eq!(get("cuda.driver-version.major"), "580");
        assert_eq!(get("cuda.runtime-version.full"), "13.0");
        assert_eq!(get("gpu.clique"), clique);
    }

    #[test]
    fn a_profile_without_fabric_gets_no_clique_label_and_count_follows_gpu_count() {
        let path = crate::project_root().join("manifests/helm/nvml-mock/profiles/l40s.yaml");
        let l40s = Profile::parse(&std::fs::read_to_string(path).expect("read")).expect("parse");
        let labels = expected_labels(&l40s, Some("u.0")).expect("labels");
        assert!(!labels.contains_key("nvidia.com/gpu.clique"));
        let choice = ProfileChoice::Shipped {
            name: "gb200".to_owned(),
            count: Some(2),
        };
        let two = resolve_profile(&choice, |_| Ok(gb200().to_yaml().expect("yaml"))).expect("two");
        assert_eq!(
            expected_labels(&two, None).expect("labels")["nvidia.com/gpu.count"],
            "2"
        );
    }

    #[test]
    fn the_profile_choice_is_read_from_the_release_values() {
        assert_eq!(
            profile_choice(&json!({}), "gb200").expect("empty"),
            ProfileChoice::Shipped {
                name: "gb200".to_owned(),
                count: None
            }
        );
        assert_eq!(
            profile_choice(&json!({"gpu": {"profile": "t4", "count": 2}}), "gb200").expect("t4"),
            ProfileChoice::Shipped {
                name: "t4".to_owned(),
                count: Some(2)
            }
        );
        let custom = json!({"gpu": {"customConfig": "version: 1\n", "profile": "t4"}});
        assert!(matches!(
            profile_choice(&custom, "gb200").expect("custom"),
            ProfileChoice::Custom { .. }
        ));
        assert!(profile_choice(&json!({"gpu": {"count": "x"}}), "gb200").is_err());
    }

    #[test]
    fn mismatches_name_the_label_and_both_values() {
        let want: BTreeMap<String, String> = [
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned()),
        ]
        .into();
        let got: BTreeMap<String, String> = [
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "3".to_owned()),
        ]
        .into();
        assert_eq!(label_mismatches(&want, &got), ["b: want 2, got 3"]);
        assert_eq!(label_mismatches(&want, &BTreeMap::new()).len(), 2);
        assert!(label_mismatches(&want, &want).is_empty());
    }

    #[test]
    fn allocatable_is_read_from_the_node_status() {
        let node = json!({"status": {"allocatable": {"cpu": "2", "nvidia.com/gpu": "4"}}});
        assert_eq!(allocatable_gpus(&node), Some(4));
        assert_eq!(
            allocatable_gpus(&json!({"status": {"allocatable": {"cpu": "2"}}})),
            None
        );
    }

    #[test]
    fn a_pod_must_list_exactly_its_allocated_gpus() {
        let smi = "GPU 0: NVIDIA GB200 (UUID: GPU-b)\nGPU 1: NVIDIA GB200 (UUID: GPU-a)\n";
        assert_eq!(smi_uuids(smi), ["GPU-b", "GPU-a"]);
        let got = check_pod_gpus("GPU-a,GPU-b\n", smi, 2).expect("match");
        assert_eq!(got.into_iter().collect::<Vec<_>>(), ["GPU-a", "GPU-b"]);
        let err = check_pod_gpus("GPU-a,GPU-c", smi, 2).expect_err("other gpu");
        assert!(err.to_string().contains("GPU-c"), "{err}");
        assert!(check_pod_gpus("GPU-a", "GPU 0: x (UUID: GPU-a)\n", 2).is_err());
        let four = "GPU 0: x (UUID: GPU-a)\nGPU 1: x (UUID: GPU-b)\nGPU 2: x (UUID: GPU-c)\n";
        assert!(
            check_pod_gpus("GPU-a,GPU-b", four, 2).is_err(),
            "a third GPU seen"
        );
    }

    #[test]
    fn health_log_lines_are_recognised() {
        let log = "I1204 Processing event {Device:{Handle:0x1} EventType:8 EventData:79 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n\
                   I1204 XidCriticalError: Xid=79 on Device=GPU-a; marking device as unhealthy.\n\
                   I1204 Skipping event {Device:{Handle:0x1} EventType:8 EventData:43 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n";
        assert!(marks_unhealthy(log, "GPU-a", 79));
        assert!(!marks_unhealthy(log, "GPU-b", 79));
        assert!(!marks_unhealthy(log, "GPU-a", 48));
        assert!(skipped_xid(log, 43));
        assert!(!skipped_xid(log, 79));
    }

    #[test]
    fn nfd_labels_are_removed_but_the_stagers_kept() {
        let listed = "cpu-model.vendor_id,nvidia.com/gpu.count,nvidia.com/gpu.clique,nvidia.com/gpu.present,";
        assert_eq!(
            nfd_labels_to_remove(listed),
            [
                "feature.node.kubernetes.io/cpu-model.vendor_id",
                "nvidia.com/gpu.count"
            ]
        );
        assert!(nfd_labels_to_remove("").is_empty());
    }

    #[test]
    fn values_point_at_the_staged_driver_root_and_pods_ask_for_gpus() {
        let image = |name: &str| ImageRef {
            repository: name.to_owned(),
            tag: "t".to_owned(),
        };
        let values = chart_values(
            &image("dp"),
            &image("nfd"),
            crate::gpu_stack::PullPolicy::Never,
        );
        assert!(values.contains(&("nvidiaDriverRoot".to_owned(), DRIVER_ROOT.to_owned())));
        assert!(values.contains(&("gfd.enabled".to_owned(), "true".to_owned())));
        assert!(values.contains(&("sleepInterval".to_owned(), "10s".to_owned())));
        let pod = gpu_pod("p", "ns", "node-a", "img:1", 2);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["limits"][GPU_RESOURCE],
            "2"
        );
        assert_eq!(
            pod["spec"]["nodeSelector"]["kubernetes.io/hostname"],
            "node-a"
        );
    }

    #[test]
    fn a_rebind_moves_each_tray_to_its_own_clique() {
        let at = |clique: u32, uuid: &str| Expected {
            clique,
            uuid: uuid.to_owned(),
        };
        let demo = cliques_of(&[
            ("w1".to_owned(), at(0, "u-ab")),
            ("w2".to_owned(), at(1, "u-ab")),
        ]);
        assert_eq!(demo[1], ("w2".to_owned(), "u-ab.1".to_owned()));
        let rebind = cliques_of(&[
            ("w1".to_owned(), at(99, "u-ff")),
            ("w2".to_owned(), at(1, "u-ab")),
        ]);
        assert_eq!(rebind[0], ("w1".to_owned(), "u-ff.99".to_owned()));
        assert_eq!(unmoved(&demo, &rebind), ["w2 (u-ab.1)"]);
        assert!(unmoved(&demo, &rebind[..1]).is_empty());
    }

    fn gpus(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|it| (*it).to_owned()).collect()
    }

    #[test]
    fn allocation_pods_take_two_gpus_each_and_one_on_a_single_gpu_tray() {
        assert_eq!(pod_gpus(4), [2, 2]);
        assert_eq!(pod_gpus(8), [2, 2, 2, 2]);
        assert_eq!(pod_gpus(3), [2]);
        assert_eq!(pod_gpus(2), [2]);
        assert_eq!(pod_gpus(1), [1]);
        assert!(pod_gpus(0).is_empty());
    }

    #[test]
    fn allocations_must_be_disjoint_and_cover_the_tray() {
        let pod = |name: &str, names: &[&str]| (name.to_owned(), gpus(names));
        let four = gpus(&["a", "b", "c", "d"]);
        let split = [pod("p0", &["a", "b"]), pod("p1", &["c", "d"])];
        check_allocations(&split, &four).expect("a split of four");
        let shared = [pod("p0", &["a", "b"]), pod("p1", &["b", "c"])];
        let err = check_allocations(&shared, &four).expect_err("shared");
        assert!(err.to_string().contains("p0 and p1"), "{err}");
        let short = [pod("p0", &["a", "b"])];
        assert!(check_allocations(&short, &four).is_err(), "two GPUs left");
        let stranger = [pod("p0", &["a", "x"]), pod("p1", &["c", "d"])];
        assert!(
            check_allocations(&stranger, &four).is_err(),
            "not the tray's"
        );
        let three = gpus(&["a", "b", "c"]);
        check_allocations(&[pod("p0", &["b", "c"])], &three).expect("one of three free");
        assert!(check_allocations(&[], &three).is_err(), "three free");
        check_allocations(&[pod("p0", &["a"])], &gpus(&["a"])).expect("the single GPU");
        assert!(check_allocations(&[], &gpus(&["a"])).is_err());
    }
}
