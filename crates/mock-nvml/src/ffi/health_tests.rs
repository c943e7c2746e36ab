//! The health and telemetry exports (`ffi/health.rs`): their rows of the misuse matrix
//! ([`table`], run by the parent's matrix tests) and their values through the C functions on
//! the shipped profiles.

use super::*;

/// A valid call that the profile answers NOT_SUPPORTED (GB200 has no fans, no auto boost, no
/// row remapper histogram, no bus width in its profile) counts as what succeeds; the checks
/// before it still run.
fn unsupported_is_success(mode: Mode, code: NvmlReturn) -> NvmlReturn {
    match (mode, code) {
        (Mode::Valid, abi::ERROR_NOT_SUPPORTED) => abi::SUCCESS,
        _ => code,
    }
}

/// A one-output export with up to three leading `unsigned int` arguments.
macro_rules! with_args {
    ($name:ident, $ty:ty $(, $arg:expr)*) => {
        entry!($name, handle, |device, mode| {
            // SAFETY: zeroed plain-old-data C struct or integer.
            let mut value: $ty = unsafe { std::mem::zeroed() };
            // SAFETY: `out` is NULL or points at `value`.
            unsafe { $name(device, $($arg,)* out(&mut value, mode)) }
        })
    };
}

/// A two-output `unsigned int` export.
macro_rules! pair {
    ($name:ident) => {
        entry!($name, handle, |device, mode| {
            let (mut first, mut second): (c_uint, c_uint) = (9, 9);
            // SAFETY: NULL or valid unsigneds.
            unsafe { $name(device, out(&mut first, mode), out(&mut second, mode)) }
        })
    };
}

/// A versioned one-struct export, the version tag set.
macro_rules! versioned {
    ($name:ident, $ty:ty, $version:expr) => {
        entry!($name, handle, |device, mode| {
            // SAFETY: zeroed plain-old-data C struct.
            let mut value: $ty = unsafe { std::mem::zeroed() };
            value.version = $version;
            // SAFETY: NULL or a valid struct.
            unsafe { $name(device, out(&mut value, mode)) }
        })
    };
}

/// An export that is NOT_SUPPORTED on GB200 by its profile.
macro_rules! unsupported {
    ($entry:expr) => {{
        let mut entry = $entry;
        entry.call = |device, mode| {
            let inner = $entry.call;
            unsupported_is_success(mode, inner(device, mode))
        };
        entry
    }};
}

