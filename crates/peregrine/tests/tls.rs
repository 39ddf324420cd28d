//! TLS listeners over real sockets: curl and a rustls client, ALPN,
//! certificate reload (file change and `SIGHUP`) with connections left open,
//! session resumption, and handshakes that fail or stall.
//!
//! Certificates come from `scripts/certs` (openssl), generated afresh for
//! each test into its own directory.
#![cfg(feature = "tls")]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{config, test_router};
use peregrine::tls::Tls;
use peregrine::{Config, Listener, Server, ServerHandle};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, HandshakeKind, RootCertStore, StreamOwned};

/// A fresh directory with a CA and a server certificate it signed.
fn certs() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "peregrine-tls-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    renew(&dir);
    dir
}

/// Issues a new server key and certificate in `dir` (a CA there is kept).
fn renew(dir: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/certs");
    let status = Command::new(script).arg(dir).status().expect("run scripts/certs");
    assert!(status.success(), "scripts/certs failed");
}

fn server_cert(dir: &Path) -> CertificateDer<'static> {
    CertificateDer::from_pem_file(dir.join("server.crt")).expect("read server.crt")
}

fn tls_of(dir: &Path) -> Tls {
    Tls::from_pem_files(dir.join("server.crt"), dir.join("server.key")).expect("load the test certificate")
}

/// A server with one TLS listener (HTTP/1.1 and HTTP/2, by ALPN) on a free
/// port.
fn start_tls(config: Config, tls: Tls) -> ServerHandle {
    start_listener(config, Listener::new(([127, 0, 0, 1], 0)).tls(tls))
}

fn start_listener(config: Config, listener: Listener) -> ServerHandle {
    Server::with_config(config)
        .listen(listener)
        .start(|_| async { test_router() })
        .expect("TLS server starts")
}

fn client_config(
    dir: &Path,
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(dir.join("ca.crt")).expect("read ca.crt")).expect("CA");
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_protocol_versions(versions)
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

fn http1_client(dir: &Path) -> Arc<ClientConfig> {
    client_config(dir, rustls::ALL_VERSIONS, &[b"http/1.1"])
}

/// A blocking rustls client connection.
struct TlsClient {
    stream: StreamOwned<ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

impl TlsClient {
    /// Connects and completes the handshake.
    fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> Result<TlsClient, std::io::Error> {
        let tcp = TcpStream::connect(addr)?;
        tcp.set_read_timeout(Some(common::READ_TIMEOUT))?;
        let conn = ClientConnection::new(config, ServerName::try_from("localhost").expect("name"))
            .map_err(std::io::Error::other)?;
        let mut stream = StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(TlsClient { stream, buf: Vec::new() })
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write over TLS");
        self.stream.flush().expect("flush over TLS");
    }

    fn response(&mut self) -> http_probe::Response {
        let r =
            http_probe::read_response(&mut self.stream, &mut self.buf, false).expect("a response over TLS");
        assert!(r.defects.is_empty() && r.cut_short.is_none(), "{:?} {:?}", r.defects, r.cut_short);
        r
    }

    fn get(&mut self, path: &str) -> http_probe::Response {
        self.send(&common::get(path));
        self.response()
    }

    fn peer_cert(&self) -> CertificateDer<'static> {
        self.stream.conn.peer_certificates().expect("server certificate")[0].clone().into_owned()
    }
}

#[test]
fn curl_gets_http1_and_h2_over_tls_and_verifies_the_certificate() {
    let dir = certs();
    let server = start_tls(config(), tls_of(&dir));
    let http1_only = start_listener(config(), Listener::new(([127, 0, 0, 1], 0)).tls(tls_of(&dir)).h2(false));
    let port = server.local_addr().port();
    // (port, curl's protocol option, the protocol ALPN must settle on)
    let cases = [
        (port, "--http1.1", "1.1"),
        (port, "--http2", "2"),
        // An HTTP/1.1-only listener answers a client that would prefer
        // HTTP/2 in HTTP/1.1.
        (http1_only.local_addr().port(), "--http2", "1.1"),
    ];
    for (port, version, expect) in cases {
        let out = Command::new("curl")
            .args(["-sS", version, "--cacert"])
            .arg(dir.join("ca.crt"))
            .args(["-w", "\n%{http_version} %{ssl_verify_result}"])
            .arg(format!("https://localhost:{port}/plaintext"))
            .output()
            .expect("run curl");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "curl {version}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(stdout, format!("Hello, World!\n{expect} 0"), "curl {version} on port {port}");
    }
    http1_only.shutdown();
    // A client that trusts another CA refuses the server.
    let other = certs();
    let out = Command::new("curl")
        .args(["-sS", "--cacert"])
        .arg(other.join("ca.crt"))
        .arg(format!("https://localhost:{port}/plaintext"))
        .output()
        .expect("run curl");
    assert_eq!(out.status.code(), Some(60), "curl must reject a certificate from an unknown CA");
    server.shutdown();
}

