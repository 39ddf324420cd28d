//! [`GrpcService`]: a gRPC service as a set of routes, one
//! `POST /package.Service/Method` each, so it sits on the [`Router`] like
//! any other endpoint and middleware applies to it unchanged.
//!
//! A call is read whole (the router's body limit applies), its one request
//! message decoded with prost, the handler run under the `grpc-timeout`
//! deadline if the client sent one, and the answer written as frames with
//! `grpc-status` (and `grpc-message`) trailers. A call that fails before
//! any message is sent gets a *Trailers-Only* answer: the status in the
//! response head and no body, as the gRPC spec asks.
//!
//! What the server refuses, and how:
//! - a `content-type` that is not `application/grpc[+proto]`: HTTP `415`;
//! - a compressed message (the server offers no `grpc-encoding`):
//!   `UNIMPLEMENTED`;
//! - broken framing, not exactly one request message, a message prost
//!   cannot decode, or a malformed `grpc-timeout`: `INTERNAL`;
//! - a message over [`GrpcService::max_message_bytes`]: `RESOURCE_EXHAUSTED`;
//! - the deadline passing: `DEADLINE_EXCEEDED`.
//!
//! gRPC needs HTTP/2 (its status travels in trailers); over HTTP/1.1 the
//! trailers are not sent, so clients must use HTTP/2 (h2c or TLS with ALPN).

use std::borrow::Cow;
use std::cell::RefCell;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use futures_util::{Stream, StreamExt};

use super::codec::{self, FrameError};
use super::{Code, Status};
use crate::request::OwnedRequest;
use crate::response::Response;
use crate::router::Router;
use crate::StatusCode;

/// The largest request message accepted by default: 4 MiB, gRPC's own
/// default.
pub const DEFAULT_MAX_MESSAGE: usize = 4 << 20;

/// A gRPC service: its full name and its methods, one
/// `POST /package.Service/Method` route each.
///
/// A call is read whole (at most [`GrpcService::max_message_bytes`]), its
/// one request message decoded with prost, the handler run under the
/// `grpc-timeout` deadline if the client sent one, and the answer sent
/// with `grpc-status` (and `grpc-message`) trailers; a call that fails
/// before any reply gets a *Trailers-Only* answer. Refused: a
/// `content-type` other than `application/grpc[+proto]` (HTTP `415`); a
/// compressed message (`UNIMPLEMENTED`: no `grpc-encoding` is offered);
/// broken framing, not exactly one request message, an undecodable
/// message or a malformed `grpc-timeout` (`INTERNAL`); a message over the
/// limit (`RESOURCE_EXHAUSTED`); the deadline passing
/// (`DEADLINE_EXCEEDED`). gRPC needs HTTP/2 (h2c or TLS with ALPN `h2`):
/// HTTP/1.1 does not carry the trailers.
///
/// ```no_run
/// use peregrine::grpc::{GrpcService, Status};
/// use peregrine::Router;
///
/// #[derive(Clone, PartialEq, prost::Message)]
/// struct SumRequest {
///     #[prost(int32, tag = "1")]
///     a: i32,
///     #[prost(int32, tag = "2")]
///     b: i32,
/// }
/// #[derive(Clone, PartialEq, prost::Message)]
/// struct SumReply {
///     #[prost(int32, tag = "1")]
///     result: i32,
/// }
///
/// let service = GrpcService::new("benchmark.BenchmarkService").unary("GetSum", |req: SumRequest| async move {
///     let result = req.a.checked_add(req.b).ok_or_else(|| Status::invalid_argument("the sum overflows"))?;
///     Ok(SumReply { result })
/// });
/// let app: Router = Router::new().merge(service.into_router());
/// ```
pub struct GrpcService {
    name: String,
    max_message: usize,
    /// Each method's path and its call.
    methods: Vec<(String, Call)>,
}

/// One method: the request in, the whole answer out.
type Call = Rc<dyn Fn(OwnedRequest) -> Pin<Box<dyn Future<Output = Response>>>>;

impl std::fmt::Debug for GrpcService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcService").field("name", &self.name).finish_non_exhaustive()
    }
}

