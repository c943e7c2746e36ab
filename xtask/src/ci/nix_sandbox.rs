//! CI's step "nix sandbox": the flake's package check phase and its rustfmt
//! and clippy checks in Nix's real build sandbox (`tests/nix_sandbox.rs`).
//! About nine minutes of compiling on a cold machine, most of it waiting on
//! nothing but the CPU, so when e2e steps run it runs beside them: its test
//! binary built in the foreground, then run in the background under
//! `SCHED_IDLE` (log `target/ci/nix-sandbox.log`), while the e2e steps wait on
//! pods. The tests step skips its tests by their exact names, read from the
//! binary, so each runs once.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use xshell::{cmd, Shell};

use super::background;

/// The background job's name, and the test target's.
const JOB: &str = "nix sandbox";
const TARGET: &str = "nix_sandbox";

/// The step in CI's order: started, then waited for.
pub(super) fn run(sh: &Shell) -> Result<()> {
    start(sh)?;
    finish()
}

/// Builds the test binary and starts it in the background.
pub(super) fn start(sh: &Shell) -> Result<()> {
    ensure_nix_build_users(sh)?;
    let binary = test_binary(sh)?;
    // cargo runs an integration test from its package's directory.
    let dir = crate::project_root().join("tests");
    background::start(
        JOB,
        background::Priority::Idle,
        Some(background::PREBUILD),
        &binary,
        &["--test-threads=1"],
        &dir,
        &background::log_path("nix-sandbox.log")?,
    )
}

/// Waits for the rehearsals and prints their log; fails when any failed.
pub(super) fn finish() -> Result<()> {
    background::finish(JOB, "the Nix sandbox rehearsals", "its result is a step")
}

/// `--exact --skip <name>` for each of the rehearsals, for the tests step's `cargo test`.
pub(super) fn skip_args(sh: &Shell) -> Result<Vec<String>> {
    let binary = test_binary(sh)?;
    let listed = cmd!(sh, "{binary} --list --format terse").quiet().read()?;
    let mut args = vec!["--exact".to_owned()];
    for name in test_names(&listed) {
        args.extend(["--skip".to_owned(), name.to_owned()]);
    }
    anyhow::ensure!(
        args.len() > 1,
        "{} lists no tests; expected the sandbox rehearsals",
        binary.display()
    );
    Ok(args)
}

/// The names in libtest's `--list --format terse` output (`<name>: test`).
fn test_names(listed: &str) -> Vec<&str> {
    listed
        .lines()
        .filter_map(|line| line.strip_suffix(": test"))
        .collect()
}

/// Builds `tests/nix_sandbox.rs` (dev profile) and returns its executable.
/// With `--workspace`, as the build step builds: a one-package selection
/// unifies other features and compiled 34 crates again (38 s in a cold run).
fn test_binary(sh: &Shell) -> Result<PathBuf> {
    let out = cmd!(
        sh,
        "cargo test --no-run --workspace --test {TARGET} --message-format=json-render-diagnostics"
    )
    .read()
    .context("building the Nix sandbox rehearsals")?;
    executable(&out, TARGET)
        .with_context(|| format!("cargo built no executable for the test {TARGET}"))
}

/// The executable of the test target `name` in cargo's JSON messages.
fn executable(messages: &str, name: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|it| it["reason"] == "compiler-artifact" && it["target"]["name"] == name)
        .find_map(|it| it["executable"].as_str().map(PathBuf::from))
}

/// Nix's sandbox builds as members of `nixbld`; Debian's nix-bin does not
/// create them (its nix-setup-systemd does, with a daemon CI does not want).
/// CI owns its machine, so it adds the group and two build users once.
fn ensure_nix_build_users(sh: &Shell) -> Result<()> {
    let group = std::fs::read_to_string("/etc/group")?;
    let members = group
        .lines()
        .find_map(|line| line.strip_prefix("nixbld:"))
        .and_then(|rest| rest.split(':').nth(2))
        .map(str::to_owned);
    if members.as_deref().is_some_and(|it| !it.is_empty()) {
        return Ok(());
    }
    if members.is_none() {
        cmd!(sh, "groupadd --system nixbld").run()?;
    }
    for user in ["nixbld1", "nixbld2"] {
        cmd!(
            sh,
            "useradd --system --gid nixbld --groups nixbld --no-create-home --home-dir /var/empty --shell /usr/sbin/nologin --comment {user} {user}"
        )
        .run()?;
    }
    eprintln!("    created the nixbld group and build users for Nix's sandbox");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_names_come_from_the_terse_list_only() {
        let listed =
            "a_rehearsal: test\nanother_one: test\nsome_bench: bench\n\n2 tests, 1 benchmark\n";
        assert_eq!(test_names(listed), ["a_rehearsal", "another_one"]);
    }

    #[test]
    fn the_executable_is_the_named_test_targets() {
        let messages = concat!(
            r#"{"reason":"compiler-artifact","target":{"name":"support"},"executable":null}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"name":"nix_sandbox"},"executable":"/t/debug/deps/nix_sandbox-1"}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
        );
        assert_eq!(
            executable(messages, "nix_sandbox"),
            Some(PathBuf::from("/t/debug/deps/nix_sandbox-1"))
        );
        assert_eq!(executable(messages, "chart"), None);
    }
}
