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
use crate::http::Method;
use crate::middleware::Middleware;
use crate::pattern::Pattern;
use crate::request::{Params, Request};
use crate::response::canned::Canned;
use crate::response::ResponseWriter;

type SyncFn<S> = Box<dyn Fn(&Request<'_>, &S, &mut ResponseWriter<'_>)>;
type AsyncFn<S> = Box<dyn Fn(&Request<'_>, &S) -> crate::handler::ResponseFuture>;
type StreamFn<S> =
    Box<dyn Fn(&Request<'_>, &S) -> Result<crate::handler::BodyConsumer, crate::response::Response>>;

/// What runs for a matched route.
pub(crate) enum Endpoint<S> {
    Sync(SyncFn<S>),
    Async(AsyncFn<S>),
    Stream(StreamFn<S>),
    /// An endpoint behind middleware.
    Layered(Layered<S>),
}

/// An endpoint and the middleware around it, outermost first.
pub(crate) struct Layered<S> {
    pub(crate) chain: Rc<[Rc<dyn Middleware>]>,
    /// Never itself `Layered`: layers stack in `chain`.
    pub(crate) inner: Rc<Endpoint<S>>,
    /// The pattern the endpoint was registered with, for its parameters.
    pub(crate) pattern: Rc<Pattern>,
}

/// A synchronous endpoint answering `405` with `allow`.
fn method_not_allowed<S>(allow: String) -> Endpoint<S> {
    Endpoint::Sync(Box::new(move |_, _, w| w.canned(Canned::method_not_allowed(&allow))))
}

impl<S> Endpoint<S> {
    /// The same endpoint; if layered, reading parameters with `pattern`.
    fn with_pattern(self, pattern: &Pattern) -> Endpoint<S> {
        match self {
            Endpoint::Layered(l) => Endpoint::Layered(Layered { pattern: Rc::new(pattern.clone()), ..l }),
            other => other,
        }
    }

    /// This endpoint with `layer` outside whatever middleware it has.
    fn layered(self, layer: Rc<dyn Middleware>, pattern: &Pattern) -> Endpoint<S> {
        match self {
            Endpoint::Layered(l) => {
                let chain: Vec<Rc<dyn Middleware>> =
                    std::iter::once(layer).chain(l.chain.iter().cloned()).collect();
                Endpoint::Layered(Layered { chain: chain.into(), ..l })
            }
            inner => Endpoint::Layered(Layered {
                chain: vec![layer].into(),
                inner: Rc::new(inner),
                pattern: Rc::new(pattern.clone()),
            }),
        }
    }
}

/// All endpoints whose patterns match the same paths, one per method.
struct Route<S> {
    /// The pattern of the first endpoint: every endpoint's pattern has its
    /// shape, though each keeps its own parameter names.
    shape: Pattern,
    endpoints: Vec<MethodEndpoint<S>>,
    allow: String,
    /// After [`Router::layer`]: the route's `405`, behind the same
    /// middleware, so middleware sees requests with a method the route does
    /// not serve (a CORS preflight `OPTIONS`, say) and can answer them.
    unmatched: Option<Endpoint<S>>,
}

impl<S> Route<S> {
    /// Recomputes `allow` from the endpoints, and the `405` behind the
    /// route's middleware with it: a route that gains a method after
    /// [`Router::layer`] (merged or added later) must not answer with the
    /// `Allow` of before (RFC 9110 §15.5.6: the methods it supports now).
    fn refresh_allow(&mut self) {
        self.allow = allow_header(&self.endpoints);
        if let Some(Endpoint::Layered(layered)) = &mut self.unmatched {
            layered.inner = Rc::new(method_not_allowed(self.allow.clone()));
        }
    }
}

struct MethodEndpoint<S> {
    /// `None`: every method ([`Router::any`]).
    method: Option<Method>,
    pattern: Pattern,
    endpoint: Endpoint<S>,
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
    /// What answers paths no route matches, instead of the plain `404`.
    fallback: Option<MethodEndpoint<S>>,
}

impl<S> std::fmt::Debug for Router<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut list = f.debug_list();
        for route in &self.routes {
            for e in &route.endpoints {
                list.entry(&format_args!("{} {}", e.method.map_or("ANY", Method::as_str), e.pattern.text));
            }
        }
        list.finish()
    }
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
        Router { state, routes: Vec::new(), fallback: None }
    }

    /// The state.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// Adds a handler for `method` and `pattern`: a synchronous one, an
    /// asynchronous one, or one that streams the request body (it takes
    /// [`Body`](crate::Body) last); see [`IntoEndpoint`].
    ///
    /// # Panics
    /// On an invalid pattern or a duplicate route: both are programming
    /// errors found at start-up, never at request time.
    pub fn route<M>(self, method: Method, pattern: &str, handler: impl IntoEndpoint<S, M>) -> Router<S> {
        handler.add_to(self, Some(method), pattern)
    }

    /// Adds a synchronous handler (it runs inline and writes straight into
    /// the output). [`Router::route`] accepts it too.
    pub fn route_sync<A>(self, method: Method, pattern: &str, handler: impl Handler<S, A>) -> Router<S> {
        self.add_sync(Some(method), pattern, handler)
    }

    /// Adds an asynchronous handler for `method` and `pattern`.
    pub fn route_async<A>(
        self,
        method: Method,
        pattern: &str,
        handler: impl AsyncHandler<S, A>,
    ) -> Router<S> {
        self.add_async(Some(method), pattern, handler)
    }

    /// Adds an asynchronous handler that streams the request body.
    pub fn route_stream<A, H: StreamHandler<S, A>>(
        self,
        method: Method,
        pattern: &str,
        handler: H,
    ) -> Router<S> {
        self.add_stream(Some(method), pattern, handler)
    }

    pub(crate) fn add_sync<A>(
        self,
        method: Option<Method>,
        pattern: &str,
        handler: impl Handler<S, A>,
    ) -> Router<S> {
        self.add(method, pattern, Endpoint::Sync(Box::new(move |req, state, w| handler.call(req, state, w))))
    }

    pub(crate) fn add_async<A>(
        self,
        method: Option<Method>,
        pattern: &str,
        handler: impl AsyncHandler<S, A>,
    ) -> Router<S> {
        self.add(method, pattern, Endpoint::Async(Box::new(move |req, state| handler.call(req, state))))
    }

    pub(crate) fn add_stream<A, H: StreamHandler<S, A>>(
        self,
        method: Option<Method>,
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

    /// `GET` (and `HEAD`, without the body, unless a `HEAD` route exists).
    pub fn get<M>(self, pattern: &str, handler: impl IntoEndpoint<S, M>) -> Router<S> {
        self.route(Method::Get, pattern, handler)
    }

    /// `POST`.
    pub fn post<M>(self, pattern: &str, handler: impl IntoEndpoint<S, M>) -> Router<S> {
        self.route(Method::Post, pattern, handler)
    }

    /// `PUT`.
    pub fn put<M>(self, pattern: &str, handler: impl IntoEndpoint<S, M>) -> Router<S> {
        self.route(Method::Put, pattern, handler)
    }

    /// `DELETE`.
    pub fn delete<M>(self, pattern: &str, handler: impl IntoEndpoint<S, M>) -> Router<S> {
        self.route(Method::Delete, pattern, handler)
    }

    /// `PATCH`.
    pub fn patch<M>(self, pattern: &str, handler: impl IntoEndpoint<S, M>) -> Router<S> {
        self.route(Method::Patch, pattern, handler)
    }

    /// `OPTIONS`.
    pub fn options<M>(self, pattern: &str, handler: impl IntoEndpoint<S, M>) -> Router<S> {
        self.route(Method::Options, pattern, handler)
    }

    /// Every method, including ones this server has no name for; a route
    /// for a specific method on the same pattern takes precedence.
    pub fn any<M>(self, pattern: &str, handler: impl IntoEndpoint<S, M>) -> Router<S> {
        handler.add_to(self, None, pattern)
    }

    /// `GET` with an asynchronous handler; the same as [`Router::get`].
    pub fn get_async<A>(self, pattern: &str, handler: impl AsyncHandler<S, A>) -> Router<S> {
        self.route_async(Method::Get, pattern, handler)
    }

    /// `POST` with an asynchronous handler; the same as [`Router::post`].
    pub fn post_async<A>(self, pattern: &str, handler: impl AsyncHandler<S, A>) -> Router<S> {
        self.route_async(Method::Post, pattern, handler)
    }

    /// `POST` with a handler that reads the body as a stream; the same as
    /// [`Router::post`].
    pub fn post_stream<A, H: StreamHandler<S, A>>(self, pattern: &str, handler: H) -> Router<S> {
        self.route_stream(Method::Post, pattern, handler)
    }

    /// Answers every request whose path no route matches (for any method)
    /// with `handler`, instead of the plain-text `404`: an API can answer
    /// JSON there. The handler sets its own status. Its path is available
    /// as the `{*path}` parameter (`Path<String>`, without the leading `/`).
    ///
    /// # Panics
    /// If a fallback is set already.
    pub fn fallback<M>(mut self, handler: impl IntoEndpoint<S, M>) -> Router<S> {
        assert!(self.fallback.is_none(), "the router has a fallback already");
        // Registered as the only route for a moment, then moved aside: the
        // path every kind of handler takes to become an endpoint.
        let routes = std::mem::take(&mut self.routes);
        let mut router = handler.add_to(self, None, "/{*path}");
        router.fallback = router.routes.pop().and_then(|mut r| r.endpoints.pop());
        router.routes = routes;
        router
    }

    /// Wraps every route registered so far (and the fallback) in `layer`;
    /// layers added later run first. See [`crate::middleware`].
    pub fn layer(mut self, layer: impl Middleware) -> Router<S> {
        let layer: Rc<dyn Middleware> = Rc::new(layer);
        if let Some(f) = self.fallback.take() {
            self.fallback = Some(MethodEndpoint {
                endpoint: f.endpoint.layered(Rc::clone(&layer), &f.pattern),
                method: f.method,
                pattern: f.pattern,
            });
        }
        for route in &mut self.routes {
            let unmatched = route.unmatched.take().unwrap_or_else(|| method_not_allowed(route.allow.clone()));
            route.unmatched = Some(unmatched.layered(Rc::clone(&layer), &route.shape));
            route.endpoints = std::mem::take(&mut route.endpoints)
                .into_iter()
                .map(|e| MethodEndpoint {
                    endpoint: e.endpoint.layered(Rc::clone(&layer), &e.pattern),
                    method: e.method,
                    pattern: e.pattern,
                })
                .collect();
        }
        self
    }

    /// Adds every route of `other` (with its middleware) to this router.
    /// `other`'s state is dropped, as in [`Router::nest`].
    ///
    /// # Panics
    /// If a route of `other` duplicates one already here.
    pub fn merge(mut self, other: Router<S>) -> Router<S> {
        if self.fallback.is_none() {
            self.fallback = other.fallback;
        }
        for route in other.routes {
            self = self.adopt(route, "");
        }
        self
    }

    /// Adds the endpoints of `route` (and its middleware-wrapped `405`)
    /// under `prefix`.
    fn adopt(mut self, route: Route<S>, prefix: &str) -> Router<S> {
        let prefixed = |text: &str| {
            if text == "/" && !prefix.is_empty() {
                prefix.to_owned()
            } else {
                format!("{prefix}{text}")
            }
        };
        let shape = Pattern::parse(&prefixed(&route.shape.text));
        for e in route.endpoints {
            self = self.add(e.method, &prefixed(&e.pattern.text), e.endpoint);
        }
        if let Some(unmatched) = route.unmatched {
            if let Some(target) = self.routes.iter_mut().find(|r| r.shape.same_shape(&shape)) {
                if target.unmatched.is_none() {
                    target.unmatched = Some(unmatched.with_pattern(&shape));
                    target.refresh_allow();
                }
            }
        }
        self
    }

    /// Adds every route of `child` under `prefix` (`"/api"` turns the
    /// child's `/notes/{id}` into `/api/notes/{id}`; the child's `/` becomes
    /// `/api`). The child's state is dropped: its handlers get this router's
    /// state, which is why both have the same state type.
    ///
    /// # Panics
    /// If `prefix` does not start with `/`, ends with `/`, or a nested route
    /// duplicates one already here.
    pub fn nest(mut self, prefix: &str, child: Router<S>) -> Router<S> {
        assert!(
            prefix.starts_with('/') && !prefix.ends_with('/') && prefix.len() > 1,
            "nest prefix {prefix:?} must start with '/' and not end with one"
        );
        for route in child.routes {
            self = self.adopt(route, prefix);
        }
        self
    }

    fn add(mut self, method: Option<Method>, pattern: &str, endpoint: Endpoint<S>) -> Router<S> {
        assert!(method != Some(Method::Other), "routes need a standard method");
        let pattern = Pattern::parse(pattern);
        let route = match self.routes.iter_mut().position(|r| r.shape.same_shape(&pattern)) {
            Some(i) => &mut self.routes[i],
            None => {
                self.routes.push(Route {
                    unmatched: None,
                    shape: pattern.clone(),
                    endpoints: Vec::new(),
                    allow: String::new(),
                });
                let last = self.routes.len() - 1;
                &mut self.routes[last]
            }
        };
        assert!(
            !route.endpoints.iter().any(|e| e.method == method),
            "duplicate route {} {}",
            method.map_or("ANY", Method::as_str),
            pattern.text
        );
        // Middleware reads parameters with the pattern the endpoint ends up
        // under (nesting adds a prefix).
        let endpoint = endpoint.with_pattern(&pattern);
        route.endpoints.push(MethodEndpoint { method, pattern, endpoint });
        route.refresh_allow();
        // Static routes first, so a literal path beats a pattern.
        self.routes.sort_by_key(|r| !r.shape.is_literal());
        self
    }

    /// Finds the endpoint for a request. Always inlined: called out of line
    /// it cost cleartext HTTP/1.1 about 20 instructions a request (see
    /// `pipeline::dispatch`).
    #[inline(always)]
    pub(crate) fn lookup<'a>(&'a self, method: Method, path: &'a str) -> Lookup<'a, S> {
        for route in &self.routes {
            if !route.shape.matches(path) {
                continue;
            }
            let for_method = |m: Method| route.endpoints.iter().find(|e| e.method == Some(m));
            let any = || route.endpoints.iter().find(|e| e.method.is_none());
            let head_as_get = || (method == Method::Head).then(|| for_method(Method::Get)).flatten();
            let Some(found) = for_method(method).or_else(head_as_get).or_else(any) else {
                return match &route.unmatched {
                    Some(endpoint) => {
                        Lookup::Found { endpoint, params: Params { pattern: &route.shape, path } }
                    }
                    None => Lookup::MethodNotAllowed { allow: &route.allow },
                };
            };
            return Lookup::Found {
                endpoint: &found.endpoint,
                params: Params { pattern: &found.pattern, path },
            };
        }
        match &self.fallback {
            Some(f) => Lookup::Found { endpoint: &f.endpoint, params: Params { pattern: &f.pattern, path } },
            None => Lookup::NotFound,
        }
    }
}

