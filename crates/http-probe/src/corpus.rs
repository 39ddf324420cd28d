//! The strictness corpus: malformed, ambiguous and request-smuggling
//! requests, each with the answer RFC 9110 / RFC 9112 call for.
//!
//! Written for this project from the RFCs and from public research on
//! parser discrepancies: the desync classes PortSwigger described (CL.TE,
//! TE.CL, TE.TE with obfuscated `Transfer-Encoding`), the HTTP Garden's
//! differential findings (bare LF and CR, obs-fold, whitespace around
//! names, NUL and other controls, chunk-size tricks, version oddities,
//! `Host` grammar) and the cases llhttp's test suite refuses in strict
//! mode. Both the library's integration tests and `peregrine-lab verify`
//! send it over raw sockets, so the list is kept in one place.
//!
//! Every case names the route it needs (a GET route answering 200, or a
//! POST route taking a buffered body) through [`Routes`]; what must happen
//! is an [`Expect`].

/// What a case must get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// This error status, then the connection closes: the framing of what
    /// follows cannot be trusted.
    Refused(u16),
    /// Served normally (`200`), and the connection stays usable: the
    /// request is unusual but valid.
    Served,
    /// This status for a well-framed request the server does not serve
    /// (say, an unknown method): the connection stays usable.
    Kept(u16),
}

/// One corpus entry.
#[derive(Clone, Debug)]
pub struct Case {
    /// What the request tries.
    pub name: &'static str,
    /// Where the expected answer comes from.
    pub source: &'static str,
    /// The raw bytes sent.
    pub request: Vec<u8>,
    /// What must happen.
    pub expect: Expect,
}

/// The server's routes and `Host` the cases are built for.
#[derive(Clone, Debug)]
pub struct Routes<'a> {
    /// The value sent in `Host`.
    pub host: &'a str,
    /// A GET target answered with 200 (path and query), e.g. `/plaintext`.
    pub get: &'a str,
    /// A POST target with a buffered body answered with 200 (path and
    /// query); `None` leaves the body cases out.
    pub post: Option<&'a str>,
}

/// Over the 16 KiB default head limit, not so far over that a server which
/// stops reading at the limit leaves a lot unread.
const LONG_TARGET: usize = 20 * 1024;

