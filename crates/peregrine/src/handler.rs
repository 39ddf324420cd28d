//! Handler traits: how ordinary functions become endpoints.
//!
//! A handler is any `Fn` whose arguments all implement
//! [`FromRequest`] and whose result implements
//! [`IntoResponse`]. Three flavours exist because they run differently:
//! - [`Handler`]: synchronous; runs inline and writes straight into the
//!   output buffer (no allocation, no task switch). For CPU work.
//! - [`AsyncHandler`]: returns a future; the connection awaits it while the
//!   worker serves other connections. For I/O such as database queries.
//! - [`StreamHandler`]: async, and takes the request [`Body`] as its last
//!   argument to read it incrementally instead of having it buffered.
//!
//! A synchronous handler may also take `&Request` as its only argument for
//! borrowed access to everything (headers, body) without copying.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use futures_util::FutureExt;

use crate::body::Body;
use crate::extract::FromRequest;
use crate::request::Request;
use crate::response::{IntoResponse, Response, ResponseWriter};

/// The boxed future an async endpoint produces.
///
/// A handler's future becomes one with `FutureExt::map`, not an `async`
/// block that awaits it: such a block keeps the captured future and the
/// awaited one in separate parts of its state, twice the size. For
/// peregrine-tfb's `/db` the box was 1,336 bytes, above mimalloc's small
/// sizes (1 KiB), so every request took its slower allocation path; now
/// 672 bytes, and `/db` costs 8,814 user-space instructions a request
/// rather than 9,192 (callgrind). A test below checks the box's size.
pub type ResponseFuture = Pin<Box<dyn Future<Output = Response>>>;

/// A continuation that receives the streamed body once the request's
/// borrowed parts have been released.
pub type BodyConsumer = Box<dyn FnOnce(Body) -> ResponseFuture>;

/// A synchronous handler; see the [module docs](self).
pub trait Handler<S, Args>: 'static {
    /// Runs the handler and writes its response.
    fn call(&self, req: &Request<'_>, state: &S, w: &mut ResponseWriter<'_>);
}

/// An asynchronous handler; see the [module docs](self).
pub trait AsyncHandler<S, Args>: 'static {
    /// Extracts the arguments and starts the handler.
    fn call(&self, req: &Request<'_>, state: &S) -> ResponseFuture;
}

/// An asynchronous handler reading a streamed body; see the [module docs](self).
pub trait StreamHandler<S, Args>: 'static {
    /// Extracts the arguments; the result is called with the body.
    fn prepare(self: Rc<Self>, req: &Request<'_>, state: &S) -> Result<BodyConsumer, Response>;
}

/// Marker for handlers taking `&Request` directly.
#[derive(Debug)]
pub struct RawRequest;

impl<S, F, R> Handler<S, RawRequest> for F
where
    F: for<'a, 'r> Fn(&'a Request<'r>) -> R + 'static,
    R: IntoResponse,
{
    #[inline]
    fn call(&self, req: &Request<'_>, _: &S, w: &mut ResponseWriter<'_>) {
        self(req).write_to(w);
    }
}

macro_rules! handlers {
    ($($t:ident),*) => {
        impl<S, F, R, $($t,)*> Handler<S, ($($t,)*)> for F
        where
            F: Fn($($t),*) -> R + 'static,
            R: IntoResponse,
            $($t: FromRequest<S>,)*
        {
            #[inline]
            #[allow(non_snake_case, unused_variables)]
            fn call(&self, req: &Request<'_>, state: &S, w: &mut ResponseWriter<'_>) {
                $(
                    let $t = match $t::from_request(req, state) {
                        Ok(v) => v,
                        Err(e) => return e.write_to(w),
                    };
                )*
                self($($t),*).write_to(w);
            }
        }

        impl<S, F, Fut, $($t,)*> AsyncHandler<S, ($($t,)*)> for F
        where
            F: Fn($($t),*) -> Fut + 'static,
            Fut: Future + 'static,
            Fut::Output: IntoResponse,
            $($t: FromRequest<S>,)*
        {
            #[allow(non_snake_case, unused_variables)]
            fn call(&self, req: &Request<'_>, state: &S) -> ResponseFuture {
                $(
                    let $t = match $t::from_request(req, state) {
                        Ok(v) => v,
                        Err(e) => return Box::pin(std::future::ready(e.into_response())),
                    };
                )*
                Box::pin(self($($t),*).map(IntoResponse::into_response))
            }
        }

        impl<S, F, Fut, $($t,)*> StreamHandler<S, ($($t,)*)> for F
        where
            F: Fn($($t,)* Body) -> Fut + 'static,
            Fut: Future + 'static,
            Fut::Output: IntoResponse,
            $($t: FromRequest<S> + 'static,)*
        {
            #[allow(non_snake_case, unused_variables)]
            fn prepare(self: Rc<Self>, req: &Request<'_>, state: &S) -> Result<BodyConsumer, Response> {
                $(
                    let $t = $t::from_request(req, state).map_err(IntoResponse::into_response)?;
                )*
                Ok(Box::new(move |body: Body| -> ResponseFuture {
                    Box::pin(self($($t,)* body).map(IntoResponse::into_response))
                }))
            }
        }
    };
}

handlers!();
handlers!(T1);
handlers!(T1, T2);
handlers!(T1, T2, T3);
handlers!(T1, T2, T3, T4);
handlers!(T1, T2, T3, T4, T5);
handlers!(T1, T2, T3, T4, T5, T6);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::OwnedRequest;

    /// A handler whose future holds 600 bytes across an await.
    async fn holds_600_bytes() -> &'static str {
        let held = [7u8; 600];
        std::future::ready(()).await;
        if held[599] == 7 {
            "held"
        } else {
            "lost"
        }
    }

    /// The box an async endpoint makes holds its handler's future once:
    /// an `async` block awaiting it held it twice (1,336 bytes for
    /// peregrine-tfb's `/db`, past mimalloc's small sizes).
    #[test]
    fn an_async_handlers_box_holds_its_future_once() {
        let own = std::mem::size_of_val(&holds_600_bytes());
        assert!(own >= 600, "the handler's own future is {own} bytes");
        let req = OwnedRequest::for_test(crate::http::Method::Get, "GET", "/", Vec::new(), Vec::new());
        let boxed = req.with_view(None, |view| AsyncHandler::<(), ()>::call(&holds_600_bytes, view, &()));
        let boxed_size = std::mem::size_of_val(&*boxed);
        assert!(boxed_size < own + 64, "the box holds {boxed_size} bytes for a {own}-byte future");
    }
}
