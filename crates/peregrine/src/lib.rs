//! # peregrine
//!
//! A thread-per-core HTTP server and framework, built to answer as many
//! requests per CPU-second as the machine allows, and to stay correct and
//! standing under traffic nobody planned for.
//!
//! Handlers are ordinary functions; arguments are extracted by type and
//! results turned into responses by [`IntoResponse`]:
//!
//! ```no_run
//! use peregrine::{Json, Path, Router, Server};
//! use serde::Serialize;
//!
//! #[derive(Serialize)]
//! struct Hello { message: &'static str }
//!
//! fn main() -> std::io::Result<()> {
//!     Server::new().serve("127.0.0.1:8080", |_worker| async {
//!         Router::new()
//!             .get("/plaintext", || "Hello, World!")
//!             .get("/json", || Json(Hello { message: "Hello, World!" }))
//!             .get("/square/{n}", |Path(n): Path<u64>| format!("{}", n * n))
//!     })
//! }
//! ```
//!
//! ## How it is built
//! Layers, each using only the ones below it:
//! - The user API: [`router`], [`extract`], [`handler`], [`response`],
//!   [`Body`], [`Error`]. None of it mentions a protocol.
//! - The request pipeline (`pipeline`): route, extract, run the handler,
//!   answer through a [`ResponseWriter`], which encodes for the protocol the
//!   request came on.
//! - Protocols (`proto`): for each, a pure codec (parsing in place, answers
//!   serialized straight into one output buffer written with one syscall
//!   per batch of pipelined requests) and a connection driver. HTTP/1.1
//!   today; `proto`'s docs say where a new one plugs in.
//! - Workers (`worker`): one per core, each with its own event loop, clock,
//!   `Date` value (formatted once a second) and connection deadlines;
//!   [`server`] starts them with their `SO_REUSEPORT` sockets, one per
//!   [`Listener`] (an address, its protocols, optionally TLS through
//!   `tls`, the `tls` feature).
//! - WebSocket ([`ws`]): an extractor whose `101` hands the connection
//!   (`upgrade`) to a socket on the same worker task, over this crate's
//!   own RFC 6455 codec with permessage-deflate; over HTTP/2 an extended
//!   `CONNECT` (RFC 8441) gets `200` and the socket runs on its stream.
//! - Data: [`db`] (per-worker PostgreSQL connections with pipelining, an
//!   embedded SQLite pool) and [`cache`] (a bounded per-worker cache).

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod background;
pub mod body;
pub mod cache;
pub mod config;
pub mod db;
pub mod error;
mod extensions;
pub mod extract;
pub mod fs;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod grpc;
pub mod handler;
mod http;
pub mod middleware;
pub mod multipart;
mod pattern;
mod pipeline;
mod proto;
pub mod request;
pub mod response;
pub mod router;
pub mod server;
mod sys;
pub mod testing;
mod text;
#[cfg(feature = "tls")]
pub mod tls;
mod upgrade;
mod worker;
pub mod ws;

pub use body::Body;
pub use config::{Config, EventLoop, MinDataRate};
pub use error::Error;
pub use extensions::Extensions;
pub use extract::{ClientAddr, Cookies, Extension, Form, FromRequest, Path, Query, State, TypedHeader};
pub use http::{Method, StatusCode, Version};
pub use request::{OwnedRequest, Request};
pub use response::{Content, Cookie, Html, IntoResponse, Json, Redirect, Response, ResponseWriter};
pub use router::{IntoEndpoint, Router};
pub use server::{IntoApp, Listener, Server, ServerHandle, WorkerInfo};
