//! NVML event sets over the fault injection control file (`node_layout::xid` documents its
//! format) and the MIG state file: the registry of sets, what each set has been told, and the
//! bounded wait.
//!
//! - A set's handle is the address of a small allocation that is never freed, so a freed or
//!   foreign handle is recognised by lookup alone and is never issued again.
//! - Supported event types, per GPU ([`supported`]): Xid critical errors always; single- and
//!   double-bit ECC errors when the profile has ECC on (`ecc.current`, as the ECC counters);
//!   MIG config changes when the GPU is MIG-capable (the profile answers `nvmlDeviceGetMigMode`).
//!   Registering another defined type is NOT_SUPPORTED, with nothing registered, as nvml.h
//!   documents; bits nvml.h does not define are INVALID_ARGUMENT.
//! - Delivery: every injection in the file for a GPU the set registered for the injection's
//!   type is delivered once to that set, in file order: `xid=` as `nvmlEventTypeXidCriticalError`
//!   with the Xid as data, `ecc=single|double` as `nvmlEventTypeSingleBitEccError` /
//!   `nvmlEventTypeDoubleBitEccError` with data 0 (nvml.h: data is the Xid for Xid events, 0
//!   otherwise). An injection is a standing fault until the file is cleared, so a set
//!   registered after the line was written still receives it once (a restarted consumer sees
//!   the fault again). A set forgets the ids that left the file, and the writer never reuses
//!   an id. GPUs are named by their host index (the stager writes the file on the host); a set
//!   registers a GPU by its host index too, and the wait's caller maps the event back to the
//!   process's visible index ([`crate::visible`]), so a fault on a GPU hidden from the process
//!   reaches none of its sets.
//! - Lost GPUs: a standing Xid 79 ("GPU has fallen off the bus") marks its GPU lost. A set that
//!   registered the GPU (for any type) first gets every event ready for it, the Xid 79 event
//!   included (nvml.h: "if some events are ready to be delivered at the time of the call,
//!   function returns immediately"), then one wait answers `NVML_ERROR_GPU_IS_LOST` ("if a GPU
//!   has fallen off the bus or is otherwise inaccessible"): once per set and injection, so a
//!   consumer that loops on the wait (NVIDIA's device plugin and DRA driver retry at once on
//!   an error) does not spin; later waits block and time out as before. The state is the
//!   file's, not the process's: it survives `nvmlShutdown`/`nvmlInit` and ends with a clear.
//! - MIG config changes: a set registered on a GPU for `nvmlEventMigConfigChange` remembers the
//!   GPU's instances (GPU and compute instances, [`crate::mig_store`], shared by every process)
//!   as they were at registration; a wait that finds them different delivers one event (data
//!   0, instance ids none) and remembers the new partition.
//! - Waiting: with nothing pending, [`wait`] re-reads the files every [`SLICE`] until the
//!   timeout and then answers TIMEOUT; it never spins.
//! - The file: `MOCK_NVML_XID_FILE`, else `config/xid-injections` in the driver root the
//!   library was loaded from ([`crate::locate`]); neither, or no file: no injections. A file
//!   that is not a regular file or is over `node_layout::xid::MAX_FILE_BYTES` is skipped for
//!   that read (nothing delivered, nothing forgotten); malformed lines are ignored, with one
//!   warning per process.
//!
//! The last `nvmlShutdown` forgets every set ([`forget_all`]).

use std::{
    path::PathBuf,
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex, MutexGuard,
    },
    time::{Duration, Instant},
};

use node_layout::{
    env::MOCK_NVML_XID_FILE,
    mig_state::{GpuInstance, MigState},
    paths::XID_INJECTIONS_IN_DRIVER,
    xid::{self, Fault},
};
use nvml_profile::Device;

use crate::abi::{self, NvmlReturn};

