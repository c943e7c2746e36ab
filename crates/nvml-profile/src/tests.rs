//! Unit tests: the shipped profiles, validation errors, num_devices and the fabric identity.

use super::*;

const MINIMAL: &str = r#"
version: 1
name: tiny
system: {driver_version: "580.65.06", nvml_version: "13.580.65.06", cuda_driver_version: 13000}
device_defaults:
  name: NVIDIA GB200
  brand: nvidia
  architecture: blackwell
  compute_capability: {major: 10, minor: 0}
  board_id: 7
  memory: {total: 1000, reserved: 100, used: 50}
  pci: {device_id: 0x294110DE, subsystem_id: 0x20D510DE}
  pcie: {gen: 5, width: 16, max_gen: 6, max_width: 16}
  power_usage_mw: 1
  temperature_c: 2
  utilization: {gpu: 3, memory: 4}
  clocks: {graphics: 1, sm: 2, mem: 3, video: 4, max_graphics: 10, max_sm: 20, max_mem: 30, max_video: 40}
  persistence_mode: true
  compute_mode: default
  nvlink: {links: 18, active: 18}
  fabric: {cluster_uuid: "00000000-0000-0000-0000-000000000001", clique_id: 0, state: in_progress}
devices:
  - {index: 0, uuid: GPU-00000000-0000-0000-0000-000000000000, pci_bus_id: "0000:01:00.0", minor_number: 0, module_id: 1}
  - {index: 1, uuid: GPU-00000000-0000-0000-0000-000000000001, pci_bus_id: "0000:02:00.0", minor_number: 1, module_id: 2,
     name: Other, fabric: {cluster_uuid: "00000000000000000000000000000002", clique_id: 9}}
"#;

fn invalid_field(text: &str) -> (String, String) {
    match Profile::parse(text) {
        Err(Error::Invalid { field, message }) => (field, message),
        other => panic!("expected a validation error, got {other:?}"),
    }
}

#[test]
fn shipped_gb200_is_one_compute_tray() {
    let profile = Profile::parse(GB200).unwrap();
    assert_eq!(profile.name(), "gb200");
    assert_eq!(profile.device_count(), 4);
    assert!(profile.has_fabric());
    let devices = profile.devices();
    for (position, device) in devices.iter().enumerate() {
        assert_eq!(device.index as usize, position);
        assert_eq!(device.name, "NVIDIA GB200");
        assert_eq!(device.architecture, Architecture::Blackwell);
        assert_eq!(
            (
                device.compute_capability.major,
                device.compute_capability.minor
            ),
            (10, 0)
        );
        assert_eq!(device.module_id as usize, position + 1);
        let fabric = device.fabric.unwrap();
        assert_eq!(
            fabric.cluster_uuid.to_string(),
            "00000000-0000-0000-0000-000000000001"
        );
        assert_eq!(fabric.clique_id, 0);
        assert_eq!(fabric.effective_state(), FabricState::Completed);
        assert!(device.memory.total > 180 << 30, "about 186 GiB of HBM3e");
    }
}

#[test]
fn shipped_h100_has_eight_gpus_without_fabric() {
    let profile = Profile::parse(H100).unwrap();
    assert_eq!(profile.device_count(), 8);
    assert!(!profile.has_fabric());
    assert!(profile
        .devices()
        .iter()
        .all(|device| device.fabric.is_none()
            && device.name == "NVIDIA H100 80GB HBM3"
            && device.architecture == Architecture::Hopper));
}

#[test]
fn to_yaml_round_trips() {
    for text in [GB200, H100, MINIMAL] {
        let profile = Profile::parse(text).unwrap();
        let again = Profile::parse(&profile.to_yaml().unwrap()).unwrap();
        assert_eq!(profile, again);
    }
}

