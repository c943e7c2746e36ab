//! The MIG state file (`driver/config/mig-state`, [`crate::paths::Layout::mig_state`];
//! `MOCK_NVML_MIG_STATE` overrides it): each GPU's MIG mode and partition (GPU instances and
//! their compute instances), shared by every process on a node that loads the mock library.
//!
//! Format: UTF-8 text, one record per line, `key=value` fields separated by single spaces, in
//! this order:
//!
//! ```text
//! gpu=0 current=1 pending=1
//! gi gpu=0 id=1 profile=19 start=0 size=1
//! ci gpu=0 gi=1 id=0 profile=0 start=0 size=1
//! ```
//!
//! - A `gpu=` line gives a GPU's MIG mode (`current`, `pending`: 0 disabled, 1 enabled); a GPU
//!   without one keeps its profile's mode.
//! - `gi`: a GPU instance of GPU `gpu` (host index), its id, its profile id (NVML's `info.id`,
//!   not the enum) and its placement in memory slices.
//! - `ci`: a compute instance of GPU instance `gi`, its id, profile id and placement in the GPU
//!   instance's compute slices. A `ci` line names a `gi` line before it.
//!
//! Empty lines and lines starting with `#` are ignored. Writers replace the file whole
//! (temporary file, then rename) under an advisory lock, so a reader never sees a half-made
//! instance. Pure: parsing and formatting only; the mock library reads and writes the file.

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

/// The file's largest accepted size: a reader refuses anything larger.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// The lock file beside the state file (`mig-state.lock`): writers hold an exclusive advisory
/// lock on it while they read, change and replace the state file (the state file itself is
/// replaced by rename, so it cannot carry the lock).
pub fn lock_path(state: &Path) -> PathBuf {
    sibling(state, ".lock")
}

/// The temporary file a writer fills before renaming it over the state file
/// (`mig-state.tmp.<pid>`); a writer that dies before the rename leaves only this file behind,
/// which readers never look at.
pub fn temp_path(state: &Path, pid: u32) -> PathBuf {
    sibling(state, &format!(".tmp.{pid}"))
}

fn sibling(state: &Path, suffix: &str) -> PathBuf {
    let mut name = state.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    state.with_file_name(name)
}

/// A MIG mode: `NVML_DEVICE_MIG_DISABLE` or `NVML_DEVICE_MIG_ENABLE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// 0.
    Disabled,
    /// 1.
    Enabled,
}

/// Where an instance sits: its first slice and how many it occupies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// First slice.
    pub start: u32,
    /// Slices occupied.
    pub size: u32,
}

/// One compute instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComputeInstance {
    /// Unique within its GPU instance.
    pub id: u32,
    /// The compute instance profile id.
    pub profile_id: u32,
    /// Within the GPU instance's compute slices.
    pub placement: Placement,
}

/// One GPU instance and its compute instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInstance {
    /// Unique within the GPU.
    pub id: u32,
    /// The GPU instance profile id (NVML's `info.id`).
    pub profile_id: u32,
    /// In memory slices.
    pub placement: Placement,
    /// Its compute instances, in creation order.
    pub compute: Vec<ComputeInstance>,
}

/// One GPU's MIG mode and partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// The GPU's NVML index on the host.
    pub gpu: u32,
    /// The mode in effect.
    pub current: Mode,
    /// The mode after the next activation.
    pub pending: Mode,
    /// Its GPU instances, in creation order.
    pub instances: Vec<GpuInstance>,
}

/// The whole file: the GPUs it names, in host index order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigState {
    /// One entry per GPU with a `gpu=` line.
    pub gpus: Vec<Gpu>,
}

/// A line that is not a record, or a record naming what does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mig-state line {line}: {reason}: {text:?}")]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub reason: &'static str,
    /// The line as found.
    pub text: String,
}

impl MigState {
    /// The entry of host GPU `gpu`, if the file names it.
    pub fn gpu(&self, gpu: u32) -> Option<&Gpu> {
        self.gpus.iter().find(|entry| entry.gpu == gpu)
    }

    /// The entry of host GPU `gpu`, made with `modes` if the file does not name it yet.
    pub fn gpu_mut(&mut self, gpu: u32, modes: (Mode, Mode)) -> &mut Gpu {
        let position = match self.gpus.iter().position(|entry| entry.gpu >= gpu) {
            Some(at) if self.gpus[at].gpu == gpu => at,
            found => {
                let at = found.unwrap_or(self.gpus.len());
                let (current, pending) = modes;
                let entry = Gpu {
                    gpu,
                    current,
                    pending,
                    instances: Vec::new(),
                };
                self.gpus.insert(at, entry);
                at
            }
        };
        &mut self.gpus[position]
    }
}

