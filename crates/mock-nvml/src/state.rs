//! The process-wide library state: the init reference count, what the current init loaded, and
//! the device handles.
//!
//! Handles are addresses of slots in a static array that is never freed, so they are stable,
//! non-null and far above 4096, and a handle is validated by address arithmetic alone (no
//! dereference): it must point at a slot boundary inside the array, and the slot's index must be
//! below the current device count. A stale handle after shutdown is therefore just "not issued".
//!
//! Init and shutdown serialise on a lock and count a generation; queries take the lock only when
//! the generation moved since their thread last looked. Each thread keeps the state it last saw
//! with its generation ([`SEEN`]), so a query reads one shared word that only init and shutdown
//! write, and touches no shared lock word or reference count: queries on many threads do not
//! contend (`cargo xtask bench-vs-upstream`, the 8-thread row).

use std::{
    cell::RefCell,
    ops::Deref,
    path::PathBuf,
    rc::Rc,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, MutexGuard,
    },
};

use nvml_profile::{Device, PcieTopology, System};

use crate::{
    abi::{self, NvmlReturn},
    config::{self, MAX_DEVICES},
    visible::{self, Visibility},
};

/// What one init loaded.
#[derive(Debug)]
pub struct Loaded {
    /// Driver-wide facts.
    pub system: System,
    /// The visible GPUs, in index order.
    pub devices: Vec<Device>,
    /// The PCIe topology over them, if the profile gives one.
    pub pcie: Option<PcieTopology>,
    /// Each visible GPU's index on the host (its index in the profile), in visible order: the
    /// Xid control file names GPUs by host index.
    pub host_indices: Vec<u32>,
}

/// What init and shutdown change, under [`STATE`]'s lock.
struct State {
    refcount: u32,
    /// What the current init loaded, `None` while not initialized.
    loaded: Option<Arc<Loaded>>,
    /// Kept across shutdowns, so that an init with unchanged files parses nothing.
    cache: config::Cache<Loaded>,
    /// The last visibility probe, kept across shutdowns like the cache.
    view: Option<View>,
}

/// What the visibility probe made of one loaded state under one dev root: a process's device
/// nodes are fixed for its life (a container's are set when it is created), so a first init
/// with the same loaded state and dev root probes nothing again.
struct View {
    root: PathBuf,
    loaded: Arc<Loaded>,
    seen: Arc<Loaded>,
}

static STATE: Mutex<State> = Mutex::new(State {
    refcount: 0,
    loaded: None,
    cache: config::Cache::new(),
    view: None,
});

/// Bumped, under [`STATE`]'s lock, whenever `loaded` changes.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// A thread's own hold on a shared state: cloning it counts on this thread only, where cloning
/// the `Arc` would write the count that every thread shares.
#[allow(clippy::redundant_allocation)]
type Local = Rc<Arc<Loaded>>;

thread_local! {
    /// The state this thread last saw, and the generation it was current in.
    static SEEN: RefCell<Option<(u64, Local)>> = const { RefCell::new(None) };
}

/// One handle slot; its address is the `nvmlDevice_t`.
#[repr(C)]
pub struct Slot {
    _magic: u32,
    _index: u32,
}

/// "NVML": what a slot holds, for anyone inspecting memory.
const MAGIC: u32 = 0x4E56_4D4C;

static SLOTS: [Slot; MAX_DEVICES] = {
    let mut slots = [const {
        Slot {
            _magic: MAGIC,
            _index: 0,
        }
    }; MAX_DEVICES];
    let mut index = 0;
    while index < MAX_DEVICES {
        slots[index]._index = index as u32;
        index += 1;
    }
    slots
};

