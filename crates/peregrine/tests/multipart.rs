//! Multipart uploads over real sockets: fields and files read as they come,
//! the connection kept for the next request, and bad bodies refused.

mod common;

use common::{config, Client};
use peregrine::multipart::Multipart;
use peregrine::{Body, Error, Router, Server, ServerHandle};

fn router() -> Router {
    Router::new().post("/upload", |headers: http::HeaderMap, body: Body| async move {
        let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        let mut form = Multipart::new(&content_type, body)?;
        let mut seen = Vec::new();
        while let Some(mut field) = form.next_field().await? {
            let name = field.name().unwrap_or("?").to_owned();
            let file = field.file_name().map(str::to_owned);
            let mut size = 0;
            while let Some(chunk) = field.chunk().await? {
                size += chunk.len();
            }
            seen.push(format!("{name}:{file:?}:{size}"));
        }
        Ok::<_, Error>(seen.join(" "))
    })
}

fn start() -> ServerHandle {
    Server::with_config(config()).spawn("127.0.0.1:0", |_| async { router() }).expect("test server starts")
}

fn multipart_request(body: &[u8], content_type: &str) -> Vec<u8> {
    let mut req = format!(
        "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    req
}

#[test]
fn fields_and_files_stream_and_the_connection_goes_on() {
    let server = start();
    let mut c = Client::connect(server.local_addr());
    let file = vec![b'z'; 300_000];
    let mut body = b"--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n".to_vec();
    body.extend_from_slice(
        b"--XyZ\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n",
    );
    body.extend_from_slice(&file);
    body.extend_from_slice(b"\r\n--XyZ--\r\n");
    for _ in 0..2 {
        let r = c.roundtrip(&multipart_request(&body, "multipart/form-data; boundary=XyZ"));
        assert_eq!((r.status, r.text()), (200, "title:None:5 doc:Some(\"a.bin\"):300000"));
        assert!(!r.says_close(), "the body was read to its end, so the connection stays");
    }
    server.shutdown();
}

#[test]
fn bad_multipart_bodies_are_refused() {
    let server = start();
    for (content_type, body, status) in [
        ("text/plain", &b"x"[..], 415),
        ("multipart/form-data", &b"x"[..], 400),
        (
            "multipart/form-data; boundary=XyZ",
            &b"--XyZ\r\nno disposition here\r\n\r\nx\r\n--XyZ--\r\n"[..],
            400,
        ),
    ] {
        let mut c = Client::connect(server.local_addr());
        let r = c.roundtrip(&multipart_request(body, content_type));
        assert_eq!(r.status, status, "{content_type}: {}", r.text());
    }
    server.shutdown();
}
