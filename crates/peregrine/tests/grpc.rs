//! gRPC over real sockets (h2c), with the `h2` crate's client speaking
//! the wire format by hand, so every refusal the service promises can be
//! provoked: unary and server-streaming calls, statuses in trailers and
//! Trailers-Only answers, deadlines, and malformed calls. grpcurl, a
//! client others wrote, drives the HttpArena service in peregrine-tfb's
//! tests.

mod common;

use std::time::{Duration, Instant};

use common::h2client::{connect, exchange, Answer};
use futures_util::{stream, StreamExt};
use peregrine::grpc::{GrpcService, Status};
use peregrine::{Listener, Server, ServerHandle};
use prost::Message;

#[derive(Clone, PartialEq, prost::Message)]
struct SumRequest {
    #[prost(int32, tag = "1")]
    a: i32,
    #[prost(int32, tag = "2")]
    b: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
struct SumReply {
    #[prost(int32, tag = "1")]
    result: i32,
}

/// The largest request message the test service takes.
const LIMIT: usize = 1024;

fn service() -> GrpcService {
    GrpcService::new("test.Calc")
        .max_message_bytes(LIMIT)
        .unary("Sum", |req: SumRequest| async move {
            req.a
                .checked_add(req.b)
                .map(|result| SumReply { result })
                .ok_or_else(|| Status::invalid_argument("the sum overflows"))
        })
        .unary("Slow", |req: SumRequest| async move {
            tokio::time::sleep(Duration::from_millis(req.a as u64)).await;
            Ok(SumReply { result: req.a })
        })
        // `a` replies 0..a; a negative `b` fails after |b| of them.
        .server_streaming("Count", |req: SumRequest| {
            stream::iter(0..req.a).then(move |i| async move {
                if req.b < 0 && i == -req.b {
                    return Err(Status::invalid_argument(format!("stopped at {i}")));
                }
                // A pause per reply, for the deadline case.
                if req.b > 0 {
                    tokio::time::sleep(Duration::from_millis(req.b as u64)).await;
                }
                Ok(SumReply { result: i })
            })
        })
}

fn start() -> ServerHandle {
    Server::with_config(common::config())
        .listen(Listener::new(([127, 0, 0, 1], 0)))
        .start(|_| async { service().add_to(common::test_router()) })
        .expect("test server starts")
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// One length-prefixed message (`compressed`: the flag byte).
fn frame(message: &[u8], compressed: bool) -> Vec<u8> {
    let mut out = vec![u8::from(compressed)];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

fn call_request(path: &str, headers: &[(&str, &str)]) -> http::Request<()> {
    let mut req = http::Request::builder()
        .method("POST")
        .uri(format!("http://localhost{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.body(()).unwrap()
}

/// The replies of an answer's body, decoded.
fn replies(answer: &Answer) -> Vec<i32> {
    let mut body = &answer.body[..];
    let mut out = Vec::new();
    while !body.is_empty() {
        assert_eq!(body[0], 0, "the server compresses nothing");
        let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
        out.push(SumReply::decode(&body[5..5 + len]).expect("a SumReply").result);
        body = &body[5 + len..];
    }
    out
}

/// `grpc-status` and `grpc-message`, from the trailers or, for a
/// Trailers-Only answer, the head.
fn status(answer: &Answer) -> (String, String) {
    let fields = answer.trailers.as_ref().unwrap_or(&answer.headers);
    let get = |name: &str| fields.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    (get("grpc-status"), get("grpc-message"))
}

fn sum(a: i32, b: i32) -> Vec<u8> {
    frame(&SumRequest { a, b }.encode_to_vec(), false)
}

#[test]
fn unary_and_server_streaming_calls() {
    let server = start();
    block_on(async {
        let mut c = connect(server.local_addr()).await;
        let a = exchange(&mut c, call_request("/test.Calc/Sum", &[]), &sum(2, 40)).await;
        assert_eq!((a.status, a.header("content-type")), (200, Some("application/grpc")));
        assert_eq!(replies(&a), [42]);
        assert_eq!(status(&a), ("0".into(), "".into()));
        assert!(a.trailers.is_some(), "an answered call ends with trailers");

        let a = exchange(&mut c, call_request("/test.Calc/Count", &[]), &sum(5, 0)).await;
        assert_eq!(replies(&a), [0, 1, 2, 3, 4]);
        assert_eq!(status(&a).0, "0");
        // No replies at all: still a status.
        let a = exchange(&mut c, call_request("/test.Calc/Count", &[]), &sum(0, 0)).await;
        assert_eq!((replies(&a), status(&a).0), (vec![], "0".into()));
        // A stream that fails part-way: what was sent, then its status.
        let a = exchange(&mut c, call_request("/test.Calc/Count", &[]), &sum(5, -2)).await;
        assert_eq!(replies(&a), [0, 1]);
        assert_eq!(status(&a), ("3".into(), "stopped at 2".into()));
        // A handler's error before any reply: Trailers-Only.
        let a = exchange(&mut c, call_request("/test.Calc/Sum", &[]), &sum(i32::MAX, 1)).await;
        assert_eq!((a.status, a.body.len(), a.trailers.is_none()), (200, 0, true));
        assert_eq!(status(&a), ("3".into(), "the sum overflows".into()));
        // Many calls at once on one connection.
        let calls = (0..50).map(|i| {
            let mut c = c.clone();
            async move { replies(&exchange(&mut c, call_request("/test.Calc/Sum", &[]), &sum(i, i)).await) }
        });
        let results = futures_util::future::join_all(calls).await;
        assert_eq!(results, (0..50).map(|i| vec![2 * i]).collect::<Vec<_>>());
    });
}

#[test]
fn deadlines_end_calls_with_deadline_exceeded() {
    let server = start();
    block_on(async {
        let mut c = connect(server.local_addr()).await;
        let started = Instant::now();
        let a =
            exchange(&mut c, call_request("/test.Calc/Slow", &[("grpc-timeout", "100m")]), &sum(5_000, 0))
                .await;
        assert_eq!(status(&a).0, "4", "DEADLINE_EXCEEDED");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the deadline was not kept: {:?}",
            started.elapsed()
        );
        // Within its deadline a call is answered.
        let a =
            exchange(&mut c, call_request("/test.Calc/Slow", &[("grpc-timeout", "5S")]), &sum(10, 0)).await;
        assert_eq!((replies(&a), status(&a).0), (vec![10], "0".into()));
        // A stream past its deadline: the replies so far, then status 4.
        let a =
            exchange(&mut c, call_request("/test.Calc/Count", &[("grpc-timeout", "300m")]), &sum(100, 50))
                .await;
        let got = replies(&a);
        assert!(!got.is_empty() && got.len() < 100, "{} replies", got.len());
        assert_eq!(status(&a).0, "4");
    });
}

#[test]
fn malformed_calls_get_the_status_the_spec_names_and_the_connection_serves_on() {
    let server = start();
    block_on(async {
        let mut c = connect(server.local_addr()).await;
        let path = "/test.Calc/Sum";
        let message = SumRequest { a: 1, b: 2 }.encode_to_vec();
        // (what, body, extra headers, the grpc-status expected)
        type Case<'a> = (&'a str, Vec<u8>, Vec<(&'a str, &'a str)>, &'a str);
        let cases: Vec<Case> = vec![
            ("compressed message", frame(&message, true), vec![], "12"),
            ("cut-short frame", frame(&message, false)[..4].to_vec(), vec![], "13"),
            (
                "length past the body",
                {
                    let mut f = frame(&message, false);
                    f.truncate(f.len() - 1);
                    f
                },
                vec![],
                "13",
            ),
            ("two messages", [sum(1, 2), sum(3, 4)].concat(), vec![], "13"),
            ("no message", Vec::new(), vec![], "13"),
            ("not a SumRequest", frame(&[0xff, 0xff, 0xff], false), vec![], "13"),
            ("message over the limit", frame(&vec![0u8; LIMIT + 1], false), vec![], "8"),
            ("malformed grpc-timeout", sum(1, 2), vec![("grpc-timeout", "soon")], "13"),
            ("grpc-timeout without a unit", sum(1, 2), vec![("grpc-timeout", "100")], "13"),
        ];
        for (what, body, headers, code) in cases {
            let a = exchange(&mut c, call_request(path, &headers), &body).await;
            assert_eq!(a.status, 200, "{what}");
            assert_eq!(status(&a).0, code, "{what}: {:?}", status(&a));
            assert!(a.body.is_empty(), "{what}: a refused call has no replies");
        }
        // Not gRPC at all: HTTP says so.
        let req = http::Request::builder()
            .method("POST")
            .uri("http://localhost/test.Calc/Sum")
            .header("content-type", "application/json")
            .body(())
            .unwrap();
        assert_eq!(exchange(&mut c, req, b"{}").await.status, 415);
        // An unknown method or service: the router's 404.
        assert_eq!(exchange(&mut c, call_request("/test.Calc/Nope", &[]), &sum(1, 2)).await.status, 404);
        // The same connection still answers.
        let a = exchange(&mut c, call_request(path, &[]), &sum(20, 22)).await;
        assert_eq!((replies(&a), status(&a).0), (vec![42], "0".into()));
    });
}
