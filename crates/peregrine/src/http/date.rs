//! The `Date` header block, formatted once a second per worker.
//!
//! Formatting an IMF-fixdate costs far more than copying 39 bytes, so each
//! worker keeps the whole tail of a response head — `Date: ...\r\n\r\n` —
//! ready to copy, and a timer aligned to the wall-clock second rebuilds it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Length of `Date: Sat, 21 Nov 2026 04:40:51 GMT\r\n\r\n`.
pub(crate) const DATE_BLOCK_LEN: usize = 39;

/// The end of every response head: the `Date` line and the blank line.
pub type DateBlock = [u8; DATE_BLOCK_LEN];

/// Builds the block for `now`.
pub fn date_block(now: SystemTime) -> DateBlock {
    let mut block = [0u8; DATE_BLOCK_LEN];
    block[..6].copy_from_slice(b"Date: ");
    let formatted = httpdate::fmt_http_date(now);
    // IMF-fixdate is always 29 bytes for years 1000..=9999, which is every
    // year a clock on a running server reports.
    let date = formatted.as_bytes();
    let n = date.len().min(29);
    block[6..6 + n].copy_from_slice(&date[..n]);
    block[35..].copy_from_slice(b"\r\n\r\n");
    block
}

/// Time until the next wall-clock second starts, plus a millisecond so the
/// timer never wakes a hair early and formats the old second again.
pub(crate) fn until_next_second(now: SystemTime) -> Duration {
    let sub = now.duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    Duration::from_nanos(u64::from(1_000_000_000 - sub) + 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_is_imf_fixdate() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_236_051);
        let block = date_block(t);
        assert_eq!(&block[..], b"Date: Sat, 21 Nov 2026 04:40:51 GMT\r\n\r\n");
    }

    #[test]
    fn next_second_is_within_a_second() {
        let t = UNIX_EPOCH + Duration::from_millis(1_795_236_051_250);
        let d = until_next_second(t);
        assert_eq!(d, Duration::from_millis(751));
    }
}
