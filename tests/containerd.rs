//! The stager and the NRI plugin against a real runtime: containerd 2.x
//! (`go install`ed at the pinned version), Debian's runc, and crictl.
//!
//! One private containerd with NRI on a private socket; the stager stages the
//! demo topology with IMEX channels on majors free on this host; the plugin
//! registers over containerd's NRI socket. Then, through CRI:
//! - a pod with the imex-channels annotation gets `/opt/nvml-mock` read-only,
//!   the env, channel character devices with the chosen major, and
//!   check-fabric prints the node's clique from the demo topology;
//! - a pod without the annotation gets the overlay but no channel devices;
//! - a pod in an excluded namespace gets nothing;
//! - a container whose `NVIDIA_VISIBLE_DEVICES` names 2 of the 4 GPUs by UUID gets only their
//!   device nodes, and its check-fabric sees exactly those two as GPUs 0 and 1;
//! - with MIG on GPU 0 and two 1g devices made by the staged `nvidia-smi` on the host, a
//!   container given one of them (`MIG-<uuid>`, then `<gpu>:<gi>:<ci>`) gets the parent's node
//!   and exactly that device's two capability nodes, and its `nvidia-smi -L` lists exactly it;
//! - with the plugin away, a workload container is created unmocked; when the plugin returns it
//!   has containerd stop that container (an excluded namespace's container keeps running), and
//!   the container created again is injected.
//!
//! Needs root, runc and busybox-static; `go` installs the rest on first use.

#[path = "containerd/harness.rs"]
mod harness;

use harness::{Rig, RigOptions, EXCLUDED_NAMESPACE, IMEX_ANNOTATION, NODE_NAME};

use std::time::Duration;

const CHANNELS: u32 = 16;

fn env_of(rig: &Rig, container: &str) -> Vec<String> {
    let (ok, stdout, stderr) = rig.exec(container, "env");
    assert!(ok, "env failed in the container: {stderr}");
    stdout.lines().map(str::to_owned).collect()
}

fn var<'a>(env: &'a [String], key: &str) -> Option<&'a str> {
    env.iter()
        .find_map(|line| line.strip_prefix(&format!("{key}=")))
}

/// The options of the mount at `point` in the container's /proc/mounts.
fn mount_options(rig: &Rig, container: &str, point: &str) -> Option<String> {
    let (ok, stdout, stderr) = rig.exec(container, "cat /proc/mounts");
    assert!(ok, "cannot read /proc/mounts in the container: {stderr}");
    stdout.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields.as_slice() {
            [_, mount_point, _, options, ..] if *mount_point == point => {
                Some((*options).to_owned())
            }
            _ => None,
        }
    })
}