impl GrpcService {
    /// A service called `name` (`package.Service`), with no methods yet.
    pub fn new(name: impl Into<String>) -> GrpcService {
        GrpcService { name: name.into(), max_message: DEFAULT_MAX_MESSAGE, methods: Vec::new() }
    }

    /// The largest request message accepted (default 4 MiB). Set it before
    /// adding methods: each method takes the value current when added.
    pub fn max_message_bytes(mut self, limit: usize) -> GrpcService {
        self.max_message = limit;
        self
    }

    /// Adds a unary method: one request message, one reply.
    pub fn unary<Req, Reply, F, Fut>(mut self, method: &str, handler: F) -> GrpcService
    where
        Req: prost::Message + Default + 'static,
        Reply: prost::Message + 'static,
        F: Fn(Req) -> Fut + 'static,
        Fut: Future<Output = Result<Reply, Status>> + 'static,
    {
        let handler = Rc::new(handler);
        let limit = self.max_message;
        let path = format!("/{}/{method}", self.name);
        let call: Call = Rc::new(move |req: OwnedRequest| {
            let handler = Rc::clone(&handler);
            Box::pin(async move {
                let (request, deadline) = match read_call::<Req>(&req, limit) {
                    Ok(call) => call,
                    Err(refusal) => return refusal,
                };
                let reply = match deadline {
                    Some(deadline) => match tokio::time::timeout(deadline, handler(request)).await {
                        Ok(reply) => reply,
                        Err(_) => Err(Status::new(Code::DeadlineExceeded, "the deadline passed")),
                    },
                    None => handler(request).await,
                };
                match reply {
                    Ok(reply) => {
                        let mut body = Vec::new();
                        codec::encode(&reply, &mut body);
                        Response::with_body(CONTENT_TYPE, body).trailer("grpc-status", "0")
                    }
                    Err(status) => trailers_only(&status),
                }
            })
        });
        self.methods.push((path, call));
        self
    }

    /// Adds a server-streaming method: one request message, a stream of
    /// replies, each sent in its own frame as it comes (with HTTP/2's flow
    /// control as backpressure). The call ends with `grpc-status: 0` when
    /// the stream ends, or with the status of the stream's first `Err`
    /// (`DEADLINE_EXCEEDED` when the deadline passes first), sent as
    /// trailers after the replies already out.
    pub fn server_streaming<Req, Reply, F, St>(mut self, method: &str, handler: F) -> GrpcService
    where
        Req: prost::Message + Default + 'static,
        Reply: prost::Message + 'static,
        F: Fn(Req) -> St + 'static,
        St: Stream<Item = Result<Reply, Status>> + 'static,
    {
        let handler = Rc::new(handler);
        let limit = self.max_message;
        let path = format!("/{}/{method}", self.name);
        let call: Call = Rc::new(move |req: OwnedRequest| {
            let handler = Rc::clone(&handler);
            Box::pin(async move {
                let (request, deadline) = match read_call::<Req>(&req, limit) {
                    Ok(call) => call,
                    Err(refusal) => return refusal,
                };
                let replies = handler(request);
                let replies: Pin<Box<dyn Stream<Item = Result<Reply, Status>>>> = match deadline {
                    Some(deadline) => Box::pin(until_deadline(replies, deadline)),
                    None => Box::pin(replies),
                };
                // How the stream ended, for the trailers once it has.
                let outcome = Rc::new(RefCell::new(None::<Status>));
                let frames = futures_util::stream::unfold(
                    (replies, Some(Rc::clone(&outcome))),
                    |(mut replies, slot)| async move {
                        let slot = slot?;
                        match replies.next().await {
                            Some(Ok(reply)) => {
                                let mut frame = Vec::new();
                                codec::encode(&reply, &mut frame);
                                Some((Ok::<_, Infallible>(bytes::Bytes::from(frame)), (replies, Some(slot))))
                            }
                            Some(Err(status)) => {
                                *slot.borrow_mut() = Some(status);
                                None
                            }
                            None => None,
                        }
                    },
                );
                Response::stream(CONTENT_TYPE, frames).trailers_when_done(move || {
                    match outcome.borrow_mut().take() {
                        Some(status) => status_fields(&status),
                        None => vec![("grpc-status".into(), "0".into())],
                    }
                })
            })
        });
        self.methods.push((path, call));
        self
    }

