//! How nvidia-smi prints MIG (issue 38), as pure functions of what the library answered: the
//! `-lgip`, `-lgi` and `-lci` tables (the column layout of real nvidia-smi output people pasted
//! into public issues: 79, 57 and 70 characters wide), `-lgipp`'s placement lines, `-L`'s MIG
//! device lines and the messages of `-mig`, `-cgi`, `-cci`, `-dci` and `-dgi`.

use crate::ffi::mig::{GiProfile, InstanceInfo};

/// A profile's name as nvidia-smi prints it: `MIG ` and the library's name (kept if the
/// library's name already starts so).
pub fn display_name(name: &str) -> String {
    if name.starts_with("MIG ") {
        name.to_owned()
    } else {
        format!("MIG {name}")
    }
}

/// nvidia-smi's order of the profiles: by slices, then memory, then id (so on H100 19, 20, 15,
/// 14, 9, 5, 0, as `-lgip` prints them).
pub fn sort_profiles(profiles: &mut [GiProfile]) {
    profiles.sort_by_key(|profile| (profile.slices, profile.memory_mib, profile.id));
}

/// One `-lgip` row: the GPU, the profile, how many more instances of it fit now.
pub struct ProfileRow<'a> {
    /// The GPU's index.
    pub gpu: u32,
    /// The profile.
    pub profile: &'a GiProfile,
    /// `nvmlDeviceGetGpuInstanceRemainingCapacity`.
    pub free: u32,
}

const PROFILES_HEADER: [&str; 4] = [
    "| GPU instance profiles:                                                      |",
    "| GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC  |",
    "|                              Free/Total   GiB              CE    JPEG  OFA  |",
    "|=============================================================================|",
];

