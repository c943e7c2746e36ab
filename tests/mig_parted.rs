//! NVIDIA's MIG partition editor, `nvidia-mig-parted` (github.com/NVIDIA/mig-parted, pinned in
//! `manifests/versions.toml` `[peers] mig_parted_*`), run for real against the mock library on
//! a staged h100 tray, with its own default config (`deployments/systemd/config-default.yaml`,
//! which names each part's layouts by PCI device id: the h100 profile's 0x233010DE is one).
//!
//! mig-parted finds the library only through the staged tree (`env -i`, the tree's
//! `usr/lib64` on `LD_LIBRARY_PATH`). Two things it reads come from the node, not from NVML:
//! `/proc/modules` must list `nvidia` (else it drives the GPUs through PCI registers) and it
//! enumerates GPUs from `/sys/bus/pci/devices` (go-nvlib's nvpci, then
//! `nvmlDeviceGetHandleByPciBusId`). Each run therefore gets a private mount namespace
//! (`unshare --mount`) in which `/proc` lists the `nvidia` module beside the real procfs entries
//! and `/sys/bus/pci/devices` holds one entry per GPU of the profile (vendor, device, class,
//! subsystem ids), as on an HGX H100 node.
//!
//! Prerequisites fail loudly: root (the stager creates character devices; the mounts), `cargo
//! build -p node-stager -p mock-nvml -p check-fabric -p nvidia-smi`, util-linux's `unshare`,
//! GNU tar, Go 1.26, and the snapshot (`CDSIM_PEERS_DIR`, else `../shared/peers`, else
//! `<cache>/peers`). The build is cached under `<cache>/go/mig-parted-<sha256 prefix>/` (with
//! the default config beside it), so warm runs build nothing.
//!
//! `sudo -E cargo test -p integration-tests --test mig_parted -- --nocapture` prints how long
//! each `apply` took.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use integration_tests::node_software::{cached_go_binary, peer_snapshot, stage_tree, Staged};
use integration_tests::{checked, pin, require_program, require_root};
use nvml_profile::Profile;
use serde_yaml::Value;

const BINARY: &str = "nvidia-mig-parted";
const DEFAULT_CONFIG: &str = "config-default.yaml";

// ---------------------------------------------------------------- the build

/// The built `nvidia-mig-parted` and mig-parted's default config beside it in the cache.
struct MigParted {
    binary: PathBuf,
    default_config: PathBuf,
}

fn mig_parted() -> MigParted {
    // The tests of this file build it once between them.
    static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = BUILD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let archive_name = pin("peers", "mig_parted_archive");
    let sha256 = pin("peers", "mig_parted_sha256");
    let version = pin("peers", "mig_parted_version");
    let key = format!("mig-parted-{}", &sha256[..16]);
    let binary = cached_go_binary(&key, BINARY, |out| {
        build(&peer_snapshot(&archive_name, &sha256), &version, out);
    });
    let default_config = binary.with_file_name(DEFAULT_CONFIG);
    assert!(
        default_config.is_file(),
        "{} lacks {DEFAULT_CONFIG}: remove that directory and rerun",
        binary.display()
    );
    MigParted {
        binary,
        default_config,
    }
}

