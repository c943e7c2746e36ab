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