/// The rows of the parent's table for `ffi/health.rs`, in `EXPORTS` order.
pub(super) fn table() -> Vec<Entry> {
    vec![
        scalar!(nvmlDeviceGetPowerManagementMode, c_uint),
        scalar!(nvmlDeviceGetPowerManagementLimit, c_uint),
        scalar!(nvmlDeviceGetPowerManagementDefaultLimit, c_uint),
        pair!(nvmlDeviceGetPowerManagementLimitConstraints),
        scalar!(nvmlDeviceGetEnforcedPowerLimit, c_uint),
        scalar!(nvmlDeviceGetPowerState, c_uint),
        scalar!(nvmlDeviceGetTotalEnergyConsumption, u64),
        scalar!(nvmlDeviceGetPerformanceState, c_uint),
        with_args!(
            nvmlDeviceGetViolationStatus,
            crate::health::layout::ViolationTime,
            0
        ),
        scalar!(nvmlDeviceGetCurrentClocksThrottleReasons, u64),
        scalar!(nvmlDeviceGetCurrentClocksEventReasons, u64),
        scalar!(nvmlDeviceGetSupportedClocksThrottleReasons, u64),
        with_args!(nvmlDeviceGetTemperatureThreshold, c_uint, 0),
        versioned!(
            nvmlDeviceGetTemperatureV,
            crate::health::layout::Temperature,
            crate::health::layout::TEMPERATURE_V1
        ),
        versioned!(
            nvmlDeviceGetMarginTemperature,
            crate::health::layout::MarginTemperature,
            crate::health::layout::MARGIN_TEMPERATURE_V1
        ),
        with_args!(
            nvmlDeviceGetThermalSettings,
            crate::health::layout::ThermalSettings,
            0
        ),
        scalar!(nvmlDeviceGetNumFans, c_uint),
        unsupported!(scalar!(nvmlDeviceGetFanSpeed, c_uint)),
        unsupported!(with_args!(nvmlDeviceGetFanSpeed_v2, c_uint, 0)),
        with_args!(nvmlDeviceGetApplicationsClock, c_uint, 0),
        with_args!(nvmlDeviceGetDefaultApplicationsClock, c_uint, 2),
        unsupported!(pair!(nvmlDeviceGetAutoBoostedClocksEnabled)),
        scalar!(
            nvmlDeviceGetBAR1MemoryInfo,
            crate::health::layout::Bar1Memory
        ),
        unsupported!(scalar!(nvmlDeviceGetMemoryBusWidth, c_uint)),
        scalar!(nvmlDeviceGetDefaultEccMode, c_uint),
        with_args!(nvmlDeviceGetTotalEccErrors, u64, 1, 1),
        with_args!(
            nvmlDeviceGetDetailedEccErrors,
            crate::health::layout::EccErrorCounts,
            0,
            0
        ),
        with_args!(nvmlDeviceGetMemoryErrorCounter, u64, 1, 1, 2),
        scalar!(nvmlDeviceGetRetiredPagesPendingStatus, c_uint),
        unsupported!(scalar!(
            nvmlDeviceGetRowRemapperHistogram,
            crate::health::layout::RowRemapperHistogramValues
        )),
        versioned!(
            nvmlDeviceGetSramEccErrorStatus,
            crate::health::layout::EccSramErrorStatus,
            crate::health::layout::ECC_SRAM_ERROR_STATUS_V1
        ),
        entry!(nvmlDeviceGetRemappedRows, handle, |device, mode| {
            let mut rows: [c_uint; 4] = [9; 4];
            let [a, b, c, d] = &mut rows;
            // SAFETY: NULL or valid unsigneds.
            unsafe {
                nvmlDeviceGetRemappedRows(
                    device,
                    out(a, mode),
                    out(b, mode),
                    out(c, mode),
                    out(d, mode),
                )
            }
        }),
        entry!(nvmlDeviceGetRetiredPages, handle, |device, mode| {
            let mut count: c_uint = 0;
            // SAFETY: NULL or a valid count; no addresses are asked for.
            unsafe { nvmlDeviceGetRetiredPages(device, 1, out(&mut count, mode), null_mut()) }
        }),
        entry!(nvmlDeviceGetRetiredPages_v2, handle, |device, mode| {
            let mut count: c_uint = 0;
            // SAFETY: NULL or a valid count; no pages are asked for.
            unsafe {
                nvmlDeviceGetRetiredPages_v2(
                    device,
                    0,
                    out(&mut count, mode),
                    null_mut(),
                    null_mut(),
                )
            }
        }),
        // No pointer: the Null mode passes a mode that is not an nvmlEnableState_t. A non-root
        // caller is refused (NO_PERMISSION), which is this export's success for non-root.
        entry!(nvmlDeviceSetPersistenceMode, handle, |device, mode| {
            let code = nvmlDeviceSetPersistenceMode(device, if mode == Mode::Null { 7 } else { 1 });
            match (mode, code) {
                (Mode::Valid, crate::health::layout::ERROR_NO_PERMISSION) => abi::SUCCESS,
                _ => code,
            }
        }),
        device_string!(nvmlDeviceGetBoardPartNumber),
        device_string!(nvmlDeviceGetVbiosVersion),
        device_string!(nvmlDeviceGetInforomImageVersion),
        // SAFETY: the buffer is valid for the length passed (see `string_call`).
        entry!(
            nvmlDeviceGetInforomVersion,
            handle,
            string,
            |device, mode| {
                string_call(mode, |buffer, length| unsafe {
                    nvmlDeviceGetInforomVersion(device, 1, buffer, length)
                })
            }
        ),
        entry!(nvmlDeviceGetGspFirmwareVersion, handle, |device, mode| {
            let mut buffer = [0 as c_char; 64];
            let buffer = if mode == Mode::Null {
                null_mut()
            } else {
                buffer.as_mut_ptr()
            };
            // SAFETY: NULL or a 64-byte buffer (NVML_GSP_FIRMWARE_VERSION_BUF_SIZE).
            unsafe { nvmlDeviceGetGspFirmwareVersion(device, buffer) }
        }),
        pair!(nvmlDeviceGetGspFirmwareMode),
        scalar!(nvmlDeviceGetDisplayMode, c_uint),
        scalar!(nvmlDeviceGetDisplayActive, c_uint),
        scalar!(nvmlDeviceGetMultiGpuBoard, c_uint),
        pair!(nvmlDeviceGetGpuOperationMode),
        scalar!(nvmlDeviceGetVirtualizationMode, c_uint),
        scalar!(nvmlDeviceGetAccountingMode, c_uint),
        scalar!(nvmlDeviceGetAccountingBufferSize, c_uint),
    ]
}