#[test]
fn per_device_overrides_replace_defaults() {
    let profile = Profile::parse(MINIMAL).unwrap();
    let devices = profile.devices();
    assert_eq!(devices[0].name, "NVIDIA GB200");
    assert_eq!(devices[1].name, "Other");
    assert_eq!(devices[0].board_id, 7);
    assert_eq!(devices[0].memory.free(), 850);
    // A per-device fabric block replaces the whole default block.
    let fabric = devices[1].fabric.unwrap();
    assert_eq!(fabric.clique_id, 9);
    assert_eq!(fabric.state, None);
    assert_eq!(
        devices[0].fabric.unwrap().state,
        Some(FabricState::InProgress)
    );
}

#[test]
fn num_devices_caps_the_visible_gpus() {
    let profile = Profile::parse(GB200).unwrap();
    let two = profile.with_num_devices(2).unwrap();
    assert_eq!(two.device_count(), 2);
    assert_eq!(two.devices().len(), 2);
    assert_eq!(two.system().num_devices, Some(2));
    assert_eq!(
        Profile::parse(&two.to_yaml().unwrap())
            .unwrap()
            .device_count(),
        2
    );
    for bad in [0, 5] {
        let err = profile.with_num_devices(bad).unwrap_err();
        assert!(
            matches!(err, Error::NumDevices { requested, available: 4, .. } if requested == bad)
        );
        assert!(err.to_string().contains("use 1..=4"), "{err}");
    }
    let text = GB200.replace(
        "cuda_driver_version: 13000",
        "cuda_driver_version: 13000\n  num_devices: 9",
    );
    let (field, message) = invalid_field(&text);
    assert_eq!(field, "system.num_devices");
    assert!(message.contains("1..=4"), "{message}");
}

/// The cluster uuid the fabric identity tests write.
fn fabric_uuid() -> FabricUuid {
    "00000000-0000-0000-0000-0000000000ab".parse().unwrap()
}

#[test]
fn fabric_identity_rewrites_defaults_and_device_blocks() {
    let uuid = fabric_uuid();
    let profile = Profile::parse(MINIMAL)
        .unwrap()
        .with_fabric_identity(uuid, 1);
    for device in profile.devices() {
        let fabric = device.fabric.unwrap();
        assert_eq!(fabric.cluster_uuid, uuid);
        assert_eq!(fabric.clique_id, 1);
    }
    let devices = profile.devices();
    // An explicit state is kept; an absent one becomes completed.
    assert_eq!(
        devices[0].fabric.unwrap().state,
        Some(FabricState::InProgress)
    );
    assert_eq!(
        devices[1].fabric.unwrap().state,
        Some(FabricState::Completed)
    );
}

#[test]
fn fabric_identity_leaves_a_profile_without_fabric_alone() {
    let profile = Profile::parse(H100).unwrap();
    let uuid = fabric_uuid();
    assert_eq!(profile.with_fabric_identity(uuid, 3), profile);
}

#[test]
fn fabric_identity_on_an_owned_profile_is_the_same_rewrite() {
    let uuid = fabric_uuid();
    for text in [MINIMAL, H100, GB200] {
        let profile = Profile::parse(text).unwrap();
        let borrowed = profile.with_fabric_identity(uuid, 5);
        assert_eq!(profile.into_fabric_identity(uuid, 5), borrowed);
    }
}

#[test]
fn unknown_keys_are_rejected_with_their_name() {
    let text = MINIMAL.replace("power_usage_mw: 1", "power_usage_mw: 1\n  powr: 3");
    let err = Profile::parse(&text).unwrap_err();
    assert!(matches!(err, Error::Syntax(_)));
    assert!(err.to_string().contains("unknown field `powr`"), "{err}");
    let text = MINIMAL.replace("minor_number: 0,", "minor_number: 0, colour: red,");
    assert!(Profile::parse(&text)
        .unwrap_err()
        .to_string()
        .contains("unknown field `colour`"));
}

