//! HttpArena's gRPC service, `benchmark.BenchmarkService` (`GetSum` unary,
//! `StreamSum` server-streaming), on tonic: a peer for peregrine's gRPC
//! figures in `scripts/h2-bench`.
//!
//! Usage: `peer-tonic [--addr HOST:PORT] [--workers N]` (default
//! `0.0.0.0:$PORT`, else 8080; one worker per available CPU). tonic serves
//! h2c with prior knowledge, as gRPC clients speak it, through
//! `tonic::transport::Server` on a multi-threaded tokio runtime of N
//! workers: the layout of tonic's own examples.

use std::net::SocketAddr;
use std::pin::Pin;

use tokio_stream::Stream;
use tonic::{Request, Response, Status};

mod generated {
    include!(concat!(env!("OUT_DIR"), "/benchmark.BenchmarkService.rs"));
}
use generated::benchmark_service_server::{BenchmarkService, BenchmarkServiceServer};

/// The longest stream served, as peregrine-tfb's `MAX_STREAM`.
const MAX_STREAM: i32 = 100_000;

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

struct Benchmark;

type Replies = Pin<Box<dyn Stream<Item = Result<SumReply, Status>> + Send>>;

#[tonic::async_trait]
impl BenchmarkService for Benchmark {
    async fn get_sum(&self, request: Request<SumRequest>) -> Result<Response<SumReply>, Status> {
        let req = request.into_inner();
        Ok(Response::new(SumReply { result: req.a.wrapping_add(req.b) }))
    }

    type StreamSumStream = Replies;

    async fn stream_sum(&self, request: Request<StreamRequest>) -> Result<Response<Replies>, Status> {
        let req = request.into_inner();
        if !(0..=MAX_STREAM).contains(&req.count) {
            return Err(Status::invalid_argument(format!("count must be within 0..={MAX_STREAM}")));
        }
        let sum = req.a.wrapping_add(req.b);
        let replies = tokio_stream::iter((0..req.count).map(move |i| Ok(SumReply { result: sum.wrapping_add(i) })));
        Ok(Response::new(Box::pin(replies)))
    }
}

fn parse_args() -> Result<(SocketAddr, usize), String> {
    let port = match std::env::var("PORT") {
        Ok(p) => p.parse::<u16>().map_err(|_| format!("PORT is not a port number: {p:?}"))?,
        Err(_) => 8080,
    };
    let mut addr = SocketAddr::from(([0, 0, 0, 0], port));
    let mut workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut argv = std::env::args().skip(1);
    while let Some(flag) = argv.next() {
        let mut value = || argv.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--addr" => {
                let v = value()?;
                addr = v.parse().map_err(|_| format!("--addr: not HOST:PORT: {v:?}"))?;
            }
            "--workers" => {
                let v = value()?;
                workers = v.parse().ok().filter(|&n| n > 0).ok_or(format!("--workers: not a count: {v:?}"))?;
            }
            _ => return Err(format!("unknown argument {flag:?} (usage: peer-tonic [--addr HOST:PORT] [--workers N])")),
        }
    }
    Ok((addr, workers))
}

fn main() {
    let (addr, workers) = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("peer-tonic: {e}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("peer-tonic: tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("peer-tonic listening on {addr} (h2c) with {workers} workers");
    let served = runtime.block_on(
        tonic::transport::Server::builder().add_service(BenchmarkServiceServer::new(Benchmark)).serve(addr),
    );
    if let Err(e) = served {
        eprintln!("peer-tonic: {e}");
        std::process::exit(1);
    }
}
