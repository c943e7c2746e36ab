//! Fills a [`Report`] through the library's entry points ([`Nvml`]); the renderers never call
//! the library. A query the library answers NOT_SUPPORTED is `N/A`, any other failure its error
//! string, as nvidia-smi prints them; only a GPU without a handle fails the whole report.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::ffi::{Clock, Device, FabricFields, Link, MemoryFields, Nvml, PciFields, Return};
use crate::modes::{AddressingMode, ComputeMode, Pending};
use crate::report::{
    Architecture, Brand, Fabric, FabricState, Gpu, HealthSummary, Memory, Pci, Reading, Report,
};

/// What failed and the library's code.
pub type Failure = (String, Return);

/// The report of the GPUs at `indices` (of `count` attached), taken now.
pub fn report(nvml: &Nvml, indices: &[u32], count: u32) -> Result<Report, Failure> {
    let mut gpus = Vec::with_capacity(indices.len());
    for &index in indices {
        let device = nvml
            .handle(index)
            .map_err(|code| (format!("GPU {index}"), code))?;
        gpus.push(gpu(nvml, device));
    }
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    Ok(Report {
        timestamp: asctime(seconds),
        driver_version: reading(nvml, nvml.driver_version()),
        cuda_version: reading(nvml, nvml.cuda_version()),
        attached_gpus: count,
        gpus,
    })
}

/// The four clocks in nvidia-smi's order.
const CLOCKS: [Clock; 4] = [Clock::Graphics, Clock::Sm, Clock::Memory, Clock::Video];
/// The four link figures in [`Gpu::link`]'s order.
const LINKS: [Link; 4] = [
    Link::MaxGen,
    Link::CurrentGen,
    Link::MaxWidth,
    Link::CurrentWidth,
];

fn gpu(nvml: &Nvml, device: Device) -> Gpu {
    let read = |result| reading(nvml, result);
    Gpu {
        product_name: read(nvml.name(device)),
        brand: reading(nvml, nvml.brand(device).map(Brand::from_raw)),
        architecture: reading(nvml, nvml.architecture(device).map(Architecture::from_raw)),
        persistence_mode: reading(nvml, nvml.persistence_mode(device)),
        serial: read(nvml.serial(device)),
        uuid: read(nvml.uuid(device)),
        minor_number: reading(nvml, nvml.minor_number(device)),
        board_id: reading(nvml, nvml.board_id(device)),
        pci: reading(nvml, nvml.pci(device).map(pci)),
        memory: reading(nvml, nvml.memory(device).map(memory)),
        fabric: reading(nvml, nvml.fabric(device).map(|it| fabric(nvml, it))),
        addressing_mode: reading(
            nvml,
            nvml.addressing_mode(device).map(AddressingMode::from_raw),
        ),
        mig_mode: reading(nvml, nvml.mig_mode(device).map(Pending::from_raw)),
        link: LINKS.map(|link| reading(nvml, nvml.link(device, link))),
        compute_mode: reading(nvml, nvml.compute_mode(device).map(ComputeMode::from_raw)),
        utilization: reading(nvml, nvml.utilization(device)),
        ecc_mode: reading(nvml, nvml.ecc_mode(device).map(Pending::from_raw)),
        temperature: reading(nvml, nvml.temperature(device)),
        power_mw: reading(nvml, nvml.power_usage(device)),
        clocks: CLOCKS.map(|clock| reading(nvml, nvml.clock(device, clock))),
        max_clocks: CLOCKS.map(|clock| reading(nvml, nvml.max_clock(device, clock))),
    }
}

/// A query's result as nvidia-smi prints it.
fn reading<T>(nvml: &Nvml, result: Result<T, Return>) -> Reading<T> {
    match result {
        Ok(value) => Reading::Value(value),
        Err(Return::NOT_SUPPORTED) => Reading::NotAvailable,
        Err(code) => Reading::Failed(nvml.error_string(code)),
    }
}

fn pci(fields: PciFields) -> Pci {
    Pci {
        bus: fields.bus,
        device: fields.device,
        domain: fields.domain,
        device_id: fields.pci_device_id,
        bus_id: fields.bus_id,
        sub_system_id: fields.pci_sub_system_id,
    }
}

fn memory(fields: MemoryFields) -> Memory {
    Memory {
        total: fields.total,
        reserved: fields.reserved,
        used: fields.used,
        free: fields.free,
    }
}

fn fabric(nvml: &Nvml, fields: FabricFields) -> Fabric {
    Fabric {
        state: FabricState::from_raw(fields.state),
        status: Reading::Value(nvml.error_string(fields.status)),
        clique_id: fields.clique_id,
        cluster_uuid: fields.cluster_uuid,
        health_mask: fields.health_mask,
        health_summary: fields.health_summary.map(HealthSummary::from_raw),
    }
}

/// `seconds` since the epoch as C's `asctime` prints them, in UTC (`Fri Dec  4 15:12:01 2026`;
/// nvidia-smi prints local time, and containers run in UTC unless told otherwise).
pub fn asctime(seconds: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = seconds / 86_400;
    let of_day = seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{} {} {day:>2} {:02}:{:02}:{:02} {year}",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        of_day / 3600,
        (of_day % 3600) / 60,
        of_day % 60
    )
}

/// (year, month 1-12, day 1-31) of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_as_asctime_in_utc() {
        assert_eq!(asctime(0), "Thu Jan  1 00:00:00 1970");
        // 2026-12-04T15:12:01Z.
        assert_eq!(asctime(1_796_397_121), "Fri Dec  4 15:12:01 2026");
        // A leap day: 2024-02-29T23:59:59Z.
        assert_eq!(asctime(1_709_251_199), "Thu Feb 29 23:59:59 2024");
    }
}