/// Unpacks the snapshot into `out/src` and builds `./cmd/nvidia-mig-parted` as its Makefile's
/// `cmd-%` target does, offline from the committed `vendor/` (cgo: go-nvml dlopens NVML).
fn build(archive: &Path, version: &str, out: &Path) {
    let go = require_program(
        "go",
        "install Go 1.26 (https://go.dev/doc/install): mig-parted's go.mod says go 1.26",
    );
    let tar = require_program("tar", "apt-get install tar");
    let src = out.join("src");
    std::fs::create_dir_all(&src).unwrap_or_else(|err| panic!("{err}"));
    checked(
        Command::new(tar)
            .arg("-xzf")
            .arg(archive)
            .arg("-C")
            .arg(&src)
            .output(),
        "unpacking the mig-parted snapshot",
    );
    let tree = src.join(format!("mig-parted-{version}"));
    let ldflags = format!(
        "-extldflags=-Wl,-z,lazy -s -w -X github.com/NVIDIA/mig-parted/internal/info.version={version}"
    );
    checked(
        Command::new("nice")
            .args(["-n", "10"])
            .arg(go)
            .current_dir(&tree)
            .env("GOFLAGS", "-mod=vendor")
            .env("GOPROXY", "off")
            .env("GOTOOLCHAIN", "local")
            .env("CGO_ENABLED", "1")
            .args(["build", "-ldflags", &ldflags, "-o"])
            .arg(out.join(BINARY))
            .arg("./cmd/nvidia-mig-parted")
            .output(),
        "go build ./cmd/nvidia-mig-parted (offline, GOFLAGS=-mod=vendor GOPROXY=off; needs Go 1.26)",
    );
    let config = tree.join("deployments/systemd").join(DEFAULT_CONFIG);
    std::fs::copy(&config, out.join(DEFAULT_CONFIG))
        .unwrap_or_else(|err| panic!("cannot copy {}: {err}", config.display()));
    std::fs::remove_dir_all(&src).unwrap_or_else(|err| panic!("{err}"));
}

// ---------------------------------------------------------------- the node

/// A staged h100 tray with what mig-parted reads from the node beside it.
struct Node {
    staged: Staged,
    profile: Profile,
    name: String,
}

fn h100_node() -> Node {
    require_root(
        "the stager creates character devices and mig-parted runs in a private mount namespace: \
         run as root (`sudo -E cargo test -p integration-tests --test mig_parted`)",
    );
    let workers = topology::kind_workers("nvml-mock-compute-domain", 4);
    let path = harness::profiles::path("h100");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let profile = Profile::parse(&text).unwrap_or_else(|err| panic!("h100: {err}"));
    let staged = stage_tree(&topology::demo(&workers).to_yaml(), &workers[0], &path);
    let node = Node {
        staged,
        profile,
        name: workers[0].clone(),
    };
    node.write_pci_devices();
    node
}

impl Node {
    fn pci_devices(&self) -> PathBuf {
        self.staged.dir.path().join("sys-bus-pci-devices")
    }

    /// `/sys/bus/pci/devices/<bus id>/` of each GPU, with the files go-nvlib's nvpci reads.
    fn write_pci_devices(&self) {
        for device in self.profile.devices() {
            let id = device.pci_bus_id;
            let address = format!(
                "{:04x}:{:02x}:{:02x}.{:x}",
                id.domain, id.bus, id.device, id.function
            );
            let dir = self.pci_devices().join(address);
            std::fs::create_dir_all(&dir).unwrap_or_else(|err| panic!("{err}"));
            let pci = &device.pci;
            let class = device
                .pci_class
                .unwrap_or_else(|| panic!("h100 GPU {} has no pci_class", device.index));
            let files = [
                ("vendor", format!("0x{:04x}", pci.device_id & 0xffff)),
                ("device", format!("0x{:04x}", pci.device_id >> 16)),
                (
                    "subsystem_vendor",
                    format!("0x{:04x}", pci.subsystem_id & 0xffff),
                ),
                (
                    "subsystem_device",
                    format!("0x{:04x}", pci.subsystem_id >> 16),
                ),
                // base, sub class and programming interface 0: 0x030200 is a 3D controller.
                ("class", format!("0x{:02x}{:02x}00", class.base, class.sub)),
                ("numa_node", "0".to_owned()),
                ("resource", "0x0 0x0 0x0".to_owned()),
            ];
            for (name, value) in files {
                std::fs::write(dir.join(name), format!("{value}\n"))
                    .unwrap_or_else(|err| panic!("{err}"));
            }
        }
    }

