//! Scenario 2, unmodified, against two real processes of the IMEX test
//! double (`crates/imex-double`) behind the real shim (`crates/imex-shim`)
//! on this host, instead of two pods.
//!
//! Each "pod" is a directory: the harness maps the pod paths the scenario
//! uses (`/tmp/…`, `/var/…`, `/etc/nvidia-imex/…`, the daemon behind the
//! shim) into it, and sets each pod's `BIND_INTERFACE_IP` and
//! `IMEX_CMD_BIND_INTERFACE_IP` to its own loopback address, because the
//! pods share this host's network namespace. Everything else (the commands,
//! the config rendering, the ctl calls, the stop script) runs as in a pod.
//! Needs the workspace's debug build (`cargo build -p imex-double -p
//! imex-shim`), which `cargo xtask ci` runs first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use super::scenario2::STOP_DAEMON;
use super::*;
use crate::imex;
use crate::k8s::{ExecOutput, PodInfo};
use crate::report::Outcome;
use crate::tracker::Tracker;
use test_support::assert_contains;

struct LocalPods {
    root: tempfile::TempDir,
    payload: PathBuf,
    daemon: PathBuf,
    ips: BTreeMap<String, String>,
    /// Once daemon B reported `stopped`, every ctl runs with this
    /// `IMEX_DOUBLE_CTL_FAULT`.
    fault_after_b_stops: Option<&'static str>,
    b_stopped: Mutex<bool>,
}

