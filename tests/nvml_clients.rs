//! The mock `libnvidia-ml.so.1` through NVIDIA's own clients: pynvml (PyPI `nvidia-ml-py`),
//! go-nvml (the binding the DRA driver uses, driven by `tests/nvml/go`) and the `nvml-wrapper`
//! crate (in process, loaded by path).
//!
//! Matrix: the four demo workers under the demo topology (`tests/nvml/topology-demo.yaml`)
//! report clique 0, 0, 1, 1, uuid `…00ab`, state COMPLETED on every GPU through v1, V/v2 and V/v3;
//! a node absent from the topology reports the profile's defaults; the h100 profile reports
//! NOT_SUPPORTED; a bad version tag gives ARGUMENT_VERSION_MISMATCH and writes nothing. Through
//! go-nvml also what go-gpuallocator reads for the device plugin's preferred allocation (topology
//! levels, NVLink far ends: NVSwitches). Strings,
//! PCI info and memory are compared with the parsed profile YAML.
//!
//! Prerequisites fail loudly: `cargo build -p mock-nvml` first; python3 with venv/pip (the test
//! installs the pinned nvidia-ml-py into `target/nvml-venv-<version>`); go (the module proxy
//! fetches the pinned go-nvml).

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use integration_tests::{
    checked, mock_nvml_lib_dir, mock_nvml_library, repo_root, require_program, staged_profile,
    staged_topology,
};
use nvml_profile::{Architecture, Device, PciBusId, Profile, TopologyLevel};
use serde_json::Value;

#[path = "nvml/wrapper.rs"]
mod wrapper;

const CLUSTER: &str = "nvml-mock-compute-domain";
const DEMO_UUID: &str = "00000000-0000-0000-0000-0000000000ab";
const NVML_ERROR_NOT_SUPPORTED: i64 = 3;
const NVML_ERROR_ARGUMENT_VERSION_MISMATCH: i64 = 25;

/// What the fabric queries must report on every GPU.
#[derive(Debug, Clone, PartialEq)]
enum Fabric {
    /// SUCCESS, this uuid and clique, state COMPLETED (3), status SUCCESS.
    Identity { uuid: String, clique: u32 },
    /// NVML_ERROR_NOT_SUPPORTED from v1, V/v2 and V/v3.
    NotSupported,
}

/// One row of the matrix.
#[derive(Debug, Clone)]
struct Scenario {
    label: String,
    profile_path: PathBuf,
    profile: Profile,
    node: String,
    expected: Fabric,
}

fn profile_path(name: &str) -> PathBuf {
    repo_root()
        .join("manifests/helm/nvml-mock/profiles")
        .join(format!("{name}.yaml"))
}

/// The demo topology, staged (the library reads only the staged form), once per process.
fn demo_topology() -> PathBuf {
    static STAGED: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    STAGED
        .get_or_init(|| staged_topology(&repo_root().join("tests/nvml/topology-demo.yaml")))
        .clone()
}

/// The shipped profile `name`: the staged file the library reads, and the parsed profile.
fn load_profile(name: &str) -> (PathBuf, Profile) {
    let yaml = profile_path(name);
    let text = std::fs::read_to_string(&yaml)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", yaml.display()));
    let profile = Profile::parse(&text).unwrap_or_else(|err| panic!("{}: {err}", yaml.display()));
    let path = staged_profile(&yaml);
    (path, profile)
}

fn scenarios() -> Vec<Scenario> {
    let (gb200_path, gb200) = load_profile("gb200");
    let (h100_path, h100) = load_profile("h100");
    let mut rows: Vec<Scenario> = [
        ("worker", 0),
        ("worker2", 0),
        ("worker3", 1),
        ("worker4", 1),
    ]
    .into_iter()
    .map(|(suffix, clique)| Scenario {
        label: format!("gb200 on {suffix}"),
        profile_path: gb200_path.clone(),
        profile: gb200.clone(),
        node: format!("{CLUSTER}-{suffix}"),
        expected: Fabric::Identity {
            uuid: DEMO_UUID.to_owned(),
            clique,
        },
    })
    .collect();
    let defaults = gb200.devices()[0]
        .fabric
        .expect("the gb200 profile has a fabric block");
    rows.push(Scenario {
        label: "gb200 on a node absent from the topology".to_owned(),
        profile_path: gb200_path,
        profile: gb200,
        node: format!("{CLUSTER}-control-plane"),
        expected: Fabric::Identity {
            uuid: defaults.cluster_uuid.to_string(),
            clique: defaults.clique_id,
        },
    });
    rows.push(Scenario {
        label: "h100 on worker".to_owned(),
        profile_path: h100_path,
        profile: h100,
        node: format!("{CLUSTER}-worker"),
        expected: Fabric::NotSupported,
    });
    rows.extend(every_other_profile());
    rows
}

