//! Retired pages (nvml.h's count protocol) and the persistence mode setter.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::abi::{self, NvmlReturn};
use crate::config::MAX_DEVICES;
use crate::ffi::guard::*;
use crate::health::{self, ecc};
use nvml_profile::Device;
use std::ffi::c_uint;

/// Reads `*count`: INVALID_ARGUMENT when `count` is NULL, or `addresses` is NULL while `*count`
/// is not zero (nvml.h).
///
/// # Safety
/// `count` must be NULL or valid for reading an `unsigned int`.
unsafe fn asked(count: *mut c_uint, addresses: *mut u64) -> Result<u32, NvmlReturn> {
    // SAFETY: forwarded from this function's contract.
    let asked = unsafe { get_u32(count.cast_const().cast()) }?;
    if asked != 0 && addresses.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    Ok(asked)
}

/// Writes the pages with nvml.h's count protocol: `asked == 0` sets `*count` to the number of
/// pages (SUCCESS); fewer slots than pages sets `*count` to the number needed and is
/// INSUFFICIENT_SIZE, the arrays untouched; otherwise the addresses (and timestamps, when
/// `timestamps` is not NULL) are written and `*count` is their number.
///
/// # Safety
/// `count` must be valid for writing an `unsigned int`; `addresses` (and a non-NULL
/// `timestamps`) valid for writing `asked` values when `asked` is not zero.
unsafe fn put_pages(
    pages: &[nvml_profile::RetiredPage],
    asked: u32,
    count: *mut c_uint,
    addresses: *mut u64,
    timestamps: *mut u64,
) -> Result<(), NvmlReturn> {
    let needed = pages.len() as c_uint;
    if asked != 0 && asked < needed {
        // SAFETY: forwarded from this function's contract.
        unsafe { put(count, needed) }?;
        return Err(abi::ERROR_INSUFFICIENT_SIZE);
    }
    if asked != 0 {
        for (slot, page) in pages.iter().enumerate() {
            // SAFETY: `slot < needed <= asked`, and the arrays hold `asked` values (contract).
            unsafe { put(addresses.add(slot), page.address) }?;
            if !timestamps.is_null() {
                // SAFETY: as above.
                unsafe { put(timestamps.add(slot), page.timestamp_us) }?;
            }
        }
    }
    // SAFETY: forwarded from this function's contract.
    unsafe { put(count, needed) }
}

/// `nvmlDeviceGetRetiredPages`.
///
/// # Safety
/// `page_count` must be NULL or valid for reading and writing an `unsigned int`; `addresses`
/// NULL or valid for writing `*page_count` values.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages(
    device: nvmlDevice_t,
    cause: c_uint,
    page_count: *mut c_uint,
    addresses: *mut u64,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |_, device| {
            // SAFETY: forwarded from this function's contract.
            let asked = unsafe { asked(page_count, addresses) }?;
            let pages = ecc::retired_pages(device, cause)?;
            // SAFETY: forwarded from this function's contract.
            unsafe { put_pages(pages, asked, page_count, addresses, std::ptr::null_mut()) }
        })
    })
}

/// `nvmlDeviceGetRetiredPages_v2`: as v1, with each page's retirement time.
///
/// # Safety
/// As for [`nvmlDeviceGetRetiredPages`]; `timestamps` NULL (not written: nvml.h does not
/// require it) or valid for writing `*page_count` values.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages_v2(
    device: nvmlDevice_t,
    cause: c_uint,
    page_count: *mut c_uint,
    addresses: *mut u64,
    timestamps: *mut u64,
) -> NvmlReturn {
    guard(|| {
        with_device(device, |_, device| {
            // SAFETY: forwarded from this function's contract.
            let asked = unsafe { asked(page_count, addresses) }?;
            let pages = ecc::retired_pages(device, cause)?;
            // SAFETY: forwarded from this function's contract.
            unsafe { put_pages(pages, asked, page_count, addresses, timestamps) }
        })
    })
}

/// Persistence modes set through [`nvmlDeviceSetPersistenceMode`], by GPU index: 0 none (the
/// profile's), 1 disabled, 2 enabled. Like the driver's, they outlive `nvmlShutdown`.
static PERSISTENCE: [AtomicU8; MAX_DEVICES] = [const { AtomicU8::new(0) }; MAX_DEVICES];

/// The persistence mode a GPU reports: the last one set, else the profile's.
pub(crate) fn persistence_mode(device: &Device) -> bool {
    let set = PERSISTENCE
        .get(device.index as usize)
        .map_or(0, |slot| slot.load(Ordering::Relaxed));
    match set {
        1 => false,
        2 => true,
        _ => device.persistence_mode,
    }
}

/// The caller's effective uid, from `/proc/self/status`.
fn euid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    health::effective_uid(&status)
}

/// `nvmlDeviceSetPersistenceMode`: root only (NO_PERMISSION otherwise, as the real library);
/// the mode set is what `nvmlDeviceGetPersistenceMode` reports from then on, in this process.
#[no_mangle]
pub extern "C" fn nvmlDeviceSetPersistenceMode(device: nvmlDevice_t, mode: c_uint) -> NvmlReturn {
    guard(|| {
        with_device(device, |_, device| {
            let enabled = health::set_persistence_mode(mode, euid())?;
            let slot = PERSISTENCE
                .get(device.index as usize)
                .ok_or(abi::ERROR_UNKNOWN)?;
            slot.store(if enabled { 2 } else { 1 }, Ordering::Relaxed);
            Ok(())
        })
    })
}
