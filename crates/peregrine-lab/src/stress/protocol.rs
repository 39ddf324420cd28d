//! The protocol a stress scenario speaks to the server under test
//! (`--protocol`): cleartext HTTP/1.1 (`h1`, the default), HTTP/1.1 over
//! TLS (`tls`), HTTP/2 over TLS (`h2`) or cleartext HTTP/2 with prior
//! knowledge (`h2c`).
//!
//! Owns which of the server's listeners serves each (peregrine-tfb's
//! layout, moved next to `--port`), the test certificates (made with
//! `scripts/certs` when missing, never committed), the lab's TLS client
//! configuration (trusting only the test CA) and opening one client
//! connection of any of them.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsConnector;

use crate::rig::sources;

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Cleartext HTTP/1.1 on --port (today's scenarios).
    #[default]
    H1,
    /// HTTP/1.1 over TLS (ALPN http/1.1) on --port + 1.
    Tls,
    /// HTTP/2 over TLS (ALPN h2) on --port + 3.
    H2,
    /// Cleartext HTTP/2 with prior knowledge on --port + 2.
    H2c,
    /// WebSocket (RFC 6455) upgraded from cleartext HTTP/1.1 on --port,
    /// echoing on `/ws` (the load's path, whatever a scenario's --path).
    Ws,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::H1 => "h1",
            Protocol::Tls => "tls",
            Protocol::H2 => "h2",
            Protocol::H2c => "h2c",
            Protocol::Ws => "ws",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Protocol::H1 => "cleartext HTTP/1.1",
            Protocol::Tls => "HTTP/1.1 over TLS",
            Protocol::H2 => "HTTP/2 over TLS",
            Protocol::H2c => "cleartext HTTP/2 (h2c)",
            Protocol::Ws => "WebSocket over cleartext HTTP/1.1",
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, Protocol::Tls | Protocol::H2)
    }

    pub fn is_h2(self) -> bool {
        matches!(self, Protocol::H2 | Protocol::H2c)
    }

    /// The listener serving this protocol, counted from `--port`.
    pub fn port_offset(self) -> u16 {
        match self {
            Protocol::H1 | Protocol::Ws => 0,
            Protocol::Tls => 1,
            Protocol::H2c => 2,
            Protocol::H2 => 3,
        }
    }

    /// Whether it is served by the cleartext HTTP/1.1 listener on
    /// --port alone (no other listener needed).
    pub fn on_main_port(self) -> bool {
        matches!(self, Protocol::H1 | Protocol::Ws)
    }

    pub fn scheme(self) -> &'static str {
        match self {
            Protocol::Tls | Protocol::H2 => "https",
            Protocol::Ws => "ws",
            Protocol::H1 | Protocol::H2c => "http",
        }
    }

    /// The ALPN protocols a client of this kind offers.
    fn alpn(self) -> Vec<Vec<u8>> {
        match self {
            Protocol::H2 => vec![b"h2".to_vec()],
            _ => vec![b"http/1.1".to_vec()],
        }
    }
}

