//! NVML's event API on the mock library through go-nvml, as NVIDIA's device plugin drives it
//! (`tests/nvml/go/events`: an event set, every GPU's supported types, registration for Xid
//! critical errors and ECC errors (the plugin's mask) and MIG config changes, masked by the
//! supported types, then `nvmlEventSetWait_v2`), with faults injected through the control file
//! (`MOCK_NVML_XID_FILE`, format `node_layout::xid`) and a MIG partition written to the state
//! file (`MOCK_NVML_MIG_STATE`) while the client's wait blocks.
//!
//! Asserted: gb200 (ECC on, MIG-capable) supports Xid, both ECC types and MIG config changes on
//! every GPU; a 1000 ms wait with nothing injected blocks about 1000 ms and answers TIMEOUT; a
//! double-bit ECC error on GPU 2 written 200 ms into a wait arrives as type 2, data 0, on GPU
//! 2; a GPU instance created on GPU 0 arrives as a MIG config change (0x100) on GPU 0; Xid 79 on
//! GPU 1, written 200 ms into a 5000 ms wait, is delivered once, with GPU 1's handle (same uuid,
//! same handle as `nvmlDeviceGetHandleByIndex(1)`), type Xid (8), data 79 and both instance ids
//! 0xFFFFFFFF; the next wait answers GPU_IS_LOST at once; the one after times out again; the
//! whole run uses little CPU (the waits sleep, they do not spin).
//!
//! Prerequisites fail loudly: `cargo build -p mock-nvml` first; go (go-nvml from the module
//! proxy or the module cache).

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, SystemTime},
};

use integration_tests::{
    checked, mock_nvml_lib_dir, mock_nvml_library, repo_root, require_program, staged_profile,
};
use node_layout::xid;
use nvml_profile::Profile;
use serde_json::Value;

const NVML_SUCCESS: i64 = 0;
const NVML_ERROR_TIMEOUT: i64 = 10;
const NVML_ERROR_GPU_IS_LOST: i64 = 15;
const XID_CRITICAL_ERROR: u64 = 8;
const DOUBLE_BIT_ECC_ERROR: u64 = 2;
const MIG_CONFIG_CHANGE: u64 = 0x100;

/// The Go client, built into target/.
fn events_client() -> PathBuf {
    let go = require_program(
        "go",
        "install Go 1.22+ (https://go.dev/doc/install or apt-get install golang)",
    );
    let binary = repo_root().join("target/nvml-go/nvml-events");
    checked(
        Command::new(go)
            .current_dir(repo_root().join("tests/nvml/go"))
            .env("CGO_ENABLED", "1")
            .env("GOFLAGS", "-mod=readonly")
            .args(["build", "-o"])
            .arg(&binary)
            .arg("./events")
            .output(),
        "go build tests/nvml/go/events (needs the Go module proxy for go-nvml)",
    );
    binary
}

/// The staged gb200 profile the library reads, and the parsed profile.
fn gb200() -> (PathBuf, Profile) {
    let path = repo_root().join("manifests/helm/nvml-mock/profiles/gb200.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let profile = Profile::parse(&text).unwrap_or_else(|err| panic!("gb200: {err}"));
    (staged_profile(&path), profile)
}

/// Writes the control file as the stager does: the new text to a temporary file, then rename.
fn inject(path: &Path, gpu: u32, fault: xid::Fault) {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64);
    replace(path, &xid::format(&xid::append(&[], gpu, fault, now)));
}

/// One GPU instance (profile 0, all 8 slices) on host GPU `gpu`, as a MIG state file's text.
fn one_instance(gpu: u32) -> String {
    use node_layout::mig_state::{GpuInstance, MigState, Mode, Placement};
    let mut state = MigState::default();
    state
        .gpu_mut(gpu, (Mode::Enabled, Mode::Enabled))
        .instances
        .push(GpuInstance {
            id: 1,
            profile_id: 0,
            placement: Placement { start: 0, size: 8 },
            compute: Vec::new(),
        });
    node_layout::mig_state::format(&state)
}

/// Replaces the file at `path` with `text`: a temporary file, then rename.
fn replace(path: &Path, text: &str) {
    let temp = path.with_extension("tmp");
    std::fs::write(&temp, text).expect("write the injection");
    std::fs::rename(&temp, path).expect("rename the injection into place");
}

/// Runs `act` 200 ms from now, while the client's wait blocks.
fn delayed(act: impl FnOnce()) {
    std::thread::sleep(Duration::from_millis(200));
    act();
}

fn int(value: &Value, field: &str) -> i64 {
    value[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} in {value}"))
}

fn millis(value: &Value) -> Duration {
    let ms = value["ms"]
        .as_f64()
        .unwrap_or_else(|| panic!("ms in {value}"));
    Duration::from_secs_f64(ms / 1000.0)
}

