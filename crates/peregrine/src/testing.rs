//! An in-process test client: requests go through the router, extractors,
//! middleware and handlers exactly as on a connection, with no socket, so a
//! unit test of a handler or a middleware is a function call.
//!
//! ```
//! use peregrine::testing::{TestClient, TestRequest};
//! use peregrine::{Json, Path, Router};
//!
//! let app = Router::new()
//!     .get("/hello/{name}", |Path(name): Path<String>| format!("hello {name}"))
//!     .post("/echo", |Json(v): Json<serde_json::Value>| Json(v));
//! let client = TestClient::new(app);
//!
//! let r = client.get("/hello/ada");
//! assert_eq!(r.status().as_u16(), 200);
//! assert_eq!(r.text(), "hello ada");
//!
//! let r = client.send(TestRequest::post("/echo").json(&serde_json::json!({"n": 1})));
//! assert_eq!(r.json::<serde_json::Value>().unwrap()["n"], 1);
//! ```
//!
//! What it leaves out is the wire protocol: framing, limits, timeouts and
//! keep-alive belong to tests over a real socket, with
//! [`Server::spawn`](crate::Server::spawn) (whose handle stops the server
//! when dropped).

use std::future::Future;
use std::rc::Rc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::runtime::Runtime;
use tokio::task::LocalSet;

use crate::http::{Method, StatusCode};
use crate::pipeline;
use crate::request::OwnedRequest;
use crate::response::Response;
use crate::router::Router;
use crate::server::IntoApp;

/// Runs requests through a router on a private current-thread runtime.
pub struct TestClient<S: 'static = ()> {
    runtime: Runtime,
    local: LocalSet,
    router: Rc<Router<S>>,
}

impl<S: 'static> std::fmt::Debug for TestClient<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestClient").field("router", &self.router).finish_non_exhaustive()
    }
}

impl<S: 'static> TestClient<S> {
    /// A client for `router`.
    ///
    /// # Panics
    /// If a tokio runtime cannot be built (out of file descriptors).
    pub fn new(router: Router<S>) -> TestClient<S> {
        TestClient { runtime: runtime(), local: LocalSet::new(), router: Rc::new(router) }
    }

    /// A client for the router `app` builds, run on the client's runtime
    /// as a worker runs its app factory (so per-worker state such as a
    /// database pool can be made there).
    ///
    /// # Panics
    /// If a tokio runtime cannot be built.
    pub fn with_app<F, Fut>(app: F) -> Result<TestClient<S>, String>
    where
        F: FnOnce() -> Fut,
        Fut: Future,
        Fut::Output: IntoApp<S>,
    {
        let runtime = runtime();
        let local = LocalSet::new();
        let router = local.block_on(&runtime, async { app().await.into_app() })?;
        Ok(TestClient { runtime, local, router: Rc::new(router) })
    }

    /// `GET path` (with any query).
    pub fn get(&self, target: &str) -> TestResponse {
        self.send(TestRequest::get(target))
    }

    /// Runs `request` to its response.
    pub fn send(&self, request: TestRequest) -> TestResponse {
        let head = request.method == Method::Head;
        let owned = OwnedRequest::for_test(
            request.method,
            &request.method_str,
            &request.target,
            request.headers,
            request.body,
        );
        let router = Rc::clone(&self.router);
        let mut response = self.local.block_on(&self.runtime, async {
            let mut response = pipeline::dispatch_owned(router, owned).await;
            response.collect_stream().await;
            response
        });
        if head {
            response.take_body();
        }
        TestResponse { response }
    }
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime for the test client")
}

/// A request for [`TestClient::send`].
#[derive(Clone, Debug)]
pub struct TestRequest {
    method: Method,
    method_str: String,
    target: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

impl TestRequest {
    /// A request with any method token (`"PROPFIND"` too) and target
    /// (`/path?query`).
    pub fn new(method: &str, target: &str) -> TestRequest {
        TestRequest {
            method: Method::from_token(method),
            method_str: method.to_owned(),
            target: target.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// `GET target`.
    pub fn get(target: &str) -> TestRequest {
        TestRequest::new("GET", target)
    }

    /// `POST target`.
    pub fn post(target: &str) -> TestRequest {
        TestRequest::new("POST", target)
    }

    /// `PUT target`.
    pub fn put(target: &str) -> TestRequest {
        TestRequest::new("PUT", target)
    }

    /// `DELETE target`.
    pub fn delete(target: &str) -> TestRequest {
        TestRequest::new("DELETE", target)
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> TestRequest {
        self.headers.push((name.to_owned(), value.as_ref().to_vec()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> TestRequest {
        self.body = body.into();
        self
    }

    /// Sets a JSON body and its `Content-Type`.
    ///
    /// # Panics
    /// If `value` cannot be serialized (a map with non-string keys).
    pub fn json<T: Serialize + ?Sized>(self, value: &T) -> TestRequest {
        let body = serde_json::to_vec(value).expect("a serializable test body");
        self.header("content-type", "application/json").body(body)
    }
}

/// A response from [`TestClient::send`]. A streamed body has been read to
/// its end.
#[derive(Debug)]
pub struct TestResponse {
    response: Response,
}

impl TestResponse {
    /// The status.
    pub fn status(&self) -> StatusCode {
        self.response.status_code()
    }

    /// A header's value (the content type too).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.response.header_value(name)
    }

    /// The body.
    pub fn bytes(&self) -> &[u8] {
        self.response.body()
    }

    /// The body as text (lossy for bytes that are not UTF-8).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(self.response.body()).into_owned()
    }

    /// The body deserialized from JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(self.response.body())
    }

    /// The whole response.
    pub fn into_response(self) -> Response {
        self.response
    }
}
