//! The substitute `/proc/devices` that advertises the two IMEX majors.
//!
//! The DRA compute-domain plugin finds the IMEX channel major by reading a
//! `/proc/devices`-shaped file (`ALT_PROC_DEVICES_PATH`), because runc refuses a
//! bind mount over the real one.
//! [`render`] takes the host kernel's `/proc/devices`, checks that the chosen
//! majors are free there, and appends two character-device lines:
//!
//! ```text
//! 240 nvidia-caps-imex-channels
//! 241 nvidia-caps
//! ```
//!
//! Rendering is idempotent: rendering its own output again with the same majors
//! gives the same bytes, and a new major replaces the old entry.
//!
//! ```
//! use node_layout::proc_devices::{render, DeviceMajor};
//!
//! let host = "Character devices:\n  1 mem\n\nBlock devices:\n  7 loop\n";
//! let channels = DeviceMajor::new(240).unwrap();
//! let caps = DeviceMajor::new(241).unwrap();
//! let out = render(host, channels, caps).unwrap();
//! assert_eq!(
//!     out,
//!     "Character devices:\n  1 mem\n240 nvidia-caps-imex-channels\n241 nvidia-caps\n\nBlock devices:\n  7 loop\n"
//! );
//! assert_eq!(render(&out, channels, caps).unwrap(), out);
//! ```

use std::{collections::BTreeMap, fmt, str::FromStr};

/// The device name of the IMEX channel major.
pub const CHANNELS_NAME: &str = "nvidia-caps-imex-channels";

/// The device name of the NVIDIA capabilities major.
pub const CAPS_NAME: &str = "nvidia-caps";

/// The smallest major [`DeviceMajor`] accepts.
pub const MIN_MAJOR: u32 = 1;

/// The largest major [`DeviceMajor`] accepts (12 bits, as `/proc/devices` lists them).
pub const MAX_MAJOR: u32 = 4095;

const CHARACTER_HEADER: &str = "Character devices:";
const BLOCK_HEADER: &str = "Block devices:";

/// Why a substitute `/proc/devices` cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A major outside 1..4095.
    #[error(
        "device major {value} is out of range: choose a major from {MIN_MAJOR} to {MAX_MAJOR}"
    )]
    MajorOutOfRange {
        /// The rejected value.
        value: u64,
    },
    /// A major that is not a number.
    #[error(
        "device major {text:?} is not a number: choose a major from {MIN_MAJOR} to {MAX_MAJOR}"
    )]
    MajorNotANumber {
        /// The rejected text.
        text: String,
    },
    /// The channel and caps majors are the same.
    #[error(
        "the {CHANNELS_NAME} and {CAPS_NAME} majors are both {major}: choose two different majors"
    )]
    EqualMajors {
        /// The shared major.
        major: u32,
    },
    /// The source already binds the major to a different device name.
    #[error(
        "device major {major} is already assigned to \"{owner}\", refusing to reuse it for {name}"
    )]
    MajorInUse {
        /// The requested major.
        major: u32,
        /// The name the source binds it to (its first binding).
        owner: String,
        /// The name the major was requested for.
        name: &'static str,
    },
    /// The source has no `Character devices:` line.
    #[error("the source has no \"{CHARACTER_HEADER}\" line: is it a /proc/devices file?")]
    MissingCharacterSection,
    /// The source has no `Block devices:` line.
    #[error("the source has no \"{BLOCK_HEADER}\" line: is it a /proc/devices file?")]
    MissingBlockSection,
    /// `Block devices:` comes before `Character devices:`.
    #[error("\"{BLOCK_HEADER}\" comes before \"{CHARACTER_HEADER}\" in the source: the file is malformed")]
    BlockBeforeCharacter,
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A device major number in 1..4095.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceMajor(u32);

impl DeviceMajor {
    /// Validates a major.
    pub fn new(value: u32) -> Result<Self> {
        if !(MIN_MAJOR..=MAX_MAJOR).contains(&value) {
            return Err(Error::MajorOutOfRange {
                value: u64::from(value),
            });
        }
        Ok(Self(value))
    }

    /// The number.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for DeviceMajor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for DeviceMajor {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let value: u64 = match text.trim().parse() {
            Ok(value) => value,
            Err(_) => {
                return Err(Error::MajorNotANumber {
                    text: text.to_owned(),
                })
            }
        };
        match u32::try_from(value) {
            Ok(value) => Self::new(value),
            Err(_) => Err(Error::MajorOutOfRange { value }),
        }
    }
}

