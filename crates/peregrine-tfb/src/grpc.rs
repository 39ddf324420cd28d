//! HttpArena's gRPC profiles: `benchmark.BenchmarkService` (the messages of
//! `proto/benchmark.proto`, derived with prost rather than generated, so
//! the build needs no `protoc`).
//!
//! Sums wrap on overflow, as the `int32` arithmetic of the reference
//! implementations does. A stream longer than [`MAX_STREAM`] replies is
//! refused with `INVALID_ARGUMENT`: a count is the client's to choose, and
//! a billion replies would hold a worker's stream for minutes.

use futures_util::{stream, StreamExt};
use peregrine::grpc::{GrpcService, Status};

/// The longest stream served (the profile asks for up to 5,000).
pub const MAX_STREAM: i32 = 100_000;

#[derive(Clone, PartialEq, prost::Message)]
pub struct SumRequest {
    #[prost(int32, tag = "1")]
    pub a: i32,
    #[prost(int32, tag = "2")]
    pub b: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StreamRequest {
    #[prost(int32, tag = "1")]
    pub a: i32,
    #[prost(int32, tag = "2")]
    pub b: i32,
    #[prost(int32, tag = "3")]
    pub count: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SumReply {
    #[prost(int32, tag = "1")]
    pub result: i32,
}

/// The service, with `GetSum` and `StreamSum`.
pub fn service() -> GrpcService {
    GrpcService::new("benchmark.BenchmarkService")
        .unary("GetSum", |req: SumRequest| async move { Ok(SumReply { result: req.a.wrapping_add(req.b) }) })
        .server_streaming("StreamSum", |req: StreamRequest| {
            let refused = if req.count < 0 {
                Some(Status::invalid_argument("count must not be negative"))
            } else if req.count > MAX_STREAM {
                Some(Status::invalid_argument(format!("count must be at most {MAX_STREAM}")))
            } else {
                None
            };
            let sum = req.a.wrapping_add(req.b);
            let replies = (0..req.count.clamp(0, MAX_STREAM))
                .map(move |i| Ok(SumReply { result: sum.wrapping_add(i) }));
            match refused {
                Some(status) => stream::iter(vec![Err(status)]).left_stream(),
                None => stream::iter(replies).right_stream(),
            }
        })
}
