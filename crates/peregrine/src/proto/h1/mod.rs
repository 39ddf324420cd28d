//! HTTP/1.1 (RFC 9112): the request-head parser, the body decoders, the
//! response encoder, and the connection driver that runs them.
//!
//! - [`parse`] (with [`scan`]'s SIMD helpers): request heads, parsed in
//!   place in the read buffer.
//! - [`chunked`] and [`body`]: the one body decoder, for buffered and
//!   streamed bodies alike.
//! - [`encode`]: responses serialized in place into the output buffer.
//! - [`conn`]: the connection state machine; [`lend`]: lending its input to
//!   a streaming handler.

pub(crate) mod body;
// The codec's types are `pub` so that the `fuzzing` feature can hand them
// to fuzz targets, the parser's differential test and the benchmarks.
#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
pub(crate) mod chunked;
pub(crate) mod conn;
pub(crate) mod encode;
pub(crate) mod lend;
#[cfg_attr(not(feature = "fuzzing"), allow(unreachable_pub))]
pub(crate) mod parse;
mod scan;
