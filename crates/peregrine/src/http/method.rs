//! Protocol-neutral request vocabulary: [`Method`] and [`Version`].
//!
//! Every protocol's codec produces these, and the router and handlers see
//! only these, so no user-visible type depends on how a request arrived.

/// Request method. `Other` keeps the token, in [`Request::method_str`](crate::Request::method_str).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`
    Get,
    /// `HEAD`
    Head,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `DELETE`
    Delete,
    /// `PATCH`
    Patch,
    /// `OPTIONS`
    Options,
    /// `TRACE`
    Trace,
    /// `CONNECT`
    Connect,
    /// Any other (syntactically valid) method token.
    Other,
}

impl Method {
    /// The method for a token as sent on the wire.
    pub(crate) fn from_token(token: &str) -> Method {
        match token {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "PATCH" => Method::Patch,
            "OPTIONS" => Method::Options,
            "TRACE" => Method::Trace,
            "CONNECT" => Method::Connect,
            _ => Method::Other,
        }
    }

    /// The method's name as sent on the wire (`"OTHER"` for [`Method::Other`]).
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Patch => "PATCH",
            Method::Options => "OPTIONS",
            Method::Trace => "TRACE",
            Method::Connect => "CONNECT",
            Method::Other => "OTHER",
        }
    }
}

/// HTTP version of a request. Non-exhaustive: protocols to come add
/// versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Version {
    /// `HTTP/1.0`
    Http10,
    /// `HTTP/1.1`
    Http11,
    /// `HTTP/2`
    Http2,
    /// `HTTP/3`
    Http3,
}

/// From the `http` crate's method; a method this server has no name for
/// becomes [`Method::Other`].
impl From<::http::Method> for Method {
    fn from(m: ::http::Method) -> Method {
        Method::from_token(m.as_str())
    }
}

/// Into the `http` crate's method; fails only for [`Method::Other`], whose
/// token this type does not keep.
impl TryFrom<Method> for ::http::Method {
    type Error = Method;

    fn try_from(m: Method) -> Result<::http::Method, Method> {
        match m {
            Method::Other => Err(m),
            known => ::http::Method::from_bytes(known.as_str().as_bytes()).map_err(|_| known),
        }
    }
}
