//! The pure answers on the shipped profiles and on hand-made `health` blocks.

use std::time::Duration;

use nvml_profile::{
    Architecture, ClocksEventReason, ClocksEventReasons, Device, Fans, Profile, RetiredPage,
    RetiredPages, RowRemapperHistogram, GB200, H100,
};

use super::*;

fn gb200() -> Device {
    Profile::parse(GB200).unwrap().devices().remove(0)
}

#[test]
fn energy_is_the_start_plus_the_draw_over_time() {
    let h100 = Profile::parse(H100).unwrap().devices().remove(0);
    assert_eq!(total_energy(&h100, Duration::ZERO), Ok(600_000));
    // 95 W for 10 s is 950 J.
    assert_eq!(
        total_energy(&h100, Duration::from_secs(10)),
        Ok(600_000 + 950_000)
    );
    assert_eq!(total_energy(&gb200(), Duration::from_millis(1)), Ok(145));
    let mut bare = gb200();
    bare.health.power = None;
    assert_eq!(
        total_energy(&bare, Duration::ZERO),
        Err(abi::ERROR_NOT_SUPPORTED)
    );
}

#[test]
fn violations_accrue_only_for_an_active_reason() {
    let mut device = gb200();
    let second = Duration::from_secs(1);
    let idle = violation_status(&device, 0, second, 42).unwrap();
    assert_eq!((idle.reference_time, idle.violation_time), (42, 0));
    device.health.clocks_event_reasons = Some(ClocksEventReasons {
        active: vec![ClocksEventReason::SwPowerCap, ClocksEventReason::SyncBoost],
        supported: vec![ClocksEventReason::SwPowerCap, ClocksEventReason::SyncBoost],
    });
    assert_eq!(
        violation_status(&device, 0, second, 0)
            .unwrap()
            .violation_time,
        1_000_000_000
    );
    assert_eq!(
        violation_status(&device, 2, second, 0)
            .unwrap()
            .violation_time,
        1_000_000_000
    );
    assert_eq!(
        violation_status(&device, 1, second, 0)
            .unwrap()
            .violation_time,
        0
    );
    assert_eq!(
        violation_status(&device, 11, second, 0)
            .unwrap()
            .violation_time,
        0
    );
    assert_eq!(
        violation_status(&device, 10, second, 0),
        Err(abi::ERROR_NOT_SUPPORTED)
    );
    for policy in [6, 9, 12] {
        assert_eq!(
            violation_status(&device, policy, second, 0),
            Err(abi::ERROR_INVALID_ARGUMENT)
        );
    }
    assert_eq!(clocks_event_reasons(&device), Ok(0x14));
}

#[test]
fn margin_is_signed_and_ada_or_later_only() {
    let mut device = gb200();
    assert_eq!(margin_temperature(&device), Ok(90 - 36));
    device.temperature_c = 97;
    assert_eq!(margin_temperature(&device), Ok(-7));
    device.architecture = Architecture::Ampere;
    assert_eq!(margin_temperature(&device), Err(abi::ERROR_NOT_SUPPORTED));
    device.architecture = Architecture::Unknown;
    assert_eq!(margin_temperature(&device), Err(abi::ERROR_NOT_SUPPORTED));
}