#[test]
fn validation_names_the_offending_field() {
    let cases: &[(&str, &str, &str, &str)] = &[
        ("version: 1", "version: 2", "version", "only 1"),
        ("name: tiny", "name: \"\"", "name", "empty"),
        (
            "\"580.65.06\", nvml",
            "\"580.x\", nvml",
            "system.driver_version",
            "X.Y",
        ),
        (
            "cuda_driver_version: 13000",
            "cuda_driver_version: 0",
            "system.cuda_driver_version",
            "13000",
        ),
        (
            "reserved: 100, used: 50",
            "reserved: 990, used: 50",
            "device_defaults.memory",
            "exceeds total",
        ),
        ("gen: 5,", "gen: 7,", "device_defaults.pcie.gen", "max_gen"),
        (
            "gpu: 3,",
            "gpu: 300,",
            "device_defaults.utilization.gpu",
            "≤ 100",
        ),
        (
            "graphics: 1,",
            "graphics: 11,",
            "device_defaults.clocks.graphics",
            "max_graphics",
        ),
        (
            "links: 18, active: 18",
            "links: 40, active: 18",
            "device_defaults.nvlink.links",
            "36",
        ),
        (
            "links: 18, active: 18",
            "links: 4, active: 18",
            "device_defaults.nvlink.active",
            "more than links",
        ),
        ("index: 1,", "index: 3,", "devices[1].index", "expected 1"),
        (
            "GPU-00000000-0000-0000-0000-000000000001",
            "GPU-00000000-0000-0000-0000-000000000000",
            "devices[1].uuid",
            "also devices[0]",
        ),
        (
            "GPU-00000000-0000-0000-0000-000000000001",
            "00000000-0000-0000-0000-000000000001",
            "devices[1].uuid",
            "GPU-",
        ),
        (
            "\"0000:02:00.0\"",
            "\"0000:01:00.0\"",
            "devices[1].pci_bus_id",
            "also devices[0]",
        ),
        (
            "\"0000:02:00.0\"",
            "\"00000000:01:00\"",
            "devices[1].pci_bus_id",
            "also devices[0]",
        ),
        (
            "\"0000:02:00.0\"",
            "\"zz:00.0\"",
            "devices[1].pci_bus_id",
            "not a PCI bus id",
        ),
        (
            "minor_number: 1,",
            "minor_number: 0,",
            "devices[1].minor_number",
            "also devices[0]",
        ),
        (
            "board_id: 7",
            "serial: \"1234567890123456789012345678901\"",
            "device_defaults.serial",
            "at most 29",
        ),
        ("name: Other,", "name: \"\",", "devices[1].name", "empty"),
    ];
    for (from, to, field, needle) in cases {
        assert!(MINIMAL.contains(from), "fixture lacks {from:?}");
        let (got_field, message) = invalid_field(&MINIMAL.replacen(from, to, 1));
        assert_eq!(&got_field, field, "{from:?} -> {to:?}: {message}");
        assert!(
            message.contains(needle),
            "{field}: {message:?} lacks {needle:?}"
        );
    }
}

#[test]
fn a_malformed_fabric_uuid_is_a_syntax_error_naming_the_value() {
    let text = MINIMAL.replace("00000000-0000-0000-0000-000000000001", "not-a-uuid");
    let err = Profile::parse(&text).unwrap_err();
    assert!(
        err.to_string().contains("\"not-a-uuid\" is not a uuid"),
        "{err}"
    );
}

#[test]
fn missing_board_id_is_reported_per_device() {
    let text = MINIMAL.replace("  board_id: 7\n", "");
    let (field, message) = invalid_field(&text);
    assert_eq!(field, "devices[0].board_id");
    assert!(message.contains("device_defaults.board_id"), "{message}");
}

