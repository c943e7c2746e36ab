//! `-mig`, `nvidia-smi mig …` and `-L`'s MIG devices, through the library (issue 38): every
//! value printed is what the library answered (`ffi/mig.rs`), printed by `mig_view.rs`; every
//! failed call prints the library's error string as nvidia-smi does and ends the run with its
//! code. Creating and destroying instances is `mig_change.rs`; `main.rs` dispatches.
//!
//! The GPUs: `-i`'s, else every GPU. The listings and the destroying commands take only the
//! GPUs whose MIG mode is enabled (none: `No MIG-enabled devices found.`, exit 6, as
//! nvidia-smi); `-cgi` and `-cci` with `-i` ask the library whatever the mode, so its answer
//! (NOT_SUPPORTED while MIG is off) is what they print.

use crate::collect::Failure;
use crate::ffi::mig::{
    CiProfile, GiProfile, Instance, InstanceInfo, MigApi, COMPUTE_INSTANCE_PROFILE_COUNT,
    GPU_INSTANCE_PROFILE_COUNT, INVALID_ARGUMENT, NOT_FOUND,
};
use crate::ffi::{Device, Nvml, Return};
use crate::mig_cli::Mig;
use crate::mig_view::{self, InstanceRow, ProfileRow};

/// What a MIG command printed, and how it ended: the text for stderr (possibly empty) and the
/// code to exit with.
#[derive(Debug, Default)]
pub struct Outcome {
    /// stdout.
    pub out: String,
    /// stderr and the NVML code, when the command failed.
    pub failure: Option<Stop>,
}

/// A GPU a command works on.
#[derive(Debug, Clone, Copy)]
pub struct Gpu {
    /// Its index.
    pub index: u32,
    /// Its handle.
    pub device: Device,
}

/// A GPU or compute instance with its info and its profile's name.
pub struct Found {
    /// The handle.
    pub handle: Instance,
    /// Id, profile id, placement.
    pub info: InstanceInfo,
    /// Its profile's name.
    pub name: String,
}

/// What stopped a command: stderr's text (possibly empty) and the NVML code to exit with.
pub type Stop = (String, Return);

/// The listings: `-lgip`, `-lgipp`, `-lgi` and `-lci` (any other command lists nothing).
pub fn list(nvml: &Nvml, gpus: &[Gpu], command: &Mig, out: &mut String) -> Result<(), Stop> {
    match command {
        Mig::ListProfiles => list_profiles(nvml, gpus, out),
        Mig::ListPlacements => list_placements(nvml, gpus, out),
        Mig::ListGpuInstances { gi } => list_gpu_instances(nvml, gpus, gi.as_deref(), out),
        Mig::ListComputeInstances { gi, ci } => {
            list_compute_instances(nvml, gpus, gi.as_deref(), ci.as_deref(), out)
        }
        _ => Ok(()),
    }
}

/// `-i`'s GPU or every GPU; unless `any_mode`, only those with MIG enabled.
pub fn select(
    nvml: &Nvml,
    selected: Option<u32>,
    any_mode: bool,
    out: &mut String,
) -> Result<Vec<Gpu>, Stop> {
    let count = nvml
        .device_count()
        .map_err(stop(nvml, "Unable to count the GPUs"))?;
    let indices: Vec<u32> = match selected {
        Some(index) if index < count => vec![index],
        Some(index) => {
            return Err((
                format!("No devices were found with index {index}\n"),
                NOT_FOUND,
            ))
        }
        None => (0..count).collect(),
    };
    let mut gpus = Vec::new();
    for index in indices {
        let device = nvml
            .handle(index)
            .map_err(stop(nvml, &format!("Unable to get GPU {index}")))?;
        let enabled = matches!(nvml.mig_mode(device), Ok((1, _)));
        if any_mode || enabled {
            gpus.push(Gpu { index, device });
        }
    }
    if gpus.is_empty() {
        out.push_str("No MIG-enabled devices found.\n");
        return Err((String::new(), NOT_FOUND));
    }
    Ok(gpus)
}

/// Tags a failed call: `<what>: <the library's error string>`.
pub fn stop<'a>(nvml: &'a Nvml, what: &'a str) -> impl Fn(Return) -> Stop + 'a {
    move |code| (format!("{what}: {}\n", nvml.error_string(code)), code)
}

