//! The image archive: one tarball that is both a `docker save` archive
//! (`manifest.json`, `repositories`) and an OCI image layout (`oci-layout`,
//! `index.json`, `blobs/sha256/…`), sharing the same blobs.
//!
//! Pure: layer bytes and metadata in, archive bytes out. JSON objects are
//! written with sorted keys, so equal inputs give equal bytes.

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, Timelike, Utc};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// OCI media type of the image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI media type of the image config.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// OCI media type of an uncompressed layer.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";
/// OCI media type of the index.
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// How many hex digits of the image id make the tag.
pub const TAG_HEX_LEN: usize = 12;

/// The runtime configuration and identity of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageMeta {
    /// Repository name (`nvml-mock`).
    pub repository: String,
    /// OCI architecture (`amd64`).
    pub architecture: String,
    /// Seconds since the epoch for `created` and every mtime.
    pub created: u64,
    /// `Entrypoint`.
    pub entrypoint: Vec<String>,
    /// `Cmd`.
    pub cmd: Vec<String>,
    /// `Env`.
    pub env: Vec<String>,
    /// `WorkingDir`.
    pub workdir: String,
    /// `Labels`.
    pub labels: BTreeMap<String, String>,
    /// The `created_by` of the single history entry.
    pub created_by: String,
    /// `User` (`uid:gid`), left out of the config when `None`.
    pub user: Option<String>,
}

/// A finished archive and the identities derived from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archive {
    /// The tarball.
    pub bytes: Vec<u8>,
    /// `sha256:<hex>` of the config: Docker's image id.
    pub image_id: String,
    /// `sha256:<hex>` of the OCI manifest.
    pub manifest_digest: String,
    /// `sha256:<hex>` of the layer (also its diff id: it is uncompressed).
    pub layer_digest: String,
    /// The layer's size in bytes.
    pub layer_size: u64,
    /// The tag: the first [`TAG_HEX_LEN`] hex digits of the image id.
    pub tag: String,
}

impl Archive {
    /// `repository:tag`.
    pub fn reference(&self, repository: &str) -> String {
        format!("{repository}:{}", self.tag)
    }
}

/// Writes the archive for one single-layer image.
pub fn write_archive(layer: &[u8], meta: &ImageMeta) -> Result<Archive> {
    let layer_digest = sha256(layer);
    let config = image_config(&layer_digest, meta);
    let config_bytes = to_json(&config)?;
    let image_id = sha256(&config_bytes);
    let tag = hex(&image_id)[..TAG_HEX_LEN].to_owned();
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": { "mediaType": CONFIG_MEDIA_TYPE, "digest": image_id, "size": config_bytes.len() },
        "layers": [{ "mediaType": LAYER_MEDIA_TYPE, "digest": layer_digest, "size": layer.len() }],
    });
    let manifest_bytes = to_json(&manifest)?;
    let manifest_digest = sha256(&manifest_bytes);
    let reference = format!("{}:{tag}", meta.repository);
    let index = json!({
        "schemaVersion": 2,
        "mediaType": INDEX_MEDIA_TYPE,
        "manifests": [{
            "mediaType": MANIFEST_MEDIA_TYPE,
            "digest": manifest_digest,
            "size": manifest_bytes.len(),
            "platform": { "architecture": meta.architecture, "os": "linux" },
            "annotations": {
                "io.containerd.image.name": format!("docker.io/library/{reference}"),
                "org.opencontainers.image.ref.name": tag,
            },
        }],
    });
    let docker_manifest = json!([{
        "Config": blob_path(&image_id),
        "RepoTags": [reference],
        "Layers": [blob_path(&layer_digest)],
    }]);
    let repositories = json!({ meta.repository.clone(): { tag.clone(): hex(&layer_digest) } });

    let mut blobs: BTreeMap<String, &[u8]> = BTreeMap::new();
    blobs.insert(blob_path(&layer_digest), layer);
    blobs.insert(blob_path(&image_id), &config_bytes);
    blobs.insert(blob_path(&manifest_digest), &manifest_bytes);
    let index_bytes = to_json(&index)?;
    let docker_manifest_bytes = to_json(&docker_manifest)?;
    let repositories_bytes = to_json(&repositories)?;
    let layout = br#"{"imageLayoutVersion":"1.0.0"}"#;

    let top_level: [(&str, &[u8]); 4] = [
        ("index.json", &index_bytes),
        ("manifest.json", &docker_manifest_bytes),
        ("oci-layout", layout),
        ("repositories", &repositories_bytes),
    ];
    let bytes = write_tar(&blobs, &top_level, meta.created)?;
    Ok(Archive {
        bytes,
        image_id,
        manifest_digest,
        layer_digest,
        layer_size: layer.len() as u64,
        tag,
    })
}