    /// Adds the service's routes (one `POST /package.Service/Method`
    /// each) to `router`, whatever its state.
    pub fn add_to<S: 'static>(self, mut router: Router<S>) -> Router<S> {
        for (path, call) in self.methods {
            router = router.post(&path, move |req: OwnedRequest| call(req));
        }
        router
    }

    /// The routes on a router of their own, to
    /// [`merge`](Router::merge) into a stateless application's router.
    pub fn into_router(self) -> Router {
        self.add_to(Router::new())
    }
}

const CONTENT_TYPE: &str = "application/grpc";

/// Checks the request's head, decodes its one message and reads its
/// deadline; a refusal comes back as the response to send.
fn read_call<Req: prost::Message + Default>(
    req: &OwnedRequest,
    limit: usize,
) -> Result<(Req, Option<Duration>), Response> {
    let grpc = req.header("content-type").is_some_and(|ct| {
        ct == b"application/grpc" || ct == b"application/grpc+proto" || ct.starts_with(b"application/grpc;")
    });
    if !grpc {
        return Err(Response::with_body(
            "text/plain; charset=utf-8",
            &b"content-type must be application/grpc\n"[..],
        )
        .status(StatusCode::UNSUPPORTED_MEDIA_TYPE));
    }
    let deadline = match req.header("grpc-timeout") {
        None => None,
        Some(value) => match codec::parse_timeout(value) {
            Some(deadline) => Some(deadline),
            None => return Err(trailers_only(&Status::internal("malformed grpc-timeout"))),
        },
    };
    let mut frames = codec::frames(req.body(), limit);
    let message = match (frames.next(), frames.next()) {
        (Some(Ok(message)), None) => message,
        (Some(Err(e)), _) | (Some(Ok(_)), Some(Err(e))) => return Err(trailers_only(&frame_status(&e))),
        (None, _) => return Err(trailers_only(&Status::internal("no request message"))),
        (Some(Ok(_)), Some(Ok(_))) => {
            return Err(trailers_only(&Status::internal("more than one request message for a unary request")))
        }
    };
    let request = Req::decode(message)
        .map_err(|e| trailers_only(&Status::internal(format!("cannot decode the request message: {e}"))))?;
    Ok((request, deadline))
}

fn frame_status(e: &FrameError) -> Status {
    let code = match e {
        FrameError::Compressed => Code::Unimplemented,
        FrameError::Malformed(_) => Code::Internal,
        FrameError::TooLarge { .. } => Code::ResourceExhausted,
    };
    Status::new(code, e.to_string())
}

/// A *Trailers-Only* answer: `200`, the status in the head, no body.
fn trailers_only(status: &Status) -> Response {
    status_fields(status)
        .into_iter()
        .fold(Response::with_body(CONTENT_TYPE, &b""[..]), |r, (n, v)| r.header(n, v))
}

/// `grpc-status`, and `grpc-message` when there is one.
fn status_fields(status: &Status) -> Vec<(Cow<'static, str>, Cow<'static, str>)> {
    let mut fields = vec![("grpc-status".into(), status.code().as_str().into())];
    if !status.message().is_empty() {
        fields.push(("grpc-message".into(), codec::encode_message(status.message()).into()));
    }
    fields
}

/// `stream`, ended with an error once `deadline` has passed.
fn until_deadline<T>(
    stream: impl Stream<Item = Result<T, Status>>,
    deadline: Duration,
) -> impl Stream<Item = Result<T, Status>> {
    let state = (Box::pin(stream), Box::pin(tokio::time::sleep(deadline)), false);
    futures_util::stream::unfold(state, |(mut stream, mut sleep, ended)| async move {
        if ended {
            return None;
        }
        tokio::select! {
            item = stream.next() => item.map(|item| {
                let ends = item.is_err();
                (item, (stream, sleep, ends))
            }),
            () = &mut sleep => Some((Err(Status::new(Code::DeadlineExceeded, "the deadline passed")), (stream, sleep, true))),
        }
    })
}