/// `-mig 0|1`.
pub fn set_mode(
    nvml: &Nvml,
    selected: Option<u32>,
    enable: bool,
    out: &mut String,
) -> Result<(), Stop> {
    for gpu in select(nvml, selected, true, out)? {
        let bus = nvml.pci_bus_id(gpu.device).map_err(stop(
            nvml,
            &format!("Unable to get the PCI bus id of GPU {}", gpu.index),
        ))?;
        match nvml.mig().set_mig_mode(gpu.device, enable) {
            Ok(Return::SUCCESS) => out.push_str(&mig_view::mode_set(enable, &bus)),
            Ok(status) => out.push_str(&mig_view::mode_pending(
                enable,
                &bus,
                &nvml.error_string(status),
                status == IN_USE,
            )),
            Err(code) => {
                let text = mig_view::mode_failed(enable, &bus, &nvml.error_string(code));
                return Err((
                    format!("{text}Terminating early due to previous errors.\n"),
                    code,
                ));
            }
        }
    }
    out.push_str("All done.\n");
    Ok(())
}

/// `NVML_ERROR_IN_USE`.
const IN_USE: Return = Return(19);

/// Every profile enum `0..count` the library answers for; NOT_SUPPORTED and
/// INVALID_ARGUMENT (a profile it does not support or know) left out.
fn supported<T>(count: u32, ask: impl Fn(u32) -> Result<T, Return>) -> Result<Vec<T>, Return> {
    let mut found = Vec::new();
    for profile in 0..count {
        match ask(profile) {
            Ok(answer) => found.push(answer),
            Err(Return::NOT_SUPPORTED | INVALID_ARGUMENT) => {}
            Err(code) => return Err(code),
        }
    }
    Ok(found)
}

/// The GPU instance profiles the library offers, in nvidia-smi's order.
pub fn profiles(api: &MigApi, device: Device) -> Result<Vec<GiProfile>, Return> {
    let mut profiles = supported(GPU_INSTANCE_PROFILE_COUNT, |profile| {
        api.gi_profile(device, profile)
    })?;
    mig_view::sort_profiles(&mut profiles);
    Ok(profiles)
}

/// The compute instance profiles a GPU instance offers.
pub fn ci_profiles(api: &MigApi, gi: Instance) -> Result<Vec<CiProfile>, Return> {
    supported(COMPUTE_INSTANCE_PROFILE_COUNT, |profile| {
        api.ci_profile(gi, profile)
    })
}

/// The instances of each profile (`(id, instance count, name)`), by profile, then by id:
/// `list` lists a profile's handles, `info` reads one.
fn instances(
    profiles: impl IntoIterator<Item = (u32, u32, String)>,
    list: impl Fn(u32, u32) -> Result<Vec<Instance>, Return>,
    info: impl Fn(Instance) -> Result<InstanceInfo, Return>,
) -> Result<Vec<Found>, Return> {
    let mut found = Vec::new();
    for (id, capacity, name) in profiles {
        let mut of_profile = Vec::new();
        for handle in list(id, capacity)? {
            let info = info(handle)?;
            let name = name.clone();
            of_profile.push(Found { handle, info, name });
        }
        of_profile.sort_by_key(|instance| instance.info.id);
        found.extend(of_profile);
    }
    Ok(found)
}

/// A GPU's GPU instances: by profile in `-lgip`'s order, then by id.
pub fn gpu_instances(api: &MigApi, device: Device) -> Result<Vec<Found>, Return> {
    let profiles = profiles(api, device)?;
    instances(
        profiles.into_iter().map(|p| (p.id, p.instances, p.name)),
        |id, capacity| api.gpu_instances(device, id, capacity),
        |handle| api.gi_info(handle),
    )
}

/// A GPU instance's compute instances, by profile, then by id.
pub fn compute_instances(api: &MigApi, gi: Instance) -> Result<Vec<Found>, Return> {
    let profiles = ci_profiles(api, gi)?;
    instances(
        profiles.into_iter().map(|p| (p.id, p.instances, p.name)),
        |id, capacity| api.compute_instances(gi, id, capacity),
        |handle| api.ci_info(handle),
    )
}

/// Whether `id` passes an optional `-gi`/`-ci` filter.
pub fn wanted(filter: Option<&[u32]>, id: u32) -> bool {
    filter.is_none_or(|ids| ids.contains(&id))
}

/// `-lgip`.
fn list_profiles(nvml: &Nvml, gpus: &[Gpu], out: &mut String) -> Result<(), Stop> {
    let failed = || stop(nvml, "Failed to display GPU instance profiles");
    let api = nvml.mig();
    let mut listed = Vec::new();
    for gpu in gpus {
        for profile in profiles(api, gpu.device).map_err(failed())? {
            let free = api.gi_remaining(gpu.device, profile.id).map_err(failed())?;
            listed.push((gpu.index, profile, free));
        }
    }
    let rows: Vec<ProfileRow<'_>> = listed
        .iter()
        .map(|(gpu, profile, free)| ProfileRow {
            gpu: *gpu,
            profile,
            free: *free,
        })
        .collect();
    out.push_str(&mig_view::profiles_table(&rows));
    Ok(())
}

