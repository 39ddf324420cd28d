//! The lab's client sockets: a connection to a loopback server comes from
//! the next of [`LOOPBACK_SOURCES`] loopback addresses in turn, with the
//! port left to `connect` (`IP_BIND_ADDRESS_NO_PORT`), so that each source
//! has its own ephemeral port range.
//!
//! Why: from one source address to one listener, the kernel has one
//! ephemeral port range (28,232 ports by default) for every connection,
//! and picking a free port walks the ports in use. With 20,000
//! connections held, `perf` on the load CPU showed 43% of it in
//! `__inet_check_established` under `connect`: the connect phase ran past
//! the middle of a 10 s overload run, and the CPU it took made every held
//! connection's requests wait (`stress overload --protocol h2c
//! --connections 20000`: p99 2,012 to 2,222 ms with the server 23% busy;
//! 489 ms after). Real clients come from many addresses.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU8, Ordering};

use tokio::net::{TcpSocket, TcpStream};

/// Loopback sources: 127.0.0.2 up to 127.0.0.33. 32 keep each one's port
/// range under a thirtieth full at 20,000 connections.
const LOOPBACK_SOURCES: u8 = 32;

/// A socket for a connection to `addr`, bound to the next loopback source
/// when `addr` is an IPv4 loopback address; options that must precede
/// `connect` (buffer sizes) may still be set on it.
pub fn socket(addr: SocketAddr) -> io::Result<TcpSocket> {
    static NEXT_SOURCE: AtomicU8 = AtomicU8::new(0);
    let SocketAddr::V4(v4) = addr else { return TcpSocket::new_v6() };
    let socket = TcpSocket::new_v4()?;
    if v4.ip().is_loopback() {
        bind_address_no_port(&socket)?;
        let host = 2 + NEXT_SOURCE.fetch_add(1, Ordering::Relaxed) % LOOPBACK_SOURCES;
        socket.bind(SocketAddr::from((Ipv4Addr::new(127, 0, 0, host), 0)))?;
    }
    Ok(socket)
}

/// Connects to `addr` from [`socket`].
pub async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    socket(addr)?.connect(addr).await
}

/// Sets `IP_BIND_ADDRESS_NO_PORT` (Linux 4.2): a `bind` to port 0 then
/// picks only the address, and `connect` picks the port, unique per
/// four-tuple rather than per address.
fn bind_address_no_port(socket: &TcpSocket) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: `socket` owns a valid descriptor for the call's duration, and
    // the option value is a live c_int passed with its size.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_connections_come_from_many_source_addresses() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let sources = runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            let mut sources = std::collections::BTreeSet::new();
            let mut held = Vec::new();
            for _ in 0..8 {
                let stream = connect(addr).await.expect("connect");
                let (_, peer) = listener.accept().await.expect("accept");
                // The server sees the address the client bound.
                assert_eq!(Some(peer), stream.local_addr().ok());
                sources.insert(peer.ip());
                held.push(stream);
            }
            sources
        });
        // Other tests connect at the same time and take turns of their
        // own, so which sources these eight get varies; one source for all
        // of them would be the old single-address behaviour.
        assert!(sources.len() >= 2, "{sources:?}");
        assert!(
            sources.iter().all(|ip| ip.is_loopback() && *ip != std::net::Ipv4Addr::LOCALHOST),
            "{sources:?}"
        );
    }
}
