//! Routing by method and path, with `{name}` parameters and a trailing
//! `{*rest}` wildcard.
//!
//! Matching runs on the raw path (parameters are percent-decoded when
//! extracted). Static routes are checked first by whole-path comparison,
//! which for the handful of routes a service has is faster than hashing;
//! patterned routes are matched segment by segment. A path that matches no
//! route is `404`; a path that matches with the wrong method is `405` with an
//! `Allow` header listing the methods that would work. `HEAD` is served by
//! the `GET` handler (without the body) unless a `HEAD` handler exists.

use std::rc::Rc;

use crate::handler::{AsyncHandler, Handler, StreamHandler};
use crate::http::writer::ResponseWriter;
use crate::http::Method;
use crate::request::{Params, Request, MAX_PATH_PARAMS};

type SyncFn<S> = Box<dyn Fn(&Request<'_>, &S, &mut ResponseWriter<'_>)>;
type AsyncFn<S> = Box<dyn Fn(&Request<'_>, &S) -> crate::handler::ResponseFuture>;
type StreamFn<S> =
    Box<dyn Fn(&Request<'_>, &S) -> Result<crate::handler::BodyConsumer, crate::response::Response>>;

/// What runs for a matched route.
pub(crate) enum Endpoint<S> {
    Sync(SyncFn<S>),
    Async(AsyncFn<S>),
    Stream(StreamFn<S>),
}

/// One `/`-separated part of a route pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    Static(Box<str>),
    Param,
    Wildcard,
}

struct Route<S> {
    pattern: Box<str>,
    /// The whole path when the pattern has no parameters: matched with one
    /// comparison instead of segment by segment.
    literal: Option<Box<str>>,
    segments: Vec<Segment>,
    param_names: Vec<Box<str>>,
    endpoints: Vec<(Method, Endpoint<S>)>,
    allow: String,
}

/// The result of looking up a request.
pub(crate) enum Lookup<'a, S> {
    Found { endpoint: &'a Endpoint<S>, params: Params<'a> },
    MethodNotAllowed { allow: &'a str },
    NotFound,
}

/// Routes requests to handlers. `S` is per-worker state handed to
/// handlers through [`State`](crate::extract::State).
pub struct Router<S = ()> {
    state: S,
    routes: Vec<Route<S>>,
}

impl Router<()> {
    /// A router without state.
    pub fn new() -> Router<()> {
        Router::with_state(())
    }
}

impl Default for Router<()> {
    fn default() -> Self {
        Router::new()
    }
}

impl<S: 'static> Router<S> {
    /// A router whose handlers can extract `State<S>`.
    pub fn with_state(state: S) -> Router<S> {
        Router { state, routes: Vec::new() }
    }

    /// The state.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// Adds a synchronous handler for `method` and `pattern`.
    ///
    /// # Panics
    /// On an invalid pattern or a duplicate route: both are programming
    /// errors found at start-up, never at request time.
    pub fn route<A>(self, method: Method, pattern: &str, handler: impl Handler<S, A>) -> Router<S> {
        self.add(method, pattern, Endpoint::Sync(Box::new(move |req, state, w| handler.call(req, state, w))))
    }

    /// Adds an asynchronous handler for `method` and `pattern`.
    pub fn route_async<A>(
        self,
        method: Method,
        pattern: &str,
        handler: impl AsyncHandler<S, A>,
    ) -> Router<S> {
        self.add(method, pattern, Endpoint::Async(Box::new(move |req, state| handler.call(req, state))))
    }

    /// Adds an asynchronous handler that streams the request body.
    pub fn route_stream<A, H: StreamHandler<S, A>>(
        self,
        method: Method,
        pattern: &str,
        handler: H,
    ) -> Router<S> {
        let handler = Rc::new(handler);
        self.add(
            method,
            pattern,
            Endpoint::Stream(Box::new(move |req, state| Rc::clone(&handler).prepare(req, state))),
        )
    }

    /// `GET` with a synchronous handler.
    pub fn get<A>(self, pattern: &str, handler: impl Handler<S, A>) -> Router<S> {
        self.route(Method::Get, pattern, handler)
    }

    /// `POST` with a synchronous handler (the body is buffered).
    pub fn post<A>(self, pattern: &str, handler: impl Handler<S, A>) -> Router<S> {
        self.route(Method::Post, pattern, handler)
    }

    /// `GET` with an asynchronous handler.
    pub fn get_async<A>(self, pattern: &str, handler: impl AsyncHandler<S, A>) -> Router<S> {
        self.route_async(Method::Get, pattern, handler)
    }

    /// `POST` with an asynchronous handler (the body is buffered).
    pub fn post_async<A>(self, pattern: &str, handler: impl AsyncHandler<S, A>) -> Router<S> {
        self.route_async(Method::Post, pattern, handler)
    }

    /// `POST` with a handler that reads the body as a stream.
    pub fn post_stream<A, H: StreamHandler<S, A>>(self, pattern: &str, handler: H) -> Router<S> {
        self.route_stream(Method::Post, pattern, handler)
    }

    fn add(mut self, method: Method, pattern: &str, endpoint: Endpoint<S>) -> Router<S> {
        assert!(method != Method::Other, "routes need a standard method");
        let (segments, param_names) = parse_pattern(pattern);
        let route = match self.routes.iter_mut().position(|r| r.segments == segments) {
            Some(i) => &mut self.routes[i],
            None => {
                let literal =
                    segments.iter().all(|s| matches!(s, Segment::Static(_))).then(|| pattern.into());
                self.routes.push(Route {
                    pattern: pattern.into(),
                    literal,
                    segments,
                    param_names,
                    endpoints: Vec::new(),
                    allow: String::new(),
                });
                let last = self.routes.len() - 1;
                &mut self.routes[last]
            }
        };
        assert!(
            !route.endpoints.iter().any(|(m, _)| *m == method),
            "duplicate route {} {}",
            method.as_str(),
            route.pattern
        );
        route.endpoints.push((method, endpoint));
        route.allow = allow_header(&route.endpoints);
        // Static routes first, so a literal path beats a pattern.
        self.routes.sort_by_key(|r| r.literal.is_none());
        self
    }

    /// Finds the endpoint for a request.
    pub(crate) fn lookup<'a>(&'a self, method: Method, path: &'a str) -> Lookup<'a, S> {
        for route in &self.routes {
            let Some(params) = match_route(route, path) else { continue };
            let exact = route.endpoints.iter().find(|(m, _)| *m == method);
            let endpoint = match exact {
                Some((_, e)) => e,
                None if method == Method::Head => {
                    match route.endpoints.iter().find(|(m, _)| *m == Method::Get) {
                        Some((_, e)) => e,
                        None => return Lookup::MethodNotAllowed { allow: &route.allow },
                    }
                }
                None => return Lookup::MethodNotAllowed { allow: &route.allow },
            };
            return Lookup::Found { endpoint, params };
        }
        Lookup::NotFound
    }
}

