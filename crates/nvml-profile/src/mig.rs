//! The MIG part of the schema: the MIG mode, the GPU instance profile table
//! (`gpu_instance_profiles`, each row's name and where its instances can sit) and their checks.
//! Below `schema.rs`, which embeds these types; it imports nothing from it.

use crate::seen::Seen;

use borsh::{BorshDeserialize, BorshSerialize};
use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result};

/// `NVML_DEVICE_NAME_V2_BUFFER_SIZE`: the `name` buffer of `nvmlGpuInstanceProfileInfo_v2_t`.
const NAME_BUFFER: usize = 96;

/// MIG mode, current and pending; absent means the GPU has no MIG support.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(deny_unknown_fields)]
pub struct MigMode {
    /// Whether MIG is enabled now.
    pub current: bool,
    /// Whether MIG will be enabled after the next reset.
    pub pending: bool,
    /// How many MIG devices can exist under the GPU while MIG is enabled
    /// (`nvmlDeviceGetMaxMigDeviceCount`); absent means not known, and only matters when `current`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_devices: Option<u32>,
}

/// The GPU instance profiles `nvmlDeviceGetGpuInstanceProfileInfo` answers.
///
/// Written as an untagged enum (either shape is accepted); with the feature `yaml` its
/// `Deserialize` is hand-written in `mig.rs` for YAML values, without serde's buffering of the
/// whole value (without `yaml`, serde's untagged derive, which nothing in the library calls).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, BorshSerialize, BorshDeserialize)]
#[cfg_attr(not(feature = "yaml"), derive(Deserialize))]
#[serde(untagged)]
pub enum GpuInstanceProfiles {
    /// `unknown`: the part's MIG profile table is not known to the profile's author; every
    /// profile is answered NOT_SUPPORTED ("profile isn't supported", as nvml.h documents).
    Unknown(Unknown),
    /// The table, one entry per supported `NVML_GPU_INSTANCE_PROFILE_*`.
    Known(Vec<GpuInstanceProfile>),
}

/// The word `unknown`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Unknown {
    /// Not known.
    Unknown,
}

/// One row of `nvmlGpuInstanceProfileInfo_t`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuInstanceProfile {
    /// Which `NVML_GPU_INSTANCE_PROFILE_*` this is (0..=16, the argument callers pass).
    pub profile: u32,
    /// The profile id the driver reports.
    pub id: u32,
    /// Peer-to-peer support.
    pub p2p: bool,
    /// GPU slices.
    pub slices: u32,
    /// How many such instances fit.
    pub instances: u32,
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Copy engines.
    pub copy_engines: u32,
    /// Decoders.
    pub decoders: u32,
    /// Encoders.
    pub encoders: u32,
    /// JPEG engines.
    pub jpegs: u32,
    /// OFA engines.
    pub ofas: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    // MIG names and placements (i22-profiles).
    /// The profile's name (`1g.5gb`) that `nvmlDeviceGetGpuInstanceProfileInfoV` reports; absent:
    /// the versioned query is NOT_SUPPORTED for this profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Where its instances can sit; absent: the placement query is NOT_SUPPORTED for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placements: Option<Placements>,
}

/// The placements `nvmlDeviceGetGpuInstancePossiblePlacements_v2` reports for one profile: one
/// `nvmlGpuInstancePlacement_t {start, size}` per start, all of the same size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub struct Placements {
    /// The first memory slice of each possible instance, ascending.
    pub starts: Vec<u32>,
    /// How many memory slices one instance occupies.
    pub size: u32,
}

/// Reading `gpu_instance_profiles` from YAML (feature `yaml`; without it the enum derives serde's
/// untagged `Deserialize`, which accepts the same shapes).
#[cfg(feature = "yaml")]
mod yaml {
    use serde::{de, Deserialize};
    use serde_yaml::Value;

    use super::{GpuInstanceProfile, GpuInstanceProfiles, Unknown};

    /// The error serde's derive gives an untagged enum that matches no variant.
    const NO_VARIANT: &str = "data did not match any variant of untagged enum GpuInstanceProfiles";
    /// The error serde's derive gives an untagged enum whose value holds a YAML tag (`!name`).
    const TAGGED: &str = "untagged and internally tagged enums do not support enum input";

