//! Compares rustls's crypto providers where a server spends its TLS time:
//! the server's side of full handshakes (TLS 1.3 and 1.2, ECDSA P-256 and
//! RSA-2048 certificates, X25519 key exchange), of resumed handshakes
//! (TLS 1.3 tickets), and bulk encryption of 16 KiB records.
//!
//! Client and server run in memory on one thread; only the server's calls
//! are timed (thread CPU time), so the figures are server CPU-seconds.
//!
//!   cargo run --release --manifest-path lab/tls-provider/Cargo.toml

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

fn thread_cpu() -> Duration {
    let mut ts = std::mem::MaybeUninit::<[i64; 2]>::uninit();
    extern "C" {
        fn clock_gettime(clk: i32, ts: *mut [i64; 2]) -> i32;
    }
    // SAFETY: CLOCK_THREAD_CPUTIME_ID (3) fills a timespec (two i64 on x86-64/arm64 Linux).
    let ts = unsafe {
        clock_gettime(3, ts.as_mut_ptr());
        ts.assume_init()
    };
    Duration::new(ts[0] as u64, ts[1] as u32)
}

struct Cert {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    roots: RootCertStore,
}

fn cert(alg: &'static rcgen::SignatureAlgorithm) -> Cert {
    let key = rcgen::KeyPair::generate_for(alg).expect("key");
    let params = rcgen::CertificateParams::new(vec!["localhost".into()]).expect("params");
    let cert = params.self_signed(&key).expect("cert");
    let der = cert.der().clone();
    let mut roots = RootCertStore::empty();
    roots.add(der.clone()).expect("root");
    Cert { chain: vec![der], key: PrivatePkcs8KeyDer::from(key.serialize_der()).into(), roots }
}

fn provider(name: &str) -> CryptoProvider {
    let mut p = match name {
        "aws-lc-rs" => rustls::crypto::aws_lc_rs::default_provider(),
        _ => rustls::crypto::ring::default_provider(),
    };
    // The same key exchange for both (ring has no post-quantum hybrid).
    p.kx_groups.retain(|g| g.name() == rustls::NamedGroup::X25519);
    p
}

fn configs(name: &str, cert: &Cert, v: &'static rustls::SupportedProtocolVersion) -> (Arc<ServerConfig>, Arc<ClientConfig>) {
    let p = Arc::new(provider(name));
    let mut server = ServerConfig::builder_with_provider(p.clone())
        .with_protocol_versions(&[v])
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(cert.chain.clone(), cert.key.clone_key())
        .expect("server config");
    server.ticketer = match name {
        "aws-lc-rs" => rustls::crypto::aws_lc_rs::Ticketer::new().expect("ticketer"),
        _ => rustls::crypto::ring::Ticketer::new().expect("ticketer"),
    };
    let client = ClientConfig::builder_with_provider(p)
        .with_protocol_versions(&[v])
        .expect("versions")
        .with_root_certificates(cert.roots.clone())
        .with_no_client_auth();
    (Arc::new(server), Arc::new(client))
}

/// Moves TLS bytes from one side to the other; returns server CPU spent.
fn pump(client: &mut ClientConnection, server: &mut ServerConnection) -> Duration {
    let mut server_cpu = Duration::ZERO;
    let mut buf = Vec::new();
    loop {
        let mut moved = false;
        buf.clear();
        while client.wants_write() {
            client.write_tls(&mut buf).expect("client write");
        }
        if !buf.is_empty() {
            moved = true;
            let t = thread_cpu();
            let mut rd = &buf[..];
            while !rd.is_empty() {
                server.read_tls(&mut rd).expect("server read");
                server.process_new_packets().expect("server process");
            }
            server_cpu += thread_cpu() - t;
        }
        buf.clear();
        let t = thread_cpu();
        while server.wants_write() {
            server.write_tls(&mut buf).expect("server write");
        }
        server_cpu += thread_cpu() - t;
        if !buf.is_empty() {
            moved = true;
            let mut rd = &buf[..];
            while !rd.is_empty() {
                client.read_tls(&mut rd).expect("client read");
                client.process_new_packets().expect("client process");
            }
        }
        if !moved {
            return server_cpu;
        }
    }
}

