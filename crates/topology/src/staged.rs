//! The staged (compact binary) form of a validated document: what the mock NVML library reads.
//!
//! The stager (and the tools and tests) parse and validate YAML once and write this form; the
//! library only decodes it, so it links no YAML parser. A staged file is a 12-byte header, an
//! 8-byte magic naming the document kind and the little-endian `u32` [`FORMAT_VERSION`], then
//! the document in Borsh (the `borsh` crate's own derives, no serde). This module owns that
//! framing for both kinds ([`PROFILE`], [`TOPOLOGY`]: the profile crate frames its document
//! with [`frame`] and [`unframe`]) and the topology's [`encode`] and [`decode`].
//!
//! Decoding never panics and never trusts the bytes: a file without the magic (a YAML document,
//! anything else) is named for what it looks like, another format version is refused, a payload
//! that does not decode exactly (short, trailing bytes, an out-of-range enum tag, invalid UTF-8)
//! is corrupt, and a decoded document is validated again as a parsed one would be.

use borsh::{BorshDeserialize, BorshSerialize};

use crate::{Error, Result, Topology};

pub(crate) mod format;

pub use format::{FormatError, Looks};

/// The version of the staged encoding; bump it whenever a schema type of a staged document
/// changes shape (the tests pin the encoding of the shipped documents to catch a forgotten bump).
pub const FORMAT_VERSION: u32 = 1;

/// The length of the header: the magic, then the format version.
pub const HEADER_LEN: usize = 12;

/// One kind of staged document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// The first 8 bytes of such a file.
    pub magic: [u8; 8],
    /// What it holds, for messages ("profile").
    pub what: &'static str,
    /// The `nvml-mock-stager` subcommand that writes one from YAML.
    pub command: &'static str,
}

/// A staged GPU profile (`nvml_profile::staged`).
pub const PROFILE: Kind = Kind {
    magic: *b"cdsimPRF",
    what: "profile",
    command: "compile-profile",
};

/// A staged topology document ([`encode`], [`decode`]).
pub const TOPOLOGY: Kind = Kind {
    magic: *b"cdsimTOP",
    what: "topology",
    command: "compile-topology",
};

const KINDS: [Kind; 2] = [PROFILE, TOPOLOGY];

/// The header and `value`'s encoding.
///
/// # Panics
///
/// Only for a document with a list or string of more than `u32::MAX` entries, which Borsh
/// cannot length-prefix (no valid document comes near).
pub fn frame<T: BorshSerialize>(kind: &Kind, value: &T) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(1024);
    bytes.extend_from_slice(&kind.magic);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    #[allow(clippy::expect_used)]
    value
        .serialize(&mut bytes)
        .expect("a document's lists and strings fit Borsh's u32 lengths");
    bytes
}

/// The value framed in `bytes` by [`frame`] with the same `kind`; never panics.
pub fn unframe<T: BorshDeserialize>(kind: &Kind, bytes: &[u8]) -> Result<T, FormatError> {
    let Some((header, payload)) = bytes.split_at_checked(HEADER_LEN) else {
        return Err(not_staged(kind, bytes));
    };
    if header[..8] != kind.magic {
        return Err(not_staged(kind, bytes));
    }
    let mut version = [0; 4];
    version.copy_from_slice(&header[8..]);
    let found = u32::from_le_bytes(version);
    if found != FORMAT_VERSION {
        return Err(FormatError::Version {
            what: kind.what,
            command: kind.command,
            found,
            expected: FORMAT_VERSION,
        });
    }
    borsh::from_slice(payload).map_err(|err| FormatError::Corrupt {
        what: kind.what,
        message: err.to_string(),
    })
}

fn not_staged(kind: &Kind, bytes: &[u8]) -> FormatError {
    let other = KINDS
        .iter()
        .find(|other| bytes.starts_with(&other.magic) && other.magic != kind.magic);
    let looks = match other {
        Some(other) => Looks::Staged(other.what),
        None if bytes.is_empty() => Looks::Empty,
        None if std::str::from_utf8(bytes).is_ok() => Looks::Text,
        None => Looks::Binary,
    };
    FormatError::NotStaged {
        what: kind.what,
        command: kind.command,
        looks,
    }
}

/// The staged form of a (valid) topology document.
pub fn encode(topology: &Topology) -> Vec<u8> {
    frame(&TOPOLOGY, topology)
}

/// The topology staged in `bytes`, validated; never panics.
pub fn decode(bytes: &[u8]) -> Result<Topology> {
    let topology: Topology = unframe(&TOPOLOGY, bytes).map_err(Error::Staged)?;
    topology.validate()?;
    Ok(topology)
}

#[cfg(test)]
mod tests;
