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

pub(crate) mod h1;