/// The event types `device` can report: Xid critical errors; ECC errors with ECC on; MIG
/// config changes on a MIG-capable GPU.
pub fn supported(device: &Device) -> u64 {
    let ecc = if device.ecc.is_some_and(|ecc| ecc.current) {
        abi::EVENT_TYPE_SINGLE_BIT_ECC_ERROR | abi::EVENT_TYPE_DOUBLE_BIT_ECC_ERROR
    } else {
        0
    };
    let mig = if device.mig_mode.is_some() {
        abi::EVENT_TYPE_MIG_CONFIG_CHANGE
    } else {
        0
    };
    abi::EVENT_TYPE_XID_CRITICAL_ERROR | ecc | mig
}

/// The event type and data an injection is delivered as.
fn as_event(fault: Fault) -> (u64, u64) {
    match fault {
        Fault::Xid(code) => (abi::EVENT_TYPE_XID_CRITICAL_ERROR, code),
        Fault::Ecc(xid::Ecc::Single) => (abi::EVENT_TYPE_SINGLE_BIT_ECC_ERROR, 0),
        Fault::Ecc(xid::Ecc::Double) => (abi::EVENT_TYPE_DOUBLE_BIT_ECC_ERROR, 0),
    }
}

/// The GPU instances of host GPU `gpu` in `state` (none when the file does not name it).
fn partition(state: &MigState, gpu: usize) -> Vec<GpuInstance> {
    u32::try_from(gpu)
        .ok()
        .and_then(|gpu| state.gpu(gpu))
        .map(|entry| entry.instances.clone())
        .unwrap_or_default()
}

/// How long a wait with nothing pending sleeps before reading the file again.
pub const SLICE: Duration = Duration::from_millis(50);

/// One event a wait delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The GPU's host index, as the control file names it (the caller maps it to the visible
    /// index whose slot is the handle; they differ when `crate::visible` filters).
    pub gpu: usize,
    /// `nvmlEventType*`.
    pub event_type: u64,
    /// The Xid; 0 for other types.
    pub data: u64,
}

/// One event set: the types registered per GPU, the injections already delivered, the lost
/// GPUs already reported and the MIG partitions last seen.
///
/// Vecs with linear scans (a few GPUs, a few standing injections): less code in the library
/// than B-tree maps.
#[derive(Debug, Default)]
pub struct EventSet {
    registered: Vec<(usize, u64)>,
    delivered: Vec<u64>,
    lost: Vec<u64>,
    mig_seen: Vec<(usize, Vec<GpuInstance>)>,
}

impl EventSet {
    /// Adds `types` for `gpu`, which supports `supported`: INVALID_ARGUMENT for bits nvml.h does
    /// not define, NOT_SUPPORTED (nothing registered) for a defined type it cannot report.
    /// `partition` gives the GPU's MIG instances now, asked only when MIG config changes are
    /// registered for the first time.
    pub fn register(
        &mut self,
        gpu: usize,
        (types, supported): (u64, u64),
        partition: impl FnOnce() -> Vec<GpuInstance>,
    ) -> Result<(), NvmlReturn> {
        if types & !abi::EVENT_TYPE_ALL != 0 {
            return Err(abi::ERROR_INVALID_ARGUMENT);
        }
        if types & !supported != 0 {
            return Err(abi::ERROR_NOT_SUPPORTED);
        }
        let watching = self.mig_seen.iter().any(|(at, _)| *at == gpu);
        if types & abi::EVENT_TYPE_MIG_CONFIG_CHANGE != 0 && !watching {
            self.mig_seen.push((gpu, partition()));
        }
        match self.registered.iter_mut().find(|(at, _)| *at == gpu) {
            Some((_, registered)) => *registered |= types,
            None => self.registered.push((gpu, types)),
        }
        Ok(())
    }

    /// Whether a wait needs the MIG partition.
    pub fn watches_mig(&self) -> bool {
        !self.mig_seen.is_empty()
    }

    /// The types registered for host GPU `gpu`, if it is registered at all.
    fn types(&self, gpu: u32) -> Option<u64> {
        self.registered
            .iter()
            .find(|(at, _)| *at == gpu as usize)
            .map(|(_, types)| *types)
    }

