//! Riding out a restarting API server.
//!
//! On a loaded machine (a full rack of 18 trays on 2 cores) the kubelet may
//! restart kube-apiserver or etcd when their probes time out; for tens of
//! seconds every call then fails with "connection refused", "tls handshake
//! eof" or "EOF". A call that failed that way is waited out, within a
//! [`Bound`], instead of failing the scenario: the kube client's requests by
//! [`crate::k8s::ride_out`] (polling `/readyz`), helm by [`helm_check`]
//! (re-running it: its first request is the same probe). Past the bound the
//! error carries [`control_plane_state`]: which control-plane containers
//! restarted, the last lines of the ones that died, the kubelet's probe
//! failures.
//!
//! [`classify`] and [`Bound`] are pure; the rest runs commands through the
//! [`Runner`].

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::runner::{Cmd, Output, Runner};

/// What a failed call's error text says about the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Nothing answered or the connection was cut (refused, reset, a TLS
    /// handshake or a response ended early): the server is (re)starting, so
    /// the same call may work once it is back.
    Unreachable,
    /// Anything else (an API error, a chart error): the same call fails again.
    Other,
}

/// Lowercase fragments of the errors a (re)starting API server causes:
/// kube-rs and hyper (`tls handshake eof`, `connection closed before message
/// completed`), Go's net/http through helm (`connection refused`, `: EOF`,
/// and `cluster unreachable: unknown`: a `/version` answered with an error
/// and no body while the server started), and the API server's own while
/// etcd lags or restarts. Neither `client error (Connect)` nor helm's `Kubernetes cluster
/// unreachable` alone: a refused certificate or a bad kubeconfig says those
/// too, and waiting does not fix them.
const UNREACHABLE: &[&str] = &[
    "connection refused",
    "connection reset",
    "tls handshake eof",
    "connection closed before message completed",
    "broken pipe",
    "unexpected eof",
    "http2: server sent goaway",
    "etcdserver: request timed out",
    "etcdserver: leader changed",
    "cluster unreachable: unknown",
    "the server is currently unable to handle the request",
    "request did not complete within requested timeout",
];

/// Whether `text` (an error and its causes) is the API server being away.
pub fn classify(text: &str) -> Failure {
    let lower = text.to_lowercase();
    let eof_line = lower
        .lines()
        .any(|line| line.trim_end().ends_with(": eof") || line.trim() == "eof");
    if eof_line || UNREACHABLE.iter().any(|it| lower.contains(it)) {
        Failure::Unreachable
    } else {
        Failure::Other
    }
}

/// An error and its chain of causes on one line, as `anyhow`'s `{:#}` prints it.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// How long an away API server is waited for, and how often it is probed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// The longest wait, from the first failure.
    pub limit: Duration,
    /// The pause between probes.
    pub every: Duration,
}

impl Bound {
    /// Two minutes, probing every two seconds: a kube-apiserver the kubelet
    /// restarts is back in well under a minute here; etcd and the API
    /// server both restarting took longer.
    pub const DEFAULT: Bound = Bound {
        limit: Duration::from_secs(120),
        every: Duration::from_secs(2),
    };

    /// The pause before the next probe after `waited` since the first
    /// failure, or `None` once the budget is spent (the last pause is cut to
    /// end at the limit).
    pub fn next_pause(&self, waited: Duration) -> Option<Duration> {
        let left = self.limit.checked_sub(waited).filter(|it| !it.is_zero())?;
        Some(self.every.min(left))
    }
}

/// Says, at most every 10 s, that an away API server is being waited for.
#[derive(Debug, Default)]
pub struct Progress {
    said: Option<Instant>,
}

impl Progress {
    /// Prints `    the API server is not answering (REASON): waiting up to
    /// LIMITs (Ns)` unless it did in the last 10 s.
    pub fn say(&mut self, what: &str, reason: &str, waited: Duration, bound: Bound) {
        if self
            .said
            .is_some_and(|it| it.elapsed() < Duration::from_secs(10))
        {
            return;
        }
        self.said = Some(Instant::now());
        eprintln!(
            "    the API server is not answering {what} ({}): waiting up to {}s for it ({:.0}s)",
            first_line(reason),
            bound.limit.as_secs(),
            waited.as_secs_f64()
        );
    }
}

fn first_line(text: &str) -> &str {
    let line = text.lines().find(|it| !it.trim().is_empty()).unwrap_or("");
    match line.char_indices().nth(160) {
        Some((at, _)) => &line[..at],
        None => line,
    }
}

/// Runs a helm `cmd` that talks to the cluster, re-running it while it fails
/// because the API server is away (within `bound`, from its first failure);
/// past the bound the error carries `diagnose()`. Any other failure is
/// returned at once, as [`Runner::check`] would.
pub fn helm_check<R: Runner>(
    runner: &R,
    cmd: &Cmd,
    bound: Bound,
    diagnose: &dyn Fn() -> String,
) -> anyhow::Result<Output> {
    let mut since: Option<Instant> = None;
    let mut progress = Progress::default();
    loop {
        let out = runner.run(cmd)?;
        if out.ok {
            return Ok(out);
        }
        let text = out.error_text();
        if classify(&text) == Failure::Other {
            return Err(crate::runner::failed(cmd, &out));
        }
        let first = *since.get_or_insert_with(Instant::now);
        let Some(pause) = bound.next_pause(first.elapsed()) else {
            anyhow::bail!(
                "`{}` failed: the API server did not answer for {}s: {}\n{text}\n{}",
                cmd.display(),
                bound.limit.as_secs(),
                out.headline(),
                diagnose()
            );
        };
        progress.say(&format!("`{}`", cmd.program), &text, first.elapsed(), bound);
        std::thread::sleep(pause);
    }
}

