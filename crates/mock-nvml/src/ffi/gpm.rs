//! GPU Performance Monitoring (issue 22, misc area; answers and samples in [`crate::gpm`]).

use super::guard::*;
use crate::{
    abi::{self, NvmlReturn},
    state,
};
use crate::{
    activity_abi::{self as cabi, GpmMetric, GpmMetricsGet, GpmSupport},
    gpm,
};
use std::ffi::c_void;

/// `nvmlGpmSample_t`: the opaque handle [`gpm::alloc`] issued.
pub type nvmlGpmSample_t = *mut c_void;

/// `nvmlGpmQueryDeviceSupport`: `isSupportedDevice` is 1 on Hopper and later parts;
/// ARGUMENT_VERSION_MISMATCH unless `version` is `NVML_GPM_SUPPORT_VERSION`.
///
/// # Safety
/// `support` must be NULL or valid for reading and writing an `nvmlGpmSupport_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(
    device: nvmlDevice_t,
    support: *mut GpmSupport,
) -> NvmlReturn {
    guard(|| {
        let value = with_device(device, |_, device| {
            // SAFETY: forwarded from this function's contract.
            let version = unsafe { get_u32(support.cast_const().cast()) }?;
            if version != cabi::GPM_SUPPORT_VERSION {
                return Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH);
            }
            Ok(GpmSupport {
                version,
                is_supported_device: u32::from(gpm::supported(device)),
            })
        })?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(support, value) }
    })
}

/// `nvmlGpmSampleAlloc`: host memory only, so it works before init too (as upstream's).
///
/// # Safety
/// `sample` must be NULL or valid for writing a handle.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(sample: *mut nvmlGpmSample_t) -> NvmlReturn {
    guard(|| {
        non_null([sample.cast_const().cast()])?;
        let handle = gpm::alloc() as nvmlGpmSample_t;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(sample, handle) }
    })
}

/// `nvmlGpmSampleFree`: INVALID_ARGUMENT for anything but a live sample (before init too, as
/// upstream's).
#[no_mangle]
pub extern "C" fn nvmlGpmSampleFree(sample: nvmlGpmSample_t) -> NvmlReturn {
    guard(|| gpm::free(sample as usize))
}

/// `nvmlGpmSampleGet`: takes a sample of the GPU; NOT_SUPPORTED before Hopper.
#[no_mangle]
pub extern "C" fn nvmlGpmSampleGet(device: nvmlDevice_t, sample: nvmlGpmSample_t) -> NvmlReturn {
    guard(|| with_device(device, |_, device| gpm::take(sample as usize, device)))
}

/// `nvmlGpmMetricsGet`: each of the first `numMetrics` entries answered over the two samples of
/// one GPU (per-entry `nvmlReturn`; `metricInfo` NULL, which nvml.h allows). INVALID_ARGUMENT
/// for NULL, more than `NVML_GPM_METRIC_MAX` metrics or samples not taken on one GPU;
/// ARGUMENT_VERSION_MISMATCH for another version.
///
/// # Safety
/// `metrics_get` must be NULL or valid for reading and writing an `nvmlGpmMetricsGet_t`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmMetricsGet(metrics_get: *mut GpmMetricsGet) -> NvmlReturn {
    guard(|| {
        let loaded = state::loaded()?;
        // SAFETY: forwarded from this function's contract.
        let version = unsafe { get_u32(metrics_get.cast_const().cast()) }?;
        if version != cabi::GPM_METRICS_GET_VERSION {
            return Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH);
        }
        // SAFETY: non-NULL (checked by `get_u32`) and valid for the whole struct (contract).
        let mut request = unsafe { metrics_get.read_unaligned() };
        if request.num_metrics > gpm::METRIC_MAX {
            return Err(abi::ERROR_INVALID_ARGUMENT);
        }
        let gpu = gpm::pair(request.sample1, request.sample2)?;
        let device = loaded
            .devices
            .get(gpu as usize)
            .ok_or(abi::ERROR_INVALID_ARGUMENT)?;
        for entry in request
            .metrics
            .iter_mut()
            .take(request.num_metrics as usize)
        {
            let answer = gpm::metric(device, entry.metric_id);
            *entry = GpmMetric {
                metric_id: entry.metric_id,
                nvml_return: answer.err().unwrap_or(abi::SUCCESS),
                value: answer.unwrap_or(0.0),
                metric_info: [std::ptr::null(); 3],
            };
        }
        // SAFETY: as above.
        unsafe { metrics_get.write_unaligned(request) };
        Ok(())
    })
}