/// Calls a one-`unsigned int`-output export on GPU 0 and returns (code, value).
fn get_u32(
    call: unsafe extern "C" fn(nvmlDevice_t, *mut c_uint) -> NvmlReturn,
) -> (NvmlReturn, c_uint) {
    let mut value: c_uint = 0xDEAD;
    // SAFETY: a valid out slot.
    let code = unsafe { call(handle(0), &mut value) };
    (code, value)
}

#[test]
fn power_and_clocks_on_gb200_follow_the_profile() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let ok = |value| (abi::SUCCESS, value);
    assert_eq!(get_u32(nvmlDeviceGetPowerManagementMode), ok(1));
    assert_eq!(get_u32(nvmlDeviceGetPowerManagementLimit), ok(1_000_000));
    assert_eq!(
        get_u32(nvmlDeviceGetPowerManagementDefaultLimit),
        ok(1_000_000)
    );
    assert_eq!(get_u32(nvmlDeviceGetEnforcedPowerLimit), ok(1_000_000));
    assert_eq!(get_u32(nvmlDeviceGetPerformanceState), ok(0));
    assert_eq!(get_u32(nvmlDeviceGetPowerState), ok(0));
    let (mut min, mut max) = (0, 0);
    // SAFETY: valid out slots.
    let code =
        unsafe { nvmlDeviceGetPowerManagementLimitConstraints(handle(0), &mut min, &mut max) };
    assert_eq!((code, min, max), (abi::SUCCESS, 400_000, 1_200_000));
    let mut reasons = 0u64;
    // SAFETY: a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetCurrentClocksEventReasons(handle(0), &mut reasons) },
        abi::SUCCESS
    );
    assert_eq!(reasons, 0x1, "GPU idle");
    // SAFETY: a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetSupportedClocksThrottleReasons(handle(0), &mut reasons) },
        abi::SUCCESS
    );
    assert_eq!(reasons, 0x1FF, "nvmlClocksEventReasonAll");
    let mut clock = 0;
    for (kind, default, expected) in [
        (0, false, 2100),
        (2, false, 2500),
        (0, true, 2100),
        (2, true, 2500),
    ] {
        let call = if default {
            nvmlDeviceGetDefaultApplicationsClock
        } else {
            nvmlDeviceGetApplicationsClock
        };
        // SAFETY: a valid out slot.
        assert_eq!(unsafe { call(handle(0), kind, &mut clock) }, abi::SUCCESS);
        assert_eq!(clock, expected, "clock {kind} default {default}");
    }
    // SAFETY: a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetApplicationsClock(handle(0), 1, &mut clock) },
        abi::ERROR_NOT_SUPPORTED,
        "SM"
    );
    // SAFETY: a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetApplicationsClock(handle(0), 4, &mut clock) },
        abi::ERROR_INVALID_ARGUMENT
    );
}

#[test]
fn energy_grows_with_the_power_draw_and_violations_follow_active_reasons() {
    let _session = Session::new(H100, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let energy = || {
        let mut value = 0u64;
        // SAFETY: a valid out slot.
        assert_eq!(
            unsafe { nvmlDeviceGetTotalEnergyConsumption(handle(0), &mut value) },
            abi::SUCCESS
        );
        value
    };
    let first = energy();
    assert!(
        first >= 600_000,
        "starts from the profile's energy: {first}"
    );
    std::thread::sleep(std::time::Duration::from_millis(50));
    let grown = energy() - first;
    // The H100 profile draws 95 W: 50 ms is at least 4750 mJ.
    assert!(grown >= 4_750, "grew by {grown} mJ");
    let mut time = crate::health::layout::ViolationTime {
        reference_time: 0,
        violation_time: 9,
    };
    // SAFETY: a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetViolationStatus(handle(0), 0, &mut time) },
        abi::SUCCESS
    );
    assert_eq!(time.violation_time, 0, "power cap not active");
    assert!(
        time.reference_time > 1_600_000_000_000_000,
        "microseconds since the epoch"
    );
    // SAFETY: a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetViolationStatus(handle(0), 10, &mut time) },
        abi::ERROR_NOT_SUPPORTED
    );
    // SAFETY: a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetViolationStatus(handle(0), 7, &mut time) },
        abi::ERROR_INVALID_ARGUMENT
    );
}

