//! What a well-formed response looks like beyond being delimitable: the
//! rules the library's integration tests hold every peregrine response to
//! (the verifier checks the same rules one by one, with its own messages).
//!
//! Each function returns the problems it finds, empty when there are none,
//! so a caller can assert, report or count as it likes.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::date::parse_imf_fixdate;
use crate::message::is_token;
use crate::parse::Head;

/// Largest difference allowed between a response's `Date` and the client's
/// clock (the date is whole seconds; slack for a loaded machine).
pub const DATE_SKEW: Duration = Duration::from_secs(5);

/// Syntax: an `HTTP/1.1` status line with a reason phrase, CRLF line ends,
/// and every header line `Name: value` with a token name and no stray
/// whitespace around the value.
pub fn head_problems(head: &Head) -> Vec<String> {
    let mut problems = head.defects.clone();
    let text = head.raw_text();
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    if head.version != "HTTP/1.1" {
        problems.push(format!("status line {status_line:?} is not HTTP/1.1"));
    }
    if head.reason.is_empty() {
        problems.push(format!("no reason phrase in {status_line:?}"));
    }
    for line in lines.take_while(|l| !l.is_empty()) {
        match line.split_once(": ") {
            None => problems.push(format!("bad header line {line:?}")),
            Some((name, value)) => {
                if !is_token(name) {
                    problems.push(format!("bad header name in {line:?}"));
                }
                if value != value.trim() {
                    problems.push(format!("header value has stray whitespace: {line:?}"));
                }
            }
        }
    }
    problems
}

/// An interim (1xx) response is a bare status line.
pub fn interim_problems(head: &Head) -> Vec<String> {
    if head.headers.is_empty() {
        Vec::new()
    } else {
        vec![format!("interim response with headers: {:?}", head.raw_text())]
    }
}

/// What every final response must carry: `Server`, `Date` (IMF-fixdate,
/// within [`DATE_SKEW`] of `now`), `Content-Type` and a decimal
/// `Content-Length`, each exactly once, and no `Transfer-Encoding`.
pub fn final_problems(head: &Head, now: SystemTime) -> Vec<String> {
    let mut problems = Vec::new();
    // 204 and 304 carry no content: 204 must not send Content-Length (RFC
    // 9110 §8.6) and has no content to type; 304 may repeat both.
    let bodiless = head.status == 204 || head.status == 304;
    // A streamed body is chunked instead of sized: exactly one of the two.
    let chunked = head.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    for name in ["Server", "Date", "Content-Type", "Content-Length"] {
        let optional = (bodiless && (name == "Content-Type" || name == "Content-Length"))
            || (chunked && name == "Content-Length");
        match head.header_all(name).count() {
            0 if optional => {}
            0 => problems.push(format!("no {name} header")),
            1 => {}
            n => problems.push(format!("header {name} appears {n} times")),
        }
    }
    if head.status == 204 {
        for name in ["Content-Length", "Content-Type"] {
            if head.header(name).is_some() {
                problems.push(format!("204 with a {name} header"));
            }
        }
    }
    match head.header("transfer-encoding") {
        None => {}
        Some(_) if !chunked => problems.push("Transfer-Encoding other than chunked".to_string()),
        Some(_) if head.header("content-length").is_some() => {
            problems.push("both Transfer-Encoding and Content-Length".to_string())
        }
        Some(_) if bodiless => problems.push(format!("{} with a Transfer-Encoding", head.status)),
        Some(_) => {}
    }
    if let Some(date) = head.header("date") {
        problems.extend(date_problem(date, now));
    }
    if let Some(length) = head.header("content-length") {
        if length.is_empty() || !length.bytes().all(|b| b.is_ascii_digit()) {
            problems.push(format!("bad Content-Length {length:?}"));
        }
    }
    problems
}

/// `Date` must be an IMF-fixdate within [`DATE_SKEW`] of `now`.
pub fn date_problem(value: &str, now: SystemTime) -> Option<String> {
    let at = match parse_imf_fixdate(value) {
        Ok(at) => at,
        Err(e) => return Some(format!("bad Date: {e}")),
    };
    let now = now.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    let skew = (now - at as f64).abs();
    (skew >= DATE_SKEW.as_secs_f64()).then(|| format!("Date {value:?} is {skew:.1} s away from now"))
}

/// Whatever is buffered after a response must be (the start of) the next
/// response: a wrong `Content-Length` would leave body bytes, or eat head
/// bytes, there.
pub fn leftover_problem(rest: &[u8]) -> Option<String> {
    const NEXT: &[u8] = b"HTTP/1.1 ";
    let fine = rest.is_empty() || rest.starts_with(NEXT) || NEXT.starts_with(rest);
    (!fine).then(|| {
        format!(
            "bytes after the body are not a response: {:?}",
            String::from_utf8_lossy(&rest[..rest.len().min(80)])
        )
    })
}