#[test]
fn health_summary_is_derived_from_the_mask() {
    let uuid = FabricUuid::default();
    let fabric = |mask: Option<u32>| Fabric {
        cluster_uuid: uuid,
        clique_id: 0,
        state: None,
        health_mask: mask,
        health_summary: None,
    };
    assert_eq!(fabric(None).effective_health_mask(), HEALTHY_MASK);
    assert_eq!(
        fabric(None).effective_health_summary(),
        HealthSummary::Healthy
    );
    for (mask, summary) in [
        (0, HealthSummary::NotSupported),
        // ROUTE_UNHEALTHY TRUE.
        (0x19A, HealthSummary::Unhealthy),
        // DEGRADED_BW TRUE only.
        (0x1A9, HealthSummary::LimitedCapacity),
        // INCORRECT_CONFIGURATION = NO_PARTITION.
        (0x4AA, HealthSummary::Unhealthy),
    ] {
        assert_eq!(
            fabric(Some(mask)).effective_health_summary(),
            summary,
            "{mask:#x}"
        );
    }
    let explicit = Fabric {
        health_summary: Some(HealthSummary::LimitedCapacity),
        ..fabric(None)
    };
    assert_eq!(
        explicit.effective_health_summary(),
        HealthSummary::LimitedCapacity
    );
}

