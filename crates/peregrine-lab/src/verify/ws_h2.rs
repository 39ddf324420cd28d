//! WebSocket over HTTP/2 (RFC 8441) at the same `/ws` echo endpoint, part
//! of the `ws` group: an h2c connection with prior knowledge on the
//! target's port (the `h2` crate's client), the server's
//! `SETTINGS_ENABLE_CONNECT_PROTOCOL`, extended `CONNECT` opening sockets
//! that echo text, binary and fragmented messages with a ping between,
//! the close handshake ending the stream, a protocol error's close code,
//! several sockets and an ordinary request on one connection, and a
//! version the server does not speak refused.
//!
//! A server that does not speak h2c on that port, or does not announce
//! RFC 8441, gets a `SKIP` (neither is in PROFILES.md); one that announces
//! it is held to it.

use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;

use super::{Ctx, Reporter};
use crate::rig::wsframe::{frame, parse_frame};

type H2 = SendRequest<Bytes>;

pub fn run(ctx: &Ctx, rep: &mut Reporter, path: &str) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return rep.fail("ws over h2", &format!("runtime: {e}")),
    };
    let timeout = ctx.target.timeout;
    rt.block_on(async {
        let h2 = match connect(ctx).await {
            Ok(Some(h2)) => h2,
            Ok(None) => {
                return rep
                    .skip("ws over h2", "the server does not announce SETTINGS_ENABLE_CONNECT_PROTOCOL")
            }
            Err(e) => return rep.skip("ws over h2", &format!("no h2c on this port ({e})")),
        };
        rep.pass("ws over h2: SETTINGS_ENABLE_CONNECT_PROTOCOL announced");
        let checks: [(&str, Check); 5] = [
            (
                "ws over h2: 200, then text, binary and fragments echo, pings answered",
                echo(&h2, path, timeout),
            ),
            ("ws over h2: the close handshake ends the stream", close(&h2, path, timeout)),
            ("ws over h2: an unmasked frame gets close 1002", unmasked(&h2, path, timeout)),
            ("ws over h2: 8 sockets and a GET on one connection", many(&h2, path, timeout)),
            ("ws over h2: version 8 gets 400 or 426", version(&h2, path, timeout)),
        ];
        for (name, check) in checks {
            let result = match tokio::time::timeout(timeout * 4, check).await {
                Ok(result) => result,
                Err(_) => Err(format!("no answer within {:?}", timeout * 4)),
            };
            rep.record(name, result);
        }
    });
}

type Check<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + 'a>>;

/// An h2c connection; `None` if the server's SETTINGS do not enable
/// extended CONNECT.
async fn connect(ctx: &Ctx) -> Result<Option<H2>, String> {
    let timeout = ctx.target.timeout;
    let tcp = tokio::time::timeout(timeout, tokio::net::TcpStream::connect(ctx.target.addr))
        .await
        .map_err(|_| "connect timed out".to_owned())?
        .map_err(|e| format!("connect: {e}"))?;
    let (send, conn) = tokio::time::timeout(timeout, h2::client::handshake(tcp))
        .await
        .map_err(|_| "HTTP/2 handshake timed out".to_owned())?
        .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    // The server's SETTINGS arrive with the connection task's first reads:
    // a request's answer proves they have.
    let mut send = send.ready().await.map_err(|e| format!("HTTP/2: {e}"))?;
    let req = http::Request::builder()
        .uri(format!("http://{}/", ctx.target.host))
        .body(())
        .map_err(|e| e.to_string())?;
    let (response, _) = send.send_request(req, true).map_err(|e| format!("HTTP/2 request: {e}"))?;
    tokio::time::timeout(timeout, response)
        .await
        .map_err(|_| "no HTTP/2 answer".to_owned())?
        .map_err(|e| format!("HTTP/2 answer: {e}"))?;
    Ok(send.is_extended_connect_protocol_enabled().then_some(send))
}

/// One socket on one stream.
struct Ws {
    send: h2::SendStream<Bytes>,
    recv: h2::RecvStream,
    buf: Vec<u8>,
}

fn connect_request(path: &str, version: &str) -> Result<http::Request<()>, String> {
    http::Request::builder()
        .method("CONNECT")
        .uri(format!("http://localhost{path}"))
        .header("sec-websocket-version", version)
        .extension(h2::ext::Protocol::from("websocket"))
        .body(())
        .map_err(|e| e.to_string())
}

/// Sends an extended CONNECT; the status and the stream.
async fn request(h2: &H2, path: &str, version: &str) -> Result<(u16, Ws), String> {
    let mut client = h2.clone().ready().await.map_err(|e| format!("HTTP/2: {e}"))?;
    let (response, send) = client
        .send_request(connect_request(path, version)?, false)
        .map_err(|e| format!("extended CONNECT not sent: {e}"))?;
    let response = response.await.map_err(|e| format!("extended CONNECT: {e}"))?;
    let status = response.status().as_u16();
    Ok((status, Ws { send, recv: response.into_body(), buf: Vec::new() }))
}

async fn open(h2: &H2, path: &str) -> Result<Ws, String> {
    match request(h2, path, "13").await? {
        (200, ws) => Ok(ws),
        (status, _) => Err(format!("extended CONNECT answered {status}, not 200")),
    }
}

impl Ws {
    fn send(&mut self, b0: u8, payload: &[u8], end: bool) -> Result<(), String> {
        // Small frames: the initial windows always hold them.
        self.send.send_data(Bytes::from(frame(b0, payload)), end).map_err(|e| format!("send: {e}"))
    }

