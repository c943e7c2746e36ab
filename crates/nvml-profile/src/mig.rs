//! The MIG parts of a GPU instance profile row that the versioned and placement queries answer:
//! the profile's name and where its instances can sit (`gpu_instance_profiles[].placements`).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::{schema::GpuInstanceProfile, Error, Result};

/// `NVML_DEVICE_NAME_V2_BUFFER_SIZE`: the `name` buffer of `nvmlGpuInstanceProfileInfo_v2_t`.
const NAME_BUFFER: usize = 96;

/// The placements `nvmlDeviceGetGpuInstancePossiblePlacements_v2` reports for one profile: one
/// `nvmlGpuInstancePlacement_t {start, size}` per start, all of the same size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Placements {
    /// The first memory slice of each possible instance, ascending.
    pub starts: Vec<u32>,
    /// How many memory slices one instance occupies.
    pub size: u32,
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
    let mut ids = HashMap::new();
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

fn invalid(field: impl Into<String>, message: impl Into<String>) -> Result<()> {
    Err(Error::Invalid {
        field: field.into(),
        message: message.into(),
    })
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
}