fn allow_header<S>(endpoints: &[MethodEndpoint<S>]) -> String {
    let has = |m: Method| endpoints.iter().any(|e| e.method == Some(m));
    let mut methods: Vec<&str> = endpoints.iter().filter_map(|e| e.method.map(Method::as_str)).collect();
    if has(Method::Get) && !has(Method::Head) {
        methods.push("HEAD");
    }
    methods.join(", ")
}

/// Anything [`Router::route`](crate::Router::route) and its method
/// shorthands accept: a synchronous handler ([`Handler`]), an asynchronous
/// one ([`AsyncHandler`]) or a streaming one ([`StreamHandler`]). `M` is
/// inferred (a marker and the argument types); users never name it.
///
/// Only one of the three can apply to a given function: a synchronous
/// handler returns an [`IntoResponse`](crate::IntoResponse), an asynchronous one a future of
/// one, a streaming one takes [`Body`](crate::Body) last.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a peregrine handler",
    label = "not a handler",
    note = "a handler is a function whose arguments implement `FromRequest` (or that takes `&Request` alone) and that returns an `IntoResponse`, or a future of one; a streaming handler takes `Body` as its last argument and returns a future"
)]
pub trait IntoEndpoint<S, M>: Sized + 'static {
    /// Registers the handler for `method` (every method when `None`).
    #[doc(hidden)]
    fn add_to(self, router: Router<S>, method: Option<Method>, pattern: &str) -> Router<S>;
}

