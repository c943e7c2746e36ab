//! The NVML loader check-fabric and nvidia-smi share: `dlopen("libnvidia-ml.so.1")` with the
//! normal loader search (an `LD_PRELOAD`ed copy is found by its soname), the entry points every
//! client calls (init, shutdown, error string, device count, handle by index), symbol lookup for
//! the rest, and the C-string helper. Each client adds its own entry points on top.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_uint, c_void, CStr};

use libloading::{Library, Symbol};

/// The library's name, as every NVML consumer loads it.
pub const LIBRARY: &str = "libnvidia-ml.so.1";

/// `nvmlDevice_t`.
pub type Device = *mut c_void;

/// An `nvmlReturn_t` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Return(pub u32);

impl Return {
    /// `NVML_SUCCESS`.
    pub const SUCCESS: Return = Return(0);
    /// `NVML_ERROR_NOT_SUPPORTED`.
    pub const NOT_SUPPORTED: Return = Return(3);
    /// `NVML_ERROR_ARGUMENT_VERSION_MISMATCH`.
    pub const ARGUMENT_VERSION_MISMATCH: Return = Return(25);
}

type VoidFn = unsafe extern "C" fn() -> u32;
type ErrorStringFn = unsafe extern "C" fn(u32) -> *const c_char;
type CountFn = unsafe extern "C" fn(*mut c_uint) -> u32;
type HandleByIndexFn = unsafe extern "C" fn(c_uint, *mut Device) -> u32;

/// Why the library cannot be used at all.
#[derive(Debug)]
pub enum LoadError {
    /// `dlopen` failed (the loader's message).
    Open(String),
    /// A required entry point is missing.
    Symbol(&'static str),
}

/// Which names the common entry points are resolved by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// Only the `_v2` symbols.
    V2,
    /// The `_v2` symbol, else the pre-v2 one (`nvmlInit`, `nvmlDeviceGetCount`,
    /// `nvmlDeviceGetHandleByIndex`).
    V2OrV1,
}

/// A loaded NVML library and the entry points every client calls.
///
/// The function pointers stay valid because `library` is kept alive (it is dropped last).
pub struct Core {
    init: VoidFn,
    shutdown: VoidFn,
    error_string: ErrorStringFn,
    count: CountFn,
    handle_by_index: HandleByIndexFn,
    library: Library,
}