    /// Runs `nvidia-mig-parted <args>` with nothing but the staged tree (`env -i`), in a
    /// private mount namespace with the node's `/proc/modules` and PCI devices.
    fn run(&self, mig_parted: &MigParted, args: &[&str]) -> Output {
        let unshare = require_program("unshare", "apt-get install util-linux");
        let real_proc = self.staged.dir.path().join("real-proc");
        std::fs::create_dir_all(&real_proc).unwrap_or_else(|err| panic!("{err}"));
        let driver = self.staged.driver();
        Command::new(unshare)
            .args(["--mount", "--propagation", "private", "/bin/sh", "-euc"])
            .arg(NAMESPACE_SCRIPT)
            .arg("sh")
            .arg(&real_proc)
            .arg(self.pci_devices())
            .arg(&mig_parted.binary)
            .args(args)
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", driver.join("usr/bin").display()),
            )
            .env("LD_LIBRARY_PATH", self.staged.lib_dir())
            .env("NODE_NAME", &self.name)
            .output()
            .unwrap_or_else(|err| panic!("cannot start unshare: {err}"))
    }

    fn run_ok(&self, mig_parted: &MigParted, args: &[&str]) -> Output {
        checked(
            Ok(self.run(mig_parted, args)),
            &format!("nvidia-mig-parted {}", args.join(" ")),
        )
    }
}

/// `$1` the real procfs's mount point, `$2` the PCI devices, then the command: `/proc` becomes
/// a tmpfs of links to the real entries plus a `modules` listing `nvidia`.
const NAMESPACE_SCRIPT: &str = r#"
real=$1 pci=$2; shift 2
mount -t proc proc "$real"
mount -t tmpfs tmpfs /proc
for entry in "$real"/*; do ln -s "$entry" "/proc/${entry##*/}"; done
rm -f /proc/modules
echo 'nvidia 62418944 0 - Live 0x0000000000000000' > /proc/modules
mount --bind "$pci" /sys/bus/pci/devices
exec "$@"
"#;

// ---------------------------------------------------------------- what mig-parted says

/// `apply -f <config> -c <name>`, timed; prints the wall time, which includes the private mount
/// namespace's set-up (about 0.15 s on the 2-core test machine, `unshare` and the `/proc` links).
fn apply(node: &Node, mig_parted: &MigParted, config: &Path, name: &str) {
    let config = config.display().to_string();
    let started = Instant::now();
    node.run_ok(mig_parted, &["apply", "-f", &config, "-c", name]);
    eprintln!(
        "nvidia-mig-parted apply -c {name} on 8 H100s: {:.0} ms (wall, with the namespace set-up)",
        started.elapsed().as_secs_f64() * 1000.0
    );
}

fn assert_passes(node: &Node, mig_parted: &MigParted, config: &Path, name: &str) {
    let config = config.display().to_string();
    node.run_ok(mig_parted, &["assert", "-f", &config, "-c", name]);
}

/// `apply`, then `assert` of the same config in a new process.
fn apply_and_assert(node: &Node, mig_parted: &MigParted, config: &Path, name: &str) {
    apply(node, mig_parted, config, name);
    assert_passes(node, mig_parted, config, name);
}

/// The partition `export` reports: GPU index → (MIG enabled, profile name → count).
type Partition = BTreeMap<u64, (bool, BTreeMap<String, u64>)>;

