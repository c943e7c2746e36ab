//! The images (issue 4): built from `manifests/images.toml` by `image-builder`
//! with the workspace's debug artifacts, they are byte-for-byte reproducible,
//! hold exactly what the spec names plus the loader closure, load into the real
//! Docker engine and into a private containerd, and run there.
//!
//! Real peers: GNU tar (lists the layer), `ldd` (the expected closure), dockerd
//! (`docker load`, `docker run`), containerd and ctr (`ctr images import` with
//! kind's flags). Prerequisites fail loudly with the command that provides them:
//! `cargo build --workspace` for the artifacts, a running dockerd, and containerd
//! (installed into `target/` with `go install` when not found).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use image_builder::build::{self, BuiltImage, ImexState, Inputs};
use image_builder::host::{self, RealFs};
use image_builder::payload::Payload;
use image_builder::spec::{FileKind, ImageSpec, Source, Spec};
use integration_tests::{
    artifact, demo_topology_document, permission_bits, profile_dir, repo_root, run_ok,
    IMEX_ARCHIVE_TOP,
};

const MOCK: &str = "nvml-mock";
const WORKLOAD: &str = "nvml-mock-workload";

fn spec() -> Spec {
    let path = repo_root().join("manifests/images.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    Spec::parse(&text).unwrap_or_else(|err| panic!("{err}"))
}

/// Fails with the build command when an artifact the image needs is missing.
fn require_artifacts(image: &ImageSpec) {
    for file in &image.files {
        if let FileKind::File {
            source: Source::Artifact { name, package },
            ..
        } = &file.kind
        {
            artifact(name, package);
        }
    }
}

fn build_with(name: &str, payload: Option<&Payload>, epoch: u64) -> BuiltImage {
    let spec = spec();
    let image = spec.image(name).unwrap_or_else(|err| panic!("{err}"));
    require_artifacts(image);
    let root = repo_root();
    let artifacts = profile_dir();
    let inputs = Inputs {
        repo_root: &root,
        artifact_dir: &artifacts,
        payload,
        source_date_epoch: epoch,
    };
    let cache = host::read_ld_cache().unwrap_or_else(|err| panic!("{err}"));
    build::build_image(image, &inputs, &RealFs, &cache)
        .unwrap_or_else(|err| panic!("cannot build {name}: {err}"))
}

/// The image built without a payload at epoch 0, once per test process: the
/// debug binaries are large, and every test but the reproducibility one only reads it.
fn build_image(name: &str) -> Arc<BuiltImage> {
    static BUILT: OnceLock<Mutex<BTreeMap<String, Arc<BuiltImage>>>> = OnceLock::new();
    let cache = BUILT.get_or_init(|| Mutex::new(BTreeMap::new()));
    let mut cache = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .entry(name.to_owned())
        .or_insert_with(|| Arc::new(build_with(name, None, 0)))
        .clone()
}

/// A stand-in for NVIDIA's payload with its layout (one top-level directory):
/// host programs play the daemon and the ctl, so the closure has real work to do.
/// The real payload cannot be downloaded on these machines.
fn stand_in_payload(dir: &Path) -> PathBuf {
    let top = dir.join(IMEX_ARCHIVE_TOP);
    std::fs::create_dir_all(top.join("usr/bin")).expect("mkdir usr/bin");
    std::fs::create_dir_all(top.join("etc/nvidia-imex")).expect("mkdir etc");
    std::fs::copy("/bin/sleep", top.join("usr/bin/nvidia-imex")).expect("copy sleep");
    std::fs::copy("/bin/cat", top.join("usr/bin/nvidia-imex-ctl")).expect("copy cat");
    std::fs::write(
        top.join("etc/nvidia-imex/config.cfg"),
        "DAEMONIZE=1\nIMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n",
    )
    .expect("write config");
    let archive = dir.join(format!("{IMEX_ARCHIVE_TOP}.tar.xz"));
    let status = Command::new("tar")
        .arg("-cJf")
        .arg(&archive)
        .arg("-C")
        .arg(dir)
        .arg(IMEX_ARCHIVE_TOP)
        .status()
        .expect("GNU tar is not installed (Debian package tar)");
    assert!(status.success(), "tar -cJf failed");
    archive
}

// ---------------------------------------------------------------------------
// Reproducibility

#[test]
fn building_twice_gives_identical_archives() {
    let out_a = tempfile::tempdir().expect("tempdir");
    let out_b = tempfile::tempdir().expect("tempdir");
    for name in [MOCK, WORKLOAD] {
        let first = build_image(name);
        let second = build_with(name, None, 0);
        let path_a = build::write_archive_file(&first, out_a.path()).expect("write a");
        let path_b = build::write_archive_file(&second, out_b.path()).expect("write b");
        let bytes_a = std::fs::read(&path_a).expect("read a");
        let bytes_b = std::fs::read(&path_b).expect("read b");
        assert!(bytes_a == bytes_b, "{name}: two builds differ");
        assert_eq!(first.archive.image_id, second.archive.image_id);
        assert_eq!(
            first.reference(),
            format!("{name}:{}", &first.archive.image_id[7..19])
        );
        // The epoch is the only clock: another one gives another image.
        let later = build_with(name, None, 1_700_000_000);
        assert_ne!(
            later.archive.image_id, first.archive.image_id,
            "{name}: SOURCE_DATE_EPOCH is ignored"
        );
    }
}

#[test]
fn the_payload_goes_into_the_workload_image_reproducibly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = stand_in_payload(dir.path());
    let payload = Payload::open(&archive).expect("open the stand-in payload");
    let first = build_with(WORKLOAD, Some(&payload), 0);
    let second = build_with(WORKLOAD, Some(&Payload::open(&archive).expect("reopen")), 0);
    assert!(first.archive.bytes == second.archive.bytes);
    assert_eq!(first.imex, ImexState::Present);
    let without = build_image(WORKLOAD);
    assert_eq!(without.imex, ImexState::Absent);
    assert_eq!(
        without.left_out,
        [
            "/usr/bin/nvidia-imex.real",
            "/usr/bin/nvidia-imex-ctl",
            "/etc/nvidia-imex/config.cfg"
        ]
    );
    assert_ne!(first.archive.image_id, without.archive.image_id);
    // The extracted directory gives the same image as the archive.
    let extracted = Payload::open(&dir.path().join(IMEX_ARCHIVE_TOP)).expect("open dir");
    assert_eq!(
        build_with(WORKLOAD, Some(&extracted), 0).archive.image_id,
        first.archive.image_id
    );
}

