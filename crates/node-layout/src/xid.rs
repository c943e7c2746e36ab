//! The Xid injection control file (`driver/config/xid-injections`, [`crate::paths::Layout::xid_injections`];
//! `MOCK_NVML_XID_FILE` overrides it): the faults the mock library reports as events to
//! long-running consumers (NVIDIA's device plugin): Xid critical errors and volatile ECC errors.
//!
//! Format: UTF-8 text, one injection per line, three `key=value` fields in this order,
//! separated by single spaces:
//!
//! ```text
//! id=1733312345000000000 gpu=1 xid=79
//! id=1733312345000000001 gpu=0 ecc=double
//! ```
//!
//! - `id`: an unsigned 64-bit number unique over the file's lifetime (the writer uses the time
//!   in nanoseconds, or one more than the largest id present, whichever is larger: [`append`]),
//!   so the library delivers each injection once per event set and a line written after a clear
//!   is a new event even if the same GPU and Xid come back.
//! - `gpu`: the GPU's NVML index on the node.
//! - the fault, one of:
//!   - `xid=<code>`: an Xid, delivered as `nvmlEventTypeXidCriticalError` with the code as
//!     `eventData`;
//!   - `ecc=single` or `ecc=double`: one volatile single-bit (corrected) or double-bit
//!     (uncorrected) ECC error in device memory, delivered as `nvmlEventTypeSingleBitEccError`
//!     or `nvmlEventTypeDoubleBitEccError`. Added after `xid=`: every file written before it
//!     still parses the same (a reader that predates it skips these lines as malformed).
//!
//! Empty lines and lines starting with `#` are ignored. An empty file (or no file) means no
//! fault: clearing is writing an empty file. Writers replace the file atomically (temporary file,
//! then rename), so a reader never sees half a line.
//!
//! Pure: parsing and formatting only; the stager writes, the library reads.

use std::fmt;

/// The control file's largest accepted size: a reader refuses anything larger.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// One injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Injection {
    /// Unique over the file's lifetime: what "delivered once" is keyed on.
    pub id: u64,
    /// The GPU's NVML index on the host (a container that sees fewer GPUs numbers them
    /// differently; the mock library maps this index to the container's handle).
    pub gpu: u32,
    /// What happened.
    pub fault: Fault,
}

/// An injected fault: an Xid or an ECC error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `xid=<code>`.
    Xid(u64),
    /// `ecc=single|double`.
    Ecc(Ecc),
}

/// Which ECC error: `ecc=single` or `ecc=double`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecc {
    /// A single-bit (corrected) error.
    Single,
    /// A double-bit (uncorrected) error.
    Double,
}

/// The Xid of a GPU that has fallen off the bus: the mock library reports the GPU lost.
pub const XID_FALLEN_OFF_THE_BUS: u64 = 79;

impl Ecc {
    /// The word after `ecc=`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ecc::Single => "single",
            Ecc::Double => "double",
        }
    }
}

impl std::str::FromStr for Ecc {
    type Err = String;

    fn from_str(text: &str) -> Result<Ecc, String> {
        match text {
            "single" => Ok(Ecc::Single),
            "double" => Ok(Ecc::Double),
            _ => Err(format!(
                "`{text}` is not an ECC error kind: use `single` (corrected) or `double` (uncorrected)"
            )),
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Xid(code) => write!(f, "xid={code}"),
            Fault::Ecc(ecc) => write!(f, "ecc={}", ecc.as_str()),
        }
    }
}

/// A line that is not an injection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("xid-injections line {line}: {reason}: {text:?}")]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub reason: &'static str,
    /// The line as found.
    pub text: String,
}

impl fmt::Display for Injection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "id={} gpu={} {}", self.id, self.gpu, self.fault)
    }
}

/// Parses one non-comment line.
fn parse_line(text: &str) -> Result<Injection, &'static str> {
    let fields: Vec<&str> = text.split(' ').collect();
    let [id, gpu, fault] = fields.as_slice() else {
        return Err("expected `id=<n> gpu=<index> xid=<code>` or `… ecc=single|double`");
    };
    let id = number(id, "id=").ok_or("id is not an unsigned number")?;
    let gpu = number(gpu, "gpu=")
        .and_then(|gpu| u32::try_from(gpu).ok())
        .ok_or("gpu is not an unsigned 32-bit index")?;
    let fault = match fault.strip_prefix("ecc=") {
        Some(kind) => Fault::Ecc(
            kind.parse()
                .map_err(|_| "ecc is not `single` or `double`")?,
        ),
        None => Fault::Xid(number(fault, "xid=").ok_or("xid is not an unsigned number")?),
    };
    Ok(Injection { id, gpu, fault })
}

