//! Response bodies produced over time: [`Response::stream`](super::Response::stream)
//! for any stream of chunks, and [`Sse`] for Server-Sent Events with
//! keep-alive comments.
//!
//! Each protocol's driver writes the chunks as they come, waiting for the
//! client to take each before asking for the next (real backpressure: a
//! slow reader slows the stream, nothing piles up in memory). HTTP/1.1 uses
//! the chunked transfer coding; an HTTP/1.0 client gets the body delimited
//! by the connection's close.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use tokio::time::Sleep;

/// A body delivered in chunks; an `Err` ends it early (the client sees a
/// truncated body, since the status has been sent).
pub(crate) type ChunkStream = Pin<Box<dyn Stream<Item = Result<Bytes, BoxError>>>>;

/// Why a body stream stopped early.
pub type BoxError = Box<dyn std::error::Error>;

/// A streamed body waiting for its connection's driver.
pub(crate) struct BodyStream(pub(crate) ChunkStream);

impl fmt::Debug for BodyStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BodyStream")
    }
}

/// One Server-Sent Event (the WHATWG HTML standard's `text/event-stream`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Event {
    event: Option<String>,
    id: Option<String>,
    retry: Option<Duration>,
    data: String,
}

impl Event {
    /// An event carrying `data` (several lines become several `data:`
    /// fields, which the client joins with newlines).
    pub fn data(data: impl Into<String>) -> Event {
        Event { data: data.into(), ..Event::default() }
    }

    /// Names the event type (the client's `addEventListener(name)`).
    pub fn event(mut self, name: impl Into<String>) -> Event {
        self.event = Some(name.into());
        self
    }

    /// Sets the id the client resends as `Last-Event-ID` on reconnect.
    pub fn id(mut self, id: impl Into<String>) -> Event {
        self.id = Some(id.into());
        self
    }

    /// Tells the client how long to wait before reconnecting.
    pub fn retry(mut self, after: Duration) -> Event {
        self.retry = Some(after);
        self
    }

    /// The event in the wire format. Line breaks inside the name or id,
    /// which would start another field, are removed.
    fn encode(&self) -> Bytes {
        let one_line = |s: &str| s.replace(['\r', '\n'], "");
        let mut out = String::with_capacity(self.data.len() + 16);
        if let Some(event) = &self.event {
            out.push_str("event: ");
            out.push_str(&one_line(event));
            out.push('\n');
        }
        if let Some(id) = &self.id {
            out.push_str("id: ");
            out.push_str(&one_line(id));
            out.push('\n');
        }
        if let Some(retry) = self.retry {
            out.push_str(&format!("retry: {}\n", retry.as_millis()));
        }
        for line in self.data.split('\n') {
            out.push_str("data: ");
            out.push_str(line.strip_suffix('\r').unwrap_or(line));
            out.push('\n');
        }
        out.push('\n');
        Bytes::from(out)
    }
}

/// A Server-Sent Events response: `text/event-stream`, no caching, and a
/// `:` comment line whenever no event was sent for the keep-alive interval,
/// so proxies and the browser keep the connection.
pub struct Sse<S> {
    events: S,
    keep_alive: Option<Duration>,
}

impl<S> fmt::Debug for Sse<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sse").field("keep_alive", &self.keep_alive).finish_non_exhaustive()
    }
}

impl<S, E> Sse<S>
where
    S: Stream<Item = Result<Event, E>> + 'static,
    E: Into<BoxError> + 'static,
{
    /// Events from `events`, with a keep-alive comment every 15 seconds.
    pub fn new(events: S) -> Sse<S> {
        Sse { events, keep_alive: Some(Duration::from_secs(15)) }
    }

    /// Changes the keep-alive interval (`None`: no comments).
    pub fn keep_alive(mut self, every: Option<Duration>) -> Sse<S> {
        self.keep_alive = every;
        self
    }
}

impl<S, E> super::IntoResponse for Sse<S>
where
    S: Stream<Item = Result<Event, E>> + 'static,
    E: Into<BoxError> + 'static,
{
    fn into_response(self) -> super::Response {
        let stream = SseStream {
            events: Box::pin(self.events),
            keep_alive: self.keep_alive,
            idle: self.keep_alive.map(|d| Box::pin(tokio::time::sleep(d))),
        };
        super::Response::stream("text/event-stream", stream).header("Cache-Control", "no-cache")
    }
}

/// Events, encoded, with keep-alive comments while they pause.
struct SseStream<E> {
    events: Pin<Box<dyn Stream<Item = Result<Event, E>>>>,
    keep_alive: Option<Duration>,
    idle: Option<Pin<Box<Sleep>>>,
}

impl<E: Into<BoxError>> Stream for SseStream<E> {
    type Item = Result<Bytes, BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        match this.events.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(event))) => {
                if let (Some(idle), Some(every)) = (this.idle.as_mut(), this.keep_alive) {
                    idle.as_mut().reset(tokio::time::Instant::now() + every);
                }
                Poll::Ready(Some(Ok(event.encode())))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let (Some(idle), Some(every)) = (this.idle.as_mut(), this.keep_alive) else {
                    return Poll::Pending;
                };
                match idle.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        idle.as_mut().reset(tokio::time::Instant::now() + every);
                        Poll::Ready(Some(Ok(Bytes::from_static(b":\n\n"))))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_encode_to_the_wire_format() {
        let e = Event::data("line one\nline two").event("tick\nx").id("7").retry(Duration::from_millis(1500));
        assert_eq!(
            e.encode(),
            Bytes::from_static(b"event: tickx\nid: 7\nretry: 1500\ndata: line one\ndata: line two\n\n")
        );
        assert_eq!(Event::data("").encode(), Bytes::from_static(b"data: \n\n"));
    }
}
