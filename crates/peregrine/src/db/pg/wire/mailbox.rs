//! The callers' side of a connection: what a query call writes and where
//! its answer arrives.
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
//! This module owns that hand-off: the output buffer and its pending
//! `Sync`, the response queue of [`Entry`]s (one per expected answer, in the
//! order the server sends them), and the slab of [`Slot`]s through which the
//! driver ([`super::driver`]) hands each caller its result and wakes it,
//! and the connection's cache of statements prepared on first use (SQL
//! text: a `Parse`+`Describe` in an implicit transaction of its own, then
//! `Bind`+`Execute` like a registered write). It never touches the socket.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use postgres_protocol::message::frontend;
use postgres_types::{IsNull, ToSql, Type};
use slab::Slab;

use super::READ_CHUNK;
use crate::db::pg::row::{Columns, Row};
use crate::db::Error;

/// Query parameters: anything `postgres-types` can encode.
pub type Params<'a> = [&'a (dyn ToSql + Sync)];

/// Rows of a simple-protocol query: per row, per column, the value as text
/// (`None` for NULL).
pub type TextRows = Vec<Vec<Option<String>>>;

/// A statement prepared on one connection.
pub(crate) struct Prepared {
    /// Server-side name (`s0`, `s1`, ... in registration order; `q0`,
    /// `q1`, ... for statements prepared on first use).
    pub name: String,
    pub params: Vec<Type>,
    /// Shared by every row the statement returns.
    pub columns: Rc<Columns>,
    pub write: bool,
    /// What every `Bind` of this statement starts with after its length:
    /// the unnamed portal, the statement's name, one parameter format
    /// (binary) and the parameter count.
    bind_head: Box<[u8]>,
}

impl Prepared {
    pub(crate) fn new(name: String, params: Vec<Type>, columns: Rc<Columns>, write: bool) -> Prepared {
        let mut head = Vec::with_capacity(name.len() + 8);
        head.push(0);
        head.extend_from_slice(name.as_bytes());
        head.push(0);
        head.extend_from_slice(&[0, 1, 0, 1]);
        // The server describes at most 65,535 parameters; a larger count
        // cannot come from it, and the server would refuse the Bind.
        head.extend_from_slice(&u16::try_from(params.len()).unwrap_or(u16::MAX).to_be_bytes());
        Prepared { name, params, columns, write, bind_head: head.into() }
    }
}

/// `Execute` of the unnamed portal, every row.
const EXECUTE: [u8; 10] = [b'E', 0, 0, 0, 9, 0, 0, 0, 0, 0];

/// Appends `Bind` (unnamed portal, binary parameters and results) and
/// `Execute` of `prepared` with `params`, whose count the caller checked.
///
/// postgres-protocol's `frontend::bind` and `frontend::execute` write the
/// same bytes field by field (a NUL scan per name, a length check and a
/// `put` per field): 160 of a `/db` request's 7,500 instructions were in
/// their `put_slice` calls alone. Here the statement's constant part is one
/// copy ([`Prepared::bind_head`]), reserved for with the rest.
fn encode_bind_execute(
    out: &mut BytesMut,
    prepared: &Prepared,
    params: &Params<'_>,
) -> Result<(), Box<dyn std::error::Error + Sync + Send>> {
    out.reserve(5 + prepared.bind_head.len() + params.len() * 12 + 4 + EXECUTE.len());
    out.extend_from_slice(&[b'B', 0, 0, 0, 0]);
    let start = out.len() - 4;
    out.extend_from_slice(&prepared.bind_head);
    for (param, ty) in params.iter().zip(&prepared.params) {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        let len = match param.to_sql_checked(ty, out)? {
            IsNull::No => i32::try_from(out.len() - at - 4).map_err(|_| "a parameter of 2 GiB or more")?,
            IsNull::Yes => {
                out.truncate(at + 4);
                -1
            }
        };
        out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    }
    // One result format: binary.
    out.extend_from_slice(&[0, 1, 0, 1]);
    let len = i32::try_from(out.len() - start).map_err(|_| "a Bind message of 2 GiB or more")?;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&EXECUTE);
    Ok(())
}

