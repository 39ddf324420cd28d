//! Request-head parsing: bytes in the connection's read buffer to a borrowed
//! [`Head`], with the framing and connection decisions HTTP/1.1 requires.
//!
//! Written for this server rather than taken from `httparse`: measured with
//! callgrind on TechEmpower's pipelined plaintext load, `httparse` plus a
//! second pass for header semantics cost about 1,150 instructions per
//! request, more than half of the server's whole user-space work (the bare
//! floor responder needs 923 in total). This parser does one pass: token
//! bytes are checked against tables, header values are scanned eight bytes at
//! a time for control characters, and the headers the server acts on are
//! recognised as they are read. It is strict where leniency enables request
//! smuggling: CRLF line endings only, no obs-fold, no whitespace before a
//! colon, no control characters in values, and the `Content-Length` /
//! `Transfer-Encoding` rules of RFC 9112 §6.3. `httparse` remains a
//! dev-dependency, as the oracle of a differential test and fuzz target.

use std::mem::MaybeUninit;

use super::scan;
use crate::http::{uri, Header, Method, StatusCode, Version, TCHAR};

/// How the request body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body (no `Content-Length`, no `Transfer-Encoding`, or a length of 0).
    None,
    /// `Content-Length: n`, n > 0.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// Limits applied while parsing a head.
#[derive(Clone, Copy, Debug)]
pub struct HeadLimits {
    /// Largest request line plus header section, in bytes.
    pub max_head_bytes: usize,
    /// Largest number of header fields.
    pub max_headers: usize,
}

impl HeadLimits {
    /// The limits `config` sets.
    pub(crate) fn from_config(config: &crate::config::Config) -> HeadLimits {
        HeadLimits {
            max_head_bytes: config.max_head_bytes,
            max_headers: config.max_headers.min(MAX_HEADERS_CAP),
        }
    }
}

/// Upper bound for [`HeadLimits::max_headers`]: the size of the on-stack
/// header array the parser fills.
pub const MAX_HEADERS_CAP: usize = 256;

/// A parsed request head borrowing the read buffer.
#[derive(Debug)]
pub struct Head<'b, 'h> {
    /// The method.
    pub method: Method,
    /// The method token as sent.
    pub method_str: &'b str,
    /// The path, without the query (`*` for asterisk-form).
    pub path: &'b str,
    /// The query, without the `?`.
    pub query: Option<&'b str>,
    /// The protocol version.
    pub version: Version,
    /// The header fields, in order.
    pub headers: &'h [Header<'b>],
    /// Length of the head in bytes, including the final blank line.
    pub len: usize,
    /// How the body that follows is delimited.
    pub framing: Framing,
    /// Whether the connection may stay open after this request.
    pub keep_alive: bool,
    /// The client sent `Expect: 100-continue`.
    pub expect_continue: bool,
}

/// Why a head was refused. Each maps to a status and a short reason; the
/// connection is always closed afterwards, since the framing of what follows
/// can no longer be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Syntax or semantics error: `400 Bad Request`.
    BadRequest(&'static str),
    /// Head over the size limit, or too many headers: `431`.
    HeadTooLarge,
    /// A request target that does not end within the head size limit: `414`.
    UriTooLong,
    /// A `Content-Length` beyond any representable size: `413`.
    BodyTooLarge,
    /// A transfer coding other than `chunked`: `501`.
    UnsupportedTransferCoding,
    /// `Expect` with something other than `100-continue`: `417`.
    UnsupportedExpectation,
    /// A well-formed version other than HTTP/1.x: `505`. (A later 1.x,
    /// such as `HTTP/1.2`, is served as HTTP/1.1, as RFC 9110 §2.5 asks.)
    VersionNotSupported,
}

impl ParseError {
    /// The status this error is answered with.
    pub fn status(self) -> StatusCode {
        match self {
            ParseError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ParseError::HeadTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ParseError::UriTooLong => StatusCode::URI_TOO_LONG,
            ParseError::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ParseError::UnsupportedTransferCoding => StatusCode::NOT_IMPLEMENTED,
            ParseError::UnsupportedExpectation => StatusCode::EXPECTATION_FAILED,
            ParseError::VersionNotSupported => StatusCode::HTTP_VERSION_NOT_SUPPORTED,
        }
    }

    /// A short human-readable reason, sent as the error body.
    pub fn reason(self) -> &'static str {
        match self {
            ParseError::BadRequest(why) => why,
            ParseError::HeadTooLarge => "request header section too large",
            ParseError::UriTooLong => "request target too long",
            ParseError::BodyTooLarge => "request body too large",
            ParseError::UnsupportedTransferCoding => "unsupported transfer coding",
            ParseError::UnsupportedExpectation => "unsupported expectation",
            ParseError::VersionNotSupported => "HTTP version not supported",
        }
    }
}

/// Uninitialised storage for parsed headers; lives on the caller's stack so
/// parsing never allocates and never pays to zero 256 slots.
pub type HeaderSlots<'b> = [MaybeUninit<Header<'b>>; MAX_HEADERS_CAP];

/// A fresh array of header slots.
#[inline]
pub fn header_slots<'b>() -> HeaderSlots<'b> {
    [const { MaybeUninit::uninit() }; MAX_HEADERS_CAP]
}

/// Why parsing stopped early.
enum Stop {
    /// The buffer ends before the head does.
    Partial,
    Error(ParseError),
}

impl From<ParseError> for Stop {
    fn from(e: ParseError) -> Stop {
        Stop::Error(e)
    }
}

fn bad(why: &'static str) -> Stop {
    Stop::Error(ParseError::BadRequest(why))
}

/// Parses one request head from the start of `buf`.
///
/// `Ok(None)` means the head is not complete yet (and still within limits).
pub fn parse_head<'b, 'h>(
    buf: &'b [u8],
    slots: &'h mut [MaybeUninit<Header<'b>>],
    limits: &HeadLimits,
) -> Result<Option<Head<'b, 'h>>, ParseError> {
    let (window, slots, at_limit) = bounded(buf, slots, limits);
    // The result is returned as `parse_with` built it: converting or
    // inspecting it here made the compiler copy the head.
    parse_in(window, slots, at_limit)
}

