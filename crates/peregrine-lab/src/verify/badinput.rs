//! The bad-input battery of SPEC.md, sent as raw bytes.
//!
//! Owns the malformed, oversized and ambiguous requests (each with the
//! status it must get and whether the connection must be closed after it or
//! stay usable) and the slow/idle client checks. Every error answer must
//! also be well-formed HTTP with a correct `Content-Length`, and the server
//! must keep serving afterwards.
//!
//! Beside its own cases, as the `strict` group, it sends the shared strictness corpus
//! ([`http_probe::corpus`]: request-line, `Host`, header and smuggling
//! cases from RFC 9110/9112 and public desync research), each with the
//! answer the RFCs call for.

use std::io::Write;

use http_probe::corpus::{self, Expect};
use std::thread;
use std::time::{Duration, Instant};

use super::checks::{self, Check};
use super::tfb::expect_closed;
use super::{Ctx, Reporter};
use crate::rig::client::{CloseState, Target};

/// What must happen to the connection after the error response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum After {
    /// Framing is unknown or untrusted: the server must close.
    Close,
    /// A well-framed request with a routing error: the connection stays
    /// usable for the next request.
    KeepAlive,
}

struct Case {
    name: String,
    request: Vec<u8>,
    status: u16,
    after: After,
}

/// Over the 16 KiB default head limit, but not by so much that a server
/// which stops reading at the limit leaves a lot unread (which can turn its
/// close into a reset that destroys the response in flight).
const BIG_HEAD: usize = 20 * 1024;

fn cases(ctx: &Ctx, rep: &mut Reporter) -> Vec<Case> {
    let h = &ctx.target.host;
    let pre = &ctx.target.prefix;
    let mut out = Vec::new();
    let mut case = |name: &str, request: String, status: u16, after: After| {
        out.push(Case { name: name.to_string(), request: request.into_bytes(), status, after });
    };
    case("request line \"GARBAGE\"", "GARBAGE\r\n\r\n".into(), 400, After::Close);
    let get = [&ctx.routes.plaintext, &ctx.routes.json].into_iter().find(|p| !p.is_empty()).cloned();
    match &get {
        Some(p) => {
            case(
                "request line with an extra token",
                format!("GET {pre}{p} HTTP/1.1 extra\r\nHost: {h}\r\n\r\n"),
                400,
                After::Close,
            );
            case(
                "request line without a version",
                format!("GET {pre}{p}\r\nHost: {h}\r\n\r\n"),
                400,
                After::Close,
            );
            case(
                "request line with version HTTP/1.x",
                format!("GET {pre}{p} HTTP/1.x\r\nHost: {h}\r\n\r\n"),
                400,
                After::Close,
            );
            case(
                "header line without a colon",
                format!("GET {pre}{p} HTTP/1.1\r\nHost: {h}\r\nNoColonHere\r\n\r\n"),
                400,
                After::Close,
            );
            case(
                "header with a space before the colon",
                format!("GET {pre}{p} HTTP/1.1\r\nHost: {h}\r\nX-Test : 1\r\n\r\n"),
                400,
                After::Close,
            );
            case(
                "HTTP/1.1 request without Host",
                format!("GET {pre}{p} HTTP/1.1\r\n\r\n"),
                400,
                After::Close,
            );
            let big = "a".repeat(BIG_HEAD);
            case(
                "header section over 16 KiB (one header)",
                format!("GET {pre}{p} HTTP/1.1\r\nHost: {h}\r\nX-Big: {big}\r\n\r\n"),
                431,
                After::Close,
            );
            let many: String =
                (0..BIG_HEAD / 64).map(|i| format!("X-H{i:04}: {}\r\n", "b".repeat(54))).collect();
            case(
                "header section over 16 KiB (many headers)",
                format!("GET {pre}{p} HTTP/1.1\r\nHost: {h}\r\n{many}\r\n"),
                431,
                After::Close,
            );
            case(
                "unknown path",
                format!("GET {pre}/peregrine-lab/no-such-path HTTP/1.1\r\nHost: {h}\r\n\r\n"),
                404,
                After::KeepAlive,
            );
            case(
                &format!("DELETE {p}"),
                format!("DELETE {pre}{p} HTTP/1.1\r\nHost: {h}\r\n\r\n"),
                405,
                After::KeepAlive,
            );
        }
        None => rep.skip("bad input on GET routes", "neither plaintext nor json configured"),
    }
    let post = [&ctx.routes.baseline, &ctx.routes.upload].into_iter().find(|p| !p.is_empty()).map(|p| {
        if *p == ctx.routes.baseline {
            format!("{p}?a=1&b=2")
        } else {
            p.clone()
        }
    });
    match &post {
        Some(p) => {
            let head = |extra: &str| format!("POST {pre}{p} HTTP/1.1\r\nHost: {h}\r\n{extra}\r\n");
            case("Content-Length \"abc\"", head("Content-Length: abc\r\n") + "7", 400, After::Close);
            // The body is announced, never sent: the server must decide from
            // the head alone.
            case(
                "body over the limit (Content-Length 10 GB)",
                head("Content-Length: 10000000000\r\n"),
                413,
                After::Close,
            );
            case(
                "Content-Length with Transfer-Encoding: chunked",
                head("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n") + "0\r\n\r\n",
                400,
                After::Close,
            );
            case(
                "two different Content-Length values",
                head("Content-Length: 1\r\nContent-Length: 2\r\n") + "7",
                400,
                After::Close,
            );
            case("Transfer-Encoding: gzip", head("Transfer-Encoding: gzip\r\n"), 501, After::Close);
            case(
                "invalid chunk size",
                head("Transfer-Encoding: chunked\r\n") + "zz\r\n7\r\n0\r\n\r\n",
                400,
                After::Close,
            );
        }
        None => rep.skip("bad input on POST routes", "neither baseline nor upload configured"),
    }
    out
}

