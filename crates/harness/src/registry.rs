//! Images into any cluster: the `--registry HOST[:PORT][/PREFIX]` value, the
//! OCI layout inside an image archive, and its push through the OCI
//! distribution API (`oci-client`), with no Docker daemon; [`pulls`] the
//! kubelets' pull events that show the nodes took them from there. Used by
//! `up --kube-context` (the mock's images) and scenario 5 (the device
//! plugin's and NFD's).
//!
//! The archives `cargo xtask images` writes are OCI layouts as well as
//! `docker save` archives (`crates/image-builder/src/oci.rs`), so the push
//! sends the very bytes the builder wrote: the manifest keeps its digest, and
//! a blob the registry already has is not sent again.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use anyhow::Context as _;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::plan::ImageRef;

mod address;
pub mod pulls;

pub use address::Registry;
pub use pulls::{pull_events, pulls_note, Pull};

/// `CDSIM_REGISTRY_USER` and `CDSIM_REGISTRY_PASSWORD`: HTTP basic
/// credentials for the push (anonymous when unset).
pub const USER_ENV: &str = "CDSIM_REGISTRY_USER";
/// See [`USER_ENV`].
pub const PASSWORD_ENV: &str = "CDSIM_REGISTRY_PASSWORD";

/// The image an OCI layout holds: its manifest (bytes as written) and every
/// blob the manifest names, each checked against its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The manifest's media type, from `index.json`.
    pub media_type: String,
    /// The manifest, byte for byte.
    pub manifest: Vec<u8>,
    /// `sha256:<hex>` → bytes: the config first, then the layers.
    pub blobs: Vec<(String, Vec<u8>)>,
}

#[derive(Deserialize)]
struct Descriptor {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    digest: String,
}

#[derive(Deserialize)]
struct Index {
    manifests: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct Manifest {
    config: Descriptor,
    layers: Vec<Descriptor>,
}

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

impl Layout {
    /// The layout from an archive's files (`index.json`, `blobs/sha256/…`).
    pub fn from_files(files: &BTreeMap<String, Vec<u8>>) -> anyhow::Result<Layout> {
        let index = files.get("index.json").context(
            "no index.json: not an OCI layout; build the archive with `cargo xtask images` \
             (a `docker save` archive from Docker before 25 has no OCI layout)",
        )?;
        let index: Index =
            serde_json::from_slice(index).context("index.json is not an OCI index")?;
        let [entry] = index.manifests.as_slice() else {
            anyhow::bail!(
                "index.json names {} manifests; expected one image",
                index.manifests.len()
            );
        };
        let blob = |digest: &str| -> anyhow::Result<Vec<u8>> {
            let hex = digest
                .strip_prefix("sha256:")
                .with_context(|| format!("digest {digest} is not sha256"))?;
            let bytes = files
                .get(&format!("blobs/sha256/{hex}"))
                .with_context(|| format!("blob {digest} is missing from the layout"))?;
            anyhow::ensure!(
                digest_of(bytes) == digest,
                "blob {digest} does not match its digest: the archive is damaged; rebuild it with `cargo xtask images`"
            );
            Ok(bytes.clone())
        };
        let manifest = blob(&entry.digest)?;
        let parsed: Manifest = serde_json::from_slice(&manifest)
            .context("the manifest is not an OCI image manifest")?;
        let mut blobs = vec![(parsed.config.digest.clone(), blob(&parsed.config.digest)?)];
        for layer in &parsed.layers {
            blobs.push((layer.digest.clone(), blob(&layer.digest)?));
        }
        let media_type = if entry.media_type.is_empty() {
            "application/vnd.oci.image.manifest.v1+json".to_owned()
        } else {
            entry.media_type.clone()
        };
        Ok(Layout {
            media_type,
            manifest,
            blobs,
        })
    }

    /// Reads the layout from an image archive.
    pub fn read(path: &Path) -> anyhow::Result<Layout> {
        let file = std::fs::File::open(path)
            .with_context(|| format!("cannot open image archive {}", path.display()))?;
        let mut files = BTreeMap::new();
        let mut archive = tar::Archive::new(file);
        for entry in archive
            .entries()
            .with_context(|| format!("{} is not a tar archive", path.display()))?
        {
            let mut entry = entry.with_context(|| format!("reading {}", path.display()))?;
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let name = entry
                .path()?
                .to_string_lossy()
                .trim_start_matches("./")
                .to_owned();
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes)?;
            files.insert(name, bytes);
        }
        Layout::from_files(&files).with_context(|| format!("in {}", path.display()))
    }
}

/// What a push did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pushed {
    /// Blobs sent.
    pub sent: usize,
    /// Blobs the registry already had.
    pub present: usize,
    /// Bytes sent.
    pub bytes: usize,
}

