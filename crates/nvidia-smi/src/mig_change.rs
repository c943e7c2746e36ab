//! `nvidia-smi mig -cgi [-C]`, `-cci`, `-dci` and `-dgi` (issue 38): GPU and compute
//! instances created and destroyed through the library, one line per instance as nvidia-smi
//! prints them; the first failure prints `Unable to …: <error>` and `Failed to …: <error>` and
//! ends the run with the library's code, as nvidia-smi does.

use crate::ffi::mig::{Instance, INVALID_ARGUMENT, NOT_FOUND};
use crate::ffi::{Nvml, Return};
use crate::mig::{self, Found, Gpu, Stop};
use crate::mig_cli::{Mig, ProfileSpec};
use crate::mig_view::{self, Step};

/// `-cgi` and `-cci` on `gpus` (any other command changes nothing).
pub fn create(nvml: &Nvml, gpus: &[Gpu], command: &Mig, out: &mut String) -> Result<(), Stop> {
    match command {
        Mig::CreateGpuInstances {
            profiles,
            default_ci,
        } => gpus.iter().try_for_each(|gpu| {
            profiles
                .iter()
                .try_for_each(|spec| create_gi(nvml, *gpu, spec, *default_ci, out))
        }),
        Mig::CreateComputeInstances { profiles, gi } => gpus
            .iter()
            .try_for_each(|gpu| create_cis(nvml, *gpu, profiles, gi.as_deref(), out)),
        _ => Ok(()),
    }
}

/// `-dci` and `-dgi` on `gpus` (any other command changes nothing).
pub fn destroy(nvml: &Nvml, gpus: &[Gpu], command: &Mig, out: &mut String) -> Result<(), Stop> {
    let (gi_filter, ci_filter) = match command {
        Mig::DestroyComputeInstances { gi, ci } => (gi.as_deref(), Some(ci.as_deref())),
        Mig::DestroyGpuInstances { gi } => (gi.as_deref(), None),
        _ => return Ok(()),
    };
    let mut targets = Vec::new();
    for gpu in gpus {
        targets.extend(
            gpu_instances(nvml, *gpu, gi_filter)?
                .into_iter()
                .map(|gi| (*gpu, gi)),
        );
    }
    if targets.is_empty() {
        return mig::none_found(nvml, "GPU instances", out);
    }
    match ci_filter {
        Some(ci_filter) => destroy_cis(nvml, &targets, ci_filter, out),
        None => targets.iter().try_for_each(|(gpu, gi)| {
            let step = Step::DestroyGi {
                gpu: gpu.index,
                gi: gi.info.id,
            };
            nvml.mig()
                .destroy_gi(gi.handle)
                .map_err(failed(nvml, &step))?;
            out.push_str(&mig_view::destroyed_gi(gpu.index, gi.info.id));
            Ok(())
        }),
    }
}

/// The two failure lines of `step` and the code.
fn failed<'a>(nvml: &'a Nvml, step: &'a Step) -> impl Fn(Return) -> Stop + 'a {
    move |code| (mig_view::step_failed(step, &nvml.error_string(code)), code)
}

/// One `-cgi` profile on one GPU, with `-C` its default compute instance.
fn create_gi(
    nvml: &Nvml,
    gpu: Gpu,
    spec: &ProfileSpec,
    default_ci: bool,
    out: &mut String,
) -> Result<(), Stop> {
    let api = nvml.mig();
    let step = Step::CreateGi {
        gpu: gpu.index,
        profile: spec.text(),
    };
    // The table is empty while MIG is off: a name then finds nothing, NOT_SUPPORTED.
    let table = mig::profiles(api, gpu.device).map_err(failed(nvml, &step))?;
    let known = table.iter().find(|row| spec.matches(row.id, &row.name));
    let id = match (spec, known) {
        (_, Some(row)) => row.id,
        (ProfileSpec::Id(id), None) => *id,
        (ProfileSpec::Name(_), None) if table.is_empty() => {
            return Err(failed(nvml, &step)(Return::NOT_SUPPORTED))
        }
        (ProfileSpec::Name(_), None) => return Err(failed(nvml, &step)(INVALID_ARGUMENT)),
    };
    let gi = api.create_gi(gpu.device, id).map_err(failed(nvml, &step))?;
    let info = api.gi_info(gi).map_err(failed(nvml, &step))?;
    let name = known.map_or_else(|| spec.text(), |row| row.name.clone());
    out.push_str(&mig_view::created_gi(gpu.index, info.id, &name, id));
    if default_ci {
        create_ci(nvml, gpu, (gi, info.id), None, out)?;
    }
    Ok(())
}

