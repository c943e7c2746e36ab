//! ECC counters, retired pages and remapped rows from a device's `health` block: pure answers.

use nvml_profile::{Device, EccCounts, EccErrors, EccLocations, RetiredPage, SramCounts};

use super::{layout as c, section, Answer};
use crate::abi;

/// `nvmlMemoryErrorType_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// `NVML_MEMORY_ERROR_TYPE_CORRECTED` (0).
    Corrected,
    /// `NVML_MEMORY_ERROR_TYPE_UNCORRECTED` (1).
    Uncorrected,
}

/// `nvmlEccCounterType_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// `NVML_VOLATILE_ECC` (0).
    Volatile,
    /// `NVML_AGGREGATE_ECC` (1).
    Aggregate,
}

impl ErrorType {
    /// Decodes the C enum; INVALID_ARGUMENT for anything else.
    pub fn from_raw(raw: u32) -> Answer<ErrorType> {
        match raw {
            0 => Ok(ErrorType::Corrected),
            1 => Ok(ErrorType::Uncorrected),
            _ => Err(abi::ERROR_INVALID_ARGUMENT),
        }
    }
}

impl Counter {
    /// Decodes the C enum; INVALID_ARGUMENT for anything else.
    pub fn from_raw(raw: u32) -> Answer<Counter> {
        match raw {
            0 => Ok(Counter::Volatile),
            1 => Ok(Counter::Aggregate),
            _ => Err(abi::ERROR_INVALID_ARGUMENT),
        }
    }
}

/// The ECC counters; NOT_SUPPORTED without an `ecc_errors` section or while ECC is off.
fn counters(device: &Device) -> Answer<EccErrors> {
    let errors = section(device, |health| health.ecc_errors)?;
    match device.ecc {
        Some(ecc) if ecc.current => Ok(errors),
        _ => Err(abi::ERROR_NOT_SUPPORTED),
    }
}

fn pick(errors: &EccErrors, error: ErrorType, counter: Counter) -> (EccLocations, u64) {
    let (counts, sram): (EccCounts, SramCounts) = match counter {
        Counter::Volatile => (errors.volatile, errors.sram.volatile),
        Counter::Aggregate => (errors.aggregate, errors.sram.aggregate),
    };
    match error {
        ErrorType::Corrected => (counts.corrected, sram.correctable),
        ErrorType::Uncorrected => (
            counts.uncorrected,
            sram.uncorrectable_parity
                .saturating_add(sram.uncorrectable_sec_ded),
        ),
    }
}

/// `device` with `single` more corrected and `double` more uncorrected errors in device memory
/// (the injected ECC errors, `node_layout::xid`): a volatile error counts in the volatile and in
/// the aggregate counters, as on the real part. A device without ECC counters is unchanged.
pub fn with_injected(device: &Device, (single, double): (u64, u64)) -> Device {
    let mut device = device.clone();
    if let Some(errors) = device.health.ecc_errors.as_mut() {
        for counts in [&mut errors.volatile, &mut errors.aggregate] {
            let corrected = &mut counts.corrected.device_memory;
            *corrected = corrected.saturating_add(single);
            let uncorrected = &mut counts.uncorrected.device_memory;
            *uncorrected = uncorrected.saturating_add(double);
        }
    }
    device
}

/// `nvmlDeviceGetDefaultEccMode`.
pub fn default_mode(device: &Device) -> Answer<u32> {
    section(device, |health| health.ecc_errors).map(|errors| u32::from(errors.default_enabled))
}

/// `nvmlDeviceGetTotalEccErrors`: every location's count, SRAM included.
pub fn total(device: &Device, error: u32, counter: u32) -> Answer<u64> {
    let (error, counter) = (ErrorType::from_raw(error)?, Counter::from_raw(counter)?);
    let (locations, sram) = pick(&counters(device)?, error, counter);
    Ok([
        locations.l1_cache,
        locations.l2_cache,
        locations.device_memory,
        locations.register_file,
        locations.texture_memory,
        sram,
    ]
    .into_iter()
    .fold(0u64, u64::saturating_add))
}

