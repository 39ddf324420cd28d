//! Typed extraction: turning a [`Request`] into handler arguments.
//!
//! Every extractor produces an owned value, so async handlers can hold it
//! across `.await` while the request itself stays borrowed from the read
//! buffer and is never copied.

use serde::de::DeserializeOwned;

use crate::error::Error;
use crate::http::{Method, StatusCode};
use crate::request::{percent_decode, OwnedRequest, Request};
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
///
/// The rule for rejections: `415` unless the `Content-Type` is
/// `application/json` or another `+json` type; `400` for a body that is not
/// JSON at all (a syntax error, or cut short); `422` for JSON of the wrong
/// shape or types (a missing field, a string where a number belongs).
impl<S, T: DeserializeOwned> FromRequest<S> for Json<T> {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        if !is_json(req.header_str("content-type")) {
            return Err(Error::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "expected a body with Content-Type: application/json",
            ));
        }
        serde_json::from_slice(req.body()).map(Json).map_err(|e| {
            use serde_json::error::Category;
            match e.classify() {
                Category::Data => {
                    Error::new(StatusCode::UNPROCESSABLE_ENTITY, format!("invalid JSON body: {e}"))
                }
                Category::Syntax | Category::Eof | Category::Io => {
                    Error::bad_request(format!("malformed JSON body: {e}"))
                }
            }
        })
    }
}

/// Whether a `Content-Type` value names JSON (`application/json`,
/// `application/problem+json`, any parameters).
fn is_json(content_type: Option<&str>) -> bool {
    let Some(value) = content_type else { return false };
    let essence = value.split(';').next().unwrap_or("").trim();
    let Some((kind, sub)) = essence.split_once('/') else { return false };
    kind.eq_ignore_ascii_case("application")
        && (sub.eq_ignore_ascii_case("json")
            || sub.len() > 5 && sub[sub.len() - 5..].eq_ignore_ascii_case("+json"))
}

/// A body of `application/x-www-form-urlencoded` fields, deserialized with
/// serde. `415` for another `Content-Type`, `422` for fields that do not fit
/// `T`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Form<T>(pub T);

impl<S, T: DeserializeOwned> FromRequest<S> for Form<T> {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        let essence = req.header_str("content-type").and_then(|v| v.split(';').next()).map(str::trim);
        if !essence.is_some_and(|e| e.eq_ignore_ascii_case("application/x-www-form-urlencoded")) {
            return Err(Error::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "expected a body with Content-Type: application/x-www-form-urlencoded",
            ));
        }
        serde_urlencoded::from_bytes(req.body())
            .map(Form)
            .map_err(|e| Error::new(StatusCode::UNPROCESSABLE_ENTITY, format!("invalid form body: {e}")))
    }
}

/// Every header, as the `http` crate's [`HeaderMap`](::http::HeaderMap)
/// (copied: for the borrowed form, take `&Request`).
impl<S> FromRequest<S> for ::http::HeaderMap {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        let mut map = ::http::HeaderMap::with_capacity(req.headers.len());
        for (name, value) in req.headers() {
            // The parser admits only token names and visible values, which
            // both types accept; anything else is skipped, not trusted.
            if let (Ok(name), Ok(value)) =
                (::http::HeaderName::from_bytes(name.as_bytes()), ::http::HeaderValue::from_bytes(value))
            {
                map.append(name, value);
            }
        }
        Ok(map)
    }
}

/// A typed header from the `headers` crate (`TypedHeader<ContentType>`,
/// `TypedHeader<UserAgent>`...). `400` when it is missing or malformed; use
/// `Option<TypedHeader<T>>` for an optional one.
#[derive(Clone, Copy, Debug)]
pub struct TypedHeader<T>(pub T);

impl<S, T: headers::Header> FromRequest<S> for TypedHeader<T> {
    fn from_request(req: &Request<'_>, state: &S) -> Result<Self, Error> {
        match Option::<TypedHeader<T>>::from_request(req, state)? {
            Some(found) => Ok(found),
            None => Err(Error::bad_request(format!("missing header {}", T::name()))),
        }
    }
}

impl<S, T: headers::Header> FromRequest<S> for Option<TypedHeader<T>> {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        let name = T::name().as_str();
        let values: Vec<::http::HeaderValue> = req
            .headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .filter_map(|(_, v)| ::http::HeaderValue::from_bytes(v).ok())
            .collect();
        if values.is_empty() {
            return Ok(None);
        }
        T::decode(&mut values.iter())
            .map(|h| Some(TypedHeader(h)))
            .map_err(|_| Error::bad_request(format!("malformed header {name}")))
    }
}

/// The request's cookies (`Cookie` headers), parsed and percent-decoded.
#[derive(Clone, Debug, Default)]
pub struct Cookies(Vec<(String, String)>);

impl Cookies {
    /// The value of the first cookie called `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// Every cookie, in order, as (name, value).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }
}

impl<S> FromRequest<S> for Cookies {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        let mut cookies = Vec::new();
        for (_, value) in req.headers().filter(|(n, _)| n.eq_ignore_ascii_case("cookie")) {
            let Ok(value) = std::str::from_utf8(value) else { continue };
            // Malformed pairs are skipped: one bad cookie from some other
            // site's script must not lock a user out.
            for parsed in cookie::Cookie::split_parse_encoded(value).flatten() {
                cookies.push((parsed.name().to_owned(), parsed.value().to_owned()));
            }
        }
        Ok(Cookies(cookies))
    }
}

/// A copy of the whole request, for async handlers that want all of it
/// (headers, body, what middleware attached) across `.await`s.
impl<S> FromRequest<S> for OwnedRequest {
    fn from_request(req: &Request<'_>, _: &S) -> Result<Self, Error> {
        Ok(OwnedRequest::from_request(req))
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
