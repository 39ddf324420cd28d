//! Request-head parsing on arbitrary bytes.
//!
//! Besides "never panics", this checks the properties the connection loop
//! relies on: a complete head lies within the buffer and ends its own blank
//! line; a head split across reads is never refused or mis-sized while its
//! prefix arrives; bytes after the head do not change it; tighter limits
//! only ever turn a result into `HeadTooLarge`; and the framing decision
//! agrees with an independent reading of `Content-Length` and
//! `Transfer-Encoding` (the request-smuggling rules). The input is treated
//! as a pipelined stream, the way the server reads it: after each complete
//! head its body is skipped and the next head parsed.

#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine::http::chunked::ChunkedDecoder;
use peregrine::http::parse::{header_slots, parse_head, Framing, Head, HeadLimits, ParseError};
use peregrine::http::{Method, Version};

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

fn parse(buf: &[u8], limits: &HeadLimits) -> Outcome {
    let mut slots = header_slots();
    parse_head(buf, &mut slots, limits).map(|h| h.as_ref().map(summarize))
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
    // (httparse accepts bare LF line endings, so only the LF is certain).
    assert!(head.len > 0 && head.len <= buf.len(), "len {} of {}", head.len, buf.len());
    assert!(head.len <= limits.max_head_bytes);
    assert!(head.headers.len() <= limits.max_headers);
    assert_eq!(buf[head.len - 1], b'\n');

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

/// Parses one head at the start of `buf`, checks it, and returns its length
/// and framing if it is complete.
fn check_head(buf: &[u8]) -> Option<(usize, Framing)> {
    let outcome = parse(buf, &LIMITS);

    // Tighter limits may only refuse as too large.
    let tight = parse(buf, &TIGHT);
    if tight != outcome {
        assert_eq!(tight, Err(ParseError::HeadTooLarge), "default: {outcome:?}");
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
