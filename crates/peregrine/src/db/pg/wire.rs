//! Our own PostgreSQL connection: startup and authentication, statement
//! preparation, and a driver that sends every statement queued during one
//! scheduler tick as a single pipeline ending in a single `Sync`.
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
//!
//! # Batches
//!
//! Callers ([`Connection::start`]) encode `Bind`+`Execute` straight into the
//! connection's output buffer, note what answer they expect in the response
//! queue, and wake the driver. The driver runs after the current tasks have
//! yielded, so everything queued meanwhile (all reads of one request, and
//! those of every other request handled in the same tick) goes out with one
//! `Sync` and one `write`. Each statement stays its own statement (the
//! server plans, executes and counts it separately); only the transaction
//! and the round trip are shared.
//!
//! Sharing the implicit transaction has one consequence: after an
//! `ErrorResponse` the server skips everything up to the `Sync`, so an error
//! in one statement fails the statements behind it in the same batch (with
//! the same error). The connection itself stays usable. Statements
//! registered as writes ([`super::PgConfig::write_statement`]) never share:
//! they get a `Sync` before and after, so nothing else can roll them back,
//! and their callers are answered only at the following `ReadyForQuery`,
//! that is after the commit.
//!
//! # Deadlines
//!
//! The driver, not the callers, enforces the call timeout: every batch gets
//! a deadline when the driver takes it, one timer per connection covers the
//! oldest batch, and callers still waiting at the deadline get
//! [`Error::Timeout`]. Their entries stay in the response queue, so the late
//! answers are read and dropped in order. The server aborts the statement at
//! the same moment through `statement_timeout` (set by the pool).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::{md5_hash, sasl};
use postgres_protocol::message::backend::{self, ErrorResponseBody, Message};
use postgres_protocol::message::frontend;
use postgres_types::{IsNull, Kind, ToSql, Type};
use slab::Slab;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use super::row::Row;
use super::StatementSpec;
use crate::db::Error;

/// Query parameters: anything `postgres-types` can encode.
pub type Params<'a> = [&'a (dyn ToSql + Sync)];

/// Rows of a simple-protocol query: per row, per column, the value as text
/// (`None` for NULL).
pub type TextRows = Vec<Vec<Option<String>>>;

/// Read buffer growth step; a batch of 20 single-row answers is ~1.5 KiB.
const READ_CHUNK: usize = 16 * 1024;

/// A statement prepared on one connection.
struct Prepared {
    /// Server-side name (`s0`, `s1`, ... in registration order).
    name: String,
    params: Vec<Type>,
    /// Shared by every row the statement returns.
    columns: Rc<[Type]>,
    write: bool,
}

/// What a caller gets back.
#[derive(Default)]
pub(super) struct Outcome {
    /// The first row, kept out of `rest` so single-row reads allocate no
    /// vector.
    pub first: Option<Row>,
    pub rest: Vec<Row>,
    /// Rows of a simple-protocol query.
    pub text: TextRows,
    /// Rows affected, from the command tag.
    pub affected: u64,
}

impl Outcome {
    fn push(&mut self, row: Row) {
        if self.first.is_none() {
            self.first = Some(row);
        } else {
            self.rest.push(row);
        }
    }

    /// All rows, in order.
    pub fn into_rows(self) -> Vec<Row> {
        match self.first {
            None => Vec::new(),
            Some(first) => {
                let mut rows = Vec::with_capacity(1 + self.rest.len());
                rows.push(first);
                rows.extend(self.rest);
                rows
            }
        }
    }
}

/// A caller's place to receive its answer.
enum Slot {
    /// The driver still owes an answer.
    Waiting(Option<Waker>),
    /// Answered; the caller has not picked it up yet.
    Ready(Result<Outcome, Error>),
    /// The caller went away; the driver frees the slot when it is done.
    Abandoned,
}