fn allow_header<S>(endpoints: &[(Method, Endpoint<S>)]) -> String {
    let mut methods: Vec<&str> = endpoints.iter().map(|(m, _)| m.as_str()).collect();
    if endpoints.iter().any(|(m, _)| *m == Method::Get) && !endpoints.iter().any(|(m, _)| *m == Method::Head)
    {
        methods.push("HEAD");
    }
    methods.join(", ")
}

pub(crate) fn parse_pattern(pattern: &str) -> (Vec<Segment>, Vec<Box<str>>) {
    assert!(pattern.starts_with('/'), "route pattern {pattern:?} must start with '/'");
    let mut segments = Vec::new();
    let mut names: Vec<Box<str>> = Vec::new();
    let parts: Vec<&str> = pattern[1..].split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if let Some(name) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            if let Some(rest) = name.strip_prefix('*') {
                assert!(i == parts.len() - 1, "wildcard must be last in {pattern:?}");
                segments.push(Segment::Wildcard);
                names.push(rest.into());
            } else {
                segments.push(Segment::Param);
                names.push(name.into());
            }
            assert!(!names.last().is_some_and(|n| n.is_empty()), "empty parameter name in {pattern:?}");
        } else {
            assert!(!part.contains(['{', '}']), "malformed segment {part:?} in {pattern:?}");
            segments.push(Segment::Static((*part).into()));
        }
    }
    assert!(names.len() <= MAX_PATH_PARAMS, "too many parameters in {pattern:?}");
    (segments, names)
}

