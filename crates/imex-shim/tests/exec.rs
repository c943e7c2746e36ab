//! The built shim against a stub daemon: argv, environment and exit code pass
//! through the exec; a missing daemon gives 127 and a message.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const SHIM: &str = env!("CARGO_BIN_EXE_nvidia-imex-shim");

/// A shell script that records its argv (one per line) and one env var, then exits 7.
fn stub_daemon(dir: &Path) -> PathBuf {
    let stub = dir.join("nvidia-imex.real");
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$0\" \"$@\" > '{argv}'\nprintf '%s' \"$SHIM_TEST_MARKER\" > '{env}'\necho \"pid $$\" > '{pid}'\nexit 7\n",
        argv = dir.join("argv").display(),
        env = dir.join("env").display(),
        pid = dir.join("pid").display(),
    );
    fs::write(&stub, script).expect("write stub");
    fs::set_permissions(&stub, fs::Permissions::from_mode(0o755)).expect("chmod stub");
    stub
}

fn run_shim(real: &Path, args: &[&str]) -> Output {
    Command::new(SHIM)
        .args(args)
        .env("IMEX_SHIM_REAL_BIN", real)
        .env("SHIM_TEST_MARKER", "carried through")
        .output()
        .expect("run the shim")
}

#[test]
fn exec_passes_argv_env_and_exit_code() {
    let dir = tempfile::tempdir().expect("temp dir");
    let stub = stub_daemon(dir.path());
    let output = run_shim(&stub, &["-c", "/tmp/imex.cfg"]);
    assert_eq!(output.status.code(), Some(7), "{output:?}");
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let argv = fs::read_to_string(dir.path().join("argv")).expect("stub recorded argv");
    assert_eq!(
        argv,
        format!("{}\n-c\n/tmp/imex.cfg\n--nogpu\n", stub.display())
    );
    let env = fs::read_to_string(dir.path().join("env")).expect("stub recorded env");
    assert_eq!(env, "carried through");
}

#[test]
fn exec_keeps_an_existing_nogpu() {
    let dir = tempfile::tempdir().expect("temp dir");
    let stub = stub_daemon(dir.path());
    let output = run_shim(&stub, &["-nogpu", "-c", "x"]);
    assert_eq!(output.status.code(), Some(7), "{output:?}");
    let argv = fs::read_to_string(dir.path().join("argv")).expect("stub recorded argv");
    assert_eq!(argv, format!("{}\n-nogpu\n-c\nx\n", stub.display()));
}

#[test]
fn exec_replaces_the_shim_process() {
    let dir = tempfile::tempdir().expect("temp dir");
    let stub = stub_daemon(dir.path());
    let child = Command::new(SHIM)
        .env("IMEX_SHIM_REAL_BIN", &stub)
        .spawn()
        .expect("spawn the shim");
    let shim_pid = child.id();
    let output = child.wait_with_output().expect("wait for the shim");
    assert_eq!(output.status.code(), Some(7));
    let pid = fs::read_to_string(dir.path().join("pid")).expect("stub recorded its pid");
    assert_eq!(
        pid.trim(),
        format!("pid {shim_pid}"),
        "the daemon must run in the shim's process"
    );
}

#[test]
fn missing_daemon_exits_127_with_a_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("absent");
    let output = run_shim(&missing, &[]);
    assert_eq!(output.status.code(), Some(127));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with(&format!("nvidia-imex-shim: exec {}: ", missing.display())),
        "{stderr}"
    );
    assert!(stderr.contains("No such file or directory"), "{stderr}");
}

#[test]
fn non_executable_daemon_exits_127() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plain = dir.path().join("plain");
    fs::write(&plain, "not a program").expect("write file");
    let output = run_shim(&plain, &[]);
    assert_eq!(output.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&output.stderr).contains("Permission denied"));
}

/// The shim as the stager stages it in the driver root: the daemon appended
/// (`node_layout::imex_bundle`), found at its own end and executed from a
/// memfd, with `--nogpu` added; nothing beside it is needed.
/// Runs a program this test just wrote. A child that another test forks
/// meanwhile may still hold the write descriptor for a moment (ETXTBSY,
/// "Text file busy"): retried briefly, as the kernel documents the race.
fn run_fresh(command: &mut Command) -> std::process::Output {
    for _ in 0..50 {
        match command.output() {
            Err(err) if err.raw_os_error() == Some(26) => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            other => return other.expect("run the written program"),
        }
    }
    panic!("the written program stayed busy (ETXTBSY) for a second");
}

#[test]
fn a_shim_carrying_its_daemon_execs_it_from_its_own_end() {
    let dir = tempfile::tempdir().expect("temp dir");
    // An ELF daemon that prints its arguments: coreutils' echo.
    let daemon = fs::read("/bin/echo").expect("/bin/echo");
    let shim = fs::read(SHIM).expect("the built shim");
    let staged = dir.path().join("nvidia-imex");
    fs::write(&staged, node_layout::imex_bundle::bundle(&shim, &daemon)).expect("bundle");
    fs::set_permissions(&staged, fs::Permissions::from_mode(0o755)).expect("chmod");
    let output = run_fresh(
        Command::new(&staged)
            .args(["-c", "/imexd/imexd.cfg"])
            .env_remove("IMEX_SHIM_REAL_BIN"),
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "-c /imexd/imexd.cfg --nogpu\n"
    );
    // A plain shim (nothing carried) still falls back to the default path.
    let plain = dir.path().join("plain");
    fs::write(&plain, &shim).expect("copy");
    fs::set_permissions(&plain, fs::Permissions::from_mode(0o755)).expect("chmod");
    let output = run_fresh(Command::new(&plain).env_remove("IMEX_SHIM_REAL_BIN"));
    assert_eq!(output.status.code(), Some(127), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .starts_with("nvidia-imex-shim: exec /usr/bin/nvidia-imex.real: "),
        "{output:?}"
    );
}