#[test]
fn containerd_injects_the_staged_tree_through_nri() {
    let mut rig = Rig::start(&RigOptions {
        channel_count: CHANNELS,
    });
    let major = rig.channel_major.get();

    // A pod asking for IMEX channels.
    let pod = rig.run_pod("imex", "cdsim-workload", &[(IMEX_ANNOTATION, "true")]);
    let container = rig.run_container(&pod, "imex", "main");

    let options = mount_options(&rig, &container, "/opt/nvml-mock")
        .unwrap_or_else(|| panic!("/opt/nvml-mock is not mounted in the annotated container"));
    assert!(
        options.split(',').any(|option| option == "ro"),
        "/opt/nvml-mock is not read-only: {options}"
    );
    let (wrote, ..) = rig.exec(&container, "touch /opt/nvml-mock/x");
    assert!(!wrote, "the overlay is writable from the container");

    let env = env_of(&rig, &container);
    assert_eq!(var(&env, "NODE_NAME"), Some(NODE_NAME), "{env:?}");
    assert_eq!(
        var(&env, "MOCK_TOPOLOGY_CONFIG"),
        Some("/opt/nvml-mock/driver/topology/topology.bin")
    );
    assert_eq!(
        var(&env, "MOCK_NVML_CONFIG"),
        Some("/opt/nvml-mock/driver/config/profile.bin")
    );
    assert!(
        var(&env, "PATH").is_some_and(|path| path.starts_with("/opt/nvml-mock/driver/usr/bin:")),
        "{env:?}"
    );
    assert!(
        var(&env, "LD_LIBRARY_PATH")
            .is_some_and(|path| path.starts_with("/opt/nvml-mock/driver/usr/lib64")),
        "{env:?}"
    );

    let (ok, stdout, stderr) = rig.exec(
        &container,
        "stat -c '%F %t %T %a' /dev/nvidia-caps-imex-channels/channel0 /dev/nvidia-caps-imex-channels/channel15",
    );
    assert!(ok, "the channel devices are missing: {stderr}");
    assert_eq!(
        stdout
            .lines()
            .filter(|line| !line.is_empty())
            .collect::<Vec<_>>(),
        [
            format!("character special file {major:x} 0 666"),
            format!("character special file {major:x} f 666"),
        ],
        "channel devices with the wrong type, major, minor or mode"
    );
    let (ok, stdout, _) = rig.exec(&container, "ls /dev/nvidia-caps-imex-channels | wc -l");
    assert!(ok);
    assert_eq!(
        stdout.trim(),
        CHANNELS.to_string(),
        "every staged channel is injected"
    );

    let (ok, stdout, stderr) = rig.exec(&container, "check-fabric");
    assert!(
        ok,
        "check-fabric failed in the container:\n{stdout}{stderr}"
    );
    assert!(stdout.starts_with("Discovered 4 GPU(s)\n"), "{stdout}");
    assert_eq!(
        stdout
            .matches("clusterUuid : 00000000-0000-0000-0000-0000000000ab\n")
            .count(),
        4,
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("cliqueId    : 1\n").count(),
        4,
        "worker3 is in clique 1:\n{stdout}"
    );
    assert_eq!(
        stdout.matches("state       : completed (3)\n").count(),
        4,
        "{stdout}"
    );

    // A selector injects only the selected channels.
    let selected = rig.run_pod("selected", "cdsim-workload", &[(IMEX_ANNOTATION, "0,5")]);
    let container = rig.run_container(&selected, "selected", "main");
    let (ok, stdout, stderr) = rig.exec(&container, "ls /dev/nvidia-caps-imex-channels");
    assert!(ok, "{stderr}");
    assert_eq!(
        stdout.split_whitespace().collect::<Vec<_>>(),
        ["channel0", "channel5"]
    );

    // No annotation: the overlay, but no channels.
    let plain = rig.run_pod("plain", "cdsim-workload", &[]);
    let container = rig.run_container(&plain, "plain", "main");
    assert!(mount_options(&rig, &container, "/opt/nvml-mock").is_some());
    let (ok, stdout, _) = rig.exec(
        &container,
        "test -e /dev/nvidia-caps-imex-channels && echo present || echo absent",
    );
    assert!(ok);
    assert_eq!(
        stdout.trim(),
        "absent",
        "a pod without the annotation got channel devices"
    );

    // An excluded namespace: nothing, even with the annotation.
    let excluded = rig.run_pod("excluded", EXCLUDED_NAMESPACE, &[(IMEX_ANNOTATION, "true")]);
    let container = rig.run_container(&excluded, "excluded", "main");
    assert_eq!(mount_options(&rig, &container, "/opt/nvml-mock"), None);
    let env = env_of(&rig, &container);
    assert_eq!(var(&env, "NODE_NAME"), None, "{env:?}");
    assert_eq!(var(&env, "MOCK_NVML_CONFIG"), None, "{env:?}");
    assert_eq!(var(&env, "PATH"), Some("/usr/bin:/bin"), "{env:?}");
    let (ok, stdout, _) = rig.exec(
        &container,
        "test -e /dev/nvidia-caps-imex-channels && echo present || echo absent",
    );
    assert!(ok);
    assert_eq!(stdout.trim(), "absent");

    rig.remove_pod(&pod);
    a_container_given_two_gpus_sees_exactly_those(&mut rig);
    a_container_given_a_mig_device_sees_exactly_it(&mut rig);
    a_container_created_while_the_plugin_is_away_is_stopped_when_it_returns(&mut rig);
}

