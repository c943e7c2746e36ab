//! check-fabric against the built mock `libnvidia-ml.so.1`: golden text and
//! JSON for the four demo workers, the rebind topology and a node outside the
//! topology, exit 2 on the non-fabric profile, exit 1 when no library is found.
//!
//! Real peers: the check-fabric binary dlopens the mock library through the
//! loader search (`LD_LIBRARY_PATH`), as in a workload container.
//! Goldens live in `tests/golden/check-fabric/`; refresh them with
//! `UPDATE_GOLDEN=1 cargo test -p integration-tests --test check_fabric`.
//! Besides the golden comparison every case checks the identity it expects,
//! so a wrongly refreshed golden still fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use integration_tests::{artifact, mock_nvml_lib_dir, repo_root, staged_shipped_profile};

const CLUSTER: &str = "nvml-mock-compute-domain";
const DEMO_UUID: &str = "00000000-0000-0000-0000-0000000000ab";
const REBIND_UUID: &str = "00000000-0000-0000-0000-0000000000ff";
/// The gb200 profile's own fabric default, for nodes outside the topology.
const PROFILE_UUID: &str = "00000000-0000-0000-0000-000000000001";

struct Fixture {
    lib_dir: tempfile::TempDir,
    scratch: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            lib_dir: mock_nvml_lib_dir(),
            scratch: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn topology_file(&self, name: &str, topology: &topology::Topology) -> PathBuf {
        let path = self.scratch.path().join(name);
        // Staged, as the stager writes it (the library reads no YAML).
        std::fs::write(&path, topology::staged::encode(topology)).expect("write topology");
        path
    }

    /// Runs check-fabric with only the environment a workload container gets.
    fn run(
        &self,
        profile: &str,
        topology: Option<&Path>,
        node: Option<&str>,
        json: bool,
    ) -> Output {
        let mut command = Command::new(artifact("check-fabric", "check-fabric"));
        command
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LD_LIBRARY_PATH", self.lib_dir.path())
            .env("MOCK_NVML_CONFIG", profile_path(profile));
        if let Some(topology) = topology {
            command.env("MOCK_TOPOLOGY_CONFIG", topology);
        }
        if let Some(node) = node {
            command.env("NODE_NAME", node);
        }
        if json {
            command.arg("--json");
        }
        command.output().expect("run check-fabric")
    }
}

/// The shipped profile `profile`, staged.
fn profile_path(profile: &str) -> PathBuf {
    staged_shipped_profile(profile)
}

fn workers() -> Vec<String> {
    topology::kind_workers(CLUSTER, 4)
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Compares with `tests/golden/check-fabric/<name>`, or rewrites it under `UPDATE_GOLDEN=1`.
fn assert_golden(name: &str, actual: &str) {
    let path = repo_root().join("tests/golden/check-fabric").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual)
            .unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|err| {
        panic!(
            "golden {} is unreadable ({err}): create it with `UPDATE_GOLDEN=1 cargo test -p integration-tests --test check_fabric`",
            path.display()
        )
    });
    if expected == actual {
        return;
    }
    let mut diff = String::new();
    let (want, got): (Vec<&str>, Vec<&str>) =
        (expected.lines().collect(), actual.lines().collect());
    for line in 0..want.len().max(got.len()) {
        match (want.get(line), got.get(line)) {
            (Some(w), Some(g)) if w == g => diff.push_str(&format!("   {w}\n")),
            (w, g) => {
                if let Some(w) = w {
                    diff.push_str(&format!(" - {w}\n"));
                }
                if let Some(g) = g {
                    diff.push_str(&format!(" + {g}\n"));
                }
            }
        }
    }
    panic!(
        "check-fabric output differs from {} (- golden, + actual); if the change is intended, refresh with UPDATE_GOLDEN=1\n{diff}",
        path.display()
    );
}

/// Every GPU block of the text output, as (clusterUuid, cliqueId, state).
fn text_identities(text: &str) -> Vec<(String, String, String)> {
    let mut lines = text.lines();
    let first = lines.next().expect("a count line");
    let count: usize = first
        .strip_prefix("Discovered ")
        .and_then(|rest| rest.strip_suffix(" GPU(s)"))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("malformed count line {first:?}"));
    let rest: Vec<&str> = lines.collect();
    assert_eq!(rest.len(), count * 4, "4 lines per GPU:\n{text}");
    rest.chunks(4)
        .enumerate()
        .map(|(idx, block)| {
            assert!(
                block[0].starts_with(&format!("GPU {idx} (GPU-")),
                "{}",
                block[0]
            );
            let field = |line: &str, label: &str| {
                line.strip_prefix(&format!("  {label:<12}: "))
                    .unwrap_or_else(|| panic!("expected {label} in {line:?}"))
                    .to_owned()
            };
            (
                field(block[1], "clusterUuid"),
                field(block[2], "cliqueId"),
                field(block[3], "state"),
            )
        })
        .collect()
}