/// Every other shipped profile, on a node absent from the topology: its own fabric defaults, or
/// NOT_SUPPORTED where it has no fabric block.
fn every_other_profile() -> Vec<Scenario> {
    let dir = repo_root().join("manifests/helm/nvml-mock/profiles");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()))
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            Some(name.strip_suffix(".yaml")?.to_owned())
        })
        .filter(|name| name != "gb200" && name != "h100")
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let (profile_path, profile) = load_profile(&name);
            let expected = match profile.devices()[0].fabric {
                Some(fabric) => Fabric::Identity {
                    uuid: fabric.cluster_uuid.to_string(),
                    clique: fabric.clique_id,
                },
                None => Fabric::NotSupported,
            };
            Scenario {
                label: format!("{name} on a node absent from the topology"),
                profile_path,
                profile,
                node: format!("{CLUSTER}-control-plane"),
                expected,
            }
        })
        .collect()
}

/// A client process with exactly the mock's environment (nothing inherited that could change it).
fn client_command(program: &Path, lib_dir: &Path, scenario: &Scenario) -> Command {
    let mut command = Command::new(program);
    command
        .env("LD_LIBRARY_PATH", lib_dir)
        .env("MOCK_NVML_CONFIG", &scenario.profile_path)
        .env("MOCK_TOPOLOGY_CONFIG", demo_topology())
        .env("NODE_NAME", &scenario.node)
        .env("MOCK_NVML_STRICT", "1");
    command
}

