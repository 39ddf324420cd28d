//! TLS for listeners: [`Tls`] holds a server's certificate (from PEM files,
//! reloaded while the server runs) and its session-resumption state; a
//! [`Listener`](crate::server::Listener) given a `Tls` speaks TLS 1.2 and
//! 1.3 through rustls, with rustls's safe defaults (forward-secret AEAD
//! suites only, no renegotiation, no compression, no 0-RTT).
//!
//! # The crypto provider: aws-lc-rs
//! rustls offers two. Measured on this project's 2-core machine with
//! `lab/tls-provider` (the server's side of in-memory handshakes, X25519
//! for both, server CPU time only; the table in its README), aws-lc-rs
//! does more per server CPU-second everywhere a server spends it:
//!
//! | server CPU-second            | aws-lc-rs | ring  |
//! |------------------------------|----------:|------:|
//! | TLS 1.2 full, ECDSA P-256    | 11,500    | 7,300–8,600 |
//! | TLS 1.3 full, RSA-2048       | 2,000     | 1,100–1,300 |
//! | AES-128-GCM encrypt, MB/s    | 9,600     | 7,300 |
//!
//! TLS 1.3 full handshakes with an ECDSA key and resumed ones come out even
//! within the machine's noise (6,300–8,400 against 7,400–7,500; 9,300–9,600
//! against 8,700–8,900). ring's only advantage, a build without a C
//! toolchain step, matters less than a third more bulk throughput and
//! nearly twice the RSA handshakes, the key type most certificates still
//! have.
//!
//! # Session resumption
//! Both kinds: stateless tickets (TLS 1.3 and 1.2; rustls's ticketer, AES-256
//! keys rotated every 6 hours, shared by every worker and listener of one
//! `Tls`), and for TLS 1.2 clients without ticket support a session-ID
//! cache of [`SESSION_CACHE`] entries per listener.
//!
//! # Reloading
//! The certificate and key files are watched (their metadata polled once a
//! second; see [`Tls::poll_interval`]) and reread on `SIGHUP` or
//! [`Tls::reload`]. A new certificate serves the next handshake; connections
//! already open go on undisturbed. Files that do not load keep the old
//! certificate in use, and the error is logged.

mod certs;
pub(crate) mod reload;

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::server::ServerSessionMemoryCache;
use rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

use certs::CertStore;

/// TLS 1.2 sessions remembered per listener for clients that resume by
/// session ID instead of a ticket (about 200 bytes each).
pub const SESSION_CACHE: usize = 4096;

/// Default interval between checks of the certificate files.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// A server certificate with its key, and the state TLS listeners share:
/// give the same `Tls` (it is a cheap clone) to several listeners.
///
/// ```no_run
/// use peregrine::server::Listener;
/// use peregrine::tls::Tls;
/// use peregrine::{Router, Server};
///
/// fn main() -> std::io::Result<()> {
///     let tls = Tls::from_pem_files("/certs/server.crt", "/certs/server.key")?;
///     Server::new()
///         .listen(Listener::new(([0, 0, 0, 0], 8080)))
///         .listen(Listener::new(([0, 0, 0, 0], 8443)).tls(tls))
///         .run(|_| async { Router::new().get("/", || "hello") })
/// }
/// ```
#[derive(Clone)]
pub struct Tls {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    certs: Arc<CertStore>,
    provider: Arc<rustls::crypto::CryptoProvider>,
    ticketer: Arc<dyn rustls::server::ProducesTickets>,
    poll_interval: Option<Duration>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("certs", &self.inner.certs)
            .field("poll_interval", &self.inner.poll_interval)
            .finish()
    }
}

impl Tls {
    /// Loads the certificate chain (PEM, leaf first, then intermediates)
    /// and its private key (PEM: PKCS#8, PKCS#1 or SEC1). Fails if a file
    /// is missing or unreadable, holds no certificate or key, or the key
    /// does not belong to the certificate.
    pub fn from_pem_files(cert: impl AsRef<Path>, key: impl AsRef<Path>) -> io::Result<Tls> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let certs = CertStore::open(cert.as_ref(), key.as_ref(), Arc::clone(&provider))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()
            .map_err(|e| io::Error::other(format!("cannot set up TLS session tickets: {e}")))?;
        Ok(Tls {
            inner: Arc::new(Inner {
                certs: Arc::new(certs),
                provider,
                ticketer,
                poll_interval: Some(POLL_INTERVAL),
            }),
        })
    }

    /// How often a running server checks the certificate files for a
    /// change (a `stat` of each); `None` checks only on `SIGHUP` and
    /// [`Tls::reload`]. Default: every second. Set it before giving this
    /// `Tls` to a listener.
    pub fn poll_interval(self, every: Option<Duration>) -> Tls {
        let inner = Inner {
            certs: Arc::clone(&self.inner.certs),
            provider: Arc::clone(&self.inner.provider),
            ticketer: Arc::clone(&self.inner.ticketer),
            poll_interval: every.map(|d| d.max(Duration::from_millis(10))),
        };
        Tls { inner: Arc::new(inner) }
    }

    /// Reads the certificate and key files again now, and serves the new
    /// certificate from the next handshake on. On error the previous
    /// certificate stays in use.
    pub fn reload(&self) -> io::Result<()> {
        self.inner
            .certs
            .reload(true)
            .map(|_| ())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
    }

    /// Whether two values share one certificate store.
    pub(crate) fn same_store(&self, other: &Tls) -> bool {
        Arc::ptr_eq(&self.inner.certs, &other.inner.certs)
    }

    /// The acceptor of a listener whose ALPN offers `alpn` (most preferred
    /// first).
    pub(crate) fn acceptor(&self, alpn: Vec<Vec<u8>>) -> io::Result<TlsAcceptor> {
        let inner = &self.inner;
        let mut config = ServerConfig::builder_with_provider(Arc::clone(&inner.provider))
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| io::Error::other(format!("TLS configuration: {e}")))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(&inner.certs) as _);
        config.alpn_protocols = alpn;
        config.ticketer = Arc::clone(&inner.ticketer);
        config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
        Ok(TlsAcceptor::from(Arc::new(config)))
    }

    /// The TLS side of an HTTP/3 listener: TLS 1.3 only (QUIC has no
    /// other), ALPN `h3`, the same certificate store (and so the same
    /// reloads) and ticket keys as the TCP listeners, no 0-RTT.
    #[cfg(feature = "http3")]
    pub(crate) fn quic_crypto(&self) -> io::Result<Arc<quinn::crypto::rustls::QuicServerConfig>> {
        let inner = &self.inner;
        let mut config = ServerConfig::builder_with_provider(Arc::clone(&inner.provider))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| io::Error::other(format!("TLS configuration: {e}")))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(&inner.certs) as _);
        config.alpn_protocols = vec![b"h3".to_vec()];
        config.ticketer = Arc::clone(&inner.ticketer);
        let quic = quinn::crypto::rustls::QuicServerConfig::try_from(Arc::new(config))
            .map_err(|e| io::Error::other(format!("QUIC TLS configuration: {e}")))?;
        Ok(Arc::new(quic))
    }
}
