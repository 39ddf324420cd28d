//! [`Listener`]: one address the server accepts connections on, the
//! protocols it speaks there, and whether through TLS.
//!
//! Each worker binds every listener with `SO_REUSEPORT` (the kernel spreads
//! each address's connections over the workers) and accepts on all of them
//! in one loop. How a connection is served is settled once, at accept:
//! cleartext goes straight to the protocol driver, TLS connections first
//! finish their handshake, and ALPN picks the driver.

use std::fmt;
use std::net::SocketAddr;

#[cfg(feature = "tls")]
use crate::tls::Tls;

/// An address to accept connections on, with its protocols.
///
/// ```
/// use peregrine::server::Listener;
///
/// // Cleartext on port 8080: HTTP/1.1, and HTTP/2 for clients that open
/// // with its preface (h2c with prior knowledge).
/// let plain = Listener::new(([0, 0, 0, 0], 8080));
/// assert!(plain.speaks_http1() && plain.speaks_h2());
///
/// // HTTP/2 only (every connection must open with the preface).
/// let h2c = Listener::new(([0, 0, 0, 0], 8082)).http1(false);
/// assert!(!h2c.speaks_http1() && h2c.speaks_h2());
/// ```
/// With the `tls` feature, [`Listener::tls`] turns a listener into a TLS one
/// (see [`Tls`](crate::tls::Tls)).
#[derive(Clone)]
pub struct Listener {
    pub(crate) addr: SocketAddr,
    pub(crate) http1: bool,
    pub(crate) h2: bool,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<Tls>,
    /// HTTP/3 over UDP on the same address.
    pub(crate) h3: bool,
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Listener");
        d.field("addr", &self.addr).field("http1", &self.http1).field("h2", &self.h2).field("h3", &self.h3);
        #[cfg(feature = "tls")]
        d.field("tls", &self.tls.is_some());
        d.finish()
    }
}

impl Listener {
    /// HTTP/1.1 and HTTP/2 on `addr` (port 0: a free port, the same for
    /// every worker). Cleartext until [`Listener::tls`] is given.
    pub fn new(addr: impl Into<SocketAddr>) -> Listener {
        Listener {
            addr: addr.into(),
            http1: true,
            h2: true,
            #[cfg(feature = "tls")]
            tls: None,
            h3: false,
        }
    }

    /// Serves this listener's connections through TLS with `tls`'s
    /// certificate. ALPN offers the listener's protocols (`h2` first when
    /// HTTP/2 is on); a client that offers ALPN but none of them is refused
    /// with the `no_application_protocol` alert, as RFC 7301 asks.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: Tls) -> Listener {
        self.tls = Some(tls);
        self
    }

    /// Whether HTTP/1.1 is served (default: yes).
    pub fn http1(mut self, on: bool) -> Listener {
        self.http1 = on;
        self
    }

    /// Whether HTTP/2 is served (default: yes): through ALPN `h2` on a TLS
    /// listener, with prior knowledge on a cleartext one (told apart from
    /// HTTP/1.1 by its preface, which costs HTTP/1.1 connections nothing).
    pub fn h2(mut self, on: bool) -> Listener {
        self.h2 = on;
        self
    }

    /// Whether HTTP/3 is served (default: no): over QUIC on the same
    /// address's UDP port, with this listener's TLS certificate (required)
    /// behind ALPN `h3`. With HTTP/1.1 and HTTP/2 off, only UDP is bound.
    /// When on, every TLS listener of the server advertises it
    /// (`Alt-Svc: h3=":PORT"; ma=86400`, the first HTTP/3 listener's
    /// port): on every HTTP/2 response, and on the first final response of
    /// each HTTP/1.1 connection (clients cache it for `ma`, a day).
    /// Cleartext listeners advertise nothing: browsers take `Alt-Svc` only
    /// from `https` origins.
    ///
    /// ```no_run
    /// # fn main() -> std::io::Result<()> {
    /// use peregrine::server::Listener;
    /// use peregrine::tls::Tls;
    ///
    /// let tls = Tls::from_pem_files("/certs/server.crt", "/certs/server.key")?;
    /// // TCP 8443: TLS with HTTP/2 and HTTP/1.1; UDP 8443: HTTP/3.
    /// let listener = Listener::new(([0, 0, 0, 0], 8443)).tls(tls).http3(true);
    /// assert!(listener.speaks_h3());
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "http3")]
    pub fn http3(mut self, on: bool) -> Listener {
        self.h3 = on;
        self
    }

    /// Whether HTTP/3 is served here (over UDP).
    pub fn speaks_h3(&self) -> bool {
        self.h3
    }

    /// Whether a TCP socket is bound (HTTP/1.1 or HTTP/2 is on).
    pub(crate) fn speaks_tcp(&self) -> bool {
        self.http1 || self.h2
    }

    /// The address to bind.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether HTTP/1.1 is served here.
    pub fn speaks_http1(&self) -> bool {
        self.http1
    }

    /// Whether HTTP/2 is served here.
    pub fn speaks_h2(&self) -> bool {
        self.h2
    }

    /// Whether connections here are TLS.
    pub fn is_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// Refuses a listener that would serve nothing.
    pub(crate) fn check(&self) -> Result<(), String> {
        if !self.http1 && !self.h2 && !self.h3 {
            return Err(format!("listener {}: no protocol enabled", self.addr));
        }
        if self.h3 && !self.is_tls() {
            return Err(format!("listener {}: HTTP/3 needs TLS (Listener::tls)", self.addr));
        }
        Ok(())
    }

    /// The ALPN protocols offered, most preferred first.
    #[cfg(feature = "tls")]
    pub(crate) fn alpn(&self) -> Vec<Vec<u8>> {
        let mut alpn = Vec::new();
        if self.h2 {
            alpn.push(b"h2".to_vec());
        }
        if self.http1 {
            alpn.push(b"http/1.1".to_vec());
        }
        alpn
    }
}