fn run_json(mut command: Command, what: &str) -> Value {
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("cannot run {what}: {err}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stderr}",
        output.status
    );
    assert!(
        stderr.trim().is_empty(),
        "{what} printed to stderr:\n{stderr}"
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
        panic!(
            "{what} printed no JSON ({err}):\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

// ---------------------------------------------------------------- the comparison

fn architecture(architecture: Architecture) -> i64 {
    match architecture {
        Architecture::Turing => 6,
        Architecture::Ampere => 7,
        Architecture::Ada => 8,
        Architecture::Hopper => 9,
        Architecture::Blackwell => 10,
        other => panic!("add the NVML number of {other:?} to this test"),
    }
}

fn int(value: &Value, field: &str) -> i64 {
    value[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} is not an integer in {value}"))
}

fn uint(value: &Value, field: &str) -> u64 {
    value[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} is not an unsigned integer in {value}"))
}

fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} is not a string in {value}"))
}

/// Checks one client's report (the JSON shape both client programs print) against the profile.
fn check_report(report: &Value, scenario: &Scenario) {
    let what = format!("{} via {}", scenario.label, text(report, "client"));
    let system = scenario.profile.system();
    assert_eq!(
        text(report, "driver_version"),
        system.driver_version,
        "{what}"
    );
    assert_eq!(text(report, "nvml_version"), system.nvml_version, "{what}");
    assert_eq!(
        int(report, "cuda_driver_version"),
        i64::from(system.cuda_driver_version),
        "{what}"
    );
    let devices = scenario.profile.devices();
    assert_eq!(uint(report, "count") as usize, devices.len(), "{what}");
    let reported = report["devices"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no devices array"));
    assert_eq!(reported.len(), devices.len(), "{what}");
    for (position, (got, device)) in reported.iter().zip(&devices).enumerate() {
        let what = format!("{what}, GPU {position}");
        check_device(got, device, position, &what);
        check_fabric(got, device, &scenario.expected, &what);
    }
}

fn check_device(got: &Value, device: &Device, position: usize, what: &str) {
    assert_eq!(uint(got, "index"), u64::from(device.index), "{what}");
    assert_eq!(text(got, "uuid"), device.uuid, "{what}");
    assert_eq!(text(got, "name"), device.name, "{what}");
    assert_eq!(
        Some(text(got, "serial")),
        device.serial.as_deref(),
        "{what}"
    );
    assert_eq!(
        uint(got, "minor_number"),
        u64::from(device.minor_number),
        "{what}"
    );
    assert_eq!(uint(got, "board_id"), u64::from(device.board_id), "{what}");
    assert_eq!(
        uint(got, "module_id"),
        u64::from(device.module_id),
        "{what}"
    );
    assert_eq!(
        int(got, "architecture"),
        architecture(device.architecture),
        "{what}"
    );
    assert_eq!(
        int(got, "brand"),
        14,
        "{what}: both profiles are brand nvidia (NVML_BRAND_NVIDIA = 14)"
    );
    let capability = &got["compute_capability"];
    assert_eq!(
        capability[0].as_u64(),
        Some(u64::from(device.compute_capability.major)),
        "{what}"
    );
    assert_eq!(
        capability[1].as_u64(),
        Some(u64::from(device.compute_capability.minor)),
        "{what}"
    );
    assert_eq!(
        uint(got, "by_uuid_index") as usize,
        position,
        "{what}: HandleByUUID"
    );
    assert_eq!(
        uint(got, "by_pci_index") as usize,
        position,
        "{what}: HandleByPciBusId"
    );

    let pci = &got["pci"];
    let bus = device.pci_bus_id;
    let bus_id = format!(
        "{:08X}:{:02X}:{:02X}.{:X}",
        bus.domain, bus.bus, bus.device, bus.function
    );
    let legacy = format!(
        "{:04X}:{:02X}:{:02X}.{:X}",
        bus.domain, bus.bus, bus.device, bus.function
    );
    assert_eq!(text(pci, "bus_id"), bus_id, "{what}");
    assert_eq!(text(pci, "bus_id_legacy"), legacy, "{what}");
    assert_eq!(uint(pci, "domain"), u64::from(bus.domain), "{what}");
    assert_eq!(uint(pci, "bus"), u64::from(bus.bus), "{what}");
    assert_eq!(uint(pci, "device"), u64::from(bus.device), "{what}");
    assert_eq!(
        uint(pci, "pci_device_id"),
        u64::from(device.pci.device_id),
        "{what}"
    );
    assert_eq!(
        uint(pci, "pci_subsystem_id"),
        u64::from(device.pci.subsystem_id),
        "{what}"
    );

    let memory = device.memory;
    let v1 = &got["memory"];
    assert_eq!(uint(v1, "total"), memory.total, "{what}");
    assert_eq!(uint(v1, "free"), memory.free(), "{what}");
    assert_eq!(
        uint(v1, "used"),
        memory.used + memory.reserved,
        "{what}: v1 counts reserved as used"
    );
    let v2 = &got["memory_v2"];
    assert_eq!(uint(v2, "total"), memory.total, "{what}");
    assert_eq!(uint(v2, "reserved"), memory.reserved, "{what}");
    assert_eq!(uint(v2, "free"), memory.free(), "{what}");
    assert_eq!(uint(v2, "used"), memory.used, "{what}");

    assert_eq!(
        uint(got, "temperature_c"),
        u64::from(device.temperature_c),
        "{what}"
    );
    assert_eq!(
        uint(got, "power_usage_mw"),
        u64::from(device.power_usage_mw),
        "{what}"
    );
    assert_eq!(
        uint(got, "max_sm_clock"),
        u64::from(device.clocks.max_sm),
        "{what}"
    );
    let link0 = if device.nvlink.links == 0 {
        -NVML_ERROR_NOT_SUPPORTED
    } else {
        i64::from(device.nvlink.active > 0)
    };
    assert_eq!(int(got, "nvlink0_active"), link0, "{what}: link 0");
    assert_eq!(
        got["pcie"][0].as_u64(),
        Some(u64::from(device.pcie.r#gen)),
        "{what}"
    );
    assert_eq!(
        got["pcie"][1].as_u64(),
        Some(u64::from(device.pcie.width)),
        "{what}"
    );
}

fn check_fabric(got: &Value, device: &Device, expected: &Fabric, what: &str) {
    for version in ["fabric_v1", "fabric_v2", "fabric_v3"] {
        let fabric = &got[version];
        let what = format!("{what}, {version}");
        match expected {
            Fabric::NotSupported => assert_eq!(
                int(fabric, "ret"),
                NVML_ERROR_NOT_SUPPORTED,
                "{what}: {fabric}"
            ),
            Fabric::Identity { uuid, clique } => {
                assert_eq!(int(fabric, "ret"), 0, "{what}: {fabric}");
                assert_eq!(text(fabric, "cluster_uuid"), uuid, "{what}");
                assert_eq!(uint(fabric, "clique_id"), u64::from(*clique), "{what}");
                assert_eq!(
                    uint(fabric, "state"),
                    3,
                    "{what}: NVML_GPU_FABRIC_STATE_COMPLETED"
                );
                assert_eq!(uint(fabric, "status"), 0, "{what}: status SUCCESS");
                let profile_fabric = device.fabric.expect("an identity implies a fabric block");
                if version != "fabric_v1" {
                    assert_eq!(
                        uint(fabric, "health_mask"),
                        u64::from(profile_fabric.effective_health_mask()),
                        "{what}"
                    );
                }
                if version == "fabric_v3" {
                    assert_eq!(uint(fabric, "health_summary"), 1, "{what}: HEALTHY");
                }
            }
        }
    }
    let bad = &got["fabric_bad_version"];
    assert_eq!(
        int(bad, "ret"),
        NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
        "{what}: bad version tag"
    );
    assert_eq!(
        bad["untouched"],
        Value::Bool(true),
        "{what}: a bad version tag must write nothing"
    );
}

// ---------------------------------------------------------------- pynvml

fn peer_pin(key: &str) -> String {
    integration_tests::pin("peers", key)
}

/// The venv's python with the pinned nvidia-ml-py, created on first use.
fn pynvml_python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let version = peer_pin("nvidia_ml_py");
            let venv = repo_root()
                .join("target")
                .join(format!("nvml-venv-{version}"));
            let python = venv.join("bin/python");
            let ready = venv.join(".installed");
            if !ready.exists() {
                let system = require_program(
                    "python3",
                    "install Python 3 with the venv module (apt-get install python3-venv)",
                );
                checked(
                    Command::new(system)
                        .args(["-m", "venv"])
                        .arg(&venv)
                        .output(),
                    "python3 -m venv",
                );
                checked(
                    Command::new(&python)
                        .args([
                            "-m",
                            "pip",
                            "install",
                            "--quiet",
                            "--disable-pip-version-check",
                        ])
                        .arg(format!("nvidia-ml-py=={version}"))
                        .output(),
                    "pip install nvidia-ml-py (needs PyPI)",
                );
                std::fs::write(&ready, &version)
                    .unwrap_or_else(|err| panic!("cannot mark the venv ready: {err}"));
            }
            python
        })
        .clone()
}

fn pynvml_command(lib_dir: &Path, scenario: &Scenario) -> Command {
    let mut command = client_command(&pynvml_python(), lib_dir, scenario);
    command.arg(repo_root().join("tests/nvml/pynvml_client.py"));
    command
}

#[test]
fn pynvml_matrix() {
    mock_nvml_library();
    let lib_dir = mock_nvml_lib_dir();
    for scenario in scenarios() {
        let report = run_json(
            pynvml_command(lib_dir.path(), &scenario),
            &format!("pynvml, {}", scenario.label),
        );
        assert_eq!(text(&report, "client"), "pynvml");
        check_report(&report, &scenario);
    }
}

// ---------------------------------------------------------------- go-nvml

/// `go build` of the Go module in `tests/nvml/<dir>` into `target/nvml-go/<binary>`; `needs`
/// says what the build downloads, for the failure message.
fn go_build(dir: &str, binary: &str, needs: &str) -> PathBuf {
    let go = require_program(
        "go",
        "install Go 1.22+ (https://go.dev/doc/install or apt-get install golang)",
    );
    let output = repo_root().join("target/nvml-go").join(binary);
    checked(
        Command::new(go)
            .current_dir(repo_root().join("tests/nvml").join(dir))
            .env("CGO_ENABLED", "1")
            .env("GOFLAGS", "-mod=readonly")
            .args(["build", "-o"])
            .arg(&output)
            .arg(".")
            .output(),
        &format!("go build tests/nvml/{dir} (needs the Go module proxy for {needs})"),
    );
    output
}

/// The Go client, built once per test process into target/.
fn go_client() -> PathBuf {
    static CLIENT: OnceLock<PathBuf> = OnceLock::new();
    CLIENT
        .get_or_init(|| go_build("go", "nvml-client", "go-nvml"))
        .clone()
}

#[test]
fn go_nvml_is_the_pinned_version() {
    let go_mod = repo_root().join("tests/nvml/go/go.mod");
    let text = std::fs::read_to_string(&go_mod)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", go_mod.display()));
    let pin = peer_pin("go_nvml");
    assert!(
        text.lines()
            .any(|line| line.trim() == format!("require github.com/NVIDIA/go-nvml {pin}")),
        "{} must require github.com/NVIDIA/go-nvml {pin} (manifests/versions.toml [peers] go_nvml)",
        go_mod.display()
    );
}

#[test]
fn go_nvml_matrix() {
    mock_nvml_library();
    let lib_dir = mock_nvml_lib_dir();
    let client = go_client();
    for scenario in scenarios() {
        let report = run_json(
            client_command(&client, lib_dir.path(), &scenario),
            &format!("go-nvml, {}", scenario.label),
        );
        assert_eq!(text(&report, "client"), "go-nvml");
        check_report(&report, &scenario);
        check_topology(&report, &scenario.profile, &scenario.label);
    }
}

/// The go-gpuallocator probe (`tests/nvml/allocator`), built once.
fn allocator_client() -> PathBuf {
    static CLIENT: OnceLock<PathBuf> = OnceLock::new();
    CLIENT
        .get_or_init(|| go_build("allocator", "nvml-allocator", "go-gpuallocator"))
        .clone()
}

/// go-gpuallocator's name for the PCIe link of a topology level (its `GetP2PLink`).
fn p2p_link_name(level: TopologyLevel) -> &'static str {
    match level {
        TopologyLevel::Internal => "P2PLinkSameBoard",
        TopologyLevel::Single => "P2PLinkSingleSwitch",
        TopologyLevel::Multiple => "P2PLinkMultiSwitch",
        TopologyLevel::HostBridge => "P2PLinkHostBridge",
        TopologyLevel::Node => "P2PLinkSameCPU",
        TopologyLevel::System => "P2PLinkCrossCPU",
    }
}