// ---------------------------------------------------------------------------
// Contents against the spec

/// One entry of `tar -tv --numeric-owner`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listed {
    kind: char,
    mode: u32,
    owner: String,
    date: String,
    link: Option<String>,
}

/// Unpacks the archive with GNU tar and lists its layer with GNU tar.
fn list_layer(archive: &[u8]) -> BTreeMap<String, Listed> {
    let dir = tempfile::tempdir().expect("tempdir");
    let archive_path = dir.path().join("image.tar");
    std::fs::write(&archive_path, archive).expect("write archive");
    let unpacked = dir.path().join("unpacked");
    std::fs::create_dir(&unpacked).expect("mkdir");
    run_ok(
        Command::new("tar")
            .arg("-xf")
            .arg(&archive_path)
            .arg("-C")
            .arg(&unpacked),
    );
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(unpacked.join("manifest.json")).expect("manifest.json"),
    )
    .expect("json");
    let layers = manifest[0]["Layers"].as_array().expect("Layers");
    assert_eq!(layers.len(), 1, "one layer per image");
    let layer = unpacked.join(layers[0].as_str().expect("layer path"));
    let output = run_ok(
        Command::new("tar")
            .arg("--numeric-owner")
            .arg("--full-time")
            .arg("-tvf")
            .arg(&layer)
            .env("TZ", "UTC"),
    );
    let text = String::from_utf8_lossy(&output.stdout);
    let mut entries = BTreeMap::new();
    for line in text.lines() {
        // drwxr-xr-x 0/0 0 1970-01-01 00:00:00 usr/
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert!(parts.len() >= 6, "unexpected tar listing line {line:?}");
        let perms = parts[0];
        let name_and_link = parts[5..].join(" ");
        let (name, link) = match name_and_link.split_once(" -> ") {
            Some((name, link)) => (name.to_owned(), Some(link.to_owned())),
            None => (name_and_link, None),
        };
        let path = format!("/{}", name.trim_end_matches('/'));
        entries.insert(
            path,
            Listed {
                kind: perms.chars().next().unwrap_or('?'),
                mode: mode_of(perms),
                owner: parts[1].to_owned(),
                date: format!("{} {}", parts[3], parts[4]),
                link,
            },
        );
    }
    entries
}

