//! Opening a connection: TCP connect (trying each host in turn), the
//! startup message, authentication, and preparing the pool's statements.
//!
//! Authentication supports what a PostgreSQL server asks of a password
//! user: cleartext, md5 and SCRAM-SHA-256 (without channel binding), using
//! the `postgres-protocol` crate's implementations. Everything here runs
//! once per connection, before the connection is handed to the pool, so it
//! is plain sequential async code. Failures are [`Error`]s that keep their
//! cause (the `io::Error`, or the server's `ErrorResponse` with its
//! SQLSTATE); the slot task logs them and retries with backoff.

use std::io;
use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::{md5_hash, sasl};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::columns::{describe_columns, type_of};
use super::driver::Driver;
use super::error::map_error;
use super::mailbox::{Connection, Prepared, State};
use super::READ_CHUNK;
use super::{io_error, protocol_error};
use crate::db::pg::row::Columns;
use crate::db::pg::StatementSpec;
use crate::db::Error;

/// Where and how to connect; derived from the pool's parsed URL.
pub(crate) struct ConnectParams {
    pub hosts: Vec<(String, u16)>,
    pub user: String,
    pub password: Option<Vec<u8>>,
    /// Startup parameters besides `user` (database, options, ...).
    pub startup: Vec<(String, String)>,
}

/// Connects, authenticates and prepares `statements`. The connection is
/// usable once the returned [`Driver`] is being polled (awaited or spawned);
/// the driver completes when the connection closes.
pub(crate) async fn connect(
    params: &ConnectParams,
    statements: &[StatementSpec],
    timeout: Duration,
    batches_in_flight: usize,
) -> Result<(Connection, Driver), Error> {
    let mut last = Error::config("no host to connect to");
    let mut stream = None;
    for (host, port) in &params.hosts {
        match TcpStream::connect((host.as_str(), *port)).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = io_error(format_args!("connecting to {host}:{port}"), e),
        }
    }
    let Some(mut stream) = stream else { return Err(last) };
    // Batches are written whole; never let Nagle hold one back.
    stream.set_nodelay(true).map_err(|e| io_error("setting TCP_NODELAY", e))?;
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    startup(&mut stream, &mut rbuf, params).await?;
    let prepared = prepare(&mut stream, &mut rbuf, statements).await?;

    let state = Rc::new(State::new(prepared, timeout));
    let driver = Driver::new(state.clone(), stream, rbuf, batches_in_flight);
    Ok((Connection::new(state), driver))
}

/// Reads one backend message during startup.
async fn read_message(stream: &mut TcpStream, rbuf: &mut BytesMut) -> Result<Message, Error> {
    loop {
        if let Some(message) = Message::parse(rbuf).map_err(|e| io_error("bad message from server", e))? {
            return Ok(message);
        }
        rbuf.reserve(READ_CHUNK);
        let n = stream.read_buf(rbuf).await.map_err(|e| io_error("reading from server", e))?;
        if n == 0 {
            return Err(protocol_error("server closed the connection"));
        }
    }
}

async fn send(stream: &mut TcpStream, buf: &mut BytesMut) -> Result<(), Error> {
    stream.write_all(buf).await.map_err(|e| io_error("writing to server", e))?;
    buf.clear();
    Ok(())
}

