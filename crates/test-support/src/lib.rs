//! What the packages' tests and benches share, owned once: the integration
//! tests (`tests/support` re-exports it), the unit tests of mock-nvml,
//! check-fabric, harness and xtask, and the benches. A dev-dependency only:
//! nothing shipped links it.

use std::process::Output;

pub mod staged;

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

/// The top directory of the stand-in for NVIDIA's IMEX archive (the real
/// one cannot be downloaded on the machines that run the tests).
pub const IMEX_ARCHIVE_TOP: &str = "imex-linux-x86_64-595.91.07-archive";

/// The stand-in archive's files as (path under the top directory, contents,
/// mode): the daemon, the ctl, the config and the two notices where the real
/// archive holds them.
pub const IMEX_ARCHIVE_FILES: [(&str, &[u8], u32); 5] = [
    ("usr/bin/nvidia-imex", b"\x7fELF daemon", 0o755),
    ("usr/bin/nvidia-imex-ctl", b"\x7fELF ctl", 0o755),
    ("etc/nvidia-imex/config.cfg", b"DAEMONIZE=1\n", 0o644),
    ("LICENSE", b"license\n", 0o644),
    ("usr/share/doc/third-party-notices.txt", b"notices\n", 0o644),
];

/// A file of the stand-in archive whose path is longer than the 100 bytes
/// of a ustar header, relative to the top directory; it holds `long`.
pub fn imex_archive_long_name() -> String {
    format!("usr/share/doc/{}/notes.txt", "d".repeat(120))
}

/// The stand-in archive's hard link as (link, target), relative to the top
/// directory.
pub const IMEX_ARCHIVE_HARD_LINK: (&str, &str) =
    ("usr/bin/nvidia-imex-hardlink", "usr/bin/nvidia-imex");

/// Fails the test unless `read`, a reader of the stand-in archive that
/// gives a file's bytes, sees the long name and the hard link's target.
#[track_caller]
pub fn assert_reads_long_name_and_hard_link(read: impl Fn(&str) -> Vec<u8>) {
    assert_eq!(read(&imex_archive_long_name()), b"long", "the long name");
    assert_eq!(
        read(IMEX_ARCHIVE_HARD_LINK.0),
        b"\x7fELF daemon",
        "the hard link"
    );
}

/// A file's permission bits (`st_mode & 0o7777`), following links; fails
/// the test when it cannot be read.
#[track_caller]
pub fn permission_bits(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::metadata(path)
        .unwrap_or_else(|err| panic!("cannot stat {}: {err}", path.display()));
    meta.permissions().mode() & 0o7777
}

/// Fails the test unless `text` contains `part`, showing the whole text.
#[track_caller]
pub fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{part:?} is not in:\n{text}");
}

/// The libraries in `ldd`'s output `text` (the host loader's view of what a
/// program loads): `name => /path (addr)` lines and the interpreter's
/// `/path (addr)`, as absolute paths; no vDSO, nothing for a static program.
pub fn ldd_paths(text: &str) -> std::collections::BTreeSet<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once(" => ") {
                Some((_, rest)) => rest.split(" (").next()?,
                None => line.split(" (").next()?,
            };
            path.starts_with('/').then(|| path.to_owned())
        })
        .collect()
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

/// The GPUs of the shipped GB200 profile, defaults resolved.
pub fn gb200_devices() -> Vec<nvml_profile::Device> {
    nvml_profile::Profile::parse(nvml_profile::GB200)
        .unwrap_or_else(|err| panic!("the shipped gb200 profile: {err}"))
        .devices()
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
    fn ldd_paths_are_the_absolute_libraries_and_the_interpreter() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        let paths: Vec<String> = ldd_paths(text).into_iter().collect();
        assert_eq!(
            paths,
            [
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
        );
        assert!(ldd_paths("\tstatically linked\n").is_empty());
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