/// The image config: the container config of `meta` over the one layer.
fn image_config(layer_digest: &str, meta: &ImageMeta) -> Value {
    let created = rfc3339(meta.created);
    let mut container_config = serde_json::Map::new();
    if !meta.entrypoint.is_empty() {
        container_config.insert("Entrypoint".into(), json!(meta.entrypoint));
    }
    if !meta.cmd.is_empty() {
        container_config.insert("Cmd".into(), json!(meta.cmd));
    }
    if !meta.env.is_empty() {
        container_config.insert("Env".into(), json!(meta.env));
    }
    if !meta.labels.is_empty() {
        container_config.insert("Labels".into(), json!(meta.labels));
    }
    container_config.insert("WorkingDir".into(), json!(meta.workdir));
    if let Some(user) = &meta.user {
        container_config.insert("User".into(), json!(user));
    }
    json!({
        "architecture": meta.architecture,
        "os": "linux",
        "created": created,
        "config": Value::Object(container_config),
        "rootfs": { "type": "layers", "diff_ids": [layer_digest] },
        "history": [{ "created": created, "created_by": meta.created_by }],
    })
}

/// The tar: the blob directories, the blobs, then the top-level files, every mtime `mtime`.
fn write_tar(
    blobs: &BTreeMap<String, &[u8]>,
    top_level: &[(&str, &[u8])],
    mtime: u64,
) -> Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for dir in ["blobs/", "blobs/sha256/"] {
        append(&mut builder, dir, None, mtime)?;
    }
    for (path, bytes) in blobs {
        append(&mut builder, path, Some(bytes), mtime)?;
    }
    for (path, bytes) in top_level {
        append(&mut builder, path, Some(bytes), mtime)?;
    }
    builder.into_inner().map_err(|err| Error::Tar {
        path: "(end of archive)".to_owned(),
        reason: err.to_string(),
    })
}

/// `sha256:<hex>` of some bytes.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// The hex part of a `sha256:<hex>` digest.
fn hex(digest: &str) -> &str {
    digest.trim_start_matches("sha256:")
}

fn blob_path(digest: &str) -> String {
    format!("blobs/sha256/{}", hex(digest))
}

fn to_json(value: &Value) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|err| Error::Json {
        reason: err.to_string(),
    })
}