#[test]
fn thermal_and_fans_on_gb200() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let mut value: c_uint = 0;
    for (kind, expected) in [
        (0, abi::SUCCESS),
        (1, abi::SUCCESS),
        (2, abi::ERROR_NOT_SUPPORTED),
        (3, abi::SUCCESS),
        (5, abi::ERROR_NOT_SUPPORTED),
        (8, abi::ERROR_INVALID_ARGUMENT),
    ] {
        // SAFETY: a valid out slot.
        assert_eq!(
            unsafe { nvmlDeviceGetTemperatureThreshold(handle(0), kind, &mut value) },
            expected,
            "threshold {kind}"
        );
    }
    // SAFETY: a valid out slot.
    unsafe { nvmlDeviceGetTemperatureThreshold(handle(0), 1, &mut value) };
    assert_eq!(value, 90, "slowdown");
    let mut margin = crate::health::layout::MarginTemperature {
        version: crate::health::layout::MARGIN_TEMPERATURE_V1,
        margin_temperature: 0,
    };
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlDeviceGetMarginTemperature(handle(0), &mut margin) },
        abi::SUCCESS
    );
    assert_eq!(margin.margin_temperature, 90 - 36);
    margin.version = 0x0200_0008;
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlDeviceGetMarginTemperature(handle(0), &mut margin) },
        abi::ERROR_ARGUMENT_VERSION_MISMATCH
    );
    let mut temperature = crate::health::layout::Temperature {
        version: crate::health::layout::TEMPERATURE_V1,
        sensor_type: 0,
        temperature: 0,
    };
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlDeviceGetTemperatureV(handle(0), &mut temperature) },
        abi::SUCCESS
    );
    assert_eq!(temperature.temperature, 36);
    temperature.sensor_type = 1;
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlDeviceGetTemperatureV(handle(0), &mut temperature) },
        abi::ERROR_INVALID_ARGUMENT
    );
    let mut settings = crate::health::layout::ThermalSettings::default();
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlDeviceGetThermalSettings(handle(0), 0, &mut settings) },
        abi::SUCCESS
    );
    assert_eq!(
        (
            settings.count,
            settings.sensor[0].current_temp,
            settings.sensor[0].default_max_temp
        ),
        (1, 36, 85)
    );
    assert_eq!(
        get_u32(nvmlDeviceGetNumFans),
        (abi::SUCCESS, 0),
        "liquid cooled"
    );
    assert_eq!(get_u32(nvmlDeviceGetFanSpeed).0, abi::ERROR_NOT_SUPPORTED);
    // SAFETY: a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetFanSpeed_v2(handle(0), 0, &mut value) },
        abi::ERROR_NOT_SUPPORTED
    );
}

