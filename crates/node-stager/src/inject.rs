//! `nvml-mock-stager inject --gpu N --xid X`, `inject --gpu N --ecc single|double` and
//! `inject --clear`: writes the fault injection control file (`driver/config/xid-injections`, format in `node_layout::xid`) under the staged
//! root, atomically, for the mock library to report as events to long-running consumers.
//!
//! The GPU index is checked against the staged profile's GPU count; an existing file with a
//! line that is not an injection is refused (`--clear` replaces it).

use std::{path::PathBuf, time::SystemTime};

use anyhow::{bail, Context, Result};
use clap::Parser;
use node_layout::{paths::Layout, xid};

use crate::stage;

/// Injects an Xid fault or an ECC error the mock library reports as an event, or clears every
/// fault.
#[derive(Debug, Parser)]
#[command(name = "nvml-mock-stager inject", about, long_about = None)]
#[command(group(clap::ArgGroup::new("fault").args(["xid", "ecc"])))]
pub struct InjectArgs {
    /// Where the host overlay dir (the staged root) is mounted.
    #[arg(long, default_value = node_layout::paths::STAGER_MOUNT)]
    overlay_dir: PathBuf,
    /// The GPU's index on this node.
    #[arg(long, requires = "fault", required_unless_present = "clear")]
    gpu: Option<u32>,
    /// The Xid code (decimal), e.g. 79 (GPU has fallen off the bus: the GPU is then lost).
    #[arg(long, requires = "gpu")]
    xid: Option<u64>,
    /// A volatile ECC error in device memory: `single` (corrected) or `double` (uncorrected).
    #[arg(long, requires = "gpu")]
    ecc: Option<xid::Ecc>,
    /// Remove every injection (the faults end; a later injection is a new event).
    #[arg(long, conflicts_with_all = ["gpu", "xid", "ecc"])]
    clear: bool,
}

/// What to do to the control file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Add one injection.
    Inject {
        /// GPU index.
        gpu: u32,
        /// The Xid or ECC error.
        fault: xid::Fault,
    },
    /// Empty the file.
    Clear,
}

/// The file's new text: `existing` (the current text) changed by `action`.
pub fn updated(existing: &str, action: Action, gpu_count: usize, now_nanos: u64) -> Result<String> {
    let Action::Inject { gpu, fault } = action else {
        return Ok(String::new());
    };
    if gpu as usize >= gpu_count {
        bail!(
            "GPU {gpu} is out of range: the staged profile has {gpu_count} GPU(s) (0..={})",
            gpu_count.saturating_sub(1)
        );
    }
    let (injections, errors) = xid::parse(existing);
    if let Some(error) = errors.first() {
        bail!("{error}: fix the file or run `inject --clear`");
    }
    Ok(xid::format(&xid::append(
        &injections,
        gpu,
        fault,
        now_nanos,
    )))
}

