//! What every export module of [`ffi`](super) shares, below them all: the panic [`guard`], the
//! device lookup, the NULL check, the four pointer helpers ([`put`], [`put_str`], [`get_str`],
//! [`get_u32`]) and the macros defining the simple getters.

use std::{
    ffi::{c_char, c_uint, c_void, CStr},
    panic::{catch_unwind, AssertUnwindSafe},
};

use nvml_profile::Device;

use crate::{
    abi::{self, NvmlReturn},
    query,
    state::{self, Loaded},
};

/// `nvmlDevice_t`.
pub type nvmlDevice_t = *mut c_void;

/// Runs an export's body: a panic becomes UNKNOWN instead of unwinding into C.
pub(super) fn guard(body: impl FnOnce() -> Result<(), NvmlReturn>) -> NvmlReturn {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => abi::SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => abi::ERROR_UNKNOWN,
    }
}

/// Checks init, then the handle, and runs `body` on the device.
pub(super) fn with_device<T>(
    handle: nvmlDevice_t,
    body: impl FnOnce(&Loaded, &Device) -> Result<T, NvmlReturn>,
) -> Result<T, NvmlReturn> {
    let loaded = state::loaded()?;
    let device = loaded.device(handle as usize)?;
    body(&loaded, device)
}

/// INVALID_ARGUMENT if any of the pointers is NULL.
pub(super) fn non_null<const N: usize>(pointers: [*const c_void; N]) -> Result<(), NvmlReturn> {
    if pointers.iter().any(|pointer| pointer.is_null()) {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    Ok(())
}

/// Writes `value` through `out`; INVALID_ARGUMENT if `out` is NULL.
///
/// # Safety
/// `out` must be NULL or valid for writing a `T` (alignment is not required).
pub(super) unsafe fn put<T>(out: *mut T, value: T) -> Result<(), NvmlReturn> {
    if out.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    // SAFETY: non-NULL and valid for writes of `T`, per this function's contract.
    unsafe { out.write_unaligned(value) };
    Ok(())
}

/// Writes `values` to the caller's array and their number through `count`.
///
/// # Safety
/// `array` must be valid for writing `values.len()` elements of `T` (alignment is not required);
/// `count` NULL or valid for writing an `unsigned int`.
pub(super) unsafe fn put_list<T: Copy>(
    array: *mut T,
    count: *mut c_uint,
    values: &[T],
) -> Result<(), NvmlReturn> {
    let found = c_uint::try_from(values.len()).map_err(|_| abi::ERROR_UNKNOWN)?;
    for (slot, value) in values.iter().enumerate() {
        // SAFETY: `slot < values.len()`, and `array` holds that many elements (contract).
        unsafe { array.add(slot).write_unaligned(*value) };
    }
    // SAFETY: forwarded from this function's contract.
    unsafe { put(count, found) }
}

/// Copies `text` and a NUL into the caller's buffer.
///
/// # Safety
/// `buffer` must be NULL or valid for writing `length` bytes.
pub(super) unsafe fn put_str(
    buffer: *mut c_char,
    length: c_uint,
    text: &str,
) -> Result<(), NvmlReturn> {
    if buffer.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    query::check_room(length, text)?;
    let buffer = buffer.cast::<u8>();
    // SAFETY: `buffer` is valid for `length` bytes (contract) and `length >= text.len() + 1`
    // (checked above); `text` is a Rust string, so the ranges cannot overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buffer, text.len());
        buffer.add(text.len()).write(0);
    }
    Ok(())
}

/// Reads a NUL-terminated string from the caller; INVALID_ARGUMENT for NULL or non-UTF-8.
///
/// # Safety
/// `text` must be NULL or point to a NUL-terminated string that outlives the call.
pub(super) unsafe fn get_str<'a>(text: *const c_char) -> Result<&'a str, NvmlReturn> {
    if text.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    // SAFETY: non-NULL and NUL-terminated, per this function's contract.
    let text = unsafe { CStr::from_ptr(text) };
    text.to_str().map_err(|_| abi::ERROR_INVALID_ARGUMENT)
}

/// Reads the leading `version` field of a versioned struct; INVALID_ARGUMENT for NULL.
///
/// # Safety
/// `versioned` must be NULL or valid for reading 4 bytes.
pub(super) unsafe fn get_u32(versioned: *const c_void) -> Result<u32, NvmlReturn> {
    if versioned.is_null() {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    // SAFETY: non-NULL and readable for 4 bytes, per this function's contract.
    Ok(unsafe { versioned.cast::<u32>().read_unaligned() })
}

// ---------------------------------------------------------------- macros defining exports

/// Defines `fn name(device, params: c_uint…, *mut T)` answering `value` for the device (and the params).
macro_rules! getter {
    ($name:ident, $ty:ty, |$device:ident $(, $param:ident)*| $value:expr) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        ///
        /// # Safety
        /// The output pointer must be NULL or valid for writing one value.
        #[no_mangle]
        pub unsafe extern "C" fn $name(device: nvmlDevice_t, $($param: c_uint,)* out: *mut $ty) -> NvmlReturn {
            guard(|| {
                let value: $ty = with_device(device, |_, $device| {
                    non_null([out.cast_const().cast()])?;
                    $value
                })?;
                // SAFETY: forwarded from this function's contract.
                unsafe { put(out, value) }
            })
        }
    };
}

/// Defines `fn name(device, *mut c_uint, *mut c_uint)` answering a pair.
macro_rules! pair_getter {
    ($name:ident, |$device:ident| $value:expr) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        ///
        /// # Safety
        /// Both pointers must be NULL or valid for writing an `unsigned int`.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            device: nvmlDevice_t,
            first: *mut c_uint,
            second: *mut c_uint,
        ) -> NvmlReturn {
            guard(|| {
                let (a, b): (c_uint, c_uint) = with_device(device, |_, $device| {
                    non_null([first.cast_const().cast(), second.cast_const().cast()])?;
                    $value
                })?;
                // SAFETY: forwarded from this function's contract.
                unsafe {
                    put(first, a)?;
                    put(second, b)
                }
            })
        }
    };
}

/// Defines `fn name(device, char *buffer, unsigned length)` answering `text`.
macro_rules! string_getter {
    ($name:ident, |$device:ident| $text:expr) => {
        #[doc = concat!("`", stringify!($name), "`: INSUFFICIENT_SIZE when the text and its NUL do not fit.")]
        ///
        /// # Safety
        /// The buffer must be NULL or valid for writing `length` bytes.
        #[no_mangle]
        pub unsafe extern "C" fn $name(device: nvmlDevice_t, buffer: *mut c_char, length: c_uint) -> NvmlReturn {
            guard(|| {
                with_device(device, |_, $device| {
                    non_null([buffer.cast_const().cast()])?;
                    let text: Result<&str, NvmlReturn> = $text;
                    // SAFETY: forwarded from this function's contract.
                    unsafe { put_str(buffer, length, text?) }
                })
            })
        }
    };
}
