//! The mock driver's `nvidia-smi -q` and `-q -x` against the built mock `libnvidia-ml.so.1`,
//! on the GB200 profile with the demo topology (a tray in clique 1) and on the H100 profile (no
//! fabric), then on every shipped profile: every value both outputs print is checked against the
//! profile and the topology, the XML parsed by roxmltree, the text by its `Label : value` lines.
//!
//! Real peers: the nvidia-smi binary dlopens the mock library through the loader search
//! (`LD_LIBRARY_PATH`), as in a workload container; roxmltree reads the XML as a consumer would.
//! Build first: `cargo build -p mock-nvml -p nvidia-smi` (and for the MIG test, which stages a
//! tree with the real stager as root, `-p node-stager -p check-fabric`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use integration_tests::{artifact, mock_nvml_lib_dir, repo_root, staged_shipped_profile};
use nvml_profile::{
    AddressingMode, Architecture, Brand, ComputeMode, Device, FabricState, HealthSummary, PciBusId,
    Profile,
};

const CLUSTER: &str = "nvml-mock-compute-domain";

/// A profile, an optional topology file and node, and the library to run against.
struct Run<'a> {
    lib_dir: &'a Path,
    profile: &'a str,
    topology: Option<&'a Path>,
    node: Option<&'a str>,
    /// `MOCK_NVML_DEV_ROOT`: the directory standing in for the process's `/dev`.
    dev_root: Option<&'a Path>,
}

impl Run<'_> {
    /// `nvidia-smi <args>` with only the environment a workload container gets.
    fn smi(&self, args: &[&str]) -> Output {
        let mut command = Command::new(artifact("nvidia-smi", "nvidia-smi"));
        command
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LD_LIBRARY_PATH", self.lib_dir)
            .env("MOCK_NVML_CONFIG", staged_shipped_profile(self.profile));
        if let Some(topology) = self.topology {
            command.env("MOCK_TOPOLOGY_CONFIG", topology);
        }
        if let Some(node) = self.node {
            command.env("NODE_NAME", node);
        }
        if let Some(dev_root) = self.dev_root {
            command.env("MOCK_NVML_DEV_ROOT", dev_root);
        }
        command.output().expect("run nvidia-smi")
    }

    /// stdout of a run that must succeed quietly.
    fn ok(&self, args: &[&str]) -> String {
        quiet_success(args, self.smi(args))
    }
}

/// stdout of a run of `nvidia-smi <args>` that must succeed quietly.
fn quiet_success(args: &[&str], output: Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "nvidia-smi {args:?}: {stderr}"
    );
    assert!(stderr.is_empty(), "nvidia-smi {args:?}: {stderr}");
    String::from_utf8(output.stdout).expect("UTF-8 stdout")
}

fn profile_path(profile: &str) -> PathBuf {
    repo_root()
        .join("manifests/helm/nvml-mock/profiles")
        .join(format!("{profile}.yaml"))
}

fn profile(name: &str) -> Profile {
    let text = std::fs::read_to_string(profile_path(name)).expect("read the profile");
    Profile::parse(&text).unwrap_or_else(|err| panic!("{name}: {err}"))
}

/// One value both outputs print: its XML path under `<gpu>`, its `-q` path under `GPU …`.
struct Expect {
    xml: &'static [&'static str],
    text: &'static [&'static str],
    value: String,
    /// PCI numbers: `-q` prints them `0x`-prefixed.
    hex: bool,
}

fn expect(xml: &'static [&'static str], text: &'static [&'static str], value: String) -> Expect {
    Expect {
        xml,
        text,
        value,
        hex: false,
    }
}

/// nvidia-smi's memory figure: whole MiB, rounded to the nearest.
fn mib(bytes: u64) -> String {
    let mib = 1024 * 1024;
    format!("{} MiB", (bytes + mib / 2) / mib)
}

fn brand(brand: Brand) -> &'static str {
    match brand {
        Brand::Nvidia => "NVIDIA",
        Brand::Tesla => "Tesla",
        other => panic!("add the printed name of {other:?}"),
    }
}

fn architecture(architecture: Architecture) -> &'static str {
    match architecture {
        Architecture::Blackwell => "Blackwell",
        Architecture::Hopper => "Hopper",
        Architecture::Ampere => "Ampere",
        Architecture::Ada => "Ada Lovelace",
        Architecture::Turing => "Turing",
        other => panic!("add the printed name of {other:?}"),
    }
}