#[test]
fn protocols_older_than_tls_1_2_are_refused() {
    let dir = certs();
    let server = start_tls(config(), tls_of(&dir));
    let connect = format!("127.0.0.1:{}", server.local_addr().port());
    for (flag, accepted) in [("-tls1", false), ("-tls1_1", false), ("-tls1_2", true), ("-tls1_3", true)] {
        let out = Command::new("openssl")
            .args(["s_client", "-connect", &connect, flag, "-cipher", "DEFAULT:@SECLEVEL=0"])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run openssl s_client");
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.success(), accepted, "openssl s_client {flag}: {text}");
        if accepted {
            assert!(
                text.contains("Cipher is TLS_AES") || text.contains("Cipher is ECDHE-"),
                "{flag}: {text}"
            );
        } else {
            // rustls refuses by the version, or by the signature algorithms
            // extension that TLS 1.0 and 1.1 hellos lack.
            assert!(
                text.contains("alert protocol version") || text.contains("alert handshake failure"),
                "openssl s_client {flag}: {text}"
            );
        }
    }
    server.shutdown();
}

#[test]
fn rustls_client_pipelines_and_streams_over_tls_1_2_and_1_3() {
    let dir = certs();
    let server = start_tls(config(), tls_of(&dir));
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let mut c = TlsClient::connect(server.local_addr(), client_config(&dir, &[version], &[b"http/1.1"]))
            .expect("handshake");
        assert_eq!(c.stream.conn.protocol_version(), Some(version.version));
        assert_eq!(c.stream.conn.alpn_protocol(), Some(&b"http/1.1"[..]));
        // Three requests in one write, answered in order.
        let mut batch = Vec::new();
        for i in 0..3 {
            batch.extend_from_slice(&common::get(&format!("/id/{i}")));
        }
        c.send(&batch);
        for i in 0..3 {
            assert_eq!(c.response().body, format!("id {i}").into_bytes());
        }
        // A body larger than a TLS record, both ways.
        let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        c.send(&common::post("/echo", &body));
        let echoed = c.response();
        assert_eq!(echoed.status, 200);
        assert!(echoed.body == body, "echoed body differs");
        c.send(&common::post("/upload", &body));
        assert_eq!(c.response().body, body.len().to_string().into_bytes());
        assert_eq!(c.get("/sleep/10").body, b"slept 10");
    }
    // No ALPN offered: HTTP/1.1.
    let mut c = TlsClient::connect(server.local_addr(), client_config(&dir, rustls::ALL_VERSIONS, &[]))
        .expect("handshake");
    assert_eq!(c.stream.conn.alpn_protocol(), None);
    assert_eq!(c.get("/plaintext").body, b"Hello, World!");
    server.shutdown();
}

#[test]
fn a_client_offering_only_other_protocols_is_refused() {
    let dir = certs();
    let server = start_listener(config(), Listener::new(([127, 0, 0, 1], 0)).tls(tls_of(&dir)).h2(false));
    for alpn in [&b"h2"[..], b"spdy/3", b"acme-tls/1"] {
        let err = TlsClient::connect(server.local_addr(), client_config(&dir, rustls::ALL_VERSIONS, &[alpn]))
            .err()
            .unwrap_or_else(|| panic!("ALPN {:?} must be refused", String::from_utf8_lossy(alpn)));
        assert!(err.to_string().contains("NoApplicationProtocol"), "ALPN {alpn:?}: {err}");
    }
    let mut c = TlsClient::connect(server.local_addr(), http1_client(&dir)).expect("handshake");
    assert_eq!(c.get("/plaintext").status, 200);
    server.shutdown();
}

