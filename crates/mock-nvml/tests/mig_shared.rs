//! The MIG partition is the node's, not a process's: processes that load the built library share
//! it through the MIG state file. Each process here is this test binary run again as a child
//! ([`child`], selected by `MIG_SHARED_ROLE`), loading the library with `libloading`.

#![allow(clippy::unwrap_used)]

mod common;

use std::{
    ffi::c_void,
    path::Path,
    process::{Command, Output},
};

use node_layout::mig_state;

const ROLE: &str = "MIG_SHARED_ROLE";
const LIBRARY: &str = "MIG_SHARED_LIBRARY";

type Init = unsafe extern "C" fn() -> u32;
type HandleByIndex = unsafe extern "C" fn(u32, *mut *mut c_void) -> u32;
type SetMigMode = unsafe extern "C" fn(*mut c_void, u32, *mut u32) -> u32;
type CreateGi = unsafe extern "C" fn(*mut c_void, u32, *mut *mut c_void) -> u32;
type CreateCi = unsafe extern "C" fn(*mut c_void, u32, *mut *mut c_void) -> u32;

/// What a child does, named by `MIG_SHARED_ROLE`: `enable` turns MIG on for GPU 0; `fill`
/// makes 1g GPU instances (each with its compute instance) until the GPU is full and prints how
/// many it made; `die-holding-lock` takes the writers' lock, writes half a temporary file and
/// aborts (a writer that dies mid-change). Not a test of its own: the tests below run it.
#[test]
#[allow(unsafe_code)]
#[ignore = "a child process of the tests in this file, run by them with MIG_SHARED_ROLE set"]
fn child() {
    let role = std::env::var(ROLE).expect("run only as a child, with MIG_SHARED_ROLE");
    if role == "die-holding-lock" {
        let state = std::env::var_os(node_layout::env::MOCK_NVML_MIG_STATE).expect("the state");
        let state = Path::new(&state);
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(mig_state::lock_path(state))
            .unwrap();
        lock.lock().unwrap();
        std::fs::write(mig_state::temp_path(state, 1), "gi gpu=0 id=9").unwrap();
        std::process::abort();
    }
    let path = std::env::var_os(LIBRARY).expect("the library's path");
    // SAFETY: the mock library; its exports have the C signatures declared above (nvml.h).
    unsafe {
        let lib = libloading::Library::new(path).expect("load the library");
        let init: libloading::Symbol<'_, Init> = lib.get(b"nvmlInit_v2").unwrap();
        let by_index: libloading::Symbol<'_, HandleByIndex> =
            lib.get(b"nvmlDeviceGetHandleByIndex_v2").unwrap();
        assert_eq!(init(), 0);
        let mut device = std::ptr::null_mut();
        assert_eq!(by_index(0, &mut device), 0);
        match role.as_str() {
            "enable" => {
                let set: libloading::Symbol<'_, SetMigMode> =
                    lib.get(b"nvmlDeviceSetMigMode").unwrap();
                let mut status = 99;
                assert_eq!(set(device, 1, &mut status), 0);
                assert_eq!(status, 0);
            }
            "fill" => {
                let create_gi: libloading::Symbol<'_, CreateGi> =
                    lib.get(b"nvmlDeviceCreateGpuInstance").unwrap();
                let create_ci: libloading::Symbol<'_, CreateCi> =
                    lib.get(b"nvmlGpuInstanceCreateComputeInstance").unwrap();
                let mut made = 0;
                loop {
                    let mut gi = std::ptr::null_mut();
                    match create_gi(device, 19, &mut gi) {
                        0 => {}
                        23 => break, // INSUFFICIENT_RESOURCES: the GPU is full
                        other => panic!("create a 1g GPU instance: {other}"),
                    }
                    let mut ci = std::ptr::null_mut();
                    assert_eq!(create_ci(gi, 0, &mut ci), 0);
                    made += 1;
                }
                println!("made={made}");
            }
            other => panic!("unknown role {other}"),
        }
    }
}

fn run_child(role: &str, config: &Path, state: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env(LIBRARY, common::library())
        .env("MOCK_NVML_CONFIG", config)
        .env(node_layout::env::MOCK_NVML_MIG_STATE, state)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run this test binary as a child")
}

fn finished(child: std::process::Child, role: &str) -> Output {
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "child {role} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn made(output: &Output) -> u32 {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.split_once("made=").map(|(_, count)| count.trim()))
        .and_then(|count| count.parse().ok())
        .expect("the child prints made=<n>")
}

/// Four processes race to fill one h100 GPU with 1g instances after a fifth enabled MIG: seven
/// are made in all (the GPU's capacity), on seven distinct placements, and the file holds them.
/// A writer that dies holding the lock with a half-written file leaves the partition as it was
/// and the lock free.
#[test]
fn processes_share_one_partition_and_never_the_same_slices() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("profile.bin");
    let text = std::fs::read_to_string(
        common::repo_root().join("manifests/helm/nvml-mock/profiles/h100.yaml"),
    )
    .unwrap();
    std::fs::write(&config, test_support::staged::profile_bytes(&text)).unwrap();
    let state = dir.path().join("mig-state");
    finished(run_child("enable", &config, &state), "enable");
    let racers: Vec<_> = (0..4).map(|_| run_child("fill", &config, &state)).collect();
    let total: u32 = racers
        .into_iter()
        .map(|child| made(&finished(child, "fill")))
        .sum();
    assert_eq!(
        total, 7,
        "seven 1g instances fit an H100, whoever makes them"
    );
    let parsed = mig_state::parse(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let gpu = parsed.gpu(0).expect("GPU 0 in the file");
    let mut starts: Vec<u32> = gpu.instances.iter().map(|gi| gi.placement.start).collect();
    starts.sort_unstable();
    assert_eq!(starts, (0..7).collect::<Vec<_>>(), "no slice given twice");
    assert!(gpu.instances.iter().all(|gi| gi.compute.len() == 1));

    // A writer that dies mid-change: it held the lock and had written half a temporary file.
    let before = std::fs::read_to_string(&state).unwrap();
    // This test binary again (no shell or flock(1) needed: Nix's build sandbox has neither).
    let status = run_child("die-holding-lock", &config, &state)
        .wait()
        .unwrap();
    assert!(!status.success(), "the writer was killed");
    assert_eq!(
        std::fs::read_to_string(&state).unwrap(),
        before,
        "no half instance"
    );
    let after = finished(
        run_child("fill", &config, &state),
        "fill after a dead writer",
    );
    assert_eq!(
        made(&after),
        0,
        "the lock is free again and the GPU still full"
    );
}
