//! The process-wide library state: the init reference count, what the current init loaded, and
//! the device handles.
//!
//! Handles are addresses of slots in a static array that is never freed, so they are stable,
//! non-null and far above 4096, and a handle is validated by address arithmetic alone (no
//! dereference): it must point at a slot boundary inside the array, and the slot's index must be
//! below the current device count. A stale handle after shutdown is therefore just "not issued".

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use nvml_profile::{Device, PcieTopology, System};

use crate::{
    abi::{self, NvmlReturn},
    config::{self, MAX_DEVICES},
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
}

struct State {
    refcount: u32,
    loaded: Option<Arc<Loaded>>,
    /// Kept across shutdowns, so that an init with unchanged files parses nothing.
    cache: config::Cache<Loaded>,
}

static STATE: RwLock<State> = RwLock::new(State {
    refcount: 0,
    loaded: None,
    cache: config::Cache::new(),
});

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

fn read() -> RwLockReadGuard<'static, State> {
    // A panic never happens while the lock is held for writing with the state half-updated
    // (updates are single assignments), so a poisoned lock still holds consistent data.
    STATE
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write() -> RwLockWriteGuard<'static, State> {
    STATE
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `nvmlInit*`: the first init loads the configuration through the cache (printing its
/// warnings, or one error line on failure); later ones only count.
pub fn init() -> NvmlReturn {
    let mut state = write();
    if state.refcount > 0 {
        state.refcount += 1;
        return abi::SUCCESS;
    }
    let loaded = state.cache.load(|profile| Loaded {
        system: profile.system().clone(),
        devices: profile.devices(),
        pcie: profile.pcie_topology(),
    });
    match loaded {
        Ok((loaded, warnings)) => {
            for warning in warnings {
                eprintln!("[MOCK_NVML WARNING] {warning}");
            }
            state.loaded = Some(loaded);
            state.refcount = 1;
            abi::SUCCESS
        }
        Err(err) => {
            eprintln!("[MOCK_NVML ERROR] nvmlInit failed: {err}");
            err.code()
        }
    }
}

/// `nvmlShutdown`: UNINITIALIZED when not initialized; the last one drops the loaded state.
pub fn shutdown() -> NvmlReturn {
    let mut state = write();
    match state.refcount {
        0 => abi::ERROR_UNINITIALIZED,
        1 => {
            state.refcount = 0;
            state.loaded = None;
            crate::events::forget_all();
            abi::SUCCESS
        }
        _ => {
            state.refcount -= 1;
            abi::SUCCESS
        }
    }
}

/// The loaded state, or UNINITIALIZED.
pub fn loaded() -> Result<Arc<Loaded>, NvmlReturn> {
    read().loaded.clone().ok_or(abi::ERROR_UNINITIALIZED)
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
}

#[cfg(test)]
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
}