/// What a parse may look at under `limits`: never past the size limit (a
/// head that has not ended by then is too large whatever follows), and no
/// more header slots than allowed; and whether `buf` reaches the limit.
#[inline(always)]
fn bounded<'b, 's, 'h>(
    buf: &'b [u8],
    slots: &'s mut [MaybeUninit<Header<'h>>],
    limits: &HeadLimits,
) -> (&'b [u8], &'s mut [MaybeUninit<Header<'h>>], bool) {
    let window = &buf[..buf.len().min(limits.max_head_bytes)];
    let max_headers = limits.max_headers.min(slots.len());
    (window, &mut slots[..max_headers], buf.len() >= limits.max_head_bytes)
}

/// A compiled form of the parser: one per instruction set it can use (see
/// [`parse_in`]). [`parse_head`] runs the best this CPU has; the
/// differential test and the fuzz target run each with
/// [`parse_head_using`] and hold them to the same answers, since on any
/// one machine only the best would otherwise be tested.
#[cfg(feature = "fuzzing")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParserForm {
    /// Header values scanned 32 bytes a vector, names with `pshufb`.
    Avx2,
    /// Header names classified with `pshufb`.
    Ssse3,
    /// The x86_64 baseline (on other targets, byte loops).
    Baseline,
}

#[cfg(feature = "fuzzing")]
impl ParserForm {
    /// The forms this CPU can run, best first.
    pub fn available() -> Vec<ParserForm> {
        let mut forms = Vec::new();
        if scan::Avx2::detect().is_some() {
            forms.push(ParserForm::Avx2);
        }
        if scan::Ssse3::detect().is_some() {
            forms.push(ParserForm::Ssse3);
        }
        forms.push(ParserForm::Baseline);
        forms
    }
}

/// [`parse_head`] in the given form.
///
/// # Panics
/// If this CPU cannot run `form` (it is not in [`ParserForm::available`]).
#[cfg(feature = "fuzzing")]
pub fn parse_head_using<'b, 'h>(
    form: ParserForm,
    buf: &'b [u8],
    slots: &'h mut [MaybeUninit<Header<'b>>],
    limits: &HeadLimits,
) -> Result<Option<Head<'b, 'h>>, ParseError> {
    let (window, slots, at_limit) = bounded(buf, slots, limits);
    let unavailable = || panic!("this CPU cannot run the {form:?} parser");
    match form {
        #[cfg(target_arch = "x86_64")]
        ParserForm::Avx2 => match scan::Avx2::detect() {
            // SAFETY: `token` proves the CPU has AVX2.
            Some(token) => unsafe { parse_in_avx2(token, window, slots, at_limit) },
            None => unavailable(),
        },
        #[cfg(target_arch = "x86_64")]
        ParserForm::Ssse3 => match scan::Ssse3::detect() {
            // SAFETY: `token` proves the CPU has SSSE3.
            Some(token) => unsafe { parse_in_ssse3(token, window, slots, at_limit) },
            None => unavailable(),
        },
        #[cfg(not(target_arch = "x86_64"))]
        ParserForm::Avx2 | ParserForm::Ssse3 => unavailable(),
        ParserForm::Baseline => parse_with(None, None, window, slots, at_limit),
    }
}

/// Whether `window` (a head that reached the size limit) ends inside its
/// request target: the target alone is too long, a `414` rather than `431`.
#[cold]
fn target_unfinished(window: &[u8]) -> bool {
    let mut start = 0;
    while window[start..].starts_with(b"\r\n") {
        start += 2;
    }
    match window[start..].iter().position(|&b| b == b' ') {
        Some(space) => scan::find_target_end(&window[start + space + 1..]).0.is_none(),
        None => false,
    }
}

/// The parse proper: writes the headers into `slots` and returns the head
/// with them.
///
/// Compiled three times: for CPUs with AVX2, where header values are
/// also scanned 32 bytes a vector; for CPUs with SSSE3, where the
/// header-name scan classifies bytes with `pshufb` and is inlined into the
/// header loop (a `target_feature` function can be inlined only into one
/// with the same features); and with SSE2 alone.
#[inline(always)]
fn parse_in<'b, 'h>(
    buf: &'b [u8],
    slots: &'h mut [MaybeUninit<Header<'b>>],
    at_limit: bool,
) -> Parsed<'b, 'h> {
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = scan::Avx2::detect() {
        // SAFETY: `token` proves the CPU has AVX2.
        return unsafe { parse_in_avx2(token, buf, slots, at_limit) };
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(token) = scan::Ssse3::detect() {
        // SAFETY: `token` proves the CPU has SSSE3.
        return unsafe { parse_in_ssse3(token, buf, slots, at_limit) };
    }
    parse_with(None, None, buf, slots, at_limit)
}

/// [`parse_with`] compiled for AVX2 (which implies SSSE3).
///
/// # Safety
/// The CPU must support AVX2 (which `token` proves).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn parse_in_avx2<'b, 'h>(
    token: scan::Avx2,
    buf: &'b [u8],
    slots: &'h mut [MaybeUninit<Header<'b>>],
    at_limit: bool,
) -> Parsed<'b, 'h> {
    parse_with(Some(token.ssse3()), Some(token), buf, slots, at_limit)
}

/// [`parse_with`] compiled for SSSE3.
///
/// # Safety
/// The CPU must support SSSE3 (which `token` proves).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "ssse3")]
unsafe fn parse_in_ssse3<'b, 'h>(
    token: scan::Ssse3,
    buf: &'b [u8],
    slots: &'h mut [MaybeUninit<Header<'b>>],
    at_limit: bool,
) -> Parsed<'b, 'h> {
    parse_with(Some(token), None, buf, slots, at_limit)
}

/// What [`parse_head`] returns, before the size limit is applied to a
/// partial head.
type Parsed<'b, 'h> = Result<Option<Head<'b, 'h>>, ParseError>;

