//! `mig_view`'s output against lines of real nvidia-smi output (pasted into public issues:
//! NVIDIA/gpu-operator#1303 for `-lgip`, NVIDIA/DCGM#138 for `-lgi`, the MIG user guide for
//! `-lgipp`, `-lci` and the messages).

use super::*;
use crate::ffi::mig::Engines;

fn profile(id: u32, name: &str, slices: u32, memory_mib: u64, engines: [u32; 6]) -> GiProfile {
    GiProfile {
        id,
        p2p: false,
        slices,
        instances: 7,
        engines: Engines::from_words(&engines),
        memory_mib,
        name: name.to_owned(),
    }
}

#[test]
fn lgip_rows_line_up_with_real_output() {
    // GB200's first row, as a real GB200 printed it.
    let gb200 = profile(19, "1g.24gb", 1, 20 * 1024, [18, 2, 1, 0, 1, 0]);
    let table = profiles_table(&[ProfileRow {
        gpu: 0,
        profile: &gb200,
        free: 7,
    }]);
    let border = format!("+{}+", "-".repeat(77));
    let expected = [
        border.as_str(),
        "| GPU instance profiles:                                                      |",
        "| GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC  |",
        "|                              Free/Total   GiB              CE    JPEG  OFA  |",
        "|=============================================================================|",
        "|   0  MIG 1g.24gb       19     7/7        20.00      No     18     1     0   |",
        "|                                                             2     1     0   |",
        border.as_str(),
    ];
    assert_eq!(table.lines().collect::<Vec<_>>(), expected);
    // H100's 7g: three-digit SMs, single-digit id, memory 79.25 GiB, 8 copy engines.
    let mut full = profile(0, "7g.80gb", 7, 81152, [132, 8, 7, 0, 7, 1]);
    full.instances = 1;
    let table = profiles_table(&[ProfileRow {
        gpu: 3,
        profile: &full,
        free: 0,
    }]);
    let rows: Vec<&str> = table.lines().skip(5).take(2).collect();
    assert_eq!(
        rows,
        [
            "|   3  MIG 7g.80gb        0     0/1        79.25      No     132    7     0   |",
            "|                                                             8     7     1   |",
        ]
    );
}

#[test]
fn profiles_sort_as_nvidia_smi_lists_them() {
    let mut profiles = vec![
        profile(0, "7g.80gb", 7, 81152, [0; 6]),
        profile(14, "2g.20gb", 2, 20096, [0; 6]),
        profile(20, "1g.10gb+me", 1, 9984, [0; 6]),
        profile(15, "1g.20gb", 1, 20096, [0; 6]),
        profile(19, "1g.10gb", 1, 9984, [0; 6]),
        profile(5, "4g.40gb", 4, 40448, [0; 6]),
        profile(9, "3g.40gb", 3, 40448, [0; 6]),
    ];
    sort_profiles(&mut profiles);
    let ids: Vec<u32> = profiles.iter().map(|profile| profile.id).collect();
    assert_eq!(ids, [19, 20, 15, 14, 9, 5, 0]);
}

#[test]
fn lgipp_lines() {
    let sevens: Vec<(u32, u32)> = (0..7).map(|start| (start, 1)).collect();
    assert_eq!(
        placements_line(0, 19, &sevens),
        "GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1\n"
    );
    assert_eq!(
        placements_line(0, 9, &[(0, 4), (4, 4)]),
        "GPU  0 Profile ID  9 Placements: {0,4}:4\n"
    );
    assert_eq!(
        placements_line(1, 0, &[(0, 8)]),
        "GPU  1 Profile ID  0 Placement : {0}:8\n"
    );
}

/// A row; `info` is `[id, profile id, start, size]`.
fn row(gpu: u32, gi: u32, name: &str, info: [u32; 4]) -> InstanceRow {
    let name = name.to_owned();
    let info = InstanceInfo::from(info);
    InstanceRow {
        gpu,
        gi,
        name,
        info,
    }
}

