//! Image references as containerd lists them.

/// How containerd names an image reference (`nvml-mock:x` → `docker.io/library/nvml-mock:x`).
pub fn containerd_name(reference: &str) -> String {
    let first = reference.split('/').next().unwrap_or_default();
    let has_registry = reference.contains('/')
        && (first.contains('.') || first.contains(':') || first == "localhost");
    match (reference.contains('/'), has_registry) {
        (_, true) => reference.to_owned(),
        (true, false) => format!("docker.io/{reference}"),
        (false, _) => format!("docker.io/library/{reference}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containerd_names() {
        assert_eq!(
            containerd_name("nvml-mock:abc"),
            "docker.io/library/nvml-mock:abc"
        );
        assert_eq!(containerd_name("cdsim/x:1"), "docker.io/cdsim/x:1");
        assert_eq!(containerd_name("localhost:5000/x:1"), "localhost:5000/x:1");
        assert_eq!(
            containerd_name("registry.k8s.io/pause:3.10"),
            "registry.k8s.io/pause:3.10"
        );
    }
}