/// `-lgipp`.
fn list_placements(nvml: &Nvml, gpus: &[Gpu], out: &mut String) -> Result<(), Stop> {
    let failed = || stop(nvml, "Failed to display GPU instance possible placements");
    let api = nvml.mig();
    for gpu in gpus {
        for profile in profiles(api, gpu.device).map_err(failed())? {
            let placements = api.placements(gpu.device, profile.id).map_err(failed())?;
            out.push_str(&mig_view::placements_line(
                gpu.index,
                profile.id,
                &placements,
            ));
        }
    }
    Ok(())
}

/// `No GPU instances found: Not Found` (or compute instances), exit NOT_FOUND.
pub fn none_found(nvml: &Nvml, what: &str, out: &mut String) -> Result<(), Stop> {
    out.push_str(&format!(
        "No {what} found: {}\n",
        nvml.error_string(NOT_FOUND)
    ));
    Err((String::new(), NOT_FOUND))
}

/// `-lgi`.
fn list_gpu_instances(
    nvml: &Nvml,
    gpus: &[Gpu],
    filter: Option<&[u32]>,
    out: &mut String,
) -> Result<(), Stop> {
    let mut rows = Vec::new();
    for gpu in gpus {
        let found = gpu_instances(nvml.mig(), gpu.device)
            .map_err(stop(nvml, "Failed to display GPU instances"))?;
        for gi in found.into_iter().filter(|gi| wanted(filter, gi.info.id)) {
            rows.push(InstanceRow {
                gpu: gpu.index,
                gi: gi.info.id,
                name: gi.name,
                info: gi.info,
            });
        }
    }
    if rows.is_empty() {
        return none_found(nvml, "GPU instances", out);
    }
    out.push_str(&mig_view::gpu_instances_table(&rows));
    Ok(())
}

/// `-lci`.
fn list_compute_instances(
    nvml: &Nvml,
    gpus: &[Gpu],
    gi_filter: Option<&[u32]>,
    ci_filter: Option<&[u32]>,
    out: &mut String,
) -> Result<(), Stop> {
    let failed = || stop(nvml, "Failed to display compute instances");
    let api = nvml.mig();
    let (mut rows, mut any_gi) = (Vec::new(), false);
    for gpu in gpus {
        let found = gpu_instances(api, gpu.device).map_err(failed())?;
        for gi in found.into_iter().filter(|gi| wanted(gi_filter, gi.info.id)) {
            any_gi = true;
            for ci in compute_instances(api, gi.handle).map_err(failed())? {
                if wanted(ci_filter, ci.info.id) {
                    rows.push(InstanceRow {
                        gpu: gpu.index,
                        gi: gi.info.id,
                        name: ci.name,
                        info: ci.info,
                    });
                }
            }
        }
    }
    match (any_gi, rows.is_empty()) {
        (false, _) => none_found(nvml, "GPU instances", out),
        (true, true) => none_found(nvml, "compute instances", out),
        (true, false) => {
            out.push_str(&mig_view::compute_instances_table(&rows));
            Ok(())
        }
    }
}

/// `-L`'s lines for a GPU's MIG devices (none on a GPU without MIG or with MIG disabled).
pub fn list_lines(nvml: &Nvml, device: Device, parent_name: &str) -> Result<String, Failure> {
    let api = nvml.mig();
    let what = |what: &'static str| move |code| (format!("MIG devices: {what}"), code);
    let max = match api.max_mig_devices(device) {
        Err(Return::NOT_SUPPORTED) => return Ok(String::new()),
        other => other.map_err(what("count"))?,
    };
    let (mut out, mut index) = (String::new(), 0);
    for slot in 0..max {
        let mig = match api.mig_device(device, slot) {
            Err(NOT_FOUND | INVALID_ARGUMENT) => continue,
            other => other.map_err(what("handle"))?,
        };
        let name = nvml.name(mig).map_err(what("name"))?;
        let uuid = nvml.uuid(mig).map_err(what("uuid"))?;
        let name = mig_view::mig_device_name(&name, parent_name);
        out.push_str(&mig_view::mig_device_line(&name, index, &uuid));
        index += 1;
    }
    Ok(out)
}