/// Renders the substitute `/proc/devices` from the host's `source`.
///
/// Rejects majors bound in `source` (character or block section, first binding
/// wins) to a name other than the one they are requested for, equal majors, and
/// a source without both section headers in order.
pub fn render(source: &str, channel_major: DeviceMajor, caps_major: DeviceMajor) -> Result<String> {
    if channel_major == caps_major {
        return Err(Error::EqualMajors {
            major: channel_major.get(),
        });
    }
    let sections = split_sections(source)?;
    let used = bindings(sections.bound);
    for (major, name) in [(channel_major, CHANNELS_NAME), (caps_major, CAPS_NAME)] {
        if let Some(owner) = used.get(&major.get()) {
            if owner != name {
                return Err(Error::MajorInUse {
                    major: major.get(),
                    owner: owner.clone(),
                    name,
                });
            }
        }
    }

    let kept: String = sections
        .before_block
        .split_inclusive('\n')
        .filter(|line| !matches!(parse_binding(line), Some((_, name)) if name == CHANNELS_NAME || name == CAPS_NAME))
        .collect();
    let mut out = kept.trim_end().to_owned();
    out.push_str(&format!(
        "\n{:3} {CHANNELS_NAME}\n{:3} {CAPS_NAME}\n\n",
        channel_major.get(),
        caps_major.get()
    ));
    out.push_str(sections.block);
    Ok(out)
}

/// Every major bound in the character and block sections of `source`, with the
/// name of its first binding.
///
/// Used to pick majors that are free on a host.
pub fn used_majors(source: &str) -> Result<BTreeMap<u32, String>> {
    let sections = split_sections(source)?;
    Ok(bindings(sections.bound))
}

/// The two smallest majors at or above `from` that no source binds, for the
/// channels and the caps, in that order.
///
/// Returns `None` when 4095 is reached first.
pub fn free_major_pair(
    sources: &[&str],
    from: DeviceMajor,
) -> Result<Option<(DeviceMajor, DeviceMajor)>> {
    let mut used = BTreeMap::new();
    for source in sources {
        used.extend(used_majors(source)?);
    }
    let mut free = (from.get()..=MAX_MAJOR)
        .filter(|major| !used.contains_key(major))
        .map(DeviceMajor);
    Ok(free.next().zip(free.next()))
}

struct Sections<'a> {
    /// Everything before the `Block devices:` line.
    before_block: &'a str,
    /// The character and block sections, headers excluded from matching.
    bound: &'a str,
    /// From the `Block devices:` line to the end.
    block: &'a str,
}

fn split_sections(source: &str) -> Result<Sections<'_>> {
    let character = header_offset(source, CHARACTER_HEADER);
    let block = header_offset(source, BLOCK_HEADER);
    let (character, block) = match (character, block) {
        (None, _) => return Err(Error::MissingCharacterSection),
        (Some(_), None) => return Err(Error::MissingBlockSection),
        (Some(character), Some(block)) => (character, block),
    };
    if block < character {
        return Err(Error::BlockBeforeCharacter);
    }
    Ok(Sections {
        before_block: &source[..block],
        bound: &source[character..],
        block: &source[block..],
    })
}

/// The byte offset of the first line that is exactly `header` (trailing whitespace allowed).
fn header_offset(source: &str, header: &str) -> Option<usize> {
    let mut offset = 0;
    for line in source.split_inclusive('\n') {
        if line.trim_end() == header {
            return Some(offset);
        }
        offset += line.len();
    }
    None
}

fn bindings(text: &str) -> BTreeMap<u32, String> {
    let mut used = BTreeMap::new();
    for (major, name) in text.lines().filter_map(parse_binding) {
        used.entry(major).or_insert_with(|| name.to_owned());
    }
    used
}

/// Parses a `^\s*<n> +<name>\s*$` line.
fn parse_binding(line: &str) -> Option<(u32, &str)> {
    let line = line.trim();
    let (number, rest) = line.split_once(' ')?;
    let name = rest.trim_start_matches(' ');
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    Some((number.parse().ok()?, name))
}