    /// The next frame (opcode with FIN/RSV bits, payload); `None` at
    /// END_STREAM.
    async fn next(&mut self) -> Result<Option<(u8, Vec<u8>)>, String> {
        loop {
            if let Some(f) = parse_frame(&self.buf)? {
                let b0 = (u8::from(f.fin) << 7) | (f.rsv << 4) | f.opcode;
                let (payload, len) = (f.payload.to_vec(), f.len);
                self.buf.drain(..len);
                return Ok(Some((b0, payload)));
            }
            match self.recv.data().await {
                Some(Ok(data)) => {
                    self.buf.extend_from_slice(&data);
                    let _ = self.recv.flow_control().release_capacity(data.len());
                }
                Some(Err(e)) => return Err(format!("stream failed: {e}")),
                None => return Ok(None),
            }
        }
    }

    async fn expect(&mut self, b0: u8, payload: &[u8]) -> Result<(), String> {
        match self.next().await? {
            Some((got, data)) if got == b0 && data == payload => Ok(()),
            Some((got, data)) => Err(format!(
                "expected frame {b0:#x} of {} bytes, got {got:#x} of {} bytes",
                payload.len(),
                data.len()
            )),
            None => Err("the stream ended".into()),
        }
    }

    /// Reads all of a message of `len` bytes (its frames' payloads).
    async fn expect_message(&mut self, opcode: u8, payload: &[u8]) -> Result<(), String> {
        let mut got = Vec::new();
        let mut first = true;
        loop {
            let Some((b0, data)) = self.next().await? else { return Err("the stream ended".into()) };
            let want = if first { opcode } else { 0 };
            if b0 & 0x0f != want {
                return Err(format!("expected opcode {want:#x}, got frame {b0:#x}"));
            }
            first = false;
            got.extend_from_slice(&data);
            if b0 & 0x80 != 0 {
                break;
            }
        }
        if got == payload {
            Ok(())
        } else {
            Err(format!("echo of {} bytes differs ({} bytes back)", payload.len(), got.len()))
        }
    }
}

fn echo<'a>(h2: &'a H2, path: &'a str, _: Duration) -> Check<'a> {
    Box::pin(async move {
        let mut ws = open(h2, path).await?;
        ws.send(0x81, b"Hello over HTTP/2", false)?;
        ws.expect_message(0x1, b"Hello over HTTP/2").await?;
        // 64 KiB: more than the initial stream window, in several pieces.
        let big: Vec<u8> = (0..65536u32).map(|i| i as u8).collect();
        let mut data = Bytes::from(frame(0x82, &big));
        while !data.is_empty() {
            ws.send.reserve_capacity(data.len());
            let granted = match std::future::poll_fn(|cx| ws.send.poll_capacity(cx)).await {
                Some(Ok(n)) => n,
                Some(Err(e)) => return Err(format!("send capacity: {e}")),
                None => return Err("the stream closed while sending".into()),
            };
            let piece = data.split_to(granted.min(data.len()));
            ws.send.send_data(piece, false).map_err(|e| format!("send: {e}"))?;
        }
        ws.expect_message(0x2, &big).await?;
        ws.send(0x01, b"frag", false)?;
        ws.send(0x89, b"ping", false)?;
        ws.send(0x80, b"ment", false)?;
        ws.expect(0x8A, b"ping").await?;
        ws.expect_message(0x1, b"fragment").await
    })
}

fn close<'a>(h2: &'a H2, path: &'a str, _: Duration) -> Check<'a> {
    Box::pin(async move {
        let mut ws = open(h2, path).await?;
        ws.send(0x88, &1000u16.to_be_bytes(), true)?;
        ws.expect(0x88, &1000u16.to_be_bytes()).await?;
        match ws.next().await? {
            None => Ok(()),
            Some((b0, _)) => Err(format!("after the close handshake, frame {b0:#x} instead of END_STREAM")),
        }
    })
}

fn unmasked<'a>(h2: &'a H2, path: &'a str, _: Duration) -> Check<'a> {
    Box::pin(async move {
        let mut ws = open(h2, path).await?;
        ws.send.send_data(Bytes::from_static(&[0x81, 0x02, b'h', b'i']), false).map_err(|e| e.to_string())?;
        match ws.next().await? {
            Some((0x88, payload)) if payload.starts_with(&1002u16.to_be_bytes()) => Ok(()),
            Some((b0, payload)) => Err(format!("expected close 1002, got frame {b0:#x} {payload:?}")),
            None => Err("the stream ended without a close frame".into()),
        }
    })
}

fn many<'a>(h2: &'a H2, path: &'a str, _: Duration) -> Check<'a> {
    Box::pin(async move {
        let mut sockets = Vec::new();
        for _ in 0..8 {
            sockets.push(open(h2, path).await?);
        }
        for (i, ws) in sockets.iter_mut().enumerate() {
            ws.send(0x81, format!("socket {i}").as_bytes(), false)?;
        }
        let mut client = h2.clone().ready().await.map_err(|e| format!("HTTP/2: {e}"))?;
        let req = http::Request::builder().uri("http://localhost/").body(()).map_err(|e| e.to_string())?;
        let (response, _) = client.send_request(req, true).map_err(|e| format!("GET: {e}"))?;
        response.await.map_err(|e| format!("GET between the sockets: {e}"))?;
        for (i, ws) in sockets.iter_mut().enumerate().rev() {
            ws.expect_message(0x1, format!("socket {i}").as_bytes()).await?;
        }
        Ok(())
    })
}

fn version<'a>(h2: &'a H2, path: &'a str, _: Duration) -> Check<'a> {
    Box::pin(async move {
        match request(h2, path, "8").await?.0 {
            400 | 426 => Ok(()),
            status => Err(format!("version 8 answered {status}")),
        }
    })
}
