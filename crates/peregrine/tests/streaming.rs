//! Streamed response bodies over real sockets: chunked on HTTP/1.1 with
//! keep-alive, close-delimited on HTTP/1.0, head only for HEAD, a cut body
//! when the stream fails, backpressure from a client that does not read,
//! and Server-Sent Events with keep-alive comments.

mod common;

use std::io::Read;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{config, Client};
use futures_util::stream;
use peregrine::response::{Event, Sse};
use peregrine::{Response, Router, Server, ServerHandle};

fn numbers(n: usize) -> impl futures_util::Stream<Item = Result<String, std::io::Error>> {
    stream::iter((0..n).map(|i| Ok(format!("{i};"))))
}

fn router(produced: Arc<AtomicUsize>) -> Router {
    let produced = Rc::new(produced);
    Router::new()
        .get("/numbers", || async { Response::stream("text/plain", numbers(5)) })
        .get("/numbers-sync", || Response::stream("text/plain", numbers(3)))
        .get("/broken", || async {
            let items = vec![Ok("first;".to_owned()), Err(std::io::Error::other("the source went away"))];
            Response::stream("text/plain", stream::iter(items))
        })
        .get("/big", move || {
            let produced = Arc::clone(&produced);
            async move {
                let chunks = stream::iter(0..1000).map(move |_| {
                    produced.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, std::io::Error>(vec![b'x'; 64 * 1024])
                });
                Response::stream("application/octet-stream", chunks)
            }
        })
        .get("/events", || async {
            let events = stream::unfold(0, |i| async move {
                if i == 2 {
                    return None;
                }
                if i == 1 {
                    tokio::time::sleep(Duration::from_millis(350)).await;
                }
                Some((
                    Ok::<_, std::io::Error>(Event::data(format!("tick {i}\nmore")).id(i.to_string())),
                    i + 1,
                ))
            });
            Sse::new(events).keep_alive(Some(Duration::from_millis(100)))
        })
}

use futures_util::StreamExt;

fn start(produced: Arc<AtomicUsize>) -> ServerHandle {
    Server::with_config(config())
        .spawn("127.0.0.1:0", move |_| {
            let produced = Arc::clone(&produced);
            async move { router(produced) }
        })
        .expect("test server starts")
}

#[test]
fn a_streamed_body_is_chunked_and_the_connection_goes_on() {
    let server = start(Arc::default());
    let mut c = Client::connect(server.local_addr());
    for path in ["/numbers", "/numbers-sync"] {
        let r = c.roundtrip(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
        assert_eq!(r.header("transfer-encoding"), Some("chunked"), "{path}");
        assert_eq!(r.header("content-length"), None, "{path}");
    }
    c.send(b"GET /numbers HTTP/1.1\r\nHost: x\r\n\r\nGET /numbers-sync HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.response().text(), "0;1;2;3;4;");
    assert_eq!(c.response().text(), "0;1;2;");
    // HEAD: the head a GET would get, and no body.
    c.send(b"HEAD /numbers HTTP/1.1\r\nHost: x\r\n\r\n");
    let head = c.head_response();
    assert_eq!((head.status, head.body.len()), (200, 0));
    assert_eq!(c.roundtrip(b"GET /numbers HTTP/1.1\r\nHost: x\r\n\r\n").text(), "0;1;2;3;4;");
    server.shutdown();
}

#[test]
fn http10_gets_a_body_delimited_by_the_close() {
    let server = start(Arc::default());
    let mut raw = std::net::TcpStream::connect(server.local_addr()).unwrap();
    std::io::Write::write_all(&mut raw, b"GET /numbers HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut all = String::new();
    raw.read_to_string(&mut all).expect("the server closes after the body");
    assert!(all.contains("\r\nConnection: close\r\n"), "{all:?}");
    assert!(!all.contains("Transfer-Encoding"), "{all:?}");
    assert!(all.ends_with("\r\n\r\n0;1;2;3;4;"), "{all:?}");
    server.shutdown();
}

#[test]
fn a_failing_stream_cuts_the_body_and_closes() {
    let server = start(Arc::default());
    let mut raw = std::net::TcpStream::connect(server.local_addr()).unwrap();
    std::io::Write::write_all(&mut raw, b"GET /broken HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut all = String::new();
    raw.read_to_string(&mut all).expect("the server closes");
    assert!(all.ends_with("\r\n\r\n6\r\nfirst;\r\n"), "no last chunk after the failure: {all:?}");
    server.shutdown();
}

#[test]
fn a_client_that_does_not_read_holds_the_stream_back() {
    let produced = Arc::new(AtomicUsize::new(0));
    let server = start(Arc::clone(&produced));
    let mut raw = std::net::TcpStream::connect(server.local_addr()).unwrap();
    std::io::Write::write_all(&mut raw, b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let early = produced.load(Ordering::SeqCst);
    // 1000 chunks of 64 KiB would be 64 MiB; only what the socket buffers
    // hold may be made before the client reads.
    assert!(early < 200, "{early} chunks made for a client that read nothing");
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut sink = vec![0u8; 1 << 20];
    let mut total = 0usize;
    while total < 64 * 1024 * 1000 {
        match raw.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
    assert!(total >= 64 * 1024 * 1000, "read {total} bytes");
    assert_eq!(produced.load(Ordering::SeqCst), 1000);
    server.shutdown();
}

#[test]
fn server_sent_events_arrive_with_keep_alive_comments() {
    let server = start(Arc::default());
    let mut c = Client::connect(server.local_addr());
    let r = c.roundtrip(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.header("cache-control"), Some("no-cache"));
    let text = r.text();
    assert!(text.starts_with("id: 0\ndata: tick 0\ndata: more\n\n"), "{text:?}");
    assert!(text.contains(":\n\n"), "no keep-alive comment during the 350 ms pause: {text:?}");
    assert!(text.ends_with("id: 1\ndata: tick 1\ndata: more\n\n"), "{text:?}");
    server.shutdown();
}