/// Startup message, authentication, and the wait for `ReadyForQuery`.
async fn startup(stream: &mut TcpStream, rbuf: &mut BytesMut, params: &ConnectParams) -> Result<(), Error> {
    let io_err = |e: io::Error| io_error("encoding startup message", e);
    let mut buf = BytesMut::new();
    let startup = std::iter::once(("user", params.user.as_str()))
        .chain(params.startup.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    frontend::startup_message(startup, &mut buf).map_err(io_err)?;
    send(stream, &mut buf).await?;

    let password = || {
        params
            .password
            .as_deref()
            .ok_or_else(|| Error::config("the server wants a password; the URL has none"))
    };
    let mut scram: Option<sasl::ScramSha256> = None;
    loop {
        match read_message(stream, rbuf).await? {
            Message::AuthenticationOk => break,
            Message::AuthenticationCleartextPassword => {
                frontend::password_message(password()?, &mut buf).map_err(io_err)?;
                send(stream, &mut buf).await?;
            }
            Message::AuthenticationMd5Password(body) => {
                let hash = md5_hash(params.user.as_bytes(), password()?, body.salt());
                frontend::password_message(hash.as_bytes(), &mut buf).map_err(io_err)?;
                send(stream, &mut buf).await?;
            }
            Message::AuthenticationSasl(body) => {
                let mut mechanisms = body.mechanisms();
                let mut scram_offered = false;
                while let Some(mechanism) =
                    mechanisms.next().map_err(|e| io_error("bad SASL mechanism list", e))?
                {
                    scram_offered |= mechanism == sasl::SCRAM_SHA_256;
                }
                if !scram_offered {
                    return Err(Error::config("the server offers no SASL mechanism we support"));
                }
                let state = sasl::ScramSha256::new(password()?, sasl::ChannelBinding::unsupported());
                frontend::sasl_initial_response(sasl::SCRAM_SHA_256, state.message(), &mut buf)
                    .map_err(io_err)?;
                send(stream, &mut buf).await?;
                scram = Some(state);
            }
            Message::AuthenticationSaslContinue(body) => {
                let state = scram.as_mut().ok_or_else(|| protocol_error("unexpected SASL message"))?;
                state.update(body.data()).map_err(|e| io_error("SCRAM", e))?;
                frontend::sasl_response(state.message(), &mut buf).map_err(io_err)?;
                send(stream, &mut buf).await?;
            }
            Message::AuthenticationSaslFinal(body) => {
                let state = scram.as_mut().ok_or_else(|| protocol_error("unexpected SASL message"))?;
                state.finish(body.data()).map_err(|e| io_error("SCRAM", e))?;
            }
            Message::ErrorResponse(body) => return Err(map_error(&body)),
            Message::NoticeResponse(_) => {}
            _ => return Err(Error::config("unsupported authentication method (not password, md5 or SCRAM)")),
        }
    }
    loop {
        match read_message(stream, rbuf).await? {
            Message::ReadyForQuery(_) => return Ok(()),
            Message::ErrorResponse(body) => return Err(map_error(&body)),
            // ParameterStatus, BackendKeyData, notices.
            _ => {}
        }
    }
}

/// Parses and describes every statement in one round trip.
async fn prepare(
    stream: &mut TcpStream,
    rbuf: &mut BytesMut,
    statements: &[StatementSpec],
) -> Result<Vec<Prepared>, Error> {
    let mut buf = BytesMut::new();
    for (i, spec) in statements.iter().enumerate() {
        let name = format!("s{i}");
        frontend::parse(&name, &spec.sql, None, &mut buf)
            .map_err(|e| Error::config(format!("statement {i}: {e}")).with_source(e))?;
        frontend::describe(b'S', &name, &mut buf)
            .map_err(|e| Error::config(format!("statement {i}: {e}")).with_source(e))?;
    }
    frontend::sync(&mut buf);
    send(stream, &mut buf).await?;

    let mut prepared = Vec::with_capacity(statements.len());
    let mut params = Vec::new();
    let mut failure = None;
    loop {
        match read_message(stream, rbuf).await? {
            Message::ParseComplete => {}
            Message::ParameterDescription(body) => {
                params = body
                    .parameters()
                    .map(|oid| Ok(type_of(oid)))
                    .collect()
                    .map_err(|e| io_error("bad ParameterDescription", e))?;
            }
            message @ (Message::RowDescription(_) | Message::NoData) => {
                let columns = match message {
                    Message::RowDescription(body) => describe_columns(&body)?,
                    _ => Columns::default(),
                };
                let i = prepared.len();
                let spec = statements
                    .get(i)
                    .ok_or_else(|| protocol_error("more statement descriptions than statements"))?;
                prepared.push(Prepared::new(
                    format!("s{i}"),
                    std::mem::take(&mut params),
                    Rc::new(columns),
                    spec.write,
                ));
            }
            Message::ErrorResponse(body) => {
                let sql = statements.get(prepared.len()).map(|s| s.sql.as_str()).unwrap_or_default();
                failure = Some(map_error(&body).context(format_args!("preparing {sql:?}")));
            }
            Message::ReadyForQuery(_) => break,
            _ => {}
        }
    }
    match failure {
        Some(failure) => Err(failure),
        None if prepared.len() != statements.len() => {
            Err(protocol_error("the server described fewer statements"))
        }
        None => Ok(prepared),
    }
}