fn append(
    builder: &mut tar::Builder<Vec<u8>>,
    path: &str,
    bytes: Option<&[u8]>,
    mtime: u64,
) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(mtime);
    let written = match bytes {
        Some(bytes) => {
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(0o644);
            header.set_size(bytes.len() as u64);
            builder.append_data(&mut header, path, bytes)
        }
        None => {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            builder.append_data(&mut header, path, std::io::empty())
        }
    };
    written.map_err(|err| Error::Tar {
        path: path.to_owned(),
        reason: err.to_string(),
    })
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the epoch (UTC, proleptic Gregorian).
/// Beyond chrono's range (after year 262143) the text saturates at its last second.
pub fn rfc3339(epoch: u64) -> String {
    let at = i64::try_from(epoch)
        .ok()
        .and_then(|secs| DateTime::from_timestamp(secs, 0))
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> ImageMeta {
        ImageMeta {
            repository: "demo".to_owned(),
            architecture: "amd64".to_owned(),
            created: 0,
            entrypoint: Vec::new(),
            cmd: vec!["/bin/sh".to_owned()],
            env: vec!["PATH=/bin".to_owned()],
            workdir: "/".to_owned(),
            labels: [("a".to_owned(), "b".to_owned())].into(),
            created_by: "test".to_owned(),
            user: None,
        }
    }

    fn file(archive: &Archive, name: &str) -> Vec<u8> {
        crate::layer::read_tar(&archive.bytes)
            .expect("read archive")
            .into_iter()
            .find_map(|(path, node)| match node {
                crate::layer::Node::File { bytes, .. } if path == format!("/{name}") => Some(bytes),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{name} is not in the archive"))
    }

    #[test]
    fn docker_and_oci_views_name_the_same_blobs() {
        let archive = write_archive(b"layer bytes", &meta()).expect("archive");
        assert_eq!(archive.tag, hex(&archive.image_id)[..TAG_HEX_LEN]);
        let docker: Value = serde_json::from_slice(&file(&archive, "manifest.json")).expect("json");
        assert_eq!(docker[0]["RepoTags"][0], format!("demo:{}", archive.tag));
        let config_path = docker[0]["Config"].as_str().expect("config path");
        let config = file(&archive, config_path);
        assert_eq!(sha256(&config), archive.image_id);
        let config: Value = serde_json::from_slice(&config).expect("config json");
        assert_eq!(config["rootfs"]["diff_ids"][0], sha256(b"layer bytes"));
        assert_eq!(config["created"], "1970-01-01T00:00:00Z");
        assert!(config["config"].get("Entrypoint").is_none());

        let index: Value = serde_json::from_slice(&file(&archive, "index.json")).expect("index");
        let manifest_digest = index["manifests"][0]["digest"].as_str().expect("digest");
        assert_eq!(manifest_digest, archive.manifest_digest);
        let manifest = file(&archive, &blob_path(manifest_digest));
        assert_eq!(sha256(&manifest), archive.manifest_digest);
        let manifest: Value = serde_json::from_slice(&manifest).expect("manifest");
        assert_eq!(manifest["config"]["digest"], archive.image_id);
        assert_eq!(manifest["layers"][0]["digest"], archive.layer_digest);
        assert_eq!(
            file(&archive, &blob_path(&archive.layer_digest)),
            b"layer bytes"
        );
        assert_eq!(
            file(&archive, "oci-layout"),
            br#"{"imageLayoutVersion":"1.0.0"}"#
        );
    }

    #[test]
    fn any_input_change_changes_the_tag() {
        let base = write_archive(b"layer", &meta()).expect("archive");
        assert_eq!(base, write_archive(b"layer", &meta()).expect("again"));
        let other_layer = write_archive(b"layer2", &meta()).expect("archive");
        assert_ne!(base.tag, other_layer.tag);
        let mut changed = meta();
        changed.env.push("X=1".to_owned());
        assert_ne!(
            base.tag,
            write_archive(b"layer", &changed).expect("archive").tag
        );
    }

    #[test]
    fn a_user_is_in_the_config_only_when_set() {
        let config_of = |meta: &ImageMeta| -> Value {
            let archive = write_archive(b"layer", meta).expect("archive");
            serde_json::from_slice(&file(&archive, &blob_path(&archive.image_id))).expect("config")
        };
        assert!(config_of(&meta())["config"].get("User").is_none());
        let mut nobody = meta();
        nobody.user = Some("65534:65534".to_owned());
        assert_eq!(config_of(&nobody)["config"]["User"], "65534:65534");
    }

    #[test]
    fn formats_epochs() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_787_204_541), "2026-08-20T05:42:21Z");
    }
}