/// The corpus for `routes`.
pub fn cases(routes: &Routes<'_>) -> Vec<Case> {
    let (h, p) = (routes.host, routes.get);
    let mut out = Vec::new();
    let mut add = |name, source, request: String, expect| {
        out.push(Case { name, source, request: request.into_bytes(), expect });
    };
    use Expect::{Kept, Refused, Served};
    let get = |line_end: &str, extra: &str| format!("GET {p} HTTP/1.1{line_end}Host: {h}\r\n{extra}\r\n");

    // The request line.
    add(
        "HTTP/1.2 is served as HTTP/1.1",
        "RFC 9110 2.5",
        format!("GET {p} HTTP/1.2\r\nHost: {h}\r\n\r\n"),
        Served,
    );
    add(
        "HTTP/2.0 in an HTTP/1 request line",
        "RFC 9110 15.6.6",
        format!("GET {p} HTTP/2.0\r\nHost: {h}\r\n\r\n"),
        Refused(505),
    );
    add(
        "HTTP/0.9 version",
        "RFC 9110 15.6.6",
        format!("GET {p} HTTP/0.9\r\nHost: {h}\r\n\r\n"),
        Refused(505),
    );
    add(
        "two-digit minor version HTTP/1.10",
        "RFC 9112 2.3",
        format!("GET {p} HTTP/1.10\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add(
        "lower-case protocol name http/1.1",
        "RFC 9112 2.3 (case-sensitive)",
        format!("GET {p} http/1.1\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add(
        "two spaces after the method",
        "RFC 9112 3 (single SP)",
        format!("GET  {p} HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add(
        "tab between method and target",
        "RFC 9112 3; llhttp strict",
        format!("GET\t{p} HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add("bare LF after the request line", "RFC 9112 2.2; HTTP Garden", get("\n", ""), Refused(400));
    add("bare CR after the request line", "RFC 9112 2.2; HTTP Garden", get("\r", ""), Refused(400));
    add(
        "lower-case method get",
        "RFC 9110 9.1 (case-sensitive)",
        format!("get {p} HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Kept(405),
    );
    add(
        "fragment in the target",
        "RFC 9112 3.2 (no fragment)",
        format!("GET {p}#x HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add(
        "fragment after a query",
        "RFC 9112 3.2 (no fragment)",
        format!("GET {p}?a=1#x HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add(
        "CONNECT in origin-form",
        "RFC 9112 3.2.3",
        format!("CONNECT {p} HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add(
        "asterisk-form with GET",
        "RFC 9112 3.2.4 (OPTIONS only)",
        format!("GET * HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add(
        "absolute-form target",
        "RFC 9112 3.2.2 (MUST accept)",
        format!("GET http://{h}{p} HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Served,
    );
    add(
        "absolute-form with userinfo",
        "RFC 9110 4.2.4 (no userinfo)",
        format!("GET http://user@{h}{p} HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add(
        "dot segment /./",
        "peregrine path rule (RFC 3986 5.2.4)",
        format!("GET /.{p} HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add(
        "dot-dot segment",
        "peregrine path rule (RFC 3986 5.2.4)",
        format!("GET /x/..{p} HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add(
        "escaped dot-dot %2e%2e",
        "peregrine path rule (RFC 3986 2.3)",
        format!("GET /%2e%2e{p} HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add(
        "escaped unreserved letter",
        "peregrine path rule (RFC 3986 2.3)",
        format!("GET /%61{} HTTP/1.1\r\nHost: {h}\r\n\r\n", &p[1..]),
        Refused(400),
    );
    add(
        "malformed escape %zz",
        "RFC 3986 2.1",
        format!("GET {p}%zz HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add(
        "NUL in the target",
        "RFC 9112 3.2",
        format!("GET {p}\0 HTTP/1.1\r\nHost: {h}\r\n\r\n"),
        Refused(400),
    );
    add(
        "target over the limit",
        "RFC 9112 3 (414)",
        format!("GET /{} HTTP/1.1\r\nHost: {h}\r\n\r\n", "a".repeat(LONG_TARGET)),
        Refused(414),
    );

    // Host.
    add(
        "Host with a space",
        "RFC 9112 3.2",
        get("\r\n", "").replace(&format!("Host: {h}"), "Host: a b"),
        Refused(400),
    );
    add(
        "Host with userinfo",
        "RFC 9112 3.2; PortSwigger host attacks",
        get("\r\n", "").replace(&format!("Host: {h}"), &format!("Host: x@{h}")),
        Refused(400),
    );
    add(
        "Host with a path",
        "RFC 9112 3.2",
        get("\r\n", "").replace(&format!("Host: {h}"), &format!("Host: {h}/x")),
        Refused(400),
    );
    add(
        "Host with a non-numeric port",
        "RFC 9112 3.2",
        get("\r\n", "").replace(&format!("Host: {h}"), "Host: localhost:8o"),
        Refused(400),
    );
    add(
        "Host with two ports",
        "RFC 9112 3.2",
        get("\r\n", "").replace(&format!("Host: {h}"), "Host: localhost:80:80"),
        Refused(400),
    );
    add(
        "Host with an unclosed IPv6 literal",
        "RFC 9112 3.2",
        get("\r\n", "").replace(&format!("Host: {h}"), "Host: [::1"),
        Refused(400),
    );
    add(
        "Host with a tab inside",
        "RFC 9112 3.2",
        get("\r\n", "").replace(&format!("Host: {h}"), "Host: a\tb"),
        Refused(400),
    );
    add("two Host fields", "RFC 9112 3.2", get("\r\n", &format!("Host: {h}\r\n")), Refused(400));
    add("Host missing in HTTP/1.1", "RFC 9112 3.2", format!("GET {p} HTTP/1.1\r\n\r\n"), Refused(400));
    add(
        "Host an IPv6 literal with port",
        "RFC 9112 3.2",
        get("\r\n", "").replace(&format!("Host: {h}"), "Host: [::1]:8080"),
        Served,
    );
    add(
        "Host empty",
        "RFC 9112 3.2 (empty allowed)",
        get("\r\n", "").replace(&format!("Host: {h}"), "Host:"),
        Served,
    );

    // Header fields.
    add(
        "obs-fold continuation line",
        "RFC 9112 5.2; HTTP Garden",
        get("\r\n", "X-A: b\r\n c\r\n"),
        Refused(400),
    );
    add("space inside a header name", "RFC 9110 5.1", get("\r\n", "X A: b\r\n"), Refused(400));
    add("space before the colon", "RFC 9112 5.1 (MUST reject)", get("\r\n", "X-A : b\r\n"), Refused(400));
    add("empty header name", "RFC 9110 5.1", get("\r\n", ": b\r\n"), Refused(400));
    add("non-token byte in a name", "RFC 9110 5.6.2", get("\r\n", "X@A: b\r\n"), Refused(400));
    add("NUL in a header value", "RFC 9110 5.5", get("\r\n", "X-A: a\0b\r\n"), Refused(400));
    add("bare CR in a header value", "RFC 9110 5.5; HTTP Garden", get("\r\n", "X-A: a\rb\r\n"), Refused(400));
    add(
        "bare LF ending a header line",
        "RFC 9112 2.2; HTTP Garden",
        get("\r\n", "X-A: b\nX-B: c\r\n"),
        Refused(400),
    );
    add("DEL in a header value", "RFC 9110 5.5", get("\r\n", "X-A: a\x7fb\r\n"), Refused(400));
    add("unsupported Expect", "RFC 9110 10.1.1", get("\r\n", "Expect: nonsense\r\n"), Refused(417));

    let Some(post) = routes.post else { return out };
    let body = |fields: &str, body: &str| format!("POST {post} HTTP/1.1\r\nHost: {h}\r\n{fields}\r\n{body}");
    // Framing and smuggling.
    add(
        "CL.TE: Content-Length and chunked",
        "RFC 9112 6.3; PortSwigger CL.TE",
        body("Content-Length: 6\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\nG"),
        Refused(400),
    );
    add(
        "TE.CL: chunked then Content-Length",
        "RFC 9112 6.3; PortSwigger TE.CL",
        body("Transfer-Encoding: chunked\r\nContent-Length: 3\r\n", "1\r\nG\r\n0\r\n\r\n"),
        Refused(400),
    );
    add(
        "TE.TE: xchunked",
        "PortSwigger TE obfuscation",
        body("Transfer-Encoding: xchunked\r\n", ""),
        Refused(501),
    );
    add(
        "TE.TE: quoted \"chunked\"",
        "PortSwigger TE obfuscation",
        body("Transfer-Encoding: \"chunked\"\r\n", ""),
        Refused(501),
    );
    add(
        "TE.TE: space before the colon",
        "PortSwigger TE obfuscation; RFC 9112 5.1",
        body("Transfer-Encoding : chunked\r\n", "0\r\n\r\n"),
        Refused(400),
    );
    add(
        "TE.TE: vertical tab before chunked",
        "PortSwigger TE obfuscation",
        body("Transfer-Encoding:\x0bchunked\r\n", "0\r\n\r\n"),
        Refused(400),
    );
    add(
        "TE.TE: obs-folded chunked",
        "PortSwigger TE obfuscation; RFC 9112 5.2",
        body("Transfer-Encoding:\r\n chunked\r\n", "0\r\n\r\n"),
        Refused(400),
    );
    add(
        "TE.TE: chunked twice",
        "RFC 9112 6.1 (chunked once, last)",
        body("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"),
        Refused(400),
    );
    add(
        "chunked not the final coding",
        "RFC 9112 6.1",
        body("Transfer-Encoding: chunked, identity\r\n", "0\r\n\r\n"),
        Refused(400),
    );
    add(
        "Transfer-Encoding in HTTP/1.0",
        "RFC 9112 6.1",
        format!("POST {post} HTTP/1.0\r\nHost: {h}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        Refused(400),
    );
    add(
        "Content-Length with a plus sign",
        "RFC 9110 8.6 (1*DIGIT)",
        body("Content-Length: +1\r\n", "x"),
        Refused(400),
    );
    add(
        "Content-Length in hexadecimal",
        "RFC 9110 8.6 (1*DIGIT)",
        body("Content-Length: 0x1\r\n", "x"),
        Refused(400),
    );
    add(
        "Content-Length negative",
        "RFC 9110 8.6 (1*DIGIT)",
        body("Content-Length: -1\r\n", "x"),
        Refused(400),
    );
    add(
        "Content-Length with an inner space",
        "RFC 9110 8.6",
        body("Content-Length: 1 1\r\n", "x"),
        Refused(400),
    );
    add(
        "Content-Length list of different values",
        "RFC 9110 8.6",
        body("Content-Length: 1, 2\r\n", "xx"),
        Refused(400),
    );
    add(
        "two different Content-Length fields",
        "RFC 9112 6.3",
        body("Content-Length: 1\r\nContent-Length: 2\r\n", "xx"),
        Refused(400),
    );
    add(
        "Content-Length beyond any limit",
        "RFC 9110 15.5.14",
        body("Content-Length: 99999999999999999999999\r\n", ""),
        Refused(413),
    );
    add(
        "chunk size not hexadecimal",
        "RFC 9112 7.1",
        body("Transfer-Encoding: chunked\r\n", "zz\r\nx\r\n0\r\n\r\n"),
        Refused(400),
    );
    add(
        "chunk size with a 0x prefix",
        "RFC 9112 7.1; HTTP Garden",
        body("Transfer-Encoding: chunked\r\n", "0x1\r\nx\r\n0\r\n\r\n"),
        Refused(400),
    );
    add(
        "chunk size negative",
        "RFC 9112 7.1",
        body("Transfer-Encoding: chunked\r\n", "-1\r\nx\r\n0\r\n\r\n"),
        Refused(400),
    );
    add(
        "chunk size overflowing 64 bits",
        "RFC 9112 7.1; HTTP Garden",
        body("Transfer-Encoding: chunked\r\n", "10000000000000001\r\nx\r\n0\r\n\r\n"),
        Refused(400),
    );
    add(
        "chunk size ended by a bare LF",
        "RFC 9112 7.1; HTTP Garden",
        body("Transfer-Encoding: chunked\r\n", "1\nx\r\n0\r\n\r\n"),
        Refused(400),
    );
    add(
        "chunk data longer than its size",
        "RFC 9112 7.1",
        body("Transfer-Encoding: chunked\r\n", "1\r\nxy\r\n0\r\n\r\n"),
        Refused(400),
    );
    add(
        "bare LF in a chunk extension",
        "RFC 9112 7.1.1; HTTP Garden",
        body("Transfer-Encoding: chunked\r\n", "1;a\nb\r\nx\r\n0\r\n\r\n"),
        Refused(400),
    );
    add(
        "chunked body with an extension and a trailer",
        "RFC 9112 7.1.1, 7.1.2",
        body("Transfer-Encoding: chunked\r\n", "1;name=value\r\n1\r\n0\r\nX-Trailer: t\r\n\r\n"),
        Served,
    );
    out
}