#[test]
fn cleartext_and_tls_listeners_serve_one_router() {
    let dir = certs();
    let server = Server::with_config(config())
        .listen(Listener::new(([127, 0, 0, 1], 0)).tls(tls_of(&dir)))
        .spawn("127.0.0.1:0", |_| async { test_router() })
        .expect("server starts");
    let addrs = server.local_addrs().to_vec();
    assert_eq!(addrs.len(), 2);
    assert_eq!(server.local_addr(), addrs[0], "spawn's address comes first");
    let mut plain = common::Client::connect(addrs[0]);
    assert_eq!(plain.roundtrip(&common::get("/json")).body, br#"{"message":"Hello, World!"}"#);
    let mut tls = TlsClient::connect(addrs[1], http1_client(&dir)).expect("handshake");
    assert_eq!(tls.get("/json").body, br#"{"message":"Hello, World!"}"#);
    // TLS bytes on the cleartext port get a 400, not a hang.
    let mut wrong = common::Client::connect(addrs[0]);
    wrong.send(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5]);
    assert_eq!(wrong.response().status, 400);
    server.shutdown();
}

/// The certificate a new connection is served. A fresh client each time:
/// a resumed session would report the certificate of the session it
/// resumes.
fn served_cert(addr: SocketAddr, dir: &Path) -> CertificateDer<'static> {
    TlsClient::connect(addr, http1_client(dir)).expect("handshake").peer_cert()
}

/// Waits until a new connection is served `want`, for up to `within`.
fn wait_for_cert(addr: SocketAddr, dir: &Path, want: &CertificateDer<'_>, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if served_cert(addr, dir) == *want {
            return start.elapsed();
        }
        assert!(start.elapsed() < within, "the new certificate was not served within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_renewed_certificate_is_served_while_open_connections_go_on() {
    let dir = certs();
    let first = server_cert(&dir);
    let tls = tls_of(&dir).poll_interval(Some(Duration::from_millis(100)));
    let server = start_tls(Config { workers: 2, ..config() }, tls);
    let addr = server.local_addr();

    let mut open = TlsClient::connect(addr, http1_client(&dir)).expect("handshake");
    assert_eq!(open.peer_cert(), first);
    assert_eq!(open.get("/plaintext").status, 200);

    renew(&dir);
    let second = server_cert(&dir);
    assert_ne!(first, second);
    wait_for_cert(addr, &dir, &second, Duration::from_secs(5));
    // The connection opened before the renewal is still served.
    assert_eq!(open.get("/id/7").body, b"id 7");

    // Broken files keep the current certificate: garbage, then a key that
    // belongs to another certificate.
    let crt = dir.join("server.crt");
    std::fs::write(&crt, b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
        .expect("write garbage");
    std::thread::sleep(Duration::from_millis(400));
    let mut c = TlsClient::connect(addr, http1_client(&dir)).expect("handshake after a bad file");
    assert_eq!(c.peer_cert(), second);
    assert_eq!(c.get("/plaintext").status, 200);
    let other = certs();
    std::fs::copy(other.join("server.crt"), &crt).expect("copy another certificate");
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(served_cert(addr, &dir), second, "after a mismatched pair");
    // Repaired: the next renewal is picked up again.
    renew(&dir);
    wait_for_cert(addr, &dir, &server_cert(&dir), Duration::from_secs(5));
    assert_eq!(open.get("/id/8").body, b"id 8");
    server.shutdown();
}

#[test]
fn sighup_and_reload_reread_the_files() {
    let dir = certs();
    let first = server_cert(&dir);
    // No polling: only the signal and the method reload.
    let tls = tls_of(&dir).poll_interval(None);
    let server = start_tls(config(), tls.clone());
    let addr = server.local_addr();

    let mut open = TlsClient::connect(addr, http1_client(&dir)).expect("handshake");

    renew(&dir);
    let second = server_cert(&dir);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(served_cert(addr, &dir), first, "no reload without a signal");
    let status =
        Command::new("kill").args(["-HUP", &std::process::id().to_string()]).status().expect("send SIGHUP");
    assert!(status.success());
    wait_for_cert(addr, &dir, &second, Duration::from_secs(3));
    assert_eq!(open.get("/plaintext").status, 200);

    renew(&dir);
    let third = server_cert(&dir);
    tls.reload().expect("reload");
    assert_eq!(served_cert(addr, &dir), third);
    std::fs::write(dir.join("server.key"), b"garbage").expect("write");
    let err = tls.reload().expect_err("a broken key fails the reload");
    assert!(err.to_string().contains("server.key"), "{err}");
    assert_eq!(served_cert(addr, &dir), third);
    assert_eq!(open.get("/plaintext").status, 200);
    server.shutdown();
}

#[test]
fn sessions_resume_across_connections_and_workers() {
    let dir = certs();
    let server = start_tls(Config { workers: 2, ..config() }, tls_of(&dir));
    let addr = server.local_addr();
    let tls12_ids = {
        let mut c = (*client_config(&dir, &[&rustls::version::TLS12], &[b"http/1.1"])).clone();
        c.enable_sni = true;
        // Without tickets a TLS 1.2 client resumes by session ID, from
        // the server's session cache.
        c.resumption = rustls::client::Resumption::in_memory_sessions(16)
            .tls12_resumption(rustls::client::Tls12Resumption::SessionIdOnly);
        Arc::new(c)
    };
    let cases = [
        ("TLS 1.3 ticket", client_config(&dir, &[&rustls::version::TLS13], &[b"http/1.1"])),
        ("TLS 1.2 ticket", client_config(&dir, &[&rustls::version::TLS12], &[b"http/1.1"])),
        ("TLS 1.2 session ID", tls12_ids),
    ];
    for (name, client) in cases {
        let mut c = TlsClient::connect(addr, Arc::clone(&client)).expect("handshake");
        assert_eq!(c.stream.conn.handshake_kind(), Some(HandshakeKind::Full), "{name}");
        // Reading a response also takes in the tickets sent after the
        // handshake.
        assert_eq!(c.get("/plaintext").status, 200);
        drop(c);
        // Connections land on either worker; every one resumes.
        for i in 0..6 {
            let mut c = TlsClient::connect(addr, Arc::clone(&client)).expect("resumed handshake");
            assert_eq!(
                c.stream.conn.handshake_kind(),
                Some(HandshakeKind::Resumed),
                "{name}, connection {i}"
            );
            assert_eq!(c.get("/plaintext").status, 200);
        }
    }
    // A third-party client sees it too.
    let sess = dir.join("openssl.session");
    let connect = format!("127.0.0.1:{}", addr.port());
    let mut reused = Vec::new();
    for arg in ["-sess_out", "-sess_in"] {
        let out = Command::new("openssl")
            .args(["s_client", "-connect", &connect, "-tls1_2", arg])
            .arg(&sess)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run openssl s_client");
        reused.push(String::from_utf8_lossy(&out.stdout).contains("Reused, TLSv1.2"));
    }
    assert_eq!(reused, [false, true], "openssl s_client resumes its saved session");
    server.shutdown();
}

/// Reads until the server closes; returns what it sent (an alert, at most).
fn read_until_closed(stream: &mut TcpStream, within: Duration) -> Vec<u8> {
    stream.set_read_timeout(Some(within)).expect("timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("the server did not close within {within:?}: {e} (got {got:?})"),
        }
    }
}

