//! HTTP/3 (RFC 9114) over QUIC (RFC 9000): the connection driver on
//! `quinn` (QUIC: packets, loss recovery, congestion control, stream flow
//! control, TLS 1.3 through rustls) and `h3` (HTTP/3 framing, the control
//! streams, QPACK), with our own glue between the two ([`quic`]).
//!
//! # Crates and versions
//! `quinn` 0.11 (0.11.12 when this was written) with only the
//! `runtime-tokio` and `rustls-aws-lc-rs` features: QUIC's TLS runs on the
//! workspace's rustls 0.23 with the same aws-lc-rs provider the TCP
//! listeners use (chosen by measurement, see [`crate::tls`]), so no second
//! crypto library is built. `h3` 0.0.8, released for quinn 0.11. The glue
//! `h3-quinn` 0.0.10 would give is in [`quic`] instead: `h3-quinn` keeps
//! quinn's streams private, so a client's cancel could not reach the
//! handler and a stream's bytes could not be counted for the minimum
//! rates (the tests still use it, as the client's glue).
//! `quiche` was the alternative the issue names; it brings BoringSSL and
//! its own TLS stack, so it could not share the certificate store and the
//! reload of the TCP listeners. No measurement chose between them.
//!
//! # One endpoint per worker
//! Each worker owns one `quinn::Endpoint` on its own UDP socket. All the
//! workers' sockets are bound to the listener's address with
//! `SO_REUSEPORT`, and the endpoint runs on that worker's runtime, so a
//! connection's packets, its handshake, its streams and its handlers all
//! stay on one thread, as a TCP connection's do. The other designs were
//! not measured; by construction they cost more: one shared endpoint would move every packet of most connections
//! across threads, and a dispatcher thread would add a hop to every
//! datagram. The kernel picks the socket from a hash of the 4-tuple, so a
//! connection's packets keep arriving at the same worker; the TCP
//! listeners' BPF program (which picks at random) is not attached to UDP
//! groups, since QUIC needs that stickiness. A client that changes
//! address (migration, NAT rebinding) may hash to another worker, whose
//! endpoint does not know the connection: it answers with a stateless
//! reset (every worker shares one reset key, so the reset is valid) and the
//! client opens a new connection.
//!
//! quinn's UDP layer (`quinn-udp`) uses the kernel's segmentation offload
//! (`UDP_SEGMENT`, GSO) to send many packets in one `sendmsg` and receive
//! offload (`UDP_GRO`) to take coalesced datagrams in one `recvmsg`,
//! whenever the kernel offers them; it falls back to one datagram a call
//! otherwise.
//!
//! # Limits
//! From [`Http3Config`](crate::config::Http3Config): concurrent request
//! streams, stream and connection flow-control windows, the largest header
//! section (a larger one is answered `431` by `h3`). The QPACK dynamic table
//! has capacity 0: `h3` decodes statelessly, so a header block that refers
//! to a dynamic entry is the connection error `QPACK_DECOMPRESSION_FAILED`.
//! The handshake has the header timeout, a quiet connection QUIC's idle
//! timeout ([`Config::idle_timeout`](crate::Config::idle_timeout)); each
//! request's head must come within the header timeout too. Before a
//! client's address is validated quinn sends at most three times what it
//! received (RFC 9000 §8.1); once a worker has more handshakes in progress
//! than `retry_above_handshakes`, new clients are asked to prove their
//! address with a Retry first. A worker holds at most
//! `max_connections_per_worker` QUIC connections; more are refused
//! (`CONNECTION_REFUSED`).
//!
//! Each request stream is held to
//! [`min_request_body_rate`](crate::Config::min_request_body_rate) and
//! [`min_response_rate`](crate::Config::min_response_rate) by itself
//! ([`pace`]): a slow stream is cut, its connection goes on. A client that
//! stops (`STOP_SENDING`) or resets (`RESET_STREAM`) a request stream has
//! its handler dropped, as HTTP/2's `RST_STREAM` does ([`stream`]). There
//! is no I/O timeout: a stream that makes no progress at all falls below
//! the rates (or the connection goes quiet, and QUIC's idle timeout ends
//! it).
//!
//! # Shutdown
//! When the worker's shutdown begins, each connection sends `GOAWAY`
//! (requests already accepted finish; later ones are refused with
//! `H3_REQUEST_REJECTED`, which clients retry elsewhere) and the endpoint
//! accepts no more connections. Connections close with `H3_NO_ERROR` once
//! their requests are answered, or when the shutdown timeout ends.