/// How many statements prepared on first use ([`Connection::cached`]) one
/// connection keeps; the least recently used one is closed to make room.
pub(crate) const STATEMENT_CACHE: usize = 256;

/// Statements prepared on first use, by SQL text, with a use counter for
/// least-recently-used eviction (a scan of at most [`STATEMENT_CACHE`]
/// entries, only when the cache is full).
#[derive(Default)]
struct StatementCache {
    map: HashMap<Box<str>, (Rc<Prepared>, Cell<u64>)>,
    clock: Cell<u64>,
    /// Statements ever prepared on first use; names them (`q{n}`).
    prepared: u64,
}

/// What a caller gets back.
///
/// It moves through the caller's slot twice per call (into it, out of it),
/// so what only scripts and preparations return sits behind one box:
/// 80 bytes instead of 152, moved inline rather than through `memcpy`
/// (about 200 of a `/db` request's 8,600 instructions went to those copies).
#[derive(Default)]
pub(crate) struct Outcome {
    /// The first row, kept out of `rest` so single-row reads allocate no
    /// vector.
    pub first: Option<Row>,
    pub rest: Vec<Row>,
    /// Rows affected, from the command tag.
    pub affected: u64,
    /// A script's rows and tag, or a preparation's description.
    pub extra: Option<Box<Extra>>,
}

/// The parts of an [`Outcome`] that only simple-protocol queries and
/// `Parse`+`Describe` produce.
#[derive(Default)]
pub(crate) struct Extra {
    /// Rows of a simple-protocol query.
    pub text: TextRows,
    /// The last command tag of a simple-protocol query (`COMMIT`,
    /// `ROLLBACK`, ...).
    pub tag: String,
    /// A `Parse`+`Describe`'s answer: parameter types and result columns.
    pub described: Option<(Vec<Type>, Rc<Columns>)>,
}

impl Outcome {
    pub(super) fn push(&mut self, row: Row) {
        if self.first.is_none() {
            self.first = Some(row);
        } else {
            self.rest.push(row);
        }
    }