impl Core {
    /// Loads the library through the loader search and resolves the common entry points.
    pub fn load(names: Names) -> Result<Core, LoadError> {
        // SAFETY: loading a shared library runs its initialisers; NVML (real or mock) is a
        // plain C library whose initialisers are side-effect free.
        let library =
            unsafe { Library::new(LIBRARY) }.map_err(|err| LoadError::Open(err.to_string()))?;
        let v1 = |v2: &'static str, v1: &'static str| match names {
            Names::V2 => vec![v2],
            Names::V2OrV1 => vec![v2, v1],
        };
        // SAFETY: each `T` below is the `extern "C"` signature nvml.h declares for its names.
        let init = unsafe { required::<VoidFn>(&library, &v1("nvmlInit_v2", "nvmlInit")) }?;
        // SAFETY: as above.
        let shutdown = unsafe { required::<VoidFn>(&library, &["nvmlShutdown"]) }?;
        // SAFETY: as above.
        let error_string = unsafe { required::<ErrorStringFn>(&library, &["nvmlErrorString"]) }?;
        let count_names = v1("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
        // SAFETY: as above.
        let count = unsafe { required::<CountFn>(&library, &count_names) }?;
        let handle_names = v1(
            "nvmlDeviceGetHandleByIndex_v2",
            "nvmlDeviceGetHandleByIndex",
        );
        // SAFETY: as above.
        let handle_by_index = unsafe { required::<HandleByIndexFn>(&library, &handle_names) }?;
        Ok(Core {
            init,
            shutdown,
            error_string,
            count,
            handle_by_index,
            library,
        })
    }

    /// The first of `names` the library exports; [`LoadError::Symbol`] naming the first if none.
    ///
    /// # Safety
    /// `T` must be the `extern "C"` function pointer type nvml.h declares for every name.
    pub unsafe fn required<T: Copy>(&self, names: &[&'static str]) -> Result<T, LoadError> {
        // SAFETY: forwarded from this function's contract.
        unsafe { required(&self.library, names) }
    }

    /// `name`, if the library exports it.
    ///
    /// # Safety
    /// `T` must be the `extern "C"` function pointer type nvml.h declares for `name`.
    pub unsafe fn optional<T: Copy>(&self, name: &str) -> Option<T> {
        // SAFETY: forwarded from this function's contract.
        unsafe { lookup(&self.library, name) }
    }

    /// `nvmlInit_v2`.
    pub fn init(&self) -> Result<(), Return> {
        // SAFETY: `nvmlInit_v2(void)` takes no arguments.
        check(unsafe { (self.init)() })
    }

    /// `nvmlShutdown`.
    pub fn shutdown(&self) -> Result<(), Return> {
        // SAFETY: `nvmlShutdown(void)` takes no arguments.
        check(unsafe { (self.shutdown)() })
    }

    /// `nvmlErrorString`; `None` when the library returns NULL.
    pub fn error_string(&self, code: Return) -> Option<String> {
        // SAFETY: any value is a valid argument; the result is NULL or a static NUL-terminated
        // string owned by the library.
        let text = unsafe { (self.error_string)(code.0) };
        if text.is_null() {
            return None;
        }
        // SAFETY: non-NULL, NUL-terminated, and alive while the library is loaded.
        Some(
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned(),
        )
    }

    /// `nvmlDeviceGetCount_v2`.
    pub fn device_count(&self) -> Result<u32, Return> {
        let mut count: c_uint = 0;
        // SAFETY: `count` is a valid, writable `unsigned int`.
        check(unsafe { (self.count)(&mut count) })?;
        Ok(count)
    }

    /// `nvmlDeviceGetHandleByIndex_v2`.
    pub fn handle(&self, index: u32) -> Result<Device, Return> {
        let mut device: Device = std::ptr::null_mut();
        // SAFETY: `device` is a valid, writable `nvmlDevice_t`.
        check(unsafe { (self.handle_by_index)(index, &mut device) })?;
        Ok(device)
    }
}

/// # Safety
/// As for [`Core::required`].
unsafe fn required<T: Copy>(library: &Library, names: &[&'static str]) -> Result<T, LoadError> {
    for name in names {
        // SAFETY: forwarded from this function's contract.
        if let Some(symbol) = unsafe { lookup::<T>(library, name) } {
            return Ok(symbol);
        }
    }
    Err(LoadError::Symbol(names[0]))
}

/// # Safety
/// As for [`Core::optional`].
unsafe fn lookup<T: Copy>(library: &Library, name: &str) -> Option<T> {
    // SAFETY: `T` is the signature nvml.h declares for `name`, per this function's contract.
    let symbol: Symbol<'_, T> = unsafe { library.get(name.as_bytes()) }.ok()?;
    Some(*symbol)
}

/// `Ok` for `NVML_SUCCESS`, else the code.
pub fn check(code: u32) -> Result<(), Return> {
    match Return(code) {
        Return::SUCCESS => Ok(()),
        err => Err(err),
    }
}

/// The text up to the first NUL (all of it if there is none).
pub fn buffer_string(buffer: &[c_char]) -> String {
    let bytes: Vec<u8> = buffer
        .iter()
        .take_while(|byte| **byte != 0)
        .map(|byte| *byte as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_strings_stop_at_the_first_nul() {
        let mut buffer = [0 as c_char; 8];
        for (slot, byte) in buffer.iter_mut().zip(b"GPU-1\0xy") {
            *slot = *byte as c_char;
        }
        assert_eq!(buffer_string(&buffer), "GPU-1");
        assert_eq!(buffer_string(&[0 as c_char; 4]), "");
        assert_eq!(buffer_string(&[b'x' as c_char; 3]), "xxx");
    }

    #[test]
    fn check_passes_success_and_returns_every_other_code() {
        assert_eq!(check(0), Ok(()));
        assert_eq!(check(3), Err(Return::NOT_SUPPORTED));
    }
}