/// The device plugin's preferred-allocation path, through NVIDIA's go-gpuallocator at the
/// versions device plugin v0.19.3 pins: `NewDevices` builds its link matrix without an error
/// (it fails on any common-ancestor or remote-PCI-info error), each pair carries exactly the
/// PCIe link of the profile's topology level and no NVLink entry (every link ends at an NVSwitch,
/// as on NVSwitch systems), and a 2-GPU request gets a pair at the nearest level there is.
#[test]
fn go_gpuallocator_builds_its_link_matrix() {
    mock_nvml_library();
    let lib_dir = mock_nvml_lib_dir();
    let client = allocator_client();
    for scenario in scenarios()
        .into_iter()
        .filter(|row| row.label.ends_with("topology") || row.label.starts_with("h100"))
    {
        let what = format!("go-gpuallocator, {}", scenario.label);
        let report = run_json(client_command(&client, lib_dir.path(), &scenario), &what);
        let pcie = scenario
            .profile
            .pcie_topology()
            .expect("shipped profiles have a topology");
        let count = scenario.profile.device_count();
        assert_eq!(uint(&report, "count"), count as u64, "{what}");
        for i in 0..count {
            for j in 0..count {
                let expected: Vec<&str> = match i == j {
                    true => vec![],
                    false => vec![p2p_link_name(pcie.level(i, j).expect("a visible pair"))],
                };
                assert_eq!(
                    report["links"][i][j],
                    Value::from(expected),
                    "{what}: {i} to {j}"
                );
            }
        }
        let pair = &report["allocated"]["2"];
        let (a, b) = (
            pair[0].as_u64().expect("an index") as usize,
            pair[1].as_u64().expect("an index") as usize,
        );
        let nearest = (0..count)
            .flat_map(|i| (0..count).filter(move |&j| j != i).map(move |j| (i, j)))
            .filter_map(|(i, j)| pcie.level(i, j))
            .min();
        assert_eq!(pcie.level(a, b), nearest, "{what}: allocated {pair}");
        assert_eq!(
            report["allocated"][count.to_string()]
                .as_array()
                .map(Vec::len),
            Some(count),
            "{what}"
        );
    }
}

