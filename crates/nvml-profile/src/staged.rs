//! The staged (compact binary) form of a validated profile: what the mock NVML library reads.
//!
//! The framing (magic `cdsimPRF`, format version) is `topology::staged`'s, shared with the staged
//! topology; the payload is the profile document in Borsh. [`decode`] never panics and
//! validates the decoded document as [`Profile::parse`] validates a parsed one, so a staged file
//! cannot hand the library a profile a YAML file could not.

use crate::error::Result;
use crate::profile::Profile;
use crate::{schema::Document, validate};

/// The staged form of `profile` (with its `system.num_devices`, if set).
pub fn encode(profile: &Profile) -> Vec<u8> {
    topology::staged::frame(&topology::staged::PROFILE, &profile.doc)
}

/// The profile staged in `bytes`, validated; never panics.
pub fn decode(bytes: &[u8]) -> Result<Profile> {
    let doc: Document = topology::staged::unframe(&topology::staged::PROFILE, bytes)?;
    validate::document(&doc)?;
    Ok(Profile { doc })
}

#[cfg(test)]
mod tests;
