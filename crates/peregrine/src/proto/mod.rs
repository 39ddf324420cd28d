//! Wire protocols: for each, a pure codec and a connection driver.
//!
//! # Where a protocol plugs in
//! A protocol is a folder here with
//! - its codec: pure functions and state machines over bytes (no I/O, no
//!   clock), fuzzed through the `fuzzing` feature;
//! - its response encoder, added as one variant of the encoding behind
//!   [`ResponseWriter`](crate::ResponseWriter) (`response/writer.rs`);
//! - its connection driver: reads from a [`worker::transport::Io`](crate::worker::transport::Io),
//!   decodes requests into [`Request`](crate::Request)s, hands them to the
//!   protocol-neutral [pipeline](crate::pipeline), writes what the encoder
//!   produced, and keeps its [`ConnTimer`](crate::worker::timer::ConnTimer)
//!   armed so the worker's sweep can enforce its deadlines;
//! - a [`BodySource`](crate::body::BodySource) for bodies it streams to
//!   handlers.
//!
//! The server's accept loop chooses the driver for a connection. Nothing
//! above the pipeline (router, extractors, handlers) changes for a new
//! protocol.
//!
//! # The protocols
//! - [`h1`]: HTTP/1.0 and 1.1, our own codec, written for the warm path
//!   (no allocation per request); answers go through `ResponseWriter`'s
//!   HTTP/1.1 encoder straight into the connection's output buffer.
//! - [`h2`]: HTTP/2, our own: pure frame and HPACK codecs, a connection
//!   state machine without I/O, and a driver generic over the
//!   transport (`AsyncRead + AsyncWrite`), so a TLS stream whose ALPN chose
//!   `h2` plugs in as a TCP socket does. Streams are owned requests
//!   ([`OwnedRequest`](crate::OwnedRequest)) run by
//!   [`dispatch_owned`](crate::pipeline::dispatch_owned), answered with
//!   owned [`Response`](crate::Response)s (`ResponseWriter`'s owned
//!   encoding), since a stream's task outlives any read buffer.
//! - [`h3`]: HTTP/3 over QUIC (`quinn`, with `h3` for framing and QPACK);
//!   streams go through `dispatch_owned` as HTTP/2's do. Its driver owns
//!   one QUIC endpoint (a UDP socket) per worker rather than connections
//!   handed over by the accept loop.
//!
//! On a cleartext port with both ([`Listener`](crate::Listener)`::new`'s default),
//! the HTTP/1.1 driver starts every connection; if the connection's first
//! bytes fail to parse as a request and are the HTTP/2 preface, it hands
//! the socket and the bytes it read to the HTTP/2 driver. HTTP/1.1
//! requests pay one flag store for this.

pub(crate) mod h1;
pub(crate) mod h2;
#[cfg(feature = "http3")]
pub(crate) mod h3;