/// What the profile (with the node's fabric identity overlaid) says each output prints.
fn expected(device: &Device) -> Vec<Expect> {
    let na = || "N/A".to_owned();
    let memory = device.memory;
    let hex = |xml, text, value| Expect {
        hex: true,
        ..expect(xml, text, value)
    };
    let enabled = |on: bool| if on { "Enabled" } else { "Disabled" }.to_owned();
    let addressing = match device.addressing_mode {
        None => na(),
        Some(AddressingMode::None) => "None".to_owned(),
        Some(AddressingMode::Hmm) => "HMM".to_owned(),
        Some(AddressingMode::Ats) => "ATS".to_owned(),
    };
    let mig = device.mig_mode.map_or((na(), na()), |mig| {
        (enabled(mig.current), enabled(mig.pending))
    });
    let ecc = device.ecc.map_or((na(), na()), |ecc| {
        (enabled(ecc.current), enabled(ecc.pending))
    });
    let compute = match device.compute_mode {
        ComputeMode::Default => "Default",
        ComputeMode::Prohibited => "Prohibited",
        ComputeMode::ExclusiveProcess => "Exclusive_Process",
    };
    let (pcie, clocks) = (device.pcie, device.clocks);
    let mhz = |mhz: u32| format!("{mhz} MHz");
    let (state, status, clique, uuid) = match &device.fabric {
        Some(fabric) => {
            let (state, status) = match fabric.effective_state() {
                FabricState::Completed => ("Completed", "Success"),
                FabricState::InProgress => ("In Progress", "N/A"),
                FabricState::NotStarted => ("Not Started", "N/A"),
                FabricState::NotSupported => ("Not Supported", "N/A"),
            };
            let clique = fabric.clique_id.to_string();
            (
                state.to_owned(),
                status.to_owned(),
                clique,
                fabric.cluster_uuid.to_string(),
            )
        }
        None => (na(), na(), na(), na()),
    };
    let summary = match device
        .fabric
        .map(|fabric| fabric.effective_health_summary())
    {
        Some(HealthSummary::Healthy) => "Healthy".to_owned(),
        Some(HealthSummary::Unhealthy) => "Unhealthy".to_owned(),
        Some(HealthSummary::LimitedCapacity) => "Limited Capacity".to_owned(),
        Some(HealthSummary::NotSupported) | None => na(),
    };
    vec![
        expect(&["product_name"], &["Product Name"], device.name.clone()),
        expect(
            &["product_brand"],
            &["Product Brand"],
            brand(device.brand).to_owned(),
        ),
        expect(
            &["product_architecture"],
            &["Product Architecture"],
            architecture(device.architecture).to_owned(),
        ),
        expect(
            &["persistence_mode"],
            &["Persistence Mode"],
            if device.persistence_mode {
                "Enabled"
            } else {
                "Disabled"
            }
            .to_owned(),
        ),
        expect(
            &["serial"],
            &["Serial Number"],
            device.serial.clone().unwrap_or_else(na),
        ),
        expect(&["uuid"], &["GPU UUID"], device.uuid.clone()),
        expect(
            &["minor_number"],
            &["Minor Number"],
            device.minor_number.to_string(),
        ),
        expect(
            &["board_id"],
            &["Board ID"],
            format!("{:#x}", device.board_id),
        ),
        hex(
            &["pci", "pci_bus"],
            &["PCI", "Bus"],
            format!("{:02X}", device.pci_bus_id.bus),
        ),
        hex(
            &["pci", "pci_device"],
            &["PCI", "Device"],
            format!("{:02X}", device.pci_bus_id.device),
        ),
        hex(
            &["pci", "pci_domain"],
            &["PCI", "Domain"],
            format!("{:04X}", device.pci_bus_id.domain),
        ),
        hex(
            &["pci", "pci_device_id"],
            &["PCI", "Device Id"],
            format!("{:08X}", device.pci.device_id),
        ),
        hex(
            &["pci", "pci_sub_system_id"],
            &["PCI", "Sub System Id"],
            format!("{:08X}", device.pci.subsystem_id),
        ),
        expect(
            &["fb_memory_usage", "total"],
            &["FB Memory Usage", "Total"],
            mib(memory.total),
        ),
        expect(
            &["fb_memory_usage", "reserved"],
            &["FB Memory Usage", "Reserved"],
            mib(memory.reserved),
        ),
        expect(
            &["fb_memory_usage", "used"],
            &["FB Memory Usage", "Used"],
            mib(memory.used),
        ),
        expect(
            &["fb_memory_usage", "free"],
            &["FB Memory Usage", "Free"],
            mib(memory.free()),
        ),
        expect(&["addressing_mode"], &["Addressing Mode"], addressing),
        expect(
            &["mig_mode", "current_mig"],
            &["MIG Mode", "Current"],
            mig.0,
        ),
        expect(
            &["mig_mode", "pending_mig"],
            &["MIG Mode", "Pending"],
            mig.1,
        ),
        expect(
            &["ecc_mode", "current_ecc"],
            &["ECC Mode", "Current"],
            ecc.0,
        ),
        expect(
            &["ecc_mode", "pending_ecc"],
            &["ECC Mode", "Pending"],
            ecc.1,
        ),
        expect(
            &["pci", "pci_gpu_link_info", "pcie_gen", "max_link_gen"],
            &["PCI", "GPU Link Info", "PCIe Generation", "Max"],
            pcie.max_gen.to_string(),
        ),
        expect(
            &["pci", "pci_gpu_link_info", "pcie_gen", "current_link_gen"],
            &["PCI", "GPU Link Info", "PCIe Generation", "Current"],
            pcie.r#gen.to_string(),
        ),
        expect(
            &["pci", "pci_gpu_link_info", "link_widths", "max_link_width"],
            &["PCI", "GPU Link Info", "Link Width", "Max"],
            format!("{}x", pcie.max_width),
        ),
        expect(
            &[
                "pci",
                "pci_gpu_link_info",
                "link_widths",
                "current_link_width",
            ],
            &["PCI", "GPU Link Info", "Link Width", "Current"],
            format!("{}x", pcie.width),
        ),
        expect(&["compute_mode"], &["Compute Mode"], compute.to_owned()),
        expect(
            &["utilization", "gpu_util"],
            &["Utilization", "GPU"],
            format!("{} %", device.utilization.gpu),
        ),
        expect(
            &["utilization", "memory_util"],
            &["Utilization", "Memory"],
            format!("{} %", device.utilization.memory),
        ),
        expect(
            &["temperature", "gpu_temp"],
            &["Temperature", "GPU Current Temp"],
            format!("{} C", device.temperature_c),
        ),
        expect(
            &["gpu_power_readings", "instant_power_draw"],
            &["GPU Power Readings", "Instantaneous Power Draw"],
            format!(
                "{}.{:02} W",
                device.power_usage_mw / 1000,
                device.power_usage_mw % 1000 / 10
            ),
        ),
        expect(
            &["clocks", "graphics_clock"],
            &["Clocks", "Graphics"],
            mhz(clocks.graphics),
        ),
        expect(&["clocks", "sm_clock"], &["Clocks", "SM"], mhz(clocks.sm)),
        expect(
            &["clocks", "mem_clock"],
            &["Clocks", "Memory"],
            mhz(clocks.mem),
        ),
        expect(
            &["clocks", "video_clock"],
            &["Clocks", "Video"],
            mhz(clocks.video),
        ),
        expect(
            &["max_clocks", "graphics_clock"],
            &["Max Clocks", "Graphics"],
            mhz(clocks.max_graphics),
        ),
        expect(
            &["max_clocks", "sm_clock"],
            &["Max Clocks", "SM"],
            mhz(clocks.max_sm),
        ),
        expect(
            &["max_clocks", "mem_clock"],
            &["Max Clocks", "Memory"],
            mhz(clocks.max_mem),
        ),
        expect(
            &["max_clocks", "video_clock"],
            &["Max Clocks", "Video"],
            mhz(clocks.max_video),
        ),
        expect(&["fabric", "state"], &["Fabric", "State"], state),
        expect(&["fabric", "status"], &["Fabric", "Status"], status),
        expect(&["fabric", "cliqueId"], &["Fabric", "CliqueId"], clique),
        expect(&["fabric", "clusterUuid"], &["Fabric", "ClusterUUID"], uuid),
        expect(
            &["fabric", "health", "summary"],
            &["Fabric", "Health", "Summary"],
            summary,
        ),
    ]
}

