//! Timestamps in the form `-N -j` and the log use: `M/D/YYYY HH:MM:SS.mmm`
//! (UTC, no zero padding on month and day).

use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Datelike, Timelike, Utc};

/// Now, formatted.
pub fn now() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format_millis(since.as_millis() as i64)
}

/// Milliseconds since the epoch, formatted (proleptic Gregorian). Beyond
/// chrono's range (about 262000 years either side) the text saturates at its
/// first or last millisecond.
pub fn format_millis(millis: i64) -> String {
    let at = DateTime::from_timestamp_millis(millis).unwrap_or(if millis < 0 {
        DateTime::<Utc>::MIN_UTC
    } else {
        DateTime::<Utc>::MAX_UTC
    });
    format!(
        "{}/{}/{} {:02}:{:02}:{:02}.{:03}",
        at.month(),
        at.day(),
        at.year(),
        at.hour(),
        at.minute(),
        at.second(),
        at.timestamp_subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_the_documented_sample() {
        // 2026-09-04 00:37:39.905 UTC, the reference's sample.
        assert_eq!(format_millis(1_788_482_259_905), "9/4/2026 00:37:39.905");
        assert_eq!(format_millis(0), "1/1/1970 00:00:00.000");
        assert_eq!(format_millis(951_782_400_000), "2/29/2000 00:00:00.000");
        assert_eq!(format_millis(-1), "12/31/1969 23:59:59.999");
    }
}
