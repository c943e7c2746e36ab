//! The 16-byte cluster uuid of an NVLink domain, as NVML reports it in
//! `nvmlGpuFabricInfo_t.clusterUuid`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A cluster uuid: 16 bytes, written as dashed lowercase hex (`8-4-4-4-12`).
///
/// Parsing accepts the dashed form and 32 bare hex digits, in any case;
/// anything else is rejected (unlike upstream, which drops non-hex characters
/// and pads, turning typos into silently different identities).
/// The default is all zero bytes.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    borsh::BorshSerialize,
    borsh::BorshDeserialize,
)]
pub struct ClusterUuid([u8; 16]);

/// Why a string is not a cluster uuid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "malformed uuid {value:?}: expected 8-4-4-4-12 hex digits with dashes or 32 bare hex digits"
)]
pub struct UuidError {
    /// The rejected text.
    pub value: String,
}

impl ClusterUuid {
    /// The uuid from its 16 bytes.
    pub const fn from_bytes(bytes: [u8; 16]) -> ClusterUuid {
        ClusterUuid(bytes)
    }

    /// The 16 bytes, in the order NVML writes them into `clusterUuid`.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl FromStr for ClusterUuid {
    type Err = UuidError;

    fn from_str(text: &str) -> Result<ClusterUuid, UuidError> {
        let reject = || UuidError {
            value: text.to_owned(),
        };
        let raw = text.as_bytes();
        let digits: Vec<u8> = match raw.len() {
            32 => raw.to_vec(),
            36 => {
                for dash in [8, 13, 18, 23] {
                    if raw[dash] != b'-' {
                        return Err(reject());
                    }
                }
                raw.iter().copied().filter(|byte| *byte != b'-').collect()
            }
            _ => return Err(reject()),
        };
        if digits.len() != 32 {
            return Err(reject());
        }
        let mut bytes = [0u8; 16];
        for (idx, pair) in digits.chunks_exact(2).enumerate() {
            let (Some(high), Some(low)) = (hex_value(pair[0]), hex_value(pair[1])) else {
                return Err(reject());
            };
            bytes[idx] = (high << 4) | low;
        }
        Ok(ClusterUuid(bytes))
    }
}

impl fmt::Display for ClusterUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (idx, byte) in self.0.iter().enumerate() {
            if matches!(idx, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl Serialize for ClusterUuid {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ClusterUuid {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ClusterUuid, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ClusterUuid, UuidError> {
        text.parse()
    }

    #[test]
    fn dashed_form_parses_and_displays_lowercase() {
        let uuid = parse("00000000-0000-0000-0000-0000000000AB").expect("valid uuid");
        assert_eq!(uuid.as_bytes()[15], 0xab);
        assert_eq!(uuid.as_bytes()[..15], [0u8; 15]);
        assert_eq!(uuid.to_string(), "00000000-0000-0000-0000-0000000000ab");
    }

    #[test]
    fn bare_form_parses_to_the_same_bytes() {
        let bare = parse("0123456789ABCDEFfedcba9876543210").expect("valid uuid");
        let dashed = parse("01234567-89ab-cdef-fedc-ba9876543210").expect("valid uuid");
        assert_eq!(bare, dashed);
        assert_eq!(bare.to_string(), "01234567-89ab-cdef-fedc-ba9876543210");
        assert_eq!(
            bare.as_bytes(),
            &[
                0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54,
                0x32, 0x10
            ]
        );
    }

    #[test]
    fn malformed_forms_are_rejected() {
        for bad in [
            "",
            "ff",
            "00000000-0000-0000-0000-00000000000",
            "00000000-0000-0000-0000-0000000000abc",
            "0000000000000000000000000000000g",
            "00000000_0000_0000_0000_0000000000ab",
            "0000-00000000-0000-0000-0000000000ab",
            "000000000-000-0000-0000-0000000000ab",
            "00000000-0000-0000-0000-0000000000-b",
            "+0000000-0000-0000-0000-0000000000ab",
            "{00000000-0000-0000-0000-0000000000ab}",
            " 00000000-0000-0000-0000-0000000000ab",
            "0000000000000000000000000000000é",
            "ab",
            "00000000-0000-0000-0000-0000000000ag",
            "0000000-00000-0000-0000-0000000000ab",
            "000000000000000000000000000000zz",
        ] {
            let err = parse(bad).expect_err(bad);
            assert_eq!(err.value, bad);
            assert!(err.to_string().contains("32 bare hex digits"), "{err}");
        }
    }

    #[test]
    fn display_round_trips_through_from_str() {
        let uuid = ClusterUuid::from_bytes([0xa5; 16]);
        assert_eq!(parse(&uuid.to_string()), Ok(uuid));
    }
}