#[test]
fn garbage_handshakes_are_refused_at_once_and_the_server_serves_on() {
    let dir = certs();
    let server = start_tls(config(), tls_of(&dir));
    let addr = server.local_addr();
    let garbage: [&[u8]; 4] = [
        b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n",
        // A handshake record announcing more than a record may hold.
        &[0x16, 0x03, 0x01, 0xff, 0xff, 0x01, 0x00],
        // An alert before any handshake.
        &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28],
        // A ClientHello whose body is nonsense.
        &[0x16, 0x03, 0x01, 0x00, 0x08, 0x01, 0x00, 0x00, 0x04, 0xde, 0xad, 0xbe, 0xef],
    ];
    for _ in 0..50 {
        for bytes in garbage {
            let mut s = TcpStream::connect(addr).expect("connect");
            s.write_all(bytes).expect("write");
            let start = Instant::now();
            let answer = read_until_closed(&mut s, Duration::from_secs(2));
            assert!(start.elapsed() < Duration::from_secs(1), "refusal took {:?}", start.elapsed());
            // At most a fatal alert record.
            assert!(answer.is_empty() || answer[0] == 0x15, "{bytes:?} got {answer:?}");
        }
    }
    let mut c = TlsClient::connect(addr, http1_client(&dir)).expect("handshake after garbage");
    assert_eq!(c.get("/plaintext").status, 200);
    server.shutdown();
}

/// The first flight of a real client (its ClientHello), as bytes.
fn client_hello(dir: &Path) -> Vec<u8> {
    let mut conn = ClientConnection::new(http1_client(dir), ServerName::try_from("localhost").expect("name"))
        .expect("client");
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out).expect("ClientHello");
    }
    out
}