/// The text of the element at `path` below `node`.
fn xml_text<'a>(node: roxmltree::Node<'a, 'a>, path: &[&str]) -> &'a str {
    let mut at = node;
    for name in path {
        at = at
            .children()
            .find(|child| child.has_tag_name(*name))
            .unwrap_or_else(|| panic!("no <{name}> on the way to {path:?}"));
    }
    at.text().unwrap_or("")
}

/// Checks a `-q -x` document: the header, then each GPU (in index order) against `gpus`.
fn check_xml(xml: &str, profile: &Profile, gpus: &[Device]) {
    assert!(xml.starts_with(
        "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v13.dtd\">\n"
    ));
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(xml, options).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "nvidia_smi_log");
    assert_eq!(
        xml_text(root, &["driver_version"]),
        profile.driver_version()
    );
    assert_eq!(xml_text(root, &["cuda_version"]), cuda(profile));
    assert_eq!(
        xml_text(root, &["attached_gpus"]),
        profile.device_count().to_string()
    );
    assert!(!xml_text(root, &["timestamp"]).is_empty());
    let elements: Vec<_> = root
        .children()
        .filter(|child| child.has_tag_name("gpu"))
        .collect();
    assert_eq!(elements.len(), gpus.len());
    for (element, device) in elements.iter().zip(gpus) {
        let id = element.attribute("id").expect("<gpu id=…>");
        assert_eq!(PciBusId::parse(id), Ok(device.pci_bus_id), "gpu id {id}");
        let bus_id = xml_text(*element, &["pci", "pci_bus_id"]);
        assert_eq!(bus_id, id, "pci_bus_id and the id attribute agree");
        for want in expected(device) {
            assert_eq!(
                xml_text(*element, want.xml),
                want.value,
                "GPU {} {:?}",
                device.index,
                want.xml
            );
        }
    }
}