/// One expected answer, in the order the server sends them.
struct Entry {
    kind: EntryKind,
    /// `None` once the caller has been answered (timeout) or for a `Sync`.
    slot: Option<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum EntryKind {
    /// `Bind`+`Execute` of prepared statement `stmt`.
    Statement { stmt: usize, write: bool },
    /// A `Sync`; its `ReadyForQuery` ends one implicit transaction.
    Sync,
    /// A simple-protocol `Query`, which ends with its own `ReadyForQuery`.
    Simple,
}

/// State shared by the connection's handle(s) and its driver.
struct State {
    statements: Vec<Prepared>,
    /// Messages queued by callers since the driver last took them.
    out: RefCell<BytesMut>,
    /// Whether `out` holds statements not yet followed by a `Sync`.
    unsynced: Cell<bool>,
    /// Expected answers; callers push, the driver pops.
    queue: RefCell<VecDeque<Entry>>,
    slots: RefCell<Slab<Slot>>,
    /// The driver's waker, taken by the first caller that queues work.
    driver: RefCell<Option<Waker>>,
    closed: Cell<bool>,
    /// The handle is gone: the driver says goodbye and ends.
    released: Cell<bool>,
    timeout: Duration,
}

impl State {
    fn wake_driver(&self) {
        if let Some(waker) = self.driver.borrow_mut().take() {
            waker.wake();
        }
    }

    /// Hands `result` to the caller behind `key`.
    fn resolve(&self, key: usize, result: Result<Outcome, Error>) {
        let mut slots = self.slots.borrow_mut();
        let Some(slot) = slots.get_mut(key) else { return };
        match std::mem::replace(slot, Slot::Ready(result)) {
            Slot::Waiting(waker) => {
                drop(slots);
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
            Slot::Abandoned | Slot::Ready(_) => {
                slots.remove(key);
            }
        }
    }

    fn new_slot(&self) -> usize {
        self.slots.borrow_mut().insert(Slot::Waiting(None))
    }

    /// Adds a `Sync` to `out` if statements are waiting for one.
    fn sync_pending(&self, out: &mut BytesMut, queue: &mut VecDeque<Entry>) {
        if self.unsynced.replace(false) {
            frontend::sync(out);
            queue.push_back(Entry { kind: EntryKind::Sync, slot: None });
        }
    }
}

/// The caller's side of one live connection. Dropping it ends the driver.
pub struct Connection {
    state: Rc<State>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.state.released.set(true);
        self.state.wake_driver();
    }
}

impl Connection {
    /// Whether the connection has been lost; calls on it fail at once.
    pub fn is_closed(&self) -> bool {
        self.state.closed.get()
    }

    /// Number of prepared statements.
    pub fn statements(&self) -> usize {
        self.state.statements.len()
    }

