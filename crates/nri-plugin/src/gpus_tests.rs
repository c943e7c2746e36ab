use super::*;
use crate::proto::CdiDevice;

fn container(env: &[&str], cdi: &[&str], annotations: &[(&str, &str)]) -> Container {
    Container {
        name: "main".to_owned(),
        env: env.iter().map(|entry| (*entry).to_owned()).collect(),
        cdi_devices: cdi
            .iter()
            .map(|name| CdiDevice {
                name: (*name).to_owned(),
            })
            .collect(),
        annotations: annotations
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect(),
        ..Container::default()
    }
}

fn env(value: &str) -> GpuRequest {
    request(&container(
        &[&format!("NVIDIA_VISIBLE_DEVICES={value}")],
        &[],
        &[],
    ))
}

const UUID_A: &str = "GPU-b200b200-0000-0000-0000-000000000001";
const UUID_B: &str = "GPU-b200b200-0000-0000-0000-000000000003";

/// The GPU side of a resolution without a MIG partition.
fn plain(request: &GpuRequest, gpus: &[StagedGpu]) -> (Option<Granted>, Vec<String>) {
    let resolved = resolve(request, gpus, &MigView::default());
    assert!(resolved.caps.is_empty(), "{resolved:?}");
    (resolved.granted, resolved.warnings)
}

fn staged() -> Vec<StagedGpu> {
    (0..4)
        .map(|index| StagedGpu {
            index,
            uuid: format!("GPU-b200b200-0000-0000-0000-00000000000{index}"),
            // Minors need not equal indices: the resolution goes through the table.
            minor: index + 10,
        })
        .collect()
}

#[test]
fn the_variable_says_nothing_when_unset_empty_or_void() {
    assert_eq!(
        request(&container(&["PATH=/bin"], &[], &[])),
        GpuRequest::Unspecified
    );
    assert_eq!(env(""), GpuRequest::Unspecified);
    assert_eq!(env("void"), GpuRequest::Unspecified);
    assert_eq!(env(" void "), GpuRequest::Unspecified);
}

#[test]
fn none_all_and_lists_of_indices_and_uuids() {
    assert_eq!(env("none"), GpuRequest::NoGpus);
    assert_eq!(env("all"), GpuRequest::All);
    assert_eq!(env("0,all"), GpuRequest::All);
    assert_eq!(
        env(&format!(" 2, {UUID_A} ,,2,MIG-1234,0:1")),
        GpuRequest::Listed(vec![
            GpuId::Index(2),
            GpuId::Uuid(UUID_A.to_owned()),
            GpuId::Mig(MigId::Uuid("MIG-1234".to_owned())),
            GpuId::Unsupported("0:1".to_owned()),
        ])
    );
    // The last entry wins, as in the process environment.
    let twice = container(
        &["NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_VISIBLE_DEVICES=1"],
        &[],
        &[],
    );
    assert_eq!(request(&twice), GpuRequest::Listed(vec![GpuId::Index(1)]));
}

#[test]
fn cdi_devices_and_annotations_name_gpus_of_nvidias_kind_only() {
    let cdi = container(
        &[],
        &[
            "nvidia.com/gpu=1",
            "vendor.com/fpga=0",
            "k8s.gpu.nvidia.com/claim=x",
        ],
        &[
            (
                "cdi.k8s.io/nvidia-device-plugin_a",
                &format!("nvidia.com/gpu={UUID_B}"),
            ),
            ("other/annotation", "nvidia.com/gpu=3"),
        ],
    );
    assert_eq!(
        request(&cdi),
        GpuRequest::Listed(vec![GpuId::Index(1), GpuId::Uuid(UUID_B.to_owned())])
    );
    let all = container(
        &[],
        &[],
        &[("cdi.k8s.io/x", "nvidia.com/gpu=0,nvidia.com/gpu=all")],
    );
    assert_eq!(request(&all), GpuRequest::All);
    let only_foreign = container(&[], &["vendor.com/fpga=0"], &[]);
    assert_eq!(request(&only_foreign), GpuRequest::Unspecified);
}

#[test]
fn the_volume_mounts_strategy_lists_gpus_as_mount_points() {
    let mut mounted = container(
        &["NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices"],
        &[],
        &[],
    );
    for destination in [
        format!("/var/run/nvidia-container-devices/{UUID_A}"),
        "/var/run/nvidia-container-devices/2".to_owned(),
        "/var/run/nvidia-container-devices-other/3".to_owned(),
        "/data".to_owned(),
    ] {
        mounted.mounts.push(crate::proto::Mount {
            destination,
            ..crate::proto::Mount::default()
        });
    }
    assert_eq!(
        request(&mounted),
        GpuRequest::Listed(vec![GpuId::Index(2), GpuId::Uuid(UUID_A.to_owned())])
    );
    // The directory named without any mount under it: no request.
    let bare = container(
        &["NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices"],
        &[],
        &[],
    );
    assert_eq!(request(&bare), GpuRequest::Unspecified);
}

