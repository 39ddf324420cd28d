//! Extended `CONNECT` (RFC 8441): a WebSocket bootstrapped on one HTTP/2
//! stream, served by the same route and handler as over HTTP/1.1.
//!
//! The server announces `SETTINGS_ENABLE_CONNECT_PROTOCOL` (`core.rs`), so
//! a `CONNECT` with a `:protocol` pseudo-header (and `:scheme`, `:path`,
//! `:authority`) is a well-formed request, and comes here:
//! - `:protocol` other than `websocket`: `501` (no such protocol is
//!   implemented here; the request itself is well formed).
//! - `websocket`: routed as the `GET` it stands for (§5), with no body
//!   read (the stream's DATA frames are the tunnel). Handlers, extractors
//!   and middleware see method `GET`, version HTTP/2 and, first among the
//!   fields, `:protocol: websocket`, which is how the WebSocket extractor
//!   tells it from a plain `GET`: a field name with a colon cannot arrive
//!   any other way (HTTP/1.1's parser and `head.rs` refuse it, and middleware
//!   can only set token names).
//!
//! The answer:
//! - a protocol switch (the extractor accepted): `200` with the handler's
//!   headers (`Sec-WebSocket-Protocol`, `Sec-WebSocket-Extensions`), the
//!   stream left open, and the handler's continuation run on this task
//!   over the stream ([`Tunnel`]). A client's `RST_STREAM` drops the
//!   continuation at once, even one that is not reading;
//! - any other `2xx`: `400`. A `2xx` to `CONNECT` tells the client its
//!   tunnel is open (RFC 9110 §9.3.6), which a route that answered it as
//!   an ordinary `GET` cannot honour;
//! - anything else (`401`, `404`, `405`, the extractor's `400` or `426`)
//!   as the route answered it.
//!
//! A plain `CONNECT` (no `:protocol`) never comes here: it takes the
//! ordinary path and is refused as it always was.

use std::cell::RefCell;
use std::future::poll_fn;
use std::pin::pin;
use std::rc::Rc;

use futures_util::future::select;

use super::handle::{RecvStream, SendResponse};
use super::head::RequestHead;
use super::stream::until_reset;
use super::tunnel::Tunnel;
use super::{respond, Shared};
use crate::http::uri;
use crate::http::Version;
use crate::pipeline;
use crate::request::OwnedRequest;
use crate::response::canned;
use crate::response::Response;
use crate::upgrade::{OnUpgrade, Upgraded, UpgradedIo};
use crate::worker::timer::ConnTimer;

/// The one protocol an extended `CONNECT` can ask for here.
const WEBSOCKET: &str = "websocket";

/// Serves the extended `CONNECT` that opened this stream.
pub(super) async fn serve<S: 'static>(
    head: RequestHead,
    recv: RecvStream,
    mut respond: SendResponse,
    shared: Rc<Shared<S>>,
) {
    let activity = &shared.activity;
    let _open = activity.open_stream();
    let protocol = head.protocol().unwrap_or("");
    if !protocol.eq_ignore_ascii_case(WEBSOCKET) {
        drop(recv);
        let refusal = Response::canned(canned::UNKNOWN_CONNECT_PROTOCOL);
        respond::send_at_once(&mut respond, refusal, false, &shared.stamp());
        return;
    }
    let req = as_get(&head, protocol, shared.peer);
    let response = if let Some(why) = uri::path_error(req.path().as_bytes()) {
        Some(Response::canned(canned::Canned::bad_request(why)))
    } else {
        until_reset(pipeline::dispatch_owned(Rc::clone(&shared.router), req), &mut respond, activity).await
    };
    // `None`: the client reset the stream.
    let Some(mut response) = response else { return };
    match response.take_upgrade() {
        Some(on_upgrade) => tunnel(response, on_upgrade, recv, respond, &shared).await,
        None => {
            // Nobody reads the stream: dropping it refuses the rest once
            // the answer is sent.
            drop(recv);
            if response.status_code().as_u16() / 100 == 2 {
                response = Response::canned(canned::NOT_A_TUNNEL);
            }
            respond::send(&mut respond, response, false, &shared.stamp(), activity).await;
        }
    }
}

/// Answers `200` and runs the upgraded protocol on the stream until it
/// ends or the client resets the stream.
async fn tunnel<S: 'static>(
    response: Response,
    on_upgrade: OnUpgrade,
    recv: RecvStream,
    mut respond: SendResponse,
    shared: &Rc<Shared<S>>,
) {
    let Some(send) = respond::send_tunnel_head(&mut respond, &response, &shared.stamp()) else {
        return;
    };
    let send = Rc::new(RefCell::new(send));
    let activity = &shared.activity;
    // Application code runs on the stream from now on; the tunnel marks
    // its waits for window capacity.
    let _busy = activity.busy();
    let upgraded = Upgraded {
        io: UpgradedIo::H2(Box::new(Tunnel::new(recv, Rc::clone(&send), Rc::clone(activity)))),
        read_ahead: Vec::new(),
        peer: shared.peer,
        worker: Rc::clone(&shared.worker),
        // The connection's deadline follows all its streams (`Activity`);
        // what the upgraded protocol arms here is read by no sweep.
        timer: Rc::new(ConnTimer::new(-1)),
    };
    let run = pin!(on_upgrade.run(upgraded, ()));
    let reset = pin!(poll_fn(|cx| match send.try_borrow_mut() {
        Ok(mut send) => send.poll_reset(cx).map(|_| ()),
        // The tunnel holds it only inside its own polls; look next time.
        Err(_) => std::task::Poll::Pending,
    }));
    // Either way the continuation ends here: on a reset it is dropped
    // (its socket's goodbye fails quietly on the closed stream).
    let _ = select(run, reset).await;
}

/// The `GET` an extended `CONNECT` stands for, with its `:protocol` first
/// among the fields.
fn as_get(head: &RequestHead, protocol: &str, peer: Option<std::net::SocketAddr>) -> OwnedRequest {
    let headers = std::iter::once((":protocol", protocol.as_bytes()))
        .chain(head.fields())
        .map(|(name, value)| (name.into(), value.into()))
        .collect();
    OwnedRequest::from_parts(peer, "GET", head.path(), head.query(), Version::Http2, headers)
}