/// `-rwxr-xr-x` to 0o755, `drwxrwxrwt` to 0o1777.
fn mode_of(perms: &str) -> u32 {
    let chars: Vec<char> = perms.chars().collect();
    let mut mode = 0;
    for (idx, bit) in [0o400, 0o200, 0o100, 0o40, 0o20, 0o10, 0o4, 0o2, 0o1]
        .iter()
        .enumerate()
    {
        let ch = chars[idx + 1];
        if ch != '-' && ch != 'S' && ch != 'T' {
            mode |= bit;
        }
    }
    match chars[3] {
        's' | 'S' => mode |= 0o4000,
        _ => (),
    }
    match chars[6] {
        's' | 'S' => mode |= 0o2000,
        _ => (),
    }
    match chars[9] {
        't' | 'T' => mode |= 0o1000,
        _ => (),
    }
    mode
}

/// What `ldd` (the host loader) says a file loads: absolute paths, no vDSO.
fn ldd_closure(path: &Path) -> BTreeSet<String> {
    let output = Command::new("ldd")
        .arg(path)
        .output()
        .expect("ldd is not installed (Debian package libc-bin)");
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || text.contains("statically linked") {
        return BTreeSet::new();
    }
    test_support::ldd_paths(&text)
}

/// Checks an archive's layer against the spec: every entry present with its
/// type, mode and link target; everything else is a parent directory or
/// exactly the libraries `ldd` reports for the image's programs.
fn check_contents(image: &ImageSpec, built: &BuiltImage, payload_dir: Option<&Path>) {
    let listed = list_layer(&built.archive.bytes);
    let mut expected: BTreeMap<String, (char, u32, Option<String>)> = BTreeMap::new();
    let mut closure = BTreeSet::new();
    for file in &image.files {
        match &file.kind {
            FileKind::File {
                source,
                mode,
                links,
            } => {
                let host_path = match source {
                    Source::Artifact { name, package } => artifact(name, package),
                    Source::Repo(rel) => repo_root().join(rel),
                    Source::Host { path, .. } => PathBuf::from(path),
                    Source::Imex(rel) => match payload_dir {
                        Some(dir) => dir.join(rel),
                        None => continue,
                    },
                };
                closure.extend(ldd_closure(&host_path));
                expected.insert(file.path.clone(), ('-', *mode, None));
                let target = file.path.rsplit('/').next().expect("file name").to_owned();
                let dir = file.path.rsplit_once('/').expect("absolute").0;
                for link in links {
                    expected.insert(format!("{dir}/{link}"), ('l', 0o777, Some(target.clone())));
                }
            }
            FileKind::RepoDir { dir, suffix, mode } => {
                let source = repo_root().join(dir);
                let names: Vec<String> = std::fs::read_dir(&source)
                    .unwrap_or_else(|err| panic!("cannot list {}: {err}", source.display()))
                    .map(|entry| {
                        entry
                            .expect("dir entry")
                            .file_name()
                            .to_string_lossy()
                            .into_owned()
                    })
                    .filter(|name| name.ends_with(suffix.as_str()))
                    .collect();
                assert!(
                    !names.is_empty(),
                    "{} has no {suffix} file",
                    source.display()
                );
                for name in names {
                    expected.insert(format!("{}/{name}", file.path), ('-', *mode, None));
                }
            }
            FileKind::Dir { mode } => {
                expected.insert(file.path.clone(), ('d', *mode, None));
            }
        }
    }
    for library in &closure {
        assert!(
            !expected.contains_key(library),
            "{library} is both in the spec and in the closure"
        );
        expected.insert(
            library.clone(),
            ('-', permission_bits(Path::new(library)), None),
        );
    }
    for (path, (kind, mode, link)) in &expected {
        let Some(entry) = listed.get(path) else {
            panic!("{}: {path} from the spec (or ldd) is missing", image.name);
        };
        assert_eq!(
            (entry.kind, entry.mode, &entry.link),
            (*kind, *mode, link),
            "{}: {path}",
            image.name
        );
    }
    for (path, entry) in &listed {
        assert_eq!(
            entry.owner, "0/0",
            "{}: {path} has a host owner",
            image.name
        );
        assert_eq!(
            entry.date, "1970-01-01 00:00:00",
            "{}: {path} has a host mtime",
            image.name
        );
        if expected.contains_key(path) {
            continue;
        }
        let is_parent = expected
            .keys()
            .any(|other| other.starts_with(&format!("{path}/")));
        assert!(
            entry.kind == 'd' && entry.mode == 0o755 && is_parent,
            "{}: unexpected entry {path} ({entry:?}): neither in the spec, a parent directory, nor in ldd's closure",
            image.name
        );
    }
    // The closure files are the host's bytes.
    for library in &closure {
        let in_image = built
            .closure
            .iter()
            .find(|file| &file.path == library)
            .unwrap_or_else(|| panic!("{library} is not in the builder's closure list"));
        assert!(
            in_image.bytes == std::fs::read(library).expect("read library"),
            "{library} differs from the host"
        );
    }
}

