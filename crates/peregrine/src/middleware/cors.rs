//! CORS (the Fetch standard's cross-origin checks): preflight `OPTIONS`
//! requests are answered here, without routes of their own, and actual
//! requests from allowed origins get the response headers browsers need.

use std::rc::Rc;
use std::time::Duration;

use super::{Middleware, Next};
use crate::handler::ResponseFuture;
use crate::http::{Method, StatusCode};
use crate::request::OwnedRequest;
use crate::response::Response;

/// CORS settings; see [`cors`].
#[derive(Clone, Debug)]
pub struct Cors {
    inner: Rc<Settings>,
}

#[derive(Clone, Debug)]
struct Settings {
    /// `None`: any origin.
    origins: Option<Vec<String>>,
    methods: String,
    /// `None`: echo what the preflight asks for.
    headers: Option<String>,
    expose: Option<String>,
    credentials: bool,
    max_age: Option<Duration>,
}

/// CORS middleware allowing no origin yet: add them with
/// [`Cors::allow_origin`] or [`Cors::allow_any_origin`]. Defaults: methods
/// `GET, HEAD, POST`, any requested header, no credentials, preflights
/// cached for 10 minutes.
///
/// A preflight from an allowed origin gets `204` with the
/// `Access-Control-Allow-*` headers; from any other origin, `403`. Actual
/// requests from an allowed origin get `Access-Control-Allow-Origin` (and
/// `Vary: Origin` when it depends on the origin); others pass through
/// without CORS headers, so the browser withholds the response.
pub fn cors() -> Cors {
    Cors {
        inner: Rc::new(Settings {
            origins: Some(Vec::new()),
            methods: "GET, HEAD, POST".into(),
            headers: None,
            expose: None,
            credentials: false,
            max_age: Some(Duration::from_secs(600)),
        }),
    }
}

impl Cors {
    fn settings(&mut self) -> &mut Settings {
        Rc::make_mut(&mut self.inner)
    }

    /// Allows `origin` (`https://app.example`, compared exactly).
    pub fn allow_origin(mut self, origin: &str) -> Cors {
        if let Some(list) = &mut self.settings().origins {
            list.push(origin.to_owned());
        }
        self
    }

    /// Allows every origin (`*`; with credentials, the request's origin is
    /// echoed instead, as the standard requires).
    pub fn allow_any_origin(mut self) -> Cors {
        self.settings().origins = None;
        self
    }

    /// The methods preflights may ask for.
    pub fn allow_methods(mut self, methods: &[Method]) -> Cors {
        self.settings().methods = methods.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ");
        self
    }

    /// The request headers preflights may ask for (default: any).
    pub fn allow_headers(mut self, headers: &[&str]) -> Cors {
        self.settings().headers = Some(headers.join(", "));
        self
    }

    /// Response headers scripts may read.
    pub fn expose_headers(mut self, headers: &[&str]) -> Cors {
        self.settings().expose = Some(headers.join(", "));
        self
    }

    /// Allows cookies and HTTP authentication.
    pub fn allow_credentials(mut self) -> Cors {
        self.settings().credentials = true;
        self
    }

    /// How long browsers may cache a preflight's answer (`None`: not sent).
    pub fn max_age(mut self, age: Option<Duration>) -> Cors {
        self.settings().max_age = age;
        self
    }
}

impl Settings {
    /// The `Access-Control-Allow-Origin` value for `origin`, if allowed.
    fn allowed(&self, origin: &str) -> Option<String> {
        match &self.origins {
            None if self.credentials => Some(origin.to_owned()),
            None => Some("*".to_owned()),
            Some(list) => list.iter().any(|o| o == origin).then(|| origin.to_owned()),
        }
    }

    fn decorate(&self, response: &mut Response, allow_origin: String) {
        let varies = allow_origin != "*";
        response.set_header("Access-Control-Allow-Origin", allow_origin);
        if varies {
            let vary = match response.headers().find(|(n, _)| n.eq_ignore_ascii_case("vary")) {
                Some((_, v)) if !v.to_ascii_lowercase().contains("origin") => format!("{v}, Origin"),
                Some((_, v)) => v.to_owned(),
                None => "Origin".to_owned(),
            };
            response.set_header("Vary", vary);
        }
        if self.credentials {
            response.set_header("Access-Control-Allow-Credentials", "true");
        }
    }
}

impl Middleware for Cors {
    fn call(&self, req: OwnedRequest, next: Next) -> ResponseFuture {
        let settings = Rc::clone(&self.inner);
        let Some(origin) = req.header_str("origin").map(str::to_owned) else {
            return Box::pin(next.run(req));
        };
        let allowed = settings.allowed(&origin);
        let preflight =
            req.method() == Method::Options && req.header("access-control-request-method").is_some();
        if preflight {
            let response = match allowed {
                None => Response::text("origin not allowed\n").status(StatusCode::FORBIDDEN),
                Some(allow_origin) => {
                    let mut response = Response::new(StatusCode::NO_CONTENT);
                    settings.decorate(&mut response, allow_origin);
                    response.set_header("Access-Control-Allow-Methods", settings.methods.clone());
                    let headers = match (&settings.headers, req.header_str("access-control-request-headers"))
                    {
                        (Some(list), _) => Some(list.clone()),
                        (None, Some(asked)) => Some(asked.to_owned()),
                        (None, None) => None,
                    };
                    if let Some(headers) = headers {
                        response.set_header("Access-Control-Allow-Headers", headers);
                    }
                    if let Some(age) = settings.max_age {
                        response.set_header("Access-Control-Max-Age", age.as_secs().to_string());
                    }
                    response
                }
            };
            return Box::pin(std::future::ready(response));
        }
        Box::pin(async move {
            let mut response = next.run(req).await;
            if let Some(allow_origin) = allowed {
                settings.decorate(&mut response, allow_origin);
                if let Some(expose) = &settings.expose {
                    response.set_header("Access-Control-Expose-Headers", expose.clone());
                }
            }
            response
        })
    }
}