mod fields;
mod pace;
mod quic;
mod stream;

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;

use crate::config::Config;
use crate::router::Router;
use crate::tls::Tls;
use crate::worker::Worker;

/// `H3_NO_ERROR` (RFC 9114 §8.1), the code of a clean close.
const H3_NO_ERROR: u32 = 0x100;

/// Unidirectional streams a client may open: its control stream and the
/// two QPACK streams, with room for a few it may add (grease, or types this
/// server ignores). RFC 9114 §6.2 asks for at least 3.
const UNI_STREAMS: u32 = 8;

/// How long a connection that has answered everything lingers before the
/// close, so the peer can acknowledge the last responses (a QUIC close
/// abandons data not yet acknowledged).
const CLOSE_LINGER: Duration = Duration::from_millis(200);

/// The QUIC server configuration of a listener: `tls`'s certificate store
/// (reloads included) behind ALPN `h3`, the limits of `config`. One per
/// listener, shared by every worker, so the address-validation tokens one
/// worker issues are valid at the others.
pub(crate) fn server_config(tls: &Tls, config: &Config) -> io::Result<quinn::ServerConfig> {
    let mut server = quinn::ServerConfig::with_crypto(tls.quic_crypto()?);
    let h3 = &config.http3;
    let idle = quinn::IdleTimeout::try_from(config.idle_timeout).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("idle timeout too long for QUIC: {e}"))
    })?;
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(quinn::VarInt::from_u32(h3.max_concurrent_streams))
        .max_concurrent_uni_streams(quinn::VarInt::from_u32(UNI_STREAMS))
        .stream_receive_window(quinn::VarInt::from_u32(h3.stream_window))
        .receive_window(quinn::VarInt::from_u32(h3.connection_window))
        .max_idle_timeout(Some(idle));
    server.transport_config(Arc::new(transport));
    Ok(server)
}

/// The endpoint configuration every worker's endpoint shares: one
/// stateless-reset key, so a worker can reset a connection another worker
/// holds (a client whose new address hashes elsewhere).
pub(crate) fn endpoint_config() -> quinn::EndpointConfig {
    quinn::EndpointConfig::default()
}

/// Opens a worker's endpoint on its `SO_REUSEPORT` socket; must run on the
/// worker's runtime, where the endpoint's I/O task is spawned.
pub(crate) fn endpoint(
    config: quinn::EndpointConfig,
    server: quinn::ServerConfig,
    socket: std::net::UdpSocket,
) -> io::Result<quinn::Endpoint> {
    quinn::Endpoint::new(config, Some(server), socket, Arc::new(quinn::TokioRuntime))
}

/// The connections one endpoint holds, for its limits and its drain.
#[derive(Default)]
struct Counts {
    live: Cell<usize>,
    handshaking: Cell<usize>,
    /// Woken when a connection ends.
    closed: Notify,
}

/// Counts one connection while it lives.
struct Live(Rc<Counts>);

impl Live {
    fn new(counts: &Rc<Counts>) -> Live {
        counts.live.set(counts.live.get() + 1);
        Live(Rc::clone(counts))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.live.set(self.0.live.get() - 1);
        self.0.closed.notify_one();
    }
}

/// Counts one handshake while it runs.
struct Handshaking<'a>(&'a Counts);

impl<'a> Handshaking<'a> {
    fn new(counts: &'a Counts) -> Handshaking<'a> {
        counts.handshaking.set(counts.handshaking.get() + 1);
        Handshaking(counts)
    }
}

impl Drop for Handshaking<'_> {
    fn drop(&mut self) {
        self.0.handshaking.set(self.0.handshaking.get() - 1);
    }
}

/// What every stream task of one connection shares.
struct Shared<S: 'static> {
    peer: Option<SocketAddr>,
    worker: Rc<Worker>,
    router: Rc<Router<S>>,
}

