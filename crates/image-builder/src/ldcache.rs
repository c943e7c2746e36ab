//! The glibc loader cache (`/etc/ld.so.cache`): which file a soname resolves to.
//!
//! Pure: parses the bytes of the cache. Both layouts glibc writes are read: the
//! new format alone (glibc 2.32 and later) and the old format followed by the new one.

const OLD_MAGIC: &[u8] = b"ld.so-1.7.0";
const NEW_MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
/// magic(17) + version(3) + nlibs(4) + len_strings(4) + flags(1) + pad(3) + ext(4) + unused(12).
const NEW_HEADER_LEN: usize = 48;
/// flags(4) + key(4) + value(4) + osversion(4) + hwcap(8).
const NEW_ENTRY_LEN: usize = 24;
/// magic(11) + pad(1) + nlibs(4).
const OLD_HEADER_LEN: usize = 16;
/// flags(4) + key(4) + value(4).
const OLD_ENTRY_LEN: usize = 12;

/// One cache entry: a soname and the file it resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    /// The soname (`libc.so.6`).
    pub soname: String,
    /// The absolute path of the library.
    pub path: String,
    /// The entry flags (type in the low byte, architecture in the next).
    pub flags: i32,
}

/// Parses a loader cache; `Err` says what is malformed.
pub fn parse(bytes: &[u8]) -> Result<Vec<CacheEntry>, String> {
    let new_start = if bytes.starts_with(NEW_MAGIC) {
        0
    } else if bytes.starts_with(OLD_MAGIC) {
        let nlibs = read_u32(bytes, OLD_MAGIC.len() + 1)? as usize;
        let end = OLD_HEADER_LEN + nlibs * OLD_ENTRY_LEN;
        // The new cache follows, aligned for its 8-byte fields.
        let aligned = end.div_ceil(8) * 8;
        match bytes
            .get(aligned..)
            .is_some_and(|rest| rest.starts_with(NEW_MAGIC))
        {
            true => aligned,
            false => return Err("old-format cache without a new-format section".to_owned()),
        }
    } else {
        return Err("not a glibc loader cache (unknown magic)".to_owned());
    };
    let cache = &bytes[new_start..];
    let nlibs = read_u32(cache, NEW_MAGIC.len())? as usize;
    let mut entries = Vec::with_capacity(nlibs);
    for idx in 0..nlibs {
        let at = NEW_HEADER_LEN + idx * NEW_ENTRY_LEN;
        let flags = read_u32(cache, at)? as i32;
        let key = read_u32(cache, at + 4)? as usize;
        let value = read_u32(cache, at + 8)? as usize;
        // In the new format, string offsets are relative to the new header.
        entries.push(CacheEntry {
            soname: read_str(cache, key)?,
            path: read_str(cache, value)?,
            flags,
        });
    }
    Ok(entries)
}

fn read_u32(bytes: &[u8], at: usize) -> Result<u32, String> {
    match bytes.get(at..at + 4) {
        Some(&[b0, b1, b2, b3]) => Ok(u32::from_ne_bytes([b0, b1, b2, b3])),
        _ => Err(format!("truncated cache: no 4 bytes at offset {at}")),
    }
}

fn read_str(bytes: &[u8], at: usize) -> Result<String, String> {
    let rest = bytes
        .get(at..)
        .ok_or_else(|| format!("string offset {at} is past the end of the cache"))?;
    let len = rest
        .iter()
        .position(|byte| *byte == 0)
        .ok_or_else(|| format!("unterminated string at offset {at}"))?;
    String::from_utf8(rest[..len].to_vec())
        .map_err(|_| format!("string at offset {at} is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// The real peer: `ldconfig -p` prints the same cache; both must agree entry for entry.
    #[test]
    fn agrees_with_ldconfig() {
        let bytes = std::fs::read("/etc/ld.so.cache")
            .expect("/etc/ld.so.cache is missing: run `ldconfig` as root to create it");
        let entries = parse(&bytes).expect("parse the host cache");
        let output = Command::new("ldconfig")
            .arg("-p")
            .current_dir("/")
            .output()
            .or_else(|_| {
                Command::new("/sbin/ldconfig")
                    .arg("-p")
                    .current_dir("/")
                    .output()
            })
            .expect("ldconfig is not installed (Debian package libc-bin)");
        let text = String::from_utf8_lossy(&output.stdout);
        let mut expected: Vec<(String, String)> = text
            .lines()
            .skip(1)
            .filter_map(|line| {
                let (left, path) = line.trim().split_once(" => ")?;
                let soname = left.split(" (").next()?;
                Some((soname.to_owned(), path.to_owned()))
            })
            .collect();
        let mut actual: Vec<(String, String)> = entries
            .into_iter()
            .map(|entry| (entry.soname, entry.path))
            .collect();
        expected.sort();
        actual.sort();
        assert!(!actual.is_empty());
        assert_eq!(actual, expected);
    }

    #[test]
    fn rejects_garbage_and_truncation() {
        assert!(parse(b"nope")
            .expect_err("garbage")
            .contains("unknown magic"));
        let mut bytes = NEW_MAGIC.to_vec();
        bytes.extend_from_slice(&5u32.to_ne_bytes());
        assert!(parse(&bytes).expect_err("truncated").contains("truncated"));
    }
}