#[test]
fn mock_image_files_match_the_spec() {
    let spec = spec();
    check_contents(spec.image(MOCK).expect("mock"), &build_image(MOCK), None);
}

#[test]
fn workload_image_files_match_the_spec_with_and_without_payload() {
    let spec = spec();
    let image = spec.image(WORKLOAD).expect("workload");
    check_contents(image, &build_image(WORKLOAD), None);
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = stand_in_payload(dir.path());
    let payload = Payload::open(&archive).expect("open payload");
    let built = build_with(WORKLOAD, Some(&payload), 0);
    check_contents(image, &built, Some(&dir.path().join(IMEX_ARCHIVE_TOP)));
}

// ---------------------------------------------------------------------------
// Docker

fn require_docker() {
    let info = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output();
    match info {
        Ok(output) if output.status.success() => (),
        Ok(output) => panic!(
            "`docker info` failed: the Docker engine is not running; start it with \
             `nohup dockerd >/var/log/dockerd.log 2>&1 &`\n{}",
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(err) => panic!("the docker client is not installed (Debian package docker.io): {err}"),
    }
}

/// Removes the loaded image references when the test ends, pass or fail.
struct DockerImages(Vec<String>);

impl Drop for DockerImages {
    fn drop(&mut self) {
        for reference in &self.0 {
            let _ = Command::new("docker")
                .args(["rmi", "--force", reference])
                .output();
        }
    }
}

fn docker_load(built: &BuiltImage, dir: &Path) -> String {
    let path = build::write_archive_file(built, dir).expect("write archive");
    let output = run_ok(Command::new("docker").arg("load").arg("-i").arg(&path));
    let text = String::from_utf8_lossy(&output.stdout);
    let reference = built.reference();
    assert!(
        text.contains(&format!("Loaded image: {reference}")),
        "docker load said: {text}"
    );
    let id = run_ok(
        Command::new("docker").args(["image", "inspect", "--format", "{{.Id}}", &reference]),
    );
    assert_eq!(
        String::from_utf8_lossy(&id.stdout).trim(),
        built.archive.image_id
    );
    reference
}

/// An image built and loaded into docker, removed again when this drops, with a temp dir for
/// the test's own files.
struct Loaded {
    reference: String,
    _cleanup: DockerImages,
    dir: tempfile::TempDir,
}

/// Builds the image `name` and loads it into docker (which must be running).
fn docker_loaded(name: &str) -> Loaded {
    require_docker();
    let built = build_image(name);
    let dir = tempfile::tempdir().expect("tempdir");
    let reference = docker_load(&built, dir.path());
    Loaded {
        _cleanup: DockerImages(vec![reference.clone()]),
        reference,
        dir,
    }
}

#[test]
fn docker_loads_the_mock_image_and_check_fabric_reads_the_staged_library() {
    let Loaded {
        reference,
        _cleanup,
        dir,
    } = docker_loaded(MOCK);
    let staged = stage_gb200_and_demo_topology(dir.path());
    let mount = format!("{}:/staged:ro", staged.display());
    let output = run_ok(Command::new("docker").args([
        "run",
        "--rm",
        "--network",
        "none",
        "-v",
        &mount,
        "-e",
        "MOCK_NVML_CONFIG=/staged/profile.bin",
        "-e",
        "MOCK_TOPOLOGY_CONFIG=/staged/topology.bin",
        "-e",
        "LD_LIBRARY_PATH=/usr/local/lib",
        "-e",
        "NODE_NAME=nvml-mock-compute-domain-worker3",
        &reference,
        "/usr/local/bin/check-fabric",
    ]));
    assert_fabric_identity(&String::from_utf8_lossy(&output.stdout), "1");
}

/// `<dir>/staged` holding the image's gb200 profile (`/etc/nvml-mock/profiles/gb200.yaml`, the
/// repository's file) and the demo topology, staged as the stager stages them on a node (the
/// library reads only the staged form), as `profile.bin` and `topology.bin`.
fn stage_gb200_and_demo_topology(dir: &std::path::Path) -> std::path::PathBuf {
    let staged = dir.join("staged");
    std::fs::create_dir_all(&staged).expect("create the staged dir");
    let profile = repo_root().join("manifests/helm/nvml-mock/profiles/gb200.yaml");
    integration_tests::staged::stage_profile(&profile, &staged.join("profile.bin"));
    std::fs::write(
        staged.join("topology.bin"),
        integration_tests::staged::topology_bytes(&demo_topology_document()),
    )
    .expect("write the staged topology");
    staged
}

/// check-fabric's text output: every GPU in the demo domain, in `clique`, fabric completed.
fn assert_fabric_identity(text: &str, clique: &str) {
    let count = text
        .lines()
        .find_map(|line| {
            line.strip_prefix("Discovered ")?
                .strip_suffix(" GPU(s)")?
                .parse::<usize>()
                .ok()
        })
        .unwrap_or_else(|| panic!("no `Discovered N GPU(s)` line in:\n{text}"));
    assert!(count > 0, "{text}");
    let field = |name: &str| -> Vec<String> {
        text.lines()
            .filter_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim() == name).then(|| value.trim().to_owned())
            })
            .collect()
    };
    assert_eq!(
        field("clusterUuid"),
        vec!["00000000-0000-0000-0000-0000000000ab".to_owned(); count],
        "{text}"
    );
    assert_eq!(field("cliqueId"), vec![clique.to_owned(); count], "{text}");
    assert_eq!(
        field("state"),
        vec!["completed (3)".to_owned(); count],
        "{text}"
    );
}

