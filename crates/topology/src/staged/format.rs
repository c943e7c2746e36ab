//! Why bytes are not a staged document: its own module below both `staged`, which returns it,
//! and the crate's `Error`, which wraps it.

/// What a file without the expected header looks like, for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Looks {
    /// It is empty.
    Empty,
    /// It is UTF-8 text: most likely the YAML document itself.
    Text,
    /// It is a staged document of another kind.
    Staged(&'static str),
    /// Anything else.
    Binary,
}

impl std::fmt::Display for Looks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Looks::Empty => f.write_str("an empty file"),
            Looks::Text => f.write_str("text (a YAML document?), not a staged file"),
            Looks::Staged(what) => write!(f, "a staged {what}"),
            Looks::Binary => f.write_str("not a staged file (no cdsim header)"),
        }
    }
}

/// Why bytes are not a staged document of the expected kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The header is missing or names another kind.
    #[error("{looks}; the library reads a staged {what}: `nvml-mock-stager {command} <yaml> --out <file>` writes one")]
    NotStaged {
        /// What was expected ("profile").
        what: &'static str,
        /// The subcommand that writes one.
        command: &'static str,
        /// What the bytes look like instead.
        looks: Looks,
    },
    /// The header is right but the format version is not this build's.
    #[error("a staged {what} of format version {found}, this build reads version {expected}: stage it again with this build's `nvml-mock-stager {command}`")]
    Version {
        /// What it holds.
        what: &'static str,
        /// The subcommand that writes one.
        command: &'static str,
        /// The version in the file.
        found: u32,
        /// [`super::FORMAT_VERSION`].
        expected: u32,
    },
    /// The payload does not decode exactly.
    #[error("a corrupt staged {what}: {message}")]
    Corrupt {
        /// What it holds.
        what: &'static str,
        /// The decoder's description.
        message: String,
    },
}