/// What go-gpuallocator reads through go-nvml, against the profile: each pair's common ancestor,
/// the nearest GPUs, a CPU's GPUs, and every active link's far end, an NVSwitch that is no GPU
/// (so the allocator counts no direct GPU-to-GPU NVLinks, as on NVSwitch systems); a value or
/// minus its NVML return code.
fn check_topology(report: &Value, profile: &Profile, what: &str) {
    let not_supported = Value::from(-NVML_ERROR_NOT_SUPPORTED);
    let pcie = profile.pcie_topology();
    let devices = profile.devices();
    let gpu_bus_ids: Vec<PciBusId> = devices.iter().map(|device| device.pci_bus_id).collect();
    let as_list = |indexes: Vec<usize>| Value::from(indexes);
    assert_eq!(
        report["gpu_set_cpu0"],
        pcie.as_ref().map_or(not_supported.clone(), |pcie| as_list(
            pcie.gpus_of_cpu(0).expect("CPU 0 is listed")
        )),
        "{what}: GPU set of CPU 0"
    );
    for (i, device) in devices.iter().enumerate() {
        let got = &report["devices"][i]["topology"];
        let what = format!("{what}, GPU {i}");
        let levels: Vec<Value> = (0..devices.len())
            .map(|j| {
                pcie.as_ref().map_or(not_supported.clone(), |pcie| {
                    Value::from(pcie.level(i, j).expect("a visible pair").code())
                })
            })
            .collect();
        assert_eq!(got["levels"], Value::from(levels), "{what}: levels");
        let nearest = pcie.as_ref().map_or(not_supported.clone(), |pcie| {
            as_list(
                pcie.nearest(i, TopologyLevel::System)
                    .expect("a visible GPU"),
            )
        });
        assert_eq!(got["nearest_system"], nearest, "{what}: nearest");
        let remotes = got["nvlink_remotes"].as_array().expect("nvlink_remotes");
        assert_eq!(
            remotes.len(),
            device.nvlink.active as usize,
            "{what}: active links"
        );
        for (link, remote) in remotes.iter().enumerate() {
            let Some(switch) = device.nvlink.switch_of(link as u32) else {
                // No switch in the profile: the far end is not known.
                assert_eq!(
                    remote,
                    &Value::from(-NVML_ERROR_NOT_SUPPORTED),
                    "{what}: link {link}"
                );
                continue;
            };
            let bus_id = PciBusId::parse(remote.as_str().expect("a bus id")).expect("a PCI bus id");
            assert_eq!(
                bus_id,
                PciBusId::parse(&switch.pci_bus_id).expect("validated"),
                "{what}: link {link}"
            );
            assert!(
                !gpu_bus_ids.contains(&bus_id),
                "{what}: link {link} ends at a GPU"
            );
        }
        let switch0 = device.nvlink.switch_of(0).is_some();
        let expected_type = if switch0 {
            2
        } else {
            -NVML_ERROR_NOT_SUPPORTED
        };
        assert_eq!(
            int(got, "remote_type0"),
            expected_type,
            "{what}: remote device type"
        );
        // nvmlNvlinkVersion_t numbers the versions 1.0, 2.0, 2.2, 3.0, 3.1, 4.0, 5.0 as 1..=7.
        let version = match device.nvlink.version {
            Some(version) if device.nvlink.links > 0 => version as i64 + 1,
            _ => -NVML_ERROR_NOT_SUPPORTED,
        };
        assert_eq!(int(got, "version0"), version, "{what}: NVLink version");
    }
}