/// [`helm_check`] within [`Bound::DEFAULT`] for a helm command against
/// kube context `context`; for a kind cluster's context the diagnostics are
/// its control plane's ([`control_plane_state`]).
pub fn helm<R: Runner>(runner: &R, cmd: &Cmd, context: &str) -> anyhow::Result<Output> {
    let diagnose = || match kind_control_plane(context) {
        Some(node) => control_plane_state(runner, &node),
        None => format!("(context {context} is not a kind cluster's: no control plane to inspect)"),
    };
    helm_check(runner, cmd, Bound::DEFAULT, &diagnose)
}

/// The control-plane node of the kind cluster whose context is `context`
/// (`kind-NAME` → `NAME-control-plane`).
pub fn kind_control_plane(context: &str) -> Option<String> {
    context
        .strip_prefix("kind-")
        .filter(|name| !name.is_empty())
        .map(|name| format!("{name}-control-plane"))
}

/// The control-plane components whose restarts explain an away API server.
const COMPONENTS: [&str; 4] = [
    "kube-apiserver",
    "etcd",
    "kube-controller-manager",
    "kube-scheduler",
];

/// One control-plane container, from `crictl ps -a -o json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// Its id.
    pub id: String,
    /// Its name (`kube-apiserver`, `etcd`, …).
    pub name: String,
    /// Its attempt: how many times the kubelet restarted it before this one.
    pub attempt: u64,
    /// `CONTAINER_RUNNING`, `CONTAINER_EXITED`, …
    pub state: String,
}

/// The control-plane components' containers in `crictl ps -a -o json`'s
/// output, newest attempt first per name.
pub fn components(json: &str) -> Vec<Container> {
    let doc: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    let mut found: Vec<Container> = doc["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|it| Container {
            id: it["id"].as_str().unwrap_or_default().to_owned(),
            name: it["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            attempt: it["metadata"]["attempt"].as_u64().unwrap_or(0),
            state: it["state"].as_str().unwrap_or_default().to_owned(),
        })
        .filter(|it| COMPONENTS.contains(&it.name.as_str()))
        .collect();
    found.sort_by(|a, b| (&a.name, b.attempt).cmp(&(&b.name, a.attempt)));
    found
}

/// One line per component: its newest attempt and state, `restarted N
/// time(s)` when N > 0.
pub fn restart_lines(containers: &[Container]) -> Vec<String> {
    let mut lines = Vec::new();
    for name in COMPONENTS {
        let Some(newest) = containers.iter().find(|it| it.name == name) else {
            lines.push(format!("{name}: no container"));
            continue;
        };
        let state = newest.state.trim_start_matches("CONTAINER_").to_lowercase();
        lines.push(match newest.attempt {
            0 => format!("{name}: {state}, never restarted"),
            n => format!("{name}: {state}, restarted {n} time(s)"),
        });
    }
    lines
}

/// What the control-plane node `node` shows about its components: restart
/// counts, the last log lines of each component that died (its newest exited
/// container), and the kubelet's last probe failures. Best effort: a command
/// that fails is named in the text.
pub fn control_plane_state<R: Runner>(runner: &R, node: &str) -> String {
    let exec = |args: &[&str]| -> String {
        let cmd = Cmd::new("docker", &[&["exec", node], args].concat());
        match runner.run(&cmd) {
            Ok(out) if out.ok => out.stdout,
            Ok(out) => format!("(`{}` failed: {})", cmd.display(), out.headline()),
            Err(err) => format!("(`{}`: {err:#})", cmd.display()),
        }
    };
    let containers = components(&exec(&["crictl", "ps", "-a", "-o", "json"]));
    let mut text = format!("control plane {node}:\n");
    for line in restart_lines(&containers) {
        text.push_str(&format!("  {line}\n"));
    }
    for name in COMPONENTS {
        let died = containers
            .iter()
            .find(|it| it.name == name && it.state == "CONTAINER_EXITED");
        if let Some(died) = died {
            text.push_str(&format!(
                "  last lines of {name} (attempt {}, exited):\n",
                died.attempt
            ));
            for line in exec(&["crictl", "logs", "--tail", "6", &died.id]).lines() {
                text.push_str(&format!("    {line}\n"));
            }
        }
    }
    let journal = exec(&["journalctl", "-u", "kubelet", "--no-pager", "-n", "2000"]);
    let probes: Vec<&str> = journal
        .lines()
        .filter(|it| it.contains("Probe failed") || it.contains("failed liveness probe"))
        .collect();
    text.push_str(&format!(
        "  kubelet: {} probe failure line(s) in its last 2000 journal lines{}\n",
        probes.len(),
        if probes.is_empty() { "" } else { ", the last:" }
    ));
    for line in &probes[probes.len().saturating_sub(4)..] {
        text.push_str(&format!("    {}\n", first_line(line)));
    }
    text
}

#[cfg(test)]
mod tests;
