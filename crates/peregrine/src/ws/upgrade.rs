//! [`WebSocketUpgrade`]: the extractor that checks a handshake and turns
//! the handler's answer into a `101` that hands the connection to a
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
/// with `Sec-WebSocket-Version: 13` for a plain request or another
/// version, `400` for a malformed one). The handler may still refuse with
/// any response of its own (after checking [`WebSocketUpgrade::origin`],
/// say); to accept, it answers with [`WebSocketUpgrade::on_upgrade`].
#[derive(Debug)]
pub struct WebSocketUpgrade {
    accept: String,
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
            accept: accept_key(key),
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

    /// Accepts: answers `101 Switching Protocols`, and once it is sent runs
    /// `handler` with the socket, on the connection's own task.
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
        }))
        .header("Upgrade", "websocket")
        .header("Sec-WebSocket-Accept", self.accept);
        if let Some(protocol) = protocol {
            response = response.header("Sec-WebSocket-Protocol", protocol);
        }
        if let Some(agreed) = deflate {
            response = response.header("Sec-WebSocket-Extensions", agreed.response_header());
        }
        response
    }
}
