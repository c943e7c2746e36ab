//! CI's stand-in for the hosts NVIDIA publishes on, which this machine cannot
//! reach: the online path proved without the internet, and labelled so.
//!
//! - A distribution registry (the registry step's, `[tools] registry`) at the
//!   kind network's gateway holds the offline builds under the public names
//!   (`registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1`,
//!   `nvcr.io/nvidia/k8s-device-plugin:v0.19.3`,
//!   `registry.k8s.io/nfd/node-feature-discovery:v0.17.3`, each under a path
//!   named after its host) and the DRA chart as an OCI artifact, packaged from
//!   the same release's source.
//! - A small HTTP file server beside it serves Helm repositories (an
//!   `index.yaml` each) for the device plugin's and NFD's charts, packaged
//!   from their modules.
//! - [`Mirror::rules`] is the `CDSIM_MIRRORS` value pointing at both, as a user
//!   behind a corporate mirror sets it; the harness then tells the kind nodes'
//!   containerd and helm, and the report says "through the mirror … standing
//!   in for …", never that the public host answered.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context as _, Result};
use xshell::{cmd, Shell};

use super::through_registry::{free_port, kind_gateway, start_registry, Server};
use crate::gpu_source::Released;
use crate::plan::ImageRef;
use crate::registry::{Layout, Registry};
use crate::tools::{ensure_tool, Tool};

/// The stand-in, stopped on drop.
pub struct Mirror {
    _registry: Server,
    _files: FileServer,
    /// The `CDSIM_MIRRORS` value.
    pub rules: String,
    /// The registry's `host:port`.
    pub registry: String,
    /// The Helm repositories' base URL.
    pub files: String,
    /// The kind network's gateway (this machine as the nodes see it).
    pub gateway: String,
    /// Its storage and logs, removed with it (about 0.5 GB).
    dir: std::path::PathBuf,
}

impl Drop for Mirror {
    fn drop(&mut self) {
        // The servers stop as the fields drop after this; their files go now.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The mirror's repository of a public image: its whole name, host first
/// (the rule for that host points at `<mirror>/<host>`).
pub fn mirrored_repository(public: &ImageRef) -> &str {
    &public.repository
}

/// The `CDSIM_MIRRORS` rules for a registry at `registry` (`host:port`) and
/// Helm repositories under `files` (`http://host:port`).
pub fn rules(released: &Released, registry: &str, files: &str) -> String {
    let mut hosts: Vec<String> = [
        &released.dra.image,
        &released.device_plugin.image,
        &released.nfd.image,
    ]
    .iter()
    .map(|it| crate::gpu_source::mirror::image_host(&it.to_string()).to_owned())
    .collect();
    hosts.dedup();
    hosts.sort();
    hosts.dedup();
    let mut rules: Vec<String> = hosts
        .iter()
        .map(|host| format!("{host}=http://{registry}/{host}"))
        .collect();
    for (artifact, dir) in [
        (&released.device_plugin, "device-plugin"),
        (&released.nfd, "nfd"),
    ] {
        if let crate::gpu_source::fetch::Location::Repo { url, .. } = &artifact.chart.location {
            rules.push(format!("{url}={files}/{dir}"));
        }
    }
    rules.join(" ")
}

/// Starts both servers and fills them with the offline builds (built or
/// taken from root's cache).
pub fn start(sh: &Shell) -> Result<Mirror> {
    let released = Released::read()?;
    let binary = ensure_tool(sh, Tool::Registry)?;
    let helm = ensure_tool(sh, Tool::Helm)?;
    let gateway = kind_gateway(sh)?;
    // Outside the clone's target/, which CI links into /var/cache/cdsim: the
    // non-root step proves the user's run changes nothing there, and this
    // mirror's logs change while the user's nodes pull from it.
    let dir = std::env::temp_dir().join("cdsim-ci-mirror");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    let port = free_port()?;
    let server = start_registry(&binary, port, &dir.join("registry"))?;
    let host = format!("{gateway}:{port}");
    let registry = Registry::parse(&host, true).map_err(anyhow::Error::msg)?;
    let dra = crate::scenario4::image::build(sh, &crate::dirs::images_dir()?)?;
    let stack = harness::gpu_stack::ensure(sh)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for (archive, public) in [
        (&dra.archive, &released.dra.image),
        (&stack.device_plugin.path, &released.device_plugin.image),
        (&stack.nfd.path, &released.nfd.image),
    ] {
        let layout = Layout::read(archive)?;
        let image = ImageRef {
            repository: format!("{host}/{}", mirrored_repository(public)),
            tag: public.tag.clone(),
        };
        runtime.block_on(crate::registry::push(&registry, &layout, &image))?;
        eprintln!(
            "    {image}: {} (built from source here) standing in for {public}",
            archive.display()
        );
    }
    let charts = dir.join("charts");
    std::fs::create_dir_all(&charts)?;
    let dra_chart = package(sh, &helm, &dra.chart, &charts)?;
    let crate::gpu_source::fetch::Location::Oci(reference) = &released.dra.chart.location else {
        anyhow::bail!("[released] dra_driver_chart is not an oci:// reference");
    };
    let parent = oci_parent(reference, &host)?;
    cmd!(sh, "{helm} push {dra_chart} {parent} --plain-http").run()?;
    let files_port = free_port()?;
    let files_url = format!("http://{gateway}:{files_port}");
    let repos = dir.join("repos");
    repository(
        sh,
        &helm,
        &stack.chart,
        &repos.join("device-plugin"),
        &format!("{files_url}/device-plugin"),
    )?;
    let nfd_chart = stack
        .chart
        .join("charts")
        .join(harness::gpu_stack::chart::NFD_CHART_NAME);
    repository(
        sh,
        &helm,
        &nfd_chart,
        &repos.join("nfd"),
        &format!("{files_url}/nfd"),
    )?;
    let files = FileServer::start(files_port, &repos)?;
    let rules = rules(&released, &host, &files_url);
    eprintln!("    a local mirror standing in for the public hosts: CDSIM_MIRRORS=\"{rules}\"");
    Ok(Mirror {
        _registry: server,
        _files: files,
        rules,
        registry: host,
        files: files_url,
        gateway,
        dir,
    })
}

/// Where `helm push` puts the chart `reference` (`oci://HOST/path/name`) in
/// the mirror at `registry`: `oci://registry/HOST/path` (helm adds the name).
fn oci_parent(reference: &str, registry: &str) -> Result<String> {
    let rest = reference.strip_prefix("oci://").unwrap_or(reference);
    let (parent, _) = rest
        .rsplit_once('/')
        .with_context(|| format!("{reference} has no path"))?;
    Ok(format!("oci://{registry}/{parent}"))
}

/// `helm package` of the chart at `chart` into `out`; the archive.
fn package(sh: &Shell, helm: &Path, chart: &Path, out: &Path) -> Result<PathBuf> {
    let printed = cmd!(sh, "{helm} package {chart} --destination {out}").read()?;
    // "Successfully packaged chart and saved it to: <path>"
    printed
        .rsplit_once(": ")
        .map(|(_, path)| PathBuf::from(path.trim()))
        .filter(|path| path.is_file())
        .with_context(|| {
            format!(
                "`helm package {}` printed no archive: {printed}",
                chart.display()
            )
        })
}

/// A Helm repository of the chart at `chart` in `dir`, served at `url`.
fn repository(sh: &Shell, helm: &Path, chart: &Path, dir: &Path, url: &str) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    package(sh, helm, chart, dir)?;
    cmd!(sh, "{helm} repo index {dir} --url {url}").run()?;
    Ok(())
}

/// A file server for the Helm repositories: GET only, one thread.
struct FileServer {
    stop: Arc<AtomicBool>,
    port: u16,
}

impl FileServer {
    fn start(port: u16, root: &Path) -> Result<FileServer> {
        let listener = TcpListener::bind(("0.0.0.0", port))
            .with_context(|| format!("binding the chart server to port {port}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, root) = (stop.clone(), root.to_path_buf());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    let _ = serve(stream, &root);
                }
            }
        });
        Ok(FileServer { stop, port })
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accepting thread so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// The file under `root` a request path names (None: outside it or absent).
fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let relative = path.trim_start_matches('/');
    if relative
        .split('/')
        .any(|part| part == ".." || part.is_empty())
    {
        return None;
    }
    let file = root.join(relative);
    file.is_file().then_some(file)
}

