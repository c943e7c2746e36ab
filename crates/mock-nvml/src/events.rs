//! NVML event sets over the Xid injection control file (`node_layout::xid` documents its
//! format): the registry of sets, what each set has been told, and the bounded wait.
//!
//! - A set's handle is the address of a small allocation that is never freed, so a freed or
//!   foreign handle is recognised by lookup alone and is never issued again.
//! - Supported event types: [`SUPPORTED`], Xid critical errors only (the only events the mock
//!   can produce). Registering another defined type is NOT_SUPPORTED, with nothing registered,
//!   as nvml.h documents; bits nvml.h does not define are INVALID_ARGUMENT.
//! - Delivery: every injection in the file for a GPU the set registered for Xid is delivered
//!   once to that set, in file order, as `nvmlEventTypeXidCriticalError` with the Xid as data.
//!   An injection is a standing fault until the file is cleared, so a set registered after the
//!   line was written still receives it once (a restarted consumer sees the fault again). A set
//!   forgets the ids that left the file, and the writer never reuses an id.
//!   GPUs are named by their host index (the stager writes the file on the host); a set
//!   registers a GPU by its host index too, and the wait's caller maps the event back to the
//!   process's visible index ([`crate::visible`]), so a fault on a GPU hidden from the process
//!   reaches none of its sets.
//! - Waiting: with nothing pending, [`wait`] re-reads the file every [`SLICE`] until the
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

use node_layout::{env::MOCK_NVML_XID_FILE, paths::XID_INJECTIONS_IN_DRIVER, xid};

use crate::abi::{self, NvmlReturn};

/// The event types this library can report: Xid critical errors.
pub const SUPPORTED: u64 = abi::EVENT_TYPE_XID_CRITICAL_ERROR;

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
    /// The Xid.
    pub data: u64,
}

/// One event set: the types registered per GPU and the injections already delivered.
///
/// Vecs with linear scans (a few GPUs, a few standing injections): less code in the library
/// than B-tree maps.
#[derive(Debug, Default)]
pub struct EventSet {
    registered: Vec<(usize, u64)>,
    delivered: Vec<u64>,
}

impl EventSet {
    /// Adds `types` for `gpu`: INVALID_ARGUMENT for bits nvml.h does not define, NOT_SUPPORTED
    /// (nothing registered) for a defined type this library cannot report.
    pub fn register(&mut self, gpu: usize, types: u64) -> Result<(), NvmlReturn> {
        if types & !abi::EVENT_TYPE_ALL != 0 {
            return Err(abi::ERROR_INVALID_ARGUMENT);
        }
        if types & !SUPPORTED != 0 {
            return Err(abi::ERROR_NOT_SUPPORTED);
        }
        match self.registered.iter_mut().find(|(at, _)| *at == gpu) {
            Some((_, registered)) => *registered |= types,
            None => self.registered.push((gpu, types)),
        }
        Ok(())
    }

    /// The first injection of `injections` (the file's current lines) not yet delivered for a
    /// GPU registered for Xid, now marked delivered; ids no longer present are forgotten.
    pub fn next(&mut self, injections: &[xid::Injection]) -> Option<Event> {
        self.delivered
            .retain(|id| injections.iter().any(|injection| injection.id == *id));
        let injection = injections.iter().find(|injection| {
            let wanted = self
                .registered
                .iter()
                .find(|(gpu, _)| *gpu == injection.gpu as usize)
                .is_some_and(|(_, types)| types & abi::EVENT_TYPE_XID_CRITICAL_ERROR != 0);
            wanted && !self.delivered.contains(&injection.id)
        })?;
        self.delivered.push(injection.id);
        Some(Event {
            gpu: injection.gpu as usize,
            event_type: abi::EVENT_TYPE_XID_CRITICAL_ERROR,
            data: injection.xid,
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
/// `timeout`, TIMEOUT if none. Before each look it asks `initialized` (the caller's check that
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
        match read_injections(path.as_deref()) {
            Ok(injections) => with_set(handle, |set| set.next(&injections)),
            Err(Unreadable::Skipped) => with_set(handle, |_| None),
        }
    })?;
    found.ok_or(abi::ERROR_TIMEOUT)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "events_tests.rs"]
mod tests;