// ---------------------------------------------------------------- misconfiguration, seen by a real client

fn run_raw(mut command: Command) -> (bool, String, String) {
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("cannot run the client: {err}"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The one `[MOCK_NVML …]` line of a client's stderr; fails the test unless there is exactly one.
fn only_mock_line(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("[MOCK_NVML"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    lines[0]
}

#[test]
fn misconfiguration_is_one_clear_line() {
    mock_nvml_library();
    let lib_dir = mock_nvml_lib_dir();
    let client = go_client();
    let worker = scenarios().remove(0);
    let dir = tempfile::tempdir().expect("a temp dir");
    let bad_topology = dir.path().join("topology.yaml");
    std::fs::write(
        &bad_topology,
        "version: 1\ndomains:\n  - uuid: not-a-uuid\n",
    )
    .expect("write the topology");

    // No profile: init fails with DRIVER_NOT_LOADED and one error line.
    let mut command = client_command(&client, lib_dir.path(), &worker);
    command.env_remove("MOCK_NVML_CONFIG");
    let (ok, _, stderr) = run_raw(command);
    assert!(!ok, "init must fail without a profile");
    assert!(
        only_mock_line(&stderr)
            .starts_with("[MOCK_NVML ERROR] nvmlInit failed: MOCK_NVML_CONFIG is not set"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Driver Not Loaded (9)"),
        "go-nvml shows the library's error string: {stderr}"
    );

    // A YAML profile (not staged): UNKNOWN, one error line naming the file and the command
    // that stages it.
    let bad_profile = dir.path().join("profile.yaml");
    std::fs::write(&bad_profile, "version: 1\nname: broken\n").expect("write the profile");
    let mut command = client_command(&client, lib_dir.path(), &worker);
    command.env("MOCK_NVML_CONFIG", &bad_profile);
    let (ok, _, stderr) = run_raw(command);
    assert!(!ok);
    assert!(
        only_mock_line(&stderr).contains(&format!(
            "{} (MOCK_NVML_CONFIG): text (a YAML document?), not a staged file; the library \
             reads a staged profile: `nvml-mock-stager compile-profile <yaml> --out <file>` \
             writes one",
            bad_profile.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("Unknown Error (999)"), "{stderr}");

    // An invalid topology: one warning, the profile's defaults.
    let mut command = client_command(&client, lib_dir.path(), &worker);
    command
        .env("MOCK_TOPOLOGY_CONFIG", &bad_topology)
        .env_remove("MOCK_NVML_STRICT");
    let (ok, stdout, stderr) = run_raw(command);
    assert!(
        ok,
        "an invalid topology must not fail init without MOCK_NVML_STRICT: {stderr}"
    );
    assert!(
        only_mock_line(&stderr).starts_with(&format!(
            "[MOCK_NVML WARNING] invalid topology {}",
            bad_topology.display()
        )),
        "{stderr}"
    );
    let report: Value = serde_json::from_str(&stdout).expect("a JSON report");
    let defaults = worker.profile.devices()[0].fabric.expect("fabric block");
    let kept = Scenario {
        expected: Fabric::Identity {
            uuid: defaults.cluster_uuid.to_string(),
            clique: defaults.clique_id,
        },
        ..worker.clone()
    };
    check_report(&report, &kept);

    // The same under MOCK_NVML_STRICT: init fails.
    let mut command = client_command(&client, lib_dir.path(), &worker);
    command.env("MOCK_TOPOLOGY_CONFIG", &bad_topology);
    let (ok, _, stderr) = run_raw(command);
    assert!(
        !ok,
        "MOCK_NVML_STRICT must turn an invalid topology into an init failure"
    );
    assert!(
        only_mock_line(&stderr).starts_with("[MOCK_NVML ERROR] nvmlInit failed: invalid topology"),
        "{stderr}"
    );
}

// ---------------------------------------------------------------- nvml-wrapper

#[test]
fn nvml_wrapper_matrix() {
    let library = mock_nvml_library();
    // The library is loaded in this process, so its environment is this process's: every row
    // runs here, one after another, and this is the only test that sets these variables.
    for scenario in scenarios() {
        std::env::set_var("MOCK_NVML_CONFIG", &scenario.profile_path);
        std::env::set_var("MOCK_TOPOLOGY_CONFIG", demo_topology());
        std::env::set_var("NODE_NAME", &scenario.node);
        std::env::set_var("MOCK_NVML_STRICT", "1");
        let report = wrapper::report(&library);
        check_report(&report, &scenario);
    }
}

// ---------------------------------------------------------------- issue 22, misc exports

/// pynvml over the activity exports (`tests/nvml/pynvml_activity.py`) on gb200 with two
/// processes on GPU 3: every value is the profile's, or derived from it (affinity from
/// `pcie_topology`, GPM from the architecture and utilization), and the unmodelled ones answer
/// NVML's codes (NOT_FOUND for an unknown pid, NOT_SUPPORTED for an unanswered field, INVALID
/// ARGUMENT for a MIG parent of a GPU handle).
#[test]
fn pynvml_reads_processes_affinity_codecs_fields_and_gpm() {
    mock_nvml_library();
    let lib_dir = mock_nvml_lib_dir();
    let dir = tempfile::tempdir().expect("tempdir");
    let base = std::fs::read_to_string(profile_path("gb200")).expect("gb200 profile");
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&base).expect("gb200 is YAML");
    doc["devices"][3]["processes"] = serde_yaml::from_str(
        "[{pid: 4242, name: python3, kind: compute, used_memory: 1073741824, sm_util: 90, memory_util: 40},
          {pid: 77, name: Xorg, kind: graphics, used_memory: 16777216}]",
    )
    .expect("processes");
    let text = serde_yaml::to_string(&doc).expect("YAML");
    let yaml = dir.path().join("gb200-processes.yaml");
    std::fs::write(&yaml, &text).expect("write the profile");
    let path = staged_profile(&yaml);
    let profile = Profile::parse(&text).expect("the profile with processes parses");
    let gpu = profile.device(3).expect("GPU 3");
    let scenario = Scenario {
        label: "gb200 with processes".to_owned(),
        profile_path: path,
        profile: profile.clone(),
        node: format!("{CLUSTER}-worker"),
        expected: Fabric::NotSupported,
    };
    let mut command = client_command(&pynvml_python(), lib_dir.path(), &scenario);
    command.arg(repo_root().join("tests/nvml/pynvml_activity.py"));
    let got = run_json(command, "pynvml, activity exports");
    let numa = profile
        .pcie_topology()
        .and_then(|t| t.numa_node(3))
        .expect("numa node");
    assert_eq!(int(&got, "numa_node"), i64::from(numa));
    // The CPUs of GPU 3's NUMA node as three 64-bit words.
    let mut words = [0u64; 3];
    let topology = profile.pcie_topology().expect("pcie_topology");
    for &(first, last) in topology.cpus(3).expect("GPU 3's CPUs") {
        for cpu in (first..=last).filter(|cpu| *cpu < 192) {
            words[(cpu / 64) as usize] |= 1 << (cpu % 64);
        }
    }
    assert_eq!(got["cpu_affinity"], serde_json::json!(words));
    assert_eq!(got["memory_affinity"], serde_json::json!([1u64 << numa]));
    assert_eq!(
        int(&got, "p2p_nvlink"),
        0,
        "NVML_P2P_STATUS_OK over the NVLink fabric"
    );
    let processes = &gpu.processes;
    assert_eq!(
        got["compute"],
        serde_json::json!([[processes[0].pid, processes[0].used_memory]])
    );
    assert_eq!(
        got["graphics"],
        serde_json::json!([[processes[1].pid, processes[1].used_memory]])
    );
    assert_eq!(
        got["samples"],
        serde_json::json!([[4242, 90, 40, 0, 0], [77, 0, 0, 0, 0]])
    );
    assert_eq!(
        got["names"],
        serde_json::json!(["python3", "Xorg", {"error": 6}])
    );
    let codecs = gpu.codecs.expect("codecs");
    assert_eq!(
        got["encoder"],
        serde_json::json!([codecs.encoder, codecs.sampling_period_us])
    );
    assert_eq!(
        got["decoder"],
        serde_json::json!([codecs.decoder, codecs.sampling_period_us])
    );
    assert_eq!(
        uint(&got, "encoder_capacity"),
        u64::from(codecs.encoder_capacity)
    );
    assert_eq!(got["encoder_stats"], serde_json::json!([0, 0, 0]));
    assert_eq!(uint(&got, "encoder_sessions"), 0);
    let pcie = gpu.pcie_counters.expect("pcie counters");
    assert_eq!(
        got["pcie"],
        serde_json::json!([pcie.tx_kbps, pcie.replays, gpu.pcie.max_gen])
    );
    let traffic = got["nvlink_traffic"].as_array().expect("rx, tx");
    assert!(
        traffic[0] == traffic[1] && traffic[0].as_u64() > Some(0),
        "grows with uptime: {traffic:?}"
    );
    assert_eq!(uint(&got, "nvlink_errors"), 0, "healthy links");
    let fields = got["fields"].as_array().expect("field values");
    assert_eq!(
        fields[..4],
        serde_json::json!([
            [165, 0, 1],
            [91, 0, gpu.nvlink.links],
            [94, 0, pcie.replays],
            [186, 0, gpu.power_usage_mw]
        ])
        .as_array()
        .expect("four")[..]
    );
    // The energy counter (field 83) answers as its getter does: its start plus the draw since the
    // first query, so only its success and its being a count are fixed.
    assert_eq!(fields[4][0], 83, "{fields:?}");
    assert_eq!(fields[4][1], 0, "energy answered: {fields:?}");
    assert!(fields[4][2].is_u64(), "energy in mJ: {fields:?}");
    assert_eq!(uint(&got, "gpm_supported"), 1, "Blackwell");
    assert_eq!(
        got["gpm"],
        serde_json::json!([
            [0, f64::from(gpu.utilization.gpu)],
            [0, f64::from(gpu.utilization.memory)],
            [NVML_ERROR_NOT_SUPPORTED, 0.0]
        ])
    );
    assert_eq!(uint(&got, "c2c"), 1);
    assert_eq!(got["mig_parent"], serde_json::json!({"error": 2}));
}

// ---------------------------------------------------------------- per-container visibility

/// A container given 2 of the 4 GPUs (host GPUs 1 and 3) has only their `/dev/nvidia<minor>`:
/// pynvml and go-nvml list exactly those two, as indices 0 and 1, each with its own UUID, serial,
/// bus id, minor number and fabric identity. A fake dev root (`MOCK_NVML_DEV_ROOT`) stands in for
/// the container's `/dev`; all four nodes, or none, list all four.
#[test]
fn clients_see_only_the_gpus_whose_nodes_they_can_see() {
    mock_nvml_library();
    let lib_dir = mock_nvml_lib_dir();
    let scenario = scenarios()
        .into_iter()
        .find(|scenario| scenario.label == "gb200 on worker3")
        .expect("the gb200 worker3 row");
    let devices = scenario.profile.devices();
    assert_eq!(devices.len(), 4, "the test assumes a 4-GPU tray");
    for client in ["pynvml", "go-nvml"] {
        for present in [&[1, 3][..], &[0, 1, 2, 3], &[]] {
            let dev = tempfile::tempdir().expect("temp dir");
            for &position in present {
                let minor = devices[position].minor_number;
                std::fs::write(dev.path().join(format!("nvidia{minor}")), "").expect("node");
            }
            std::fs::write(dev.path().join("nvidiactl"), "").expect("nvidiactl");
            let mut command = match client {
                "pynvml" => pynvml_command(lib_dir.path(), &scenario),
                _ => client_command(&go_client(), lib_dir.path(), &scenario),
            };
            command.env("MOCK_NVML_DEV_ROOT", dev.path());
            let what = format!("{client} seeing nodes {present:?}");
            let report = run_json(command, &what);
            let visible: Vec<Device> = match present.len() {
                2 => present
                    .iter()
                    .enumerate()
                    .map(|(index, &position)| Device {
                        index: index as u32,
                        ..devices[position].clone()
                    })
                    .collect(),
                _ => devices.clone(),
            };
            assert_eq!(uint(&report, "count") as usize, visible.len(), "{what}");
            let reported = report["devices"].as_array().expect("devices");
            assert_eq!(reported.len(), visible.len(), "{what}");
            for (position, (got, device)) in reported.iter().zip(&visible).enumerate() {
                let what = format!("{what}, GPU {position}");
                check_device(got, device, position, &what);
                check_fabric(got, device, &scenario.expected, &what);
            }
        }
    }
}
