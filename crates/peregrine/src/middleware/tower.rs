//! Running a tower layer (tower-http's, or any other) as middleware.
//!
//! The layer wraps a service that continues the chain; requests and
//! responses cross as `http` crate types with `Full<Bytes>` bodies, and
//! whatever body type the layer's service answers with is read whole before
//! the response goes on. What earlier middleware attached to the request
//! (its extensions) is carried past the layer.

use std::cell::RefCell;
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tower_service::Service as _;

use super::{Middleware, Next};
use crate::extensions::Extensions;
use crate::handler::ResponseFuture;
use crate::request::OwnedRequest;
use crate::response::{IntoResponse, Response};

/// See [`tower`].
#[derive(Clone)]
pub struct TowerLayer<L>(L);

impl<L> fmt::Debug for TowerLayer<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TowerLayer")
    }
}

/// Middleware from a tower layer, for example tower-http's
/// `SetResponseHeaderLayer`. The layer's service must not need its futures
/// to be `Send` (peregrine's are not: each worker is one thread).
pub fn tower<L>(layer: L) -> TowerLayer<L> {
    TowerLayer(layer)
}

/// The service a tower layer wraps: the rest of the chain, once.
pub struct NextService {
    next: Rc<RefCell<Option<(Next, Extensions)>>>,
    peer: Option<std::net::SocketAddr>,
}

impl fmt::Debug for NextService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NextService")
    }
}

impl tower_service::Service<http::Request<Full<Bytes>>> for NextService {
    type Response = http::Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>>>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Full<Bytes>>) -> Self::Future {
        let taken = self.next.borrow_mut().take();
        let peer = self.peer;
        Box::pin(async move {
            let Some((next, extensions)) = taken else {
                // A layer that calls its service twice: the chain runs once.
                let refused =
                    Response::text("internal error\n").status(crate::StatusCode::INTERNAL_SERVER_ERROR);
                return Ok(to_http(refused));
            };
            let (parts, body) = req.into_parts();
            let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            let owned = OwnedRequest::from_http(parts, body.to_vec(), extensions, peer);
            Ok(to_http(next.run(owned).await))
        })
    }
}

fn to_http(response: Response) -> http::Response<Full<Bytes>> {
    response.into_http().map(|body| Full::new(Bytes::from(body)))
}

impl<L, B> Middleware for TowerLayer<L>
where
    L: tower_layer::Layer<NextService> + 'static,
    L::Service: tower_service::Service<http::Request<Full<Bytes>>, Response = http::Response<B>> + 'static,
    <L::Service as tower_service::Service<http::Request<Full<Bytes>>>>::Error: fmt::Display,
    <L::Service as tower_service::Service<http::Request<Full<Bytes>>>>::Future: 'static,
    B: http_body::Body + 'static,
    B::Data: 'static,
    B::Error: fmt::Display,
{
    fn call(&self, mut req: OwnedRequest, next: Next) -> ResponseFuture {
        let extensions = std::mem::take(req.extensions_mut());
        let peer = req.peer_addr();
        let mut service =
            self.0.layer(NextService { next: Rc::new(RefCell::new(Some((next, extensions)))), peer });
        let request = req.into_http().map(|body| Full::new(Bytes::from(body)));
        Box::pin(async move {
            if let Err(e) = std::future::poll_fn(|cx| service.poll_ready(cx)).await {
                tracing::error!(error = %e, "tower service not ready");
                return Response::text("service unavailable\n")
                    .status(crate::StatusCode::SERVICE_UNAVAILABLE);
            }
            match service.call(request).await {
                Ok(response) => {
                    let (parts, body) = response.into_parts();
                    match body.collect().await {
                        Ok(collected) => {
                            http::Response::from_parts(parts, collected.to_bytes().to_vec()).into_response()
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "tower response body failed");
                            Response::text("internal error\n")
                                .status(crate::StatusCode::INTERNAL_SERVER_ERROR)
                        }
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "tower service failed");
                    Response::text("internal error\n").status(crate::StatusCode::INTERNAL_SERVER_ERROR)
                }
            }
        })
    }
}
