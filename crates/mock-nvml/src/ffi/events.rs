//! Event sets: `nvmlEventSetCreate`, `nvmlEventSetFree`, `nvmlDeviceRegisterEvents`,
//! `nvmlDeviceGetSupportedEventTypes`, `nvmlEventSetWait_v2` and the v1 `nvmlEventSetWait`,
//! over [`crate::events`] (Xid and ECC injections from the control file, lost GPUs, MIG
//! partition changes).

use std::{ffi::c_ulonglong, time::Duration};

use super::guard::*;
use crate::events;
use crate::{
    abi::{self, NvmlReturn},
    state,
};
use std::ffi::{c_uint, c_void};

/// `nvmlEventSet_t`: the address [`events::create`] issued.
pub type nvmlEventSet_t = *mut c_void;

/// `nvmlEventSetCreate`.
///
/// # Safety
/// `set` must be NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) -> NvmlReturn {
    guard(|| {
        state::loaded()?;
        non_null([set.cast_const().cast()])?;
        let handle = events::create() as nvmlEventSet_t;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(set, handle) }
    })
}

/// `nvmlEventSetFree`: INVALID_ARGUMENT for a handle that is not a live set.
#[no_mangle]
pub extern "C" fn nvmlEventSetFree(set: nvmlEventSet_t) -> NvmlReturn {
    guard(|| {
        state::loaded()?;
        events::free(set as usize)
    })
}

/// `nvmlDeviceRegisterEvents`: the types [`events::supported`] gives the GPU; another defined
/// type is NOT_SUPPORTED with nothing registered.
#[no_mangle]
pub extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    event_types: c_ulonglong,
    set: nvmlEventSet_t,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |loaded, profile| {
            let slot = state::slot_index(device as usize).ok_or(abi::ERROR_INVALID_ARGUMENT)?;
            // Sets register by host index, the control file's numbering.
            let gpu = loaded.host_index(slot).ok_or(abi::ERROR_INVALID_ARGUMENT)?;
            let supported = events::supported(profile);
            events::register(set as usize, gpu as usize, event_types, supported)
        })
    })
}

getter!(nvmlDeviceGetSupportedEventTypes, c_ulonglong, |device| Ok(
    events::supported(device)
));

/// Checks init, the set and `data`, then waits up to `timeout_ms` for the set's next event.
fn next_event(
    set: nvmlEventSet_t,
    data: *const c_void,
    timeout_ms: c_uint,
) -> Result<abi::EventData, NvmlReturn> {
    state::loaded()?;
    events::with_set(set as usize, |_| ())?;
    non_null([data])?;
    let timeout = Duration::from_millis(timeout_ms.into());
    let event = events::next_event(set as usize, timeout, || state::loaded().map(drop))?;
    // A set registers only visible GPUs, so the event's host index maps back to a handle.
    let index = u32::try_from(event.gpu)
        .ok()
        .and_then(|host| state::loaded().ok()?.visible_index(host))
        .ok_or(abi::ERROR_UNKNOWN)?;
    let device = state::handle(index).ok_or(abi::ERROR_UNKNOWN)? as usize;
    Ok(abi::EventData {
        device,
        event_type: event.event_type,
        event_data: event.data,
        gpu_instance_id: abi::INSTANCE_ID_NONE,
        compute_instance_id: abi::INSTANCE_ID_NONE,
    })
}

/// `nvmlEventSetWait_v2`: the next event, or TIMEOUT after `timeout_ms` with none (blocking in
/// slices, re-reading the control file), or GPU_IS_LOST once after a lost GPU's Xid 79.
///
/// # Safety
/// `data` must be NULL or valid for writing an `nvmlEventData_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut abi::EventData,
    timeout_ms: c_uint,
) -> NvmlReturn {
    guard(|| {
        let event = next_event(set, data.cast_const().cast(), timeout_ms)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(data, event) }
    })
}

/// `nvmlEventSetWait` (v1 symbol): as v2, writing only the fields the v1 struct has (the
/// instance ids came with v2).
///
/// # Safety
/// `data` must be NULL or valid for writing the v1 `nvmlEventData_t` (24 bytes).
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait(
    set: nvmlEventSet_t,
    data: *mut abi::EventDataV1,
    timeout_ms: c_uint,
) -> NvmlReturn {
    guard(|| {
        let event = next_event(set, data.cast_const().cast(), timeout_ms)?;
        let v1 = abi::EventDataV1 {
            device: event.device,
            event_type: event.event_type,
            event_data: event.event_data,
        };
        // SAFETY: forwarded from this function's contract.
        unsafe { put(data, v1) }
    })
}