    /// Accepts exactly what `#[derive(Deserialize)] #[serde(untagged)]` accepted, with its messages:
    /// the variant `unknown` (the word, or the map `{unknown: ~}` / `{0: ~}`) or a sequence of rows.
    /// Checking the shape of the value directly, instead of buffering it as serde's `Content` and
    /// replaying it per variant, keeps the mock library smaller.
    impl<'de> Deserialize<'de> for GpuInstanceProfiles {
        fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            let value = serde_yaml::Value::deserialize(deserializer)?;
            profiles_from_value(value).map_err(de::Error::custom)
        }
    }

    fn profiles_from_value(value: Value) -> Result<GpuInstanceProfiles, &'static str> {
        if has_tag(&value) {
            return Err(TAGGED);
        }
        match value {
            Value::String(word) if word == "unknown" => {
                Ok(GpuInstanceProfiles::Unknown(Unknown::Unknown))
            }
            Value::Mapping(map) if is_unknown_variant(&map) => {
                Ok(GpuInstanceProfiles::Unknown(Unknown::Unknown))
            }
            Value::Sequence(_) => Vec::<GpuInstanceProfile>::deserialize(&value)
                .map(GpuInstanceProfiles::Known)
                .map_err(|_| NO_VARIANT),
            _ => Err(NO_VARIANT),
        }
    }

    /// `{unknown: ~}` or `{0: ~}`: the unit variant by name or by index.
    fn is_unknown_variant(map: &serde_yaml::Mapping) -> bool {
        let mut entries = map.iter();
        match (entries.next(), entries.next()) {
            (Some((key, Value::Null)), None) => match key {
                Value::String(name) => name == "unknown",
                Value::Number(index) => index.as_u64() == Some(0),
                _ => false,
            },
            _ => false,
        }
    }

    fn has_tag(value: &Value) -> bool {
        match value {
            Value::Tagged(_) => true,
            Value::Sequence(items) => items.iter().any(has_tag),
            Value::Mapping(map) => map.iter().any(|(key, item)| has_tag(key) || has_tag(item)),
            _ => false,
        }
    }
}

impl Placements {
    /// The `(start, size)` pairs in order.
    pub fn pairs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.starts.iter().map(move |start| (*start, self.size))
    }
}

/// Checks the rows' ids are unique (placements are asked for by id), names fit NVML's buffer,
/// and placements are non-empty, ascending and of a positive size.
pub(crate) fn validate(field: &str, rows: &[GpuInstanceProfile]) -> Result<()> {
    let mut ids = Seen::new();
    for (position, row) in rows.iter().enumerate() {
        let at = |key: &str| format!("{field}[{position}].{key}");
        if let Some(first) = ids.insert(row.id, position) {
            return invalid(at("id"), format!("{} is also {field}[{first}].id", row.id));
        }
        if let Some(name) = &row.name {
            if name.is_empty() || name.len() >= NAME_BUFFER {
                return invalid(
                    at("name"),
                    format!("is {} bytes, expected 1..={}", name.len(), NAME_BUFFER - 1),
                );
            }
        }
        if let Some(placements) = &row.placements {
            placements_ok(&at("placements"), placements)?;
        }
    }
    Ok(())
}

