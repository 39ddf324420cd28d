//! HttpArena's HTTP/3 layout: with a certificate, the binary serves
//! `/baseline2`, `/static/*` and `/json/{count}` over HTTP/3 on UDP
//! --tls-h2-port (baseline-h3, static-h3), checked with hyperium's `h3`
//! client on `quinn`, and its TLS HTTP/2 port advertises it.

mod common;

use std::process::Command;
use std::sync::Arc;

use bytes::Buf;
use common::{free_port, repo_root, Server};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

#[test]
fn serves_baseline_static_and_json_over_http3() {
    let certs = repo_root().join("target/test-scratch").join(format!("h3-certs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&certs);
    let status =
        Command::new(repo_root().join("scripts/certs")).arg(&certs).status().expect("run scripts/certs");
    assert!(status.success(), "scripts/certs failed");
    let (tls1, tls2) = (free_port(), free_port());
    let (cert, key) = (certs.join("server.crt"), certs.join("server.key"));
    let _server = Server::start_with_args(
        "h3",
        &[("TLS_CERT", cert.to_str().unwrap()), ("TLS_KEY", key.to_str().unwrap())],
        &["--tls-port", &tls1.to_string(), "--tls-h2-port", &tls2.to_string()],
    );
    let ca = certs.join("ca.crt");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async move {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_file(&ca).expect("read ca.crt")).expect("CA");
        let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
        tls.alpn_protocols = vec![b"h3".to_vec()];
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(Arc::new(tls)).expect("QUIC TLS");
        let mut endpoint = quinn::Endpoint::client(([127, 0, 0, 1], 0).into()).expect("client endpoint");
        endpoint.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
        let conn = endpoint
            .connect(([127, 0, 0, 1], tls2).into(), "localhost")
            .expect("connect")
            .await
            .expect("QUIC handshake on UDP --tls-h2-port");
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn)).await.expect("h3");
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        let get = |path: &'static str| {
            let mut send = send.clone();
            async move {
                let req = http::Request::get(format!("https://localhost{path}")).body(()).expect("request");
                let mut stream = send.send_request(req).await.expect("send");
                stream.finish().await.expect("finish");
                let response = stream.recv_response().await.expect("head");
                let mut body = Vec::new();
                while let Some(mut chunk) = stream.recv_data().await.expect("body") {
                    body.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
                }
                (response, body)
            }
        };
        let (head, body) = get("/baseline2?a=1&b=2").await;
        assert_eq!((head.status().as_u16(), body.as_slice()), (200, &b"3"[..]));
        let (head, body) = get("/static/app.js").await;
        assert_eq!(head.status().as_u16(), 200);
        let on_disk =
            std::fs::read(repo_root().join("crates/peregrine-tfb/data/static/app.js")).expect("app.js");
        assert!(body == on_disk, "static file differs over HTTP/3");
        let (head, body) = get("/json/3?m=2").await;
        assert_eq!(head.status().as_u16(), 200);
        let json: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(json["count"], 3, "{json}");
        drop(send);
    });
    let _ = std::fs::remove_dir_all(&certs);
}
