use topology::staged::{FormatError, FORMAT_VERSION, HEADER_LEN};

use super::*;
use crate::{Error, GB200, H100};

/// The seven shipped profiles, parsed, by file stem.
fn shipped() -> Vec<(String, Profile)> {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../manifests/helm/nvml-mock/profiles"
    );
    let mut profiles: Vec<(String, Profile)> = std::fs::read_dir(dir)
        .expect("the profiles directory")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a readable profile");
            let stem = path.file_stem().expect("a name").to_string_lossy().into();
            (stem, Profile::parse(&text).expect("a valid profile"))
        })
        .collect();
    profiles.sort_by(|a, b| a.0.cmp(&b.0));
    profiles
}

#[test]
fn every_shipped_profile_round_trips_with_and_without_num_devices() {
    let profiles = shipped();
    let names: Vec<&str> = profiles.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(
        names,
        ["a100", "b200", "gb200", "gb300", "h100", "l40s", "t4"]
    );
    for (name, profile) in &profiles {
        let bytes = encode(profile);
        assert_eq!(&bytes[..8], b"cdsimPRF", "{name}");
        assert_eq!(decode(&bytes).expect(name), *profile, "{name}");
        let one = profile.with_num_devices(1).expect("one GPU");
        let decoded = decode(&encode(&one)).expect(name);
        assert_eq!(decoded, one, "{name}");
        assert_eq!(decoded.devices(), one.devices(), "{name}");
    }
}

#[test]
fn a_yaml_profile_is_named_with_the_command_that_stages_it() {
    let err = decode(GB200.as_bytes()).expect_err("YAML is not staged");
    assert!(matches!(err, Error::Staged(FormatError::NotStaged { .. })));
    assert_eq!(
        err.to_string(),
        "text (a YAML document?), not a staged file; the library reads a staged profile: \
         `nvml-mock-stager compile-profile <yaml> --out <file>` writes one"
    );
    let topology = topology::staged::encode(&topology::demo(&["w".to_owned()]));
    let err = decode(&topology).expect_err("a staged topology");
    assert!(err.to_string().starts_with("a staged topology; "), "{err}");
}

#[test]
fn a_decoded_profile_is_validated_again() {
    let mut profile = Profile::parse(H100).expect("h100");
    profile.doc.devices[1].uuid = profile.doc.devices[0].uuid.clone();
    let err = decode(&encode(&profile)).expect_err("two GPUs with one uuid");
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
    let mut bytes = encode(&Profile::parse(H100).expect("h100"));
    bytes[8..12].copy_from_slice(&(FORMAT_VERSION + 7).to_le_bytes());
    let err = decode(&bytes).expect_err("another version");
    assert!(
        matches!(err, Error::Staged(FormatError::Version { found, .. }) if found == FORMAT_VERSION + 7),
        "{err}"
    );
}

/// Every truncation and every bit flip (one bit of each byte, rotating) of a real encoding
/// decodes to an error or a valid profile, never a panic; so does resolving what decodes.
#[test]
fn decode_never_panics_on_truncations_or_bit_flips() {
    let bytes = encode(&Profile::parse(GB200).expect("gb200"));
    for len in 0..bytes.len() {
        assert!(decode(&bytes[..len]).is_err(), "truncated to {len}");
    }
    let mut flipped = bytes.clone();
    for index in HEADER_LEN..bytes.len() {
        for bit in [index % 8, (index + 3) % 8] {
            flipped[index] ^= 1 << bit;
            if let Ok(profile) = decode(&flipped) {
                let _ = (profile.devices(), profile.pcie_topology());
            }
            flipped[index] ^= 1 << bit;
        }
    }
}

/// The encoding of the shipped GB200 profile, pinned: a change to a schema type changes it, and
/// then `topology::staged::FORMAT_VERSION` must be bumped (old staged files must be refused,
/// not misread) and this pin updated.
#[test]
fn the_encoding_is_pinned_to_the_format_version() {
    let bytes = encode(&Profile::parse(GB200).expect("gb200"));
    let fnv1a = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    });
    assert_eq!(
        (FORMAT_VERSION, bytes.len(), fnv1a),
        (1, 2215, 11611361899527136131),
        "the staged profile encoding changed: bump FORMAT_VERSION and update this pin"
    );
}
