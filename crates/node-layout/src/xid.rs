//! The Xid injection control file (`driver/config/xid-injections`, [`crate::paths::Layout::xid_injections`];
//! `MOCK_NVML_XID_FILE` overrides it): the faults the mock library reports as
//! `nvmlEventTypeXidCriticalError` events to long-running consumers (NVIDIA's device plugin).
//!
//! Format: UTF-8 text, one injection per line, three `key=value` fields in this order,
//! separated by single spaces:
//!
//! ```text
//! id=1733312345000000000 gpu=1 xid=79
//! ```
//!
//! - `id`: an unsigned 64-bit number unique over the file's lifetime (the writer uses the time
//!   in nanoseconds, or one more than the largest id present, whichever is larger: [`append`]),
//!   so the library delivers each injection once per event set and a line written after a clear
//!   is a new event even if the same GPU and Xid come back.
//! - `gpu`: the GPU's NVML index on the node.
//! - `xid`: the Xid code, delivered as the event's `eventData`.
//!
//! Empty lines and lines starting with `#` are ignored. An empty file (or no file) means no
//! fault: clearing is writing an empty file. Writers replace the file atomically (temporary file,
//! then rename), so a reader never sees half a line.
//!
//! Pure: parsing and formatting only; the stager writes, the library reads.

use std::fmt;

/// The control file's largest accepted size: a reader refuses anything larger.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;

/// One injected Xid fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Injection {
    /// Unique over the file's lifetime: what "delivered once" is keyed on.
    pub id: u64,
    /// The GPU's NVML index on the host (a container that sees fewer GPUs numbers them
    /// differently; the mock library maps this index to the container's handle).
    pub gpu: u32,
    /// The Xid code.
    pub xid: u64,
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
        write!(f, "id={} gpu={} xid={}", self.id, self.gpu, self.xid)
    }
}

/// Parses one non-comment line.
fn parse_line(text: &str) -> Result<Injection, &'static str> {
    let fields: Vec<&str> = text.split(' ').collect();
    let [id, gpu, xid] = fields.as_slice() else {
        return Err("expected `id=<n> gpu=<index> xid=<code>`");
    };
    let id = number(id, "id=").ok_or("id is not an unsigned number")?;
    let gpu = number(gpu, "gpu=")
        .and_then(|gpu| u32::try_from(gpu).ok())
        .ok_or("gpu is not an unsigned 32-bit index")?;
    let xid = number(xid, "xid=").ok_or("xid is not an unsigned number")?;
    Ok(Injection { id, gpu, xid })
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

/// `existing` plus a new injection of `xid` on `gpu`, with an id above every existing one and
/// at least `now_nanos` (the time since the epoch), so ids stay unique across clears.
pub fn append(existing: &[Injection], gpu: u32, xid: u64, now_nanos: u64) -> Vec<Injection> {
    let above = existing
        .iter()
        .map(|injection| injection.id.saturating_add(1))
        .max()
        .unwrap_or(0);
    let mut all = existing.to_vec();
    all.push(Injection {
        id: above.max(now_nanos),
        gpu,
        xid,
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
                xid: 79,
            },
            Injection {
                id: u64::MAX,
                gpu: 3,
                xid: 48,
            },
        ];
        let text = format(&injections);
        assert_eq!(
            text,
            "id=1 gpu=0 xid=79\nid=18446744073709551615 gpu=3 xid=48\n"
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
                xid: 79
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
    }

    #[test]
    fn appended_ids_are_unique_and_follow_the_clock() {
        let first = append(&[], 1, 79, 1_000);
        assert_eq!(
            first,
            vec![Injection {
                id: 1_000,
                gpu: 1,
                xid: 79
            }]
        );
        // A clock that went backwards still gives a larger id.
        let second = append(&first, 2, 48, 10);
        assert_eq!(second[1].id, 1_001);
        assert_eq!(second[0], first[0]);
        // After a clear, the clock keeps ids above the cleared ones.
        let after_clear = append(&[], 0, 13, 5_000);
        assert_eq!(after_clear[0].id, 5_000);
    }
}