fn serve(stream: TcpStream, root: &Path) -> Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let mut stream = stream;
    match (method, resolve(root, path)) {
        ("GET", Some(file)) => {
            let body = std::fs::read(&file)?;
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )?;
            stream.write_all(&body)?;
        }
        _ => write!(
            stream,
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_stand_in_for_every_public_host_and_repository() {
        let released = Released::read().expect("[released]");
        let text = rules(&released, "172.18.0.1:5000", "http://172.18.0.1:5001");
        let mirrors = crate::gpu_source::mirror::Mirrors::parse(&text).expect("valid rules");
        for image in [
            &released.dra.image,
            &released.device_plugin.image,
            &released.nfd.image,
        ] {
            let host = crate::gpu_source::mirror::image_host(&image.repository);
            let rule = mirrors.for_host(host).expect("a rule per image host");
            assert_eq!(
                rule.to.to_string(),
                format!("http://172.18.0.1:5000/{host}")
            );
            // The mirror's repository is the public name, host first, so the rule's path
            // prefix plus the rest of the name is where the push put it.
            assert!(mirrored_repository(image).starts_with(&format!("{host}/")));
        }
        let crate::gpu_source::fetch::Location::Oci(chart) = &released.dra.chart.location else {
            panic!("an OCI chart");
        };
        let parent = oci_parent(chart, "172.18.0.1:5000").expect("parent");
        let (pulled, plain, _) = mirrors.oci(chart);
        assert!(plain);
        assert_eq!(
            format!("{parent}/{}", released.dra.chart.name()),
            pulled,
            "helm pulls the chart where the push put it"
        );
        for artifact in [&released.device_plugin, &released.nfd] {
            let crate::gpu_source::fetch::Location::Repo { url, .. } = &artifact.chart.location
            else {
                panic!("a repository chart");
            };
            assert!(mirrors.for_repo(url).is_some(), "{url}");
        }
    }

    #[test]
    fn the_file_server_serves_files_under_its_root_only() {
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(root.path().join("nfd")).expect("dir");
        std::fs::write(root.path().join("nfd/index.yaml"), "apiVersion: v1\n").expect("index");
        assert_eq!(
            resolve(root.path(), "/nfd/index.yaml"),
            Some(root.path().join("nfd/index.yaml"))
        );
        assert_eq!(resolve(root.path(), "/nfd/../../etc/passwd"), None);
        assert_eq!(resolve(root.path(), "/nfd/missing.tgz"), None);
        let port = free_port().expect("port");
        let server = FileServer::start(port, root.path()).expect("server");
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        write!(stream, "GET /nfd/index.yaml HTTP/1.1\r\nHost: x\r\n\r\n").expect("request");
        let mut answer = String::new();
        std::io::Read::read_to_string(&mut stream, &mut answer).expect("answer");
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.ends_with("apiVersion: v1\n"), "{answer}");
        drop(server);
    }
}