#[test]
fn memory_ecc_and_rows_on_gb200_and_h100() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let mut bar1 = crate::health::layout::Bar1Memory {
        bar1_total: 0,
        bar1_free: 0,
        bar1_used: 9,
    };
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlDeviceGetBAR1MemoryInfo(handle(0), &mut bar1) },
        abi::SUCCESS
    );
    assert_eq!(
        (bar1.bar1_total, bar1.bar1_free, bar1.bar1_used),
        (549_755_813_888, 549_755_813_888, 0)
    );
    assert_eq!(get_u32(nvmlDeviceGetDefaultEccMode), (abi::SUCCESS, 1));
    assert_eq!(
        get_u32(nvmlDeviceGetRetiredPagesPendingStatus),
        (abi::SUCCESS, 0)
    );
    let mut count: u64 = 9;
    // SAFETY: a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetTotalEccErrors(handle(0), 1, 0, &mut count) },
        abi::SUCCESS
    );
    assert_eq!(count, 0);
    // SAFETY: a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetMemoryErrorCounter(handle(0), 0, 1, 8, &mut count) },
        abi::ERROR_INVALID_ARGUMENT
    );
    let mut status: crate::health::layout::EccSramErrorStatus = unsafe { std::mem::zeroed() };
    status.version = crate::health::layout::ECC_SRAM_ERROR_STATUS_V1;
    // SAFETY: a valid struct.
    assert_eq!(
        unsafe { nvmlDeviceGetSramEccErrorStatus(handle(0), &mut status) },
        abi::SUCCESS
    );
    assert_eq!(
        (
            status.version,
            status.aggregate_cor,
            status.b_threshold_exceeded
        ),
        (crate::health::layout::ECC_SRAM_ERROR_STATUS_V1, 0, 0)
    );
    let mut rows = [9 as c_uint; 4];
    let [a, b, c, d] = &mut rows;
    // SAFETY: valid out slots.
    assert_eq!(
        unsafe { nvmlDeviceGetRemappedRows(handle(0), a, b, c, d) },
        abi::SUCCESS
    );
    assert_eq!(rows, [0; 4]);
    let mut pages: c_uint = 4;
    let mut addresses = [7u64; 4];
    // SAFETY: room for four addresses.
    assert_eq!(
        unsafe { nvmlDeviceGetRetiredPages(handle(0), 1, &mut pages, addresses.as_mut_ptr()) },
        abi::SUCCESS
    );
    assert_eq!(
        (pages, addresses),
        (0, [7; 4]),
        "none retired, nothing written"
    );
    pages = 1;
    // SAFETY: a count of 1 with no array is refused before any write.
    assert_eq!(
        unsafe { nvmlDeviceGetRetiredPages(handle(0), 1, &mut pages, null_mut()) },
        abi::ERROR_INVALID_ARGUMENT
    );
    // SAFETY: as above; cause 2 does not exist.
    assert_eq!(
        unsafe { nvmlDeviceGetRetiredPages(handle(0), 2, &mut pages, addresses.as_mut_ptr()) },
        abi::ERROR_INVALID_ARGUMENT
    );
    drop(_session);
    let _session = Session::new(H100, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    assert_eq!(get_u32(nvmlDeviceGetMemoryBusWidth), (abi::SUCCESS, 5120));
    assert_eq!(
        get_u32(nvmlDeviceGetPowerManagementLimit),
        (abi::SUCCESS, 700_000)
    );
}

#[test]
fn identity_firmware_and_modes_on_gb200() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let text = |call: &dyn Fn(*mut c_char, c_uint) -> NvmlReturn| {
        let mut buffer = [0 as c_char; 96];
        assert_eq!(call(buffer.as_mut_ptr(), 96), abi::SUCCESS);
        // SAFETY: the successful call NUL-terminated the buffer.
        unsafe { CStr::from_ptr(buffer.as_ptr()) }
            .to_str()
            .unwrap()
            .to_owned()
    };
    let device = handle(0);
    // SAFETY (all four): the buffer is valid for the length passed.
    assert_eq!(
        text(&|b, l| unsafe { nvmlDeviceGetBoardPartNumber(device, b, l) }),
        "699-2G530-0200-000"
    );
    assert_eq!(
        text(&|b, l| unsafe { nvmlDeviceGetVbiosVersion(device, b, l) }),
        "96.00.9E.00.01"
    );
    assert_eq!(
        text(&|b, l| unsafe { nvmlDeviceGetInforomImageVersion(device, b, l) }),
        "G530.0200.00.01"
    );
    assert_eq!(
        text(&|b, l| unsafe { nvmlDeviceGetInforomVersion(device, 2, b, l) }),
        "1.0"
    );
    assert_eq!(
        text(&|b, _| unsafe { nvmlDeviceGetGspFirmwareVersion(device, b) }),
        "580.65.06"
    );
    let mut buffer = [0 as c_char; 16];
    // SAFETY: a 16-byte buffer.
    assert_eq!(
        unsafe { nvmlDeviceGetInforomVersion(device, 3, buffer.as_mut_ptr(), 16) },
        abi::ERROR_NOT_SUPPORTED,
        "DEN"
    );
    // SAFETY: as above.
    assert_eq!(
        unsafe { nvmlDeviceGetInforomVersion(device, 4, buffer.as_mut_ptr(), 16) },
        abi::ERROR_INVALID_ARGUMENT
    );
    let (mut first, mut second) = (9, 9);
    // SAFETY: valid out slots.
    assert_eq!(
        unsafe { nvmlDeviceGetGspFirmwareMode(device, &mut first, &mut second) },
        abi::SUCCESS
    );
    assert_eq!((first, second), (1, 1));
    // SAFETY: valid out slots.
    assert_eq!(
        unsafe { nvmlDeviceGetGpuOperationMode(device, &mut first, &mut second) },
        abi::SUCCESS
    );
    assert_eq!((first, second), (0, 0), "all on");
    for (call, expected) in [
        (
            nvmlDeviceGetDisplayMode as unsafe extern "C" fn(_, _) -> _,
            0,
        ),
        (nvmlDeviceGetDisplayActive, 0),
        (nvmlDeviceGetMultiGpuBoard, 0),
        (nvmlDeviceGetVirtualizationMode, 0),
        (nvmlDeviceGetAccountingMode, 0),
        (nvmlDeviceGetAccountingBufferSize, 4000),
    ] {
        assert_eq!(get_u32(call), (abi::SUCCESS, expected));
    }
}