    /// The script and preparation parts, created on first use.
    pub(super) fn extra_mut(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Box::default)
    }

    /// A script's rows as text (empty for prepared statements).
    pub(crate) fn into_text(self) -> TextRows {
        self.extra.map(|extra| extra.text).unwrap_or_default()
    }

    /// A script's last command tag (empty for prepared statements).
    pub(crate) fn tag(&self) -> &str {
        self.extra.as_ref().map_or("", |extra| &extra.tag)
    }

    /// A preparation's parameter types and result columns.
    pub(crate) fn into_description(self) -> Option<(Vec<Type>, Rc<Columns>)> {
        self.extra.and_then(|extra| extra.described)
    }

    /// All rows, in order.
    pub(crate) fn into_rows(self) -> Vec<Row> {
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
pub(super) struct Entry {
    pub kind: EntryKind,
    /// `None` once the caller has been answered (timeout) or for a `Sync`.
    pub slot: Option<usize>,
    /// A read's `Bind`+`Execute`, kept until it is answered so the driver
    /// can send it again if another caller's error made the server skip it
    /// (see [`super::driver`]). `None` for writes, `Sync`s and scripts,
    /// which never share a transaction with another caller.
    pub msg: Option<Bytes>,
    /// The statement's result columns, for its `DataRow`s.
    pub columns: Option<Rc<Columns>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum EntryKind {
    /// `Bind`+`Execute` of a prepared statement.
    Statement { write: bool },
    /// `Parse`+`Describe` of a statement prepared on first use; answered
    /// with its description (or the `Parse` error).
    Prepare,
    /// A `Sync`; its `ReadyForQuery` ends one implicit transaction.
    Sync,
    /// A simple-protocol `Query`, which ends with its own `ReadyForQuery`.
    Simple,
}

/// State shared by the connection's handle(s) and its driver.
pub(super) struct State {
    pub statements: Vec<Prepared>,
    /// Messages queued by callers since the driver last took them.
    pub out: RefCell<BytesMut>,
    /// Whether `out` holds statements not yet followed by a `Sync`.
    pub unsynced: Cell<bool>,
    /// Expected answers; callers push, the driver pops.
    pub queue: RefCell<VecDeque<Entry>>,
    slots: RefCell<Slab<Slot>>,
    /// The driver's waker, taken by the first caller that queues work.
    pub driver: RefCell<Option<Waker>>,
    pub closed: Cell<bool>,
    /// The handle is gone: the driver says goodbye and ends.
    pub released: Cell<bool>,
    pub timeout: Duration,
    /// Backing store of the [`Entry::msg`] copies: one allocation shared by
    /// many small messages instead of one each.
    retained: RefCell<BytesMut>,
    cache: RefCell<StatementCache>,
}

impl State {
    pub(super) fn new(statements: Vec<Prepared>, timeout: Duration) -> State {
        State {
            statements,
            out: RefCell::new(BytesMut::with_capacity(READ_CHUNK)),
            unsynced: Cell::new(false),
            queue: RefCell::new(VecDeque::with_capacity(256)),
            slots: RefCell::new(Slab::with_capacity(256)),
            driver: RefCell::new(None),
            closed: Cell::new(false),
            released: Cell::new(false),
            timeout,
            retained: RefCell::new(BytesMut::with_capacity(READ_CHUNK)),
            cache: RefCell::new(StatementCache::default()),
        }
    }

    pub(super) fn wake_driver(&self) {
        if let Some(waker) = self.driver.borrow_mut().take() {
            waker.wake();
        }
    }

    /// Hands `result` to the caller behind `key`.
    pub(super) fn resolve(&self, key: usize, result: Result<Outcome, Error>) {
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

    /// Whether the caller behind `key` still waits for its answer (it has
    /// not timed out, been answered, or gone away).
    pub(super) fn is_waiting(&self, key: usize) -> bool {
        matches!(self.slots.borrow().get(key), Some(Slot::Waiting(_)))
    }

    /// A copy of `msg` that shares one buffer with the other retained
    /// messages.
    fn retain(&self, msg: &[u8]) -> Bytes {
        let mut retained = self.retained.borrow_mut();
        if retained.capacity() < msg.len() {
            retained.reserve(READ_CHUNK.max(msg.len()));
        }
        retained.extend_from_slice(msg);
        retained.split().freeze()
    }

    fn new_slot(&self) -> usize {
        self.slots.borrow_mut().insert(Slot::Waiting(None))
    }

    /// Adds a `Sync` to `out` if statements are waiting for one.
    pub(super) fn sync_pending(&self, out: &mut BytesMut, queue: &mut VecDeque<Entry>) {
        if self.unsynced.replace(false) {
            frontend::sync(out);
            queue.push_back(Entry { kind: EntryKind::Sync, slot: None, msg: None, columns: None });
        }
    }
}

/// The caller's side of one live connection. Dropping it ends the driver.
pub(crate) struct Connection {
    state: Rc<State>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.state.released.set(true);
        self.state.wake_driver();
    }
}

impl Connection {
    pub(super) fn new(state: Rc<State>) -> Connection {
        Connection { state }
    }

    /// Whether the connection has been lost; calls on it fail at once.
    pub(crate) fn is_closed(&self) -> bool {
        self.state.closed.get()
    }

    /// Queues prepared statement `stmt` with `params` and returns the
    /// future answer. Nothing is awaited here: the statement joins the batch
    /// the driver sends when the current task yields.
    pub(crate) fn start(&self, stmt: usize, params: &Params<'_>) -> Result<Call<'_>, Error> {
        let prepared =
            self.state.statements.get(stmt).ok_or_else(|| {
                Error::config(format!("statement #{stmt} was not registered with this pool"))
            })?;
        self.start_prepared(prepared, params, || format!("statement #{stmt}"))
    }

    /// [`Connection::start`] for a statement prepared on this connection,
    /// registered or cached; `label` names it in errors.
    pub(crate) fn start_prepared(
        &self,
        prepared: &Prepared,
        params: &Params<'_>,
        label: impl Fn() -> String,
    ) -> Result<Call<'_>, Error> {
        let state = &*self.state;
        if state.closed.get() {
            return Err(Error::unavailable());
        }
        if params.len() != prepared.params.len() {
            return Err(Error::query(format!(
                "{} takes {} parameters, got {}",
                label(),
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
        if let Err(e) = encode_bind_execute(&mut out, prepared, params) {
            out.truncate(mark);
            return Err(Error::query(format!("encoding parameters of {}: {e}", label())).with_source(e));
        }
        let msg = (!prepared.write).then(|| state.retain(&out[mark..]));
        let slot = state.new_slot();
        queue.push_back(Entry {
            kind: EntryKind::Statement { write: prepared.write },
            slot: Some(slot),
            msg,
            columns: Some(prepared.columns.clone()),
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
    pub(crate) fn start_simple(&self, sql: &str) -> Result<Call<'_>, Error> {
        let state = &*self.state;
        if state.closed.get() {
            return Err(Error::unavailable());
        }
        let mut out = state.out.borrow_mut();
        let mut queue = state.queue.borrow_mut();
        // Its own transaction, not the open batch's.
        state.sync_pending(&mut out, &mut queue);
        frontend::query(sql, &mut out)
            .map_err(|e| Error::query(format!("invalid SQL text: {e}")).with_source(e))?;
        let slot = state.new_slot();
        queue.push_back(Entry { kind: EntryKind::Simple, slot: Some(slot), msg: None, columns: None });
        drop((out, queue));
        state.wake_driver();
        Ok(Call { state, key: slot, done: false })
    }

    /// The statement prepared on first use for `sql`, if this connection
    /// has it; counts as a use for eviction.
    pub(crate) fn cached(&self, sql: &str) -> Option<Rc<Prepared>> {
        let cache = self.state.cache.borrow();
        let (prepared, used) = cache.map.get(sql)?;
        let now = cache.clock.get() + 1;
        cache.clock.set(now);
        used.set(now);
        Some(prepared.clone())
    }

    /// Number of statements prepared on first use that this connection
    /// holds.
    pub(crate) fn cached_len(&self) -> usize {
        self.state.cache.borrow().map.len()
    }

    /// Queues `Parse`+`Describe` of `sql` under a fresh name, in an implicit
    /// transaction of its own (a `Sync` before it, so no other caller's
    /// error can make the server skip it), and returns the name and the
    /// future description.
    pub(crate) fn start_prepare(&self, sql: &str) -> Result<(String, Call<'_>), Error> {
        let state = &*self.state;
        if state.closed.get() {
            return Err(Error::unavailable());
        }
        let name = {
            let mut cache = state.cache.borrow_mut();
            cache.prepared += 1;
            format!("q{}", cache.prepared - 1)
        };
        let mut out = state.out.borrow_mut();
        let mut queue = state.queue.borrow_mut();
        state.sync_pending(&mut out, &mut queue);
        let mark = out.len();
        let encoded = frontend::parse(&name, sql, None, &mut out)
            .and_then(|()| frontend::describe(b'S', &name, &mut out));
        if let Err(e) = encoded {
            out.truncate(mark);
            return Err(Error::query(format!("invalid SQL text: {e}")).with_source(e));
        }
        let slot = state.new_slot();
        queue.push_back(Entry { kind: EntryKind::Prepare, slot: Some(slot), msg: None, columns: None });
        state.unsynced.set(true);
        drop((out, queue));
        state.wake_driver();
        Ok((name, Call { state, key: slot, done: false }))
    }

    /// Adds a freshly prepared statement to the cache and returns the one
    /// to use: `prepared`, or the entry another caller added for the same
    /// SQL meanwhile (then `prepared` is closed again). When the cache is
    /// full, the least recently used statement is closed on the server.
    pub(crate) fn insert_cached(&self, sql: &str, prepared: Prepared) -> Rc<Prepared> {
        let state = &*self.state;
        let mut cache = state.cache.borrow_mut();
        if let Some((existing, _)) = cache.map.get(sql) {
            let existing = existing.clone();
            drop(cache);
            self.close_statement(&prepared.name);
            return existing;
        }
        let mut evicted = None;
        if cache.map.len() >= STATEMENT_CACHE {
            let oldest = cache.map.iter().min_by_key(|(_, (_, used))| used.get()).map(|(sql, _)| sql.clone());
            if let Some(oldest) = oldest {
                evicted = cache.map.remove(&oldest).map(|(p, _)| p);
            }
        }
        let now = cache.clock.get() + 1;
        cache.clock.set(now);
        let prepared = Rc::new(prepared);
        cache.map.insert(sql.into(), (prepared.clone(), Cell::new(now)));
        drop(cache);
        if let Some(evicted) = evicted {
            self.close_statement(&evicted.name);
        }
        prepared
    }

    /// Queues `Close` of statement `name`, unanswered: its `CloseComplete`
    /// is ignored by the driver, and the `Bind`s already queued for it run
    /// first (the server handles messages in order).
    fn close_statement(&self, name: &str) {
        let state = &*self.state;
        if state.closed.get() {
            return;
        }
        let mut out = state.out.borrow_mut();
        if frontend::close(b'S', name, &mut out).is_ok() {
            state.unsynced.set(true);
            drop(out);
            state.wake_driver();
        }
    }
}

/// The answer to one queued statement. Dropping it early is fine: the
/// driver still reads the answer and throws it away.
pub(crate) struct Call<'a> {
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
                    Slot::Waiting(_) | Slot::Abandoned => Err(Error::unavailable()),
                };
                drop(slots);
                self.done = true;
                Poll::Ready(result)
            }
            Some(Slot::Abandoned) | None => {
                drop(slots);
                self.done = true;
                Poll::Ready(Err(Error::unavailable()))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The statement's Bind and Execute, as postgres-protocol writes them.
    fn reference(prepared: &Prepared, params: &Params<'_>) -> BytesMut {
        let mut out = BytesMut::new();
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
        assert!(bound.is_ok());
        frontend::execute("", 0, &mut out).expect("execute");
        out
    }

    #[test]
    fn bind_and_execute_are_the_bytes_postgres_protocol_writes() {
        let columns = Rc::new(Columns::default());
        let none: Option<i32> = None;
        let long = "x".repeat(70_000);
        let raw: &[u8] = b"\0\x01";
        let cases: Vec<(Vec<Type>, Vec<&(dyn ToSql + Sync)>)> = vec![
            (vec![], vec![]),
            (vec![Type::INT4], vec![&42i32]),
            (vec![Type::INT4, Type::TEXT, Type::INT4], vec![&-7i32, &"héllo", &none]),
            (vec![Type::TEXT, Type::BYTEA], vec![&long, &raw]),
        ];
        for (i, (types, params)) in cases.into_iter().enumerate() {
            let prepared = Prepared::new(format!("s{i}"), types, columns.clone(), false);
            let mut out = BytesMut::from(&b"before"[..]);
            encode_bind_execute(&mut out, &prepared, &params).expect("encodes");
            assert_eq!(&out[..6], b"before");
            assert_eq!(&out[6..], &reference(&prepared, &params)[..], "case {i}");
        }
    }

    #[test]
    fn a_parameter_of_the_wrong_type_is_refused() {
        let prepared = Prepared::new("s0".into(), vec![Type::INT4], Rc::new(Columns::default()), false);
        let mut out = BytesMut::new();
        let err = encode_bind_execute(&mut out, &prepared, &[&"text"]).expect_err("a str for an int4");
        assert!(err.to_string().contains("int4"), "{err}");
    }

    /// Every answer moves through its slot; keep the common one small
    /// enough to move without a `memcpy` call (see [`Outcome`]).
    #[test]
    fn a_rows_answer_stays_small() {
        assert!(std::mem::size_of::<Outcome>() <= 80, "Outcome is {} bytes", std::mem::size_of::<Outcome>());
    }
}