pub fn run(ctx: &Ctx, rep: &mut Reporter) {
    for case in cases(ctx, rep) {
        let verdict = match case.after {
            After::Close => "close",
            After::KeepAlive => "keep-alive",
        };
        let name = format!("bad input: {} -> {} + {verdict}", case.name, case.status);
        rep.record(&name, run_case(ctx, &case));
    }
    if let Some(path) = rep.route("still serving after bad input", &ctx.routes.plaintext) {
        let result = ctx.target.get(path).and_then(|r| checks::check_plaintext(&r));
        rep.record(&format!("GET {path} still answered after the bad input"), result);
    }
}

/// The shared strictness corpus, over the plaintext (GET) and baseline
/// (POST) routes: the `strict` group.
pub fn strict(ctx: &Ctx, rep: &mut Reporter) {
    let Some(get) = rep.route("strictness corpus", &ctx.routes.plaintext) else { return };
    let pre = &ctx.target.prefix;
    let get = format!("{pre}{get}");
    let post = (!ctx.routes.baseline.is_empty()).then(|| format!("{pre}{}?a=1&b=2", ctx.routes.baseline));
    if post.is_none() {
        rep.skip("strictness corpus on POST", "no baseline route configured");
    }
    let routes = corpus::Routes { host: &ctx.target.host, get: &get, post: post.as_deref() };
    for case in corpus::cases(&routes) {
        let verdict = match case.expect {
            Expect::Refused(status) => format!("{status} + close"),
            Expect::Served => "200 + keep-alive".to_string(),
            Expect::Kept(status) => format!("{status} + keep-alive"),
        };
        let name = format!("strict: {} ({}) -> {verdict}", case.name, case.source);
        rep.record(&name, run_corpus_case(ctx, &case));
    }
}

fn run_corpus_case(ctx: &Ctx, case: &corpus::Case) -> Check {
    let mut conn = ctx.target.connect()?;
    let resp = conn.exchange(&case.request)?;
    let (status, after) = match case.expect {
        Expect::Refused(status) => (status, After::Close),
        Expect::Served => (200, After::KeepAlive),
        Expect::Kept(status) => (status, After::KeepAlive),
    };
    if status == 200 {
        checks::check_status(&resp, 200)?;
    } else {
        checks::check_error(&resp, status)?;
    }
    match after {
        After::Close => expect_closed(conn.wait_closed(ctx.close_wait), ctx.close_wait),
        After::KeepAlive => {
            let next = conn
                .exchange(&ctx.target.get_request(&ctx.routes.plaintext))
                .map_err(|e| format!("expected the connection usable afterwards, got {e}"))?;
            checks::check_plaintext(&next).map_err(|e| format!("next request on the same connection: {e}"))
        }
    }
}