#[test]
fn persistence_mode_set_by_root_is_reported_and_bad_modes_are_refused() {
    let _session = Session::new(GB200, None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let device = handle(3);
    assert_eq!(
        nvmlDeviceSetPersistenceMode(device, 2),
        abi::ERROR_INVALID_ARGUMENT
    );
    let code = nvmlDeviceSetPersistenceMode(device, 0);
    let mut mode: c_uint = 9;
    // SAFETY: a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetPersistenceMode(device, &mut mode) },
        abi::SUCCESS
    );
    if code == abi::SUCCESS {
        assert_eq!(mode, 0, "root disabled it");
        assert_eq!(nvmlDeviceSetPersistenceMode(device, 1), abi::SUCCESS);
        // SAFETY: a valid out slot.
        unsafe { nvmlDeviceGetPersistenceMode(device, &mut mode) };
    } else {
        assert_eq!(code, crate::health::layout::ERROR_NO_PERMISSION);
    }
    assert_eq!(mode, 1, "the profile's (or root's again)");
}

/// GB200's profile without its `health` block.
fn gb200_without_health() -> String {
    let start = GB200.find("  # Health and telemetry").unwrap();
    let end = GB200.find("\ndevices:\n").unwrap();
    format!("{}{}", &GB200[..start], &GB200[end + 1..])
}

#[test]
fn a_profile_without_health_is_not_supported() {
    let _session = Session::new(&gb200_without_health(), None);
    assert_eq!(nvmlInit_v2(), abi::SUCCESS);
    let getters: [unsafe extern "C" fn(nvmlDevice_t, *mut c_uint) -> NvmlReturn; 12] = [
        nvmlDeviceGetPowerManagementMode,
        nvmlDeviceGetPowerManagementLimit,
        nvmlDeviceGetEnforcedPowerLimit,
        nvmlDeviceGetPerformanceState,
        nvmlDeviceGetNumFans,
        nvmlDeviceGetDefaultEccMode,
        nvmlDeviceGetRetiredPagesPendingStatus,
        nvmlDeviceGetDisplayMode,
        nvmlDeviceGetMultiGpuBoard,
        nvmlDeviceGetVirtualizationMode,
        nvmlDeviceGetAccountingMode,
        nvmlDeviceGetAccountingBufferSize,
    ];
    for getter in getters {
        assert_eq!(get_u32(getter), (abi::ERROR_NOT_SUPPORTED, 0xDEAD));
    }
    let mut value: c_uint = 0;
    // SAFETY: a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetTemperatureThreshold(handle(0), 0, &mut value) },
        abi::ERROR_NOT_SUPPORTED
    );
    let mut buffer = [0 as c_char; 64];
    // SAFETY: a 64-byte buffer.
    assert_eq!(
        unsafe { nvmlDeviceGetGspFirmwareVersion(handle(0), buffer.as_mut_ptr()) },
        abi::ERROR_NOT_SUPPORTED
    );
    let mut energy = 0u64;
    // SAFETY: a valid out slot.
    assert_eq!(
        unsafe { nvmlDeviceGetTotalEnergyConsumption(handle(0), &mut energy) },
        abi::ERROR_NOT_SUPPORTED
    );
    let mut pages: c_uint = 0;
    // SAFETY: a valid count, no addresses asked for.
    assert_eq!(
        unsafe { nvmlDeviceGetRetiredPages(handle(0), 0, &mut pages, null_mut()) },
        abi::ERROR_NOT_SUPPORTED
    );
}
