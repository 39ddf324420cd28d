//! Request-head parsing on arbitrary bytes.
//!
//! The parser is hand-written with unsafe code and SIMD scans, so besides
//! "never panics" (and AddressSanitizer finding no bad access) this checks
//! the properties the connection loop relies on: a complete head lies within
//! the buffer and ends with its blank line; a head split across reads is
//! never refused or mis-sized while its prefix arrives; bytes after the head
//! do not change it; tighter limits only ever turn a result into
//! `HeadTooLarge`; the framing decision agrees with an independent reading
//! of `Content-Length` and `Transfer-Encoding` (the request-smuggling
//! rules); and `httparse`, as an oracle, accepts every head peregrine
//! accepts, with the same fields (peregrine may be stricter, never more
//! lenient). The input is treated as a pipelined stream, the way the server
//! reads it: after each complete head its body is skipped and the next head
//! parsed. Every compiled form of the parser (AVX2, SSSE3, baseline) the
//! CPU can run must give the same answers.

#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine::fuzzing::ChunkedDecoder;
use peregrine::fuzzing::{
    header_slots, parse_head, parse_head_using, Framing, Head, HeadLimits, ParseError, ParserForm,
};
use peregrine::{Method, Version};

/// The server's defaults.
const LIMITS: HeadLimits = HeadLimits { max_head_bytes: 16 * 1024, max_headers: 100 };
/// Small enough that the fuzzer hits both limits constantly.
const TIGHT: HeadLimits = HeadLimits { max_head_bytes: 128, max_headers: 4 };

/// Stops a pathological input from looping for long (each head is at least
/// two bytes, so the loop ends anyway).
const MAX_PIPELINED: usize = 64;

/// An owned copy of everything a parse result says, so results obtained with
/// different buffers and limits can be compared.
#[derive(Debug, PartialEq)]
struct Summary {
    method: Method,
    method_str: String,
    path: String,
    query: Option<String>,
    version: Version,
    headers: Vec<(String, Vec<u8>)>,
    len: usize,
    framing: Framing,
    keep_alive: bool,
    expect_continue: bool,
}

type Outcome = Result<Option<Summary>, ParseError>;

fn summarize(head: &Head<'_, '_>) -> Summary {
    Summary {
        method: head.method,
        method_str: head.method_str.to_owned(),
        path: head.path.to_owned(),
        query: head.query.map(str::to_owned),
        version: head.version,
        headers: head.headers.iter().map(|h| (h.name.to_owned(), h.value.to_vec())).collect(),
        len: head.len,
        framing: head.framing,
        keep_alive: head.keep_alive,
        expect_continue: head.expect_continue,
    }
}

