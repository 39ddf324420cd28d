//! The floor's whole idea of HTTP: one fixed response per `\r\n\r\n`.
//!
//! Both engines share it, so they move exactly the same bytes and differ
//! only in how those bytes reach the kernel.

/// The one response. Same size and shape as a real TechEmpower plaintext
/// response (status line, Server, Content-Type, Content-Length, Date), so the
/// floor moves exactly as many bytes per request as a real server does. The
/// date is frozen on purpose: updating it is HTTP work, and the floor does none.
pub const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\n\
Server: peregrine\r\n\
Content-Type: text/plain\r\n\
Content-Length: 13\r\n\
Date: Sat, 21 Nov 2026 04:40:51 GMT\r\n\
\r\n\
Hello, World!";

use std::sync::LazyLock;

use memchr::memmem::Finder;

/// The end of a request head; each one found earns one response.
const TERMINATOR: &[u8] = b"\r\n\r\n";

/// Answers the heads completed by `fresh`, appending one response per head
/// to `out`. `partial` holds the unfinished head left by earlier reads and
/// keeps whatever `fresh` leaves unfinished.
pub fn answer(partial: &mut Vec<u8>, fresh: &[u8], out: &mut Vec<u8>) {
    if partial.is_empty() {
        // Common case: the read holds whole requests; never copy them.
        let consumed = respond_to(fresh, out);
        partial.extend_from_slice(&fresh[consumed..]);
    } else {
        // A request head was split across reads: search the joined bytes so
        // a terminator straddling the boundary is still found.
        partial.extend_from_slice(fresh);
        let consumed = respond_to(partial, out);
        partial.drain(..consumed);
    }
}

/// Appends one response per request head in `input` to `out` and returns how
/// many bytes of `input` those heads used (the rest is an unfinished request).
fn respond_to(input: &[u8], out: &mut Vec<u8>) -> usize {
    let mut consumed = 0;
    while let Some(at) = find(&input[consumed..]) {
        out.extend_from_slice(RESPONSE);
        consumed += at + TERMINATOR.len();
    }
    consumed
}

/// The terminator's searcher, built once: memchr's SIMD `memmem` scans a
/// 170-byte TFB request head in about 40 instructions; glibc's `memmem`
/// (two-way, not vectorized for short needles) took 800 (callgrind, `/json`
/// under wrk), which had made this floor 15% heavier in user space than
/// `floor.c`'s plain byte loop.
static TERMINATOR_FINDER: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(TERMINATOR));

fn find(haystack: &[u8]) -> Option<usize> {
    TERMINATOR_FINDER.find(haystack)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQ: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n";

    #[test]
    fn response_is_realistic_size() {
        // Status line + 4 headers + 13-byte body, as a real server sends.
        assert_eq!(RESPONSE.len(), 134);
        assert!(RESPONSE.ends_with(b"\r\n\r\nHello, World!"));
    }

    #[test]
    fn sixteen_pipelined_requests_get_sixteen_responses() {
        let input = REQ.repeat(16);
        let mut out = Vec::new();
        assert_eq!(respond_to(&input, &mut out), input.len());
        assert_eq!(out, RESPONSE.repeat(16));
    }

    #[test]
    fn partial_request_is_left_for_the_next_read() {
        let mut input = REQ.repeat(2);
        input.extend_from_slice(b"GET / HTTP/1.1\r\n\r");
        let mut out = Vec::new();
        assert_eq!(respond_to(&input, &mut out), REQ.len() * 2);
        assert_eq!(out.len(), RESPONSE.len() * 2);
    }

    #[test]
    fn a_terminator_split_across_reads_is_found() {
        let (mut partial, mut out) = (Vec::new(), Vec::new());
        let input = REQ.repeat(3);
        // Every split point, including inside a terminator.
        for cut in 0..input.len() {
            partial.clear();
            out.clear();
            answer(&mut partial, &input[..cut], &mut out);
            answer(&mut partial, &input[cut..], &mut out);
            assert_eq!((out.len(), partial.len()), (RESPONSE.len() * 3, 0), "split at {cut}");
        }
    }
}