fn match_route<'a, S>(route: &'a Route<S>, path: &'a str) -> Option<Params<'a>> {
    let matched = match &route.literal {
        Some(literal) => literal.as_ref() == path,
        None => capture(&route.segments, path).is_some(),
    };
    matched.then_some(Params { names: &route.param_names, pattern: &route.segments, path })
}

/// Matches `path` against a pattern, returning the parameter values (raw)
/// and how many there are.
pub(crate) fn capture<'a>(pattern: &[Segment], path: &'a str) -> Option<([&'a str; MAX_PATH_PARAMS], usize)> {
    let rest = path.strip_prefix('/')?;
    let mut values = [""; MAX_PATH_PARAMS];
    let mut n = 0;
    let mut remaining = Some(rest);
    for segment in pattern {
        let current = remaining?;
        if *segment == Segment::Wildcard {
            values[n] = current;
            return Some((values, n + 1));
        }
        let (part, next) = match current.find('/') {
            Some(i) => (&current[..i], Some(&current[i + 1..])),
            None => (current, None),
        };
        match segment {
            Segment::Static(s) if s.as_ref() == part => {}
            Segment::Param if !part.is_empty() => {
                values[n] = part;
                n += 1;
            }
            _ => return None,
        }
        remaining = next;
    }
    remaining.is_none().then_some((values, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(router: &Router, method: Method, path: &str) -> Option<Vec<String>> {
        match router.lookup(method, path) {
            Lookup::Found { params, .. } => {
                let (values, n) = params.values();
                Some(values[..n].iter().map(|s| s.to_string()).collect())
            }
            _ => None,
        }
    }

    #[test]
    fn matches_static_params_and_wildcards() {
        let r = Router::new()
            .get("/plaintext", || "x")
            .get("/json/{count}", || "x")
            .get("/a/{x}/b/{y}", || "x")
            .get("/static/{*file}", || "x")
            .get("/", || "x");
        assert_eq!(found(&r, Method::Get, "/plaintext"), Some(vec![]));
        assert_eq!(found(&r, Method::Get, "/"), Some(vec![]));
        assert_eq!(found(&r, Method::Get, "/json/12"), Some(vec!["12".into()]));
        assert_eq!(found(&r, Method::Get, "/a/1/b/2"), Some(vec!["1".into(), "2".into()]));
        assert_eq!(found(&r, Method::Get, "/static/css/x.css"), Some(vec!["css/x.css".into()]));
        assert_eq!(found(&r, Method::Head, "/plaintext"), Some(vec![]));
        assert!(found(&r, Method::Get, "/json/").is_none());
        assert!(found(&r, Method::Get, "/json/1/2").is_none());
        assert!(found(&r, Method::Get, "/plaintext/").is_none());
        assert!(found(&r, Method::Get, "/nope").is_none());
        assert!(found(&r, Method::Get, "plaintext").is_none());
    }

    #[test]
    fn wrong_method_lists_allowed() {
        let r = Router::new().get("/x", || "a").post("/x", || "b");
        match r.lookup(Method::Delete, "/x") {
            Lookup::MethodNotAllowed { allow } => assert_eq!(allow, "GET, POST, HEAD"),
            _ => panic!("expected 405"),
        }
        assert!(matches!(r.lookup(Method::Get, "/y"), Lookup::NotFound));
    }

    #[test]
    #[should_panic(expected = "duplicate route")]
    fn duplicate_routes_panic_at_startup() {
        let _ = Router::new().get("/x", || "a").get("/x", || "b");
    }
}