#[test]
fn fans_answer_per_fan_only_when_there_are_fans() {
    let mut device = gb200();
    assert_eq!(num_fans(&device), Ok(0));
    assert_eq!(fan_speed(&device, None), Err(abi::ERROR_NOT_SUPPORTED));
    device.health.fans = Some(Fans {
        count: 2,
        speed_percent: 30,
    });
    assert_eq!(fan_speed(&device, None), Ok(30));
    assert_eq!(fan_speed(&device, Some(1)), Ok(30));
    assert_eq!(
        fan_speed(&device, Some(2)),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
}

#[test]
fn thresholds_follow_nvml_h_enum() {
    let device = gb200();
    let answers: Vec<_> = (0..9)
        .map(|kind| temperature_threshold(&device, kind))
        .collect();
    let unsupported = Err(abi::ERROR_NOT_SUPPORTED);
    assert_eq!(
        answers,
        [
            Ok(95),
            Ok(90),
            unsupported,
            Ok(85),
            unsupported,
            unsupported,
            unsupported,
            unsupported,
            Err(abi::ERROR_INVALID_ARGUMENT)
        ]
    );
}

#[test]
fn ecc_counters_need_ecc_on_and_sum_their_locations() {
    let mut device = gb200();
    let mut errors = device.health.ecc_errors.unwrap();
    errors.aggregate.uncorrected.device_memory = 3;
    errors.aggregate.uncorrected.l2_cache = 1;
    errors.sram.aggregate.uncorrectable_parity = 2;
    errors.sram.aggregate.uncorrectable_sec_ded = 5;
    errors.sram.threshold_exceeded = true;
    device.health.ecc_errors = Some(errors);
    assert_eq!(ecc::total(&device, 1, 1), Ok(3 + 1 + 2 + 5));
    assert_eq!(ecc::total(&device, 1, 0), Ok(0), "volatile");
    assert_eq!(ecc::total(&device, 2, 0), Err(abi::ERROR_INVALID_ARGUMENT));
    assert_eq!(ecc::memory_error_counter(&device, 1, 1, 2), Ok(3));
    assert_eq!(ecc::memory_error_counter(&device, 1, 1, 7), Ok(7), "SRAM");
    assert_eq!(ecc::memory_error_counter(&device, 1, 1, 6), Ok(0), "CBU");
    assert_eq!(ecc::detailed(&device, 1, 1).unwrap().l2_cache, 1);
    let sram = ecc::sram_status(&device).unwrap();
    assert_eq!(
        (sram.aggregate_unc_parity, sram.b_threshold_exceeded),
        (2, 1)
    );
    device.ecc = device.ecc.map(|mut ecc| {
        ecc.current = false;
        ecc
    });
    assert_eq!(ecc::total(&device, 1, 1), Err(abi::ERROR_NOT_SUPPORTED));
    assert_eq!(ecc::sram_status(&device), Err(abi::ERROR_NOT_SUPPORTED));
    assert_eq!(
        ecc::default_mode(&device),
        Ok(1),
        "the default mode needs no ECC on"
    );
}

#[test]
fn pages_rows_and_histogram() {
    let mut device = gb200();
    assert_eq!(ecc::retired_pages(&device, 0), Ok(&[][..]));
    assert_eq!(
        ecc::row_remapper_histogram(&device),
        Err(abi::ERROR_NOT_SUPPORTED)
    );
    let page = RetiredPage {
        address: 0x1000,
        timestamp_us: 7,
    };
    device.health.retired_pages = Some(RetiredPages {
        multiple_single_bit: vec![],
        double_bit: vec![page],
        pending: true,
    });
    assert_eq!(ecc::retired_pages(&device, 1), Ok(&[page][..]));
    assert_eq!(
        ecc::retired_pages(&device, 2),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
    assert_eq!(ecc::retired_pages_pending(&device), Ok(1));
    let mut rows = device.health.remapped_rows.unwrap();
    rows.histogram = Some(RowRemapperHistogram {
        max: 1,
        high: 2,
        partial: 3,
        low: 4,
        none: 5,
    });
    rows.uncorrectable = 2;
    rows.failure_occurred = true;
    device.health.remapped_rows = Some(rows);
    assert_eq!(ecc::remapped_rows(&device), Ok([0, 2, 0, 1]));
    assert_eq!(ecc::row_remapper_histogram(&device).unwrap().none, 5);
}

#[test]
fn strings_and_modes() {
    let device = gb200();
    assert_eq!(inforom_version(&device, 0), Ok("2.1"));
    assert_eq!(inforom_version(&device, 1), Ok("7.16"));
    assert_eq!(inforom_version(&device, 3), Err(abi::ERROR_NOT_SUPPORTED));
    let h100 = Profile::parse(H100).unwrap().devices().remove(0);
    assert_eq!(
        inforom_version(&h100, 2),
        Err(abi::ERROR_NOT_SUPPORTED),
        "no power object"
    );
    assert_eq!(gsp_firmware_version(&h100), Ok("550.163.01"));
    assert_eq!(gpu_operation_mode(&device), Ok((0, 0)));
    assert_eq!(auto_boost(&device), Err(abi::ERROR_NOT_SUPPORTED));
    assert_eq!(
        applications_clock(&device, 3, false),
        Err(abi::ERROR_NOT_SUPPORTED)
    );
}

#[test]
fn persistence_is_root_only_and_the_uid_is_parsed() {
    assert_eq!(set_persistence_mode(1, Some(0)), Ok(true));
    assert_eq!(set_persistence_mode(0, Some(0)), Ok(false));
    assert_eq!(
        set_persistence_mode(1, Some(1000)),
        Err(c::ERROR_NO_PERMISSION)
    );
    assert_eq!(set_persistence_mode(1, None), Err(c::ERROR_NO_PERMISSION));
    assert_eq!(
        set_persistence_mode(2, Some(0)),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
    let status = "Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t0\n";
    assert_eq!(effective_uid(status), Some(0));
    assert_eq!(effective_uid("Name:\tx\n"), None);
}