    /// Queues prepared statement `stmt` with `params` and returns the
    /// future answer. Nothing is awaited here: the statement joins the batch
    /// the driver sends when the current task yields.
    pub(super) fn start(&self, stmt: usize, params: &Params<'_>) -> Result<Call<'_>, Error> {
        let state = &*self.state;
        if state.closed.get() {
            return Err(Error::Unavailable);
        }
        let prepared = state
            .statements
            .get(stmt)
            .ok_or_else(|| Error::Config(format!("statement #{stmt} was not registered with this pool")))?;
        if params.len() != prepared.params.len() {
            return Err(Error::Query(format!(
                "statement #{stmt} takes {} parameters, got {}",
                prepared.params.len(),
                params.len()
            )));
        }
        let mut out = state.out.borrow_mut();
        let mut queue = state.queue.borrow_mut();
        if prepared.write {
            // A write gets an implicit transaction of its own.
            state.sync_pending(&mut out, &mut queue);
        }
        let mark = out.len();
        let bound = frontend::bind(
            "",
            &prepared.name,
            Some(1),
            params.iter().zip(&prepared.params),
            |(param, ty), buf| match param.to_sql_checked(ty, buf)? {
                IsNull::No => Ok(postgres_protocol::IsNull::No),
                IsNull::Yes => Ok(postgres_protocol::IsNull::Yes),
            },
            Some(1),
            &mut out,
        );
        if let Err(e) = bound {
            out.truncate(mark);
            let why = match e {
                frontend::BindError::Conversion(e) => e.to_string(),
                frontend::BindError::Serialization(e) => e.to_string(),
            };
            return Err(Error::Query(format!("encoding parameters of statement #{stmt}: {why}")));
        }
        frontend::execute("", 0, &mut out).map_err(|e| Error::Query(e.to_string()))?;
        let slot = state.new_slot();
        queue.push_back(Entry {
            kind: EntryKind::Statement { stmt, write: prepared.write },
            slot: Some(slot),
        });
        state.unsynced.set(true);
        if prepared.write {
            state.sync_pending(&mut out, &mut queue);
        }
        drop((out, queue));
        state.wake_driver();
        Ok(Call { state, key: slot, done: false })
    }

    /// Queues a simple-protocol query (a `;`-separated script, no
    /// parameters, text results) and returns the future answer.
    pub(super) fn start_simple(&self, sql: &str) -> Result<Call<'_>, Error> {
        let state = &*self.state;
        if state.closed.get() {
            return Err(Error::Unavailable);
        }
        let mut out = state.out.borrow_mut();
        let mut queue = state.queue.borrow_mut();
        // Its own transaction, not the open batch's.
        state.sync_pending(&mut out, &mut queue);
        frontend::query(sql, &mut out).map_err(|e| Error::Query(format!("invalid SQL text: {e}")))?;
        let slot = state.new_slot();
        queue.push_back(Entry { kind: EntryKind::Simple, slot: Some(slot) });
        drop((out, queue));
        state.wake_driver();
        Ok(Call { state, key: slot, done: false })
    }
}

/// The answer to one queued statement. Dropping it early is fine: the
/// driver still reads the answer and throws it away.
pub(super) struct Call<'a> {
    state: &'a State,
    key: usize,
    done: bool,
}

impl Future for Call<'_> {
    type Output = Result<Outcome, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slots = self.state.slots.borrow_mut();
        match slots.get_mut(self.key) {
            Some(Slot::Waiting(waker)) => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            Some(Slot::Ready(_)) => {
                let result = match slots.remove(self.key) {
                    Slot::Ready(result) => result,
                    Slot::Waiting(_) | Slot::Abandoned => Err(Error::Unavailable),
                };
                drop(slots);
                self.done = true;
                Poll::Ready(result)
            }
            Some(Slot::Abandoned) | None => {
                drop(slots);
                self.done = true;
                Poll::Ready(Err(Error::Unavailable))
            }
        }
    }
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut slots = self.state.slots.borrow_mut();
        match slots.get_mut(self.key) {
            Some(slot @ Slot::Waiting(_)) => *slot = Slot::Abandoned,
            Some(Slot::Ready(_)) => {
                slots.remove(self.key);
            }
            Some(Slot::Abandoned) | None => {}
        }
    }
}

/// Where and how to connect; derived from the pool's parsed URL.
pub(super) struct ConnectParams {
    pub hosts: Vec<(String, u16)>,
    pub user: String,
    pub password: Option<Vec<u8>>,
    /// Startup parameters besides `user` (database, options, ...).
    pub startup: Vec<(String, String)>,
}