#[test]
fn docker_runs_the_workload_image_shell_and_shim() {
    let Loaded {
        reference,
        _cleanup,
        dir: _dir,
    } = docker_loaded(WORKLOAD);
    let label = run_ok(Command::new("docker").args([
        "image",
        "inspect",
        "--format",
        "{{index .Config.Labels \"cdsim.imex\"}}",
        &reference,
    ]));
    assert_eq!(String::from_utf8_lossy(&label.stdout).trim(), "absent");
    // The scenarios' shell idioms work: sed edits, background jobs, /tmp.
    let script = "printf 'DAEMONIZE=1\\n' > /tmp/imex.cfg && sed -i 's/^DAEMONIZE=1/DAEMONIZE=0/' /tmp/imex.cfg \
                  && cat /tmp/imex.cfg; sleep 30 & echo $! > /tmp/pid; kill $(cat /tmp/pid); wait; \
                  test -x /usr/bin/nvidia-imex && echo shim-present";
    let output = run_ok(Command::new("docker").args([
        "run",
        "--rm",
        "--network",
        "none",
        &reference,
        "/bin/sh",
        "-c",
        script,
    ]));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("DAEMONIZE=0"), "{text}");
    assert!(text.contains("shim-present"), "{text}");
    // Without the payload the shim cannot find the real daemon: exit 127, upstream's message.
    let output = Command::new("docker")
        .args([
            "run",
            "--rm",
            "--network",
            "none",
            &reference,
            "/usr/bin/nvidia-imex",
            "-c",
            "/tmp/x",
        ])
        .output()
        .expect("docker run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(127), "stderr: {stderr}");
    assert!(
        stderr.contains("exec /usr/bin/nvidia-imex.real"),
        "stderr: {stderr}"
    );
}

