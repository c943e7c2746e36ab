//! Why a topology document was rejected; every message names the offending entry.

use crate::ClusterUuid;

/// A topology document that cannot be used.
///
/// Paths use the document's own spelling: `domains[1].cliques[0].nodes[2]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The text is not YAML of the expected shape: a syntax error, a wrong
    /// type, a missing key or an unknown key (the message carries serde's path
    /// and position).
    #[error("invalid topology document: {message}")]
    Syntax {
        /// serde_yaml's description, with the location it found.
        message: String,
    },
    /// The bytes are not a staged topology of this build's format ([`crate::staged`]).
    #[error("{0}")]
    Staged(#[from] crate::staged::format::FormatError),
    /// `version` is not 1, the only version this crate understands.
    #[error("version: unsupported topology version {version}: only version 1 exists")]
    UnsupportedVersion {
        /// The version the document declares.
        version: u64,
    },
    /// A domain uuid is neither dashed 8-4-4-4-12 hex nor 32 bare hex digits.
    #[error("{path}: malformed uuid {value:?}: expected 8-4-4-4-12 hex digits with dashes or 32 bare hex digits")]
    MalformedUuid {
        /// Where the uuid is (`domains[0].uuid`).
        path: String,
        /// The rejected text.
        value: String,
    },
    /// A clique id is not an integer in the u32 range.
    #[error("{path}: clique id {value} is out of range: it must be an integer from 0 to 4294967295 (u32)")]
    CliqueIdOutOfRange {
        /// Where the id is (`domains[0].cliques[1].id`).
        path: String,
        /// The rejected value as written.
        value: String,
    },
    /// A node name is empty (or only whitespace).
    #[error("{path}: node name is empty")]
    EmptyNodeName {
        /// Where the name is (`domains[0].cliques[1].nodes[0]`).
        path: String,
    },
    /// A node is listed in more than one clique (or twice in one clique).
    #[error("{path}: node {node:?} is already in {first}")]
    DuplicateNode {
        /// The second occurrence (`domains[1].cliques[0].nodes[2]`).
        path: String,
        /// The node name.
        node: String,
        /// The clique of the first occurrence (`domains[0].cliques[1]`).
        first: String,
    },
    /// Two domains share one uuid.
    #[error("{path}: uuid {uuid} is already used by {first}")]
    DuplicateUuid {
        /// The second domain's uuid (`domains[1].uuid`).
        path: String,
        /// The shared uuid.
        uuid: ClusterUuid,
        /// The first domain with it (`domains[0]`).
        first: String,
    },
    /// Two cliques of one domain share one id.
    #[error("{path}: clique id {id} is already used by {first}")]
    DuplicateCliqueId {
        /// The second clique's id (`domains[0].cliques[2].id`).
        path: String,
        /// The shared id.
        id: u32,
        /// The first clique with it (`domains[0].cliques[0]`).
        first: String,
    },
}

/// The topology crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