fn handshakes(name: &str, cert: &Cert, v: &'static rustls::SupportedProtocolVersion, resume: bool) -> f64 {
    let (server_cfg, client_cfg) = configs(name, cert, v);
    let n = 1000;
    let mut cpu = Duration::ZERO;
    for i in 0..=n {
        let cfg = if resume { client_cfg.clone() } else {
            // A fresh client config each time: no cached session to resume.
            let (_, c) = configs(name, cert, v);
            c
        };
        let mut client = ClientConnection::new(cfg, ServerName::try_from("localhost").unwrap()).unwrap();
        let mut server = ServerConnection::new(server_cfg.clone()).unwrap();
        let spent = pump(&mut client, &mut server);
        assert!(!server.is_handshaking());
        if resume && i > 0 {
            assert_eq!(server.handshake_kind(), Some(rustls::HandshakeKind::Resumed), "not resumed");
        }
        if i > 0 {
            cpu += spent; // the first one warms caches
        }
    }
    n as f64 / cpu.as_secs_f64()
}

fn bulk(name: &str, cert: &Cert, suite: rustls::CipherSuite) -> f64 {
    let (_, client_cfg) = configs(name, cert, &rustls::version::TLS13);
    let mut p = provider(name);
    p.cipher_suites.retain(|s| s.suite() == suite);
    let server_cfg = Arc::new(
        ServerConfig::builder_with_provider(Arc::new(p))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(cert.chain.clone(), cert.key.clone_key())
            .unwrap(),
    );
    let mut client = ClientConnection::new(client_cfg, ServerName::try_from("localhost").unwrap()).unwrap();
    let mut server = ServerConnection::new(server_cfg).unwrap();
    pump(&mut client, &mut server);
    let record = vec![7u8; 16 * 1024];
    let rounds = 20_000;
    let mut out = Vec::with_capacity(20 * 1024);
    let mut sink = vec![0u8; 20 * 1024];
    let t = thread_cpu();
    for _ in 0..rounds {
        // Server encrypts one record (a response) ...
        server.writer().write_all(&record).unwrap();
        out.clear();
        while server.wants_write() {
            server.write_tls(&mut out).unwrap();
        }
        std::hint::black_box(&out);
    }
    let enc = thread_cpu() - t;
    // ... and decrypts one (a request body) from the client.
    let mut dec = Duration::ZERO;
    for _ in 0..rounds / 4 {
        client.writer().write_all(&record).unwrap();
        out.clear();
        while client.wants_write() {
            client.write_tls(&mut out).unwrap();
        }
        let t = thread_cpu();
        let mut rd = &out[..];
        while !rd.is_empty() {
            server.read_tls(&mut rd).unwrap();
            server.process_new_packets().unwrap();
        }
        let mut got = 0;
        while got < record.len() {
            got += server.reader().read(&mut sink).unwrap();
        }
        dec += thread_cpu() - t;
    }
    let enc_mb = (rounds * record.len()) as f64 / enc.as_secs_f64() / 1e6;
    let dec_mb = (rounds / 4 * record.len()) as f64 / dec.as_secs_f64() / 1e6;
    println!("    {:?}: encrypt {:.0} MB/s, decrypt {:.0} MB/s", suite, enc_mb, dec_mb);
    enc_mb
}

fn main() {
    let ecdsa = cert(&rcgen::PKCS_ECDSA_P256_SHA256);
    let rsa = cert(&rcgen::PKCS_RSA_SHA256);
    let _ = Instant::now();
    for name in ["aws-lc-rs", "ring"] {
        println!("{name}: server handshakes per CPU-second");
        for (cname, c) in [("ECDSA P-256", &ecdsa), ("RSA-2048", &rsa)] {
            let t13 = handshakes(name, c, &rustls::version::TLS13, false);
            let t12 = handshakes(name, c, &rustls::version::TLS12, false);
            println!("    {cname}: TLS 1.3 full {t13:.0}, TLS 1.2 full {t12:.0}");
        }
        let r13 = handshakes(name, &ecdsa, &rustls::version::TLS13, true);
        let r12 = handshakes(name, &ecdsa, &rustls::version::TLS12, true);
        println!("    resumed (ticket): TLS 1.3 {r13:.0}, TLS 1.2 {r12:.0}");
        println!("  bulk, 16 KiB records, server CPU:");
        bulk(name, &ecdsa, rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
        bulk(name, &ecdsa, rustls::CipherSuite::TLS13_AES_256_GCM_SHA384);
        bulk(name, &ecdsa, rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256);
    }
}