/// What the device plugin does for a pod asking for 2 `nvidia.com/gpu`: the container's
/// `NVIDIA_VISIBLE_DEVICES` names 2 of the 4 GPUs by UUID. The plugin injects only their device
/// nodes (and the control nodes); inside, check-fabric (NVML through the loader) sees exactly
/// those two, as GPUs 0 and 1, with their own UUIDs and the tray's clique. A pod without any
/// request keeps today's behaviour. (nvidia-smi's agreement is `tests/nvidia_smi.rs`'s; the test
/// image carries only check-fabric's library closure.)
fn a_container_given_two_gpus_sees_exactly_those(rig: &mut Rig) {
    // The rig stages the shipped gb200 profile (`stager_input_args`).
    let profile = nvml_profile::Profile::parse(nvml_profile::GB200)
        .unwrap_or_else(|err| panic!("the gb200 profile is invalid: {err}"));
    let devices = profile.devices();
    assert_eq!(devices.len(), 4, "the staged tray has 4 GPUs");
    let (first, second) = (&devices[1], &devices[3]);
    let visible = format!("{},{}", first.uuid, second.uuid);

    let pod = rig.run_pod("two-gpus", "cdsim-workload", &[]);
    let (container, _) = rig.create_container_with(
        &pod,
        "two-gpus",
        "main",
        &[("NVIDIA_VISIBLE_DEVICES", &visible)],
        &[],
    );
    rig.start_container(&container);
    let (ok, stdout, stderr) = rig.exec(&container, "ls /dev | grep nvidia");
    assert!(ok, "no NVIDIA device nodes in the container: {stderr}");
    assert_eq!(
        stdout.split_whitespace().collect::<Vec<_>>(),
        [
            "nvidia-uvm".to_owned(),
            "nvidia-uvm-tools".to_owned(),
            format!("nvidia{}", first.minor_number),
            format!("nvidia{}", second.minor_number),
            "nvidiactl".to_owned(),
        ],
        "only the allocated GPUs' nodes and the control nodes\n--- plugin log\n{}",
        rig.plugin_log()
    );
    let log = rig.plugin_log();
    assert!(
        log.lines().any(|line| line.contains("GPU allocation")
            && line.contains("cdsim-workload/two-gpus/main")
            && line.contains(&first.uuid)
            && line.contains(&second.uuid)),
        "the plugin's log names no GPU allocation for the container:\n{log}"
    );
    let (ok, stdout, stderr) = rig.exec(&container, "check-fabric");
    assert!(ok, "check-fabric failed:\n{stdout}{stderr}");
    assert!(stdout.starts_with("Discovered 2 GPU(s)\n"), "{stdout}");
    let listed: Vec<&str> = stdout
        .lines()
        .filter(|line| line.starts_with("GPU "))
        .collect();
    assert_eq!(
        listed,
        [
            format!("GPU 0 ({})", first.uuid),
            format!("GPU 1 ({})", second.uuid),
        ],
        "the container's NVML lists exactly the allocated GPUs, from index 0:\n{stdout}"
    );
    assert_eq!(
        stdout.matches("cliqueId    : 1\n").count(),
        2,
        "each keeps the tray's fabric identity:\n{stdout}"
    );

    // A CDI device (the device plugin's CDI strategy): containerd's own CDI injection adds
    // `/dev/nvidia2` and the control nodes from the spec; the plugin adds none of them again,
    // and NVML sees that one GPU.
    let third = &devices[2];
    let cdi = rig.run_pod("cdi-gpu", "cdsim-workload", &[]);
    let (container, _) =
        rig.create_container_with(&cdi, "cdi-gpu", "main", &[], &["nvidia.com/gpu=2"]);
    rig.start_container(&container);
    let (ok, stdout, stderr) = rig.exec(&container, "ls /dev | grep nvidia");
    assert!(ok, "no NVIDIA device nodes in the CDI container: {stderr}");
    assert_eq!(
        stdout.split_whitespace().collect::<Vec<_>>(),
        [
            "nvidia-uvm".to_owned(),
            "nvidia-uvm-tools".to_owned(),
            format!("nvidia{}", third.minor_number),
            "nvidiactl".to_owned(),
        ],
        "--- plugin log\n{}",
        rig.plugin_log()
    );
    let (ok, stdout, stderr) = rig.exec(&container, "check-fabric");
    assert!(ok, "check-fabric failed:\n{stdout}{stderr}");
    assert!(
        stdout.starts_with(&format!("Discovered 1 GPU(s)\nGPU 0 ({})\n", third.uuid)),
        "{stdout}"
    );
    // containerd 2.2 hands NRI no CDI device of a CRI request (its own injection did the work):
    // the plugin adds the overlay and no device node either way.
    let log = rig.plugin_log();
    assert!(
        log.lines()
            .any(|line| line.contains("cdsim-workload/cdi-gpu/main") && line.contains("devices=0")),
        "the plugin added device nodes to the CDI container:\n{log}"
    );
    rig.remove_pod(&cdi);

    // No request, no annotation: the overlay without GPU nodes, and NVML lists every GPU.
    let plain = rig.run_pod("no-gpus", "cdsim-workload", &[]);
    let container = rig.run_container(&plain, "no-gpus", "main");
    let (ok, stdout, _) = rig.exec(&container, "ls /dev | grep -c '^nvidia' || true");
    assert!(ok);
    assert_eq!(
        stdout.trim(),
        "0",
        "a pod that asked for no GPU got GPU nodes"
    );
    let (ok, stdout, stderr) = rig.exec(&container, "check-fabric");
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.starts_with("Discovered 4 GPU(s)\n"), "{stdout}");
    rig.remove_pod(&pod);
    rig.remove_pod(&plain);
}