fn cuda(profile: &Profile) -> String {
    let version = profile.system().cuda_driver_version;
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

/// The `-q` text as its header values and, per GPU, (`GPU …` id, values by label path).
type TextGpu = (String, BTreeMap<Vec<String>, String>);

fn parse_text(text: &str) -> (BTreeMap<String, String>, Vec<TextGpu>) {
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(""));
    assert_eq!(lines.next(), Some("==============NVSMI LOG=============="));
    let mut header = BTreeMap::new();
    let mut gpus: Vec<TextGpu> = Vec::new();
    let mut sections: Vec<String> = Vec::new();
    for line in lines.filter(|line| !line.is_empty()) {
        let depth = (line.len() - line.trim_start().len()) / 4;
        if let Some(id) = line.strip_prefix("GPU ") {
            gpus.push((id.to_owned(), BTreeMap::new()));
            continue;
        }
        sections.truncate(depth.saturating_sub(1));
        match line.split_once(" : ") {
            Some((label, value)) => {
                assert_eq!(label.len() + 1, 55, "values line up at column 55: {line:?}");
                let mut path = sections.clone();
                path.push(label.trim().to_owned());
                match gpus.last_mut() {
                    Some((_, values)) if depth > 0 => values.insert(path, value.to_owned()),
                    _ => header.insert(label.trim().to_owned(), value.to_owned()),
                };
            }
            None => sections.push(line.trim().to_owned()),
        }
    }
    (header, gpus)
}

/// Checks a `-q` text against `gpus`, as [`check_xml`] does the XML.
fn check_text(text: &str, profile: &Profile, gpus: &[Device]) {
    let (header, blocks) = parse_text(text);
    assert_eq!(header["Driver Version"], profile.driver_version());
    assert_eq!(header["CUDA Version"], cuda(profile));
    assert_eq!(header["Attached GPUs"], profile.device_count().to_string());
    assert_eq!(blocks.len(), gpus.len());
    for ((id, values), device) in blocks.iter().zip(gpus) {
        assert_eq!(PciBusId::parse(id), Ok(device.pci_bus_id), "GPU {id}");
        let path = |labels: &[&str]| labels.iter().map(|it| (*it).to_owned()).collect::<Vec<_>>();
        assert_eq!(values[&path(&["PCI", "Bus Id"])], *id);
        for want in expected(device) {
            let value = if want.hex {
                format!("0x{}", want.value)
            } else {
                want.value
            };
            assert_eq!(
                values.get(&path(want.text)),
                Some(&value),
                "GPU {} {:?}",
                device.index,
                want.text
            );
        }
    }
}