/// `nvmlDeviceGetDetailedEccErrors`.
pub fn detailed(device: &Device, error: u32, counter: u32) -> Answer<c::EccErrorCounts> {
    let (error, counter) = (ErrorType::from_raw(error)?, Counter::from_raw(counter)?);
    let (locations, _) = pick(&counters(device)?, error, counter);
    Ok(c::EccErrorCounts {
        l1_cache: locations.l1_cache,
        l2_cache: locations.l2_cache,
        device_memory: locations.device_memory,
        register_file: locations.register_file,
    })
}

/// `nvmlDeviceGetMemoryErrorCounter`: `nvmlMemoryLocation_t` 0..=7; shared memory (5) and the
/// CBU (6) are not modelled and count zero.
pub fn memory_error_counter(
    device: &Device,
    error: u32,
    counter: u32,
    location: u32,
) -> Answer<u64> {
    let (error, counter) = (ErrorType::from_raw(error)?, Counter::from_raw(counter)?);
    if location >= 8 {
        return Err(abi::ERROR_INVALID_ARGUMENT);
    }
    let (locations, sram) = pick(&counters(device)?, error, counter);
    Ok(match location {
        0 => locations.l1_cache,
        1 => locations.l2_cache,
        2 => locations.device_memory,
        3 => locations.register_file,
        4 => locations.texture_memory,
        7 => sram,
        _ => 0,
    })
}

/// `nvmlDeviceGetSramEccErrorStatus` (v1 layout, version tag set).
pub fn sram_status(device: &Device) -> Answer<c::EccSramErrorStatus> {
    let sram = counters(device)?.sram;
    let sources = sram.uncorrectable_sources;
    Ok(c::EccSramErrorStatus {
        version: c::ECC_SRAM_ERROR_STATUS_V1,
        _pad0: 0,
        aggregate_unc_parity: sram.aggregate.uncorrectable_parity,
        aggregate_unc_sec_ded: sram.aggregate.uncorrectable_sec_ded,
        aggregate_cor: sram.aggregate.correctable,
        volatile_unc_parity: sram.volatile.uncorrectable_parity,
        volatile_unc_sec_ded: sram.volatile.uncorrectable_sec_ded,
        volatile_cor: sram.volatile.correctable,
        aggregate_unc_bucket_l2: sources.l2,
        aggregate_unc_bucket_sm: sources.sm,
        aggregate_unc_bucket_pcie: sources.pcie,
        aggregate_unc_bucket_mcu: sources.mcu,
        aggregate_unc_bucket_other: sources.other,
        b_threshold_exceeded: u32::from(sram.threshold_exceeded),
        _pad1: 0,
    })
}

/// `nvmlDeviceGetRetiredPages{,_v2}`: the pages retired for `cause` (0: multiple single-bit
/// errors, 1: a double-bit error).
pub fn retired_pages(device: &Device, cause: u32) -> Answer<&[RetiredPage]> {
    let pages = section(device, |health| health.retired_pages.as_ref())?;
    match cause {
        0 => Ok(&pages.multiple_single_bit),
        1 => Ok(&pages.double_bit),
        _ => Err(abi::ERROR_INVALID_ARGUMENT),
    }
}

/// `nvmlDeviceGetRetiredPagesPendingStatus`.
pub fn retired_pages_pending(device: &Device) -> Answer<u32> {
    section(device, |health| health.retired_pages.as_ref()).map(|pages| u32::from(pages.pending))
}

/// `nvmlDeviceGetRemappedRows`: (correctable, uncorrectable, pending, failure occurred).
pub fn remapped_rows(device: &Device) -> Answer<[u32; 4]> {
    section(device, |health| health.remapped_rows).map(|rows| {
        [
            rows.correctable,
            rows.uncorrectable,
            u32::from(rows.pending),
            u32::from(rows.failure_occurred),
        ]
    })
}

/// `nvmlDeviceGetRowRemapperHistogram`.
pub fn row_remapper_histogram(device: &Device) -> Answer<c::RowRemapperHistogramValues> {
    let rows = section(device, |health| health.remapped_rows)?;
    let histogram = rows.histogram.ok_or(abi::ERROR_NOT_SUPPORTED)?;
    Ok(c::RowRemapperHistogramValues {
        max: histogram.max,
        high: histogram.high,
        partial: histogram.partial,
        low: histogram.low,
        none: histogram.none,
    })
}