/// Connects, authenticates and prepares `statements`. The connection is
/// usable once the returned [`Driver`] is being polled (awaited or spawned);
/// the driver completes when the connection closes.
pub(super) async fn connect(
    params: &ConnectParams,
    statements: &[StatementSpec],
    timeout: Duration,
) -> Result<(Connection, Driver), String> {
    let mut last = String::from("no host to connect to");
    let mut stream = None;
    for (host, port) in &params.hosts {
        match TcpStream::connect((host.as_str(), *port)).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("connecting to {host}:{port}: {e}"),
        }
    }
    let Some(mut stream) = stream else { return Err(last) };
    // Batches are written whole; never let Nagle hold one back.
    stream.set_nodelay(true).map_err(|e| format!("setting TCP_NODELAY: {e}"))?;
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    startup(&mut stream, &mut rbuf, params).await?;
    let prepared = prepare(&mut stream, &mut rbuf, statements).await?;

    let state = Rc::new(State {
        statements: prepared,
        out: RefCell::new(BytesMut::with_capacity(READ_CHUNK)),
        unsynced: Cell::new(false),
        queue: RefCell::new(VecDeque::with_capacity(256)),
        slots: RefCell::new(Slab::with_capacity(256)),
        driver: RefCell::new(None),
        closed: Cell::new(false),
        released: Cell::new(false),
        timeout,
    });
    let driver = Driver {
        state: state.clone(),
        stream,
        rbuf,
        wbuf: BytesMut::with_capacity(READ_CHUNK),
        batches: VecDeque::new(),
        popped: 0,
        timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
        armed: false,
        current: Outcome::default(),
        committed: None,
        tx_error: None,
    };
    Ok((Connection { state }, driver))
}

/// Reads one backend message during startup.
async fn read_message(stream: &mut TcpStream, rbuf: &mut BytesMut) -> Result<Message, String> {
    loop {
        if let Some(message) = Message::parse(rbuf).map_err(|e| format!("bad message from server: {e}"))? {
            return Ok(message);
        }
        rbuf.reserve(READ_CHUNK);
        let n = stream.read_buf(rbuf).await.map_err(|e| format!("reading from server: {e}"))?;
        if n == 0 {
            return Err("server closed the connection".into());
        }
    }
}

async fn send(stream: &mut TcpStream, buf: &mut BytesMut) -> Result<(), String> {
    stream.write_all(buf).await.map_err(|e| format!("writing to server: {e}"))?;
    buf.clear();
    Ok(())
}

