//! Our own PostgreSQL connection: a driver that sends every statement
//! queued during one scheduler tick as a single pipeline ending in a single
//! `Sync`.
//!
//! # Why not tokio-postgres on the request path
//!
//! tokio-postgres pipelines concurrent queries, but it sends
//! `Bind`/`Execute`/`Sync` for every statement and offers no way to leave the
//! `Sync` out. Each `Sync` ends an implicit transaction: the server commits
//! it, sends `ReadyForQuery` and flushes its socket, per statement. On this
//! project's 2-core machine pgbench (PostgreSQL 15, 8 clients) measured
//! about 36k single-row selects/s with one `Sync` per statement and about
//! 213k/s with 20 selects per `Sync`: the per-statement transaction, not
//! the query, was the cost, and the driver decided it. So the hot path
//! speaks the protocol itself, with the message encoding, parsing and
//! SCRAM/md5 authentication of the `postgres-protocol` crate and the value
//! conversions of `postgres-types` (both also what tokio-postgres uses).
//! The four messages every pipelined read is made of (`BindComplete`,
//! `DataRow`, `CommandComplete`, `ReadyForQuery`) are decoded by the
//! driver itself, from their headers: `Message::parse` cost 653 of a `/db`
//! request's 8,600 instructions (see [`driver`]).
//!
//! # Parts
//!
//! - [`mailbox`]: the callers' side: [`Connection`], the output buffer
//!   callers encode into, the response queue and the slots answers are
//!   delivered to.
//! - [`startup`]: connecting, the startup message, authentication
//!   (cleartext, md5, SCRAM-SHA-256) and preparing the pool's statements.
//! - [`driver`]: the task that owns the socket, writes batches, reads
//!   answers, and enforces deadlines.
//! - [`error`]: the mapping of a server `ErrorResponse` onto
//!   [`crate::db::Error`].

mod columns;
mod driver;
mod error;
mod mailbox;
mod startup;

pub(crate) use driver::Driver;
pub use error::ServerError;
pub(crate) use mailbox::Connection;
pub(crate) use mailbox::{Outcome, Prepared};
pub use mailbox::{Params, TextRows};
pub(crate) use startup::{connect, ConnectParams};

/// Read and write buffer growth step; a batch of 20 single-row answers is
/// ~1.5 KiB.
const READ_CHUNK: usize = 16 * 1024;

/// The connection failed at the socket: [`ErrorKind::Unavailable`] with
/// `context` and the `io::Error`'s text (for the log line) and the error
/// itself as source.
///
/// [`ErrorKind::Unavailable`]: crate::db::ErrorKind::Unavailable
fn io_error(context: impl std::fmt::Display, e: std::io::Error) -> crate::db::Error {
    crate::db::Error::unavailable().context(format_args!("{context}: {e}")).with_source(e)
}

/// The server broke the protocol (or hung up): the connection is unusable.
fn protocol_error(what: &'static str) -> crate::db::Error {
    crate::db::Error::unavailable().context(what)
}
