//! Validation of a parsed document: every error names the offending field.

use crate::seen::Seen;

use crate::error::{invalid, Error, Result};
use crate::{
    ids::{check_gpu_uuid, PciBusId},
    mig::GpuInstanceProfiles,
    schema::{Clocks, DeviceDefaults, DeviceEntry, Document, Memory, NvLink, Pcie, Utilization},
};

/// NVML's string buffer limits (including the terminating NUL).
const NAME_BUFFER: usize = 96;
const SERIAL_BUFFER: usize = 30;
const VERSION_BUFFER: usize = 80;
const UUID_BUFFER: usize = 96;
/// `NVML_NVLINK_MAX_LINKS`.
const MAX_NVLINKS: u32 = 36;

pub(crate) fn document(doc: &Document) -> Result<()> {
    if doc.version != 1 {
        return invalid(
            "version",
            format!("is {}, only 1 is supported", doc.version),
        );
    }
    if doc.name.trim().is_empty() {
        return invalid("name", "must not be empty");
    }
    system(doc)?;
    defaults(&doc.device_defaults)?;
    if doc.devices.is_empty() {
        return invalid("devices", "must list at least one GPU");
    }
    let mut uuids = Seen::new();
    let mut bus_ids = Seen::new();
    let mut minors = Seen::new();
    for (position, entry) in doc.devices.iter().enumerate() {
        let at = |field: &str| format!("devices[{position}].{field}");
        device(entry, position, &doc.device_defaults)?;
        if let Some(first) = uuids.insert(entry.uuid.to_ascii_lowercase(), position) {
            return invalid(
                at("uuid"),
                format!("{:?} is also devices[{first}].uuid", entry.uuid),
            );
        }
        let bus_id = PciBusId::parse(&entry.pci_bus_id).map_err(|message| Error::Invalid {
            field: at("pci_bus_id"),
            message,
        })?;
        if let Some(first) = bus_ids.insert(bus_id, position) {
            return invalid(
                at("pci_bus_id"),
                format!("{:?} is also devices[{first}].pci_bus_id", entry.pci_bus_id),
            );
        }
        if let Some(first) = minors.insert(entry.minor_number, position) {
            return invalid(
                at("minor_number"),
                format!(
                    "{} is also devices[{first}].minor_number",
                    entry.minor_number
                ),
            );
        }
    }
    nvswitches_are_not_gpus(doc, &bus_ids)?;
    activity(doc)?;
    if let Some(topology) = &doc.pcie_topology {
        crate::pcie::resolve(topology, doc.devices.len(), doc.devices.len())?;
    }
    if let Some(cap) = doc.system.num_devices {
        if cap == 0 || cap as usize > doc.devices.len() {
            return invalid(
                "system.num_devices",
                format!(
                    "is {cap}, must be in 1..={} (the number of devices)",
                    doc.devices.len()
                ),
            );
        }
    }
    Ok(())
}

/// Validates the activity sections (`crate::activity`) in `device_defaults` and every `devices[]` entry.
fn activity(doc: &Document) -> Result<()> {
    let defaults = &doc.device_defaults;
    let sections = std::iter::once((
        "device_defaults".to_owned(),
        &defaults.processes,
        &defaults.codecs,
        &defaults.pci_class,
        &defaults.platform,
    ))
    .chain(doc.devices.iter().enumerate().map(|(n, entry)| {
        (
            format!("devices[{n}]"),
            &entry.processes,
            &entry.codecs,
            &entry.pci_class,
            &entry.platform,
        )
    }));
    for (at, processes, codecs, pci_class, platform) in sections {
        if let Some(platform) = platform {
            crate::activity::check_platform(&format!("{at}.platform"), platform)?;
        }
        if let Some(processes) = processes {
            crate::activity::check_processes(&format!("{at}.processes"), processes)?;
        }
        if let Some(codecs) = codecs {
            crate::activity::check_codecs(&format!("{at}.codecs"), codecs)?;
        }
        if let Some(class) = pci_class {
            crate::activity::check_pci_class(&format!("{at}.pci_class"), class)?;
        }
    }
    Ok(())
}

fn system(doc: &Document) -> Result<()> {
    let system = &doc.system;
    version_like(
        "system.driver_version",
        &system.driver_version,
        2..=3,
        "X.Y or X.Y.Z (digits)",
    )?;
    version_like(
        "system.nvml_version",
        &system.nvml_version,
        2..=4,
        "<cuda major>.<driver version>",
    )?;
    check_len(
        "system.driver_version",
        &system.driver_version,
        VERSION_BUFFER,
    )?;
    check_len("system.nvml_version", &system.nvml_version, VERSION_BUFFER)?;
    if system.cuda_driver_version <= 0 {
        return invalid(
            "system.cuda_driver_version",
            format!(
                "is {}, must be major*1000 + minor*10 (e.g. 13000)",
                system.cuda_driver_version
            ),
        );
    }
    Ok(())
}