/// Parses with the form of the parser the server runs, and checks that
/// every other form this CPU can run reads `buf` the same way.
fn parse(buf: &[u8], limits: &HeadLimits) -> Outcome {
    let mut slots = header_slots();
    let outcome = parse_head(buf, &mut slots, limits).map(|h| h.as_ref().map(summarize));
    for form in ParserForm::available() {
        let mut slots = header_slots();
        let theirs = parse_head_using(form, buf, &mut slots, limits).map(|h| h.as_ref().map(summarize));
        assert_eq!(theirs, outcome, "the {form:?} form of the parser differs");
    }
    outcome
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
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

/// Invariants of one complete head parsed from `buf` with `limits`.
fn check_complete(buf: &[u8], head: &Summary, limits: &HeadLimits) {
    // Within the buffer and the limits, and ending with its blank line
    // (CRLF only: bare LF line endings are refused).
    assert!(head.len > 0 && head.len <= buf.len(), "len {} of {}", head.len, buf.len());
    assert!(head.len <= limits.max_head_bytes);
    assert!(head.headers.len() <= limits.max_headers);
    assert!(buf[..head.len].ends_with(b"\r\n\r\n"), "head does not end with CRLF CRLF");

    // Header fields: token names; values trimmed, without control
    // characters other than HTAB (a CR or LF there would be a smuggling
    // vector).
    for (name, value) in &head.headers {
        assert!(!name.is_empty() && name.bytes().all(is_tchar), "name {name:?}");
        assert!(!value.starts_with(b" ") && !value.starts_with(b"\t"), "value {value:?}");
        assert!(!value.ends_with(b" ") && !value.ends_with(b"\t"), "value {value:?}");
        assert!(value.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f)), "value {value:?}");
    }

    // Request target: origin-form (or absolute-form reduced to it), or `*`
    // for OPTIONS only; the query never leaks into the path.
    if head.path == "*" {
        assert_eq!(head.method, Method::Options);
        assert!(head.query.is_none());
    } else {
        assert!(head.path.starts_with('/'), "path {:?}", head.path);
    }
    assert!(!head.path.contains('?'), "path {:?}", head.path);

    // The method enum agrees with its token.
    assert!(!head.method_str.is_empty());
    match head.method {
        Method::Other => {
            assert!(!["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"]
                .contains(&head.method_str.as_str()))
        }
        m => assert_eq!(m.as_str(), head.method_str),
    }

    let named = |name: &'static str| head.headers.iter().filter(move |(n, _)| n.eq_ignore_ascii_case(name));

    // HTTP/1.1 requires exactly one Host.
    if head.version == Version::Http11 {
        assert_eq!(named("host").count(), 1);
    }

    // Framing, re-derived independently.
    let has_te = named("transfer-encoding").next().is_some();
    let has_cl = named("content-length").next().is_some();
    assert!(!(has_te && has_cl), "accepted both Content-Length and Transfer-Encoding");
    if has_te {
        assert_eq!(head.framing, Framing::Chunked);
        assert_eq!(head.version, Version::Http11);
    }
    match head.framing {
        Framing::Chunked => assert!(has_te),
        Framing::Length(n) => {
            assert!(n > 0);
            // Every comma-separated item of every Content-Length is n.
            for (_, value) in named("content-length") {
                for item in value.split(|&b| b == b',').map(trim) {
                    assert!(!item.is_empty() && item.iter().all(u8::is_ascii_digit), "{item:?}");
                    let item = std::str::from_utf8(item).unwrap();
                    assert_eq!(item.parse::<u64>(), Ok(n));
                }
            }
        }
        Framing::None => {
            if has_cl {
                // Present but zero.
                for (_, value) in named("content-length") {
                    for item in value.split(|&b| b == b',').map(trim) {
                        assert!(!item.is_empty() && item.iter().all(|&b| b == b'0'), "{item:?}");
                    }
                }
            }
        }
    }
    if head.expect_continue {
        assert_eq!(head.version, Version::Http11);
    }
}

/// `buf` with a request line ending in `HTTP/1.<2-9>` rewritten to end in
/// `HTTP/1.1` (the same length, so every offset still holds).
fn as_http11(buf: &[u8]) -> Vec<u8> {
    let mut copy = buf.to_vec();
    // Empty lines before the request line are skipped (RFC 9112 section 2.2).
    let start = copy.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(copy.len());
    if let Some(eol) = copy[start..].iter().position(|&b| b == b'\n').map(|i| start + i) {
        let end = if eol > start && copy[eol - 1] == b'\r' { eol - 1 } else { eol };
        if end >= start + 8 && copy[end - 8..end - 1] == *b"HTTP/1." && (b'2'..=b'9').contains(&copy[end - 1])
        {
            copy[end - 1] = b'1';
        }
    }
    copy
}

