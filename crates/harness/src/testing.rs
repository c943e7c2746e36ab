//! Helpers the unit tests share.

/// Fails the test unless `text` contains `part`, showing the whole text.
#[track_caller]
pub fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{part:?} is not in:\n{text}");
}
