//! A SIGUSR1 that lands while the daemon still starts: NVIDIA's compute-domain
//! daemon sends one whenever its peers' addresses change, and on a loaded node
//! the double may still be reading its config and resolving its peers then.
//! The double must keep the signal and come up, not die of SIGUSR1's default
//! action (as it did in a full rack's rebind, issue 36).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DAEMON: &str = env!("CARGO_BIN_EXE_nvidia-imex-double");
const CTL: &str = env!("CARGO_BIN_EXE_nvidia-imex-ctl-double");
const IP: &str = "127.0.0.51";

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write_config(dir: &Path, log: &Path) -> String {
    let nodes = dir.join("nodes.cfg");
    std::fs::write(&nodes, format!("{IP}\n")).expect("nodes");
    let cfg = dir.join("imexd.cfg");
    std::fs::write(
        &cfg,
        format!(
            "LOG_FILE_NAME={}\nDAEMONIZE=0\nBIND_INTERFACE_IP={IP}\nSERVER_PORT=50150\n\
             IMEX_NODE_CONFIG_FILE={}\nIMEX_CMD_ENABLED=1\nIMEX_CMD_BIND_INTERFACE_IP={IP}\n\
             IMEX_CMD_PORT=50155\n",
            log.display(),
            nodes.display()
        ),
    )
    .expect("config");
    cfg.display().to_string()
}

/// Waits until `done` holds, else fails with `what` and the log.
fn wait(what: &str, log: &Path, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what} within 20 s; the daemon's log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_sigusr1_during_start_up_is_kept_and_the_daemon_comes_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("var/run")).expect("root");
    let log = dir.path().join("imexd.log");
    let cfg = write_config(dir.path(), &log);
    let child = Command::new(DAEMON)
        .args(["-c", &cfg, "--nogpu"])
        .env(imex_double::ROOT_ENV, &root)
        // Start-up held after the config is logged: the signal below lands
        // before the nodes file is read, as a slow resolver makes it land.
        .env(imex_double::STARTUP_HOLD_ENV, "1500")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("daemon");
    let mut daemon = Daemon(child);
    let pid = i32::try_from(daemon.0.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .expect("the daemon's pid");
    wait("the daemon logs its configuration", &log, || {
        std::fs::read_to_string(&log).is_ok_and(|text| text.contains("IMEX_NODE_CONFIG_FILE="))
    });
    rustix::process::kill_process(pid, rustix::process::Signal::USR1).expect("SIGUSR1");
    wait("the daemon is READY", &log, || {
        if let Some(status) = daemon.0.try_wait().expect("try_wait") {
            panic!(
                "the daemon ended ({status}) on a SIGUSR1 during its start-up; its log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        let out = Command::new(CTL)
            .args(["-c", &cfg, "-q"])
            .output()
            .expect("ctl");
        String::from_utf8_lossy(&out.stdout) == "READY\n"
    });
    assert!(
        daemon.0.try_wait().expect("try_wait").is_none(),
        "the daemon exited"
    );
    // The kept signal is handled once the daemon serves.
    wait("the daemon handles the SIGUSR1", &log, || {
        std::fs::read_to_string(&log).is_ok_and(|text| text.contains("SIGUSR1: restarting"))
    });
}