/// `text` is `parts` dot-separated runs of digits; otherwise an error on `field` saying it must
/// look like `shape`.
fn version_like(
    field: &str,
    text: &str,
    parts: std::ops::RangeInclusive<usize>,
    shape: &str,
) -> Result<()> {
    let pieces: Vec<&str> = text.split('.').collect();
    let digits = pieces
        .iter()
        .all(|piece| !piece.is_empty() && piece.bytes().all(|b| b.is_ascii_digit()));
    if parts.contains(&pieces.len()) && digits {
        return Ok(());
    }
    invalid(field, format!("{text:?} must look like {shape}"))
}

fn defaults(defaults: &DeviceDefaults) -> Result<()> {
    let at = |field: &str| format!("device_defaults.{field}");
    name(&at("name"), &defaults.name)?;
    if let Some(serial) = &defaults.serial {
        check_len(&at("serial"), serial, SERIAL_BUFFER)?;
    }
    memory(&at("memory"), &defaults.memory)?;
    pcie(&at("pcie"), &defaults.pcie)?;
    utilization(&at("utilization"), &defaults.utilization)?;
    clocks(&at("clocks"), &defaults.clocks)?;
    gpu_instance_profiles(
        &at("gpu_instance_profiles"),
        defaults.gpu_instance_profiles.as_ref(),
    )?;
    nvlink(&at("nvlink"), &defaults.nvlink)?;
    // health and telemetry (issue 22)
    if_set(
        &at("health"),
        defaults.health.as_ref(),
        crate::health::validate::validate,
    )
}

/// `NVML_GPU_INSTANCE_PROFILE_COUNT`: profile arguments are `0..COUNT`.
pub(crate) const GPU_INSTANCE_PROFILE_COUNT: u32 = 0x11;

fn gpu_instance_profiles(field: &str, profiles: Option<&GpuInstanceProfiles>) -> Result<()> {
    let Some(GpuInstanceProfiles::Known(rows)) = profiles else {
        return Ok(());
    };
    let mut seen = Seen::new();
    for (position, row) in rows.iter().enumerate() {
        if row.profile >= GPU_INSTANCE_PROFILE_COUNT {
            return invalid(
                format!("{field}[{position}].profile"),
                format!(
                    "is {}, NVML_GPU_INSTANCE_PROFILE_* run 0..={}",
                    row.profile,
                    GPU_INSTANCE_PROFILE_COUNT - 1
                ),
            );
        }
        if let Some(first) = seen.insert(row.profile, position) {
            return invalid(
                format!("{field}[{position}].profile"),
                format!("{} is also {field}[{first}].profile", row.profile),
            );
        }
    }
    crate::mig::validate(field, rows)
}

fn device(entry: &DeviceEntry, position: usize, defaults: &DeviceDefaults) -> Result<()> {
    let at = |field: &str| format!("devices[{position}].{field}");
    if entry.index as usize != position {
        return invalid(
            at("index"),
            format!(
                "is {}, expected {position}: list devices in index order 0, 1, 2, …",
                entry.index
            ),
        );
    }
    check_gpu_uuid(&entry.uuid).map_err(|message| Error::Invalid {
        field: at("uuid"),
        message,
    })?;
    check_len(&at("uuid"), &entry.uuid, UUID_BUFFER)?;
    gpu_instance_profiles(
        &at("gpu_instance_profiles"),
        entry.gpu_instance_profiles.as_ref(),
    )?;
    if let Some(serial) = &entry.serial {
        check_len(&at("serial"), serial, SERIAL_BUFFER)?;
    }
    if entry.board_id.is_none() && defaults.board_id.is_none() {
        return invalid(
            at("board_id"),
            "is missing and device_defaults.board_id is not set",
        );
    }
    if_set(&at("name"), entry.name.as_deref(), name)?;
    if_set(&at("memory"), entry.memory.as_ref(), memory)?;
    if_set(&at("pcie"), entry.pcie.as_ref(), pcie)?;
    if_set(&at("utilization"), entry.utilization.as_ref(), utilization)?;
    if_set(&at("clocks"), entry.clocks.as_ref(), clocks)?;
    if_set(&at("nvlink"), entry.nvlink.as_ref(), nvlink)?;
    // health and telemetry (issue 22): the entry's sub-sections over the defaults'
    let health = crate::health::resolve(defaults.health.as_ref(), entry.health.as_ref());
    crate::health::validate::validate(&at("health"), &health)
}

/// Runs `check` on a per-device override that is set; an unset one keeps the default, which
/// [`defaults`] checked.
fn if_set<T: ?Sized>(
    field: &str,
    value: Option<&T>,
    check: fn(&str, &T) -> Result<()>,
) -> Result<()> {
    value.map_or(Ok(()), |value| check(field, value))
}

fn name(field: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return invalid(field, "must not be empty");
    }
    check_len(field, value, NAME_BUFFER)
}

fn memory(field: &str, memory: &Memory) -> Result<()> {
    if memory.total == 0 {
        return invalid(format!("{field}.total"), "must be greater than 0");
    }
    match memory.reserved.checked_add(memory.used) {
        Some(taken) if taken <= memory.total => Ok(()),
        _ => invalid(
            field,
            format!(
                "reserved ({}) + used ({}) exceeds total ({})",
                memory.reserved, memory.used, memory.total
            ),
        ),
    }
}