/// Startup message, authentication, and the wait for `ReadyForQuery`.
async fn startup(stream: &mut TcpStream, rbuf: &mut BytesMut, params: &ConnectParams) -> Result<(), String> {
    let io_err = |e: io::Error| format!("encoding startup message: {e}");
    let mut buf = BytesMut::new();
    let startup = std::iter::once(("user", params.user.as_str()))
        .chain(params.startup.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    frontend::startup_message(startup, &mut buf).map_err(io_err)?;
    send(stream, &mut buf).await?;

    let password = || params.password.as_deref().ok_or_else(|| "the server wants a password".to_string());
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
                while let Some(mechanism) = mechanisms.next().map_err(|e| e.to_string())? {
                    scram_offered |= mechanism == sasl::SCRAM_SHA_256;
                }
                if !scram_offered {
                    return Err("the server offers no SASL mechanism we support".into());
                }
                let state = sasl::ScramSha256::new(password()?, sasl::ChannelBinding::unsupported());
                frontend::sasl_initial_response(sasl::SCRAM_SHA_256, state.message(), &mut buf)
                    .map_err(io_err)?;
                send(stream, &mut buf).await?;
                scram = Some(state);
            }
            Message::AuthenticationSaslContinue(body) => {
                let state = scram.as_mut().ok_or("unexpected SASL message")?;
                state.update(body.data()).map_err(|e| format!("SCRAM: {e}"))?;
                frontend::sasl_response(state.message(), &mut buf).map_err(io_err)?;
                send(stream, &mut buf).await?;
            }
            Message::AuthenticationSaslFinal(body) => {
                let state = scram.as_mut().ok_or("unexpected SASL message")?;
                state.finish(body.data()).map_err(|e| format!("SCRAM: {e}"))?;
            }
            Message::ErrorResponse(body) => return Err(error_text(&body)),
            Message::NoticeResponse(_) => {}
            _ => return Err("unsupported authentication method (not password, md5 or SCRAM)".into()),
        }
    }
    loop {
        match read_message(stream, rbuf).await? {
            Message::ReadyForQuery(_) => return Ok(()),
            Message::ErrorResponse(body) => return Err(error_text(&body)),
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
) -> Result<Vec<Prepared>, String> {
    let mut buf = BytesMut::new();
    for (i, spec) in statements.iter().enumerate() {
        let name = format!("s{i}");
        frontend::parse(&name, &spec.sql, None, &mut buf).map_err(|e| format!("statement {i}: {e}"))?;
        frontend::describe(b'S', &name, &mut buf).map_err(|e| format!("statement {i}: {e}"))?;
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
                params =
                    body.parameters().map(|oid| Ok(type_of(oid))).collect().map_err(|e| e.to_string())?;
            }
            message @ (Message::RowDescription(_) | Message::NoData) => {
                let columns: Vec<Type> = match message {
                    Message::RowDescription(body) => body
                        .fields()
                        .map(|field| Ok(type_of(field.type_oid())))
                        .collect()
                        .map_err(|e| e.to_string())?,
                    _ => Vec::new(),
                };
                let i = prepared.len();
                let spec = statements.get(i).ok_or("more statement descriptions than statements")?;
                prepared.push(Prepared {
                    name: format!("s{i}"),
                    params: std::mem::take(&mut params),
                    columns: columns.into(),
                    write: spec.write,
                });
            }
            Message::ErrorResponse(body) => {
                let sql = statements.get(prepared.len()).map(|s| s.sql.as_str()).unwrap_or_default();
                failure = Some(format!("preparing {sql:?}: {}", error_text(&body)));
            }
            Message::ReadyForQuery(_) => break,
            _ => {}
        }
    }
    match failure {
        Some(failure) => Err(failure),
        None if prepared.len() != statements.len() => Err("the server described fewer statements".into()),
        None => Ok(prepared),
    }
}

/// The type for `oid`; types outside the built-in catalog (enums, domains,
/// extensions) get a placeholder that only raw-accepting types decode.
fn type_of(oid: u32) -> Type {
    Type::from_oid(oid).unwrap_or_else(|| Type::new(format!("oid{oid}"), oid, Kind::Simple, String::new()))
}

/// Code and message of an `ErrorResponse`.
fn error_fields(body: &ErrorResponseBody) -> (String, String) {
    let (mut code, mut severity, mut message) = (String::new(), String::from("ERROR"), String::new());
    let mut fields = body.fields();
    while let Ok(Some(field)) = fields.next() {
        let value = || String::from_utf8_lossy(field.value_bytes()).into_owned();
        match field.type_() {
            b'C' => code = value(),
            b'V' => severity = value(),
            b'M' => message = value(),
            _ => {}
        }
    }
    (code, format!("{severity}: {message}"))
}

fn error_text(body: &ErrorResponseBody) -> String {
    let (code, text) = error_fields(body);
    format!("{text} (SQLSTATE {code})")
}

/// Maps a server error onto [`Error`].
fn map_error(body: &ErrorResponseBody) -> Error {
    let (code, text) = error_fields(body);
    error_for_sqlstate(&code, text)
}

/// How a web handler should treat a server error with SQLSTATE `code`; the
/// one grouping for the pool's own errors and for tokio-postgres's.
pub(crate) fn error_for_sqlstate(code: &str, message: String) -> Error {
    // 08: connection exception; 57P0x: server shutting down or terminated
    // this backend; 53300: too many connections.
    if code.starts_with("08") || code.starts_with("57P0") || code == "53300" {
        return Error::Unavailable;
    }
    // 57014: cancelled, in practice by statement_timeout, which the pool
    // sets to its own deadline.
    if code == "57014" {
        return Error::Timeout;
    }
    Error::Query(message)
}

