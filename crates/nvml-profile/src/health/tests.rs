//! The `health` block: shipped values, per-device overlay, validation errors.

use crate::{ClocksEventReason, Error, Profile, GB200, H100};

/// GB200 with `old` replaced by `new` (which must occur).
fn gb200_with(old: &str, new: &str) -> String {
    assert!(GB200.contains(old), "{old}");
    GB200.replacen(old, new, 1)
}

/// GB200 with `extra` (a flow-style `key: value`) added to its first device's entry.
fn gb200_device0_with(extra: &str) -> String {
    let line = GB200
        .lines()
        .find(|line| line.starts_with("  - {index: 0,"))
        .unwrap();
    let patched = format!("{}, {extra}}}", line.strip_suffix('}').unwrap());
    gb200_with(line, &patched)
}

fn field_of(text: &str) -> String {
    match Profile::parse(text) {
        Err(Error::Invalid { field, .. }) => field,
        other => panic!("expected a validation error, got {other:?}"),
    }
}

#[test]
fn shipped_profiles_carry_health() {
    let gb200 = Profile::parse(GB200).unwrap().devices().remove(0).health;
    let power = gb200.power.unwrap();
    assert_eq!(
        (power.min_limit_mw, power.max_limit_mw),
        (400_000, 1_200_000)
    );
    assert_eq!(gb200.fans.unwrap().count, 0);
    let reasons = gb200.clocks_event_reasons.unwrap();
    assert_eq!(ClocksEventReason::mask(&reasons.supported), 0x1FF);
    assert_eq!(ClocksEventReason::mask(&reasons.active), 0x1);
    assert_eq!(gb200.memory_bus_width, None);
    let h100 = Profile::parse(H100).unwrap().devices().remove(7).health;
    assert_eq!(h100.memory_bus_width, Some(5120));
    assert_eq!(h100.power.unwrap().energy_at_start_mj, 600_000);
    assert!(h100.inforom.unwrap().power.is_none());
}

#[test]
fn a_device_overrides_sub_sections_and_keeps_the_rest() {
    let text = gb200_device0_with("health: {fans: {count: 2, speed_percent: 40}}");
    let profile = Profile::parse(&text).unwrap();
    let devices = profile.devices();
    assert_eq!(devices[0].health.fans.unwrap().count, 2);
    assert_eq!(devices[1].health.fans.unwrap().count, 0);
    assert_eq!(devices[0].health.power, devices[1].health.power);
    let again = Profile::parse(&profile.to_yaml().unwrap()).unwrap();
    assert_eq!(again, profile, "round trip");
}

#[test]
fn invalid_health_values_name_their_field() {
    let cases = [
        (
            "min_limit_mw: 400000",
            "min_limit_mw: 1100000",
            "device_defaults.health.power.limit_mw",
        ),
        (
            "performance_state: 0",
            "performance_state: 16",
            "device_defaults.health.performance_state",
        ),
        (
            "fans: {count: 0, speed_percent: 0}",
            "fans: {count: 1, speed_percent: 101}",
            "device_defaults.health.fans.speed_percent",
        ),
        (
            "bar1_memory: {total: 549755813888, used: 0}",
            "bar1_memory: {total: 1, used: 2}",
            "device_defaults.health.bar1_memory.used",
        ),
        (
            "vbios_version: \"96.00.9E.00.01\"",
            "vbios_version: \"\"",
            "device_defaults.health.vbios_version",
        ),
        (
            "image_version: \"G530.0200.00.01\"",
            "image_version: \"G530.0200.00.01.0000\"",
            "device_defaults.health.inforom.image_version",
        ),
        (
            "active: [gpu_idle]\n      supported: [gpu_idle, applications_clocks_setting, sw_power_cap, hw_slowdown, sync_boost,",
            "active: [sync_boost]\n      supported: [gpu_idle, applications_clocks_setting, sw_power_cap, hw_slowdown,",
            "device_defaults.health.clocks_event_reasons.active",
        ),
    ];
    for (old, new, field) in cases {
        assert_eq!(field_of(&gb200_with(old, new)), field, "{new}");
    }
    let per_device = gb200_device0_with("health: {performance_state: 40}");
    assert_eq!(field_of(&per_device), "devices[0].health.performance_state");
    let typo = gb200_with("multi_gpu_board: false", "multi_gpu_bored: false");
    assert!(matches!(Profile::parse(&typo), Err(Error::Syntax(_))));
}