/// The test certificates: a CA and a server certificate it signed for
/// localhost and 127.0.0.1.
#[derive(Clone, Debug)]
pub struct Certs {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Certs {
    /// The certificates in `dir`, made there with `scripts/certs` (run from
    /// the repository root) when any is missing.
    pub fn ensure(dir: &Path) -> Result<Certs, String> {
        let certs =
            Certs { ca: dir.join("ca.crt"), cert: dir.join("server.crt"), key: dir.join("server.key") };
        if [&certs.ca, &certs.cert, &certs.key].iter().all(|p| p.exists()) {
            return Ok(certs);
        }
        let script = Path::new("scripts/certs");
        if !script.exists() {
            return Err(format!(
                "no certificates in {} and no scripts/certs here to make them; run scripts/certs {} \
                 from the repository root, or pass --certs",
                dir.display(),
                dir.display()
            ));
        }
        let status =
            Command::new(script).arg(dir).status().map_err(|e| format!("cannot run scripts/certs: {e}"))?;
        if !status.success() {
            return Err(format!("scripts/certs {} failed ({status})", dir.display()));
        }
        Ok(certs)
    }
}

/// Server flags opening the TLS and h2c listeners next to `port`: TLS
/// HTTP/1.1 on port + 1, h2c on port + 2, TLS h2 + HTTP/1.1 on port + 3.
/// Explicit ports, so a run never collides with a server on the defaults.
pub fn listener_flags(port: u16, certs: Option<&Certs>) -> Vec<String> {
    let mut flags = vec!["--h2c-port".to_string(), (port + Protocol::H2c.port_offset()).to_string()];
    if let Some(certs) = certs {
        flags.extend([
            "--tls-cert".to_string(),
            certs.cert.display().to_string(),
            "--tls-key".to_string(),
            certs.key.display().to_string(),
            "--tls-port".to_string(),
            (port + Protocol::Tls.port_offset()).to_string(),
            "--tls-h2-port".to_string(),
            (port + Protocol::H2.port_offset()).to_string(),
        ]);
    }
    flags
}

/// A client TLS configuration trusting only the CA in `ca`, offering
/// `alpn`. The provider is named (aws-lc-rs, as the server's), so nothing
/// depends on a process-wide default.
pub fn client_config(ca: &Path, alpn: Vec<Vec<u8>>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let cert =
        CertificateDer::from_pem_file(ca).map_err(|e| format!("cannot read CA {}: {e}", ca.display()))?;
    roots.add(cert).map_err(|e| format!("CA {}: {e}", ca.display()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS client configuration: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn;
    Ok(Arc::new(config))
}

/// The first flight a TLS client of `protocol` sends (its ClientHello,
/// offering the protocol's ALPN), as bytes to write by hand: the slow
/// scenario dribbles it to hold a handshake open.
pub fn client_hello(protocol: Protocol, ca: &Path) -> Result<Vec<u8>, String> {
    let config = client_config(ca, protocol.alpn())?;
    let name = ServerName::try_from("localhost").map_err(|e| format!("server name: {e}"))?;
    let mut conn =
        rustls::ClientConnection::new(config, name).map_err(|e| format!("TLS client connection: {e}"))?;
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).map_err(|e| format!("ClientHello: {e}"))?;
    Ok(hello)
}

/// A client connection of any protocol: a TCP stream, TLS on it or not.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Opens client connections to one listener of the server under test.
#[derive(Clone)]
pub struct Connector {
    pub addr: SocketAddr,
    pub protocol: Protocol,
    tls: Option<TlsConnector>,
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl Connector {
    /// A connector for `protocol` at `addr`; TLS ones need the test CA.
    pub fn new(protocol: Protocol, addr: SocketAddr, ca: Option<&Path>) -> Result<Connector, String> {
        let tls = if protocol.uses_tls() {
            let ca = ca.ok_or_else(|| format!("{} needs the test CA", protocol.describe()))?;
            Some(TlsConnector::from(client_config(ca, protocol.alpn())?))
        } else {
            None
        };
        Ok(Connector { addr, protocol, tls })
    }

    /// Connects (and completes the TLS handshake, checking the server
    /// agreed to the ALPN protocol asked for).
    pub async fn connect(&self) -> io::Result<Box<dyn Io>> {
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, sources::connect(self.addr))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
        let _ = tcp.set_nodelay(true);
        let Some(tls) = &self.tls else { return Ok(Box::new(tcp)) };
        let name = ServerName::try_from("localhost").map_err(io::Error::other)?;
        let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.connect(name, tcp))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
        let agreed = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        if self.protocol == Protocol::H2 && agreed.as_deref() != Some(b"h2") {
            return Err(io::Error::other(format!("server did not agree to h2 (ALPN {agreed:?})")));
        }
        Ok(Box::new(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_protocol_has_its_own_port_and_scheme() {
        let all = [Protocol::H1, Protocol::Tls, Protocol::H2, Protocol::H2c];
        let mut offsets: Vec<u16> = all.iter().map(|p| p.port_offset()).collect();
        offsets.sort_unstable();
        offsets.dedup();
        assert_eq!(offsets, [0, 1, 2, 3]);
        assert_eq!(Protocol::H1.scheme(), "http");
        assert_eq!(Protocol::H2c.scheme(), "http");
        assert_eq!(Protocol::Tls.scheme(), "https");
        assert_eq!(Protocol::Ws.scheme(), "ws");
        assert!(Protocol::H2.uses_tls() && Protocol::H2.is_h2());
        assert!(!Protocol::Tls.is_h2() && !Protocol::H2c.uses_tls());
    }

    #[test]
    fn listener_flags_move_every_port_next_to_the_base() {
        assert_eq!(listener_flags(9000, None).join(" "), "--h2c-port 9002");
        let certs = Certs { ca: "c/ca.crt".into(), cert: "c/server.crt".into(), key: "c/server.key".into() };
        assert_eq!(
            listener_flags(9000, Some(&certs)).join(" "),
            "--h2c-port 9002 --tls-cert c/server.crt --tls-key c/server.key --tls-port 9001 --tls-h2-port 9003"
        );
    }

    #[test]
    fn a_client_hello_is_one_tls_handshake_record() {
        let dir = std::env::temp_dir().join(format!("lab-hello-{}", std::process::id()));
        // Tests run in the crate's directory: the script is two levels up.
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/certs");
        assert!(Command::new(script).arg(&dir).status().unwrap().success());
        let certs = Certs::ensure(&dir).unwrap();
        let hello = client_hello(Protocol::H2, &certs.ca).unwrap();
        // Content type 22 (handshake), then message type 1 (ClientHello).
        assert_eq!(hello[0], 22);
        assert_eq!(hello[5], 1);
        let len = u16::from_be_bytes([hello[3], hello[4]]) as usize;
        assert_eq!(hello.len(), 5 + len);
        assert!(hello.windows(2).any(|w| w == b"h2"), "ALPN h2 not offered");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tls_connector_needs_a_readable_ca() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        assert!(Connector::new(Protocol::Tls, addr, None).is_err());
        assert!(Connector::new(Protocol::H2, addr, Some(Path::new("/nonexistent/ca.crt"))).is_err());
        assert!(Connector::new(Protocol::H2c, addr, None).is_ok());
    }
}
