//! What to exec: the real daemon's path and its argv. Pure; `main` does the exec.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// Where the real daemon lives when `IMEX_SHIM_REAL_BIN` is unset or empty.
pub const DEFAULT_REAL_BIN: &str = "/usr/bin/nvidia-imex.real";

/// `argv[0]` of a carried daemon (its memfd path would say nothing).
pub const CARRIED_ARGV0: &str = "nvidia-imex";

/// The real daemon: `IMEX_SHIM_REAL_BIN` when it is set and non-empty, else
/// [`DEFAULT_REAL_BIN`].
pub fn real_binary(env_value: Option<OsString>) -> PathBuf {
    named_binary(env_value).unwrap_or_else(|| PathBuf::from(DEFAULT_REAL_BIN))
}

/// The daemon `IMEX_SHIM_REAL_BIN` names, when it is set and non-empty.
pub fn named_binary(env_value: Option<OsString>) -> Option<PathBuf> {
    env_value.filter(|it| !it.is_empty()).map(PathBuf::from)
}

/// The daemon's argv: the real path as `argv[0]`, the caller's arguments
/// unchanged, then `--nogpu` unless an argument is exactly `--nogpu` or `-nogpu`.
pub fn argv(real: &OsStr, caller_args: &[OsString]) -> Vec<OsString> {
    let mut argv = Vec::with_capacity(caller_args.len() + 2);
    argv.push(real.to_owned());
    argv.extend(caller_args.iter().cloned());
    let has_nogpu = caller_args
        .iter()
        .any(|arg| arg == "--nogpu" || arg == "-nogpu");
    if !has_nogpu {
        argv.push(OsString::from("--nogpu"));
    }
    argv
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStringExt;

    use super::*;

    fn plan(args: &[&str]) -> Vec<String> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        argv(OsStr::new("/real"), &args)
            .into_iter()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn no_args_gives_real_and_nogpu() {
        assert_eq!(plan(&[]), ["/real", "--nogpu"]);
    }

    #[test]
    fn caller_args_come_before_nogpu() {
        assert_eq!(plan(&["-c", "cfg"]), ["/real", "-c", "cfg", "--nogpu"]);
    }

    #[test]
    fn existing_nogpu_is_kept_where_it_is() {
        assert_eq!(
            plan(&["--nogpu", "-c", "cfg"]),
            ["/real", "--nogpu", "-c", "cfg"]
        );
        assert_eq!(
            plan(&["-c", "cfg", "-nogpu"]),
            ["/real", "-c", "cfg", "-nogpu"]
        );
    }

    #[test]
    fn lookalikes_do_not_count() {
        for lookalike in ["--nogpufoo", "nogpu", "---nogpu", "--NOGPU", "--nogpu=1"] {
            assert_eq!(
                plan(&[lookalike]),
                ["/real", lookalike, "--nogpu"],
                "{lookalike}"
            );
        }
    }

    #[test]
    fn non_utf8_args_pass_through_unchanged() {
        let odd = OsString::from_vec(vec![0xff, b'x']);
        let planned = argv(OsStr::new("/real"), std::slice::from_ref(&odd));
        assert_eq!(
            planned,
            [OsString::from("/real"), odd, OsString::from("--nogpu")]
        );
    }

    #[test]
    fn real_binary_prefers_a_non_empty_env_value() {
        assert_eq!(real_binary(None), PathBuf::from(DEFAULT_REAL_BIN));
        assert_eq!(
            real_binary(Some(OsString::new())),
            PathBuf::from(DEFAULT_REAL_BIN)
        );
        assert_eq!(
            real_binary(Some(OsString::from("/opt/imex"))),
            PathBuf::from("/opt/imex")
        );
    }
}