/// See [`parse_in`]; `ssse3` and `avx2` say whether SSSE3 and AVX2 may be
/// used, and `at_limit` whether `buf` is as long as a head may be, so that
/// a partial head is one too large.
#[inline(always)]
fn parse_with<'b, 'h>(
    ssse3: Option<scan::Ssse3>,
    avx2: Option<scan::Avx2>,
    buf: &'b [u8],
    slots: &'h mut [MaybeUninit<Header<'b>>],
    at_limit: bool,
) -> Parsed<'b, 'h> {
    match parse_parts(ssse3, avx2, buf, slots) {
        Ok(head) => Ok(Some(head)),
        Err(Stop::Partial) if at_limit => {
            Err(if target_unfinished(buf) { ParseError::UriTooLong } else { ParseError::HeadTooLarge })
        }
        Err(Stop::Partial) => Ok(None),
        Err(Stop::Error(e)) => Err(e),
    }
}

/// The request line and header fields, then the head's semantics.
#[inline(always)]
fn parse_parts<'b, 'h>(
    ssse3: Option<scan::Ssse3>,
    avx2: Option<scan::Avx2>,
    buf: &'b [u8],
    slots: &'h mut [MaybeUninit<Header<'b>>],
) -> Result<Head<'b, 'h>, Stop> {
    let n = buf.len();
    // RFC 9112 §2.2: ignore empty lines before the request line.
    let mut i = 0;
    while i < n && buf[i] == b'\r' {
        match buf.get(i + 1) {
            None => return Err(Stop::Partial),
            Some(b'\n') => i += 2,
            Some(_) => return Err(bad("malformed request line")),
        }
    }

    // Method.
    let method_start = i;
    // `GET` is known at once; other tokens are matched once their end is
    // found (`Method::from_token` cost `GET` 15 instructions).
    let known_get = buf[i..].starts_with(b"GET ");
    if known_get {
        i += 3;
    } else {
        i += buf[i..].iter().position(|&b| !TCHAR[b as usize]).unwrap_or(n - i);
    }
    if i == n {
        return Err(Stop::Partial);
    }
    if i == method_start || buf[i] != b' ' {
        return Err(bad("malformed request line"));
    }
    // SAFETY: every byte of the method is a tchar, which is ASCII.
    let method_str = unsafe { std::str::from_utf8_unchecked(&buf[method_start..i]) };
    i += 1;

    // Request target: visible ASCII, up to one space.
    let target_start = i;
    let (target_end, target_special) = scan::find_target_end(&buf[i..]);
    let Some(target_len) = target_end else { return Err(Stop::Partial) };
    i += target_len;
    if target_len == 0 || buf[i] != b' ' {
        return Err(bad("malformed request line"));
    }
    // SAFETY: every byte of the target is in 0x21..=0x7E, ASCII.
    let target = unsafe { std::str::from_utf8_unchecked(&buf[target_start..i]) };
    i += 1;

    // Version, then CRLF. `HTTP/1.1\r\n` is one word and two bytes:
    // the general path (a call, a `Result` and byte checks) cost about 40
    // instructions a request.
    let version = if i + 10 <= n && word_at(buf, i) == word(b"HTTP/1.1") && buf[i + 8..i + 10] == *b"\r\n" {
        i += 10;
        Version::Http11
    } else {
        let version = parse_version(&buf[i..n.min(i + 8)])?;
        i += 8;
        match (buf.get(i), buf.get(i + 1)) {
            (Some(b'\r'), Some(b'\n')) => i += 2,
            (None, _) | (Some(b'\r'), None) => return Err(Stop::Partial),
            _ => return Err(bad("malformed request line")),
        }
        version
    };

    let method = if known_get { Method::Get } else { Method::from_token(method_str) };
    // The common case, a path with no `?#%.` in it, needs no closer look.
    let (path, query) = if !target_special && target.as_bytes()[0] == b'/' && method != Method::Connect {
        (target, None)
    } else {
        split_target(target, method)?
    };

    // Header fields.
    let mut seen = Seen::new(version);
    let mut filled = 0;
    loop {
        match buf.get(i) {
            None => return Err(Stop::Partial),
            Some(b'\r') => match buf.get(i + 1) {
                None => return Err(Stop::Partial),
                Some(b'\n') => {
                    i += 2;
                    break;
                }
                Some(_) => return Err(bad("invalid line ending")),
            },
            Some(_) => {}
        }
        let name_start = i;
        let (field, name_end) = match known_field(buf, i) {
            Some((Field::Connection, _)) if is_keep_alive_line(buf, i) => {
                // SAFETY: the line is `KEEP_ALIVE_LINE`, ASCII.
                let name = unsafe { std::str::from_utf8_unchecked(&buf[i..i + CONNECTION_LEN]) };
                let value_at = i + CONNECTION_LEN + 2;
                push_header(slots, &mut filled, name, &buf[value_at..value_at + KEEP_ALIVE_LEN])?;
                seen.conn_keep_alive = true;
                i += KEEP_ALIVE_LINE.len();
                continue;
            }
            Some((field, name_len)) => {
                // The name, its colon and one space.
                i += name_len + 2;
                (field, name_start + name_len)
            }
            None => {
                i += scan::find_name_end(&buf[i..], ssse3).unwrap_or(n - i);
                if i == n {
                    return Err(Stop::Partial);
                }
                // The scan stopped at the first byte that is not a tchar: a
                // well-formed name ends there with its colon. Also catches
                // obs-fold (a line starting with whitespace) and whitespace
                // before the colon, both smuggling vectors.
                if i == name_start || buf[i] != b':' {
                    return Err(bad("invalid header name"));
                }
                let name_end = i;
                i += 1;
                // Optional whitespace: almost always one space.
                if buf.get(i) == Some(&b' ') {
                    i += 1;
                }
                (Field::of(&buf[name_start..name_end]), name_end)
            }
        };
        let name = &buf[name_start..name_end];
        while let Some(b' ' | b'\t') = buf.get(i) {
            i += 1;
        }
        let value_start = i;
        let value_end = scan_value(buf, &mut i, avx2)?;
        let value = trim_end(&buf[value_start..value_end]);
        // SAFETY: every byte of the name is a tchar, which is ASCII.
        let name = unsafe { std::str::from_utf8_unchecked(name) };
        push_header(slots, &mut filled, name, value)?;
        seen.observe(field, value)?;
    }

    if let Some(host) = seen.host {
        // The value is a slice of `buf`; the fast check may read on past
        // its end, up to 16 bytes from its start, within `buf`.
        let at = host.as_ptr() as usize - buf.as_ptr() as usize;
        if !scan::is_plain_host(&buf[at..], host.len()) && !uri::valid_host(host) {
            return Err(bad("invalid Host header"));
        }
    }

    let semantics = seen.finish()?;
    let initialised = &slots[..filled];
    // SAFETY: the loop above wrote the first `filled` slots, and
    // `MaybeUninit<Header>` has the same layout as `Header`.
    let headers = unsafe { &*(initialised as *const [MaybeUninit<Header<'b>>] as *const [Header<'b>]) };
    Ok(Head {
        method,
        method_str,
        path,
        query,
        version,
        headers,
        len: i,
        framing: semantics.framing,
        keep_alive: semantics.keep_alive,
        expect_continue: semantics.expect_continue,
    })
}

