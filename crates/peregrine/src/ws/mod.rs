//! WebSocket (RFC 6455) with permessage-deflate (RFC 7692): an upgrade
//! extractor, the socket handlers talk through, and the codec under them.
//!
//! ```no_run
//! use peregrine::ws::{Message, WebSocketUpgrade};
//! use peregrine::Router;
//!
//! fn app() -> Router {
//!     Router::new().get("/echo", |ws: WebSocketUpgrade| {
//!         ws.on_upgrade(|mut socket| async move {
//!             while let Some(Ok(message)) = socket.recv().await {
//!                 if matches!(message, Message::Text(_) | Message::Binary(_))
//!                     && socket.send(message).await.is_err()
//!                 {
//!                     break;
//!                 }
//!             }
//!         })
//!     })
//! }
//! ```
//!
//! [`WebSocketUpgrade`] is an extractor, so the handler's other extractors
//! (auth, path, query) run first and can refuse the upgrade with an
//! ordinary response; a request that is not a valid version-13 handshake
//! is refused before the handler runs (`400`, or `426` with
//! `Sec-WebSocket-Version: 13`). The handler answers with
//! [`WebSocketUpgrade::on_upgrade`], whose closure gets the [`WebSocket`]
//! after the `101` has been sent, on the same worker task.
//!
//! # Over HTTP/2
//! The same route and handler serve RFC 8441: the HTTP/2 driver routes an
//! extended `CONNECT` with `:protocol: websocket` as the `GET` it stands
//! for (with `:protocol` first among the fields, which is how the
//! extractor tells it from a plain `GET`), the extractor checks the
//! version (no key: `400` for another version, since `426` means nothing
//! without `Upgrade`), the answer is `200` with the agreed subprotocol and
//! extension, and the socket reads and writes the stream's DATA frames.
//! Everything below holds there too: the stream's flow-control window is
//! given back only as the socket reads (backpressure), writes wait for
//! window capacity, shutdown sends close `1001` then `END_STREAM`, and a
//! client's `RST_STREAM` ends the handler at once.
//!
//! # Own codec rather than tungstenite
//! The framing is this crate's, a few hundred lines over RFC 6455, for
//! two reasons. tungstenite refuses every frame with
//! RSV1 set and has no extension hook (its permessage-deflate pull request,
//! #426, is still open), so permessage-deflate cannot be built on it. Its
//! protocol object reads through a blocking `Read`, which tokio-tungstenite
//! bridges with a waker shim around every call, while this socket reads
//! the worker's transport directly and decodes in its own buffer. The
//! frame layer is small and pure (`frame.rs`, `read.rs`), unit-tested here
//! and conformance-tested over sockets by `peregrine-lab verify`.
//!
//! # What is bounded
//! Everything a client controls: frame and message size
//! ([`WebSocketConfig::max_frame_bytes`], `max_message_bytes`, checked at
//! the frame header before the payload arrives, and on inflated size while
//! inflating); the send queue ([`WebSocketConfig::write_buffer_bytes`]:
//! [`WebSocket::feed`] waits for the client to take data rather than grow
//! it); the read buffer (fixed; a large message is assembled in its own
//! buffer, which goes to the handler with the message, so nothing stays
//! large after it); time ([`WebSocketConfig::idle_timeout`],
//! `ping_interval` / `ping_timeout`, the server's I/O timeout and minimum
//! response rate on writes, and its minimum request-body rate,
//! [`Config::min_request_body_rate`](crate::Config::min_request_body_rate),
//! on a message part-way in: a client trickling a frame is cut with close
//! `1008`, though every byte it sends is input to the keepalive); and
//! shutdown, which sends close `1001` to every socket waiting in
//! [`WebSocket::recv`].

mod deflate;
mod frame;
mod handshake;
mod read;
mod socket;
mod upgrade;

use std::fmt;
use std::time::Duration;

pub use socket::WebSocket;
pub use upgrade::WebSocketUpgrade;

/// A WebSocket message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// UTF-8 text (validated).
    Text(String),
    /// Binary data.
    Binary(Vec<u8>),
    /// A ping; [`WebSocket::recv`] yields it only when automatic pongs are
    /// off ([`WebSocketConfig::auto_pong`]). At most 125 bytes.
    Ping(Vec<u8>),
    /// A pong. At most 125 bytes.
    Pong(Vec<u8>),
    /// The peer's close frame (already answered), or one to send.
    Close(Option<CloseFrame>),
}

impl Message {
    /// A text message.
    pub fn text(text: impl Into<String>) -> Message {
        Message::Text(text.into())
    }

    /// A binary message.
    pub fn binary(data: impl Into<Vec<u8>>) -> Message {
        Message::Binary(data.into())
    }

    /// The payload bytes (a close frame's code and reason are left out).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Message::Text(t) => t.as_bytes(),
            Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => b,
            Message::Close(_) => &[],
        }
    }
}

impl From<String> for Message {
    fn from(text: String) -> Message {
        Message::Text(text)
    }
}

impl From<&str> for Message {
    fn from(text: &str) -> Message {
        Message::Text(text.to_owned())
    }
}

impl From<Vec<u8>> for Message {
    fn from(data: Vec<u8>) -> Message {
        Message::Binary(data)
    }
}

/// A close frame's status code (RFC 6455 §7.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CloseCode(pub u16);