/// Runs `inject` with the arguments after the subcommand; returns what was done.
pub fn run(args: impl IntoIterator<Item = String>) -> Result<String> {
    let args = InjectArgs::parse_from(args);
    let layout = Layout::new(args.overlay_dir);
    let fault = match (args.xid, args.ecc) {
        (Some(code), _) => Some(xid::Fault::Xid(code)),
        (None, ecc) => ecc.map(xid::Fault::Ecc),
    };
    let action = match (args.clear, args.gpu, fault) {
        (false, Some(gpu), Some(fault)) => Action::Inject { gpu, fault },
        _ => Action::Clear,
    };
    let path = layout.xid_injections();
    let profile = std::fs::read(layout.config()).with_context(|| {
        format!(
            "no staged profile at {}: is the tree staged on this node (is the stager running)?",
            layout.config().display()
        )
    })?;
    let gpu_count = nvml_profile::staged::decode(&profile)
        .with_context(|| format!("{}: not a valid profile", layout.config().display()))?
        .device_count();
    let existing = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(err) => return Err(err).with_context(|| format!("cannot read {}", path.display())),
    };
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
        });
    let text = updated(&existing, action, gpu_count, now)?;
    stage::write_atomic(&path, text.as_bytes(), 0o644)?;
    Ok(match action {
        Action::Inject {
            gpu,
            fault: xid::Fault::Xid(code),
        } => format!("injected Xid {code} on GPU {gpu} ({})", path.display()),
        Action::Inject {
            gpu,
            fault: xid::Fault::Ecc(ecc),
        } => format!(
            "injected a {}-bit ECC error on GPU {gpu} ({})",
            ecc.as_str(),
            path.display()
        ),
        Action::Clear => format!("cleared every fault injection ({})", path.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xid(gpu: u32, code: u64) -> Action {
        Action::Inject {
            gpu,
            fault: xid::Fault::Xid(code),
        }
    }

    #[test]
    fn an_injection_is_appended_with_a_fresh_id() {
        let text = updated("", xid(1, 79), 4, 1_000).unwrap_or_else(|err| panic!("{err:#}"));
        assert_eq!(text, "id=1000 gpu=1 xid=79\n");
        let text = updated(&text, xid(3, 48), 4, 5).unwrap_or_else(|err| panic!("{err:#}"));
        assert_eq!(text, "id=1000 gpu=1 xid=79\nid=1001 gpu=3 xid=48\n");
        let ecc = Action::Inject {
            gpu: 0,
            fault: xid::Fault::Ecc(xid::Ecc::Double),
        };
        let text = updated(&text, ecc, 4, 5).unwrap_or_else(|err| panic!("{err:#}"));
        assert!(text.ends_with("\nid=1002 gpu=0 ecc=double\n"), "{text}");
    }

    #[test]
    fn clear_empties_the_file_whatever_it_holds() {
        for existing in ["", "id=1 gpu=0 xid=79\n", "garbage\n"] {
            let text =
                updated(existing, Action::Clear, 4, 1).unwrap_or_else(|err| panic!("{err:#}"));
            assert_eq!(text, "");
        }
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        let err = updated("", xid(4, 79), 4, 1)
            .err()
            .map(|err| err.to_string());
        assert_eq!(
            err.as_deref(),
            Some("GPU 4 is out of range: the staged profile has 4 GPU(s) (0..=3)")
        );
        let err = updated("junk\n", xid(0, 79), 4, 1)
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("line 1") && err.contains("inject --clear"),
            "{err}"
        );
    }

    #[test]
    fn the_command_line_needs_gpu_and_xid_or_clear() {
        let parse = |args: &[&str]| {
            InjectArgs::try_parse_from(std::iter::once("inject").chain(args.iter().copied()))
                .map_err(|err| err.to_string())
        };
        assert!(parse(&["--gpu", "1", "--xid", "79"]).is_ok());
        assert!(parse(&["--clear"]).is_ok());
        assert!(parse(&[]).is_err());
        assert!(parse(&["--gpu", "1"]).is_err());
        assert!(parse(&["--xid", "79"]).is_err());
        assert!(parse(&["--clear", "--gpu", "1", "--xid", "2"]).is_err());
        let err = parse(&["--gpu", "1", "--xid", "seventy"])
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("invalid value 'seventy' for '--xid <XID>'"),
            "{err}"
        );
        assert!(parse(&["--gpu", "1", "--ecc", "single"]).is_ok());
        assert!(parse(&["--gpu", "1", "--ecc", "double"]).is_ok());
        assert!(parse(&["--ecc", "single"]).is_err());
        assert!(parse(&["--gpu", "1", "--xid", "79", "--ecc", "single"]).is_err());
        assert!(parse(&["--clear", "--ecc", "single"]).is_err());
        let err = parse(&["--gpu", "1", "--ecc", "triple"])
            .err()
            .unwrap_or_default();
        assert!(
            err.contains("invalid value 'triple' for '--ecc <ECC>'")
                && err.contains("use `single` (corrected) or `double` (uncorrected)"),
            "{err}"
        );
    }
}
