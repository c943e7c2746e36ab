//! The MIG capability table, `/proc/driver/nvidia-caps/mig-minors` (staged at
//! [`crate::paths::Layout::mig_minors`]): which minor of the `nvidia-caps` device major guards
//! each MIG capability. A process reaches a MIG device through two nodes
//! `/dev/nvidia-caps/nvidia-cap<N>`: its GPU instance's access capability and its compute
//! instance's, beside the parent GPU's `/dev/nvidia<minor>`.
//!
//! Format (NVIDIA's MIG user guide, "Device Nodes and Capabilities"; parsed by
//! nvidia-container-toolkit and go-nvlib `pkg/nvcaps`): one `<capability> <minor>` per line,
//!
//! ```text
//! config 1
//! monitor 2
//! gpu0/gi0/access 3
//! gpu0/gi0/ci0/access 4
//! …
//! gpu0/gi0/ci7/access 11
//! gpu0/gi1/access 12
//! …
//! gpu31/gi14/ci7/access 4322
//! ```
//!
//! `gpu<N>` is the GPU's device minor (not its NVML index). The minors are fixed, whatever
//! instances exist: per GPU 15 GPU instances (`gi0`..`gi14`) of 1 + 8 capabilities each (the
//! instance's own, then `ci0`..`ci7`), so `gpu<g>/gi<i>/access` is `3 + 135 g + 9 i` and its
//! `ci<c>` one more than that plus `c`, which the guide's `gpu31/gi14/ci7/access 4322` and the
//! DRA driver's notes (`gpu3/gi3/ci3/access 439`, `gpu6/gi11/ci7/access 920`) confirm. The real
//! driver lists all 32 GPU minors; the stager lists the profile's GPUs (the numbering is the
//! same). Pure.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// `config`: the capability to create and destroy instances, minor 1.
pub const CONFIG: (&str, u32) = ("config", 1);
/// `monitor`: the capability to see every instance, minor 2.
pub const MONITOR: (&str, u32) = ("monitor", 2);
/// GPU instance ids a GPU has capabilities for (`gi0`..`gi14`).
pub const GPU_INSTANCES: u32 = 15;
/// Compute instance ids a GPU instance has capabilities for (`ci0`..`ci7`).
pub const COMPUTE_INSTANCES: u32 = 8;

/// Capabilities per GPU instance: its own and its compute instances'.
const PER_GI: u32 = 1 + COMPUTE_INSTANCES;
/// Capabilities per GPU.
const PER_GPU: u32 = GPU_INSTANCES * PER_GI;
/// The minor of `gpu0/gi0/access`.
const FIRST_GPU_MINOR: u32 = MONITOR.1 + 1;

/// `gpu<gpu>/gi<gi>/access`, the GPU instance's access capability.
pub fn gi_name(gpu: u32, gi: u32) -> String {
    format!("gpu{gpu}/gi{gi}/access")
}

/// `gpu<gpu>/gi<gi>/ci<ci>/access`, the compute instance's access capability.
pub fn ci_name(gpu: u32, gi: u32, ci: u32) -> String {
    format!("gpu{gpu}/gi{gi}/ci{ci}/access")
}

/// The minor of `gpu<gpu>/gi<gi>/access` (`gpu` the GPU's device minor); `None` past `gi14` or
/// past `u32`.
pub fn gi_minor(gpu: u32, gi: u32) -> Option<u32> {
    if gi >= GPU_INSTANCES {
        return None;
    }
    gpu.checked_mul(PER_GPU)?
        .checked_add(FIRST_GPU_MINOR + gi * PER_GI)
}

/// The minor of `gpu<gpu>/gi<gi>/ci<ci>/access`; `None` past `ci7`, `gi14` or `u32`.
pub fn ci_minor(gpu: u32, gi: u32, ci: u32) -> Option<u32> {
    if ci >= COMPUTE_INSTANCES {
        return None;
    }
    gi_minor(gpu, gi)?.checked_add(1 + ci)
}

/// The GPU and compute instance minors that give access to MIG device `(gi, ci)` of the GPU with
/// device minor `gpu`.
pub fn device_minors(gpu: u32, gi: u32, ci: u32) -> Option<[u32; 2]> {
    Some([gi_minor(gpu, gi)?, ci_minor(gpu, gi, ci)?])
}

/// The whole table for the GPUs with these device minors, in the driver's order.
pub fn format(gpu_minors: &[u32]) -> String {
    let mut out = String::new();
    for (name, minor) in [CONFIG, MONITOR] {
        let _ = writeln!(out, "{name} {minor}");
    }
    for &gpu in gpu_minors {
        for gi in 0..GPU_INSTANCES {
            let Some(minor) = gi_minor(gpu, gi) else {
                continue;
            };
            let _ = writeln!(out, "{} {minor}", gi_name(gpu, gi));
            for ci in 0..COMPUTE_INSTANCES {
                let _ = writeln!(out, "{} {}", ci_name(gpu, gi, ci), minor + 1 + ci);
            }
        }
    }
    out
}

