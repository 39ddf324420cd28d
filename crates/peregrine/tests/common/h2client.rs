//! An HTTP/2 client for the tests: the `h2` crate's (another codec's view
//! of the wire), with helpers that send a request and read the whole
//! answer, trailers included.

use std::net::SocketAddr;

use bytes::Bytes;

/// An `h2` client connection; its driver runs on the test's runtime.
pub async fn connect(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (send, conn) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
    pub trailers: Option<http::HeaderMap>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub fn request(method: &str, path: &str) -> http::Request<()> {
    http::Request::builder().method(method).uri(format!("http://localhost{path}")).body(()).unwrap()
}

/// Sends a request with `body` (none if empty) and reads the whole answer,
/// giving window capacity back as it reads.
pub async fn exchange(
    client: &mut h2::client::SendRequest<Bytes>,
    req: http::Request<()>,
    body: &[u8],
) -> Answer {
    let mut client = client.clone().ready().await.expect("ready");
    let (response, mut send) = client.send_request(req, body.is_empty()).expect("send request");
    if !body.is_empty() {
        send_all(&mut send, Bytes::copy_from_slice(body)).await;
    }
    read_answer(response).await
}

pub async fn send_all(send: &mut h2::SendStream<Bytes>, mut body: Bytes) {
    while !body.is_empty() {
        send.reserve_capacity(body.len());
        let n = std::future::poll_fn(|cx| send.poll_capacity(cx)).await.expect("capacity").expect("capacity");
        let piece = body.split_to(n.min(body.len()));
        send.send_data(piece, body.is_empty()).expect("send data");
    }
}

pub async fn read_answer(response: h2::client::ResponseFuture) -> Answer {
    let response = response.await.expect("response head");
    let (parts, mut recv) = response.into_parts();
    let mut body = Vec::new();
    while let Some(data) = recv.data().await {
        let data = data.expect("response body");
        body.extend_from_slice(&data);
        let _ = recv.flow_control().release_capacity(data.len());
    }
    let trailers = recv.trailers().await.expect("trailers");
    Answer { status: parts.status.as_u16(), headers: parts.headers, body, trailers }
}