/// Writes a header into the first of `slots` after the `filled` ones. A
/// head with more headers than slots is too large.
#[inline(always)]
fn push_header<'b>(
    slots: &mut [MaybeUninit<Header<'b>>],
    filled: &mut usize,
    name: &'b str,
    value: &'b [u8],
) -> Result<(), Stop> {
    let Some(slot) = slots.get_mut(*filled) else {
        return Err(ParseError::HeadTooLarge.into());
    };
    slot.write(Header { name, value });
    *filled += 1;
    Ok(())
}

/// `HTTP/1.1` or `HTTP/1.0`, from the (up to) eight bytes available.
fn parse_version(v: &[u8]) -> Result<Version, Stop> {
    const PATTERN: &[u8; 8] = b"HTTP/1.1";
    if v == PATTERN {
        return Ok(Version::Http11);
    }
    for (j, &b) in v.iter().enumerate() {
        let ok = match j {
            5 | 7 => b.is_ascii_digit(),
            _ => b == PATTERN[j],
        };
        if !ok {
            return Err(bad("malformed request line"));
        }
    }
    if v.len() < 8 {
        return Err(Stop::Partial);
    }
    match (v[5], v[7]) {
        (b'1', b'0') => Ok(Version::Http10),
        // RFC 9110 §2.5: a higher minor version is processed as the highest
        // one implemented.
        (b'1', _) => Ok(Version::Http11),
        _ => Err(ParseError::VersionNotSupported.into()),
    }
}

/// Scans a header value from `*i` to its CRLF, which it steps over.
/// Returns where the value ends. HTAB and obs-text are allowed; any other
/// control character (NUL, a bare CR or LF, DEL) is refused.
#[inline(always)]
fn scan_value(buf: &[u8], i: &mut usize, avx2: Option<scan::Avx2>) -> Result<usize, Stop> {
    let Some(j) = scan::find_value_end(buf, *i, avx2) else { return Err(Stop::Partial) };
    match (buf[j], buf.get(j + 1)) {
        (b'\r', Some(b'\n')) => {
            *i = j + 2;
            Ok(j)
        }
        (b'\r', None) => Err(Stop::Partial),
        _ => Err(bad("invalid header value")),
    }
}

fn trim_end(mut s: &[u8]) -> &[u8] {
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// Case-insensitive comparison of a parsed name or value with a literal made
/// of lowercase letters, digits and `-`, in whole words.
///
/// OR-ing 0x20 folds ASCII letters. For any other byte, `b | 0x20` equals a
/// literal byte only if `b` is that byte or a control character (0x0D for
/// `-`, 0x10..=0x19 for digits), and parsed names and values hold no
/// control characters but HTAB (0x09, which folds to `)`), so this is exact.
///
/// Lengths that are not a multiple of the word compare one last word that
/// overlaps the one before (the names matched here are 4 to 17 bytes):
/// byte by byte, the tails of `host`, `expect` and `connection` had cost
/// about 30 instructions a request.
#[inline(always)]
fn eq_folded(bytes: &[u8], lower: &[u8]) -> bool {
    if bytes.len() != lower.len() {
        return false;
    }
    let n = bytes.len();
    if n >= 8 {
        let word = |s: &[u8], at: usize| word_at(s, at) | 0x2020_2020_2020_2020;
        let mut at = 0;
        while at + 8 < n {
            if word(bytes, at) != word(lower, at) {
                return false;
            }
            at += 8;
        }
        word(bytes, n - 8) == word(lower, n - 8)
    } else if n >= 4 {
        let word = |s: &[u8], at: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&s[at..at + 4]);
            u32::from_le_bytes(w) | 0x2020_2020
        };
        word(bytes, 0) == word(lower, 0) && word(bytes, n - 4) == word(lower, n - 4)
    } else {
        bytes.iter().zip(lower).all(|(&x, &y)| x | 0x20 == y | 0x20)
    }
}