fn lock() -> MutexGuard<'static, State> {
    // A panic never happens while the lock is held with the state half-updated (updates are
    // single assignments), so a poisoned lock still holds consistent data.
    STATE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `nvmlInit*`: the first init loads the configuration through the cache (printing its
/// warnings, or one error line on failure); later ones only count.
pub fn init() -> NvmlReturn {
    let mut state = lock();
    if state.refcount > 0 {
        state.refcount += 1;
        return abi::SUCCESS;
    }
    let loaded = state.cache.load(|profile| {
        let devices = profile.devices();
        Loaded {
            system: profile.system().clone(),
            host_indices: devices.iter().map(|device| device.index).collect(),
            devices,
            pcie: profile.pcie_topology(),
        }
    });
    match loaded {
        Ok((loaded, warnings)) => {
            for warning in warnings {
                eprintln!("[MOCK_NVML WARNING] {warning}");
            }
            let seen = visible_view(&mut state.view, loaded, visible::dev_root());
            state.loaded = Some(seen);
            GENERATION.fetch_add(1, Ordering::Release);
            state.refcount = 1;
            abi::SUCCESS
        }
        Err(err) => {
            eprintln!("[MOCK_NVML ERROR] nvmlInit failed: {err}");
            err.code()
        }
    }
}

/// What this process sees of `loaded` ([`visible`]): the cached state itself when nothing is
/// filtered, else a renumbered copy of the visible GPUs; probed once per loaded state and dev
/// root ([`View`]).
fn visible_view(view: &mut Option<View>, loaded: Arc<Loaded>, root: PathBuf) -> Arc<Loaded> {
    if let Some(view) = view {
        if Arc::ptr_eq(&view.loaded, &loaded) && view.root == root {
            return Arc::clone(&view.seen);
        }
    }
    let minors: Vec<u32> = loaded
        .devices
        .iter()
        .map(|device| device.minor_number)
        .collect();
    let present = visible::present_minors(&root, &minors);
    let seen = match visible::select(&minors, &present) {
        Visibility::All => Arc::clone(&loaded),
        Visibility::Only(positions) => Arc::new(loaded.restricted(&positions)),
    };
    *view = Some(View {
        root,
        loaded,
        seen: Arc::clone(&seen),
    });
    seen
}

/// `nvmlShutdown`: UNINITIALIZED when not initialized; the last one drops the loaded state.
pub fn shutdown() -> NvmlReturn {
    let mut state = lock();
    match state.refcount {
        0 => abi::ERROR_UNINITIALIZED,
        1 => {
            state.refcount = 0;
            state.loaded = None;
            GENERATION.fetch_add(1, Ordering::Release);
            crate::events::forget_all();
            abi::SUCCESS
        }
        _ => {
            state.refcount -= 1;
            abi::SUCCESS
        }
    }
}

/// The loaded state, or UNINITIALIZED: the one this thread saw last if the generation has not
/// moved since, else read under the lock and remembered.
pub fn loaded() -> Result<Current, NvmlReturn> {
    let now = GENERATION.load(Ordering::Acquire);
    let seen = SEEN.try_with(|seen| {
        let seen = seen.try_borrow().ok()?;
        let (generation, loaded) = seen.as_ref()?;
        (*generation == now).then(|| Rc::clone(loaded))
    });
    if let Ok(Some(loaded)) = seen {
        return Ok(Current(loaded));
    }
    let (generation, loaded) = {
        let state = lock();
        (GENERATION.load(Ordering::Acquire), state.loaded.clone())
    };
    let loaded = Rc::new(loaded.ok_or(abi::ERROR_UNINITIALIZED)?);
    // A thread that is exiting, or inside a query already, simply does not remember it.
    let _ = SEEN.try_with(|seen| {
        if let Ok(mut seen) = seen.try_borrow_mut() {
            *seen = Some((generation, Rc::clone(&loaded)));
        }
    });
    Ok(Current(loaded))
}

/// The loaded state of the current init, held for one query: a shutdown meanwhile does not free
/// it under the query.
pub struct Current(Local);

impl Deref for Current {
    type Target = Loaded;

    fn deref(&self) -> &Loaded {
        &self.0
    }
}

/// The handle of device `index` (no bounds check against the device count).
pub fn handle(index: usize) -> Option<*const Slot> {
    SLOTS.get(index).map(|slot| slot as *const Slot)
}

/// The device index a handle address stands for, if it is a slot address.
pub fn slot_index(address: usize) -> Option<usize> {
    let base = SLOTS.as_ptr() as usize;
    let offset = address.checked_sub(base)?;
    let size = size_of::<Slot>();
    if offset % size != 0 {
        return None;
    }
    let index = offset / size;
    (index < MAX_DEVICES).then_some(index)
}

impl Loaded {
    /// The device a handle address stands for: INVALID_ARGUMENT for anything not issued.
    pub fn device(&self, address: usize) -> Result<&Device, NvmlReturn> {
        slot_index(address)
            .and_then(|index| self.devices.get(index))
            .ok_or(abi::ERROR_INVALID_ARGUMENT)
    }

    /// The state over the GPUs at `positions` only, renumbered from 0 in that order: each keeps
    /// its UUID, bus id, minor number and fabric identity; the PCIe topology follows.
    pub fn restricted(&self, positions: &[usize]) -> Loaded {
        let kept: Vec<usize> = positions
            .iter()
            .copied()
            .filter(|&position| position < self.devices.len())
            .collect();
        let devices = kept
            .iter()
            .enumerate()
            .map(|(index, &position)| Device {
                index: index as u32,
                ..self.devices[position].clone()
            })
            .collect();
        Loaded {
            system: self.system.clone(),
            devices,
            pcie: self.pcie.as_ref().map(|pcie| pcie.restricted(&kept)),
            host_indices: kept
                .iter()
                .map(|&position| self.host_indices[position])
                .collect(),
        }
    }

    /// The host index of visible GPU `index`.
    pub fn host_index(&self, index: usize) -> Option<u32> {
        self.host_indices.get(index).copied()
    }

    /// The visible index of the GPU with host index `host`, if this process sees it.
    pub fn visible_index(&self, host: u32) -> Option<usize> {
        self.host_indices.iter().position(|&at| at == host)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_distinct_high_slot_addresses() {
        let addresses: Vec<usize> = (0..MAX_DEVICES)
            .filter_map(handle)
            .map(|ptr| ptr as usize)
            .collect();
        assert_eq!(addresses.len(), MAX_DEVICES);
        for (index, address) in addresses.iter().enumerate() {
            assert!(*address >= 4096);
            assert_eq!(slot_index(*address), Some(index));
            assert_eq!(slot_index(address + 1), None);
        }
        assert_eq!(handle(MAX_DEVICES), None);
        assert_eq!(slot_index(0), None);
        assert_eq!(
            slot_index(addresses[MAX_DEVICES - 1] + size_of::<Slot>()),
            None
        );
        let local = 0u64;
        assert_eq!(slot_index(&local as *const u64 as usize), None);
    }

    fn gb200() -> Arc<Loaded> {
        let profile = nvml_profile::Profile::parse(nvml_profile::GB200).unwrap();
        let devices = profile.devices();
        Arc::new(Loaded {
            system: profile.system().clone(),
            host_indices: devices.iter().map(|device| device.index).collect(),
            devices,
            pcie: profile.pcie_topology(),
        })
    }

    #[test]
    fn the_probe_runs_once_per_loaded_state_and_dev_root() {
        let dir = tempfile::tempdir().unwrap();
        for node in ["nvidiactl", "nvidia1", "nvidia2"] {
            std::fs::write(dir.path().join(node), "").unwrap();
        }
        let root = dir.path().to_path_buf();
        let loaded = gb200();
        let mut view = None;
        let first = visible_view(&mut view, Arc::clone(&loaded), root.clone());
        assert_eq!(first.host_indices, [1, 2]);
        // The nodes of a process do not change: the same state and root are not probed again.
        std::fs::remove_file(dir.path().join("nvidia2")).unwrap();
        let again = visible_view(&mut view, Arc::clone(&loaded), root.clone());
        assert!(Arc::ptr_eq(&first, &again));
        // Another root, or a newly loaded state, is probed.
        let other = visible_view(&mut view, Arc::clone(&loaded), root.join("absent"));
        assert!(Arc::ptr_eq(&other, &loaded));
        let reloaded = visible_view(&mut view, gb200(), root);
        assert_eq!(reloaded.host_indices, [1]);
    }

    #[test]
    fn a_restricted_state_renumbers_and_remembers_host_indices() {
        let profile = nvml_profile::Profile::parse(nvml_profile::GB200).unwrap();
        let devices = profile.devices();
        let full = Loaded {
            system: profile.system().clone(),
            host_indices: devices.iter().map(|device| device.index).collect(),
            devices,
            pcie: profile.pcie_topology(),
        };
        let visible = full.restricted(&[1, 3, 9]);
        let seen: Vec<(u32, u32, &str)> = visible
            .devices
            .iter()
            .map(|device| (device.index, device.minor_number, device.uuid.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                (0, 1, full.devices[1].uuid.as_str()),
                (1, 3, full.devices[3].uuid.as_str())
            ]
        );
        assert_eq!(visible.devices[1].pci_bus_id, full.devices[3].pci_bus_id);
        assert_eq!(visible.devices[1].fabric, full.devices[3].fabric);
        assert_eq!(
            (visible.host_index(1), visible.host_index(2)),
            (Some(3), None)
        );
        assert_eq!(
            (visible.visible_index(3), visible.visible_index(0)),
            (Some(1), None)
        );
        let pcie = visible.pcie.as_ref().unwrap();
        assert_eq!(pcie.numa_node(0), full.pcie.as_ref().unwrap().numa_node(1));
        assert_eq!(pcie.level(0, 2), None);
    }
}
