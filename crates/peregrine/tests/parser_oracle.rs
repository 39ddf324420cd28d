//! Differential test of peregrine's request-head parser against `httparse`.
//!
//! peregrine parses heads itself (see `http/parse.rs` for why). Being
//! stricter than `httparse` is fine; being more lenient could open a
//! request-smuggling gap, so: whenever peregrine accepts a head, `httparse`
//! must accept the same bytes with the same method, target, version, length
//! and header fields. Valid requests must be accepted by both. And every
//! compiled form of peregrine's parser (AVX2, SSSE3, baseline) that the CPU
//! can run must read each input the same way.

use peregrine::fuzzing::{header_slots, parse_head, parse_head_using, HeadLimits, ParserForm};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const LIMITS: HeadLimits = HeadLimits { max_head_bytes: 16 * 1024, max_headers: 64 };

/// Compares the two parsers on `input`; returns whether peregrine accepted.
fn compare(input: &[u8]) -> bool {
    let mut slots = header_slots();
    let ours = parse_head(input, &mut slots, &LIMITS);
    // Every compiled form of peregrine's parser this CPU can run reads the
    // input as the one the server runs does.
    for form in ParserForm::available() {
        let mut slots = header_slots();
        let theirs = parse_head_using(form, input, &mut slots, &LIMITS);
        assert_eq!(
            format!("{theirs:?}"),
            format!("{ours:?}"),
            "{form:?} form, {:?}",
            String::from_utf8_lossy(input)
        );
    }
    let Ok(Some(head)) = ours else { return false };

    // peregrine serves a later HTTP/1.x as HTTP/1.1 (RFC 9110 §2.5), which
    // httparse refuses: the oracle gets the same bytes saying `HTTP/1.1`.
    let mut as_1_1 = input.to_vec();
    let mut line_start = 0;
    while input[line_start..].starts_with(b"\r\n") {
        line_start += 2;
    }
    if let Some(end) = input[line_start..].windows(2).position(|w| w == b"\r\n").map(|e| line_start + e) {
        if end >= 8 && input[end - 8..end - 1] == *b"HTTP/1." && matches!(input[end - 1], b'2'..=b'9') {
            as_1_1[end - 1] = b'1';
        }
    }
    let input = &as_1_1[..];
    let mut theirs_headers = [httparse::EMPTY_HEADER; 64];
    let mut theirs = httparse::Request::new(&mut theirs_headers);
    let status = theirs.parse(input);
    let shown = String::from_utf8_lossy(input);
    match status {
        Ok(httparse::Status::Complete(len)) => assert_eq!(len, head.len, "length differs for {shown:?}"),
        other => panic!("peregrine accepted what httparse refuses ({other:?}): {shown:?}"),
    }
    assert_eq!(theirs.method, Some(head.method_str), "method differs for {shown:?}");
    let target = match head.query {
        Some(q) => format!("{}?{q}", head.path),
        None => head.path.to_string(),
    };
    // Absolute-form targets are reduced to their path by peregrine.
    let their_target = theirs.path.unwrap_or_default();
    if their_target.starts_with('/') {
        assert_eq!(their_target, target, "target differs for {shown:?}");
    }
    let version = if head.version == peregrine::Version::Http11 { 1 } else { 0 };
    assert_eq!(theirs.version, Some(version), "version differs for {shown:?}");
    assert_eq!(theirs.headers.len(), head.headers.len(), "header count differs for {shown:?}");
    for (t, o) in theirs.headers.iter().zip(head.headers) {
        assert_eq!(t.name, o.name, "header name differs for {shown:?}");
        assert_eq!(trim(t.value), o.value, "header value differs for {shown:?}");
    }
    true
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

const VALID: &[&[u8]] = &[
    b"GET /plaintext HTTP/1.1\r\nHost: localhost:8080\r\nAccept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7\r\nConnection: keep-alive\r\n\r\n",
    b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n42",
    b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"GET / HTTP/1.0\r\n\r\n",
    b"\r\nGET /x HTTP/1.1\r\nHost: a\r\nX-Tab:\tv\tw\t\r\nX-Empty:\r\nX-High: caf\xc3\xa9\r\n\r\n",
    b"DELETE /items/7 HTTP/1.1\r\nHost: a\r\nUser-Agent: wrk\r\nAccept-Encoding: gzip, br\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
];

#[test]
fn valid_requests_are_accepted_identically() {
    for req in VALID {
        assert!(compare(req), "peregrine refused {:?}", String::from_utf8_lossy(req));
        // Every prefix is either incomplete or (past the head) the same.
        for cut in 0..req.len() {
            let mut slots = header_slots();
            if let Ok(Some(head)) = parse_head(&req[..cut], &mut slots, &LIMITS) {
                assert!(head.len <= cut);
                compare(&req[..cut]);
            }
        }
    }
}

/// Bytes that make parsers disagree when they are mishandled.
const INTERESTING: &[u8] = b"\r\n\t :/?#%\x00\x7f\xff\x80AZaz09-_.~!HTTP/1.";

#[test]
fn mutated_requests_never_find_peregrine_more_lenient() {
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    let mut accepted = 0;
    for round in 0..60_000 {
        let mut req = VALID[round % VALID.len()].to_vec();
        for _ in 0..rng.gen_range(1..4) {
            let at = rng.gen_range(0..req.len());
            match rng.gen_range(0..4) {
                0 => req[at] = INTERESTING[rng.gen_range(0..INTERESTING.len())],
                1 => req.insert(at, INTERESTING[rng.gen_range(0..INTERESTING.len())]),
                2 => {
                    req.remove(at);
                }
                _ => req[at] = rng.gen(),
            }
            if req.is_empty() {
                break;
            }
        }
        if compare(&req) {
            accepted += 1;
        }
    }
    // The mutations must leave enough valid heads for the comparison to mean
    // something.
    assert!(accepted > 5_000, "only {accepted} mutated heads were accepted");
}