/// `httparse` must accept a head peregrine accepted, reading the same
/// length, method, target, version and fields.
fn check_oracle(buf: &[u8], head: &Summary) {
    // peregrine serves a later HTTP/1.x (`HTTP/1.3`) as HTTP/1.1, as RFC
    // 9110 section 2.5 asks; httparse refuses it. The oracle reads the same
    // head with the minor version put back to 1.
    let buf = &as_http11(buf);
    let mut slots = [httparse::EMPTY_HEADER; 256];
    let mut theirs = httparse::Request::new(&mut slots);
    match theirs.parse(buf) {
        Ok(httparse::Status::Complete(len)) => assert_eq!(len, head.len, "length differs"),
        other => panic!("peregrine accepted a head httparse refuses ({other:?}): {head:?}"),
    }
    assert_eq!(theirs.method, Some(head.method_str.as_str()));
    // peregrine reduces absolute-form targets to their path; compare the
    // others whole.
    let their_target = theirs.path.unwrap_or_default();
    if their_target.starts_with('/') {
        let ours = match &head.query {
            Some(q) => format!("{}?{q}", head.path),
            None => head.path.clone(),
        };
        assert_eq!(their_target, ours, "target differs");
    }
    let minor = if head.version == Version::Http11 { 1 } else { 0 };
    assert_eq!(theirs.version, Some(minor), "version differs");
    assert_eq!(theirs.headers.len(), head.headers.len(), "header count differs");
    for (t, (name, value)) in theirs.headers.iter().zip(&head.headers) {
        assert_eq!(t.name, name, "header name differs");
        assert_eq!(trim(t.value), value.as_slice(), "value of {name} differs");
    }
}

/// Parses one head at the start of `buf`, checks it, and returns its length
/// and framing if it is complete.
fn check_head(buf: &[u8]) -> Option<(usize, Framing)> {
    let outcome = parse(buf, &LIMITS);

    // Tighter limits may only refuse as too large: the head (431) or,
    // while the request target is still arriving, the target (414).
    let tight = parse(buf, &TIGHT);
    if tight != outcome {
        assert!(
            matches!(tight, Err(ParseError::HeadTooLarge | ParseError::UriTooLong)),
            "tight: {tight:?}, default: {outcome:?}"
        );
        if let Ok(Some(head)) = &outcome {
            assert!(
                head.len > TIGHT.max_head_bytes || head.headers.len() > TIGHT.max_headers,
                "refused as too large under tight limits: {head:?}"
            );
        }
    }
    if let Ok(Some(head)) = &tight {
        check_complete(buf, head, &TIGHT);
    }

    match &outcome {
        Ok(None) => assert!(buf.len() <= LIMITS.max_head_bytes),
        Ok(Some(head)) => {
            check_complete(buf, head, &LIMITS);
            check_oracle(buf, head);

            // The head alone parses to the same thing: what follows it (a
            // body, a pipelined request) has no influence.
            assert_eq!(parse(&buf[..head.len], &LIMITS), outcome);

            // Every prefix is "not yet", so a head split across reads is
            // never refused or cut short. Checking all prefixes is
            // quadratic; long heads get an even sample plus the last bytes,
            // where CR/LF handling lives.
            let cuts: Vec<usize> = if head.len <= 96 {
                (0..head.len).collect()
            } else {
                let step = head.len / 32;
                (0..head.len).step_by(step).chain(head.len - 4..head.len).collect()
            };
            for cut in cuts {
                assert_eq!(parse(&buf[..cut], &LIMITS), Ok(None), "prefix of {} bytes", cut);
            }
        }
        Err(_) => {}
    }
    outcome.ok().flatten().map(|h| (h.len, h.framing))
}

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    for _ in 0..MAX_PIPELINED {
        let Some((len, framing)) = check_head(rest) else { break };
        rest = &rest[len..];
        // Skip the body the way the connection does, then parse the next
        // pipelined head.
        match framing {
            Framing::None => {}
            Framing::Length(n) => match usize::try_from(n) {
                Ok(n) if n <= rest.len() => rest = &rest[n..],
                _ => break,
            },
            Framing::Chunked => {
                let mut decoder = ChunkedDecoder::new(1 << 20);
                match decoder.decode(rest, |_| {}) {
                    Ok(p) if p.done => rest = &rest[p.consumed..],
                    _ => break,
                }
            }
        }
    }
});