fn placements_ok(field: &str, placements: &Placements) -> Result<()> {
    if placements.size == 0 {
        return invalid(format!("{field}.size"), "is 0, expected at least 1 slice");
    }
    if placements.starts.is_empty() {
        return invalid(
            format!("{field}.starts"),
            "is empty, expected at least one start",
        );
    }
    if placements.starts.windows(2).any(|pair| pair[0] >= pair[1]) {
        return invalid(
            format!("{field}.starts"),
            format!("{:?} is not strictly ascending", placements.starts),
        );
    }
    if placements
        .starts
        .iter()
        .any(|start| start.checked_add(placements.size).is_none())
    {
        return invalid(format!("{field}.starts"), "start + size overflows");
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::{Error, GpuInstanceProfiles, Profile, H100};

    /// The shipped h100 profile with one edit, which must be in it.
    fn h100_with(from: &str, to: &str) -> String {
        assert!(H100.contains(from), "{from:?} is not in h100.yaml");
        H100.replacen(from, to, 1)
    }

    fn rejected(text: &str) -> (String, String) {
        match Profile::parse(text) {
            Err(Error::Invalid { field, message }) => (field, message),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    const ROWS: &str = "device_defaults.gpu_instance_profiles";

    #[test]
    fn h100_rows_carry_names_and_placements() {
        let device = Profile::parse(H100).unwrap().devices().remove(0);
        let Some(GpuInstanceProfiles::Known(rows)) = device.gpu_instance_profiles else {
            panic!("h100 has a table");
        };
        let row = rows.iter().find(|row| row.id == 14).unwrap();
        assert_eq!(row.name.as_deref(), Some("2g.20gb"));
        let pairs: Vec<(u32, u32)> = row.placements.as_ref().unwrap().pairs().collect();
        assert_eq!(pairs, vec![(0, 2), (2, 2), (4, 2)]);
    }

    #[test]
    fn ids_are_unique() {
        let (field, message) = rejected(&h100_with("id: 14,", "id: 15,"));
        assert_eq!(field, format!("{ROWS}[3].id"));
        assert_eq!(message, format!("15 is also {ROWS}[2].id"));
    }

    #[test]
    fn placements_ascend_and_have_a_size() {
        let (field, message) = rejected(&h100_with(
            "starts: [0, 2, 4], size: 2",
            "starts: [4, 2], size: 2",
        ));
        assert_eq!(field, format!("{ROWS}[3].placements.starts"));
        assert!(
            message.contains("[4, 2] is not strictly ascending"),
            "{message}"
        );
        let (field, _) = rejected(&h100_with(
            "starts: [0, 2, 4], size: 2",
            "starts: [0, 2], size: 0",
        ));
        assert_eq!(field, format!("{ROWS}[3].placements.size"));
        let (field, _) = rejected(&h100_with(
            "starts: [0, 2, 4], size: 2",
            "starts: [], size: 2",
        ));
        assert_eq!(field, format!("{ROWS}[3].placements.starts"));
        let (field, _) = rejected(&h100_with(
            "starts: [0, 2, 4], size: 2",
            "starts: [4294967295], size: 2",
        ));
        assert_eq!(field, format!("{ROWS}[3].placements.starts"));
    }

    #[test]
    fn names_fit_nvml_buffer() {
        let long = "x".repeat(96);
        let (field, message) = rejected(&h100_with(
            "name: \"2g.20gb\"",
            &format!("name: \"{long}\""),
        ));
        assert_eq!(field, format!("{ROWS}[3].name"));
        assert_eq!(message, "is 96 bytes, expected 1..=95");
        let (field, _) = rejected(&h100_with("name: \"2g.20gb\"", "name: \"\""));
        assert_eq!(field, format!("{ROWS}[3].name"));
    }

    fn profiles(yaml: &str) -> Result<GpuInstanceProfiles, String> {
        let value: serde_yaml::Value = serde_yaml::from_str(yaml).unwrap();
        serde::Deserialize::deserialize(&value).map_err(|err: serde_yaml::Error| err.to_string())
    }

    const ROW: &str = "{profile: 0, id: 19, p2p: false, slices: 1, instances: 7, \
        multiprocessors: 16, copy_engines: 1, decoders: 0, encoders: 0, jpegs: 0, ofas: 0, \
        memory_mib: 4864}";

    #[test]
    fn gpu_instance_profiles_accept_what_the_untagged_derive_accepted() {
        let unknown = GpuInstanceProfiles::Unknown(crate::Unknown::Unknown);
        assert_eq!(profiles("unknown"), Ok(unknown.clone()));
        assert_eq!(profiles("{unknown: ~}"), Ok(unknown.clone()));
        assert_eq!(profiles("{0: ~}"), Ok(unknown));
        assert_eq!(profiles("[]"), Ok(GpuInstanceProfiles::Known(Vec::new())));
        match profiles(&format!("[{ROW}, {ROW}]")) {
            Ok(GpuInstanceProfiles::Known(rows)) => {
                assert_eq!(rows.len(), 2);
                assert_eq!(
                    (rows[1].id, rows[1].memory_mib, rows[1].name.as_deref()),
                    (19, 4864, None)
                );
            }
            other => panic!("expected two rows, got {other:?}"),
        }
    }

    #[test]
    fn gpu_instance_profiles_reject_other_shapes_with_the_derive_message() {
        let message = "data did not match any variant of untagged enum GpuInstanceProfiles";
        let bad_row = ROW.replace("ofas: 0", "ofas: 0, colour: red");
        let shapes = [
            "~",
            "known",
            "0",
            "{}",
            "{unknown: 1}",
            "{unknown: ~, x: ~}",
            "{1: ~}",
        ];
        for yaml in shapes
            .iter()
            .copied()
            .chain([bad_row.as_str(), "[1]", "[~]"])
        {
            assert_eq!(profiles(yaml), Err(message.to_owned()), "{yaml}");
        }
    }

    #[test]
    fn gpu_instance_profiles_with_a_yaml_tag_get_the_derive_message() {
        let message = "untagged and internally tagged enums do not support enum input";
        let tagged_row = format!("[!row {ROW}]");
        for yaml in [
            "!unknown ~",
            "{unknown: !x ~}",
            "{!x 0: ~}",
            tagged_row.as_str(),
        ] {
            assert_eq!(profiles(yaml), Err(message.to_owned()), "{yaml}");
        }
    }
}