impl Gpu {
    /// The GPU instance with id `id`.
    pub fn instance(&self, id: u32) -> Option<&GpuInstance> {
        self.instances.iter().find(|gi| gi.id == id)
    }
}

/// A MIG device's UUID: `MIG-` and a UUID derived from its parent GPU's UUID, its instance ids
/// and its GPU instance's profile and placement (the real driver makes a new one per instance;
/// this one is stable while the instance lives and distinct per device). The mock library
/// answers it and the NRI plugin resolves `MIG-<uuid>` requests with it.
pub fn mig_uuid(parent_uuid: &str, gi: &GpuInstance, ci: u32) -> String {
    let seed = format!(
        "{parent_uuid}/{}/{ci}/{}/{}",
        gi.id, gi.profile_id, gi.placement.start
    );
    let high = fnv1a(0xcbf2_9ce4_8422_2325, &seed);
    let low = fnv1a(high ^ 0x9e37_79b9_7f4a_7c15, &seed);
    let hex: String = high
        .to_be_bytes()
        .into_iter()
        .chain(low.to_be_bytes())
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!(
        "MIG-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

fn fnv1a(seed: u64, text: &str) -> u64 {
    text.bytes().fold(seed, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Formats the whole file.
pub fn format(state: &MigState) -> String {
    let mut out = String::new();
    for gpu in &state.gpus {
        let _ = writeln!(
            out,
            "gpu={} current={} pending={}",
            gpu.gpu,
            bit(gpu.current),
            bit(gpu.pending)
        );
        for gi in &gpu.instances {
            let Placement { start, size } = gi.placement;
            let _ = writeln!(
                out,
                "gi gpu={} id={} profile={} start={start} size={size}",
                gpu.gpu, gi.id, gi.profile_id
            );
            for ci in &gi.compute {
                let Placement { start, size } = ci.placement;
                let _ = writeln!(
                    out,
                    "ci gpu={} gi={} id={} profile={} start={start} size={size}",
                    gpu.gpu, gi.id, ci.id, ci.profile_id
                );
            }
        }
    }
    out
}

fn bit(mode: Mode) -> u8 {
    match mode {
        Mode::Disabled => 0,
        Mode::Enabled => 1,
    }
}

/// Parses the whole file; the first bad line is the error (a file is written whole, so a bad
/// line means a foreign or corrupt file, not half a write).
pub fn parse(text: &str) -> Result<MigState, LineError> {
    let mut state = MigState::default();
    for (number, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        record(&mut state, line).map_err(|reason| LineError {
            line: number + 1,
            reason,
            text: line.to_owned(),
        })?;
    }
    Ok(state)
}

/// Adds one record to `state`.
fn record(state: &mut MigState, line: &str) -> Result<(), &'static str> {
    let fields: Vec<&str> = line.split(' ').collect();
    match fields.as_slice() {
        [gpu, current, pending] => {
            let gpu = number(gpu, "gpu=")?;
            if state.gpu(gpu).is_some() {
                return Err("a second line for this gpu");
            }
            let modes = (mode(current, "current=")?, mode(pending, "pending=")?);
            state.gpu_mut(gpu, modes);
            Ok(())
        }
        ["gi", gpu, id, profile, start, size] => {
            let entry = existing_gpu(state, number(gpu, "gpu=")?)?;
            let id = number(id, "id=")?;
            if entry.instance(id).is_some() {
                return Err("a second gi with this id");
            }
            entry.instances.push(GpuInstance {
                id,
                profile_id: number(profile, "profile=")?,
                placement: placement(start, size)?,
                compute: Vec::new(),
            });
            Ok(())
        }
        ["ci", gpu, gi, id, profile, start, size] => {
            let entry = existing_gpu(state, number(gpu, "gpu=")?)?;
            let gi = number(gi, "gi=")?;
            let instance = entry
                .instances
                .iter_mut()
                .find(|instance| instance.id == gi)
                .ok_or("names a gi not listed before it")?;
            let id = number(id, "id=")?;
            if instance.compute.iter().any(|ci| ci.id == id) {
                return Err("a second ci with this id");
            }
            instance.compute.push(ComputeInstance {
                id,
                profile_id: number(profile, "profile=")?,
                placement: placement(start, size)?,
            });
            Ok(())
        }
        _ => Err("expected a `gpu=`, `gi` or `ci` record"),
    }
}

fn existing_gpu(state: &mut MigState, gpu: u32) -> Result<&mut Gpu, &'static str> {
    state
        .gpus
        .iter_mut()
        .find(|entry| entry.gpu == gpu)
        .ok_or("names a gpu without a `gpu=` line before it")
}

fn placement(start: &str, size: &str) -> Result<Placement, &'static str> {
    Ok(Placement {
        start: number(start, "start=")?,
        size: number(size, "size=")?,
    })
}

fn mode(field: &str, key: &str) -> Result<Mode, &'static str> {
    match field.strip_prefix(key) {
        Some("0") => Ok(Mode::Disabled),
        Some("1") => Ok(Mode::Enabled),
        Some(_) => Err("a mode is 0 or 1"),
        None => Err("a field is missing or out of order"),
    }
}