fn client(registry: &Registry) -> Client {
    // reqwest is built without a default TLS provider; use the one kube uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::new(ClientConfig {
        protocol: if registry.plain_http {
            ClientProtocol::Http
        } else {
            ClientProtocol::Https
        },
        connect_timeout: Some(std::time::Duration::from_secs(10)),
        read_timeout: Some(std::time::Duration::from_secs(60)),
        ..ClientConfig::default()
    })
}

fn auth() -> RegistryAuth {
    match (std::env::var(USER_ENV), std::env::var(PASSWORD_ENV)) {
        (Ok(user), Ok(password)) => RegistryAuth::Basic(user, password),
        _ => RegistryAuth::Anonymous,
    }
}

/// Pushes `layout` as `image` (the registry's reference, see
/// [`Registry::image`]), skipping blobs the registry has.
pub async fn push(
    registry: &Registry,
    layout: &Layout,
    image: &ImageRef,
) -> anyhow::Result<Pushed> {
    let client = client(registry);
    let repository = image
        .repository
        .strip_prefix(&format!("{}/", registry.host))
        .unwrap_or(&image.repository);
    let reference = Reference::with_tag(
        registry.host.clone(),
        repository.to_owned(),
        image.tag.clone(),
    );
    client.store_auth_if_needed(&registry.host, &auth()).await;
    let unreachable = |err: oci_client::errors::OciDistributionError| {
        let hint = if registry.plain_http {
            "is it running, and does it serve plain HTTP?"
        } else {
            "is it running with TLS? A registry without TLS needs --plain-http"
        };
        anyhow::format_err!("registry {registry}: {err} ({hint})")
    };
    let mut pushed = Pushed::default();
    for (digest, bytes) in &layout.blobs {
        if client
            .blob_exists(&reference, digest)
            .await
            .map_err(unreachable)?
        {
            pushed.present += 1;
            continue;
        }
        client
            .push_blob(&reference, bytes.clone(), digest)
            .await
            .map_err(unreachable)?;
        pushed.sent += 1;
        pushed.bytes += bytes.len();
    }
    let content_type = http::HeaderValue::from_str(&layout.media_type)
        .with_context(|| format!("media type {:?}", layout.media_type))?;
    client
        .push_manifest_raw(&reference, layout.manifest.clone(), content_type)
        .await
        .map_err(unreachable)?;
    Ok(pushed)
}

/// Pushes the image archive at `archive` (built as `built`) and prints what
/// was sent; returns the image as the nodes pull it ([`Registry::image`]).
pub async fn push_archive(
    registry: &Registry,
    archive: &Path,
    built: &ImageRef,
) -> anyhow::Result<ImageRef> {
    let image = registry.image(built);
    let layout = Layout::read(archive)?;
    let pushed = push(registry, &layout, &image).await?;
    eprintln!(
        "    {image}: {} blob(s) sent ({:.1} MB), {} already there",
        pushed.sent,
        pushed.bytes as f64 / 1e6,
        pushed.present
    );
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout_files() -> BTreeMap<String, Vec<u8>> {
        let config = br#"{"architecture":"amd64"}"#.to_vec();
        let layer = b"layer bytes".to_vec();
        let manifest = format!(
            r#"{{"schemaVersion":2,"config":{{"digest":"{}"}},"layers":[{{"digest":"{}"}}]}}"#,
            digest_of(&config),
            digest_of(&layer)
        )
        .into_bytes();
        let index = format!(
            r#"{{"manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{}"}}]}}"#,
            digest_of(&manifest)
        );
        let mut files = BTreeMap::new();
        for bytes in [&config, &layer, &manifest] {
            let hex = digest_of(bytes).trim_start_matches("sha256:").to_owned();
            files.insert(format!("blobs/sha256/{hex}"), bytes.clone());
        }
        files.insert("index.json".to_owned(), index.into_bytes());
        files
    }

    #[test]
    fn a_layout_yields_its_manifest_bytes_and_blobs_config_first() {
        let layout = Layout::from_files(&layout_files()).expect("layout");
        assert_eq!(
            layout.media_type,
            "application/vnd.oci.image.manifest.v1+json"
        );
        assert_eq!(layout.blobs.len(), 2);
        assert_eq!(layout.blobs[0].1, br#"{"architecture":"amd64"}"#);
        assert_eq!(layout.blobs[1].1, b"layer bytes");
        assert!(String::from_utf8_lossy(&layout.manifest).contains("schemaVersion"));
    }

    #[test]
    fn a_damaged_or_foreign_archive_is_refused_with_the_fix() {
        let mut files = layout_files();
        let layer = files
            .iter()
            .find(|(_, bytes)| bytes.as_slice() == b"layer bytes")
            .map(|(name, _)| name.clone())
            .expect("layer");
        files.insert(layer, b"other bytes".to_vec());
        let err = Layout::from_files(&files).expect_err("damaged").to_string();
        assert!(err.contains("does not match its digest"), "{err}");
        files.remove("index.json");
        let err = format!("{:#}", Layout::from_files(&files).expect_err("no index"));
        assert!(err.contains("cargo xtask images"), "{err}");
    }
}
