//! IMF-fixdate (RFC 9110 §5.6.7), the only `Date` format a server may send.
//! One definition for every client that judges a `Date` header: the lab's
//! verifier and the library's integration tests.
//!
//! Validation is strict on purpose: fixed width, English names, `GMT`, a
//! real calendar date, and a day name that matches it. A server that caches
//! its date line and corrupts it (a torn write, a wrong weekday from hand
//! arithmetic) is exactly what this catches.

const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS: [&str; 12] =
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// Parses `Sun, 06 Nov 1994 08:49:37 GMT` into Unix seconds.
pub fn parse_imf_fixdate(s: &str) -> Result<i64, String> {
    let bad = |why: &str| format!("{s:?} is not an IMF-fixdate ({why})");
    let b = s.as_bytes();
    if b.len() != 29 {
        return Err(bad("must be exactly 29 characters"));
    }
    let layout_ok = b[3] == b','
        && b[4] == b' '
        && b[7] == b' '
        && b[11] == b' '
        && b[16] == b' '
        && b[19] == b':'
        && b[22] == b':'
        && &b[25..] == b" GMT";
    if !layout_ok {
        return Err(bad("layout must be `Www, DD Mmm YYYY HH:MM:SS GMT`"));
    }
    let weekday =
        DAYS.iter().position(|d| d.as_bytes() == &b[0..3]).ok_or_else(|| bad("unknown day name"))?;
    let month =
        MONTHS.iter().position(|m| m.as_bytes() == &b[8..11]).ok_or_else(|| bad("unknown month name"))?
            as u32
            + 1;
    let num = |range: std::ops::Range<usize>| -> Result<u32, String> {
        let part = &b[range];
        if part.iter().all(u8::is_ascii_digit) {
            Ok(part.iter().fold(0, |acc, &d| acc * 10 + u32::from(d - b'0')))
        } else {
            Err(bad("non-digit in a number field"))
        }
    };
    let day = num(5..7)?;
    let year = num(12..16)?;
    let (hour, minute, second) = (num(17..19)?, num(20..22)?, num(23..25)?);
    if day == 0 || day > days_in_month(year, month) {
        return Err(bad("no such day in that month"));
    }
    // 60 is allowed for a leap second, as RFC 5322 time-of-day allows.
    if hour > 23 || minute > 59 || second > 60 {
        return Err(bad("time of day out of range"));
    }
    let days = days_from_civil(i64::from(year), month, day);
    if weekday_of(days) != weekday {
        return Err(bad(&format!("day name should be {}", DAYS[weekday_of(days)])));
    }
    Ok(days * 86_400 + i64::from(hour * 3600 + minute * 60 + second))
}

/// Formats Unix seconds as IMF-fixdate (for test servers and messages).
pub fn format_imf_fixdate(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        DAYS[weekday_of(days)],
        d,
        MONTHS[(m - 1) as usize],
        y,
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

fn is_leap(year: u32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// 0 = Sunday; day 0 (1970-01-01) was a Thursday.
fn weekday_of(days: i64) -> usize {
    (days + 4).rem_euclid(7) as usize
}

/// Days since 1970-01-01 of a proleptic Gregorian date, counting in 400-year
/// eras that start on 1 March so the leap day falls at the end of a year.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let shifted_month = i64::from((month + 9) % 12); // March = 0
    let day_of_year = (153 * shifted_month + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_dates() {
        assert_eq!(parse_imf_fixdate("Thu, 01 Jan 1970 00:00:00 GMT"), Ok(0));
        assert_eq!(parse_imf_fixdate("Sun, 06 Nov 1994 08:49:37 GMT"), Ok(784_111_777));
        assert!(parse_imf_fixdate("Sat, 21 Nov 2026 04:40:51 GMT").is_ok());
        assert!(parse_imf_fixdate("Tue, 29 Feb 2000 12:00:00 GMT").is_ok());
    }

    #[test]
    fn rejects_near_misses() {
        for bad in [
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Mon, 06 Nov 1994 08:49:37 GMT", // wrong weekday
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "sun, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Thu, 29 Feb 2001 00:00:00 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT ",
            "Sun, 06 Nov 1994 08:4a:37 GMT",
            "",
        ] {
            assert!(parse_imf_fixdate(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn format_round_trips() {
        for t in [0, 784_111_777, 1_795_236_051, 951_782_400, 4_102_444_799] {
            let s = format_imf_fixdate(t);
            assert_eq!(parse_imf_fixdate(&s), Ok(t), "{s}");
        }
    }
}