/// Rows affected, from a command tag like `UPDATE 20` or `INSERT 0 1`.
fn affected_rows(tag: &str) -> u64 {
    tag.rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// A batch sent to the server: its deadline, and the response-queue
/// position just past its last entry.
struct Batch {
    deadline: Instant,
    end: u64,
}

/// Owns the socket: writes queued batches, reads and dispatches answers,
/// and fails late callers. Completes when the connection closes (with the
/// reason) or when its [`Connection`] was dropped.
pub(super) struct Driver {
    state: Rc<State>,
    stream: TcpStream,
    rbuf: BytesMut,
    wbuf: BytesMut,
    batches: VecDeque<Batch>,
    /// Entries popped from the response queue so far (queue position of the
    /// front entry).
    popped: u64,
    timer: Pin<Box<Sleep>>,
    /// Whether `timer` is set to a deadline no later than the oldest
    /// outstanding batch's.
    armed: bool,
    /// Rows of the statement at the front of the queue.
    current: Outcome,
    /// A write's result, held until its `ReadyForQuery` confirms the commit.
    committed: Option<Outcome>,
    /// The error that aborted the current implicit transaction.
    tx_error: Option<Error>,
}

impl Future for Driver {
    type Output = Result<(), String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if this.state.released.get() {
            let mut bye = BytesMut::new();
            frontend::terminate(&mut bye);
            // Best effort: the server also notices the closed socket.
            let _ = Pin::new(&mut this.stream).poll_write(cx, &bye);
            this.fail_all(Error::Unavailable);
            return Poll::Ready(Ok(()));
        }
        let result = this.poll_io(cx);
        if let Poll::Ready(Err(_)) = &result {
            this.fail_all(Error::Unavailable);
        }
        result
    }
}