/// Splits a request target that holds `?`, `#`, `%` or `.` (or is not a
/// plain path) into path and query, accepting origin-form, absolute-form
/// (RFC 9112 §3.2.2 says servers must) and `*` for `OPTIONS`, and applying
/// the rules the fast path in `parse_in` could skip: no fragment, CONNECT
/// only in authority-form (which this server, not being a proxy, refuses
/// too), a valid authority in absolute-form, and the path rule of
/// [`uri`](crate::http::uri) (no dot segments, no escaped unreserved
/// characters, no malformed escapes).
fn split_target(target: &str, method: Method) -> Result<(&str, Option<&str>), ParseError> {
    // Byte scans here and in `split_query`: `str::contains('#')` and
    // `find('?')` went through the generic char searcher, about 150
    // instructions per HttpArena baseline request (callgrind).
    if target.bytes().any(|b| b == b'#') {
        return Err(ParseError::BadRequest("fragment in request target"));
    }
    if method == Method::Connect {
        return Err(ParseError::BadRequest(
            "CONNECT needs an authority-form target, and this server is no proxy",
        ));
    }
    let (path, query) = if target.starts_with('/') {
        split_query(target)
    } else if target == "*" && method == Method::Options {
        return Ok(("*", None));
    } else {
        let Some(rest) = strip_scheme(target) else {
            return Err(ParseError::BadRequest("invalid request target"));
        };
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if authority_end == 0 || !uri::valid_host(&rest.as_bytes()[..authority_end]) {
            return Err(ParseError::BadRequest("invalid authority in request target"));
        }
        // An absolute URI with an empty path means "/".
        match rest.as_bytes().get(authority_end) {
            Some(b'/') => split_query(&rest[authority_end..]),
            Some(_) => ("/", Some(&rest[authority_end + 1..])),
            None => ("/", None),
        }
    };
    match uri::path_error(path.as_bytes()) {
        Some(why) => Err(ParseError::BadRequest(why)),
        None => Ok((path, query)),
    }
}

fn split_query(target: &str) -> (&str, Option<&str>) {
    match target.bytes().position(|b| b == b'?') {
        Some(q) => (&target[..q], Some(&target[q + 1..])),
        None => (target, None),
    }
}

fn strip_scheme(target: &str) -> Option<&str> {
    let bytes = target.as_bytes();
    for scheme in ["http://", "https://"] {
        if bytes.len() > scheme.len() && bytes[..scheme.len()].eq_ignore_ascii_case(scheme.as_bytes()) {
            return Some(&target[scheme.len()..]);
        }
    }
    None
}

/// The header fields whose values the parser acts on; every other is
/// `Other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Host,
    Expect,
    Connection,
    ContentLength,
    TransferEncoding,
    Other,
}

impl Field {
    /// The field a well-formed name (any case) stands for. Dispatches on
    /// length first: most names match none of these and are passed over
    /// after one comparison.
    #[inline(always)]
    fn of(name: &[u8]) -> Field {
        match name.len() {
            4 if eq_folded(name, b"host") => Field::Host,
            6 if eq_folded(name, b"expect") => Field::Expect,
            10 if eq_folded(name, b"connection") => Field::Connection,
            14 if eq_folded(name, b"content-length") => Field::ContentLength,
            17 if eq_folded(name, b"transfer-encoding") => Field::TransferEncoding,
            _ => Field::Other,
        }
    }
}

/// Eight bytes of `buf` from `at`, as a little-endian word (the caller
/// checks they are there).
#[inline(always)]
fn word_at(buf: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(w)
}

/// `bytes` (at most 8) as the low bytes of a little-endian word.
const fn word(bytes: &[u8]) -> u64 {
    let mut w = 0u64;
    let mut k = 0;
    while k < bytes.len() {
        w |= (bytes[k] as u64) << (8 * k);
        k += 1;
    }
    w
}

/// `Connection: keep-alive` and its line end, as browsers and load
/// generators (wrk, TechEmpower's) send it.
const KEEP_ALIVE_LINE: &[u8; 24] = b"Connection: keep-alive\r\n";
const CONNECTION_LEN: usize = "Connection".len();
const KEEP_ALIVE_LEN: usize = "keep-alive".len();

/// Whether the line at `at` is exactly [`KEEP_ALIVE_LINE`]. Asked only of
/// lines [`known_field`] found to be `Connection: ` ones; three word
/// compares then stand in for the value scan, the trim and the token match
/// of the general path. A pipelined TechEmpower plaintext head went from
/// 770 to 701 instructions (callgrind, the parser alone). Asked of every
/// line instead, it saved 9 more there but cost each other line about 4.
#[inline(always)]
fn is_keep_alive_line(buf: &[u8], at: usize) -> bool {
    const fn line_word(k: usize) -> u64 {
        u64::from_le_bytes([
            KEEP_ALIVE_LINE[k],
            KEEP_ALIVE_LINE[k + 1],
            KEEP_ALIVE_LINE[k + 2],
            KEEP_ALIVE_LINE[k + 3],
            KEEP_ALIVE_LINE[k + 4],
            KEEP_ALIVE_LINE[k + 5],
            KEEP_ALIVE_LINE[k + 6],
            KEEP_ALIVE_LINE[k + 7],
        ])
    }
    at + KEEP_ALIVE_LINE.len() <= buf.len()
        && word_at(buf, at) == line_word(0)
        && word_at(buf, at + 8) == line_word(8)
        && word_at(buf, at + 16) == line_word(16)
}

/// The field and name length of a header line that starts, at `at`, with
/// one of the names clients send most, spelled as they spell it and
/// followed by a colon and one space (`Host: `, `Accept: `,
/// `Connection: `, ...); `None` for any other line, which the caller
/// scans byte class by byte class.
///
/// One or two word compares stand in for the name scan, the colon check
/// and the field dispatch, as Kestrel recognises its known headers. On
/// TechEmpower's heads (`Host`, `Accept`, `Connection`) this took
/// `parse_head` from 856 to 819 instructions a head (plaintext, 16
/// pipelined) and from 879 to 839 (`/json`), measured with callgrind.
#[inline(always)]
fn known_field(buf: &[u8], at: usize) -> Option<(Field, usize)> {
    // Every name below ends, with ": ", within 16 bytes but two, whose
    // last byte is checked apart.
    if at + 16 > buf.len() {
        return None;
    }
    const MASK_6: u64 = (1 << 48) - 1;
    const MASK_4: u64 = (1 << 32) - 1;
    let first = word_at(buf, at);
    let second = || word_at(buf, at + 8);
    // The first byte picks the candidates, so a line is compared with at
    // most three names. In one chain of eight compares, where `Host: `
    // came last, this function cost a TFB head 56 instructions; now 48.
    match first as u8 {
        b'H' if first & MASK_6 == word(b"Host: ") => Some((Field::Host, 4)),
        b'A' => match first {
            w if w == word(b"Accept: ") => Some((Field::Other, 6)),
            w if (w == word(b"Accept-E") && second() == word(b"ncoding:")
                || w == word(b"Accept-L") && second() == word(b"anguage:"))
                && buf.get(at + 16) == Some(&b' ') =>
            {
                Some((Field::Other, 15))
            }
            _ => None,
        },
        b'C' => match first {
            w if w == word(b"Connecti") && second() & MASK_4 == word(b"on: ") => {
                Some((Field::Connection, 10))
            }
            w if w == word(b"Content-") => match second() {
                v if v == word(b"Length: ") => Some((Field::ContentLength, 14)),
                v if v & MASK_6 == word(b"Type: ") => Some((Field::Other, 12)),
                _ => None,
            },
            w if w == word(b"Cookie: ") => Some((Field::Other, 6)),
            _ => None,
        },
        b'U' if first == word(b"User-Age") && second() & MASK_4 == word(b"nt: ") => Some((Field::Other, 10)),
        _ => None,
    }
}