fn built(name: &str) -> PathBuf {
    let path = crate::dirs::target_dir()
        .expect("target dir")
        .join("debug")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p imex-double -p imex-shim` (cargo xtask ci builds it first)",
        path.display()
    );
    path
}

impl LocalPods {
    fn new(ips: [&str; 2], fault_after_b_stops: Option<&'static str>) -> LocalPods {
        // Not under /tmp: the harness maps the pods' /tmp/ into it.
        let target = crate::dirs::target_dir().expect("target dir");
        let root = tempfile::tempdir_in(&target).expect("tempdir");
        let daemon = built("nvidia-imex-double");
        let ctl = built("nvidia-imex-ctl-double");
        let shim = built("nvidia-imex-shim");
        let payload = root.path().join("payload");
        imex_double::payload::write_dir(&payload, &daemon, &ctl).expect("payload");
        let mut map = BTreeMap::new();
        for (name, ip) in ["pod-a", "pod-b"].iter().zip(ips) {
            let dir = root.path().join(name);
            for sub in ["tmp", "var/run", "var/log", "bin"] {
                std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
            }
            std::os::unix::fs::symlink(&shim, dir.join("bin/nvidia-imex")).expect("link");
            std::os::unix::fs::symlink(
                payload.join("usr/bin/nvidia-imex-ctl"),
                dir.join("bin/nvidia-imex-ctl"),
            )
            .expect("link");
            map.insert((*name).to_owned(), ip.to_owned());
        }
        LocalPods {
            daemon: payload.join("usr/bin/nvidia-imex"),
            root,
            payload,
            ips: map,
            fault_after_b_stops,
            b_stopped: Mutex::new(false),
        }
    }

    fn dir(&self, pod: &str) -> PathBuf {
        self.root.path().join(pod)
    }

    /// A pod path on this host.
    fn map(&self, pod: &str, arg: &str) -> String {
        let dir = self.dir(pod);
        let dir = dir.display();
        let rules = [
            ("/tmp/", format!("{dir}/tmp/")),
            ("/var/", format!("{dir}/var/")),
            (crate::names::CHANNEL0, "/dev/null".to_owned()),
            (imex::REAL_DAEMON, self.daemon.display().to_string()),
            (
                "/etc/nvidia-imex/",
                format!("{}/etc/nvidia-imex/", self.payload.display()),
            ),
        ];
        let mut out = map_path_starts(arg, &rules);
        if out.contains("BIND_INTERFACE_IP=") {
            let ip = &self.ips[pod];
            out = out
                .lines()
                .map(|line| match line.split_once('=') {
                    Some(("BIND_INTERFACE_IP" | "IMEX_CMD_BIND_INTERFACE_IP", _)) => {
                        format!("{}={ip}", line.split_once('=').map_or("", |it| it.0))
                    }
                    _ => line.to_owned(),
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n";
        }
        out
    }
}

/// `text` with every path that starts with a rule's prefix rewritten, in one
/// pass: a prefix counts only where a path starts (not inside another path, so
/// a host directory under /var or /tmp is never mapped twice).
fn map_path_starts(text: &str, rules: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut after_path_char = false;
    while let Some(ch) = rest.chars().next() {
        let rule = (!after_path_char)
            .then(|| rules.iter().find(|(from, _)| rest.starts_with(from)))
            .flatten();
        if let Some((from, to)) = rule {
            out.push_str(to);
            rest = &rest[from.len()..];
            after_path_char = true;
        } else {
            out.push(ch);
            rest = &rest[ch.len_utf8()..];
            after_path_char = ch.is_alphanumeric() || "/._-".contains(ch);
        }
    }
    out
}

#[test]
fn paths_are_mapped_once_even_under_a_var_or_tmp_host_dir() {
    let rules = [
        ("/tmp/", "/var/t/pod/tmp/".to_owned()),
        ("/var/", "/var/t/pod/var/".to_owned()),
    ];
    assert_eq!(
        map_path_starts("rm /tmp/a /var/run/x >/tmp/b a/tmp/c", &rules),
        "rm /var/t/pod/tmp/a /var/t/pod/var/run/x >/var/t/pod/tmp/b a/tmp/c"
    );
}

impl Workload for LocalPods {
    async fn pod_on_node(&self, node: &str) -> anyhow::Result<PodInfo> {
        let name = format!("pod-{node}");
        Ok(PodInfo {
            ip: self.ips[&name].clone(),
            uid: name.clone(),
            name,
        })
    }

    async fn exec(&self, pod: &str, argv: &[&str]) -> anyhow::Result<ExecOutput> {
        let args: Vec<String> = argv.iter().map(|it| self.map(pod, it)).collect();
        let dir = self.dir(pod);
        let mut cmd = tokio::process::Command::new(&args[0]);
        cmd.args(&args[1..])
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", dir.join("bin").display()),
            )
            .env("IMEX_SHIM_REAL_BIN", &self.daemon)
            .env(imex_double::ROOT_ENV, &dir)
            .env(imex_double::BACKOFF_ENV, "1000")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        if *self.b_stopped.lock().expect("lock") {
            if let Some(fault) = self.fault_after_b_stops {
                cmd.env(imex_double::CTL_FAULT_ENV, fault);
            }
        }
        let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
            .await
            .map_err(|_| anyhow::format_err!("`{}` did not finish within 60s", argv.join(" ")))??;
        let out = ExecOutput {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        if pod == "pod-b"
            && argv.get(2).is_some_and(|it| *it == STOP_DAEMON)
            && out.stdout.trim() == "stopped"
        {
            *self.b_stopped.lock().expect("lock") = true;
        }
        Ok(out)
    }

    async fn pod_uids(&self) -> anyhow::Result<BTreeMap<String, String>> {
        Ok(BTreeMap::new())
    }
}

fn quick() -> Limits {
    Limits {
        poll: Duration::from_millis(200),
        local_ready: Duration::from_secs(20),
        domain_up: Duration::from_secs(30),
        domain_down: Duration::from_secs(15),
        converge: Duration::from_secs(10),
    }
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario2_passes_twice_against_the_double_and_is_named_so() {
    let pods = LocalPods::new(["127.0.0.21", "127.0.0.22"], None);
    for run in 1..=2 {
        let result = scenario2(&pods, ["a", "b"], &Tracker::default(), quick()).await;
        assert_eq!(
            result.outcome,
            Outcome::PassedTestDouble,
            "run {run}: {result:#?}"
        );
        eprintln!("run {run} timings: {:?}", result.timings);
        assert_eq!(
            super::tests::details(&result),
            super::tests::TRANSITIONS,
            "run {run}"
        );
    }
    // The double wrote what the real daemon writes, where the pod has it.
    let a = pods.dir("pod-a");
    assert!(
        a.join("var/run/nvidia-imex/persist.dat").exists(),
        "{}",
        shown(&a)
    );
    let log = std::fs::read_to_string(a.join("tmp/nvidia-imex.log")).expect("log");
    assert_contains(&log, "Identified this node as ID 0");
    assert!(
        log.contains("IMEX_CMD_PORT=50005") && log.contains("DAEMONIZE=0"),
        "{log}"
    );
}

/// Scenario 2 on two local pods whose ctl, once daemon B is stopped, `fault`s
/// (`hang` or `fail`): the reason it fails with.
async fn reason_with_ctl_fault(ips: [&str; 2], fault: &'static str) -> String {
    let pods = LocalPods::new(ips, Some(fault));
    let result = scenario2(&pods, ["a", "b"], &Tracker::default(), quick()).await;
    super::tests::failure(&result).to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario2_fails_with_the_output_of_the_double_ctl_hanging_after_b_stops() {
    let reason = reason_with_ctl_fault(["127.0.0.23", "127.0.0.24"], "hang").await;
    assert!(
        reason.contains("(against the IMEX test double)")
            && reason.contains("unreachable")
            && reason.contains("did not finish within 10s (killed)"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario2_fails_with_the_output_of_the_double_ctl_failing_after_b_stops() {
    let reason = reason_with_ctl_fault(["127.0.0.25", "127.0.0.26"], "fail").await;
    assert!(
        reason.contains("exited 1") && reason.contains("injected failure"),
        "{reason}"
    );
}