fn pcie(field: &str, pcie: &Pcie) -> Result<()> {
    if pcie.r#gen == 0 || pcie.r#gen > pcie.max_gen {
        return invalid(
            format!("{field}.gen"),
            format!(
                "is {}, must be in 1..=max_gen ({})",
                pcie.r#gen, pcie.max_gen
            ),
        );
    }
    if pcie.width == 0 || pcie.width > pcie.max_width {
        return invalid(
            format!("{field}.width"),
            format!(
                "is {}, must be in 1..=max_width ({})",
                pcie.width, pcie.max_width
            ),
        );
    }
    Ok(())
}

fn utilization(field: &str, utilization: &Utilization) -> Result<()> {
    for (name, value) in [("gpu", utilization.gpu), ("memory", utilization.memory)] {
        if value > 100 {
            return invalid(
                format!("{field}.{name}"),
                format!("is {value}, a percentage must be ≤ 100"),
            );
        }
    }
    Ok(())
}

fn clocks(field: &str, clocks: &Clocks) -> Result<()> {
    let pairs = [
        ("graphics", clocks.graphics, clocks.max_graphics),
        ("sm", clocks.sm, clocks.max_sm),
        ("mem", clocks.mem, clocks.max_mem),
        ("video", clocks.video, clocks.max_video),
    ];
    for (name, current, max) in pairs {
        if current > max {
            return invalid(
                format!("{field}.{name}"),
                format!("is {current} MHz, above max_{name} ({max})"),
            );
        }
    }
    Ok(())
}

fn nvlink(field: &str, nvlink: &NvLink) -> Result<()> {
    if nvlink.links > MAX_NVLINKS {
        return invalid(
            format!("{field}.links"),
            format!("is {}, NVML allows at most {MAX_NVLINKS}", nvlink.links),
        );
    }
    if nvlink.active > nvlink.links {
        return invalid(
            format!("{field}.active"),
            format!("is {}, more than links ({})", nvlink.active, nvlink.links),
        );
    }
    if let Some(capabilities) = &nvlink.capabilities {
        for (c, capability) in capabilities.iter().enumerate() {
            if capabilities[..c].contains(capability) {
                return invalid(
                    format!("{field}.capabilities[{c}]"),
                    format!("{capability:?} is listed twice"),
                );
            }
        }
    }
    nvswitches(field, nvlink)
}

/// No NVSwitch sits at a GPU's PCI address (remote PCI info must tell a switch from a GPU).
fn nvswitches_are_not_gpus(doc: &Document, gpus: &Seen<PciBusId, usize>) -> Result<()> {
    let defaults = std::iter::once((
        "device_defaults.nvlink".to_owned(),
        &doc.device_defaults.nvlink,
    ));
    let overrides = doc
        .devices
        .iter()
        .enumerate()
        .filter_map(|(position, entry)| {
            let nvlink = entry.nvlink.as_ref()?;
            Some((format!("devices[{position}].nvlink"), nvlink))
        });
    for (field, nvlink) in defaults.chain(overrides) {
        for (s, switch) in nvlink.switches.iter().enumerate() {
            // `nvlink` checked that it parses.
            let Ok(bus_id) = PciBusId::parse(&switch.pci_bus_id) else {
                continue;
            };
            if let Some(gpu) = gpus.get(&bus_id) {
                return invalid(
                    format!("{field}.switches[{s}].pci_bus_id"),
                    format!(
                        "{:?} is devices[{gpu}].pci_bus_id: an NVSwitch needs its own address",
                        switch.pci_bus_id
                    ),
                );
            }
        }
    }
    Ok(())
}

fn nvswitches(field: &str, nvlink: &NvLink) -> Result<()> {
    let mut seen = Seen::new();
    let mut total: u32 = 0;
    for (s, switch) in nvlink.switches.iter().enumerate() {
        let at = format!("{field}.switches[{s}]");
        let bus_id = PciBusId::parse(&switch.pci_bus_id).map_err(|message| Error::Invalid {
            field: format!("{at}.pci_bus_id"),
            message,
        })?;
        if let Some(first) = seen.insert(bus_id, s) {
            return invalid(
                format!("{at}.pci_bus_id"),
                format!(
                    "{:?} is also {field}.switches[{first}].pci_bus_id",
                    switch.pci_bus_id
                ),
            );
        }
        if switch.links == 0 {
            return invalid(format!("{at}.links"), "must be at least 1");
        }
        total = total.saturating_add(switch.links);
    }
    if !nvlink.switches.is_empty() && total != nvlink.links {
        return invalid(
            format!("{field}.switches"),
            format!(
                "carry {total} links, but links is {}: each link goes to exactly one switch",
                nvlink.links
            ),
        );
    }
    Ok(())
}

fn check_len(field: &str, value: &str, buffer: usize) -> Result<()> {
    if value.len() >= buffer {
        return invalid(
            field,
            format!(
                "is {} bytes, NVML's buffer holds at most {}",
                value.len(),
                buffer - 1
            ),
        );
    }
    Ok(())
}
