//! Every profile the chart ships (`manifests/helm/nvml-mock/profiles/*.yaml`) passes validation,
//! is named after its file, and keeps the rules the profiles README states.

use std::path::PathBuf;

use nvml_profile::{Architecture, Profile};

fn profiles_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../manifests/helm/nvml-mock/profiles")
}

/// Every shipped profile as (file stem, parsed profile), sorted by name.
fn shipped() -> Vec<(String, Profile)> {
    let dir = profiles_dir();
    let mut profiles: Vec<(String, Profile)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().and_then(|it| it.to_str()) == Some("yaml"))
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
            let profile = Profile::parse(&text)
                .unwrap_or_else(|err| panic!("{} does not validate: {err}", path.display()));
            let stem = path
                .file_stem()
                .and_then(|it| it.to_str())
                .expect("a UTF-8 file name")
                .to_owned();
            (stem, profile)
        })
        .collect();
    profiles.sort_by(|a, b| a.0.cmp(&b.0));
    profiles
}

#[test]
fn the_seven_profiles_validate_with_their_parts() {
    let seen: Vec<(String, String, usize, Architecture, bool, bool)> = shipped()
        .into_iter()
        .map(|(stem, profile)| {
            let first = profile.devices()[0].clone();
            assert_eq!(stem, profile.name(), "a profile is named after its file");
            (
                stem,
                first.name,
                profile.device_count(),
                first.architecture,
                first.mig_mode.is_some(),
                profile.has_fabric(),
            )
        })
        .collect();
    let want = |name: &str, part: &str, gpus, arch, mig, fabric| {
        (name.to_owned(), part.to_owned(), gpus, arch, mig, fabric)
    };
    assert_eq!(
        seen,
        vec![
            want(
                "a100",
                "NVIDIA A100-SXM4-40GB",
                8,
                Architecture::Ampere,
                true,
                false
            ),
            want(
                "b200",
                "NVIDIA B200",
                8,
                Architecture::Blackwell,
                true,
                false
            ),
            want(
                "gb200",
                "NVIDIA GB200",
                4,
                Architecture::Blackwell,
                true,
                true
            ),
            want(
                "gb300",
                "NVIDIA GB300 NVL",
                8,
                Architecture::Blackwell,
                true,
                true
            ),
            want(
                "h100",
                "NVIDIA H100 80GB HBM3",
                8,
                Architecture::Hopper,
                true,
                false
            ),
            want("l40s", "NVIDIA L40S", 8, Architecture::Ada, false, false),
            want("t4", "NVIDIA T4", 4, Architecture::Turing, false, false),
        ]
    );
}

/// GPU feature discovery reads `/sys/bus/pci/devices/<bus id>/class` on the host and fails on a
/// non-NVIDIA device there; bus 0 (the root complex) and buses 1 to 6 (the first root ports'
/// devices) are populated on nearly every host, so no shipped GPU sits there.
#[test]
fn no_gpu_sits_where_hosts_put_their_own_devices() {
    for (name, profile) in shipped() {
        for device in profile.devices() {
            let id = device.pci_bus_id;
            assert!(
                id.domain == 0 && id.bus >= 0x07,
                "{name}: GPU {} at {id}: use domain 0000, bus 07 or above",
                device.index
            );
        }
    }
}

/// Board ids follow the bus id as NVML derives them: domain << 16 | bus << 8 | devfn.
#[test]
fn board_ids_follow_the_bus_id() {
    for (name, profile) in shipped() {
        for device in profile.devices() {
            let id = device.pci_bus_id;
            let devfn = u32::from(id.device) << 3 | u32::from(id.function);
            let want = id.domain << 16 | u32::from(id.bus) << 8 | devfn;
            assert_eq!(device.board_id, want, "{name}: GPU {}", device.index);
        }
    }
}

/// nvml_version is `<CUDA major>.<driver version>` and the CUDA version encodes the same major.
#[test]
fn versions_agree() {
    for (name, profile) in shipped() {
        let system = profile.system();
        let major = system.cuda_driver_version / 1000;
        assert_eq!(
            system.nvml_version,
            format!("{major}.{}", system.driver_version),
            "{name}"
        );
    }
}

/// Health and telemetry (issue 22): every shipped profile has every `health` sub-section
/// upstream's configuration gives, with upstream's values for the part.
#[test]
fn every_profile_carries_upstreams_health_values() {
    let seen: Vec<(String, u32, u32, u64, String, Option<u32>)> = shipped()
        .into_iter()
        .map(|(stem, profile)| {
            let health = profile.devices().remove(0).health;
            let complete = health.power.is_some()
                && health.performance_state.is_some()
                && health.clocks_event_reasons.is_some()
                && health.applications_clocks.is_some()
                && health.thermal.is_some()
                && health.fans.is_some()
                && health.bar1_memory.is_some()
                && health.ecc_errors.is_some()
                && health.retired_pages.is_some()
                && health.remapped_rows.is_some()
                && health.board_part_number.is_some()
                && health.vbios_version.is_some()
                && health.inforom.is_some()
                && health.gsp_firmware.is_some()
                && health.display.is_some()
                && health.multi_gpu_board.is_some()
                && health.gpu_operation_mode.is_some()
                && health.virtualization_mode.is_some()
                && health.accounting.is_some();
            assert!(complete, "{stem}: a health sub-section is missing");
            let power = health.power.unwrap_or_else(|| unreachable!());
            let thermal = health.thermal.unwrap_or_else(|| unreachable!());
            let bar1 = health.bar1_memory.unwrap_or_else(|| unreachable!());
            let gsp = health.gsp_firmware.unwrap_or_else(|| unreachable!());
            (
                stem,
                power.enforced_limit_mw,
                thermal.slowdown_c,
                bar1.total,
                gsp.version,
                health.memory_bus_width,
            )
        })
        .collect();
    let want = |name: &str, limit, slowdown, bar1, gsp: &str, bus| {
        (name.to_owned(), limit, slowdown, bar1, gsp.to_owned(), bus)
    };
    assert_eq!(
        seen,
        [
            want("a100", 400_000, 87, 64 << 30, "550.54.15", None),
            want("b200", 1_000_000, 90, 256 << 30, "560.35.03", Some(8192)),
            want("gb200", 1_000_000, 90, 512 << 30, "580.65.06", None),
            want("gb300", 1_400_000, 90, 768 << 30, "570.124.06", None),
            want("h100", 700_000, 87, 256 << 30, "550.163.01", Some(5120)),
            want("l40s", 350_000, 93, 256 << 30, "550.163.01", None),
            want("t4", 70_000, 93, 256 << 30, "550.163.01", None),
        ]
    );
}
