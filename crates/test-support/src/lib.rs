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

    #[test]
    fn a_successful_command_is_returned() {
        let out = checked(Command::new("sh").args(["-c", "echo hi"]).output(), "sh");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    }

    #[test]
    #[should_panic(expected = "sh failed")]
    fn a_failing_command_fails_the_test() {
        checked(Command::new("sh").args(["-c", "exit 3"]).output(), "sh");
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
