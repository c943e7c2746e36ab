//! Tool versions: `major.minor.patch`, read from a tool's version output; one
//! owner for the doctor's requirements and the tool installer.

use std::fmt;

/// A version `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// The first `[v]X.Y[.Z]` in a tool's version output.
pub fn parse_version(text: &str) -> Option<Version> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|word| word.contains('.'))
        .find_map(|word| {
            let mut parts = word.split('.').map(|part| part.parse::<u32>());
            let major = parts.next()?.ok()?;
            let minor = parts.next()?.ok()?;
            let patch = parts.next().and_then(Result::ok).unwrap_or(0);
            Some(Version(major, minor, patch))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_real_outputs() {
        assert_eq!(parse_version("20.10.24+dfsg1\n"), Some(Version(20, 10, 24)));
        assert_eq!(
            parse_version("kind v0.31.0 go1.26.0 linux/amd64"),
            Some(Version(0, 31, 0))
        );
        assert_eq!(parse_version("v3.19.0+g3d8990f"), Some(Version(3, 19, 0)));
        assert_eq!(
            parse_version("Client Version: v1.34.3\nKustomize Version: v5.7.1"),
            Some(Version(1, 34, 3))
        );
        assert_eq!(parse_version("no digits here"), None);
    }
}