fn check_node(
    fixture: &Fixture,
    topology: &Path,
    node: &str,
    golden: &str,
    uuid: &str,
    clique: u32,
) {
    let text = fixture.run("gb200", Some(topology), Some(node), false);
    assert_eq!(text.status.code(), Some(0), "{node}: {}", stderr(&text));
    assert!(text.stderr.is_empty(), "{node}: {}", stderr(&text));
    let text_out = stdout(&text);
    let identities = text_identities(&text_out);
    assert_eq!(identities.len(), 4, "gb200 has 4 GPUs");
    for identity in &identities {
        assert_eq!(
            identity,
            &(
                uuid.to_owned(),
                clique.to_string(),
                "completed (3)".to_owned()
            ),
            "{node}"
        );
    }
    assert_golden(&format!("{golden}.txt"), &text_out);

    let json = fixture.run("gb200", Some(topology), Some(node), true);
    assert_eq!(json.status.code(), Some(0), "{node}: {}", stderr(&json));
    let json_out = stdout(&json);
    let doc: serde_json::Value = serde_json::from_str(&json_out).expect("one JSON document");
    assert_eq!(doc["nodeName"], node);
    let gpus = doc["gpus"].as_array().expect("gpus array");
    assert_eq!(gpus.len(), 4);
    for (idx, gpu) in gpus.iter().enumerate() {
        assert_eq!(gpu["index"], idx);
        assert_eq!(gpu["clusterUuid"], uuid);
        assert_eq!(gpu["cliqueId"], clique);
        assert_eq!(gpu["state"], 3);
        assert_eq!(gpu["stateName"], "completed");
        let uuid_line = format!("GPU {idx} ({})", gpu["uuid"].as_str().expect("uuid string"));
        assert!(
            text_out.contains(&uuid_line),
            "text and JSON agree on {uuid_line}"
        );
    }
    assert_golden(&format!("{golden}.json"), &json_out);
}

#[test]
fn demo_workers_report_cliques_0_0_1_1() {
    let fixture = Fixture::new();
    let workers = workers();
    let topology = fixture.topology_file("demo.bin", &topology::demo(&workers));
    for (worker, clique) in workers.iter().zip([0, 0, 1, 1]) {
        let short = worker.trim_start_matches(&format!("{CLUSTER}-"));
        check_node(
            &fixture,
            &topology,
            worker,
            &format!("demo-{short}"),
            DEMO_UUID,
            clique,
        );
    }
}

#[test]
fn rebind_topology_moves_every_worker_to_clique_99() {
    let fixture = Fixture::new();
    let workers = workers();
    let topology = fixture.topology_file("rebind.bin", &topology::rebind(&workers));
    for worker in &workers {
        let short = worker.trim_start_matches(&format!("{CLUSTER}-"));
        check_node(
            &fixture,
            &topology,
            worker,
            &format!("rebind-{short}"),
            REBIND_UUID,
            99,
        );
    }
}

#[test]
fn node_outside_the_topology_keeps_the_profile_defaults() {
    let fixture = Fixture::new();
    let topology = fixture.topology_file("demo.bin", &topology::demo(&workers()));
    let node = format!("{CLUSTER}-control-plane");
    check_node(
        &fixture,
        &topology,
        &node,
        "outside-control-plane",
        PROFILE_UUID,
        0,
    );
}

#[test]
fn non_fabric_profile_exits_2_with_not_supported_lines() {
    let fixture = Fixture::new();
    let output = fixture.run("h100", None, Some(&format!("{CLUSTER}-worker")), false);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "Discovered 8 GPU(s)");
    assert_eq!(lines.len(), 9);
    for (idx, line) in lines[1..].iter().enumerate() {
        assert!(line.starts_with(&format!("GPU {idx} (GPU-")), "{line}");
        assert!(line.ends_with("): fabric NOT SUPPORTED"), "{line}");
    }
    assert_golden("h100.txt", &text);

    let json = fixture.run("h100", None, None, true);
    assert_eq!(json.status.code(), Some(2), "{}", stderr(&json));
    let json_out = stdout(&json);
    let doc: serde_json::Value = serde_json::from_str(&json_out).expect("one JSON document");
    assert_eq!(doc["nodeName"], serde_json::Value::Null);
    for gpu in doc["gpus"].as_array().expect("gpus array") {
        assert_eq!(gpu["stateName"], "not_supported");
        assert_eq!(gpu["clusterUuid"], serde_json::Value::Null);
        assert_eq!(gpu["cliqueId"], serde_json::Value::Null);
        assert_eq!(gpu["state"], serde_json::Value::Null);
    }
    assert_golden("h100.json", &json_out);
}