impl CloseCode {
    /// `1000`: done.
    pub const NORMAL: CloseCode = CloseCode(1000);
    /// `1001`: the server is going away (shutdown, idle timeout).
    pub const GOING_AWAY: CloseCode = CloseCode(1001);
    /// `1002`: the peer broke the protocol.
    pub const PROTOCOL: CloseCode = CloseCode(1002);
    /// `1003`: a kind of data the endpoint does not accept.
    pub const UNSUPPORTED: CloseCode = CloseCode(1003);
    /// `1007`: data inconsistent with its type (text that is not UTF-8).
    pub const INVALID_DATA: CloseCode = CloseCode(1007);
    /// `1008`: a policy violation.
    pub const POLICY: CloseCode = CloseCode(1008);
    /// `1009`: a frame or message over the size limit.
    pub const TOO_BIG: CloseCode = CloseCode(1009);
    /// `1011`: the server failed (also sent when pings go unanswered).
    pub const INTERNAL: CloseCode = CloseCode(1011);

    /// Whether a peer may send this code in a close frame: the codes RFC
    /// 6455 and the IANA registry define for use on the wire, and the
    /// ranges for libraries (3000-3999) and applications (4000-4999).
    /// `1005`, `1006` and `1015` only ever describe a close locally.
    pub fn is_allowed_on_wire(self) -> bool {
        matches!(self.0, 1000..=1003 | 1007..=1014 | 3000..=4999)
    }
}

impl fmt::Display for CloseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A close frame's code and reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloseFrame {
    /// The status code.
    pub code: CloseCode,
    /// Why, in at most 123 bytes of UTF-8.
    pub reason: String,
}

/// Why a socket operation failed.
#[derive(Debug)]
pub enum WsError {
    /// The peer broke the protocol; the socket sent a close frame with
    /// `code` and is closed.
    Protocol {
        /// The close code sent.
        code: CloseCode,
        /// What was wrong.
        reason: &'static str,
    },
    /// The socket is closed (by either side): nothing more can be sent.
    Closed,
    /// The message cannot be sent as it is (a ping over 125 bytes).
    Invalid(&'static str),
    /// The transport failed.
    Io(std::io::Error),
}

impl fmt::Display for WsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WsError::Protocol { code, reason } => write!(f, "WebSocket protocol error ({code}): {reason}"),
            WsError::Closed => f.write_str("WebSocket closed"),
            WsError::Invalid(why) => write!(f, "invalid WebSocket message: {why}"),
            WsError::Io(e) => write!(f, "WebSocket transport failed: {e}"),
        }
    }
}

impl std::error::Error for WsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WsError::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Limits, timeouts and options of a WebSocket, set per route with
/// [`WebSocketUpgrade::config`].
#[derive(Clone, Debug)]
pub struct WebSocketConfig {
    /// Largest frame payload accepted; larger closes with `1009`.
    pub max_frame_bytes: usize,
    /// Largest message accepted (all fragments; after inflating);
    /// larger closes with `1009`.
    pub max_message_bytes: usize,
    /// Bytes read from the socket at most at once (the fixed read buffer).
    pub read_buffer_bytes: usize,
    /// Queued output beyond which [`WebSocket::feed`] waits for the client
    /// to take some (backpressure instead of growth).
    pub write_buffer_bytes: usize,
    /// Answer pings with pongs without the handler seeing them.
    pub auto_pong: bool,
    /// Close with `1001` after this long without a data message from the
    /// client (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// Send a ping after this long without input from the client (`None`:
    /// never).
    pub ping_interval: Option<Duration>,
    /// After such a ping, close with `1011` if nothing arrives for this long.
    pub ping_timeout: Duration,
    /// How long a closing socket waits for the client's close frame.
    pub close_timeout: Duration,
    /// Accept permessage-deflate when offered (RFC 7692). Each compressed
    /// connection costs its inflate state (about 40 KiB) and, once it sends
    /// a compressed message, its deflate state (about 300 KiB).
    pub permessage_deflate: bool,
    /// Messages shorter than this are sent uncompressed even with
    /// permessage-deflate on (compressing them costs more than it saves).
    pub compress_min_bytes: usize,
    /// Subprotocols this route speaks, in order of preference; the first
    /// the client also offers is chosen.
    pub protocols: Vec<String>,
}

impl Default for WebSocketConfig {
    fn default() -> WebSocketConfig {
        WebSocketConfig {
            max_frame_bytes: 16 << 20,
            max_message_bytes: 64 << 20,
            read_buffer_bytes: 4096,
            write_buffer_bytes: 256 << 10,
            auto_pong: true,
            idle_timeout: None,
            ping_interval: Some(Duration::from_secs(30)),
            ping_timeout: Duration::from_secs(30),
            close_timeout: Duration::from_secs(2),
            permessage_deflate: false,
            compress_min_bytes: 64,
            protocols: Vec::new(),
        }
    }
}

/// The reader over arbitrary bytes, for the fuzz target (see
/// [`crate::fuzzing::ws_read`]).
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_read(input: &[u8], step: usize, deflate: bool) -> crate::fuzzing::WsDecoded {
    let agreed = deflate::Agreed { server_no_context_takeover: false, client_no_context_takeover: false };
    let mut reader = read::Reader::new(64 << 10, 256 << 10, deflate.then(|| deflate::Inflater::new(agreed)));
    let mut events = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut fed = 0;
    loop {
        match reader.decode(&mut buf) {
            Err(e) => return crate::fuzzing::WsDecoded { events, error: Some(e.code.0) },
            Ok((n, event)) => {
                buf.drain(..n);
                if let Some(event) = event {
                    events.push(format!("{event:?}"));
                } else if n == 0 {
                    if fed == input.len() {
                        return crate::fuzzing::WsDecoded { events, error: None };
                    }
                    let end = (fed + step.max(1)).min(input.len());
                    buf.extend_from_slice(&input[fed..end]);
                    fed = end;
                }
            }
        }
    }
}