fn run_case(ctx: &Ctx, case: &Case) -> Check {
    let mut conn = ctx.target.connect()?;
    let resp = conn.exchange(&case.request)?;
    if case.status == 405 {
        checks::check_method_not_allowed(&resp, "GET")?;
    } else {
        checks::check_error(&resp, case.status)?;
    }
    match case.after {
        After::Close => expect_closed(conn.wait_closed(ctx.close_wait), ctx.close_wait),
        After::KeepAlive => {
            let plaintext = &ctx.routes.plaintext;
            if plaintext.is_empty() {
                return Ok(());
            }
            let next = conn
                .exchange(&ctx.target.get_request(plaintext))
                .map_err(|e| format!("expected the connection usable afterwards, got {e}"))?;
            checks::check_plaintext(&next).map_err(|e| format!("next request on the same connection: {e}"))
        }
    }
}

/// Slow-header and idle clients must be disconnected, without stalling
/// anyone else.
pub fn slow(ctx: &Ctx, rep: &mut Reporter) {
    let Some(path) = rep.route("slow clients", &ctx.routes.plaintext) else {
        return;
    };
    let limit = ctx.slow_timeout;
    let target = &ctx.target;
    let (slow, idle, meanwhile) = thread::scope(|s| {
        let slow = s.spawn(|| slow_headers(target, path, limit));
        let idle = s.spawn(|| idle_client(target, ctx.idle_timeout));
        // Two seconds in, both are parked on the server; a fresh client
        // must still be answered promptly.
        thread::sleep(Duration::from_secs(2));
        let started = Instant::now();
        let meanwhile = target.get(path).and_then(|r| checks::check_plaintext(&r)).and_then(|()| {
            let took = started.elapsed();
            if took <= Duration::from_secs(2) {
                Ok(())
            } else {
                Err(format!("expected an answer within 2 s, got one after {:.1} s", took.as_secs_f32()))
            }
        });
        let join = |h: thread::ScopedJoinHandle<'_, Result<Duration, String>>| {
            h.join().unwrap_or_else(|_| Err("client thread panicked".into()))
        };
        (join(slow), join(idle), meanwhile)
    });
    let (slow_secs, idle_secs) = (limit.as_secs(), ctx.idle_timeout.as_secs());
    for (name, result) in [
        (format!("slow client (one header byte per second) disconnected within {slow_secs} s"), slow),
        (format!("idle client disconnected within {idle_secs} s"), idle),
    ] {
        match result {
            Ok(after) => rep.pass(&format!("{name} (after {:.1} s)", after.as_secs_f32())),
            Err(e) => rep.fail(&name, &e),
        }
    }
    rep.record(&format!("GET {path} answered while slow clients are connected"), meanwhile);
    let after = target.get(path).and_then(|r| checks::check_plaintext(&r));
    rep.record(&format!("GET {path} still answered after the slow clients"), after);
}

/// Sends a request head one byte per second; returns how long until the
/// server hung up.
fn slow_headers(target: &Target, path: &str, limit: Duration) -> Result<Duration, String> {
    let mut conn = target.connect()?;
    let start = Instant::now();
    conn.send(
        format!("GET {}{path} HTTP/1.1\r\nHost: {}\r\nX-Slow: ", target.prefix, target.host).as_bytes(),
    )?;
    while start.elapsed() < limit {
        // The one-second wait for a close doubles as the pacing.
        match conn.wait_closed(Duration::from_secs(1)) {
            CloseState::Closed => return Ok(start.elapsed()),
            // A 408 before closing is fine; keep waiting for the close.
            CloseState::Data(_) | CloseState::Open => {}
        }
        if conn.stream().write_all(b"a").is_err() {
            return Ok(start.elapsed());
        }
    }
    Err(format!(
        "expected a disconnect within {} s, got still connected after sending {} header bytes",
        limit.as_secs(),
        start.elapsed().as_secs()
    ))
}

/// Connects and sends nothing.
fn idle_client(target: &Target, limit: Duration) -> Result<Duration, String> {
    let mut conn = target.connect()?;
    let start = Instant::now();
    loop {
        let left = limit.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(format!(
                "expected a disconnect within {} s, got still connected (raise --idle-timeout if the server's is deliberately longer)",
                limit.as_secs()
            ));
        }
        match conn.wait_closed(left) {
            CloseState::Closed => return Ok(start.elapsed()),
            CloseState::Data(_) | CloseState::Open => {}
        }
    }
}