fn export(node: &Node, mig_parted: &MigParted) -> (String, Partition) {
    let output = node.run_ok(mig_parted, &["export"]);
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let document: Value = serde_yaml::from_str(&text)
        .unwrap_or_else(|err| panic!("export is not YAML ({err}): {text}"));
    assert_eq!(document["version"], Value::from("v1"), "{text}");
    let specs = document["mig-configs"]["current"]
        .as_sequence()
        .unwrap_or_else(|| panic!("no mig-configs.current in {text}"));
    let mut partition = Partition::new();
    for spec in specs {
        let enabled = spec["mig-enabled"]
            .as_bool()
            .unwrap_or_else(|| panic!("no mig-enabled in {spec:?}"));
        let devices: BTreeMap<String, u64> = spec["mig-devices"]
            .as_mapping()
            .map(|devices| {
                devices
                    .iter()
                    .map(|(name, count)| {
                        (
                            name.as_str().unwrap_or_default().to_owned(),
                            count.as_u64().unwrap_or(0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let indices: Vec<u64> = match &spec["devices"] {
            Value::String(all) if all == "all" => (0..8).collect(),
            Value::Sequence(list) => list.iter().filter_map(Value::as_u64).collect(),
            other => panic!("devices {other:?} in {text}"),
        };
        for index in indices {
            let previous = partition.insert(index, (enabled, devices.clone()));
            assert!(previous.is_none(), "GPU {index} twice in {text}");
        }
    }
    (text, partition)
}

/// Every one of the 8 GPUs with `devices` (MIG enabled unless `devices` is empty).
fn every_gpu(devices: &[(&str, u64)]) -> Partition {
    let devices: BTreeMap<String, u64> = devices
        .iter()
        .map(|(name, count)| ((*name).to_owned(), *count))
        .collect();
    (0..8)
        .map(|index| (index, (!devices.is_empty(), devices.clone())))
        .collect()
}

/// The MIG mode (current) of every GPU as the staged `nvidia-smi -q -x` reads it: another
/// program, another process.
fn smi_mig_modes(node: &Node) -> Vec<String> {
    let output = checked(
        Command::new(node.staged.driver().join("usr/bin/nvidia-smi"))
            .env_clear()
            .env("LD_LIBRARY_PATH", node.staged.lib_dir())
            .env("NODE_NAME", &node.name)
            .args(["-q", "-x"])
            .output(),
        "nvidia-smi -q -x",
    );
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let xml = roxmltree::Document::parse_with_options(&text, options)
        .unwrap_or_else(|err| panic!("{err}: {text}"));
    xml.descendants()
        .filter(|node| node.has_tag_name("current_mig"))
        .map(|node| node.text().unwrap_or_default().to_owned())
        .collect()
}

// ---------------------------------------------------------------- the tests

/// A fresh h100 tray on which `apply` and `assert` of the default config's `name` passed.
fn tray_with(name: &str) -> (MigParted, Node) {
    let mig_parted = mig_parted();
    let node = h100_node();
    apply_and_assert(&node, &mig_parted, &mig_parted.default_config, name);
    (mig_parted, node)
}

/// `all-1g.10gb` (7 × 1g.10gb on each GPU): applied, asserted from a new process, exported; the
/// export is valid mig-parted YAML that, applied to a fresh tray, gives the same partition.
#[test]
fn all_1g_10gb_applies_asserts_and_its_export_round_trips() {
    let (mig_parted, node) = tray_with("all-1g.10gb");
    let config = &mig_parted.default_config;
    let other = node.run(
        &mig_parted,
        &[
            "assert",
            "-f",
            &config.display().to_string(),
            "-c",
            "all-balanced",
        ],
    );
    assert!(
        !other.status.success(),
        "assert -c all-balanced must fail on a node in all-1g.10gb: {}",
        String::from_utf8_lossy(&other.stderr)
    );
    let (text, partition) = export(&node, &mig_parted);
    assert_eq!(partition, every_gpu(&[("1g.10gb", 7)]), "{text}");
    assert_eq!(smi_mig_modes(&node), vec!["Enabled"; 8]);

    let exported = node.staged.dir.path().join("exported.yaml");
    std::fs::write(&exported, &text).unwrap_or_else(|err| panic!("{err}"));
    let fresh = h100_node();
    assert_eq!(smi_mig_modes(&fresh), vec!["Disabled"; 8]);
    apply_and_assert(&fresh, &mig_parted, &exported, "current");
    assert_passes(&fresh, &mig_parted, config, "all-1g.10gb");
    assert_eq!(export(&fresh, &mig_parted), (text, partition));
}

/// `all-balanced` (2 × 1g.10gb, 2g.20gb, 3g.40gb on each GPU), then `all-disabled` returns
/// every GPU to MIG off with no instances left; both assert in new processes.
#[test]
fn all_balanced_applies_and_all_disabled_turns_mig_off() {
    let (mig_parted, node) = tray_with("all-balanced");
    let config = &mig_parted.default_config;
    let (text, partition) = export(&node, &mig_parted);
    assert_eq!(
        partition,
        every_gpu(&[("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)]),
        "{text}"
    );
    // Reapplying from another layout clears the instances first.
    apply_and_assert(&node, &mig_parted, config, "all-1g.10gb");

    apply_and_assert(&node, &mig_parted, config, "all-disabled");
    let (text, partition) = export(&node, &mig_parted);
    assert_eq!(partition, every_gpu(&[]), "{text}");
    assert_eq!(smi_mig_modes(&node), vec!["Disabled"; 8]);
}