#[test]
fn gb200_is_mig_capable_with_mig_disabled_and_ats() {
    let device = &Profile::parse(GB200).unwrap().devices()[0];
    assert_eq!(
        device.mig_mode,
        Some(MigMode {
            current: false,
            pending: false,
            max_devices: Some(7)
        })
    );
    // The rows found in real output (mig.md): 1g, 1g+me, 1g.47gb, 2g.47gb; 3g/4g/7g left out.
    let Some(GpuInstanceProfiles::Known(rows)) = &device.gpu_instance_profiles else {
        panic!("gb200 has a table");
    };
    let ids: Vec<(u32, u32, &str)> = rows
        .iter()
        .map(|row| (row.profile, row.id, row.name.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(
        ids,
        [
            (0, 19, "1g.23gb"),
            (7, 20, "1g.23gb+me"),
            (9, 15, "1g.47gb"),
            (1, 14, "2g.47gb")
        ]
    );
    assert_eq!(device.addressing_mode, Some(AddressingMode::Ats));
    // A profile that says nothing has none of the three.
    let device = &Profile::parse(MINIMAL).unwrap().devices()[0];
    assert_eq!(
        (
            device.mig_mode,
            &device.gpu_instance_profiles,
            device.addressing_mode
        ),
        (None, &None, None)
    );
}

#[test]
fn gpu_instance_profile_tables_parse_and_validate() {
    let row = "{profile: 0, id: 0, p2p: false, slices: 1, instances: 7, multiprocessors: 16, copy_engines: 1, decoders: 1, encoders: 0, jpegs: 1, ofas: 0, memory_mib: 23000}";
    let text = MINIMAL.replace(
        "  compute_mode: default\n",
        &format!("  compute_mode: default\n  gpu_instance_profiles: [{row}]\n"),
    );
    let device = &Profile::parse(&text).unwrap().devices()[1];
    let Some(GpuInstanceProfiles::Known(rows)) = &device.gpu_instance_profiles else {
        panic!("expected a table, got {:?}", device.gpu_instance_profiles);
    };
    assert_eq!((rows[0].instances, rows[0].memory_mib), (7, 23000));

    let duplicate = MINIMAL.replace(
        "  compute_mode: default\n",
        &format!("  compute_mode: default\n  gpu_instance_profiles: [{row}, {row}]\n"),
    );
    let (field, message) = invalid_field(&duplicate);
    assert_eq!(field, "device_defaults.gpu_instance_profiles[1].profile");
    assert!(message.contains("also"), "{message}");

    let out_of_range = MINIMAL.replace(
        "  compute_mode: default\n",
        &format!(
            "  compute_mode: default\n  gpu_instance_profiles: [{}]\n",
            row.replace("profile: 0", "profile: 17")
        ),
    );
    let (field, message) = invalid_field(&out_of_range);
    assert_eq!(field, "device_defaults.gpu_instance_profiles[0].profile");
    assert!(message.contains("0..=16"), "{message}");
    assert!(Profile::parse(&MINIMAL.replace(
        "  compute_mode: default\n",
        "  compute_mode: default\n  gpu_instance_profiles: maybe\n"
    ))
    .is_err());
}

#[test]
fn nvswitch_wiring_is_checked() {
    let cases = [
        (
            "switches: [{pci_bus_id: \"0100:00:00.0\", device_id: 1, links: 9}]",
            "device_defaults.nvlink.switches",
            "carry 9 links, but links is 18: each link goes to exactly one switch",
        ),
        (
            "switches: [{pci_bus_id: \"0000:02:00.0\", device_id: 1, links: 18}]",
            "device_defaults.nvlink.switches[0].pci_bus_id",
            "\"0000:02:00.0\" is devices[1].pci_bus_id: an NVSwitch needs its own address",
        ),
        (
            "switches: [{pci_bus_id: \"01:00.0\", device_id: 1, links: 9}, {pci_bus_id: \"0000:01:00.0\", device_id: 1, links: 9}]",
            "device_defaults.nvlink.switches[1].pci_bus_id",
            "\"0000:01:00.0\" is also device_defaults.nvlink.switches[0].pci_bus_id",
        ),
        (
            "switches: [{pci_bus_id: \"0100:00:00.0\", device_id: 1, links: 18}, {pci_bus_id: \"0100:01:00.0\", device_id: 1, links: 0}]",
            "device_defaults.nvlink.switches[1].links",
            "must be at least 1",
        ),
        (
            "switches: [{pci_bus_id: \"nope\", device_id: 1, links: 18}]",
            "device_defaults.nvlink.switches[0].pci_bus_id",
            "",
        ),
        (
            "capabilities: [p2p_supported, valid, p2p_supported]",
            "device_defaults.nvlink.capabilities[2]",
            "P2pSupported is listed twice",
        ),
    ];
    for (extra, field, message) in cases {
        let text = MINIMAL.replace(
            "nvlink: {links: 18, active: 18}",
            &format!("nvlink: {{links: 18, active: 18, {extra}}}"),
        );
        let (got_field, got_message) = invalid_field(&text);
        assert_eq!(got_field, field, "{extra}");
        assert!(got_message.contains(message), "{extra}: {got_message}");
    }
}

#[test]
fn shipped_nvlinks_go_to_switches() {
    let gb200 = Profile::parse(GB200).unwrap().devices()[0].nvlink.clone();
    assert_eq!(gb200.version, Some(NvLinkVersion::V5_0));
    assert_eq!(gb200.switches.len(), 18);
    assert_eq!(gb200.switch_of(17).unwrap().pci_bus_id, "0100:11:00.0");
    assert!(gb200.switch_of(18).is_none());
    let h100 = Profile::parse(H100).unwrap().devices()[7].nvlink.clone();
    assert_eq!(h100.version, Some(NvLinkVersion::V4_0));
    let buses: Vec<&str> = [0, 4, 5, 8, 9, 12, 13, 17]
        .map(|link| h100.switch_of(link).unwrap().pci_bus_id.as_str())
        .to_vec();
    assert_eq!(
        buses,
        [
            "0000:05:00.0",
            "0000:05:00.0",
            "0000:06:00.0",
            "0000:06:00.0",
            "0000:07:00.0",
            "0000:07:00.0",
            "0000:08:00.0",
            "0000:08:00.0"
        ]
    );
    assert!(h100
        .capabilities
        .unwrap()
        .contains(&NvLinkCapability::P2pSupported));
}

#[test]
fn profiles_round_trip_with_topology_and_switches() {
    for text in [GB200, H100] {
        let profile = Profile::parse(text).unwrap();
        assert_eq!(
            Profile::parse(&profile.to_yaml().unwrap()).unwrap(),
            profile
        );
    }
}