/// Serves one worker's endpoint until shutdown, then drains it.
pub(crate) async fn serve_endpoint<S: 'static>(
    endpoint: quinn::Endpoint,
    worker: Rc<Worker>,
    router: Rc<Router<S>>,
) {
    let counts = Rc::new(Counts::default());
    loop {
        let incoming = tokio::select! {
            biased;
            () = worker.shutdown_begun() => break,
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => incoming,
                None => break,
            },
        };
        admit(incoming, &counts, &worker, &router);
    }
    // Shutdown: no new connections; those open send GOAWAY (they watch the
    // same signal) and end when their requests are answered.
    endpoint.set_server_config(None);
    let deadline = tokio::time::Instant::now() + worker.config.shutdown_timeout;
    while counts.live.get() > 0 {
        if tokio::time::timeout_at(deadline, counts.closed.notified()).await.is_err() {
            break;
        }
    }
    endpoint.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"shutdown");
    let _ = tokio::time::timeout(CLOSE_LINGER, endpoint.wait_idle()).await;
}

/// Takes a new connection attempt: refuses it over the connection limit,
/// asks for address validation under handshake load, or serves it.
fn admit<S: 'static>(
    incoming: quinn::Incoming,
    counts: &Rc<Counts>,
    worker: &Rc<Worker>,
    router: &Rc<Router<S>>,
) {
    let config = &worker.config;
    if counts.live.get() >= config.max_connections_per_worker {
        incoming.refuse();
        return;
    }
    if let Some(limit) = config.http3.retry_above_handshakes {
        if counts.handshaking.get() >= limit && !incoming.remote_address_validated() && incoming.may_retry() {
            if let Err(e) = incoming.retry() {
                tracing::debug!(error = %e, "QUIC Retry failed");
            }
            return;
        }
    }
    let live = Live::new(counts);
    tokio::task::spawn_local(serve_connection(incoming, live, Rc::clone(worker), Rc::clone(router)));
}

/// Serves one QUIC connection: the handshake, then HTTP/3 request streams
/// until the connection ends or shutdown has drained it.
async fn serve_connection<S: 'static>(
    incoming: quinn::Incoming,
    live: Live,
    worker: Rc<Worker>,
    router: Rc<Router<S>>,
) {
    let config = &worker.config;
    let peer = incoming.remote_address();
    // The handshake and HTTP/3's SETTINGS are the connection's head.
    let started = {
        let _handshaking = Handshaking::new(&live.0);
        tokio::time::timeout(config.header_timeout, async {
            let conn = incoming.await.map_err(|e| e.to_string())?;
            let mut builder = h3::server::builder();
            builder.max_field_section_size(u64::from(config.http3.max_header_list_bytes));
            let (glue, accepted) = quic::Conn::new(conn.clone());
            let h3 = builder.build::<_, Bytes>(glue).await.map_err(|e| e.to_string())?;
            Ok::<_, String>((conn, h3, accepted))
        })
        .await
    };
    let (conn, mut h3, accepted) = match started {
        Ok(Ok(started)) => started,
        Ok(Err(why)) => {
            tracing::debug!(%peer, error = why, "QUIC handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "QUIC handshake timed out");
            return;
        }
    };
    let shared = Rc::new(Shared { peer: Some(peer), worker: Rc::clone(&worker), router });
    let shutdown = worker.shutdown_begun();
    tokio::pin!(shutdown);
    let mut draining = false;
    loop {
        let next = if draining {
            h3.accept().await
        } else {
            tokio::select! {
                biased;
                () = &mut shutdown => {
                    // GOAWAY: streams accepted so far are answered.
                    if let Err(e) = h3.shutdown(0).await {
                        tracing::debug!(error = %e, "HTTP/3 GOAWAY failed");
                        return;
                    }
                    draining = true;
                    continue;
                }
                next = h3.accept() => next,
            }
        };
        match next {
            Ok(Some(resolver)) => {
                // The glue has just accepted this stream.
                let Some(probe) = accepted.borrow_mut().take() else {
                    tracing::error!("HTTP/3 request stream without its probe");
                    continue;
                };
                tokio::task::spawn_local(stream::serve(resolver, probe, Rc::clone(&shared)));
            }
            // Every request answered after a GOAWAY (ours or the client's).
            Ok(None) => break,
            Err(e) => {
                // The client closed, the idle timeout ended it, or `h3`
                // closed it for a protocol error (with that error's code).
                tracing::debug!(%peer, error = %e, "HTTP/3 connection ended");
                return;
            }
        }
    }
    let _ = tokio::time::timeout(CLOSE_LINGER, conn.closed()).await;
    conn.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
    drop(live);
}
