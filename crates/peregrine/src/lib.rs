//! # peregrine
//!
//! A thread-per-core HTTP/1.1 server and framework, built to answer as many
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
//! - [`server`]: one worker per core, each with its own `SO_REUSEPORT`
//!   listener and event loop; connections never change worker.
//! - [`http`]: parsing in place in the read buffer, a `Date` header
//!   formatted once a second, responses serialized straight into one output
//!   buffer written with one syscall per batch of pipelined requests.
//! - [`router`], [`extract`], [`handler`], [`response`]: the user API.
//! - [`db`]: per-worker PostgreSQL connections with pipelining, and an
//!   embedded SQLite pool.
//! - [`cache`]: a bounded per-worker cache with expiry.

#![warn(missing_docs)]

pub mod body;
pub mod cache;
pub mod config;
pub mod db;
pub mod error;
pub mod extract;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod handler;
pub mod http;
pub mod request;
pub mod response;
pub mod router;
pub mod server;

pub use body::Body;
pub use config::Config;
pub use error::Error;
pub use extract::{FromRequest, Path, Query, State};
pub use http::{Method, StatusCode, Version};
pub use request::Request;
pub use response::{Content, Html, IntoResponse, Json, Response};
pub use router::Router;
pub use server::{IntoApp, Server, ServerHandle, WorkerInfo};
