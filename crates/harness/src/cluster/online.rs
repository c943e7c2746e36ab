//! The online node image: its pin in `manifests/versions.toml` and whether docker holds it
//! as pinned.

use crate::runner::{Cmd, Runner};

/// The pinned online node image (`[online].node_image`), validated as
/// `repo:tag@sha256:<64 hex>`.
pub fn online_pin(versions: &toml::Table) -> anyhow::Result<String> {
    let value = versions
        .get("online")
        .and_then(|it| it.get("node_image"))
        .and_then(toml::Value::as_str)
        .ok_or_else(|| {
            anyhow::format_err!(
                "manifests/versions.toml has no [online].node_image: pin the kindest/node image the pinned kind names, \
                 e.g. node_image = \"kindest/node:v1.34.3@sha256:<digest>\""
            )
        })?;
    let valid = value.split_once("@sha256:").is_some_and(|(name, hex)| {
        name.contains(':') && hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())
    });
    if !valid {
        anyhow::bail!("[online].node_image = {value:?} is not `repo:tag@sha256:<64 hex digits>`");
    }
    Ok(value.to_owned())
}

/// Which node image the online path creates the cluster from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnlineImage {
    /// The pinned image itself: present locally by its digest, or pulled by kind.
    Pinned {
        /// `repo:tag@sha256:…`.
        reference: String,
        /// Whether the engine already holds it.
        present: bool,
    },
    /// A local image tagged as the pinned tag without the pinned digest (a
    /// registry-less machine's rehearsal): used, and said to be a stand-in.
    StandIn {
        /// The tag kind is given (`repo:tag`).
        tag: String,
        /// The pinned reference it stands in for.
        pinned: String,
        /// Its image id.
        image_id: String,
    },
}

impl OnlineImage {
    /// What kind's `--image` gets.
    pub fn kind_image(&self) -> &str {
        match self {
            OnlineImage::Pinned { reference, .. } => reference,
            OnlineImage::StandIn { tag, .. } => tag,
        }
    }

    /// The report's note.
    pub fn note(&self) -> String {
        match self {
            OnlineImage::Pinned {
                reference,
                present: true,
            } => format!("node image: {reference} (the pinned image, present in the local engine)"),
            OnlineImage::Pinned {
                reference,
                present: false,
            } => format!(
                "node image: {reference} (the pinned image, pulled from the registry by kind)"
            ),
            OnlineImage::StandIn {
                tag,
                pinned,
                image_id,
            } => format!(
                "node image: {tag} = {image_id}, a LOCAL STAND-IN for the pinned {pinned} \
                 (tagged in the local engine without the pinned digest; nothing was pulled)"
            ),
        }
    }
}

/// Classifies the pinned reference against `docker image inspect` of its tag
/// (`<id> <repo digest>…`, `None`: no such image).
pub fn classify_online(pinned: &str, inspected: Option<&str>) -> OnlineImage {
    let (tag, digest) = pinned.split_once('@').unwrap_or((pinned, ""));
    let repo = tag.rsplit_once(':').map_or(tag, |(repo, _)| repo);
    let Some(inspected) = inspected.map(str::trim).filter(|it| !it.is_empty()) else {
        return OnlineImage::Pinned {
            reference: pinned.to_owned(),
            present: false,
        };
    };
    let mut words = inspected.split_whitespace();
    let image_id = words.next().unwrap_or_default().to_owned();
    let wanted = format!("{repo}@{digest}");
    let wanted_hub = format!("docker.io/{wanted}");
    if words.any(|it| it == wanted || it == wanted_hub) {
        return OnlineImage::Pinned {
            reference: pinned.to_owned(),
            present: true,
        };
    }
    OnlineImage::StandIn {
        tag: tag.to_owned(),
        pinned: pinned.to_owned(),
        image_id,
    }
}

/// The online path's node image, looked up in the local engine.
pub fn online_image<R: Runner>(runner: &R, pinned: &str) -> OnlineImage {
    let tag = pinned.split_once('@').map_or(pinned, |(tag, _)| tag);
    let inspected = runner
        .run(&Cmd::new(
            "docker",
            &[
                "image",
                "inspect",
                "--format",
                "{{.Id}} {{range .RepoDigests}}{{.}} {{end}}",
                tag,
            ],
        ))
        .ok()
        .filter(|out| out.ok)
        .map(|out| out.stdout);
    classify_online(pinned, inspected.as_deref())
}