/// `nvidia-smi mig -lgip`.
pub fn profiles_table(rows: &[ProfileRow<'_>]) -> String {
    let lines = rows.iter().map(|row| {
        let profile = row.profile;
        let engines = profile.engines;
        let memory = format!("{:.2}", profile.memory_mib as f64 / 1024.0);
        let p2p = if profile.p2p { "Yes" } else { "No" };
        let first = format!(
            "|{:>4}  {:<16}  {:>2}{:>6}/{:<2}       {memory:<11}{p2p:<7}{:<7}{:<6}{:<4}|",
            row.gpu,
            display_name(&profile.name),
            profile.id,
            row.free,
            profile.instances,
            engines.multiprocessors,
            engines.decoders,
            engines.encoders,
        );
        let second = format!(
            "|{:60}{:<7}{:<6}{:<4}|",
            "",
            format!("{:>2}", engines.copy),
            engines.jpegs,
            engines.ofas,
        );
        vec![first, second]
    });
    boxed(&PROFILES_HEADER, lines)
}

/// One `-lgipp` line: `GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1` (`Placement :` for
/// a single one).
pub fn placements_line(gpu: u32, profile_id: u32, placements: &[(u32, u32)]) -> String {
    let starts: Vec<String> = placements
        .iter()
        .map(|(start, _)| start.to_string())
        .collect();
    let size = placements.first().map_or(0, |(_, size)| *size);
    let label = if placements.len() == 1 {
        "Placement :"
    } else {
        "Placements:"
    };
    format!(
        "GPU {gpu:>2} Profile ID {profile_id:>2} {label} {{{}}}:{size}\n",
        starts.join(",")
    )
}

/// One `-lgi` row, or (with its GPU instance id) one `-lci` row.
pub struct InstanceRow {
    /// The GPU's index.
    pub gpu: u32,
    /// The GPU instance a compute instance is in (`-lci` only).
    pub gi: u32,
    /// The profile's name, as the library gives it.
    pub name: String,
    /// Id, profile id and placement.
    pub info: InstanceInfo,
}

const GPU_INSTANCES_HEADER: [&str; 4] = [
    "| GPU instances:                                        |",
    "| GPU   Name             Profile  Instance   Placement  |",
    "|                          ID       ID       Start:Size |",
    "|=======================================================|",
];

/// `nvidia-smi mig -lgi`.
pub fn gpu_instances_table(rows: &[InstanceRow]) -> String {
    let lines = rows.iter().map(|row| {
        let name = display_name(&row.name);
        vec![format!(
            "|{:>4}  {name:<16}{}",
            row.gpu,
            ids_and_placement(row.info, 9)
        )]
    });
    boxed(&GPU_INSTANCES_HEADER, lines)
}

/// A row's end: profile id, instance id (right-aligned in `id_width`), `start:size`.
fn ids_and_placement(info: InstanceInfo, id_width: usize) -> String {
    format!(
        "{:>6}{:>id_width$}{:>11}:{:<6}|",
        info.profile_id, info.id, info.start, info.size
    )
}

const COMPUTE_INSTANCES_HEADER: [&str; 5] = [
    "| Compute instances:                                                 |",
    "| GPU     GPU       Name             Profile   Instance   Placement  |",
    "|       Instance                       ID        ID       Start:Size |",
    "|         ID                                                         |",
    "|====================================================================|",
];

/// `nvidia-smi mig -lci`.
pub fn compute_instances_table(rows: &[InstanceRow]) -> String {
    let lines = rows.iter().map(|row| {
        let name = display_name(&row.name);
        let end = ids_and_placement(row.info, 10);
        vec![format!(
            "|{:>4}{:>7}       {name:<16}{end}",
            row.gpu, row.gi
        )]
    });
    boxed(&COMPUTE_INSTANCES_HEADER, lines)
}

/// A table: a border, the header lines, then each row's lines followed by a border.
fn boxed(header: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let width = header.first().map_or(0, |line| line.len());
    let border = format!("+{}+\n", "-".repeat(width.saturating_sub(2)));
    let mut out = border.clone();
    for line in header {
        out.push_str(line);
        out.push('\n');
    }
    for lines in rows {
        for line in lines {
            out.push_str(&line);
            out.push('\n');
        }
        out.push_str(&border);
    }
    out
}

/// A MIG device's profile name (`MIG 1g.10gb`) from its NVML name, which is its GPU's name
/// followed by it (`NVIDIA H100 80GB HBM3 MIG 1g.10gb`).
pub fn mig_device_name(device_name: &str, parent_name: &str) -> String {
    let rest = device_name
        .strip_prefix(parent_name)
        .map(str::trim)
        .filter(|rest| !rest.is_empty());
    match rest {
        Some(rest) => display_name(rest),
        None => match device_name.find("MIG ") {
            Some(at) => device_name[at..].to_owned(),
            None => device_name.to_owned(),
        },
    }
}

/// `-L`'s line for a MIG device under its GPU.
pub fn mig_device_line(name: &str, index: u32, uuid: &str) -> String {
    format!("  {name:<16}Device {index:>2}: (UUID: {uuid})\n")
}

/// `Enabled` / `Disabled`, and `enable` / `disable` for messages.
fn mode_words(enable: bool) -> (&'static str, &'static str) {
    if enable {
        ("Enabled", "enable")
    } else {
        ("Disabled", "disable")
    }
}

/// `-mig`'s line for a GPU whose mode changed now.
pub fn mode_set(enable: bool, bus: &str) -> String {
    format!("{} MIG Mode for GPU {bus}\n", mode_words(enable).0)
}

/// `-mig`'s lines when the library left the mode pending (`status`: the activation status's
/// error string; `in_use`: it was IN_USE).
pub fn mode_pending(enable: bool, bus: &str, status: &str, in_use: bool) -> String {
    let word = mode_words(enable).1;
    let advice = if in_use {
        format!(
            "{bus} is currently being used by one or more other processes (e.g. CUDA application or a monitoring application such as another instance of nvidia-smi). Please first kill all processes using the device and retry the command or reboot the system to make MIG mode effective."
        )
    } else {
        format!("Reboot the system or try nvidia-smi --gpu-reset to make MIG mode effective on GPU {bus}")
    };
    format!("Warning: MIG mode is in pending {word} state for GPU {bus}:{status}\n{advice}\n")
}

/// `-mig`'s line when the library refused.
pub fn mode_failed(enable: bool, bus: &str, error: &str) -> String {
    format!(
        "Unable to {} MIG Mode for GPU {bus}: {error}\n",
        mode_words(enable).1
    )
}

/// `-cgi`'s line for a GPU instance made.
pub fn created_gi(gpu: u32, gi: u32, name: &str, profile_id: u32) -> String {
    format!(
        "Successfully created GPU instance ID {gi:>2} on GPU {gpu:>2} using profile {} (ID {profile_id:>2})\n",
        display_name(name)
    )
}

/// `-cgi -C`'s and `-cci`'s line for a compute instance made.
pub fn created_ci(gpu: u32, gi: u32, ci: u32, name: &str, profile_id: u32) -> String {
    format!(
        "Successfully created compute instance ID {ci:>2} on GPU {gpu:>2} GPU instance ID {gi:>2} using profile {} (ID {profile_id:>2})\n",
        display_name(name)
    )
}

/// `-dci`'s line for a compute instance destroyed.
pub fn destroyed_ci(gpu: u32, gi: u32, ci: u32) -> String {
    format!("Successfully destroyed compute instance ID {ci:>2} from GPU {gpu:>2} GPU instance ID {gi:>2}\n")
}

/// `-dgi`'s line for a GPU instance destroyed.
pub fn destroyed_gi(gpu: u32, gi: u32) -> String {
    format!("Successfully destroyed GPU instance ID {gi:>2} from GPU {gpu:>2}\n")
}

/// What failed, for the `Unable to …: <error>` line and the `Failed to …: <error>` line after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Creating a GPU instance of a profile (as the user named it) on a GPU.
    CreateGi { gpu: u32, profile: String },
    /// Creating a compute instance in a GPU instance.
    CreateCi { gpu: u32, gi: u32, profile: String },
    /// Destroying a compute instance.
    DestroyCi { gpu: u32, gi: u32, ci: u32 },
    /// Destroying a GPU instance.
    DestroyGi { gpu: u32, gi: u32 },
}

/// The two lines nvidia-smi prints when a step fails with `error` (the library's string).
pub fn step_failed(step: &Step, error: &str) -> String {
    let (unable, failed) = match step {
        Step::CreateGi { gpu, profile } => (
            format!("create a GPU instance on GPU {gpu:>2} using profile {profile}"),
            "create GPU instances",
        ),
        Step::CreateCi { gpu, gi, profile } => (
            format!("create a compute instance on GPU {gpu:>2} GPU instance ID {gi:>2} using profile {profile}"),
            "create compute instances",
        ),
        Step::DestroyCi { gpu, gi, ci } => (
            format!("destroy compute instance ID {ci:>2} from GPU {gpu:>2} GPU instance ID {gi:>2}"),
            "destroy compute instances",
        ),
        Step::DestroyGi { gpu, gi } => (
            format!("destroy GPU instance ID {gi:>2} from GPU {gpu:>2}"),
            "destroy GPU instances",
        ),
    };
    format!("Unable to {unable}: {error}\nFailed to {failed}: {error}\n")
}

#[cfg(test)]
#[path = "mig_view_tests.rs"]
mod tests;