    /// The set's next answer given `injections` (the file's current lines) and `mig` (the
    /// partition now, if the set watches it): the first injection not yet delivered for a GPU
    /// registered for its type, else a MIG partition change, else GPU_IS_LOST for a lost GPU
    /// not yet reported, else nothing. Ids no longer present are forgotten.
    pub fn next(
        &mut self,
        injections: &[xid::Injection],
        mig: Option<&MigState>,
    ) -> Result<Option<Event>, NvmlReturn> {
        let present = |id: &u64| injections.iter().any(|injection| injection.id == *id);
        self.delivered.retain(present);
        self.lost.retain(present);
        let ready = injections.iter().find(|injection| {
            let (event_type, _) = as_event(injection.fault);
            let wanted = self
                .types(injection.gpu)
                .is_some_and(|types| types & event_type != 0);
            wanted && !self.delivered.contains(&injection.id)
        });
        if let Some(injection) = ready {
            self.delivered.push(injection.id);
            let (event_type, data) = as_event(injection.fault);
            let gpu = injection.gpu as usize;
            return Ok(Some(Event {
                gpu,
                event_type,
                data,
            }));
        }
        if let Some(event) = mig.and_then(|state| self.mig_change(state)) {
            return Ok(Some(event));
        }
        let lost = injections.iter().find(|injection| {
            injection.fault == Fault::Xid(xid::XID_FALLEN_OFF_THE_BUS)
                && self.types(injection.gpu).is_some()
                && !self.lost.contains(&injection.id)
        });
        match lost {
            Some(injection) => {
                self.lost.push(injection.id);
                Err(abi::ERROR_GPU_IS_LOST)
            }
            None => Ok(None),
        }
    }

    /// The first watched GPU whose partition in `state` differs from the one last seen, now
    /// remembered, as its event.
    fn mig_change(&mut self, state: &MigState) -> Option<Event> {
        let (gpu, seen) = self
            .mig_seen
            .iter_mut()
            .find(|(gpu, seen)| partition(state, *gpu) != *seen)?;
        *seen = partition(state, *gpu);
        Some(Event {
            gpu: *gpu,
            event_type: abi::EVENT_TYPE_MIG_CONFIG_CHANGE,
            data: 0,
        })
    }
}

// ---------------------------------------------------------------- the registry

/// The live sets by handle (a consumer holds a few): a linear scan, as in [`EventSet`].
static SETS: Mutex<Vec<(usize, EventSet)>> = Mutex::new(Vec::new());

fn sets() -> MutexGuard<'static, Vec<(usize, EventSet)>> {
    // Every update is a single insert, remove or field update, so a poisoned lock still holds
    // consistent data.
    SETS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A new empty set's handle.
pub fn create() -> usize {
    let address = Box::leak(Box::new(0u64)) as *mut u64 as usize;
    sets().push((address, EventSet::default()));
    address
}

/// Frees a set: INVALID_ARGUMENT for a handle that is not a live set.
pub fn free(handle: usize) -> Result<(), NvmlReturn> {
    let mut sets = sets();
    let position = sets.iter().position(|(at, _)| *at == handle);
    position
        .map(|position| drop(sets.swap_remove(position)))
        .ok_or(abi::ERROR_INVALID_ARGUMENT)
}

/// Runs `body` on a live set: INVALID_ARGUMENT for anything else.
pub fn with_set<T>(handle: usize, body: impl FnOnce(&mut EventSet) -> T) -> Result<T, NvmlReturn> {
    sets()
        .iter_mut()
        .find(|(at, _)| *at == handle)
        .map(|(_, set)| body(set))
        .ok_or(abi::ERROR_INVALID_ARGUMENT)
}

/// `nvmlDeviceRegisterEvents` on a live set: `types` for host GPU `gpu`, which supports
/// `supported` ([`EventSet::register`]); the MIG partition is read only if needed.
pub fn register(handle: usize, gpu: usize, types: u64, supported: u64) -> Result<(), NvmlReturn> {
    let now = || {
        crate::mig_store::read()
            .map(|state| partition(&state, gpu))
            .unwrap_or_default()
    };
    with_set(handle, |set| set.register(gpu, (types, supported), now))?
}

/// Forgets every set (the last `nvmlShutdown`).
pub fn forget_all() {
    sets().clear();
}

// ---------------------------------------------------------------- the control file

