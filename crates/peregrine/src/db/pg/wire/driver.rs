//! The task that owns a connection's socket: it takes what callers queued
//! ([`super::mailbox`]), closes it with a `Sync` and writes it as one
//! batch, reads the answers and hands each to its caller, and fails callers
//! whose batch is past its deadline.
//!
//! # Transactions
//!
//! Sharing the implicit transaction has one consequence to contain: after
//! an `ErrorResponse` the server skips everything up to the `Sync`, and the
//! statements behind the failing one in a batch usually belong to other
//! callers (every request handled in the same tick). One caller's error
//! must not fail them, so at that `ReadyForQuery` the driver sends the
//! skipped statements again, in order, as part of the next batch; their
//! callers get their own answers, one round trip later. Only reads are ever
//! skipped this way (writes and scripts never share a transaction), so
//! sending them again is safe; it needs each read's `Bind`+`Execute` kept
//! until its answer arrives ([`super::mailbox`] keeps a copy). A batch
//! without errors costs that copy and nothing else. Measured on this
//! project's 2-core machine (server on the same cores, other work running,
//! 100 reads per batch on one connection, interleaved runs, medians): the
//! client spent 6-7% more CPU per read (755 -> 810 ns in one session,
//! 1044 -> 1112 ns in another, where a build without the copy measured
//! 1075 ns), while reads per second stayed within the noise (about 250k/s
//! both ways, bound by the server). With one failing read per batch, 99% of
//! the reads now succeed instead of 50%, the 49 skipped ones paying a
//! second round trip.
//!
//! The connection itself stays usable. Statements registered as writes
//! ([`crate::db::pg::PgConfig::write_statement`]) never share: they get a
//! `Sync` before and after, so nothing else can roll them back, and their
//! callers are answered only at the following `ReadyForQuery`, that is
//! after the commit.
//!
//! # Deadlines
//!
//! The driver, not the callers, enforces the call timeout: every batch gets
//! a deadline when the driver takes it, one timer per connection covers the
//! oldest batch, and callers still waiting at the deadline get
//! [`ErrorKind::Timeout`]. Their entries stay in the response queue, so the
//! late answers are read and dropped in order. The server aborts the
//! statement at the same moment through `statement_timeout` (set by the
//! pool). A read sent again after another caller's error joins a new batch
//! and so gets a new deadline.

use std::collections::VecDeque;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use postgres_types::Type;
use tokio::io::AsyncWrite;
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use super::columns::{describe_columns, type_of};
use super::error::map_error;
use super::mailbox::{Entry, EntryKind, Outcome, State};
use super::{io_error, protocol_error, READ_CHUNK};
use crate::db::pg::row::{Columns, Row};
use crate::db::Error;
#[cfg(doc)]
use crate::db::ErrorKind;

/// Rows affected, from a command tag like `UPDATE 20` or `INSERT 0 1`:
/// its last word, when that is a number.
fn affected_rows(tag: &[u8]) -> u64 {
    let count = tag.rsplit(|&b| b == b' ').next().unwrap_or_default();
    if count.is_empty() || count.len() > 19 || !count.iter().all(u8::is_ascii_digit) {
        return 0;
    }
    count.iter().fold(0, |n, &digit| n * 10 + u64::from(digit - b'0'))
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
pub(crate) struct Driver {
    state: Rc<State>,
    stream: TcpStream,
    rbuf: BytesMut,
    wbuf: BytesMut,
    batches: VecDeque<Batch>,
    /// Most batches sent and not yet answered; see
    /// [`crate::db::pg::PgConfig::batches_in_flight`].
    max_in_flight: usize,
    /// The deadline of work held back while `max_in_flight` batches are
    /// out: the call timeout from when it was first held, kept when it is
    /// sent, so holding never extends a caller's bound.
    held_deadline: Option<Instant>,
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
    /// Parameter types of the statement being described.
    described: Vec<Type>,
}

impl Future for Driver {
    type Output = Result<(), Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if this.state.released.get() {
            let mut bye = BytesMut::new();
            frontend::terminate(&mut bye);
            // Best effort: the server also notices the closed socket.
            let _ = Pin::new(&mut this.stream).poll_write(cx, &bye);
            this.fail_all(Error::unavailable().context("the pool dropped the connection"));
            return Poll::Ready(Ok(()));
        }
        let result = this.poll_io(cx);
        if let Poll::Ready(Err(e)) = &result {
            // Every caller still waiting learns why the connection is gone.
            this.fail_all(e.clone());
        }
        result
    }
}

