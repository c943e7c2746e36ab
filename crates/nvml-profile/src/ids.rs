//! Identifier types with strict text forms: fabric uuids, GPU uuids and PCI bus ids.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A 16-byte fabric (cluster) uuid.
///
/// Text forms accepted: dashed `8-4-4-4-12` hex or 32 bare hex digits; displayed dashed, lowercase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FabricUuid([u8; 16]);

impl FabricUuid {
    /// Wraps raw bytes.
    pub const fn from_bytes(bytes: [u8; 16]) -> FabricUuid {
        FabricUuid(bytes)
    }

    /// The raw bytes, in order.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Parses a dashed or bare uuid; the error says what is wrong.
    pub fn parse(text: &str) -> Result<FabricUuid, String> {
        let hex: String = if text.len() == 36 {
            let groups: Vec<&str> = text.split('-').collect();
            let lengths: Vec<usize> = groups.iter().map(|group| group.len()).collect();
            if lengths != [8, 4, 4, 4, 12] {
                return Err(format!(
                    "{text:?} is not a uuid: expected 8-4-4-4-12 hex digits"
                ));
            }
            groups.concat()
        } else if text.len() == 32 {
            text.to_owned()
        } else {
            return Err(format!(
                "{text:?} is not a uuid: expected 8-4-4-4-12 hex digits or 32 bare hex digits"
            ));
        };
        let mut bytes = [0u8; 16];
        for (slot, pair) in bytes.iter_mut().zip(hex.as_bytes().chunks(2)) {
            let pair = std::str::from_utf8(pair).unwrap_or("");
            *slot = u8::from_str_radix(pair, 16)
                .map_err(|_| format!("{text:?} is not a uuid: {pair:?} is not hex"))?;
        }
        Ok(FabricUuid(bytes))
    }
}

impl fmt::Display for FabricUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (position, byte) in self.0.iter().enumerate() {
            if matches!(position, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl Serialize for FabricUuid {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FabricUuid {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<FabricUuid, D::Error> {
        let text = String::deserialize(deserializer)?;
        FabricUuid::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Checks a GPU uuid: `GPU-` then dashed 8-4-4-4-12 hex.
pub(crate) fn check_gpu_uuid(text: &str) -> Result<(), String> {
    let Some(rest) = text.strip_prefix("GPU-") else {
        return Err(format!("{text:?} must start with \"GPU-\""));
    };
    let groups: Vec<&str> = rest.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|group| group.len()).collect();
    if lengths != [8, 4, 4, 4, 12] || !rest.chars().all(|c| c == '-' || c.is_ascii_hexdigit()) {
        return Err(format!(
            "{text:?} is not a GPU uuid: expected GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (hex)"
        ));
    }
    Ok(())
}

/// A PCI address: domain, bus, device, function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PciBusId {
    /// PCI domain (segment).
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device number (0..32).
    pub device: u8,
    /// Function number (0..8).
    pub function: u8,
}

impl PciBusId {
    /// Parses the forms NVML accepts: `domain:bus:device.function`, `domain:bus:device`
    /// and `bus:device.function`, all hex, case-insensitive (the domain may have 4 or 8 digits).
    pub fn parse(text: &str) -> Result<PciBusId, String> {
        let bad = || format!("{text:?} is not a PCI bus id: expected hex dddd:bb:dd.f");
        let (head, function) = match text.rsplit_once('.') {
            Some((head, function)) => (head, Some(function)),
            None => (text, None),
        };
        let parts: Vec<&str> = head.split(':').collect();
        let (domain, bus, device) = match (parts.as_slice(), function) {
            ([domain, bus, device], _) => (*domain, *bus, *device),
            ([bus, device], Some(_)) => ("0", *bus, *device),
            _ => return Err(bad()),
        };
        let hex = |digits: &str, max_len: usize| -> Result<u32, String> {
            if digits.is_empty() || digits.len() > max_len {
                return Err(bad());
            }
            u32::from_str_radix(digits, 16).map_err(|_| bad())
        };
        let domain = hex(domain, 8)?;
        let bus = hex(bus, 2)?;
        let device = hex(device, 2)?;
        let function = match function {
            Some(function) => hex(function, 1)?,
            None => 0,
        };
        if device >= 32 || function >= 8 {
            return Err(format!(
                "{text:?} is not a PCI bus id: device must be < 0x20 and function < 8"
            ));
        }
        Ok(PciBusId {
            domain,
            bus: bus as u8,
            device: device as u8,
            function: function as u8,
        })
    }
}

impl fmt::Display for PciBusId {
    /// The short form, `0000:01:00.0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn fabric_uuid_accepts_dashed_and_bare_and_round_trips() {
        let dashed = FabricUuid::parse("00000000-0000-0000-0000-0000000000AB").unwrap();
        let bare = FabricUuid::parse("000000000000000000000000000000ab").unwrap();
        assert_eq!(dashed, bare);
        assert_eq!(dashed.as_bytes()[15], 0xab);
        assert_eq!(dashed.as_bytes()[..15], [0u8; 15]);
        assert_eq!(dashed.to_string(), "00000000-0000-0000-0000-0000000000ab");
    }

    #[test]
    fn fabric_uuid_rejects_malformed_text() {
        for text in [
            "",
            "ab",
            "00000000-0000-0000-0000-0000000000ag",
            "0000000-00000-0000-0000-0000000000ab",
            "000000000000000000000000000000zz",
        ] {
            let err = FabricUuid::parse(text).unwrap_err();
            assert!(err.contains("is not a uuid"), "{text}: {err}");
        }
    }

    #[test]
    fn gpu_uuid_check() {
        check_gpu_uuid("GPU-b200b200-0000-0000-0000-000000000000").unwrap();
        assert!(check_gpu_uuid("b200b200-0000-0000-0000-000000000000").is_err());
        assert!(check_gpu_uuid("GPU-b200b200-0000-0000-0000-00000000000").is_err());
        assert!(check_gpu_uuid("GPU-b200b20g-0000-0000-0000-000000000000").is_err());
    }

    #[test]
    fn pci_bus_id_forms() {
        let expected = PciBusId {
            domain: 0,
            bus: 0x41,
            device: 0,
            function: 0,
        };
        for text in ["0000:41:00.0", "00000000:41:00.0", "0000:41:00", "41:00.0"] {
            assert_eq!(PciBusId::parse(text).unwrap(), expected, "{text}");
        }
        assert_eq!(expected.to_string(), "0000:41:00.0");
        for text in [
            "",
            "41",
            "0000:41:00.9",
            "0000:41:40.0",
            "0000:411:00.0",
            "x:41:00.0",
        ] {
            assert!(PciBusId::parse(text).is_err(), "{text}");
        }
    }
}