#[test]
fn go_nvml_waits_block_time_out_and_deliver_an_injected_xid_once() {
    mock_nvml_library();
    let lib_dir = mock_nvml_lib_dir();
    let client = events_client();
    let (profile_path, profile) = gb200();
    let gpu1_uuid = profile.devices()[1].uuid.clone();
    let dir = tempfile::tempdir().expect("a temp dir");
    let xid_file = dir.path().join("xid-injections");
    let mig_file = dir.path().join("mig-state");

    let mut child = Command::new(&client)
        .args(["1000", "5000", "5000", "5000", "5000", "1000"])
        .env("LD_LIBRARY_PATH", lib_dir.path())
        .env("MOCK_NVML_CONFIG", &profile_path)
        .env(node_layout::env::MOCK_NVML_XID_FILE, &xid_file)
        .env(node_layout::env::MOCK_NVML_MIG_STATE, &mig_file)
        .env_remove("MOCK_TOPOLOGY_CONFIG")
        .env_remove("NODE_NAME")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", client.display()));
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("a line from the client");
        let value: Value =
            serde_json::from_str(&line).unwrap_or_else(|err| panic!("{err}: {line}"));
        if value["step"] == "waiting" {
            let ecc = xid::Fault::Ecc(xid::Ecc::Double);
            match value["wait"].as_i64() {
                Some(1) => delayed(|| inject(&xid_file, 2, ecc)),
                Some(2) => delayed(|| replace(&mig_file, &one_instance(0))),
                Some(3) => delayed(|| inject(&xid_file, 1, xid::Fault::Xid(79))),
                _ => (),
            }
        }
        eprintln!("client: {line}");
        lines.push(value);
    }
    let status = child.wait().expect("the client's status");
    assert!(status.success(), "the client failed: {status}");

    let step = |name: &str, wait: Option<i64>| -> &Value {
        lines
            .iter()
            .find(|line| {
                line["step"] == name && wait.is_none_or(|wait| line["wait"].as_i64() == Some(wait))
            })
            .unwrap_or_else(|| panic!("no {name} {wait:?} in {lines:?}"))
    };
    let ready = step("ready", None);
    assert_eq!(ready["gpu1_uuid"], gpu1_uuid.as_str());
    let all = XID_CRITICAL_ERROR | DOUBLE_BIT_ECC_ERROR | 1 | MIG_CONFIG_CHANGE;
    assert_eq!(ready["supported"], serde_json::json!([all, all, all, all]));

    let quiet = step("waited", Some(0));
    assert_eq!(int(quiet, "ret"), NVML_ERROR_TIMEOUT, "{quiet}");
    let took = millis(quiet);
    assert!(
        took >= Duration::from_millis(1000) && took < Duration::from_millis(1300),
        "a 1000 ms wait took {took:?}"
    );

    let ecc = step("waited", Some(1));
    assert_eq!(int(ecc, "ret"), NVML_SUCCESS, "{ecc}");
    assert_eq!(
        (&ecc["event_type"], &ecc["event_data"], &ecc["index"]),
        (&DOUBLE_BIT_ECC_ERROR.into(), &0.into(), &2.into()),
        "{ecc}"
    );
    let mig = step("waited", Some(2));
    assert_eq!(int(mig, "ret"), NVML_SUCCESS, "{mig}");
    assert_eq!(
        (&mig["event_type"], &mig["index"]),
        (&MIG_CONFIG_CHANGE.into(), &0.into()),
        "{mig}"
    );

    let event = step("waited", Some(3));
    assert_eq!(int(event, "ret"), NVML_SUCCESS, "{event}");
    assert_eq!(event["event_data"], 79);
    assert_eq!(event["event_type"], XID_CRITICAL_ERROR);
    assert_eq!(event["uuid"], gpu1_uuid.as_str());
    assert_eq!(event["same_handle_as_gpu1"], true);
    assert_eq!(event["gpu_instance_id"], 0xFFFF_FFFFu64);
    assert_eq!(event["compute_instance_id"], 0xFFFF_FFFFu64);
    let took = millis(event);
    assert!(
        took >= Duration::from_millis(150) && took < Duration::from_millis(1000),
        "the injection arrived after {took:?}"
    );

    let lost = step("waited", Some(4));
    assert_eq!(int(lost, "ret"), NVML_ERROR_GPU_IS_LOST, "{lost}");
    assert!(millis(lost) < Duration::from_millis(500), "at once: {lost}");
    let again = step("waited", Some(5));
    assert_eq!(
        int(again, "ret"),
        NVML_ERROR_TIMEOUT,
        "delivered once: {again}"
    );
    assert!(millis(again) >= Duration::from_millis(1000), "{again}");

    let cpu = step("done", None)["cpu_ms"].as_f64().expect("cpu_ms");
    assert!(
        cpu < 300.0,
        "{cpu} ms of CPU over ~3 s of waits: a wait spins"
    );
}