#[test]
fn gb200_q_and_q_x_report_the_profile_and_the_trays_clique() {
    let lib_dir = mock_nvml_lib_dir();
    let scratch = tempfile::tempdir().expect("temp dir");
    let workers = topology::kind_workers(CLUSTER, 4);
    let demo = topology::demo(&workers);
    let topology_file = scratch.path().join("topology.bin");
    std::fs::write(&topology_file, topology::staged::encode(&demo)).expect("write the topology");
    // The third worker is in the demo's second clique.
    let node = &workers[2];
    let identity = demo.resolve(node).expect("the node is in the topology");
    assert_eq!(identity.clique_id, 1);
    let run = Run {
        lib_dir: lib_dir.path(),
        profile: "gb200",
        topology: Some(&topology_file),
        node: Some(node),
        dev_root: None,
    };
    assert_eq!(identity.cluster_uuid, topology::DEMO_UUID);
    let profile = profile("gb200");
    let gpus = profile
        .with_fabric_identity(identity.cluster_uuid, identity.clique_id)
        .devices();
    assert_eq!(gpus.len(), 4);
    check_xml(&run.ok(&["-q", "-x"]), &profile, &gpus);
    check_text(&run.ok(&["-q"]), &profile, &gpus);

    // -i: one GPU, the attached count unchanged.
    check_xml(&run.ok(&["-q", "-x", "-i", "2"]), &profile, &gpus[2..3]);
    check_text(&run.ok(&["-q", "-i", "2"]), &profile, &gpus[2..3]);
    let missing = run.smi(&["-q", "-i", "4"]);
    assert_eq!(
        missing.status.code(),
        Some(6),
        "NOT_FOUND for a GPU index past the count"
    );
    assert!(missing.stdout.is_empty());
}

#[test]
fn h100_q_and_q_x_say_na_for_the_fabric_it_does_not_support() {
    let lib_dir = mock_nvml_lib_dir();
    let run = Run {
        lib_dir: lib_dir.path(),
        profile: "h100",
        topology: None,
        node: None,
        dev_root: None,
    };
    let profile = profile("h100");
    assert!(!profile.has_fabric());
    let gpus = profile.devices();
    assert_eq!(gpus.len(), 8);
    check_xml(&run.ok(&["-q", "-x"]), &profile, &gpus);
    check_text(&run.ok(&["-q"]), &profile, &gpus);
}

#[test]
fn every_shipped_profile_reads_back_through_q_and_q_x() {
    let lib_dir = mock_nvml_lib_dir();
    let dir = repo_root().join("manifests/helm/nvml-mock/profiles");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("the profiles directory")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".yaml").map(str::to_owned)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 2, "{names:?}");
    for name in &names {
        let run = Run {
            lib_dir: lib_dir.path(),
            profile: name,
            topology: None,
            node: None,
            dev_root: None,
        };
        let profile = profile(name);
        check_xml(&run.ok(&["-q", "-x"]), &profile, &profile.devices());
        check_text(&run.ok(&["-q"]), &profile, &profile.devices());
    }
}