#[test]
fn both_sources_are_merged() {
    let both = container(
        &["NVIDIA_VISIBLE_DEVICES=0"],
        &["nvidia.com/gpu=0", "nvidia.com/gpu=2"],
        &[],
    );
    assert_eq!(
        request(&both),
        GpuRequest::Listed(vec![GpuId::Index(0), GpuId::Index(2)])
    );
    // `none` with a CDI GPU is that GPU; `void` beside CDI devices leaves the CDI devices.
    let none = container(&["NVIDIA_VISIBLE_DEVICES=none"], &["nvidia.com/gpu=3"], &[]);
    assert_eq!(request(&none), GpuRequest::Listed(vec![GpuId::Index(3)]));
    let void = container(
        &["NVIDIA_VISIBLE_DEVICES=void"],
        &["nvidia.com/gpu=all"],
        &[],
    );
    assert_eq!(request(&void), GpuRequest::All);
}

#[test]
fn resolution_maps_indices_and_uuids_to_minors() {
    let gpus = staged();
    let (granted, warnings) = plain(&env(&format!("0,{}", UUID_B.to_lowercase())), &gpus);
    assert_eq!(granted, Some(Granted::Minors(BTreeSet::from([10, 13]))));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(plain(&GpuRequest::Unspecified, &gpus), (None, vec![]));
    assert_eq!(plain(&GpuRequest::All, &gpus), (Some(Granted::All), vec![]));
    assert_eq!(
        plain(&GpuRequest::NoGpus, &gpus),
        (Some(Granted::Minors(BTreeSet::new())), vec![])
    );
}

#[test]
fn unknown_uuids_out_of_range_indices_and_mig_devices_are_logged_not_fatal() {
    let request = env("1,7,GPU-ffffffff-0000-0000-0000-000000000000,MIG-abc,0:1");
    let (granted, warnings) = plain(&request, &staged());
    assert_eq!(granted, Some(Granted::Minors(BTreeSet::from([11]))));
    assert_eq!(
        warnings,
        [
            "GPU index 7 is past the 4 staged GPUs; not injected",
            "GPU GPU-ffffffff-0000-0000-0000-000000000000 is not in the staged profile; not injected",
            "MIG device MIG-abc is not in the node's MIG partition; not injected",
            "GPU \"0:1\" is neither an index, a GPU UUID nor a MIG device; not injected",
        ]
    );
    // Nothing resolvable: no GPU node at all, still a GPU allocation (not today's rules).
    let (granted, warnings) = plain(&env("9"), &staged());
    assert_eq!(granted, Some(Granted::Minors(BTreeSet::new())));
    assert_eq!(warnings.len(), 1);
    // No staged table (the profile unreadable): every listed GPU is logged.
    let (granted, warnings) = plain(&env(&format!("0,{UUID_A}")), &[]);
    assert_eq!(granted, Some(Granted::Minors(BTreeSet::new())));
    assert_eq!(warnings.len(), 2);
}

#[test]
fn mig_devices_come_from_the_variable_and_nvidias_cdi_kinds() {
    let cdi = container(
        &["NVIDIA_VISIBLE_DEVICES=1:2:0"],
        &["nvidia.com/gpu=MIG-aaaa", "nvidia.com/mig-1g.10gb=MIG-bbbb"],
        &[(
            "cdi.k8s.io/x",
            "nvidia.com/mig-2g.20gb=0:1:0,vendor.com/mig-1g=MIG-cccc",
        )],
    );
    let mig = |text: &str| GpuId::Mig(MigId::parse(text).expect("MIG id"));
    assert_eq!(
        request(&cdi),
        GpuRequest::Listed(vec![
            mig("MIG-aaaa"),
            mig("MIG-bbbb"),
            mig("0:1:0"),
            mig("1:2:0"),
        ])
    );
}

#[test]
fn a_mig_device_grants_its_parent_and_its_capabilities() {
    use node_layout::mig_state::{self, ComputeInstance, Gpu, GpuInstance, Mode, Placement};
    let gi = GpuInstance {
        id: 3,
        profile_id: 19,
        placement: Placement { start: 2, size: 1 },
        compute: vec![ComputeInstance {
            id: 0,
            profile_id: 0,
            placement: Placement { start: 0, size: 1 },
        }],
    };
    let gpus = staged();
    let uuid = mig_state::mig_uuid(&gpus[2].uuid, &gi, 0);
    let view = MigView {
        state: mig_state::MigState {
            gpus: vec![Gpu {
                gpu: 2,
                current: Mode::Enabled,
                pending: Mode::Enabled,
                instances: vec![gi],
            }],
        },
        minors: node_layout::mig_minors::parse(&node_layout::mig_minors::format(&[10, 11, 12, 13])),
    };
    let resolved = resolve(&env(&format!("{uuid},2:3:0,1:3:0")), &gpus, &view);
    assert_eq!(
        resolved.granted,
        Some(Granted::Minors(BTreeSet::from([12])))
    );
    let caps = node_layout::mig_minors::device_minors(12, 3, 0).expect("caps");
    assert_eq!(resolved.caps, BTreeSet::from(caps));
    assert_eq!(
        resolved.warnings,
        ["MIG device 1:3:0 is not in the node's MIG partition; not injected"]
    );
}