struct Semantics {
    framing: Framing,
    keep_alive: bool,
    expect_continue: bool,
}

/// What the headers seen so far say, gathered as they are parsed.
struct Seen<'b> {
    version: Version,
    content_length: Option<u64>,
    chunked: bool,
    transfer_encoding: bool,
    hosts: u32,
    /// The (last) `Host` value, whose grammar is checked once the head
    /// is complete.
    host: Option<&'b [u8]>,
    conn_close: bool,
    conn_keep_alive: bool,
    expect_continue: bool,
}

impl<'b> Seen<'b> {
    fn new(version: Version) -> Seen<'b> {
        Seen {
            version,
            content_length: None,
            chunked: false,
            transfer_encoding: false,
            hosts: 0,
            host: None,
            conn_close: false,
            conn_keep_alive: false,
            expect_continue: false,
        }
    }

    /// Takes note of one header, recognised as `field`. Always inlined:
    /// called out of line, it cost about 20 instructions a header more in
    /// calls and returns.
    #[inline(always)]
    fn observe(&mut self, field: Field, value: &'b [u8]) -> Result<(), ParseError> {
        match field {
            Field::Other => {}
            Field::Host => {
                self.hosts += 1;
                self.host = Some(value);
            }
            Field::Expect => {
                if eq_folded(value, b"100-continue") {
                    self.expect_continue = true;
                } else {
                    return Err(ParseError::UnsupportedExpectation);
                }
            }
            Field::Connection => {
                // One token is by far the common case.
                if eq_folded(value, b"keep-alive") {
                    self.conn_keep_alive = true;
                    return Ok(());
                }
                for token in value.split(|&b| b == b',').map(trim) {
                    if eq_folded(token, b"close") {
                        self.conn_close = true;
                    } else if eq_folded(token, b"keep-alive") {
                        self.conn_keep_alive = true;
                    }
                }
            }
            Field::ContentLength => {
                for item in value.split(|&b| b == b',').map(trim) {
                    let n = parse_content_length(item)?;
                    match self.content_length {
                        Some(prev) if prev != n => {
                            return Err(ParseError::BadRequest("conflicting Content-Length values"))
                        }
                        _ => self.content_length = Some(n),
                    }
                }
            }
            Field::TransferEncoding => {
                self.transfer_encoding = true;
                for coding in value.split(|&b| b == b',').map(trim) {
                    if coding.is_empty() {
                        continue;
                    }
                    if self.chunked {
                        // Anything after `chunked` (even a second `chunked`)
                        // makes the body length undeterminable.
                        return Err(ParseError::BadRequest("chunked must be the final transfer coding"));
                    }
                    if eq_folded(coding, b"chunked") {
                        self.chunked = true;
                    } else {
                        return Err(ParseError::UnsupportedTransferCoding);
                    }
                }
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn finish(&self) -> Result<Semantics, ParseError> {
        if self.version == Version::Http11 && self.hosts != 1 {
            return Err(ParseError::BadRequest(if self.hosts == 0 {
                "missing Host header"
            } else {
                "more than one Host header"
            }));
        }
        let framing = if self.transfer_encoding {
            if self.content_length.is_some() {
                return Err(ParseError::BadRequest("both Content-Length and Transfer-Encoding"));
            }
            if self.version == Version::Http10 {
                return Err(ParseError::BadRequest("Transfer-Encoding in an HTTP/1.0 request"));
            }
            if !self.chunked {
                return Err(ParseError::BadRequest("Transfer-Encoding without chunked"));
            }
            Framing::Chunked
        } else {
            match self.content_length {
                None | Some(0) => Framing::None,
                Some(n) => Framing::Length(n),
            }
        };
        let keep_alive = match self.version {
            Version::Http11 | Version::Http2 | Version::Http3 => !self.conn_close,
            Version::Http10 => self.conn_keep_alive && !self.conn_close,
        };
        Ok(Semantics {
            framing,
            keep_alive,
            expect_continue: self.expect_continue && self.version == Version::Http11,
        })
    }
}

/// `1*DIGIT`, nothing else (no sign, no spaces inside). A value too large
/// for u64 is syntactically fine but larger than any limit.
fn parse_content_length(value: &[u8]) -> Result<u64, ParseError> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return Err(ParseError::BadRequest("invalid Content-Length"));
    }
    let mut n: u64 = 0;
    for &d in value {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or(ParseError::BodyTooLarge)?;
    }
    Ok(n)
}

