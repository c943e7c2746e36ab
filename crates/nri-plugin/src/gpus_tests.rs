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
            GpuId::Unsupported("0:1".to_owned()),
            GpuId::Unsupported("MIG-1234".to_owned()),
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
    let (granted, warnings) = resolve(&env(&format!("0,{}", UUID_B.to_lowercase())), &gpus);
    assert_eq!(granted, Some(Granted::Minors(BTreeSet::from([10, 13]))));
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(resolve(&GpuRequest::Unspecified, &gpus), (None, vec![]));
    assert_eq!(
        resolve(&GpuRequest::All, &gpus),
        (Some(Granted::All), vec![])
    );
    assert_eq!(
        resolve(&GpuRequest::NoGpus, &gpus),
        (Some(Granted::Minors(BTreeSet::new())), vec![])
    );
}

#[test]
fn unknown_uuids_out_of_range_indices_and_mig_devices_are_logged_not_fatal() {
    let request = env("1,7,GPU-ffffffff-0000-0000-0000-000000000000,MIG-abc");
    let (granted, warnings) = resolve(&request, &staged());
    assert_eq!(granted, Some(Granted::Minors(BTreeSet::from([11]))));
    assert_eq!(
        warnings,
        [
            "GPU index 7 is past the 4 staged GPUs; not injected",
            "GPU GPU-ffffffff-0000-0000-0000-000000000000 is not in the staged profile; not injected",
            "GPU \"MIG-abc\" is neither an index nor a GPU UUID (MIG devices are not modelled); not injected",
        ]
    );
    // Nothing resolvable: no GPU node at all, still a GPU allocation (not today's rules).
    let (granted, warnings) = resolve(&env("9"), &staged());
    assert_eq!(granted, Some(Granted::Minors(BTreeSet::new())));
    assert_eq!(warnings.len(), 1);
    // No staged table (the profile unreadable): every listed GPU is logged.
    let (granted, warnings) = resolve(&env(&format!("0,{UUID_A}")), &[]);
    assert_eq!(granted, Some(Granted::Minors(BTreeSet::new())));
    assert_eq!(warnings.len(), 2);
}
