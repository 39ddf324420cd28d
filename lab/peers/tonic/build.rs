//! Generates `benchmark.BenchmarkService`'s server with tonic-build's
//! manual builder (no protoc): the same service as
//! `crates/peregrine-tfb/proto/benchmark.proto`.
fn main() {
    let method = |name: &str, route: &str, input: &str, streaming: bool| {
        let builder = tonic_build::manual::Method::builder()
            .name(name)
            .route_name(route)
            .input_type(format!("crate::{input}"))
            .output_type("crate::SumReply")
            .codec_path("tonic::codec::ProstCodec");
        if streaming { builder.server_streaming() } else { builder }.build()
    };
    let service = tonic_build::manual::Service::builder()
        .name("BenchmarkService")
        .package("benchmark")
        .method(method("get_sum", "GetSum", "SumRequest", false))
        .method(method("stream_sum", "StreamSum", "StreamRequest", true))
        .build();
    tonic_build::manual::Builder::new().build_client(false).compile(&[service]);
}