#[test]
fn x_without_q_is_a_usage_error() {
    let lib_dir = mock_nvml_lib_dir();
    let run = Run {
        lib_dir: lib_dir.path(),
        profile: "gb200",
        topology: None,
        node: None,
        dev_root: None,
    };
    let output = run.smi(&["-x"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("-x needs -q"));
}

/// A process that sees only `/dev/nvidia1` and `/dev/nvidia3` (a fake dev root,
/// `MOCK_NVML_DEV_ROOT`, standing in for a container's `/dev`): nvidia-smi lists those two GPUs
/// as 0 and 1, each with its own UUID, bus id and minor number, and counts two attached GPUs.
#[test]
fn a_process_seeing_two_gpu_nodes_lists_those_two_from_index_0() {
    let lib_dir = mock_nvml_lib_dir();
    let dev = tempfile::tempdir().expect("temp dir");
    let gpus = profile("gb200").devices();
    let visible = [&gpus[1], &gpus[3]];
    for gpu in visible {
        std::fs::write(dev.path().join(format!("nvidia{}", gpu.minor_number)), "").expect("node");
    }
    std::fs::write(dev.path().join("nvidiactl"), "").expect("nvidiactl");
    let run = Run {
        lib_dir: lib_dir.path(),
        profile: "gb200",
        topology: None,
        node: None,
        dev_root: Some(dev.path()),
    };
    let smi = |args: &[&str]| run.ok(args);
    let rows = smi(&[
        "--query-gpu=index,uuid,pci.bus_id,count",
        "--format=csv,noheader",
    ]);
    let rows: Vec<Vec<&str>> = rows
        .lines()
        .map(|line| line.split(", ").collect())
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (index, (row, gpu)) in rows.iter().zip(visible).enumerate() {
        assert_eq!(row[0], index.to_string(), "{row:?}");
        assert_eq!(row[1], gpu.uuid, "{row:?}");
        assert_eq!(PciBusId::parse(row[2]), Ok(gpu.pci_bus_id), "{row:?}");
        assert_eq!(row[3], "2", "{row:?}");
    }
    let xml = smi(&["-q", "-x"]);
    assert!(xml.contains("<attached_gpus>2</attached_gpus>"), "{xml}");
    let minors: Vec<&str> = xml
        .split("<minor_number>")
        .skip(1)
        .filter_map(|rest| rest.split('<').next())
        .collect();
    assert_eq!(minors, ["1", "3"], "each keeps its own minor number");
}

// ---------------------------------------------------------------- MIG (issue 38)

/// A driver tree staged by the real stager (`--once --no-label`) with the shipped h100
/// profile; its `nvidia-smi` runs with only `LD_LIBRARY_PATH` set, so the library finds its
/// profile and its MIG state file (`driver/config/mig-state`) from its own location, as in a
/// workload container.
struct StagedMig {
    dir: tempfile::TempDir,
}

impl StagedMig {
    fn stage() -> StagedMig {
        integration_tests::require_root(
            "the stager creates device nodes: run as root (`sudo -E cargo test -p integration-tests --test nvidia_smi`)",
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let output = Command::new(artifact("nvml-mock-stager", "node-stager"))
            .arg("--node-name=mig-node")
            .arg(format!("--overlay-dir={}", dir.path().display()))
            .args(
                integration_tests::stager_input_args(artifact)
                    .into_iter()
                    .filter(|arg| !arg.starts_with("--profile=")),
            )
            .arg(format!("--profile={}", profile_path("h100").display()))
            .args(["--no-label", "--once"])
            .output()
            .expect("run the stager");
        assert!(
            output.status.success(),
            "the stager: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        StagedMig { dir }
    }

    /// The staged `nvidia-smi <args>`, in its own process.
    fn smi(&self, args: &[&str]) -> Output {
        integration_tests::staged_nvidia_smi(&self.dir.path().join("driver"), args)
    }

    /// stdout of a run that must succeed quietly.
    fn ok(&self, args: &[&str]) -> String {
        quiet_success(args, self.smi(args))
    }

    /// A run that must fail with NVML code `code`, printing `stderr` (exactly).
    fn fails(&self, args: &[&str], code: i32, stderr: &str) -> String {
        let output = self.smi(args);
        assert_eq!(
            output.status.code(),
            Some(code),
            "nvidia-smi {args:?}: {output:?}"
        );
        assert_eq!(String::from_utf8_lossy(&output.stderr), stderr, "{args:?}");
        String::from_utf8(output.stdout).expect("UTF-8 stdout")
    }
}

/// h100 with MIG off: the library's NOT_SUPPORTED printed as nvidia-smi prints it; `-mig 1`,
/// `-cgi 19,19,14 -C`, the instances listed; `-L` lists the three MIG devices; a second
/// process (every run is one) sees the same partition, and an overlapping profile fails with
/// INSUFFICIENT_RESOURCES; `-dgi` with compute instances left is IN_USE; `-dci`, `-dgi` clear it.
#[test]
fn h100_mig_lifecycle_through_the_staged_nvidia_smi() {
    let staged = StagedMig::stage();
    let bus = staged.ok(&["--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", "0"]);
    let bus = bus.trim();
    // MIG off.
    staged.fails(
        &["mig", "-i", "0", "-cgi", "19"],
        3,
        "Unable to create a GPU instance on GPU  0 using profile 19: Not Supported\nFailed to create GPU instances: Not Supported\n",
    );
    let off = staged.fails(&["mig", "-lgi"], 6, "");
    assert_eq!(off, "No MIG-enabled devices found.\n");
    assert_eq!(
        staged.ok(&["-i", "0", "-mig", "1"]),
        format!("Enabled MIG Mode for GPU {bus}\nAll done.\n")
    );
    let lgip = staged.ok(&["mig", "-i", "0", "-lgip"]);
    assert!(
        lgip.contains(
            "|   0  MIG 1g.10gb       19     7/7        9.75       No     16     1     0   |"
        ),
        "{lgip}"
    );
    let created = staged.ok(&["mig", "-i", "0", "-cgi", "19,19,14", "-C"]);
    let lines: Vec<&str> = created.lines().collect();
    assert_eq!(lines.len(), 6, "{created}");
    for (line, profile) in lines.chunks(2).zip([
        "MIG 1g.10gb (ID 19)",
        "MIG 1g.10gb (ID 19)",
        "MIG 2g.20gb (ID 14)",
    ]) {
        assert!(
            line[0].starts_with("Successfully created GPU instance ID "),
            "{created}"
        );
        assert!(
            line[0].ends_with(&format!("on GPU  0 using profile {profile}")),
            "{created}"
        );
        assert!(
            line[1].starts_with("Successfully created compute instance ID  0 on GPU  0"),
            "{created}"
        );
    }
    check_partition(&staged);
    staged.fails(
        &["mig", "-i", "0", "-cgi", "0"],
        23,
        "Unable to create a GPU instance on GPU  0 using profile 0: Insufficient Resources\nFailed to create GPU instances: Insufficient Resources\n",
    );
    let in_use = "Unable to destroy GPU instance ID  1 from GPU  0: In use by another client\nFailed to destroy GPU instances: In use by another client\n";
    assert_eq!(staged.fails(&["mig", "-dgi"], 19, in_use), "");
    clear_partition(&staged);
}

/// What a second process sees after `-cgi 19,19,14 -C`: three GPU instances (two 1g, one 2g),
/// their compute instances, and `-L`'s three MIG devices with distinct `MIG-` UUIDs.
fn check_partition(staged: &StagedMig) {
    let lgi = staged.ok(&["mig", "-lgi"]);
    let rows: Vec<&str> = lgi
        .lines()
        .filter(|line| line.starts_with("|   0  MIG"))
        .collect();
    assert_eq!(rows.len(), 3, "{lgi}");
    assert!(rows[0].contains("MIG 1g.10gb         19"), "{lgi}");
    assert!(rows[2].contains("MIG 2g.20gb         14"), "{lgi}");
    let lci = staged.ok(&["mig", "-lci"]);
    assert_eq!(
        lci.lines()
            .filter(|line| line.starts_with("|   0 "))
            .count(),
        3,
        "{lci}"
    );
    let list = staged.ok(&["-L"]);
    let migs = integration_tests::mig_lines_of_gpu_0(&list);
    assert_eq!(migs.len(), 3, "{list}");
    let mut uuids = Vec::new();
    for (index, line) in migs.iter().enumerate() {
        let name = if index < 2 {
            "MIG 1g.10gb"
        } else {
            "MIG 2g.20gb"
        };
        let prefix = format!("  {name:<16}Device {index:>2}: (UUID: MIG-");
        assert!(line.starts_with(&prefix), "{line}");
        uuids.push(line.split("(UUID: ").nth(1).unwrap_or_default());
    }
    uuids.sort_unstable();
    uuids.dedup();
    assert_eq!(uuids.len(), 3, "{list}");
    assert!(
        list.lines()
            .nth(4)
            .is_some_and(|line| line.starts_with("GPU 1: ")),
        "{list}"
    );
}

/// `-dci` then `-dgi` clear GPU 0; `-L` lists no MIG device, `-lgi` finds none.
fn clear_partition(staged: &StagedMig) {
    let dci = staged.ok(&["mig", "-dci"]);
    assert_eq!(dci.lines().count(), 3, "{dci}");
    assert!(
        dci.lines().all(|line| line.starts_with(
            "Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID "
        )),
        "{dci}"
    );
    let dgi = staged.ok(&["mig", "-i", "0", "-dgi"]);
    assert_eq!(dgi.lines().count(), 3, "{dgi}");
    let none = staged.fails(&["mig", "-lgi"], 6, "");
    assert_eq!(none, "No GPU instances found: Not Found\n");
    assert!(integration_tests::mig_lines_of_gpu_0(&staged.ok(&["-L"])).is_empty());
    assert_eq!(staged.ok(&["-mig", "0"]).lines().last(), Some("All done."));
}
