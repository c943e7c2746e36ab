//! The GPU profiles the chart ships (`<chart>/profiles/<name>.yaml`): where
//! they are and their names, found here for `--profile`, the scenarios, the
//! report page, conformance and the tests.

use std::path::{Path, PathBuf};

/// The directory of the shipped profiles.
pub fn dir() -> PathBuf {
    crate::project_root()
        .join(crate::names::CHART)
        .join("profiles")
}

/// The shipped profile `name`'s file.
pub fn path(name: &str) -> PathBuf {
    dir().join(format!("{name}.yaml"))
}

/// The shipped profiles' names, sorted.
pub fn names() -> std::io::Result<Vec<String>> {
    names_in(&dir())
}

/// The names of the `<name>.yaml` files in `dir`, sorted.
pub fn names_in(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            Some(name.strip_suffix(".yaml")?.to_owned())
        })
        .collect();
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seven_shipped_profiles_are_listed_sorted_by_name() {
        let names = names().expect("listed");
        assert_eq!(
            names,
            ["a100", "b200", "gb200", "gb300", "h100", "l40s", "t4"]
        );
        assert!(path("gb200").is_file());
        let dir = tempfile::tempdir().expect("tempdir");
        for file in ["b.yaml", "a.yaml", "notes.md"] {
            std::fs::write(dir.path().join(file), "").expect("written");
        }
        assert_eq!(names_in(dir.path()).expect("listed"), ["a", "b"]);
        assert!(names_in(&dir.path().join("absent")).is_err());
    }
}