/// Where the injections are read from, if anywhere.
pub fn xid_file() -> Option<PathBuf> {
    match std::env::var_os(MOCK_NVML_XID_FILE).filter(|value| !value.is_empty()) {
        Some(path) => Some(PathBuf::from(path)),
        None => crate::locate::driver_root().map(|root| root.join(XID_INJECTIONS_IN_DRIVER)),
    }
}

/// Why one read of the control file gave nothing to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// Not a regular file, over the size limit, or a read error.
    Skipped,
}

static WARNED: AtomicBool = AtomicBool::new(false);

/// The injections in the file at `path`; a missing file has none.
pub fn read_injections(path: Option<&std::path::Path>) -> Result<Vec<xid::Injection>, Unreadable> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(_) => return Err(Unreadable::Skipped),
    };
    if !metadata.is_file() || metadata.len() > xid::MAX_FILE_BYTES {
        return Err(Unreadable::Skipped);
    }
    let text = std::fs::read_to_string(path).map_err(|_| Unreadable::Skipped)?;
    let (injections, errors) = xid::parse(&text);
    if let Some(error) = errors.first() {
        if !WARNED.swap(true, Ordering::Relaxed) {
            eprintln!("[MOCK_NVML WARNING] {}: {error} (ignored)", path.display());
        }
    }
    Ok(injections)
}

/// The standing ECC injections on host GPU `gpu`: (single-bit, double-bit). A file that cannot
/// be read counts none.
pub fn injected_ecc(gpu: u32) -> (u64, u64) {
    let injections = read_injections(xid_file().as_deref()).unwrap_or_default();
    let count = |ecc| {
        let matching = injections
            .iter()
            .filter(|injection| injection.gpu == gpu && injection.fault == Fault::Ecc(ecc));
        matching.count() as u64
    };
    (count(xid::Ecc::Single), count(xid::Ecc::Double))
}

// ---------------------------------------------------------------- waiting

/// Time as the wait sees it, so that tests can drive it.
pub trait Clock {
    /// The current instant.
    fn now(&self) -> Instant;
    /// Blocks for `duration`.
    fn sleep(&mut self, duration: Duration);
}

/// The real clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn sleep(&mut self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// Polls until `poll` finds something, fails, or `timeout` has passed (then `Ok(None)`),
/// sleeping at most [`SLICE`] between polls and never past the deadline.
pub fn wait<T, E>(
    timeout: Duration,
    clock: &mut impl Clock,
    mut poll: impl FnMut() -> Result<Option<T>, E>,
) -> Result<Option<T>, E> {
    let start = clock.now();
    loop {
        if let Some(found) = poll()? {
            return Ok(Some(found));
        }
        let elapsed = clock.now().saturating_duration_since(start);
        if elapsed >= timeout {
            return Ok(None);
        }
        clock.sleep(SLICE.min(timeout - elapsed));
    }
}

/// `nvmlEventSetWait*`'s body after the argument checks: the next event of `handle` within
/// `timeout`, TIMEOUT if none, GPU_IS_LOST once for a lost GPU ([`EventSet::next`]). Before each look it asks `initialized` (the caller's check that
/// the library is still initialized: UNINITIALIZED if shut down meanwhile) and the set
/// (INVALID_ARGUMENT if freed meanwhile); events owns no init state of its own.
pub fn next_event(
    handle: usize,
    timeout: Duration,
    initialized: impl Fn() -> Result<(), NvmlReturn>,
) -> Result<Event, NvmlReturn> {
    let path = xid_file();
    let found = wait(timeout, &mut SystemClock, || {
        initialized()?;
        // An unreadable MIG state reports no change this time.
        let mig = match with_set(handle, |set| set.watches_mig())? {
            true => crate::mig_store::read().ok(),
            false => None,
        };
        match read_injections(path.as_deref()) {
            Ok(injections) => with_set(handle, |set| set.next(&injections, mig.as_ref()))?,
            Err(Unreadable::Skipped) => with_set(handle, |_| None),
        }
    })?;
    found.ok_or(abi::ERROR_TIMEOUT)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "events_tests.rs"]
mod tests;
