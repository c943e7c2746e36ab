//! The generated stubs and aliases through the same `extern "C"` functions C sees: every stub is
//! UNINITIALIZED before init, INVALID_ARGUMENT for a foreign device, for any other handle and for
//! a NULL pointer, NOT_SUPPORTED with valid arguments; every alias answers as its target.
//! The tables are generated with the stubs (`$OUT_DIR/stub_calls.rs`).

use std::ffi::c_void;

use nvml_profile::GB200;

use super::{foreign_handles, handle, nvmlShutdown, slot0, Mode, Session};
use crate::{
    abi::{self, NvmlReturn},
    ffi::{nvmlDevice_t, stubs},
};

/// Zeroed blocks a call's pointers point into, and one non-NULL handle no one issued.
struct Buffers {
    blocks: Vec<[u64; 512]>,
    handle: [u64; 8],
}

impl Default for Buffers {
    fn default() -> Self {
        Buffers {
            blocks: Vec::with_capacity(8),
            handle: [0; 8],
        }
    }
}

impl Buffers {
    /// A fresh zeroed 4 KiB block, or NULL in [`Mode::Null`].
    fn ptr(&mut self, mode: Mode) -> *mut c_void {
        if mode == Mode::Null {
            return std::ptr::null_mut();
        }
        assert!(
            self.blocks.len() < self.blocks.capacity(),
            "too many pointers"
        );
        self.blocks.push([0; 512]);
        self.blocks
            .last_mut()
            .map_or(std::ptr::null_mut(), |block| block.as_mut_ptr().cast())
    }

    /// A handle of a type this library never issues (a local's address).
    fn handle(&mut self) -> *mut c_void {
        self.handle.as_mut_ptr().cast()
    }
}

/// A call of one export with arguments of its kinds for a device, in a [`Mode`].
type Caller = fn(nvmlDevice_t, Mode) -> NvmlReturn;

/// One generated stub: its name, whether it takes a device, another handle, a pointer, and a
/// call with arguments of its kinds (valid ones, or NULL pointers in [`Mode::Null`]).
struct StubCall {
    name: &'static str,
    device: bool,
    handle: bool,
    ptr: bool,
    call: Caller,
}

include!(concat!(env!("OUT_DIR"), "/stub_calls.rs"));

#[test]
fn the_tables_cover_every_stub_and_alias() {
    let names: Vec<&str> = STUB_CALLS.iter().map(|stub| stub.name).collect();
    assert_eq!(names, stubs::STUBS);
    let names: Vec<&str> = ALIAS_CALLS.iter().map(|(name, ..)| *name).collect();
    assert_eq!(names, stubs::ALIASES);
    // A sanity floor: hand-written exports (issue 22 added many) replace their stubs.
    assert!(stubs::STUBS.len() > 200, "{} stubs", stubs::STUBS.len());
}

#[test]
fn every_stub_is_uninitialized_before_init() {
    let _session = Session::new(GB200, None);
    for stub in STUB_CALLS {
        for mode in [Mode::Valid, Mode::Null] {
            let code = (stub.call)(slot0(), mode);
            assert_eq!(code, abi::ERROR_UNINITIALIZED, "{} {mode:?}", stub.name);
        }
    }
}

#[test]
fn every_stub_is_not_supported_with_valid_arguments() {
    let _session = Session::new(GB200, None);
    assert_eq!(super::nvmlInit_v2(), abi::SUCCESS);
    let device = handle(0);
    for stub in STUB_CALLS {
        // No other handle type is ever issued, so a call with one has no valid arguments.
        let expected = if stub.handle {
            abi::ERROR_INVALID_ARGUMENT
        } else {
            abi::ERROR_NOT_SUPPORTED
        };
        assert_eq!((stub.call)(device, Mode::Valid), expected, "{}", stub.name);
    }
}

#[test]
fn every_stub_checks_devices_and_pointers() {
    let _session = Session::new(GB200, None);
    assert_eq!(super::nvmlInit_v2(), abi::SUCCESS);
    let device = handle(0);
    let local = [0u64; 8];
    // Slot 7 exists in the array, but gb200 has 4 GPUs: it was never issued.
    let foreign = foreign_handles(&local, 7);
    for stub in STUB_CALLS {
        if stub.device {
            for other in foreign {
                let code = (stub.call)(other, Mode::Valid);
                assert_eq!(code, abi::ERROR_INVALID_ARGUMENT, "{} {other:?}", stub.name);
            }
        }
        if stub.ptr {
            let code = (stub.call)(device, Mode::Null);
            assert_eq!(code, abi::ERROR_INVALID_ARGUMENT, "{} NULL", stub.name);
        }
    }
}

/// Calls `call` in `mode`, undoing a successful init.
fn answer(call: Caller, name: &str, device: nvmlDevice_t, mode: Mode) -> NvmlReturn {
    let code = call(device, mode);
    if name.starts_with("nvmlInit") && code == abi::SUCCESS {
        assert_eq!(nvmlShutdown(), abi::SUCCESS);
    }
    code
}

#[test]
fn every_alias_answers_as_its_target() {
    let _session = Session::new(GB200, None);
    for (name, target, alias_call, target_call) in ALIAS_CALLS {
        assert_eq!(
            answer(*alias_call, name, slot0(), Mode::Valid),
            answer(*target_call, target, slot0(), Mode::Valid),
            "{name} as {target} before init"
        );
    }
    assert_eq!(super::nvmlInit_v2(), abi::SUCCESS);
    let device = handle(0);
    for (name, target, alias_call, target_call) in ALIAS_CALLS {
        for mode in [Mode::Valid, Mode::Null] {
            assert_eq!(
                answer(*alias_call, name, device, mode),
                answer(*target_call, target, device, mode),
                "{name} as {target}, {mode:?}"
            );
        }
    }
    // The aliases of hand-written exports answer as those, not as stubs.
    let count = ALIAS_CALLS
        .iter()
        .find(|(name, ..)| *name == "nvmlDeviceGetCount_v1");
    let (_, _, call, _) = count.expect("nvmlDeviceGetCount_v1 is an alias");
    assert_eq!(call(device, Mode::Valid), abi::SUCCESS);
}
