//! `doctor`'s per-scenario lines: what each scenario needs and whether this
//! machine has it. Scenarios 4 and 5 take NVIDIA's released charts and images
//! online (the hosts, or the mirrors of `CDSIM_MIRRORS`, must answer) and the
//! same releases built from source on an `--offline` cluster (Go, the DRA
//! driver's snapshot, or the cached builds).

use std::net::ToSocketAddrs as _;
use std::time::Duration;

use crate::gpu_source::fetch::Location;
use crate::gpu_source::mirror::{image_host, Mirrors};
use crate::gpu_source::{Released, Source};

/// How long a host may take to accept a TCP connection.
const CONNECT: Duration = Duration::from_secs(3);

/// An endpoint the online path needs: what it is for and `host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// What needs it.
    pub what: String,
    /// `host:port`.
    pub address: String,
}

/// `host[:port]` of a URL (`scheme://host[:port]/…`), the scheme's port by default.
fn address(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("https", url));
    let host = rest.split('/').next().unwrap_or(rest);
    if host.contains(':') {
        host.to_owned()
    } else {
        let port = if scheme == "http" { 80 } else { 443 };
        format!("{host}:{port}")
    }
}

/// The endpoints the released charts and images come from, through `mirrors`.
pub fn endpoints(released: &Released, mirrors: &Mirrors) -> Vec<Endpoint> {
    let mut out: Vec<Endpoint> = Vec::new();
    let mut add = |what: String, address: String| {
        if !out.iter().any(|it| it.address == address) {
            out.push(Endpoint { what, address });
        }
    };
    for artifact in [&released.dra, &released.device_plugin] {
        let url = match &artifact.chart.location {
            Location::Oci(reference) => {
                let (url, plain_http, _) = mirrors.oci(reference);
                let scheme = if plain_http { "http://" } else { "https://" };
                url.replacen("oci://", scheme, 1)
            }
            Location::Repo { url, .. } => mirrors
                .for_repo(url)
                .map_or_else(|| url.clone(), |it| it.to.to_string()),
        };
        add(
            format!("chart {} (helm, from this machine)", artifact.chart.name()),
            address(&url),
        );
    }
    for image in [
        &released.dra.image,
        &released.device_plugin.image,
        &released.nfd.image,
    ] {
        let host = image_host(&image.repository);
        let url = mirrors
            .for_host(host)
            .map_or_else(|| format!("https://{host}"), |it| it.to.to_string());
        add(format!("image {image} (the nodes pull it)"), address(&url));
    }
    out
}

/// Whether `address` accepts a TCP connection within [`CONNECT`].
fn answers(address: &str) -> bool {
    address
        .to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .is_some_and(|addr| std::net::TcpStream::connect_timeout(&addr, CONNECT).is_ok())
}

/// The lines for the online path, given which endpoints answered.
pub fn online_lines(checked: &[(Endpoint, bool)], mirrors: &Mirrors) -> Vec<String> {
    let through = if mirrors.0.is_empty() {
        String::new()
    } else {
        " (through CDSIM_MIRRORS)".to_owned()
    };
    checked
        .iter()
        .map(|(endpoint, ok)| {
            if *ok {
                format!("✓ s4, s5   {} answers{through}: {}", endpoint.address, endpoint.what)
            } else {
                format!(
                    "! s4, s5   {} does not answer{through}: {}; without it scenarios 4 and 5 fail on a cluster \
                     made without --offline: set CDSIM_MIRRORS to a mirror (docs/gpu-stack-and-faults.md), or \
                     use `cargo xtask demo --offline` (root, Go, the DRA snapshot)",
                    endpoint.address, endpoint.what
                )
            }
        })
        .collect()
}

/// The lines for the offline path's builds.
pub fn offline_lines(dra: Option<String>, stack: Result<String, String>) -> Vec<String> {
    let dra = match dra {
        None => "✓ s4 off   NVIDIA's DRA driver builds from source here (--offline)".to_owned(),
        Some(why) => format!("! s4 off   --offline cannot build NVIDIA's DRA driver: {why}"),
    };
    let stack = match stack {
        Ok(how) => format!("✓ s5 off   the device plugin, GFD and NFD (--offline): {how}"),
        Err(why) => format!("! s5 off   --offline cannot build the GPU stack: {why}"),
    };
    vec![dra, stack]
}

/// Prints every scenario's needs.
pub fn print() {
    println!("✓ s1-s3    the cluster alone (docker, kind, helm and kubectl above); s2's real daemon wants --imex");
    let mirrors = match Mirrors::from_env() {
        Ok(mirrors) => mirrors,
        Err(err) => {
            println!("✗ s4, s5   CDSIM_MIRRORS: {err:#}");
            Mirrors::default()
        }
    };
    match Released::read() {
        Ok(released) => {
            let checked: Vec<(Endpoint, bool)> = endpoints(&released, &mirrors)
                .into_iter()
                .map(|it| {
                    let ok = answers(&it.address);
                    (it, ok)
                })
                .collect();
            for line in online_lines(&checked, &mirrors) {
                println!("{line}");
            }
        }
        Err(err) => println!("✗ s4, s5   {err:#}"),
    }
    let dra = Source::Offline.dra_missing();
    for line in offline_lines(dra, Source::Offline.stack_prerequisite()) {
        println!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_online_path_needs_each_publisher_or_its_mirror() {
        let released = Released::read().expect("[released]");
        let public: Vec<String> = endpoints(&released, &Mirrors::default())
            .into_iter()
            .map(|it| it.address)
            .collect();
        assert_eq!(
            public,
            ["registry.k8s.io:443", "nvidia.github.io:443", "nvcr.io:443"],
            "registry.k8s.io serves the DRA chart and two images: one line"
        );
        let mirrors = Mirrors::parse(
            "registry.k8s.io=http://10.0.0.1:5000/registry.k8s.io nvcr.io=http://10.0.0.1:5000/nvcr.io \
             https://nvidia.github.io/k8s-device-plugin=http://10.0.0.1:5001/dp",
        )
        .expect("rules");
        let mirrored: Vec<String> = endpoints(&released, &mirrors)
            .into_iter()
            .map(|it| it.address)
            .collect();
        assert_eq!(mirrored, ["10.0.0.1:5000", "10.0.0.1:5001"]);
    }

    #[test]
    fn each_line_says_what_and_the_fix() {
        let endpoint = Endpoint {
            what: "image x".to_owned(),
            address: "nvcr.io:443".to_owned(),
        };
        let lines = online_lines(
            &[(endpoint.clone(), true), (endpoint, false)],
            &Mirrors::default(),
        );
        assert!(
            lines[0].starts_with("✓ s4, s5   nvcr.io:443 answers"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].contains("CDSIM_MIRRORS") && lines[1].contains("--offline"),
            "{}",
            lines[1]
        );
        let offline = offline_lines(Some("install Go".to_owned()), Err("no Go".to_owned()));
        assert!(offline[0].starts_with("! s4 off") && offline[0].contains("install Go"));
        assert!(offline[1].starts_with("! s5 off"));
    }
}