/// Trims optional whitespace (SP and HTAB) from both ends.
pub(crate) fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: HeadLimits = HeadLimits { max_head_bytes: 16 * 1024, max_headers: 100 };

    type Parsed = (Method, String, Option<String>, Framing, bool, usize);

    fn parse(buf: &[u8]) -> Result<Option<Parsed>, ParseError> {
        let mut slots = header_slots();
        parse_head(buf, &mut slots, &LIMITS).map(|h| {
            h.map(|h| {
                (h.method, h.path.to_owned(), h.query.map(str::to_owned), h.framing, h.keep_alive, h.len)
            })
        })
    }

    #[test]
    fn simple_get() {
        let req = b"GET /plaintext?x=1 HTTP/1.1\r\nHost: a\r\n\r\nGET";
        let (m, path, q, framing, ka, len) = parse(req).unwrap().unwrap();
        assert_eq!(m, Method::Get);
        assert_eq!(path, "/plaintext");
        assert_eq!(q.as_deref(), Some("x=1"));
        assert_eq!(framing, Framing::None);
        assert!(ka);
        assert_eq!(len, req.len() - 3);
    }

    #[test]
    fn partial_heads_wait_for_more() {
        let req = b"GET /plaintext HTTP/1.1\r\nHost: a\r\n\r\n";
        for cut in 0..req.len() {
            assert_eq!(parse(&req[..cut]), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn http10_closes_unless_keep_alive() {
        let (.., ka, _) = parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!ka);
        let (.., ka, _) = parse(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").unwrap().unwrap();
        assert!(ka);
        let (.., ka, _) = parse(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").unwrap().unwrap();
        assert!(!ka);
    }

    #[test]
    fn framing_rules() {
        let ok = |r: &[u8]| parse(r).unwrap().unwrap().3;
        assert_eq!(ok(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n"), Framing::Length(5));
        assert_eq!(ok(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n"), Framing::Length(5));
        assert_eq!(ok(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"), Framing::Chunked);
        let err = |r: &[u8]| parse(r).unwrap_err().status().as_u16();
        assert_eq!(err(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"), 400);
        assert_eq!(
            err(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400
        );
        assert_eq!(err(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n"), 501);
        assert_eq!(err(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"), 400);
        assert_eq!(err(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"), 400);
        assert_eq!(err(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n"), 400);
        assert_eq!(
            err(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
            413
        );
    }

    /// Every name `known_field` recognises, and near misses of each, parse
    /// exactly as the same head with the names in lower case (which the
    /// word compares never match, so the byte-class path reads them): the
    /// same fields, framing, connection decision and errors.
    #[test]
    fn known_names_parse_as_the_general_path_does() {
        type Full = (Vec<(String, Vec<u8>)>, Framing, bool, bool, usize);
        fn full(buf: &[u8]) -> Result<Option<Full>, ParseError> {
            let mut slots = header_slots();
            parse_head(buf, &mut slots, &LIMITS).map(|h| {
                h.map(|h| {
                    let fields =
                        h.headers.iter().map(|f| (f.name.to_ascii_lowercase(), f.value.to_vec())).collect();
                    (fields, h.framing, h.keep_alive, h.expect_continue, h.len)
                })
            })
        }
        let lines: &[&str] = &[
            "Host: example.com:8080",
            "Host:  spaced",
            "Host:\ttabbed",
            "Host:x",
            "Hostx: y",
            "Accept: text/plain,*/*;q=0.7",
            "Accept:",
            "Accept:  ",
            "Cookie: a=1; b=2",
            "Connection: close",
            "Connection: keep-alive",
            "Connection: Upgrade, close",
            "Connectionx: close",
            "User-Agent: wrk",
            "User-Agentx: wrk",
            "Content-Length: 5",
            "Content-Length:  5 ",
            "Content-Length: 5, 5",
            "Content-Length: 5, 6",
            "Content-Length: -5",
            "Content-Lengthy: 5",
            "Content-Type: text/plain",
            "Content-Types: text/plain",
            "Accept-Encoding: gzip, br",
            "Accept-Encodings: gzip",
            "Accept-Encoding:gzip",
            "Accept-Language: en",
            "Accept-Languages: en",
            "Transfer-Encoding: chunked",
            "Expect: 100-continue",
            "Expect: nothing",
        ];
        for (k, line) in lines.iter().enumerate() {
            // Alone, with the Host every HTTP/1.1 head needs, and ahead of
            // a line of each other kind.
            let mut heads = vec![format!("POST /x HTTP/1.1\r\n{line}\r\nhost: a\r\n\r\n")];
            for other in lines {
                heads.push(format!("POST /x HTTP/1.1\r\n{line}\r\n{other}\r\n\r\nbody!"));
            }
            for head in heads {
                let (name, rest) = line.split_once(':').expect("every line has a colon");
                let lower = head.replacen(line, &format!("{}:{rest}", name.to_ascii_lowercase()), 1);
                assert_ne!(head, lower, "line {k} has upper-case letters to fold");
                assert_eq!(full(head.as_bytes()), full(lower.as_bytes()), "{head:?}");
            }
        }
    }

    #[test]
    fn malformed_heads() {
        let err = |r: &[u8]| parse(r).unwrap_err().status().as_u16();
        assert_eq!(err(b"GARBAGE\r\n\r\n"), 400);
        assert_eq!(err(b"GET /x HTTP/1.1 extra\r\nHost: a\r\n\r\n"), 400);
        assert_eq!(err(b"GET /x HTTP/1.1\r\nHost a\r\n\r\n"), 400);
        assert_eq!(err(b"GET /x HTTP/1.1\r\nHost : a\r\n\r\n"), 400);
        assert_eq!(err(b"GET /x HTTP/1.1\r\n\r\n"), 400, "missing Host");
        assert_eq!(err(b"GET x HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
        assert_eq!(err(b"GET /x HTTP/2.0\r\nHost: a\r\n\r\n"), 505);
        assert_eq!(err(b"GET /x HTTP/x.y\r\nHost: a\r\n\r\n"), 400);
        assert_eq!(err(b"GET /x HTTP/1.1\r\nHost: a\r\nExpect: magic\r\n\r\n"), 417);
    }

    #[test]
    fn folded_comparison_matches_the_bytewise_rule_at_every_length() {
        let literal = b"transfer-encoding-and-more";
        for n in 0..=literal.len() {
            let lower = &literal[..n];
            let upper: Vec<u8> = lower.iter().map(u8::to_ascii_uppercase).collect();
            assert!(eq_folded(lower, lower) && eq_folded(&upper, lower), "{n}");
            for at in 0..n {
                let mut other = upper.clone();
                other[at] ^= 0x01;
                let bytewise = other.iter().zip(lower).all(|(&x, &y)| x | 0x20 == y | 0x20);
                assert_eq!(eq_folded(&other, lower), bytewise, "{n} {at}");
                assert!(!eq_folded(&other[..at], lower) || at == n);
            }
        }
    }

    #[test]
    fn host_grammar() {
        let status = |host: &str| {
            let req = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
            parse(req.as_bytes()).map(|_| 200).unwrap_or_else(|e| e.status().as_u16())
        };
        for ok in ["a", "localhost:8080", "127.0.0.1:18099", "[::1]:80", "", "a.example.com:443", "x%41y"] {
            assert_eq!(status(ok), 200, "{ok:?}");
        }
        for bad in ["a b", "a@b", "a/b", "a:b:c", "a:8o", "[::1", "a\"b", "a?b", "a#b", "[::1]x"] {
            assert_eq!(status(bad), 400, "{bad:?}");
        }
        // The fast check must not read the next request's bytes as the host.
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: b\r\n").map(|h| h.is_some()),
            Ok(true)
        );
        // Repeated, even if equal, is refused (RFC 9112 §3.2).
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n").unwrap_err().status().as_u16(),
            400
        );
    }

    #[test]
    fn target_rules() {
        let status = |target: &str, method: &str| {
            let req = format!("{method} {target} HTTP/1.1\r\nHost: a\r\n\r\n");
            parse(req.as_bytes()).map(|_| 200).unwrap_or_else(|e| e.status().as_u16())
        };
        for ok in ["/", "/a.b", "/a?b.c#", "/.well-known/x", "/a%2Fb", "/a%20b?x=%41", "http://a.example/b"] {
            // (`#` after `?` is a fragment too; it is refused below.)
            let expected = if ok.contains('#') { 400 } else { 200 };
            assert_eq!(status(ok, "GET"), expected, "{ok:?}");
        }
        for bad in [
            "/a#b",
            "/#",
            "/./a",
            "/a/../b",
            "/a/..",
            "/%2e%2e/x",
            "/%41",
            "/%",
            "/a%zz",
            "http://a.example/../b",
            "http://user@a.example/",
            "http:///x",
            "http://a b/",
        ] {
            assert_eq!(status(bad, "GET"), 400, "{bad:?}");
        }
        assert_eq!(status("/", "CONNECT"), 400, "CONNECT in origin-form");
        assert_eq!(status("a.example:443", "CONNECT"), 400, "CONNECT to a server that is no proxy");
        assert_eq!(status("*", "OPTIONS"), 200);
        assert_eq!(status("*", "GET"), 400);
        let (_, path, query, ..) = parse(b"GET /a/b.c?x=1.2 HTTP/1.1\r\nHost: a\r\n\r\n").unwrap().unwrap();
        assert_eq!((path.as_str(), query.as_deref()), ("/a/b.c", Some("x=1.2")));
    }

    #[test]
    fn versions() {
        let version = |v: &str| {
            let req = format!("GET / {v}\r\nHost: a\r\n\r\n");
            let mut slots = header_slots();
            parse_head(req.as_bytes(), &mut slots, &LIMITS).map(|h| h.map(|h| h.version))
        };
        assert_eq!(version("HTTP/1.1"), Ok(Some(Version::Http11)));
        assert_eq!(version("HTTP/1.0"), Ok(Some(Version::Http10)));
        assert_eq!(version("HTTP/1.2"), Ok(Some(Version::Http11)), "RFC 9110 §2.5");
        assert_eq!(version("HTTP/1.9"), Ok(Some(Version::Http11)));
        assert_eq!(version("HTTP/2.0"), Err(ParseError::VersionNotSupported));
        assert_eq!(version("HTTP/0.9"), Err(ParseError::VersionNotSupported));
        assert_eq!(version("HTTP/1.10").map(|_| ()), Err(ParseError::BadRequest("malformed request line")));
        assert_eq!(version("http/1.1").map(|_| ()), Err(ParseError::BadRequest("malformed request line")));
    }

    #[test]
    fn long_target_is_414_long_header_431() {
        let mut req = b"GET /".to_vec();
        req.extend(std::iter::repeat_n(b'a', 17 * 1024));
        assert_eq!(parse(&req), Err(ParseError::UriTooLong));
        req.extend_from_slice(b" HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(parse(&req), Err(ParseError::UriTooLong));
        assert_eq!(ParseError::UriTooLong.status().as_u16(), 414);
        let mut req = b"\r\nGET /".to_vec();
        req.extend(std::iter::repeat_n(b'a', 17 * 1024));
        assert_eq!(parse(&req), Err(ParseError::UriTooLong), "after an empty line");
    }

    #[test]
    fn absolute_form() {
        let (_, path, q, ..) =
            parse(b"GET http://example.com/a/b?c HTTP/1.1\r\nHost: a\r\n\r\n").unwrap().unwrap();
        assert_eq!((path.as_str(), q.as_deref()), ("/a/b", Some("c")));
        let (_, path, ..) = parse(b"GET http://example.com HTTP/1.1\r\nHost: a\r\n\r\n").unwrap().unwrap();
        assert_eq!(path, "/");
    }

    #[test]
    fn head_size_limit() {
        let mut req = b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: ".to_vec();
        req.extend(std::iter::repeat_n(b'a', 17 * 1024));
        assert_eq!(parse(&req), Err(ParseError::HeadTooLarge));
        req.extend_from_slice(b"\r\n\r\n");
        assert_eq!(parse(&req), Err(ParseError::HeadTooLarge));
    }

    #[test]
    fn header_count_limit() {
        let mut req = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
        for i in 0..101 {
            req.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        req.extend_from_slice(b"\r\n");
        assert_eq!(parse(&req), Err(ParseError::HeadTooLarge));
    }
}