/// One compute instance of `spec` (`None`: the default, the profile of the most slices the
/// GPU instance offers) in GPU instance `gi` (handle and id).
fn create_ci(
    nvml: &Nvml,
    gpu: Gpu,
    (gi, gi_id): (Instance, u32),
    spec: Option<&ProfileSpec>,
    out: &mut String,
) -> Result<(), Stop> {
    let api = nvml.mig();
    let step = |profile: String| Step::CreateCi {
        gpu: gpu.index,
        gi: gi_id,
        profile,
    };
    let offered = match mig::ci_profiles(api, gi) {
        Ok(offered) => offered,
        Err(code) => {
            let profile = spec.map_or_else(|| "default".to_owned(), ProfileSpec::text);
            return Err(failed(nvml, &step(profile))(code));
        }
    };
    let chosen = match spec {
        Some(spec) => offered.iter().find(|p| spec.matches(p.id, &p.name)),
        None => offered.iter().max_by_key(|profile| profile.slices),
    };
    let profile = match (spec, chosen) {
        (Some(spec), _) => spec.text(),
        (None, Some(chosen)) => chosen.id.to_string(),
        (None, None) => "default".to_owned(),
    };
    let step = step(profile.clone());
    let id = match (spec, chosen) {
        (_, Some(chosen)) => chosen.id,
        (Some(ProfileSpec::Id(id)), None) => *id,
        (None, None) => return Err(failed(nvml, &step)(Return::NOT_SUPPORTED)),
        (Some(ProfileSpec::Name(_)), None) => return Err(failed(nvml, &step)(INVALID_ARGUMENT)),
    };
    let ci = api.create_ci(gi, id).map_err(failed(nvml, &step))?;
    let info = api.ci_info(ci).map_err(failed(nvml, &step))?;
    let name = chosen.map_or(profile, |profile| profile.name.clone());
    out.push_str(&mig_view::created_ci(gpu.index, gi_id, info.id, &name, id));
    Ok(())
}

/// `-cci`: each profile (none: the default) in each GPU instance of `-gi` (none: every one).
fn create_cis(
    nvml: &Nvml,
    gpu: Gpu,
    profiles: &[ProfileSpec],
    gi_filter: Option<&[u32]>,
    out: &mut String,
) -> Result<(), Stop> {
    let targets = gpu_instances(nvml, gpu, gi_filter)?;
    if targets.is_empty() {
        return mig::none_found(nvml, "GPU instances", out);
    }
    for gi in targets {
        let target = (gi.handle, gi.info.id);
        if profiles.is_empty() {
            create_ci(nvml, gpu, target, None, out)?;
        }
        for spec in profiles {
            create_ci(nvml, gpu, target, Some(spec), out)?;
        }
    }
    Ok(())
}

/// The GPU instances `-gi` names (each looked up by id: one the library does not find fails
/// with its error), or all of the GPU's.
fn gpu_instances(nvml: &Nvml, gpu: Gpu, filter: Option<&[u32]>) -> Result<Vec<Found>, Stop> {
    let api = nvml.mig();
    let Some(ids) = filter else {
        return mig::gpu_instances(api, gpu.device)
            .map_err(mig::stop(nvml, "Failed to list GPU instances"));
    };
    ids.iter()
        .map(|id| {
            let what = format!(
                "Unable to find GPU instance ID {id:>2} on GPU {:>2}",
                gpu.index
            );
            let handle = api
                .gi_by_id(gpu.device, *id)
                .map_err(mig::stop(nvml, &what))?;
            let info = api.gi_info(handle).map_err(mig::stop(nvml, &what))?;
            let name = String::new();
            Ok(Found { handle, info, name })
        })
        .collect()
}

/// `-dci`: the compute instances of `targets` that `-ci` names (one it names but a GPU
/// instance lacks fails NOT_FOUND), or all of them.
fn destroy_cis(
    nvml: &Nvml,
    targets: &[(Gpu, Found)],
    filter: Option<&[u32]>,
    out: &mut String,
) -> Result<(), Stop> {
    let api = nvml.mig();
    let mut destroyed = 0;
    for (gpu, gi) in targets {
        let list_failed = mig::stop(nvml, "Failed to list compute instances");
        let found = mig::compute_instances(api, gi.handle).map_err(list_failed)?;
        let step = |ci| Step::DestroyCi {
            gpu: gpu.index,
            gi: gi.info.id,
            ci,
        };
        for missing in filter.unwrap_or_default() {
            if found.iter().all(|ci| ci.info.id != *missing) {
                return Err(failed(nvml, &step(*missing))(NOT_FOUND));
            }
        }
        for ci in found.iter().filter(|ci| mig::wanted(filter, ci.info.id)) {
            api.destroy_ci(ci.handle)
                .map_err(failed(nvml, &step(ci.info.id)))?;
            out.push_str(&mig_view::destroyed_ci(gpu.index, gi.info.id, ci.info.id));
            destroyed += 1;
        }
    }
    if destroyed == 0 {
        return mig::none_found(nvml, "compute instances", out);
    }
    Ok(())
}
