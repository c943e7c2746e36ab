//! Identifier types with strict text forms: fabric uuids (topology's type), GPU uuids and PCI
//! bus ids.

use std::fmt;

use serde::{Deserialize, Deserializer};

/// A 16-byte fabric (cluster) uuid: the topology's type, so the profile and the topology parse
/// and print it one way (dashed `8-4-4-4-12` hex or 32 bare hex digits in; dashed lowercase out).
pub use topology::ClusterUuid as FabricUuid;

/// Reads a profile's fabric uuid; the error names the value as profile errors do.
pub(crate) fn fabric_uuid<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<FabricUuid, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse().map_err(|_| {
        serde::de::Error::custom(format!(
            "{text:?} is not a uuid: expected 8-4-4-4-12 hex digits or 32 bare hex digits"
        ))
    })
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
