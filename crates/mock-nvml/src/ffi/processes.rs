//! Issue 22, "misc" area: the running processes of the profile's `processes` list (none by
//! default), their utilization samples and names (answers in [`crate::activity`]).

use std::ffi::c_ulonglong;

use nvml_profile::ProcessKind;

use super::guard::*;
use crate::{
    abi::{self, NvmlReturn},
    state,
};
use crate::{
    activity,
    activity_abi::{ProcessInfo, ProcessInfoV1, ProcessUtilizationSample},
};
use std::ffi::{c_char, c_uint};

/// Reads the caller's array size: INVALID_ARGUMENT when `count` is NULL, or the array is NULL
/// while the size is not zero (a NULL array with size 0 asks only how many there are).
///
/// # Safety
/// `count` must be NULL or valid for reading an `unsigned int`.
unsafe fn asked<T>(count: *mut c_uint, array: *mut T) -> Result<u32, NvmlReturn> {
    // SAFETY: forwarded from this function's contract.
    let asked = unsafe { get_u32(count.cast_const().cast()) }?;
    if asked != 0 && array.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    Ok(asked)
}

/// nvml.h's array protocol: `*count` becomes the number of entries; if they do not fit in the
/// `asked` slots, INSUFFICIENT_SIZE with the array untouched, else the entries are written.
///
/// # Safety
/// `count` must be valid for writing an `unsigned int`; `array` valid for writing `asked`
/// entries when `asked` is not zero.
unsafe fn put_entries<T>(
    entries: &[T],
    asked: u32,
    count: *mut c_uint,
    array: *mut T,
) -> Result<(), NvmlReturn>
where
    T: Copy,
{
    // SAFETY: forwarded from this function's contract.
    unsafe { put(count, entries.len() as c_uint) }?;
    activity::fits(entries.len(), asked)?;
    for (slot, entry) in entries.iter().enumerate() {
        // SAFETY: `slot < entries.len() <= asked`, and the array holds `asked` entries.
        unsafe { put(array.add(slot), *entry) }?;
    }
    Ok(())
}

/// The body of every running-process query, writing the version `T` of `nvmlProcessInfo_t`.
///
/// # Safety
/// `count` must be NULL or valid for reading and writing an `unsigned int`; `infos` NULL or
/// valid for writing `*count` `T`s.
unsafe fn running<T: Copy + From<ProcessInfo>>(
    device: nvmlDevice_t,
    kind: ProcessKind,
    count: *mut c_uint,
    infos: *mut T,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |_, device| {
            // SAFETY: forwarded from this function's contract.
            let asked = unsafe { asked(count, infos) }?;
            let entries: Vec<T> = activity::running(device, kind)
                .into_iter()
                .map(T::from)
                .collect();
            // SAFETY: forwarded from this function's contract.
            unsafe { put_entries(&entries, asked, count, infos) }
        })
    })
}

/// Defines `fn name(device, *mut count, *mut nvmlProcessInfo_t)`: the profile's processes of
/// `kind` on the GPU (`_v2` and `_v3` share `nvmlProcessInfo_v2_t`).
macro_rules! running_processes {
    ($name:ident, $kind:ident, $doc:literal) => {
        #[doc = $doc]
        ///
        /// # Safety
        /// `info_count` must be NULL or valid for reading and writing an `unsigned int`; `infos`
        /// NULL or valid for writing `*info_count` `nvmlProcessInfo_t`s.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            device: nvmlDevice_t,
            info_count: *mut c_uint,
            infos: *mut ProcessInfo,
        ) -> NvmlReturn {
            // SAFETY: forwarded from this function's contract.
            unsafe { running(device, ProcessKind::$kind, info_count, infos) }
        }
    };
}

running_processes!(
    nvmlDeviceGetComputeRunningProcesses_v3,
    Compute,
    "`nvmlDeviceGetComputeRunningProcesses_v3`: the profile's compute processes on the GPU."
);
running_processes!(
    nvmlDeviceGetGraphicsRunningProcesses_v3,
    Graphics,
    "`nvmlDeviceGetGraphicsRunningProcesses_v3`: the profile's graphics processes on the GPU."
);
running_processes!(
    nvmlDeviceGetComputeRunningProcesses_v2,
    Compute,
    "`nvmlDeviceGetComputeRunningProcesses_v2`: as `_v3` (the same `nvmlProcessInfo_v2_t`)."
);
running_processes!(
    nvmlDeviceGetGraphicsRunningProcesses_v2,
    Graphics,
    "`nvmlDeviceGetGraphicsRunningProcesses_v2`: as `_v3`."
);

/// `nvmlDeviceGetComputeRunningProcesses` (v1 symbol, and `_v1`): the 16-byte
/// `nvmlProcessInfo_v1_t` (pid and memory).
///
/// # Safety
/// As for [`nvmlDeviceGetComputeRunningProcesses_v3`], with `nvmlProcessInfo_v1_t`s.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut ProcessInfoV1,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe { running(device, ProcessKind::Compute, info_count, infos) }
}

/// `nvmlDeviceGetGraphicsRunningProcesses` (v1 symbol, and `_v1`): as the compute one.
///
/// # Safety
/// As for [`nvmlDeviceGetComputeRunningProcesses`].
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut ProcessInfoV1,
) -> NvmlReturn {
    // SAFETY: forwarded from this function's contract.
    unsafe { running(device, ProcessKind::Graphics, info_count, infos) }
}

/// Now, in microseconds since the epoch (the samples' CPU time stamp).
fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_micros() as u64)
}

/// `nvmlDeviceGetProcessUtilization`: one sample per listed process, newer than
/// `last_seen_time_stamp`; NOT_FOUND when there is none (nvml.h), with the array protocol.
///
/// # Safety
/// `samples_count` must be NULL or valid for reading and writing an `unsigned int`;
/// `utilization` NULL or valid for writing `*samples_count` samples.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: nvmlDevice_t,
    utilization: *mut ProcessUtilizationSample,
    samples_count: *mut c_uint,
    last_seen_time_stamp: c_ulonglong,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |_, device| {
            // SAFETY: forwarded from this function's contract.
            let asked = unsafe { asked(samples_count, utilization) }?;
            let samples = activity::utilization_samples(device, now_us(), last_seen_time_stamp)?;
            // SAFETY: forwarded from this function's contract.
            unsafe { put_entries(&samples, asked, samples_count, utilization) }
        })
    })
}

/// `nvmlSystemGetProcessName`: the name a GPU's `processes` entry gives `pid`; NOT_FOUND for a
/// pid no GPU lists, INVALID_ARGUMENT for a NULL or empty buffer, INSUFFICIENT_SIZE when the name
/// and its NUL do not fit.
///
/// # Safety
/// `name` must be NULL or valid for writing `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetProcessName(
    pid: c_uint,
    name: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    guard(|| {
        let loaded = state::loaded()?;
        non_null([name.cast_const().cast()])?;
        if length == 0 {
            return Err(abi::ERROR_INVALID_ARGUMENT);
        }
        let text = activity::process_name(&loaded.devices, pid)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put_str(name, length, text) }
    })
}
