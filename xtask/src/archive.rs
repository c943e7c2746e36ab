//! Image archives (docker-archive / OCI tarballs): the `repo:tag` a tarball
//! carries in its `manifest.json`, and the archives in a directory.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Deserialize;

use crate::plan::ImageRef;

#[derive(Deserialize)]
struct ManifestEntry {
    #[serde(rename = "RepoTags", default)]
    repo_tags: Vec<String>,
}

/// The single `repo:tag` of a docker-archive `manifest.json`.
pub fn repo_tag_of_manifest(manifest: &str) -> anyhow::Result<ImageRef> {
    let entries: Vec<ManifestEntry> =
        serde_json::from_str(manifest).context("manifest.json is not a docker-archive manifest")?;
    let tags: Vec<&String> = entries.iter().flat_map(|it| it.repo_tags.iter()).collect();
    match tags.as_slice() {
        [one] => ImageRef::parse(one),
        [] => anyhow::bail!("the archive carries no RepoTags: build it with `cargo xtask images`"),
        many => anyhow::bail!(
            "the archive carries {} tags ({many:?}); expected one",
            many.len()
        ),
    }
}

/// The `repo:tag` an image archive carries.
pub fn repo_tag(path: &Path) -> anyhow::Result<ImageRef> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open image archive {}", path.display()))?;
    let mut archive = tar::Archive::new(file);
    let entries = archive
        .entries()
        .with_context(|| format!("{} is not a tar archive", path.display()))?;
    for entry in entries {
        let mut entry = entry.with_context(|| format!("reading {}", path.display()))?;
        let name = entry
            .path()
            .map(|it| it.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.trim_start_matches("./") == "manifest.json" {
            let mut text = String::new();
            entry.read_to_string(&mut text)?;
            return repo_tag_of_manifest(&text).with_context(|| format!("in {}", path.display()));
        }
    }
    anyhow::bail!(
        "{} has no manifest.json: pass a docker-archive (what `cargo xtask images` or `docker save` writes)",
        path.display()
    )
}

/// Every `*.tar` in `dir` with its reference (unreadable ones skipped).
pub fn scan(dir: &Path) -> anyhow::Result<Vec<(PathBuf, ImageRef)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "tar") {
            if let Ok(image) = repo_tag(&path) {
                found.push((path, image));
            }
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_names_one_image() {
        let image = repo_tag_of_manifest(
            r#"[{"Config":"blobs/sha256/x","RepoTags":["nvml-mock:0123456789ab"],"Layers":[]}]"#,
        )
        .expect("one tag");
        assert_eq!(image.to_string(), "nvml-mock:0123456789ab");
        assert!(repo_tag_of_manifest(r#"[{"Config":"x","Layers":[]}]"#).is_err());
        assert!(repo_tag_of_manifest("{}").is_err());
    }

    #[test]
    fn archives_are_read_from_tarballs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("img.tar");
        let manifest = br#"[{"Config":"c","RepoTags":["nvml-mock-workload:abc"],"Layers":[]}]"#;
        let mut builder = tar::Builder::new(std::fs::File::create(&path).expect("create"));
        let mut header = tar::Header::new_gnu();
        header.set_size(manifest.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, "manifest.json", &manifest[..])
            .expect("append");
        builder.finish().expect("finish");
        drop(builder);
        std::fs::write(dir.path().join("junk.tar"), b"not a tar").expect("write");
        let found = scan(dir.path()).expect("scan");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1.repository, "nvml-mock-workload");
        let err = format!(
            "{:#}",
            repo_tag(&dir.path().join("junk.tar")).expect_err("junk")
        );
        assert!(err.contains("junk.tar"), "the error names the file: {err}");
    }
}