impl Driver {
    fn poll_io(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        // Callers only queue work while the driver is not running, so
        // storing the waker up front cannot miss a wake-up.
        let mut driver = self.state.driver.borrow_mut();
        match &*driver {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => *driver = Some(cx.waker().clone()),
        }
        drop(driver);
        self.take_batch();
        if let Err(e) = self.write(cx) {
            return Poll::Ready(Err(e));
        }
        loop {
            if self.rbuf.capacity() - self.rbuf.len() < READ_CHUNK / 4 {
                self.rbuf.reserve(READ_CHUNK);
            }
            match tokio_util::io::poll_read_buf(Pin::new(&mut self.stream), cx, &mut self.rbuf) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err("server closed the connection".into())),
                Poll::Ready(Ok(_)) => {
                    if let Err(e) = self.dispatch() {
                        return Poll::Ready(Err(e));
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(format!("reading from server: {e}"))),
                Poll::Pending => break,
            }
        }
        self.poll_deadlines(cx);
        Poll::Pending
    }

    /// Writes as much of the write buffer as the socket takes; one `write`
    /// for a whole batch unless the socket buffer is full.
    fn write(&mut self, cx: &mut Context<'_>) -> Result<(), String> {
        while !self.wbuf.is_empty() {
            match Pin::new(&mut self.stream).poll_write(cx, &self.wbuf) {
                Poll::Ready(Ok(0)) => return Err("server closed the connection".into()),
                Poll::Ready(Ok(n)) => bytes::Buf::advance(&mut self.wbuf, n),
                Poll::Ready(Err(e)) => return Err(format!("writing to server: {e}")),
                Poll::Pending => break,
            }
        }
        Ok(())
    }

    /// Moves what callers queued into the write buffer, closing it with a
    /// `Sync`, and gives it a deadline.
    fn take_batch(&mut self) {
        let mut out = self.state.out.borrow_mut();
        if out.is_empty() {
            return;
        }
        let mut queue = self.state.queue.borrow_mut();
        self.state.sync_pending(&mut out, &mut queue);
        let deadline = Instant::now() + self.state.timeout;
        self.batches.push_back(Batch { deadline, end: self.popped + queue.len() as u64 });
        drop(queue);
        if self.wbuf.is_empty() {
            // Swap rather than copy; callers refill the emptied buffer.
            self.wbuf.clear();
            std::mem::swap(&mut *out, &mut self.wbuf);
        } else {
            self.wbuf.extend_from_slice(&out);
            out.clear();
        }
        drop(out);
        if !self.armed {
            self.timer.as_mut().reset(deadline);
            self.armed = true;
        }
    }

    /// Fails callers whose batch is past its deadline; keeps the timer set
    /// for the oldest remaining batch. The timer is only moved when it
    /// fires, so most batches cost no timer operation.
    fn poll_deadlines(&mut self, cx: &mut Context<'_>) {
        while self.armed {
            if self.timer.as_mut().poll(cx).is_pending() {
                return;
            }
            self.armed = false;
            let now = Instant::now();
            let mut queue = self.state.queue.borrow_mut();
            while let Some(batch) = self.batches.front() {
                if batch.end <= self.popped {
                    self.batches.pop_front();
                    continue;
                }
                if batch.deadline > now {
                    self.timer.as_mut().reset(batch.deadline);
                    self.armed = true;
                    break;
                }
                let late = (batch.end - self.popped) as usize;
                for entry in queue.iter_mut().take(late) {
                    if let Some(key) = entry.slot.take() {
                        self.state.resolve(key, Err(Error::Timeout));
                    }
                }
                self.batches.pop_front();
            }
        }
    }

    fn pop(&mut self) -> Option<Entry> {
        let entry = self.state.queue.borrow_mut().pop_front()?;
        self.popped += 1;
        Some(entry)
    }

    fn front(&self) -> Option<EntryKind> {
        self.state.queue.borrow().front().map(|e| e.kind)
    }

    fn answer(&self, entry: Entry, result: Result<Outcome, Error>) {
        if let Some(key) = entry.slot {
            self.state.resolve(key, result);
        }
    }

    /// Handles every complete message in the read buffer.
    fn dispatch(&mut self) -> Result<(), String> {
        while let Some(message) =
            backend::Message::parse(&mut self.rbuf).map_err(|e| format!("bad message from server: {e}"))?
        {
            match message {
                Message::DataRow(body) => match self.front() {
                    Some(EntryKind::Statement { stmt, .. }) => {
                        let columns = self.state.statements[stmt].columns.clone();
                        self.current.push(Row::new(columns, body.buffer_bytes().clone()));
                    }
                    Some(EntryKind::Simple) => {
                        let mut values = Vec::new();
                        let mut ranges = body.ranges();
                        while let Some(range) = ranges.next().map_err(|e| format!("bad DataRow: {e}"))? {
                            values
                                .push(range.map(|r| String::from_utf8_lossy(&body.buffer()[r]).into_owned()));
                        }
                        self.current.text.push(values);
                    }
                    _ => return Err("a row arrived that nobody asked for".into()),
                },
                Message::CommandComplete(body) => {
                    let affected = affected_rows(body.tag().unwrap_or_default());
                    self.complete(affected)?;
                }
                Message::EmptyQueryResponse => self.complete(0)?,
                Message::ErrorResponse(body) => {
                    let error = map_error(&body);
                    match self.front() {
                        // Not a write: no commit to wait for.
                        Some(EntryKind::Statement { write: false, .. }) => {
                            if let Some(entry) = self.pop() {
                                self.current = Outcome::default();
                                self.answer(entry, Err(error.clone()));
                            }
                        }
                        // Writes and scripts answer at ReadyForQuery.
                        Some(EntryKind::Statement { write: true, .. } | EntryKind::Simple) => {
                            self.committed = None;
                        }
                        // Between statements: a failed commit, or FATAL.
                        Some(EntryKind::Sync) | None => {}
                    }
                    self.tx_error.get_or_insert(error);
                }
                Message::ReadyForQuery(_) => self.ready_for_query()?,
                // COPY ... FROM STDIN waits for data we never send, and in
                // a pipeline the server's way out of it depends on timing
                // (it ignores Sync while copying). Fail the statement and
                // drop the connection rather than risk answering the wrong
                // callers; the slot reconnects.
                Message::CopyInResponse(_) => {
                    if let Some(entry) = self.pop() {
                        self.answer(entry, Err(Error::Query("COPY FROM STDIN is not supported".into())));
                    }
                    return Err("COPY FROM STDIN is not supported; connection dropped".into());
                }
                // BindComplete, ParseComplete, notices, parameter changes,
                // and the RowDescription of a simple query.
                _ => {}
            }
        }
        Ok(())
    }

    /// A statement at the front of the queue finished.
    fn complete(&mut self, affected: u64) -> Result<(), String> {
        match self.front() {
            Some(EntryKind::Statement { write: false, .. }) => {
                let mut outcome = std::mem::take(&mut self.current);
                outcome.affected = affected;
                if let Some(entry) = self.pop() {
                    self.answer(entry, Ok(outcome));
                }
            }
            Some(EntryKind::Statement { write: true, .. }) => {
                let mut outcome = std::mem::take(&mut self.current);
                outcome.affected = affected;
                self.committed = Some(outcome);
            }
            // One script can run several commands.
            Some(EntryKind::Simple) => self.current.affected += affected,
            Some(EntryKind::Sync) | None => return Err("a result arrived that nobody asked for".into()),
        }
        Ok(())
    }

    /// Ends one implicit transaction: answers whatever waited for it and
    /// pops entries up to and including its `Sync` (or script).
    fn ready_for_query(&mut self) -> Result<(), String> {
        let error = self.tx_error.take();
        loop {
            let Some(entry) = self.pop() else {
                return Err("ReadyForQuery that nobody asked for".into());
            };
            match entry.kind {
                EntryKind::Sync => break,
                EntryKind::Simple => {
                    let outcome = std::mem::take(&mut self.current);
                    self.answer(entry, error.clone().map_or(Ok(outcome), Err));
                    break;
                }
                EntryKind::Statement { write, .. } => {
                    let result = match (&error, self.committed.take()) {
                        (None, Some(outcome)) if write => Ok(outcome),
                        (Some(e), _) => Err(e.clone()),
                        // Skipped without an error: cannot happen with a
                        // well-behaved server.
                        (None, _) => Err(Error::Query("statement got no answer".into())),
                    };
                    self.answer(entry, result);
                }
            }
        }
        self.current = Outcome::default();
        self.committed = None;
        Ok(())
    }

    /// The connection is gone: everyone still waiting gets `Unavailable`.
    fn fail_all(&mut self, error: Error) {
        self.state.closed.set(true);
        let entries: Vec<Entry> = self.state.queue.borrow_mut().drain(..).collect();
        for entry in entries {
            self.answer(entry, Err(error.clone()));
        }
        self.state.out.borrow_mut().clear();
        self.state.unsynced.set(false);
        self.batches.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_group_by_what_a_handler_should_answer() {
        for code in ["08006", "57P01", "57P03", "53300"] {
            assert_eq!(error_for_sqlstate(code, "x".into()), Error::Unavailable, "{code}");
        }
        assert_eq!(error_for_sqlstate("57014", "x".into()), Error::Timeout);
        assert_eq!(error_for_sqlstate("23505", "duplicate".into()), Error::Query("duplicate".into()));
    }

    #[test]
    fn affected_rows_come_from_the_command_tag() {
        assert_eq!(affected_rows("UPDATE 20"), 20);
        assert_eq!(affected_rows("INSERT 0 1"), 1);
        assert_eq!(affected_rows("BEGIN"), 0);
    }
}
