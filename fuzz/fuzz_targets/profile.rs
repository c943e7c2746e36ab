//! GPU profile parser and validator: arbitrary text never panics; anything
//! accepted resolves every device and round-trips through `to_yaml`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(profile) = nvml_profile::Profile::parse(text) else {
        return;
    };
    let devices = profile.devices();
    assert_eq!(devices.len(), profile.device_count());
    let yaml = profile.to_yaml().expect("a parsed profile serialises");
    let again = nvml_profile::Profile::parse(&yaml)
        .unwrap_or_else(|err| panic!("to_yaml output does not re-parse: {err}\n{yaml}"));
    assert_eq!(again, profile, "round trip changed the profile:\n{yaml}");
});
