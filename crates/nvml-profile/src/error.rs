//! Why a profile was rejected, and the crate's result type.

/// Why a profile was rejected.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The text is not YAML of the profile's shape (syntax, type, unknown or missing key).
    #[cfg(feature = "yaml")]
    #[error("invalid profile: {0}")]
    Syntax(#[source] serde_yaml::Error),
    /// The YAML has the right shape but a value is wrong.
    #[error("invalid profile: {field}: {message}")]
    Invalid {
        /// Where, e.g. `devices[2].uuid`.
        field: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// The bytes are not a staged profile of this build's format ([`crate::staged`]).
    #[error("{0}")]
    Staged(#[from] topology::staged::FormatError),
    /// `with_num_devices` asked for more GPUs than the profile has, or for none.
    #[error(
        "cannot show {requested} GPU(s): profile {profile:?} has {available}; use 1..={available}"
    )]
    NumDevices {
        /// The count asked for.
        requested: u32,
        /// How many devices the profile lists.
        available: usize,
        /// The profile's name.
        profile: String,
    },
    /// The profile could not be written back as YAML.
    #[cfg(feature = "yaml")]
    #[error("cannot serialize profile: {0}")]
    Serialize(#[source] serde_yaml::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A validation error: `field` is wrong, as `message` says.
pub(crate) fn invalid<T>(field: impl Into<String>, message: impl Into<String>) -> Result<T> {
    Err(Error::Invalid {
        field: field.into(),
        message: message.into(),
    })
}