/// The capability files of the MIG table, as the driver shows them under
/// `/proc/driver/nvidia/capabilities` (MIG user guide, "Device Nodes and Capabilities"):
/// `mig/config`, `mig/monitor`, then per GPU `gpu<minor>/mig/gi<i>/access` and
/// `gpu<minor>/mig/gi<i>/ci<c>/access`, each naming its `nvidia-cap<N>` minor ([`access_file`]).
/// NVIDIA's consumers read the files of the instances NVML gave them (the device plugin's MIG
/// device paths, the DRA driver's MIG CDI specs); the real driver makes a GPU or compute
/// instance's files when it makes the instance, the stager makes every id's at once, as it makes
/// every `nvidia-cap<N>` node: the files are fixed by the ids alone. Paths relative to the
/// capabilities directory, with their minor and mode, in the table's order.
pub fn capability_files(gpu_minors: &[u32]) -> Vec<(String, u32, u32)> {
    let mut files = vec![
        ("mig/config".to_owned(), CONFIG.1, CONFIG_MODE),
        ("mig/monitor".to_owned(), MONITOR.1, ACCESS_MODE),
    ];
    for &gpu in gpu_minors {
        for gi in 0..GPU_INSTANCES {
            let Some(minor) = gi_minor(gpu, gi) else {
                continue;
            };
            files.push((format!("gpu{gpu}/mig/gi{gi}/access"), minor, ACCESS_MODE));
            for ci in 0..COMPUTE_INSTANCES {
                files.push((
                    format!("gpu{gpu}/mig/gi{gi}/ci{ci}/access"),
                    minor + 1 + ci,
                    ACCESS_MODE,
                ));
            }
        }
    }
    files
}

/// `DeviceFileMode` of `mig/config`: 0400, root only (the guide's example).
pub const CONFIG_MODE: u32 = 0o400;
/// `DeviceFileMode` of `mig/monitor` and of the instances' access capabilities: 0444.
pub const ACCESS_MODE: u32 = 0o444;

/// A capability file's contents, as the driver prints it and NVIDIA's parsers read it
/// (`DeviceFileMinor`, `DeviceFileMode` in decimal, `DeviceFileModify` 1: the driver keeps the
/// node's mode).
pub fn access_file(minor: u32, mode: u32) -> String {
    format!("DeviceFileMinor: {minor}\nDeviceFileMode: {mode}\nDeviceFileModify: 1\n")
}

/// The table as capability name → minor; lines that are not `<name> <minor>` are skipped, as
/// nvidia-container-toolkit skips them.
pub fn parse(text: &str) -> BTreeMap<String, u32> {
    text.lines()
        .filter_map(|line| {
            let (name, minor) = line.trim().split_once(' ')?;
            Some((name.to_owned(), minor.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_formula_matches_nvidias_published_lines() {
        assert_eq!(gi_minor(0, 0), Some(3));
        assert_eq!(ci_minor(0, 0, 0), Some(4));
        assert_eq!(ci_minor(0, 0, 7), Some(11));
        assert_eq!(gi_minor(0, 1), Some(12));
        assert_eq!(ci_minor(3, 3, 3), Some(439));
        assert_eq!(ci_minor(6, 11, 7), Some(920));
        assert_eq!(ci_minor(31, 14, 6), Some(4321));
        assert_eq!(ci_minor(31, 14, 7), Some(4322));
        assert_eq!(device_minors(0, 1, 0), Some([12, 13]));
    }

    #[test]
    fn ids_past_the_table_have_no_minor() {
        assert_eq!(gi_minor(0, 15), None);
        assert_eq!(ci_minor(0, 0, 8), None);
        assert_eq!(gi_minor(u32::MAX, 0), None);
        assert_eq!(device_minors(0, 15, 0), None);
    }

    #[test]
    fn the_table_starts_as_the_drivers_and_parses_back() {
        let text = format(&[0, 1]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[..5],
            [
                "config 1",
                "monitor 2",
                "gpu0/gi0/access 3",
                "gpu0/gi0/ci0/access 4",
                "gpu0/gi0/ci1/access 5"
            ]
        );
        assert_eq!(lines.len(), 2 + 2 * 135);
        assert_eq!(lines.last(), Some(&"gpu1/gi14/ci7/access 272"));
        let table = parse(&text);
        assert_eq!(table.len(), lines.len());
        assert_eq!(table.get("monitor"), Some(&2));
        assert_eq!(table.get(&gi_name(1, 2)), gi_minor(1, 2).as_ref());
        assert_eq!(table.get(&ci_name(1, 2, 3)), ci_minor(1, 2, 3).as_ref());
    }

    #[test]
    fn the_capability_files_name_the_tables_minors() {
        let files = capability_files(&[0, 1]);
        assert_eq!(files.len(), format(&[0, 1]).lines().count());
        assert_eq!(files[0], ("mig/config".to_owned(), 1, 0o400));
        assert_eq!(files[1], ("mig/monitor".to_owned(), 2, 0o444));
        let table = parse(&format(&[0, 1]));
        for (path, minor, _) in &files[2..] {
            // `gpu1/mig/gi2/ci3/access` is the table's `gpu1/gi2/ci3/access`.
            let name = path.replacen("/mig/", "/", 1);
            assert_eq!(table.get(&name), Some(minor), "{path}");
        }
        assert_eq!(
            access_file(12, ACCESS_MODE),
            "DeviceFileMinor: 12\nDeviceFileMode: 292\nDeviceFileModify: 1\n"
        );
    }

    #[test]
    fn parse_skips_what_is_not_a_line_of_the_table() {
        let table = parse("config 1\ninvalidLine\ngpu0/gi0/ci0/access x\n\ngpu0/gi0/access 3\n");
        assert_eq!(table.len(), 2);
        assert_eq!(table.get("gpu0/gi0/access"), Some(&3));
    }
}