/// The decimal value after `key`, canonical digits only.
fn number(field: &str, key: &str) -> Option<u64> {
    let digits = field.strip_prefix(key)?;
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Every injection of a file's text, and the lines that are not injections.
pub fn parse(text: &str) -> (Vec<Injection>, Vec<LineError>) {
    let mut injections = Vec::new();
    let mut errors = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_end_matches('\r');
        if trimmed.trim().is_empty() || trimmed.starts_with('#') {
            continue;
        }
        match parse_line(trimmed) {
            Ok(injection) => injections.push(injection),
            Err(reason) => errors.push(LineError {
                line: index + 1,
                reason,
                text: trimmed.to_string(),
            }),
        }
    }
    (injections, errors)
}

/// The file's text for `injections`, one line each.
pub fn format(injections: &[Injection]) -> String {
    injections
        .iter()
        .map(|injection| format!("{injection}\n"))
        .collect()
}

/// `existing` plus a new injection of `fault` on `gpu`, with an id above every existing one and
/// at least `now_nanos` (the time since the epoch), so ids stay unique across clears.
pub fn append(existing: &[Injection], gpu: u32, fault: Fault, now_nanos: u64) -> Vec<Injection> {
    let above = existing
        .iter()
        .map(|injection| injection.id.saturating_add(1))
        .max()
        .unwrap_or(0);
    let mut all = existing.to_vec();
    all.push(Injection {
        id: above.max(now_nanos),
        gpu,
        fault,
    });
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let injections = vec![
            Injection {
                id: 1,
                gpu: 0,
                fault: Fault::Xid(79),
            },
            Injection {
                id: u64::MAX,
                gpu: 3,
                fault: Fault::Xid(48),
            },
            Injection {
                id: 2,
                gpu: 1,
                fault: Fault::Ecc(Ecc::Single),
            },
            Injection {
                id: 3,
                gpu: 1,
                fault: Fault::Ecc(Ecc::Double),
            },
        ];
        let text = format(&injections);
        assert_eq!(
            text,
            "id=1 gpu=0 xid=79\nid=18446744073709551615 gpu=3 xid=48\n\
             id=2 gpu=1 ecc=single\nid=3 gpu=1 ecc=double\n"
        );
        assert_eq!(parse(&text), (injections, vec![]));
    }

    #[test]
    fn comments_blank_lines_and_crlf_are_accepted() {
        let (injections, errors) = parse("# fault\n\n   \nid=7 gpu=1 xid=79\r\n");
        assert_eq!(errors, vec![]);
        assert_eq!(
            injections,
            vec![Injection {
                id: 7,
                gpu: 1,
                fault: Fault::Xid(79)
            }]
        );
        assert_eq!(parse(""), (vec![], vec![]));
    }

    #[test]
    fn bad_lines_are_reported_with_their_number_and_skipped() {
        let text = "id=1 gpu=0 xid=79\ngpu=1 xid=79\nid=2 gpu=x xid=79\nid=3 gpu=1 xid=-4\n\
                    id=4 gpu=4294967296 xid=1\nid=5  gpu=1 xid=2\nid=6 xid=1 gpu=1\nid=+7 gpu=1 xid=2\n";
        let (injections, errors) = parse(text);
        assert_eq!(injections.len(), 1);
        let lines: Vec<usize> = errors.iter().map(|error| error.line).collect();
        assert_eq!(lines, vec![2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(errors[1].reason, "gpu is not an unsigned 32-bit index");
        assert_eq!(
            errors[2].to_string(),
            "xid-injections line 4: xid is not an unsigned number: \"id=3 gpu=1 xid=-4\""
        );
        let (ecc_injections, ecc_errors) =
            parse("id=1 gpu=0 ecc=triple\nid=2 gpu=0 ecc=\nid=3 gpu=0 ecc=single\n");
        assert_eq!(ecc_injections.len(), 1);
        assert_eq!(
            ecc_errors
                .iter()
                .map(|error| (error.line, error.reason))
                .collect::<Vec<_>>(),
            vec![
                (1, "ecc is not `single` or `double`"),
                (2, "ecc is not `single` or `double`")
            ]
        );
    }

    #[test]
    fn ecc_kinds_parse_with_a_clear_error() {
        assert_eq!("single".parse::<Ecc>(), Ok(Ecc::Single));
        assert_eq!("double".parse::<Ecc>(), Ok(Ecc::Double));
        assert_eq!(
            "triple".parse::<Ecc>(),
            Err("`triple` is not an ECC error kind: use `single` (corrected) or `double` (uncorrected)".to_owned())
        );
    }

    #[test]
    fn appended_ids_are_unique_and_follow_the_clock() {
        let first = append(&[], 1, Fault::Xid(79), 1_000);
        assert_eq!(
            first,
            vec![Injection {
                id: 1_000,
                gpu: 1,
                fault: Fault::Xid(79)
            }]
        );
        // A clock that went backwards still gives a larger id.
        let second = append(&first, 2, Fault::Ecc(Ecc::Double), 10);
        assert_eq!(second[1].id, 1_001);
        assert_eq!(second[0], first[0]);
        // After a clear, the clock keeps ids above the cleared ones.
        let after_clear = append(&[], 0, Fault::Xid(13), 5_000);
        assert_eq!(after_clear[0].id, 5_000);
    }
}