#[test]
fn lgi_and_lci_tables_line_up_with_real_output() {
    let table = gpu_instances_table(&[
        row(0, 0, "1g.10gb", [10, 19, 3, 1]),
        row(0, 0, "MIG 3g.40gb", [2, 9, 4, 4]),
    ]);
    let border = format!("+{}+", "-".repeat(55));
    let expected = [
        border.as_str(),
        "| GPU instances:                                        |",
        "| GPU   Name             Profile  Instance   Placement  |",
        "|                          ID       ID       Start:Size |",
        "|=======================================================|",
        "|   0  MIG 1g.10gb         19       10          3:1     |",
        border.as_str(),
        "|   0  MIG 3g.40gb          9        2          4:4     |",
        border.as_str(),
    ];
    assert_eq!(table.lines().collect::<Vec<_>>(), expected);
    let table = compute_instances_table(&[
        row(0, 10, "1g.10gb", [0, 0, 0, 1]),
        row(0, 2, "4g.20gb", [0, 3, 0, 4]),
    ]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 10);
    assert_eq!(
        lines[1],
        "| Compute instances:                                                 |"
    );
    assert_eq!(
        lines[6],
        "|   0     10       MIG 1g.10gb          0         0          0:1     |"
    );
    assert_eq!(
        lines[8],
        "|   0      2       MIG 4g.20gb          3         0          0:4     |"
    );
    assert_eq!(lines[9], format!("+{}+", "-".repeat(68)));
}

#[test]
fn mig_devices_under_their_gpu() {
    let name = mig_device_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "NVIDIA H100 80GB HBM3");
    assert_eq!(name, "MIG 1g.10gb");
    assert_eq!(
        mig_device_line(&name, 0, "MIG-1"),
        "  MIG 1g.10gb     Device  0: (UUID: MIG-1)\n"
    );
    assert_eq!(mig_device_name("Other MIG 2g.20gb", "GPU"), "MIG 2g.20gb");
    assert_eq!(mig_device_name("plain", "GPU"), "plain");
}

#[test]
fn messages_as_nvidia_smi_prints_them() {
    let bus = "00000000:4F:00.0";
    assert_eq!(
        mode_set(true, bus),
        format!("Enabled MIG Mode for GPU {bus}\n")
    );
    assert_eq!(
        mode_set(false, bus),
        format!("Disabled MIG Mode for GPU {bus}\n")
    );
    let pending = mode_pending(true, bus, "In use by another client", true);
    assert!(pending.starts_with(&format!(
        "Warning: MIG mode is in pending enable state for GPU {bus}:In use by another client\n{bus} is currently being used"
    )));
    assert_eq!(
        mode_pending(false, bus, "Not Supported", false),
        format!("Warning: MIG mode is in pending disable state for GPU {bus}:Not Supported\nReboot the system or try nvidia-smi --gpu-reset to make MIG mode effective on GPU {bus}\n")
    );
    assert_eq!(
        mode_failed(true, bus, "Not Supported"),
        format!("Unable to enable MIG Mode for GPU {bus}: Not Supported\n")
    );
    assert_eq!(
        created_gi(0, 13, "1g.10gb", 19),
        "Successfully created GPU instance ID 13 on GPU  0 using profile MIG 1g.10gb (ID 19)\n"
    );
    assert_eq!(
        created_ci(0, 3, 0, "MIG 2g.20gb", 1),
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  3 using profile MIG 2g.20gb (ID  1)\n"
    );
    assert_eq!(
        destroyed_ci(0, 7, 0),
        "Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID  7\n"
    );
    assert_eq!(
        destroyed_gi(0, 1),
        "Successfully destroyed GPU instance ID  1 from GPU  0\n"
    );
}

#[test]
fn failures_print_what_failed_and_the_librarys_error() {
    let create = Step::CreateGi {
        gpu: 0,
        profile: "9".to_owned(),
    };
    assert_eq!(
        step_failed(&create, "Insufficient Resources"),
        "Unable to create a GPU instance on GPU  0 using profile 9: Insufficient Resources\nFailed to create GPU instances: Insufficient Resources\n"
    );
    assert_eq!(
        step_failed(&Step::DestroyGi { gpu: 0, gi: 1 }, "In use by another client"),
        "Unable to destroy GPU instance ID  1 from GPU  0: In use by another client\nFailed to destroy GPU instances: In use by another client\n"
    );
    let ci = Step::CreateCi {
        gpu: 1,
        gi: 2,
        profile: "0".to_owned(),
    };
    assert!(step_failed(&ci, "Not Found").starts_with(
        "Unable to create a compute instance on GPU  1 GPU instance ID  2 using profile 0: Not Found\n"
    ));
    let dci = Step::DestroyCi {
        gpu: 0,
        gi: 7,
        ci: 0,
    };
    assert!(step_failed(&dci, "Not Found")
        .ends_with("Failed to destroy compute instances: Not Found\n"));
}