/// The decimal value after `key`, canonical digits only.
fn number(field: &str, key: &str) -> Result<u32, &'static str> {
    let digits = field
        .strip_prefix(key)
        .ok_or("a field is missing or out of order")?;
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err("a value is not an unsigned number");
    }
    digits.parse().map_err(|_| "a value is over 32 bits")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# written by the mock library
gpu=0 current=1 pending=1
gi gpu=0 id=1 profile=19 start=0 size=1
ci gpu=0 gi=1 id=0 profile=0 start=0 size=1
gi gpu=0 id=2 profile=9 start=4 size=4

gpu=3 current=0 pending=1
";

    #[test]
    fn a_file_round_trips() {
        let state = parse(TEXT).unwrap();
        assert_eq!(state.gpus.len(), 2);
        let gpu = state.gpu(0).unwrap();
        assert_eq!((gpu.current, gpu.pending), (Mode::Enabled, Mode::Enabled));
        assert_eq!(gpu.instances.len(), 2);
        assert_eq!(gpu.instance(1).unwrap().compute.len(), 1);
        assert_eq!(
            gpu.instance(2).unwrap().placement,
            Placement { start: 4, size: 4 }
        );
        assert_eq!(state.gpu(3).unwrap().pending, Mode::Enabled);
        let again = parse(&format(&state)).unwrap();
        assert_eq!(again, state);
        assert!(!format(&state).contains('#'), "comments are not kept");
    }

    #[test]
    fn bad_lines_are_named() {
        for (text, reason) in [
            ("gpu=0 current=2 pending=0", "a mode is 0 or 1"),
            (
                "gpu=x current=0 pending=0",
                "a value is not an unsigned number",
            ),
            (
                "gi gpu=0 id=1 profile=19 start=0 size=1",
                "names a gpu without a `gpu=` line before it",
            ),
            (
                "gpu=0 current=0 pending=0\nci gpu=0 gi=1 id=0 profile=0 start=0 size=1",
                "names a gi not listed before it",
            ),
            (
                "gpu=0 current=0 pending=0\ngpu=0 current=0 pending=0",
                "a second line for this gpu",
            ),
            (
                "gpu=0 pending=0 current=0",
                "a field is missing or out of order",
            ),
            (
                "gpu=0  current=0 pending=0",
                "expected a `gpu=`, `gi` or `ci` record",
            ),
            (
                "gpu=4294967296 current=0 pending=0",
                "a value is over 32 bits",
            ),
        ] {
            let error = parse(text).unwrap_err();
            assert_eq!(error.reason, reason, "{text}");
            assert_eq!(error.line, text.lines().count(), "{text}");
        }
        let twice = "gpu=0 current=1 pending=1\ngi gpu=0 id=1 profile=19 start=0 size=1\n\
                     gi gpu=0 id=1 profile=19 start=1 size=1";
        assert_eq!(parse(twice).unwrap_err().reason, "a second gi with this id");
    }

    #[test]
    fn the_lock_and_temporary_files_sit_beside_the_state_file() {
        let state = Path::new("/var/lib/nvml-mock/driver/config/mig-state");
        assert_eq!(
            lock_path(state),
            Path::new("/var/lib/nvml-mock/driver/config/mig-state.lock")
        );
        assert_eq!(
            temp_path(state, 42),
            Path::new("/var/lib/nvml-mock/driver/config/mig-state.tmp.42")
        );
    }

    #[test]
    fn gpu_mut_keeps_host_order_and_existing_entries() {
        let mut state = parse(TEXT).unwrap();
        let modes = (Mode::Disabled, Mode::Disabled);
        state.gpu_mut(1, modes);
        state.gpu_mut(7, modes);
        assert_eq!(state.gpu_mut(0, modes).current, Mode::Enabled, "kept");
        let order: Vec<u32> = state.gpus.iter().map(|gpu| gpu.gpu).collect();
        assert_eq!(order, vec![0, 1, 3, 7]);
    }
}