#[test]
fn stalled_handshakes_end_at_the_header_timeout() {
    let dir = certs();
    let config = Config { header_timeout: Duration::from_secs(1), ..config() };
    let server = start_tls(config, tls_of(&dir));
    let addr = server.local_addr();
    let hello = client_hello(&dir);

    // Silent after connecting; half a ClientHello; a whole one and then
    // nothing (the server's flight unanswered).
    let mut silent = TcpStream::connect(addr).expect("connect");
    let mut half = TcpStream::connect(addr).expect("connect");
    half.write_all(&hello[..hello.len() / 2]).expect("write");
    let mut unanswered = TcpStream::connect(addr).expect("connect");
    unanswered.write_all(&hello).expect("write");
    let start = Instant::now();

    // Meanwhile other clients are served.
    let mut c = TlsClient::connect(addr, http1_client(&dir)).expect("handshake while others stall");
    assert_eq!(c.get("/plaintext").status, 200);

    assert!(read_until_closed(&mut silent, Duration::from_secs(6)).is_empty());
    let got = read_until_closed(&mut half, Duration::from_secs(6));
    assert!(got.is_empty() || got[0] == 0x15, "{got:?}");
    // The server's flight (ServerHello onwards), then the close.
    let got = read_until_closed(&mut unanswered, Duration::from_secs(6));
    assert_eq!(got.first(), Some(&0x16), "a ServerHello came first");
    let took = start.elapsed();
    // One second, swept once a second: closed between 1 and about 3 s.
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(5), "closed after {took:?}");
    assert_eq!(c.get("/plaintext").status, 200);
    server.shutdown();
}

#[test]
fn unusable_certificate_files_stop_the_start_with_the_reason() {
    let dir = certs();
    let missing =
        Tls::from_pem_files(dir.join("nope.crt"), dir.join("server.key")).expect_err("missing file");
    assert!(missing.to_string().contains("nope.crt"), "{missing}");
    let empty = dir.join("empty.crt");
    std::fs::write(&empty, b"").expect("write");
    let err = Tls::from_pem_files(&empty, dir.join("server.key")).expect_err("no certificate");
    assert!(err.to_string().contains("holds no PEM certificate"), "{err}");
    let other = certs();
    let err = Tls::from_pem_files(dir.join("server.crt"), other.join("server.key")).expect_err("mismatch");
    assert!(err.to_string().contains("does not fit"), "{err}");
    // An RSA key works as well as an ECDSA one.
    let rsa = std::env::temp_dir().join(format!("peregrine-tls-test-{}-rsa", std::process::id()));
    let _ = std::fs::remove_dir_all(&rsa);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/certs");
    assert!(Command::new(script).arg(&rsa).env("CERT_KEY", "rsa").status().expect("certs").success());
    let server = start_tls(config(), tls_of(&rsa));
    let mut c = TlsClient::connect(server.local_addr(), http1_client(&rsa)).expect("RSA handshake");
    assert_eq!(c.get("/plaintext").status, 200);
    server.shutdown();
}

#[test]
fn a_large_static_file_over_tls_http1_arrives_whole_and_ranges_work() {
    const LEN: usize = 5 * 1024 * 1024 + 77;
    let dir = certs();
    let files_dir = dir.join("files");
    std::fs::create_dir_all(&files_dir).unwrap();
    let want: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8 ^ (i / 251) as u8).collect();
    std::fs::write(files_dir.join("big.bin"), &want).unwrap();
    let files = peregrine::fs::ServeDir::new(&files_dir);
    let server = Server::with_config(config())
        .listen(Listener::new(([127, 0, 0, 1], 0)).tls(tls_of(&dir)).h2(false))
        .start(move |_| {
            let files = files.clone();
            async move { peregrine::Router::new().get("/static/{*path}", files) }
        })
        .expect("TLS server starts");
    let mut c = TlsClient::connect(server.local_addr(), http1_client(&dir)).expect("handshake");
    for _ in 0..2 {
        // Twice on one connection: the body is framed exactly.
        let whole = c.get("/static/big.bin");
        assert_eq!(whole.status, 200);
        assert!(whole.body == want, "the body differs ({} bytes of {LEN})", whole.body.len());
    }
    c.send(b"GET /static/big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=70000-3000000\r\n\r\n");
    let part = c.response();
    assert_eq!(part.status, 206);
    assert!(part.body == want[70_000..3_000_001], "the range differs");
    server.shutdown();
}