// ---------------------------------------------------------------------------
// containerd

/// A private containerd (own root, state and socket) stopped on drop.
struct Containerd {
    child: Child,
    socket: PathBuf,
    dir: tempfile::TempDir,
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// containerd, its runc shim and ctr at the pinned version: from `target/`,
/// else `go install`ed into `target/images-peer/bin`.
fn containerd_bin_dir() -> PathBuf {
    const BINARIES: [&str; 3] = ["containerd", "containerd-shim-runc-v2", "ctr"];
    let target = repo_root().join("target");
    for dir in [
        target.join("images-peer/bin"),
        target.join("containerd-peer/bin"),
    ] {
        if BINARIES.iter().all(|binary| dir.join(binary).is_file()) {
            return dir;
        }
    }
    let versions = std::fs::read_to_string(repo_root().join("manifests/versions.toml"))
        .expect("versions.toml");
    let versions: toml::Value = toml::from_str(&versions).expect("versions.toml parses");
    let version = versions["node"]["containerd"]
        .as_str()
        .expect("[node].containerd");
    let gobin = target.join("images-peer/bin");
    for command in BINARIES {
        let module = format!("github.com/containerd/containerd/v2/cmd/{command}@{version}");
        let status = Command::new("go")
            .args(["install", "-tags", "no_btrfs", &module])
            .env("GOBIN", &gobin)
            .status()
            .unwrap_or_else(|err| {
                panic!("containerd is not installed and `go` cannot run ({err}); install Go 1.24+")
            });
        assert!(status.success(), "`go install {module}` failed");
    }
    gobin
}

fn start_containerd(bin: &Path) -> Containerd {
    let dir = tempfile::Builder::new()
        .prefix("cdsim-ctr")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let socket = dir.path().join("c.sock");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "version = 3\nroot = \"{root}\"\nstate = \"{state}\"\n\
             disabled_plugins = [\"io.containerd.grpc.v1.cri\", \"io.containerd.cri.v1.runtime\", \"io.containerd.cri.v1.images\", \"io.containerd.nri.v1.nri\"]\n\
             [grpc]\n  address = \"{socket}\"\n[ttrpc]\n  address = \"{socket}.ttrpc\"\n",
            root = dir.path().join("root").display(),
            state = dir.path().join("state").display(),
            socket = socket.display(),
        ),
    )
    .expect("write config");
    let log = std::fs::File::create(dir.path().join("containerd.log")).expect("log");
    // containerd finds its shim on PATH.
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let child = Command::new(bin.join("containerd"))
        .arg("--config")
        .arg(&config)
        .env("PATH", path)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start containerd: {err}"));
    let mut daemon = Containerd { child, socket, dir };
    for _ in 0..100 {
        if let Ok(Some(status)) = daemon.child.try_wait() {
            panic!("containerd exited with {status}; log:\n{}", daemon.log());
        }
        let ready = Command::new(bin.join("ctr"))
            .arg("--address")
            .arg(&daemon.socket)
            .arg("version")
            .output()
            .is_ok_and(|output| output.status.success());
        if ready {
            return daemon;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "containerd did not answer within 10 s; log:\n{}",
        daemon.log()
    );
}

