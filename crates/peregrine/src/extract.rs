//! Typed extraction: turning a [`Request`] into handler arguments.
//!
//! Every extractor produces an owned value, so async handlers can hold it
//! across `.await` while the request itself stays borrowed from the read
//! buffer and is never copied.

use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::http::Method;
use crate::request::{percent_decode, Request};
use crate::response::Json;

/// Builds a handler argument from a request and the router's state.
pub trait FromRequest<S>: Sized {
    /// Extracts the value, or rejects the request with an [`Error`].
    fn from_request(req: &Request<'_>, state: &S) -> Result<Self, Error>;
}

/// A clone of the router's state (typically a struct of `Rc`s: cheap).
#[derive(Clone, Copy, Debug, Default)]
pub struct State<S>(pub S);

impl<S: Clone> FromRequest<S> for State<S> {
    fn from_request(_: &Request<'_>, state: &S) -> Result<Self, Error> {
        Ok(State(state.clone()))
    }
}

/// Path parameters (`/json/{count}`), parsed. `T` is one value for a
/// one-parameter route, or a tuple in pattern order for several.
#[derive(Clone, Copy, Debug, Default)]
pub struct Path<T>(pub T);

/// A type that can be parsed from one percent-decoded path segment.
pub trait FromParam: Sized {
    /// Parses the segment.
    fn from_param(value: &str) -> Result<Self, Error>;
}

macro_rules! from_param_via_fromstr {
    ($($t:ty),*) => {$(
        impl FromParam for $t {
            fn from_param(value: &str) -> Result<Self, Error> {
                value.parse().map_err(|_| {
                    Error::bad_request(format!(
                        "path parameter {value:?} is not a valid {}",
                        stringify!($t)
                    ))
                })
            }
        }
    )*};
}
from_param_via_fromstr!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64, bool, String);

/// What [`Path`] can hold: one [`FromParam`] value or a tuple of them.
pub trait FromParams: Sized {
    /// Parses from the route's parameters, in pattern order.
    fn from_params(values: &[&str]) -> Result<Self, Error>;
}

fn nth_param<T: FromParam>(values: &[&str], i: usize) -> Result<T, Error> {
    let raw = values
        .get(i)
        .ok_or_else(|| Error::internal("route has fewer parameters than the handler expects"))?;
    T::from_param(&percent_decode(raw, false))
}

macro_rules! from_params_single {
    ($($t:ty),*) => {$(
        impl FromParams for $t {
            fn from_params(values: &[&str]) -> Result<Self, Error> {
                nth_param(values, 0)
            }
        }
    )*};
}
from_params_single!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64, bool, String);

macro_rules! from_params_tuple {
    ($($t:ident $i:tt),*) => {
        impl<$($t: FromParam),*> FromParams for ($($t,)*) {
            fn from_params(values: &[&str]) -> Result<Self, Error> {
                Ok(($(nth_param::<$t>(values, $i)?,)*))
            }
        }
    };
}
from_params_tuple!(A 0);
from_params_tuple!(A 0, B 1);
from_params_tuple!(A 0, B 1, C 2);
from_params_tuple!(A 0, B 1, C 2, D 3);

impl<S, T: FromParams> FromRequest<S> for Path<T> {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        let (values, n) = req.path_params();
        T::from_params(&values[..n]).map(Path)
    }
}

/// The query string deserialized with serde (`application/x-www-form-urlencoded`
/// rules). A missing query deserializes from the empty string, so `Option`
/// fields and `#[serde(default)]` express optional parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Query<T>(pub T);

impl<S, T: DeserializeOwned> FromRequest<S> for Query<T> {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        serde_urlencoded::from_str(req.query_string().unwrap_or(""))
            .map(Query)
            .map_err(|e| Error::bad_request(format!("invalid query string: {e}")))
    }
}

/// The body deserialized from JSON.
impl<S, T: DeserializeOwned> FromRequest<S> for Json<T> {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        serde_json::from_slice(req.body())
            .map(Json)
            .map_err(|e| Error::bad_request(format!("invalid JSON body: {e}")))
    }
}

/// The body as UTF-8 text.
impl<S> FromRequest<S> for String {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        std::str::from_utf8(req.body())
            .map(str::to_owned)
            .map_err(|_| Error::bad_request("request body is not valid UTF-8"))
    }
}

/// The body bytes.
impl<S> FromRequest<S> for Vec<u8> {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        Ok(req.body().to_vec())
    }
}

/// The request method.
impl<S> FromRequest<S> for Method {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        Ok(req.method())
    }
}

/// A value middleware attached to the request
/// ([`OwnedRequest::extensions_mut`](crate::OwnedRequest::extensions_mut)),
/// cloned out. A route whose middleware did not attach one answers `500`:
/// the application is wired wrongly, not the client.
#[derive(Clone, Copy, Debug, Default)]
pub struct Extension<T>(pub T);

impl<S, T: Clone + 'static> FromRequest<S> for Extension<T> {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        req.extensions().and_then(|e| e.get::<T>()).cloned().map(Extension).ok_or_else(|| {
            tracing::error!(extension = std::any::type_name::<T>(), "no middleware attached this extension");
            Error::internal("missing request extension")
        })
    }
}

/// The client's socket address. Rejects with `500` where the transport has
/// none (which no TCP listener produces).
#[derive(Clone, Copy, Debug)]
pub struct ClientAddr(pub std::net::SocketAddr);

impl<S> FromRequest<S> for ClientAddr {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        req.peer_addr().map(ClientAddr).ok_or_else(|| Error::internal("no client address"))
    }
}
