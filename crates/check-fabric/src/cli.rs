//! The command line, parsed without side effects: `--json`, `-h`/`--help`, `-V`/`--version`.
//!
//! Hand-parsed (a full argument parser was most of the binary and of its start-up, and the
//! probe runs in every workload); the messages keep the wording and layout check-fabric had
//! with clap. Usage errors exit 1, not 2: exit code 2 means "fabric NOT SUPPORTED".

use std::ffi::OsString;

/// What the command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Query the GPUs; `json` selects the `--json` document over the text.
    Check {
        /// `--json`.
        json: bool,
    },
    /// `-h` / `--help`: print [`HELP`], exit 0.
    Help,
    /// `-V` / `--version`: print [`version`], exit 0.
    Version,
}

/// `--help`'s text.
pub const HELP: &str = "Prints each GPU's NVLink fabric identity through libnvidia-ml.so.1.

Usage: check-fabric [OPTIONS]

Options:
      --json     Print one JSON document: {driverVersion, nodeName, gpus[{index, uuid, clusterUuid, cliqueId, state, stateName}]}
  -h, --help     Print help
  -V, --version  Print version
";

/// `--version`'s line.
pub fn version() -> String {
    format!("check-fabric {}\n", env!("CARGO_PKG_VERSION"))
}

/// A usage error; [`Usage::message`] is what goes to stderr (exit 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Usage {
    /// An argument that is not an option of check-fabric (a positional one, `-x`, `--xyz`).
    Unexpected(String),
    /// `--json` given twice.
    Repeated,
    /// `--json=<value>`: the flag takes no value.
    Value(String),
}

impl Usage {
    /// The stderr text, with the usage line and the pointer to `--help`.
    pub fn message(&self) -> String {
        // The usage line names `--json` alone when the error is about it, as clap did.
        let (error, tip) = match self {
            Usage::Unexpected(arg) => {
                (format!("unexpected argument '{arg}' found"), near_json(arg))
            }
            Usage::Repeated => (
                "the argument '--json' cannot be used multiple times".to_owned(),
                false,
            ),
            Usage::Value(value) => (
                format!("unexpected value '{value}' for '--json' found; no more were expected"),
                false,
            ),
        };
        let (tip, usage) = match (tip, self) {
            (true, _) => ("\n  tip: a similar argument exists: '--json'\n", "--json"),
            (false, Usage::Value(_)) => ("", "--json"),
            (false, _) => ("", "[OPTIONS]"),
        };
        format!("error: {error}\n{tip}\nUsage: check-fabric {usage}\n\nFor more information, try '--help'.\n")
    }
}

/// Whether a mistyped long option looks like `--json` (a prefix of it, or it with extra letters).
fn near_json(arg: &str) -> bool {
    match arg.strip_prefix("--") {
        Some(name) if name.len() >= 2 => "json".starts_with(name) || name.starts_with("json"),
        _ => false,
    }
}

/// Parses the arguments after the program name; the first help, version or error decides.
pub fn parse<I: IntoIterator<Item = OsString>>(args: I) -> Result<Command, Usage> {
    let mut json = false;
    let mut options_ended = false;
    for arg in args {
        let arg = arg.to_string_lossy().into_owned();
        if options_ended {
            return Err(Usage::Unexpected(arg));
        }
        match arg.as_str() {
            "--json" if json => return Err(Usage::Repeated),
            "--json" => json = true,
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "--" => options_ended = true,
            _ => match arg.strip_prefix("--json=") {
                Some(value) => return Err(Usage::Value(value.to_owned())),
                None => return Err(Usage::Unexpected(arg)),
            },
        }
    }
    Ok(Command::Check { json })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Result<Command, Usage> {
        parse(args.iter().map(OsString::from))
    }

    #[test]
    fn flags() {
        assert_eq!(parse_strs(&[]), Ok(Command::Check { json: false }));
        assert_eq!(parse_strs(&["--json"]), Ok(Command::Check { json: true }));
        assert_eq!(
            parse_strs(&["--json", "--"]),
            Ok(Command::Check { json: true })
        );
        for help in ["-h", "--help"] {
            assert_eq!(parse_strs(&["--json", help]), Ok(Command::Help));
        }
        for version in ["-V", "--version"] {
            assert_eq!(parse_strs(&[version, "--bogus"]), Ok(Command::Version));
        }
        assert_eq!(
            version(),
            format!("check-fabric {}\n", env!("CARGO_PKG_VERSION"))
        );
        assert!(HELP.contains("      --json     Print one JSON document"));
    }

    #[test]
    fn errors_name_the_argument() {
        for arg in ["--bogus", "extra", "-j", "help", "-hV"] {
            assert_eq!(parse_strs(&[arg]), Err(Usage::Unexpected(arg.to_owned())));
        }
        assert_eq!(
            parse_strs(&["--", "--json"]),
            Err(Usage::Unexpected("--json".to_owned()))
        );
        assert_eq!(
            parse_strs(&["--bogus", "--help"]),
            Err(Usage::Unexpected("--bogus".to_owned()))
        );
        assert_eq!(parse_strs(&["--json", "--json"]), Err(Usage::Repeated));
        assert_eq!(parse_strs(&["--json=1"]), Err(Usage::Value("1".to_owned())));
    }

    #[test]
    fn messages_keep_the_usage_layout() {
        assert_eq!(
            Usage::Unexpected("--bogus".to_owned()).message(),
            "error: unexpected argument '--bogus' found\n\nUsage: check-fabric [OPTIONS]\n\nFor more information, try '--help'.\n"
        );
        assert_eq!(
            Usage::Unexpected("--jso".to_owned()).message(),
            "error: unexpected argument '--jso' found\n\n  tip: a similar argument exists: '--json'\n\nUsage: check-fabric --json\n\nFor more information, try '--help'.\n"
        );
        assert_eq!(
            Usage::Repeated.message(),
            "error: the argument '--json' cannot be used multiple times\n\nUsage: check-fabric [OPTIONS]\n\nFor more information, try '--help'.\n"
        );
        assert_eq!(
            Usage::Value("1".to_owned()).message(),
            "error: unexpected value '1' for '--json' found; no more were expected\n\nUsage: check-fabric --json\n\nFor more information, try '--help'.\n"
        );
        assert!(!near_json("--x"));
        assert!(!near_json("-j"));
        assert!(near_json("--jsonn"));
    }
}
