//! What the packages' tests and benches share, owned once: the integration
//! tests (`tests/support` re-exports it), mock-nvml's, check-fabric's and
//! node-stager's tests, and the benches. A dev-dependency only: nothing
//! shipped links it.

use std::process::Output;

/// The output of a command that must succeed; fails the test with `what`,
/// the exit status and both streams otherwise (and says so when it could
/// not even start).
#[track_caller]
pub fn checked(output: std::io::Result<Output>, what: &str) -> Output {
    let output = output.unwrap_or_else(|err| panic!("cannot run {what}: {err}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// How many runs a bench takes: `BENCH_RUNS` when it is a number, else
/// `default`; at least one.
pub fn bench_runs(default: usize) -> usize {
    std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
        .max(1)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// This test binary itself: the one program every sandbox has (the Nix
    /// build's PATH holds no `sh`). libtest exits 0 for `--list` and
    /// non-zero for a flag it does not know.
    fn this_binary() -> Command {
        Command::new(std::env::current_exe().expect("the test binary's path"))
    }

    #[test]
    fn a_successful_command_is_returned() {
        let out = checked(this_binary().arg("--list").output(), "the test binary");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("a_successful_command_is_returned: test"),
            "{out:?}"
        );
    }

    #[test]
    #[should_panic(expected = "the test binary failed")]
    fn a_failing_command_fails_the_test() {
        checked(
            this_binary().arg("--no-such-flag").output(),
            "the test binary",
        );
    }

    #[test]
    #[should_panic(expected = "cannot run nothing-here")]
    fn a_missing_program_says_so() {
        checked(
            Command::new("/nonexistent/nothing-here").output(),
            "nothing-here",
        );
    }
}
