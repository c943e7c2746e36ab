//! The IMEX channel selector: the value of the `imex-channels` pod annotation.
//!
//! | value (trimmed) | meaning |
//! |---|---|
//! | `true` (any case) | every staged channel ([`ChannelSelector::All`]) |
//! | `false` (any case) or empty | no channel ([`ChannelSelector::None`]) |
//! | `0`, `0-3`, `0,5`, `0-3,7` | exactly those indices ([`ChannelSelector::Some`]) |
//!
//! Items of a list are trimmed, ranges are inclusive, duplicates and overlaps
//! are fine.
//! Anything else is an [`Error`] naming the offending item.
//! Indices above [`MAX_CHANNEL_INDEX`] are rejected so that a typo such as
//! `0-4000000000` cannot make the caller build a huge set.

use std::collections::BTreeSet;
use std::str::FromStr;

/// The largest channel index a selector may name.
pub const MAX_CHANNEL_INDEX: u32 = 65_535;

/// Which IMEX channels a container asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelSelector {
    /// No channel: the annotation is absent, empty or `false`.
    None,
    /// Every channel that is staged on the node.
    All,
    /// Only these channel indices (never empty).
    Some(BTreeSet<u32>),
}

/// Why an annotation value is not a channel selector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A list item is empty, as in `0,,1` or `0,`.
    #[error("empty item in channel list {value:?}: use `true`, `false` or indices such as `0`, `0-3`, `0,5`")]
    EmptyItem {
        /// The whole annotation value.
        value: String,
    },
    /// An item is neither an index nor a range of indices.
    #[error("{item:?} is not a channel index or range: use `true`, `false` or indices such as `0`, `0-3`, `0,5`")]
    Malformed {
        /// The offending item.
        item: String,
    },
    /// A range ends before it starts, as in `3-0`.
    #[error("channel range {item:?} ends before it starts: write it as low-high")]
    Reversed {
        /// The offending item.
        item: String,
    },
    /// An index is larger than [`MAX_CHANNEL_INDEX`].
    #[error("channel index in {item:?} is above the maximum {max}")]
    TooLarge {
        /// The offending item.
        item: String,
        /// The largest index allowed.
        max: u32,
    },
}

impl ChannelSelector {
    /// Whether the selector asks for channel `index`.
    pub fn selects(&self, index: u32) -> bool {
        match self {
            Self::None => false,
            Self::All => true,
            Self::Some(indices) => indices.contains(&index),
        }
    }
}

impl FromStr for ChannelSelector {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let trimmed = value.trim();
        if trimmed.is_empty() || trimmed.eq_ignore_ascii_case("false") {
            return Ok(Self::None);
        }
        if trimmed.eq_ignore_ascii_case("true") {
            return Ok(Self::All);
        }
        let mut indices = BTreeSet::new();
        for raw_item in trimmed.split(',') {
            let item = raw_item.trim();
            if item.is_empty() {
                return Err(Error::EmptyItem {
                    value: value.to_owned(),
                });
            }
            let (low, high) = match item.split_once('-') {
                Some((low, high)) => (parse_index(low, item)?, parse_index(high, item)?),
                None => {
                    let index = parse_index(item, item)?;
                    (index, index)
                }
            };
            if high < low {
                return Err(Error::Reversed {
                    item: item.to_owned(),
                });
            }
            indices.extend(low..=high);
        }
        Ok(Self::Some(indices))
    }
}

/// One index of `item`: plain decimal digits, at most [`MAX_CHANNEL_INDEX`].
fn parse_index(text: &str, item: &str) -> Result<u32, Error> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return Err(Error::Malformed {
            item: item.to_owned(),
        });
    }
    let too_large = || Error::TooLarge {
        item: item.to_owned(),
        max: MAX_CHANNEL_INDEX,
    };
    let index: u64 = text.parse().map_err(|_| too_large())?;
    match u32::try_from(index) {
        Ok(index) if index <= MAX_CHANNEL_INDEX => Ok(index),
        _ => Err(too_large()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(indices: &[u32]) -> ChannelSelector {
        ChannelSelector::Some(indices.iter().copied().collect())
    }

    #[test]
    fn keywords() {
        for value in ["true", "TRUE", " True ", "tRuE"] {
            assert_eq!(value.parse(), Ok(ChannelSelector::All), "{value:?}");
        }
        for value in ["false", "FALSE", " False", "", "   "] {
            assert_eq!(value.parse(), Ok(ChannelSelector::None), "{value:?}");
        }
    }

    #[test]
    fn index_lists_and_ranges() {
        let cases: [(&str, &[u32]); 8] = [
            ("0", &[0]),
            ("7", &[7]),
            ("0-3", &[0, 1, 2, 3]),
            ("0,5", &[0, 5]),
            ("0-3,7", &[0, 1, 2, 3, 7]),
            (" 2 - 3 , 0 ", &[0, 2, 3]),
            ("1-1,1,0-1", &[0, 1]),
            ("65535", &[65_535]),
        ];
        for (value, expected) in cases {
            assert_eq!(value.parse(), Ok(some(expected)), "{value:?}");
        }
    }

    #[test]
    fn errors_name_the_bad_item() {
        let cases = [
            (
                "0,,1",
                Error::EmptyItem {
                    value: "0,,1".into(),
                },
            ),
            ("0,", Error::EmptyItem { value: "0,".into() }),
            ("yes", Error::Malformed { item: "yes".into() }),
            ("0,x", Error::Malformed { item: "x".into() }),
            ("-1", Error::Malformed { item: "-1".into() }),
            ("1-", Error::Malformed { item: "1-".into() }),
            (
                "1-2-3",
                Error::Malformed {
                    item: "1-2-3".into(),
                },
            ),
            ("+1", Error::Malformed { item: "+1".into() }),
            ("3-0", Error::Reversed { item: "3-0".into() }),
            (
                "0-65536",
                Error::TooLarge {
                    item: "0-65536".into(),
                    max: MAX_CHANNEL_INDEX,
                },
            ),
            (
                "99999999999999999999",
                Error::TooLarge {
                    item: "99999999999999999999".into(),
                    max: MAX_CHANNEL_INDEX,
                },
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(value.parse::<ChannelSelector>(), Err(expected), "{value:?}");
        }
        let message = "0,x"
            .parse::<ChannelSelector>()
            .err()
            .map(|err| err.to_string());
        assert_eq!(
            message.as_deref(),
            Some("\"x\" is not a channel index or range: use `true`, `false` or indices such as `0`, `0-3`, `0,5`")
        );
    }

    #[test]
    fn selects() {
        assert!(!ChannelSelector::None.selects(0));
        assert!(ChannelSelector::All.selects(4096));
        let selector = some(&[0, 5]);
        assert!(selector.selects(5));
        assert!(!selector.selects(1));
    }
}