#[test]
fn missing_library_exits_1_naming_it() {
    // A host with NVIDIA's driver in the ld cache would load that instead.
    if let Ok(cache) = Command::new("/sbin/ldconfig").arg("-p").output() {
        assert!(
            !String::from_utf8_lossy(&cache.stdout).contains("libnvidia-ml.so.1"),
            "this host's ld cache has a libnvidia-ml.so.1, so the library cannot be missing: run this test where no NVIDIA driver is installed"
        );
    }
    let empty = tempfile::tempdir().expect("temp dir");
    for json in [false, true] {
        let mut command = Command::new(artifact("check-fabric", "check-fabric"));
        command.env_clear().env("LD_LIBRARY_PATH", empty.path());
        if json {
            command.arg("--json");
        }
        let output = command.output().expect("run check-fabric");
        assert_eq!(output.status.code(), Some(1), "json={json}");
        assert!(output.stdout.is_empty(), "json={json}: nothing on stdout");
        let message = stderr(&output);
        assert!(
            message.starts_with("nvmlInit: cannot load libnvidia-ml.so.1"),
            "{message}"
        );
        assert!(message.contains("LD_LIBRARY_PATH"), "{message}");
        assert_eq!(message.lines().count(), 1, "{message}");
    }
}

#[test]
fn missing_profile_fails_init_with_exit_1() {
    let fixture = Fixture::new();
    let mut command = Command::new(artifact("check-fabric", "check-fabric"));
    command
        .env_clear()
        .env("LD_LIBRARY_PATH", fixture.lib_dir.path())
        .env(
            "MOCK_NVML_CONFIG",
            fixture.scratch.path().join("absent.yaml"),
        );
    let output = command.output().expect("run check-fabric");
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let message = stderr(&output);
    assert!(
        message.lines().any(|line| line.starts_with("nvmlInit: ")),
        "{message}"
    );
}

/// Runs check-fabric with the profile or the topology at `/dev/zero`; before the bound on what
/// init reads, this never returned. Killed after 20 s so that a regression fails instead of
/// hanging the suite.
fn run_with_dev_zero(variable: &str) -> Output {
    let fixture = Fixture::new();
    let mut command = Command::new(artifact("check-fabric", "check-fabric"));
    command
        .env_clear()
        .env("LD_LIBRARY_PATH", fixture.lib_dir.path())
        .env("MOCK_NVML_CONFIG", profile_path("gb200"))
        .env("MOCK_NVML_STRICT", "1")
        .env("NODE_NAME", "w1")
        .env(variable, "/dev/zero")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("run check-fabric");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().expect("poll check-fabric").is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().expect("kill check-fabric");
            panic!("check-fabric with {variable}=/dev/zero still runs after 20 s: init hangs");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect check-fabric")
}

#[test]
fn a_profile_at_dev_zero_fails_init_with_one_line() {
    let output = run_with_dev_zero("MOCK_NVML_CONFIG");
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    let errors: Vec<&str> = message
        .lines()
        .filter(|line| line.starts_with("[MOCK_NVML ERROR]"))
        .collect();
    assert_eq!(
        errors,
        [
            "[MOCK_NVML ERROR] nvmlInit failed: cannot read the GPU profile /dev/zero \
          (MOCK_NVML_CONFIG): it is a character device, not a regular file: point the variable \
          at a staged file"
        ],
        "{message}"
    );
}

#[test]
fn a_strict_topology_at_dev_zero_fails_init_with_one_line() {
    let output = run_with_dev_zero("MOCK_TOPOLOGY_CONFIG");
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.lines().any(|line| line
            == "[MOCK_NVML ERROR] nvmlInit failed: cannot read the topology /dev/zero \
                (MOCK_TOPOLOGY_CONFIG): it is a character device, not a regular file: point the \
                variable at a staged file; keeping the profile's fabric identity \
                (MOCK_NVML_STRICT is set, so this fails init)"),
        "{message}"
    );
}

#[test]
fn closed_stdout_is_not_a_crash() {
    // `check-fabric | head -6`, as the upstream README suggests: the reader
    // goes away before check-fabric writes.
    let fixture = Fixture::new();
    let mut child = Command::new(artifact("check-fabric", "check-fabric"))
        .env_clear()
        .env("LD_LIBRARY_PATH", fixture.lib_dir.path())
        .env("MOCK_NVML_CONFIG", profile_path("gb200"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn check-fabric");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("wait for check-fabric");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(output.stderr.is_empty(), "{}", stderr(&output));
}
