//! Daemonless, reproducible container image builder driven by manifests/images.toml.
