//! The protocol-neutral pipeline's rules, checked over real sockets: route
//! patterns that keep their own parameter names, headers that cannot be
//! injected, one answer per body failure whatever reads the body, and
//! `100 Continue` only for requests that reach a handler.

mod common;

use common::{config, Client};
use peregrine::{
    Body, Config, IntoResponse, Request, ResponseWriter, Router, Server, ServerHandle, StatusCode,
};

/// A custom response type that writes its own headers, as an application's
/// `IntoResponse` may.
struct Tagged(&'static str, &'static str);

impl IntoResponse for Tagged {
    fn into_response(self) -> peregrine::Response {
        peregrine::Response::text("tagged").header(self.0, self.1)
    }

    fn write_to(self, w: &mut ResponseWriter<'_>) {
        w.write(StatusCode::OK, "text/plain", [(self.0, self.1)], b"tagged");
    }
}

fn router() -> Router {
    Router::new()
        .get("/u/{id}", |req: &Request<'_>| format!("get id={:?}", req.param("id").as_deref()))
        .post("/u/{name}", |req: &Request<'_>| format!("post name={:?}", req.param("name").as_deref()))
        .get("/tag/ok", || Tagged("X-Tag", "fine"))
        .get("/tag/crlf", || Tagged("X-Tag", "a\r\nSet-Cookie: stolen=1"))
        .get("/tag/lf", || Tagged("X-Tag", "a\nb"))
        .get("/tag/nul", || Tagged("X-Tag", "a\0b"))
        .get("/tag/name", || Tagged("X Tag", "a"))
        .get_async("/tag/async-crlf", || async { Tagged("X-Tag", "a\r\nX-Evil: 1") })
        .post_stream("/upload", |body: Body| async move { body.count().await.map(|n| n.to_string()) })
        // A streaming handler that ignores the body error and answers 200:
        // the server's answer to the failure must win.
        .post_stream("/upload-lenient", |mut body: Body| async move {
            let mut buf = [0u8; 1024];
            while let Ok(n) = body.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
            "ignored the error"
        })
        .post("/echo", |body: Vec<u8>| body.len().to_string())
}

fn start_with(config: Config) -> ServerHandle {
    Server::with_config(config).spawn("127.0.0.1:0", |_| async { router() }).expect("test server starts")
}

#[test]
fn same_shape_routes_for_different_methods_keep_their_parameter_names() {
    let server = start_with(config());
    let mut c = Client::connect(server.local_addr());
    assert_eq!(c.roundtrip(b"GET /u/ada HTTP/1.1\r\nHost: x\r\n\r\n").text(), "get id=Some(\"ada\")");
    let r = c.roundtrip(b"POST /u/ada HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(r.text(), "post name=Some(\"ada\")");
    let r = c.roundtrip(b"DELETE /u/ada HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, POST, HEAD"));
    server.shutdown();
}

#[test]
fn a_custom_response_cannot_inject_headers() {
    let server = start_with(config());
    let mut c = Client::connect(server.local_addr());
    let ok = c.roundtrip(b"GET /tag/ok HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((ok.status, ok.header("x-tag")), (200, Some("fine")));
    for path in ["/tag/crlf", "/tag/lf", "/tag/nul", "/tag/name", "/tag/async-crlf"] {
        let r = c.roundtrip(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        assert_eq!(r.status, 500, "{path}");
        assert_eq!(r.header("x-tag"), None, "{path}");
        assert_eq!(r.header("set-cookie"), None, "{path}");
        assert_eq!(r.header("x-evil"), None, "{path}");
        assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"), "{path}");
    }
    // The connection is intact: the next request is answered normally.
    assert_eq!(c.roundtrip(b"GET /tag/ok HTTP/1.1\r\nHost: x\r\n\r\n").status, 200);
    server.shutdown();
}

/// A chunked body over the limit, and one with bad framing, get one answer
/// each, the same on a buffered route and on streaming routes (including one
/// whose handler swallows the error), and the connection closes.
#[test]
fn one_body_failure_gets_one_answer_on_every_kind_of_route() {
    let config = Config { max_body_bytes: 1024, max_stream_body_bytes: 1024, ..config() };
    let server = start_with(config);
    let big_chunk = format!("800\r\n{}\r\n0\r\n\r\n", "a".repeat(0x800));
    let cases: [(&str, &[u8], u16); 2] =
        [("over the limit", big_chunk.as_bytes(), 413), ("bad chunk size", b"zz\r\nhello\r\n0\r\n\r\n", 400)];
    for (what, body, status) in cases {
        let mut answers = Vec::new();
        for path in ["/echo", "/upload", "/upload-lenient"] {
            let mut c = Client::connect(server.local_addr());
            let mut req =
                format!("POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n").into_bytes();
            req.extend_from_slice(body);
            let r = c.roundtrip(&req);
            assert_eq!(r.status, status, "{what} on {path}");
            assert!(r.says_close(), "{what} on {path}");
            c.expect_closed();
            answers.push((r.header("content-type").map(str::to_owned), r.body));
        }
        assert!(answers.windows(2).all(|w| w[0] == w[1]), "{what}: answers differ: {answers:?}");
    }
    server.shutdown();
}

#[test]
fn expect_continue_is_not_sent_for_requests_no_handler_reads() {
    let server = start_with(config());
    for (request, status) in [
        ("POST /nowhere HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", 404),
        ("PUT /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", 405),
    ] {
        let mut c = Client::connect(server.local_addr());
        let r = c.roundtrip(request.as_bytes());
        assert_eq!(r.status, status, "{request:?}");
        // The body may still come, so the answer is the connection's last.
        assert!(r.says_close(), "{request:?}");
        c.expect_closed();
    }
    server.shutdown();
}

#[test]
fn a_huge_configured_body_limit_does_not_overflow() {
    let config = Config { max_body_bytes: u64::MAX, ..config() };
    let server = start_with(config);
    let mut c = Client::connect(server.local_addr());
    let r = c.roundtrip(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    );
    assert_eq!((r.status, r.text()), (200, "3"));
    // Split, so the partial-body path computes its bounds too.
    c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab");
    std::thread::sleep(std::time::Duration::from_millis(50));
    c.send(b"c\r\n0\r\n\r\n");
    assert_eq!(c.response().text(), "3");
    server.shutdown();
}
