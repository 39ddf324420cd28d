//! Bearer and basic authentication helpers: the credentials are parsed
//! here, checked by the application's function, and a rejection carries the
//! `WWW-Authenticate` challenge RFC 9110 §11.6.1 requires with a `401`.

use std::rc::Rc;

use base64::Engine;

use super::{Middleware, Next};
use crate::handler::ResponseFuture;
use crate::http::StatusCode;
use crate::request::OwnedRequest;
use crate::response::Response;

/// See [`bearer_auth`].
pub struct BearerAuth<F> {
    realm: Rc<str>,
    check: F,
}

/// See [`basic_auth`].
pub struct BasicAuth<F> {
    realm: Rc<str>,
    check: F,
}

impl<F> std::fmt::Debug for BearerAuth<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerAuth").field("realm", &self.realm).finish_non_exhaustive()
    }
}

impl<F> std::fmt::Debug for BasicAuth<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth").field("realm", &self.realm).finish_non_exhaustive()
    }
}

/// `Authorization: Bearer TOKEN`. `check` gets the token and returns what
/// it identifies (a user, say), which handlers receive as an
/// [`Extension`](crate::Extension); `None` refuses the request. Missing
/// credentials get `401` with `WWW-Authenticate: Bearer realm="REALM"`,
/// refused ones the same with `error="invalid_token"` (RFC 6750 §3).
pub fn bearer_auth<F, T>(realm: &str, check: F) -> BearerAuth<F>
where
    F: Fn(&str) -> Option<T> + 'static,
    T: 'static,
{
    BearerAuth { realm: quote_safe(realm), check }
}

/// `Authorization: Basic base64(user:password)`. `check` gets the user and
/// password; see [`bearer_auth`]. Rejections get `401` with
/// `WWW-Authenticate: Basic realm="REALM", charset="UTF-8"` (RFC 7617).
pub fn basic_auth<F, T>(realm: &str, check: F) -> BasicAuth<F>
where
    F: Fn(&str, &str) -> Option<T> + 'static,
    T: 'static,
{
    BasicAuth { realm: quote_safe(realm), check }
}

/// The realm with characters that would break its quoted string removed.
fn quote_safe(realm: &str) -> Rc<str> {
    realm.chars().filter(|c| *c != '"' && *c != '\\' && !c.is_control()).collect::<String>().into()
}

/// The credentials after `scheme ` in the `Authorization` header.
fn credentials<'a>(req: &'a OwnedRequest, scheme: &str) -> Option<&'a str> {
    let value = req.header_str("authorization")?.trim();
    let (given, rest) = value.split_once(' ')?;
    given.eq_ignore_ascii_case(scheme).then(|| rest.trim())
}

fn challenge(value: String) -> ResponseFuture {
    let refused =
        Response::text("unauthorized\n").status(StatusCode::UNAUTHORIZED).header("WWW-Authenticate", value);
    Box::pin(std::future::ready(refused))
}

impl<F, T> Middleware for BearerAuth<F>
where
    F: Fn(&str) -> Option<T> + 'static,
    T: 'static,
{
    fn call(&self, mut req: OwnedRequest, next: Next) -> ResponseFuture {
        let Some(token) = credentials(&req, "Bearer") else {
            return challenge(format!("Bearer realm=\"{}\"", self.realm));
        };
        match (self.check)(token) {
            Some(identity) => {
                req.extensions_mut().insert(identity);
                Box::pin(next.run(req))
            }
            None => challenge(format!("Bearer realm=\"{}\", error=\"invalid_token\"", self.realm)),
        }
    }
}

impl<F, T> Middleware for BasicAuth<F>
where
    F: Fn(&str, &str) -> Option<T> + 'static,
    T: 'static,
{
    fn call(&self, mut req: OwnedRequest, next: Next) -> ResponseFuture {
        let refuse = || challenge(format!("Basic realm=\"{}\", charset=\"UTF-8\"", self.realm));
        let Some(encoded) = credentials(&req, "Basic") else { return refuse() };
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded) else { return refuse() };
        let Ok(decoded) = String::from_utf8(decoded) else { return refuse() };
        let Some((user, password)) = decoded.split_once(':') else { return refuse() };
        match (self.check)(user, password) {
            Some(identity) => {
                req.extensions_mut().insert(identity);
                Box::pin(next.run(req))
            }
            None => refuse(),
        }
    }
}