impl Driver {
    pub(super) fn new(state: Rc<State>, stream: TcpStream, rbuf: BytesMut, max_in_flight: usize) -> Driver {
        Driver {
            state,
            stream,
            rbuf,
            wbuf: BytesMut::with_capacity(READ_CHUNK),
            batches: VecDeque::new(),
            max_in_flight: max_in_flight.max(1),
            held_deadline: None,
            popped: 0,
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
            armed: false,
            current: Outcome::default(),
            committed: None,
            tx_error: None,
            described: Vec::new(),
        }
    }

    fn poll_io(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
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
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(protocol_error("server closed the connection")))
                }
                Poll::Ready(Ok(_)) => {
                    if let Err(e) = self.dispatch() {
                        return Poll::Ready(Err(e));
                    }
                    // Reads skipped because of another caller's error were
                    // queued again; send them now.
                    self.take_batch();
                    if let Err(e) = self.write(cx) {
                        return Poll::Ready(Err(e));
                    }
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(io_error("reading from server", e))),
                Poll::Pending => break,
            }
        }
        self.poll_deadlines(cx);
        // A batch that passed its deadline no longer counts as in flight:
        // send what it held back.
        if self.take_batch() {
            if let Err(e) = self.write(cx) {
                return Poll::Ready(Err(e));
            }
            self.poll_deadlines(cx);
        }
        Poll::Pending
    }

    /// Writes as much of the write buffer as the socket takes; one `write`
    /// for a whole batch unless the socket buffer is full.
    fn write(&mut self, cx: &mut Context<'_>) -> Result<(), Error> {
        while !self.wbuf.is_empty() {
            match Pin::new(&mut self.stream).poll_write(cx, &self.wbuf) {
                Poll::Ready(Ok(0)) => return Err(protocol_error("server closed the connection")),
                Poll::Ready(Ok(n)) => bytes::Buf::advance(&mut self.wbuf, n),
                Poll::Ready(Err(e)) => return Err(io_error("writing to server", e)),
                Poll::Pending => break,
            }
        }
        Ok(())
    }

    /// Moves what callers queued into the write buffer, closing it with a
    /// `Sync`, and gives it a deadline; returns whether it did. While
    /// `max_in_flight` batches are unanswered the work stays queued, and
    /// the next answered (or timed-out) batch calls this again.
    ///
    /// Held work is sent at the latest when the oldest batch out passes its
    /// deadline, which comes before the held work's own (that batch was
    /// sent before the holding began), so the held work's deadline, and the
    /// order of deadlines in `batches`, hold.
    fn take_batch(&mut self) -> bool {
        let mut out = self.state.out.borrow_mut();
        if out.is_empty() {
            return false;
        }
        // Batches are popped lazily (by `poll_deadlines`); drop the answered
        // ones first so only those still out are counted. A batch past its
        // deadline was popped there too, so a server that stopped answering
        // cannot hold queued work back beyond the call timeout.
        while self.batches.front().is_some_and(|b| b.end <= self.popped) {
            self.batches.pop_front();
        }
        if self.batches.len() >= self.max_in_flight {
            if self.held_deadline.is_none() {
                self.held_deadline = Some(Instant::now() + self.state.timeout);
            }
            return false;
        }
        let mut queue = self.state.queue.borrow_mut();
        self.state.sync_pending(&mut out, &mut queue);
        let deadline = self.held_deadline.take().unwrap_or_else(|| Instant::now() + self.state.timeout);
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
        true
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
                        self.state.resolve(key, Err(Error::timeout()));
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
    ///
    /// The buffer is taken whole, once per read: each row is a slice of it
    /// (a reference count, no copy), and the messages of a pipelined read
    /// (`BindComplete`, `DataRow`, `CommandComplete` per statement, one
    /// `ReadyForQuery` per batch) are decoded from their 5-byte headers
    /// here. postgres-protocol's `Message::parse` split the buffer once per
    /// message and cost 653 of a `/db` request's 8,600 instructions; it
    /// still decodes the rare messages (errors, descriptions, notices).
    /// An incomplete message at the end goes back into the read buffer.
    fn dispatch(&mut self) -> Result<(), Error> {
        let chunk = self.rbuf.split().freeze();
        let mut pos = 0;
        let mut result = Ok(());
        while let Some(header) = chunk.get(pos..pos + 5) {
            let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
            if len < 4 {
                result = Err(protocol_error("a message from the server with a length below 4"));
                break;
            }
            let end = pos + 1 + len;
            if end > chunk.len() {
                break;
            }
            let tag = header[0];
            let message = pos..end;
            pos = end;
            if let Err(e) = self.handle(tag, &chunk, message) {
                result = Err(e);
                break;
            }
        }
        if result.is_ok() && pos < chunk.len() {
            self.rbuf.extend_from_slice(&chunk[pos..]);
        }
        result
    }

    /// Handles one whole message, `chunk[message]` (tag, length, body).
    fn handle(&mut self, tag: u8, chunk: &Bytes, message: Range<usize>) -> Result<(), Error> {
        let body = message.start + 5..message.end;
        match tag {
            // A prepared statement's binary row: its fields after the
            // 2-byte field count.
            b'D' if matches!(self.front(), Some(EntryKind::Statement { .. })) => {
                if body.len() < 2 {
                    return Err(protocol_error("a DataRow without its field count"));
                }
                let columns = self.state.queue.borrow().front().and_then(|e| e.columns.clone());
                let columns =
                    columns.ok_or_else(|| protocol_error("a row for a statement without columns"))?;
                self.current.push(Row::new(columns, chunk.slice(body.start + 2..body.end)));
                Ok(())
            }
            b'C' => {
                let tag = &chunk[body];
                // The tag is a C string: drop its terminating NUL.
                self.complete(tag.strip_suffix(&[0]).unwrap_or(tag))
            }
            // ParseComplete, BindComplete, CloseComplete: nothing to do.
            b'1' | b'2' | b'3' => Ok(()),
            b'Z' => self.ready_for_query(),
            _ => {
                let mut one = BytesMut::from(&chunk[message]);
                match Message::parse(&mut one).map_err(|e| io_error("bad message from server", e))? {
                    Some(message) => self.handle_message(message),
                    None => Err(protocol_error("a message from the server cut short")),
                }
            }
        }
    }

    /// Handles a message decoded by postgres-protocol: the ones
    /// [`Driver::handle`] does not decode itself (it takes every
    /// `CommandComplete`, `ReadyForQuery` and prepared statement's row).
    fn handle_message(&mut self, message: Message) -> Result<(), Error> {
        match message {
            Message::DataRow(body) => match self.front() {
                Some(EntryKind::Simple) => {
                    let mut values = Vec::new();
                    let mut ranges = body.ranges();
                    while let Some(range) = ranges.next().map_err(|e| io_error("bad DataRow", e))? {
                        values.push(range.map(|r| String::from_utf8_lossy(&body.buffer()[r]).into_owned()));
                    }
                    self.current.extra_mut().text.push(values);
                }
                _ => return Err(protocol_error("a row arrived that nobody asked for")),
            },
            Message::EmptyQueryResponse => self.complete(b"")?,
            Message::ParameterDescription(body) if self.front() == Some(EntryKind::Prepare) => {
                self.described = body
                    .parameters()
                    .map(|oid| Ok(type_of(oid)))
                    .collect()
                    .map_err(|e| io_error("bad ParameterDescription", e))?;
            }
            message @ (Message::RowDescription(_) | Message::NoData)
                if self.front() == Some(EntryKind::Prepare) =>
            {
                let columns = match message {
                    Message::RowDescription(body) => describe_columns(&body)?,
                    _ => Columns::default(),
                };
                if let Some(entry) = self.pop() {
                    let params = std::mem::take(&mut self.described);
                    let mut outcome = Outcome::default();
                    outcome.extra_mut().described = Some((params, Rc::new(columns)));
                    self.answer(entry, Ok(outcome));
                }
            }
            Message::ErrorResponse(body) => {
                let error = map_error(&body);
                match self.front() {
                    // Not a write: no commit to wait for.
                    Some(EntryKind::Statement { write: false } | EntryKind::Prepare) => {
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
            // COPY ... FROM STDIN waits for data we never send, and in
            // a pipeline the server's way out of it depends on timing
            // (it ignores Sync while copying). Fail the statement and
            // drop the connection rather than risk answering the wrong
            // callers; the slot reconnects.
            Message::CopyInResponse(_) => {
                if let Some(entry) = self.pop() {
                    self.answer(entry, Err(Error::query("COPY FROM STDIN is not supported")));
                }
                return Err(protocol_error("COPY FROM STDIN is not supported; connection dropped"));
            }
            // Notices, parameter changes, and the RowDescription of a
            // simple query.
            _ => {}
        }
        Ok(())
    }

    /// A statement at the front of the queue finished.
    fn complete(&mut self, tag: &[u8]) -> Result<(), Error> {
        let affected = affected_rows(tag);
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
            Some(EntryKind::Simple) => {
                self.current.affected += affected;
                let extra = self.current.extra_mut();
                extra.tag.clear();
                extra.tag.push_str(&String::from_utf8_lossy(tag));
            }
            Some(EntryKind::Sync | EntryKind::Prepare) | None => {
                return Err(protocol_error("a result arrived that nobody asked for"))
            }
        }
        Ok(())
    }

    /// Ends one implicit transaction: answers whatever waited for it and
    /// pops entries up to and including its `Sync` (or script). Reads the
    /// server skipped because an earlier statement of the transaction failed
    /// are not answered with that error but queued again (see the module
    /// doc).
    fn ready_for_query(&mut self) -> Result<(), Error> {
        let error = self.tx_error.take();
        let mut skipped = Vec::new();
        loop {
            let Some(entry) = self.pop() else {
                return Err(protocol_error("ReadyForQuery that nobody asked for"));
            };
            match entry.kind {
                EntryKind::Statement { write: false, .. }
                    if error.is_some()
                        && entry.msg.is_some()
                        && entry.slot.is_some_and(|key| self.state.is_waiting(key)) =>
                {
                    skipped.push(entry);
                }
                EntryKind::Sync => break,
                EntryKind::Simple => {
                    let outcome = std::mem::take(&mut self.current);
                    self.answer(entry, error.clone().map_or(Ok(outcome), Err));
                    break;
                }
                EntryKind::Statement { write } => {
                    let result = match (&error, self.committed.take()) {
                        (None, Some(outcome)) if write => Ok(outcome),
                        (Some(e), _) => Err(e.clone()),
                        // Skipped without an error: cannot happen with a
                        // well-behaved server.
                        (None, _) => Err(Error::query("statement got no answer")),
                    };
                    self.answer(entry, result);
                }
                // Normally answered at its description; skipped only if the
                // server broke the protocol or its Parse failed.
                EntryKind::Prepare => {
                    let result =
                        error.clone().unwrap_or_else(|| Error::query("statement got no description"));
                    self.answer(entry, Err(result));
                }
            }
        }
        self.current = Outcome::default();
        self.committed = None;
        self.resend(skipped);
        Ok(())
    }

    /// Queues `entries` (skipped reads, in their original order) again,
    /// behind everything already queued, as part of the next batch.
    fn resend(&mut self, entries: Vec<Entry>) {
        if entries.is_empty() {
            return;
        }
        let mut out = self.state.out.borrow_mut();
        let mut queue = self.state.queue.borrow_mut();
        for entry in entries {
            if let Some(msg) = &entry.msg {
                out.extend_from_slice(msg);
            }
            queue.push_back(entry);
        }
        self.state.unsynced.set(true);
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
    fn affected_rows_come_from_the_command_tag() {
        assert_eq!(affected_rows(b"UPDATE 20"), 20);
        assert_eq!(affected_rows(b"INSERT 0 1"), 1);
        assert_eq!(affected_rows(b"SELECT 18446744073709551615"), 0, "past 19 digits");
        assert_eq!(affected_rows(b"SELECT 9999999999999999999"), 9_999_999_999_999_999_999);
        assert_eq!(affected_rows(b"BEGIN"), 0);
        assert_eq!(affected_rows(b""), 0);
        assert_eq!(affected_rows(b"SELECT "), 0);
    }
}