/// The staged `nvidia-smi <args>` run on the host, as an operator or mig-parted on the node
/// runs it; stdout of a run that must succeed.
fn host_smi(rig: &Rig, args: &[&str]) -> String {
    let output = integration_tests::staged_nvidia_smi(&rig.overlay().join("driver"), args);
    assert!(
        output.status.success(),
        "nvidia-smi {args:?} on the host: {output:?}"
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What NVIDIA's device plugin (mixed strategy) or a DRA driver hands a container for one MIG
/// device (issue 38): `NVIDIA_VISIBLE_DEVICES` naming it. MIG on GPU 0 of the staged gb200 tray
/// and two 1g GPU instances with a compute instance each, made by the staged `nvidia-smi` on the
/// host (`-mig 1`, `mig -cgi 19,19 -C`: the node's state file, as the driver holds it). A
/// container given the second device, by `MIG-<uuid>` and then as `0:<gi>:<ci>`, gets GPU 0's
/// node and exactly that device's two capability nodes (minors per the staged `mig-minors`);
/// inside, `nvidia-smi -L` lists GPU 0 with exactly that MIG device. The partition is cleared
/// after.
/// What NVIDIA's node software reads of the driver under `/proc` in a container: the MIG table,
/// the device's capability files naming its two `nvidia-cap<N>` minors, and the `nvidia-caps`
/// major in `/proc/devices` (mounted over the kernel's by the plugin's createContainer hooks).
fn driver_proc_files_are_the_staged_ones(
    rig: &Rig,
    container: &str,
    [gi, ci]: [u32; 2],
    caps: [u32; 2],
) {
    let (ok, table, stderr) = rig.exec(container, "cat /proc/driver/nvidia-caps/mig-minors");
    assert!(ok, "no MIG table in the container's /proc: {stderr}");
    let table = node_layout::mig_minors::parse(&table);
    assert_eq!(
        table.get(&node_layout::mig_minors::gi_name(0, gi)),
        Some(&caps[0]),
        "the container's mig-minors"
    );
    for (file, minor) in [
        (format!("gpu0/mig/gi{gi}/access"), caps[0]),
        (format!("gpu0/mig/gi{gi}/ci{ci}/access"), caps[1]),
    ] {
        let path = format!("/proc/driver/nvidia/capabilities/{file}");
        let (ok, text, stderr) = rig.exec(container, &format!("cat {path}"));
        assert!(ok, "{path} in the container: {stderr}");
        assert_eq!(
            text.lines().next(),
            Some(format!("DeviceFileMinor: {minor}").as_str()),
            "{path}"
        );
    }
    let staged = rig.overlay().join("imex/proc-devices");
    if staged.is_file() {
        let (ok, devices, stderr) = rig.exec(container, "cat /proc/devices");
        assert!(ok, "/proc/devices in the container: {stderr}");
        assert_eq!(
            devices.trim_end(),
            std::fs::read_to_string(&staged)
                .unwrap_or_default()
                .trim_end(),
            "the container's /proc/devices is the staged one"
        );
    } else {
        eprintln!("NOTE: no staged /proc/devices on this rig (IMEX off): its mount is not checked");
    }
}

fn a_container_given_a_mig_device_sees_exactly_it(rig: &mut Rig) {
    let profile = nvml_profile::Profile::parse(nvml_profile::GB200)
        .unwrap_or_else(|err| panic!("the gb200 profile is invalid: {err}"));
    let parent = profile.devices().remove(0);
    host_smi(rig, &["-i", "0", "-mig", "1"]);
    host_smi(rig, &["mig", "-i", "0", "-cgi", "19,19", "-C"]);
    let list = host_smi(rig, &["-L"]);
    let migs = integration_tests::mig_lines_of_gpu_0(&list);
    assert_eq!(migs.len(), 2, "two MIG devices under GPU 0:\n{list}");
    let uuid = migs[1]
        .split("(UUID: ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no UUID in {:?}", migs[1]))
        .to_owned();
    // The device's instance ids, from the node's state file (what the driver would hold).
    let state_path = rig
        .overlay()
        .join("driver")
        .join(node_layout::paths::MIG_STATE_IN_DRIVER);
    let state =
        node_layout::mig_state::parse(&std::fs::read_to_string(&state_path).unwrap_or_default())
            .unwrap_or_else(|err| panic!("{}: {err:?}", state_path.display()));
    let gpu = state
        .gpu(0)
        .unwrap_or_else(|| panic!("no GPU 0 in {state:?}"));
    let (gi, ci) = gpu
        .instances
        .iter()
        .flat_map(|gi| gi.compute.iter().map(move |ci| (gi, ci.id)))
        .find(|(gi, ci)| node_layout::mig_state::mig_uuid(&parent.uuid, gi, *ci) == uuid)
        .unwrap_or_else(|| panic!("{uuid} is not in the state file: {state:?}"));
    let caps = node_layout::mig_minors::device_minors(parent.minor_number, gi.id, ci)
        .unwrap_or_else(|| panic!("no capability minors for gi {} ci {ci}", gi.id));
    let indices = format!("0:{}:{ci}", gi.id);
    for (name, visible) in [
        ("mig-uuid", uuid.as_str()),
        ("mig-indices", indices.as_str()),
    ] {
        let pod = rig.run_pod(name, "cdsim-workload", &[]);
        let (container, _) = rig.create_container_with(
            &pod,
            name,
            "main",
            &[("NVIDIA_VISIBLE_DEVICES", visible)],
            &[],
        );
        rig.start_container(&container);
        let (ok, stdout, stderr) =
            rig.exec(&container, "ls /dev | grep nvidia; ls /dev/nvidia-caps");
        assert!(ok, "{visible}: no NVIDIA nodes in the container: {stderr}");
        assert_eq!(
            stdout.split_whitespace().collect::<Vec<_>>(),
            [
                "nvidia-caps".to_owned(),
                "nvidia-uvm".to_owned(),
                "nvidia-uvm-tools".to_owned(),
                format!("nvidia{}", parent.minor_number),
                "nvidiactl".to_owned(),
                format!("nvidia-cap{}", caps[0]),
                format!("nvidia-cap{}", caps[1]),
            ],
            "{visible}: the parent's node, the control nodes and the device's two capabilities\n--- plugin log\n{}",
            rig.plugin_log()
        );
        let (ok, stdout, stderr) = rig.exec(&container, "nvidia-smi -L");
        assert!(
            ok,
            "{visible}: nvidia-smi -L failed in the container:\n{stdout}{stderr}"
        );
        assert!(
            stdout.starts_with(&format!("GPU 0: {} (UUID: {})\n", parent.name, parent.uuid)),
            "{visible}: GPU 0 is the parent:\n{stdout}"
        );
        let seen = integration_tests::mig_lines_of_gpu_0(&stdout);
        assert_eq!(
            seen.len(),
            1,
            "{visible}: exactly one MIG device:\n{stdout}"
        );
        assert!(
            seen[0].ends_with(&format!("(UUID: {uuid})")),
            "{visible}: the container's MIG device is the one it was given:\n{stdout}"
        );
        // Counted in the container: crictl's exec output ends with blank lines of its own.
        let (ok, count, _) = rig.exec(&container, "nvidia-smi -L | wc -l");
        assert!(ok);
        assert_eq!(count.trim(), "2", "{visible}: nothing else:\n{stdout}");
        driver_proc_files_are_the_staged_ones(rig, &container, [gi.id, ci], caps);
        rig.remove_pod(&pod);
    }
    host_smi(rig, &["mig", "-dci"]);
    host_smi(rig, &["mig", "-i", "0", "-dgi"]);
    host_smi(rig, &["-i", "0", "-mig", "0"]);
}

/// The plugin away (a rollout): a workload container created meanwhile runs without the mock.
/// When the plugin registers again, its Synchronize sees that container and has containerd stop
/// it (kubelet would then create it again, through the plugin); a container in an excluded
/// namespace created meanwhile is left running.
fn a_container_created_while_the_plugin_is_away_is_stopped_when_it_returns(rig: &mut Rig) {
    rig.stop_plugin();
    let pod = rig.run_pod("away", "cdsim-workload", &[(IMEX_ANNOTATION, "true")]);
    let missed = rig.run_container(&pod, "away", "main");
    assert_eq!(
        mount_options(rig, &missed, "/opt/nvml-mock"),
        None,
        "created while the plugin was away, yet injected"
    );
    let excluded = rig.run_pod("away-excluded", EXCLUDED_NAMESPACE, &[]);
    let untouched = rig.run_container(&excluded, "away-excluded", "main");

    rig.restart_plugin();
    let stopped = harness::wait_for(Duration::from_secs(20), || {
        rig.container_state(&missed) == "CONTAINER_EXITED"
    });
    assert!(
        stopped,
        "the unmocked container was not stopped within 20 s (state {})\n--- plugin log\n{}",
        rig.container_state(&missed),
        rig.plugin_log()
    );
    let log = rig.plugin_log();
    assert!(
        log.lines()
            .any(|line| line.contains("cdsim-workload/away/main")
                && line.contains(&missed)
                && line.contains("without the mock stack")),
        "no eviction line naming the pod, the container and why:\n{log}"
    );
    assert_eq!(rig.container_state(&untouched), "CONTAINER_RUNNING");
    assert!(
        !log.contains(&untouched),
        "the excluded namespace's container was touched:\n{log}"
    );

    // What kubelet does next: the container created again goes through the plugin.
    let again = rig.run_container(&pod, "away", "main-again");
    assert!(
        mount_options(rig, &again, "/opt/nvml-mock").is_some(),
        "the recreated container has no mock stack"
    );
    rig.remove_pod(&pod);
    rig.remove_pod(&excluded);
}
