//! [`WebSocketUpgrade`]: the extractor that checks a handshake and turns
//! the handler's answer into a protocol switch that hands the connection
//! (HTTP/1.1: `101`) or the stream (HTTP/2, RFC 8441: `200`) to a
//! [`WebSocket`].

use std::future::Future;
use std::rc::Rc;

use super::deflate::{self, Agreed};
use super::handshake::{self, accept_key, choose_protocol};
use super::{WebSocket, WebSocketConfig};
use crate::error::Error;
use crate::extract::FromRequest;
use crate::request::Request;
use crate::response::Response;
use crate::upgrade::OnUpgrade;

/// A checked WebSocket handshake, waiting for the handler's answer.
///
/// As an extractor it refuses a request that is not a version-13
/// WebSocket handshake before the handler runs (`426 Upgrade Required`
/// with `Sec-WebSocket-Version: 13` for a plain request or, on HTTP/1.1,
/// another version, `400` for a malformed one). It accepts an HTTP/1.1
/// `Upgrade: websocket` request and an HTTP/2 extended `CONNECT` with
/// `:protocol: websocket` (RFC 8441) alike, so one handler serves both. The handler may still refuse with
/// any response of its own (after checking [`WebSocketUpgrade::origin`],
/// say); to accept, it answers with [`WebSocketUpgrade::on_upgrade`].
#[derive(Debug)]
pub struct WebSocketUpgrade {
    /// `Sec-WebSocket-Accept` (HTTP/1.1 only: RFC 8441 has no key).
    accept: Option<String>,
    origin: Option<String>,
    offered_protocols: Vec<String>,
    /// The client's permessage-deflate offer the server can accept.
    deflate_offer: Option<Agreed>,
    config: WebSocketConfig,
}

impl<S> FromRequest<S> for WebSocketUpgrade {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        let key = handshake::check(req)?;
        let offered_protocols = handshake::values(req, "sec-websocket-protocol")
            .flat_map(|v| v.split(','))
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect();
        Ok(WebSocketUpgrade {
            accept: key.map(accept_key),
            origin: req.header_str("origin").map(str::to_owned),
            offered_protocols,
            deflate_offer: deflate::negotiate(handshake::values(req, "sec-websocket-extensions")),
            config: WebSocketConfig::default(),
        })
    }
}

impl WebSocketUpgrade {
    /// Sets the socket's limits and options (defaults:
    /// [`WebSocketConfig::default`]).
    pub fn config(mut self, config: WebSocketConfig) -> WebSocketUpgrade {
        self.config = config;
        self
    }

    /// The subprotocols this route speaks, most preferred first; the first
    /// the client also offers is agreed ([`WebSocket::protocol`]). None
    /// agreed: the handshake goes on without one, as RFC 6455 says; a
    /// route that needs one can check [`WebSocketUpgrade::protocol`] and
    /// refuse.
    pub fn protocols<I, P>(mut self, protocols: I) -> WebSocketUpgrade
    where
        I: IntoIterator<Item = P>,
        P: Into<String>,
    {
        self.config.protocols = protocols.into_iter().map(Into::into).collect();
        self
    }

    /// The `Origin` the client (a browser) sent: check it to refuse
    /// cross-site sockets.
    pub fn origin(&self) -> Option<&str> {
        self.origin.as_deref()
    }

    /// The subprotocols the client offered, in its order.
    pub fn offered_protocols(&self) -> impl Iterator<Item = &str> {
        self.offered_protocols.iter().map(String::as_str)
    }

    /// The subprotocol that would be agreed.
    pub fn protocol(&self) -> Option<&str> {
        choose_protocol(&self.offered_protocols, &self.config.protocols).map(String::as_str)
    }

    /// Accepts: answers `101 Switching Protocols` (HTTP/2: `200`), and once
    /// it is sent runs `handler` with the socket, on the connection's own
    /// task (HTTP/2: the stream's).
    pub fn on_upgrade<F, Fut>(self, handler: F) -> Response
    where
        F: FnOnce(WebSocket) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let protocol = self.protocol().map(str::to_owned);
        let deflate = self.deflate_offer.filter(|_| self.config.permessage_deflate);
        let config = Rc::new(self.config);
        let socket_protocol = protocol.clone();
        let mut response = Response::switching_protocols(OnUpgrade::new(move |upgraded| {
            handler(WebSocket::new(upgraded, config, socket_protocol, deflate))
        }));
        if let Some(accept) = self.accept {
            response = response.header("Upgrade", "websocket").header("Sec-WebSocket-Accept", accept);
        }
        if let Some(protocol) = protocol {
            response = response.header("Sec-WebSocket-Protocol", protocol);
        }
        if let Some(agreed) = deflate {
            response = response.header("Sec-WebSocket-Extensions", agreed.response_header());
        }
        response
    }
}
