//! Listening: a busy port is reported at start, and no other process can
//! quietly take a share of the server's connections through SO_REUSEPORT.

mod common;

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use common::{config, get, start, Client};
use peregrine::{Router, Server};
use socket2::{Domain, Protocol, Socket, Type};

#[test]
fn a_second_server_on_a_busy_port_fails_to_start() {
    let server = start(config());
    let addr = server.local_addr();
    let second = Server::with_config(config()).spawn(addr, |_| async { Router::new().get("/", || "second") });
    let err = second.expect_err("a second server must not bind a port in use");
    assert_eq!(err.kind(), ErrorKind::AddrInUse, "{err}");
    assert!(err.to_string().contains("already in use"), "{err}");

    // A port held by a plain (non-peregrine) listener is busy too.
    let plain = TcpListener::bind("127.0.0.1:0").expect("bind a plain listener");
    let taken = plain.local_addr().expect("its address");
    let err = Server::with_config(config())
        .spawn(taken, |_| async { Router::new() })
        .expect_err("a port held by another listener is busy");
    assert_eq!(err.kind(), ErrorKind::AddrInUse, "{err}");
    server.shutdown();
}

#[test]
fn a_socket_joining_the_reuseport_group_gets_no_connections() {
    let server = start(peregrine::Config { workers: 2, ..config() });
    let addr: SocketAddr = server.local_addr();
    // What a second process of the same user could do: bind the port with
    // SO_REUSEPORT, which the kernel allows, and listen.
    let intruder = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("socket");
    intruder.set_reuse_port(true).expect("SO_REUSEPORT");
    intruder.bind(&addr.into()).expect("the kernel lets a same-user socket join the group");
    intruder.listen(128).expect("listen");
    intruder.set_nonblocking(true).expect("non-blocking");

    for i in 0..64 {
        let mut c = Client::connect(addr);
        c.stream.set_read_timeout(Some(Duration::from_secs(3))).expect("timeout");
        let r = c.roundtrip(&get("/plaintext"));
        assert_eq!(r.status, 200, "connection {i}");
    }
    assert!(intruder.accept().is_err(), "the intruding listener must not have received a connection");
    server.shutdown();
}

#[test]
fn every_listener_serves_the_same_router_on_every_worker() {
    let server = Server::with_config(peregrine::Config { workers: 2, ..config() })
        .listen(peregrine::Listener::new(([127, 0, 0, 1], 0)))
        .listen(peregrine::Listener::new(([127, 0, 0, 1], 0)))
        .start(|_| async { common::test_router() })
        .expect("two listeners start");
    let addrs = server.local_addrs().to_vec();
    assert_eq!(addrs.len(), 2);
    assert_ne!(addrs[0], addrs[1]);
    for addr in &addrs {
        // Enough connections that both workers take some on each port.
        for i in 0..16 {
            let mut c = Client::connect(*addr);
            assert_eq!(c.roundtrip(&get(&format!("/id/{i}"))).body, format!("id {i}").into_bytes());
        }
    }
    server.shutdown();
}

#[test]
fn listener_configurations_that_cannot_serve_are_refused_at_start() {
    let err = Server::with_config(config()).start(|_| async { Router::new() }).expect_err("no listener");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("no listener"), "{err}");
    let silent = peregrine::Listener::new(([127, 0, 0, 1], 0)).http1(false).h2(false);
    let err = Server::with_config(config())
        .listen(silent)
        .start(|_| async { Router::new() })
        .expect_err("a listener without protocols");
    assert!(err.to_string().contains("no protocol enabled"), "{err}");
    // The same address twice: the second bind reports the port busy.
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let err = Server::with_config(config())
        .listen(peregrine::Listener::new(taken))
        .listen(peregrine::Listener::new(taken))
        .start(|_| async { Router::new() })
        .expect_err("one address twice");
    assert_eq!(err.kind(), ErrorKind::AddrInUse, "{err}");
}