impl Containerd {
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default()
    }

    fn ctr(&self, bin: &Path) -> Command {
        let mut command = Command::new(bin.join("ctr"));
        command
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", "k8s.io"]);
        command
    }
}

#[test]
fn containerd_imports_both_archives_with_kinds_flags_and_runs_them() {
    let bin = containerd_bin_dir();
    let daemon = start_containerd(&bin);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut references = BTreeMap::new();
    for name in [MOCK, WORKLOAD] {
        let built = build_image(name);
        let path = build::write_archive_file(&built, dir.path()).expect("write archive");
        // `kind load image-archive` (v0.31, pkg/cluster/nodeutils.LoadImageArchive) streams the
        // archive into exactly this command on each node; kind nodes use overlayfs.
        let archive = std::fs::File::open(&path).expect("open archive");
        run_ok(
            daemon
                .ctr(&bin)
                .args([
                    "images",
                    "import",
                    "--all-platforms",
                    "--digests",
                    "--snapshotter=overlayfs",
                    "-",
                ])
                .stdin(archive),
        );
        let reference = format!("docker.io/library/{}", built.reference());
        let check = run_ok(daemon.ctr(&bin).args(["images", "check"]));
        let text = String::from_utf8_lossy(&check.stdout);
        let row = text
            .lines()
            .find(|line| line.split_whitespace().next() == Some(reference.as_str()))
            .unwrap_or_else(|| panic!("{reference} is not in `ctr images check`:\n{text}"));
        // The OCI view was used: containerd's manifest digest is the builder's.
        assert!(row.contains(&built.archive.manifest_digest), "{row}");
        assert!(
            row.contains("complete") && row.trim_end().ends_with("true"),
            "not complete and unpacked: {row}"
        );
        references.insert(name, reference);
    }
    // Both images run under containerd's runc shim.
    let output = run_ok(daemon.ctr(&bin).args([
        "run",
        "--rm",
        "--net-host",
        &references[WORKLOAD],
        "cdsim-images-workload",
        "/bin/sh",
        "-c",
        "echo ok > /tmp/probe && cat /tmp/probe && test -x /usr/bin/nvidia-imex",
    ]));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "ok");
    let staged = stage_gb200_and_demo_topology(dir.path());
    let mount = format!(
        "type=bind,src={},dst=/staged,options=rbind:ro",
        staged.display()
    );
    let output = run_ok(daemon.ctr(&bin).args([
        "run",
        "--rm",
        "--net-host",
        "--mount",
        &mount,
        "--env",
        "MOCK_NVML_CONFIG=/staged/profile.bin",
        "--env",
        "MOCK_TOPOLOGY_CONFIG=/staged/topology.bin",
        "--env",
        "LD_LIBRARY_PATH=/usr/local/lib",
        "--env",
        "NODE_NAME=nvml-mock-compute-domain-worker",
        &references[MOCK],
        "cdsim-images-mock",
        "/usr/local/bin/check-fabric",
    ]));
    assert_fabric_identity(&String::from_utf8_lossy(&output.stdout), "0");
}