#[cfg(test)]
mod tests {
    //! Golden cases: `proc_devices/<case>.in` renders to `proc_devices/<case>.out`
    //! (refresh with `UPDATE_EXPECT=1`); rejections name the owner.

    use std::path::PathBuf;

    use super::*;

    fn major(value: u32) -> DeviceMajor {
        DeviceMajor::new(value).unwrap_or_else(|err| panic!("{err}"))
    }

    fn fixture_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/proc_devices")
    }

    fn fixture(name: &str) -> String {
        let path = fixture_dir().join(name);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
    }

    /// The message of the error that rendering `input` with these majors fails with, if any.
    fn render_error(input: &str, channels: u32, caps: u32) -> Option<String> {
        render(input, major(channels), major(caps))
            .err()
            .map(|err| err.to_string())
    }

    /// Renders `<case>.in` and compares with `<case>.out`, showing both on a mismatch.
    fn check_golden(case: &str, channels: u32, caps: u32) -> String {
        let input = fixture(&format!("{case}.in"));
        let actual = render(&input, major(channels), major(caps))
            .unwrap_or_else(|err| panic!("{case}: {err}"));
        let out_path = fixture_dir().join(format!("{case}.out"));
        if std::env::var_os("UPDATE_EXPECT").is_some() {
            std::fs::write(&out_path, &actual)
                .unwrap_or_else(|err| panic!("cannot write {}: {err}", out_path.display()));
        }
        let expected = fixture(&format!("{case}.out"));
        assert!(
            actual == expected,
            "{case}: rendered output differs from {}\n--- expected\n{expected}--- actual\n{actual}--- (UPDATE_EXPECT=1 refreshes it)",
            out_path.display()
        );
        actual
    }

    fn regex_like_match(text: &str, name: &str) -> Option<u32> {
        // `(?s)Character devices:.*?([0-9]+) <name>\n.*Block devices:`, the DRA driver's regex.
        let character = text.find(CHARACTER_HEADER)?;
        let block = text.rfind(BLOCK_HEADER)?;
        let needle = format!(" {name}\n");
        let at = text[character..].find(&needle)? + character;
        if at > block {
            return None;
        }
        let digits: String = text[..at]
            .chars()
            .rev()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.chars().rev().collect::<String>().parse().ok()
    }

    #[test]
    fn real_host_sample_renders_to_golden() {
        let out = check_golden("debian-host", 240, 241);
        assert_eq!(regex_like_match(&out, CHANNELS_NAME), Some(240));
        assert_eq!(regex_like_match(&out, CAPS_NAME), Some(241));
    }

    #[test]
    fn rendering_is_idempotent_with_one_entry_per_name() {
        let once = check_golden("debian-host", 240, 241);
        let twice = render(&once, major(240), major(241)).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(once, twice);
        assert_eq!(once.matches(&format!(" {CHANNELS_NAME}\n")).count(), 1);
        assert_eq!(once.matches(&format!(" {CAPS_NAME}\n")).count(), 1);
    }

    #[test]
    fn a_new_major_replaces_the_previous_entry() {
        let once = check_golden("debian-host", 240, 241);
        let moved = render(&once, major(300), major(241)).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(regex_like_match(&moved, CHANNELS_NAME), Some(300));
        assert!(
            !moved.contains("240 "),
            "the old channel major is still listed:\n{moved}"
        );
        assert_eq!(moved.matches(CHANNELS_NAME).count(), 1);
    }

    #[test]
    fn existing_entries_are_preserved_and_new_ones_precede_the_block_section() {
        let input = fixture("debian-host.in");
        let out = check_golden("debian-host", 240, 241);
        for line in input.lines() {
            assert!(out.lines().any(|it| it == line), "lost line {line:?}");
        }
        let block = out.find(BLOCK_HEADER).unwrap_or_default();
        assert!(out.find(CHANNELS_NAME).unwrap_or(usize::MAX) < block);
        assert!(out.find(CAPS_NAME).unwrap_or(usize::MAX) < block);
    }

    #[test]
    fn small_majors_are_right_aligned_to_width_three() {
        let out = check_golden("minimal", 7, 42);
        assert!(out.contains("\n  7 nvidia-caps-imex-channels\n 42 nvidia-caps\n\nBlock devices:"));
    }

    #[test]
    fn a_major_in_use_is_rejected_naming_the_owner() {
        let host = fixture("debian-host.in");
        let rendered = check_golden("debian-host", 240, 241);
        for (case, input, channels, caps, expected) in [
            ("another character device", &host, 245, 241, "device major 245 is already assigned to \"hidraw\", refusing to reuse it for nvidia-caps-imex-channels"),
            ("a block device", &host, 240, 259, "device major 259 is already assigned to \"blkext\", refusing to reuse it for nvidia-caps"),
            ("swapped rendered majors", &rendered, 241, 240, "device major 241 is already assigned to \"nvidia-caps\", refusing to reuse it for nvidia-caps-imex-channels"),
        ] {
            assert_eq!(
                render_error(input, channels, caps).as_deref(),
                Some(expected),
                "{case}"
            );
        }
    }

    #[test]
    fn the_first_binding_of_a_major_is_its_owner() {
        // 253 is `dimmctl` (character) before `zram` (block); 5 is `/dev/tty` first.
        let input = fixture("debian-host.in");
        let err = render(&input, major(253), major(241)).err();
        assert_eq!(
            err,
            Some(Error::MajorInUse {
                major: 253,
                owner: "dimmctl".to_owned(),
                name: CHANNELS_NAME
            })
        );
        let used = used_majors(&input).unwrap_or_default();
        assert_eq!(used.get(&5).map(String::as_str), Some("/dev/tty"));
    }

    #[test]
    fn rejects_equal_majors() {
        let input = fixture("debian-host.in");
        assert_eq!(
            render(&input, major(240), major(240)).err(),
            Some(Error::EqualMajors { major: 240 })
        );
    }

    #[test]
    fn rejects_out_of_range_majors() {
        assert_eq!(
            DeviceMajor::new(0).err(),
            Some(Error::MajorOutOfRange { value: 0 })
        );
        assert_eq!(
            DeviceMajor::new(4096).err(),
            Some(Error::MajorOutOfRange { value: 4096 })
        );
        assert_eq!(
            "99999999999".parse::<DeviceMajor>().err(),
            Some(Error::MajorOutOfRange {
                value: 99_999_999_999
            })
        );
        assert!(matches!(
            "abc".parse::<DeviceMajor>(),
            Err(Error::MajorNotANumber { .. })
        ));
        assert_eq!(
            "4095".parse::<DeviceMajor>().map(DeviceMajor::get),
            Ok(4095)
        );
        assert_eq!(" 1\n".parse::<DeviceMajor>().map(DeviceMajor::get), Ok(1));
        assert_eq!(
            DeviceMajor::new(0).err().map(|err| err.to_string()),
            Some("device major 0 is out of range: choose a major from 1 to 4095".to_owned())
        );
    }

    #[test]
    fn rejects_malformed_structure() {
        let (a, b) = (major(240), major(241));
        assert_eq!(
            render("Block devices:\n  7 loop\n", a, b).err(),
            Some(Error::MissingCharacterSection)
        );
        assert_eq!(
            render("Character devices:\n  1 mem\n", a, b).err(),
            Some(Error::MissingBlockSection)
        );
        assert_eq!(
            render(
                "Block devices:\n  7 loop\n\nCharacter devices:\n  1 mem\n",
                a,
                b
            )
            .err(),
            Some(Error::BlockBeforeCharacter)
        );
        assert_eq!(render("", a, b).err(), Some(Error::MissingCharacterSection));
    }

    #[test]
    fn free_majors_skip_every_source() {
        let host = fixture("debian-host.in");
        let other = "Character devices:\n240 foo\n\nBlock devices:\n242 bar\n";
        let pair = free_major_pair(&[&host, other], major(240)).unwrap_or_default();
        assert_eq!(pair, Some((major(241), major(243))));
        assert_eq!(
            free_major_pair(&[&host], major(4095)).unwrap_or_default(),
            None
        );
    }

    #[test]
    fn binding_lines_follow_the_upstream_pattern() {
        assert_eq!(parse_binding("  1 mem\n"), Some((1, "mem")));
        assert_eq!(parse_binding("136   pts  "), Some((136, "pts")));
        assert_eq!(parse_binding("Character devices:"), None);
        assert_eq!(parse_binding("12 two words"), None);
        assert_eq!(parse_binding("x1 mem"), None);
        assert_eq!(parse_binding("7"), None);
    }
}
