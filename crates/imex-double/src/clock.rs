//! Timestamps in the form `-N -j` and the log use: `M/D/YYYY HH:MM:SS.mmm`
//! (UTC, no zero padding on month and day).

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, formatted.
pub fn now() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format_millis(since.as_millis() as i64)
}

/// Milliseconds since the epoch, formatted.
pub fn format_millis(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let rest = millis.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{month}/{day}/{year} {:02}:{:02}:{:02}.{:03}",
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
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
    }
}