/// [`IntoEndpoint`] marker of synchronous handlers.
#[derive(Debug)]
pub enum IsSync {}
/// [`IntoEndpoint`] marker of asynchronous handlers.
#[derive(Debug)]
pub enum IsAsync {}
/// [`IntoEndpoint`] marker of streaming handlers.
#[derive(Debug)]
pub enum IsStream {}

impl<S: 'static, A, H: Handler<S, A>> IntoEndpoint<S, (IsSync, A)> for H {
    fn add_to(self, router: Router<S>, method: Option<Method>, pattern: &str) -> Router<S> {
        router.add_sync(method, pattern, self)
    }
}

impl<S: 'static, A, H: AsyncHandler<S, A>> IntoEndpoint<S, (IsAsync, A)> for H {
    fn add_to(self, router: Router<S>, method: Option<Method>, pattern: &str) -> Router<S> {
        router.add_async(method, pattern, self)
    }
}

impl<S: 'static, A, H: StreamHandler<S, A>> IntoEndpoint<S, (IsStream, A)> for H {
    fn add_to(self, router: Router<S>, method: Option<Method>, pattern: &str) -> Router<S> {
        router.add_stream(method, pattern, self)
    }
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
    fn same_shape_routes_keep_their_own_parameter_names() {
        let r = Router::new().get("/u/{id}", || "a").post("/u/{name}", || "b");
        for (method, name) in [(Method::Get, "id"), (Method::Post, "name")] {
            match r.lookup(method, "/u/ada") {
                Lookup::Found { params, .. } => {
                    assert_eq!(params.get(name), Some("ada"));
                    assert_eq!(params.get(if name == "id" { "name" } else { "id" }), None);
                }
                _ => panic!("expected {} to be found", method.as_str()),
            }
        }
        match r.lookup(Method::Delete, "/u/ada") {
            Lookup::MethodNotAllowed { allow } => assert_eq!(allow, "GET, POST, HEAD"),
            _ => panic!("expected 405"),
        }
    }

    #[test]
    #[should_panic(expected = "duplicate route")]
    fn duplicate_routes_panic_at_startup() {
        let _ = Router::new().get("/x", || "a").get("/x", || "b");
    }
}
