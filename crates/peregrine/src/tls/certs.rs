//! The server's certificate and key: loaded from PEM files, replaced in
//! place when the files change, never half-replaced.
//!
//! [`CertStore`] is rustls's certificate resolver. Every handshake reads the
//! current [`CertifiedKey`] through an [`ArcSwap`] (one atomic load, no
//! lock, so workers never contend); a reload builds the new one completely
//! (chain parsed, key loaded, key checked against the certificate) before
//! swapping it in. Connections that finished their handshake keep their
//! session keys and are never disturbed. A reload that fails (missing
//! file, bad PEM, a key that does not match the certificate) keeps the old
//! certificate and says why.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Why a certificate or key could not be loaded.
#[derive(Debug)]
pub(crate) struct LoadError(String);

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a file looked like when it was last read: a change in any of these
/// means it was rewritten or replaced (renamed over, as tools that write
/// certificates atomically do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp { modified: meta.modified().ok(), len: meta.len(), inode: meta.ino() })
}

/// The current certificate and key, and the files they come from.
pub(crate) struct CertStore {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: ArcSwap<CertifiedKey>,
    /// The files' stamps at the last load attempt, successful or not: a
    /// broken file is reported once, not once a poll.
    seen: Mutex<(Option<Stamp>, Option<Stamp>)>,
}

impl fmt::Debug for CertStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertStore").field("cert", &self.cert_path).field("key", &self.key_path).finish()
    }
}

/// How a reload went.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reloaded {
    /// The files are as they were at the last attempt.
    Unchanged,
    /// A new certificate is in use.
    Replaced,
}

impl CertStore {
    /// Loads `cert_path` (the chain, leaf first) and `key_path`.
    pub(crate) fn open(
        cert_path: &Path,
        key_path: &Path,
        provider: Arc<CryptoProvider>,
    ) -> Result<CertStore, LoadError> {
        let seen = (stamp(cert_path), stamp(key_path));
        let key = load(cert_path, key_path, &provider)?;
        Ok(CertStore {
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            provider,
            current: ArcSwap::from_pointee(key),
            seen: Mutex::new(seen),
        })
    }

    /// Reads the files again if they changed since the last attempt (or
    /// always, with `force`) and swaps the new certificate in. On error the
    /// old certificate stays in use.
    pub(crate) fn reload(&self, force: bool) -> Result<Reloaded, LoadError> {
        let now = (stamp(&self.cert_path), stamp(&self.key_path));
        {
            let mut seen = self.seen.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if !force && *seen == now {
                return Ok(Reloaded::Unchanged);
            }
            *seen = now;
        }
        let key = load(&self.cert_path, &self.key_path, &self.provider)?;
        self.current.store(Arc::new(key));
        Ok(Reloaded::Replaced)
    }

    /// The certificate files, for log lines.
    pub(crate) fn describe(&self) -> String {
        format!("{} and {}", self.cert_path.display(), self.key_path.display())
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// Parses the chain and the key and checks that they belong together.
fn load(cert_path: &Path, key_path: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, LoadError> {
    let chain = CertificateDer::pem_file_iter(cert_path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| LoadError(format!("cannot read certificates from {}: {e}", cert_path.display())))?;
    if chain.is_empty() {
        return Err(LoadError(format!("{} holds no PEM certificate", cert_path.display())));
    }
    let key = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|e| LoadError(format!("cannot read a private key from {}: {e}", key_path.display())))?;
    CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        LoadError(format!(
            "the key in {} does not fit the certificate in {}: {e}",
            key_path.display(),
            cert_path.display()
        ))
    })
}