/// Response bytes a handler streamed, within a second, over TLS to a client
/// with a 4 KiB receive buffer that reads nothing after the handshake and
/// its request, under `config`.
fn streamed_over_tls_to_a_reader_that_never_reads(config: Config) -> usize {
    let dir = certs();
    let produced = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&produced);
    let server = Server::with_config(config)
        .listen(Listener::new(([127, 0, 0, 1], 0)).tls(tls_of(&dir)))
        .start(move |_| {
            let counter = Arc::clone(&counter);
            async move { common::endless_router(counter) }
        })
        .expect("TLS server starts");
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(&server.local_addr().into()).unwrap();
    let tcp: TcpStream = socket.into();
    tcp.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    let conn = ClientConnection::new(http1_client(&dir), ServerName::try_from("localhost").unwrap()).unwrap();
    let mut stream = StreamOwned::new(conn, tcp);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock).expect("TLS handshake");
    }
    stream.write_all(b"GET /endless HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    stream.flush().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let streamed = produced.load(Ordering::SeqCst);
    drop(stream);
    server.shutdown();
    streamed
}

/// `Config::tcp_notsent_lowat` holds over TLS too: a reader whose window
/// stays closed lets the server queue a bounded amount (the cap plus
/// rustls's own buffer), where without it Linux grows the send buffer.
#[test]
fn unsent_response_bytes_are_capped_over_tls_for_a_reader_that_does_not_read() {
    let capped = streamed_over_tls_to_a_reader_that_never_reads(config());
    assert!(capped <= 512 * 1024, "{capped} bytes taken for a TLS client that reads nothing");
    let uncapped =
        streamed_over_tls_to_a_reader_that_never_reads(Config { tcp_notsent_lowat: None, ..config() });
    eprintln!("streamed to a TLS reader that reads nothing: {capped} bytes capped, {uncapped} uncapped");
    assert!(
        uncapped >= 2 * capped && uncapped > 512 * 1024,
        "without the cap: {uncapped} bytes; with it: {capped}"
    );
}

/// A TLS listener that also serves HTTP/3 advertises it to HTTP/1.1 clients
/// in the first final answer of each connection: after a `100 Continue`,
/// whether the answer is synchronous or waited for, and not in later
/// pipelined answers. A switch to WebSocket passes untouched, frames and
/// all.
#[cfg(feature = "http3")]
#[test]
fn http1_over_tls_advertises_http3_in_each_connections_first_answer() {
    let dir = certs();
    let server = Server::with_config(config())
        .listen(Listener::new(([127, 0, 0, 1], 0)).tls(tls_of(&dir)).http3(true))
        .start(|_| async { test_router().get("/ws", common::ws::echo) })
        .expect("TLS server starts");
    let addr = server.local_addrs()[0];
    let want = format!("h3=\":{}\"; ma=86400", addr.port());
    fn advertised(r: &http_probe::Response) -> Vec<&str> {
        r.header_all("alt-svc").collect()
    }

    // Three pipelined requests in one write, the first one waited for.
    for first in ["/sleep/5", "/plaintext"] {
        let mut client = TlsClient::connect(addr, http1_client(&dir)).expect("connect");
        client.send(&[common::get(first), common::get("/json"), common::get("/id/3")].concat());
        let answers: Vec<_> = (0..3).map(|_| client.response()).collect();
        assert_eq!(answers.iter().map(|r| r.status).collect::<Vec<_>>(), [200, 200, 200]);
        assert_eq!(advertised(&answers[0]), [want.as_str()], "{first}");
        assert!(answers[1..].iter().all(|r| advertised(r).is_empty()), "{first}");
        assert_eq!(answers[2].body, b"id 3");
    }

    // `Expect: 100-continue`: the interim answer goes alone, the final one
    // carries the line.
    let mut client = TlsClient::connect(addr, http1_client(&dir)).expect("connect");
    client.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    let interim = client.response();
    assert_eq!((interim.status, advertised(&interim).len()), (100, 0));
    client.send(b"hello");
    let answer = client.response();
    assert_eq!((answer.status, answer.body.as_slice()), (200, &b"hello"[..]));
    assert_eq!(advertised(&answer), [want.as_str()]);

    // A WebSocket upgrade: the 101 is left alone, and so is everything
    // after it.
    let mut client = TlsClient::connect(addr, http1_client(&dir)).expect("connect");
    client.send(
        b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    let switched = client.response();
    assert_eq!((switched.status, advertised(&switched).len()), (101, 0));
    client.send(&common::ws::frame(0x81, b"HTTP/1.1 200 OK\r\n"));
    let mut echoed = [0u8; 19];
    client.stream.read_exact(&mut echoed).expect("echo");
    assert_eq!(&echoed[..], b"\x81\x11HTTP/1.1 200 OK\r\n");
}
