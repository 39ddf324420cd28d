//! The lab's own HTTP/2 client (the h2 crate's client half over a
//! [`Connector`]'s TLS or cleartext stream), for what h2load cannot tell:
//! whether a stream was answered whole, refused by GOAWAY (never processed,
//! safe to retry), reset, or cut off with its connection. Used by shutdown
//! (streams in flight at SIGTERM), idle (connections held open), overload
//! (20,000 connections, past what h2load can hold) and probes.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::sync::{watch, Semaphore};

use super::clients::{LoopStats, REQUEST_TIMEOUT};
use super::protocol::Connector;

/// An open HTTP/2 connection: the handle to send on, its driver running
/// as a local task (aborted when dropped).
pub struct H2Conn {
    pub send: SendRequest<Bytes>,
    driver: tokio::task::JoinHandle<()>,
}

impl Drop for H2Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Connects and completes the HTTP/2 handshake (preface and SETTINGS).
pub async fn connect(connector: &Connector) -> Result<H2Conn, String> {
    let io = connector.connect().await.map_err(|e| format!("connect: {e}"))?;
    let (send, conn) = tokio::time::timeout(REQUEST_TIMEOUT, h2::client::handshake(io))
        .await
        .map_err(|_| "HTTP/2 handshake timed out".to_string())?
        .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    let driver = tokio::task::spawn_local(async move {
        let _ = conn.await;
    });
    Ok(H2Conn { send, driver })
}

/// How one request on an HTTP/2 connection ended.
#[derive(Debug)]
pub enum Outcome {
    /// A complete response (every body byte read): its status.
    Answered(u16),
    /// The connection would take no new stream (GOAWAY or closed): nothing
    /// was sent.
    NotSent(h2::Error),
    /// The server refused the stream unprocessed: GOAWAY with a lower last
    /// stream id, or REFUSED_STREAM (RFC 9113 §8.7: safe to retry). True
    /// when by GOAWAY.
    Refused(bool),
    /// The stream was reset, or its connection failed, before the response
    /// began.
    Unanswered(String),
    /// The response began but its body did not finish.
    Truncated(String),
    TimedOut,
}

/// Sends `GET path` and reads the whole response.
pub async fn get(send: &SendRequest<Bytes>, authority: &str, scheme: &str, path: &str) -> Outcome {
    fetch(send, authority, scheme, path, None).await
}

/// [`get`], keeping the response body in `body` when given.
pub async fn fetch(
    send: &SendRequest<Bytes>,
    authority: &str,
    scheme: &str,
    path: &str,
    mut body_out: Option<&mut Vec<u8>>,
) -> Outcome {
    let mut send = match send.clone().ready().await {
        Ok(s) => s,
        Err(e) => return Outcome::NotSent(e),
    };
    let request = match http::Request::get(format!("{scheme}://{authority}{path}")).body(()) {
        Ok(r) => r,
        Err(e) => return Outcome::Unanswered(format!("cannot build the request: {e}")),
    };
    let response = match send.send_request(request, true) {
        Ok((response, _)) => response,
        Err(e) => return Outcome::NotSent(e),
    };
    let finished = tokio::time::timeout(REQUEST_TIMEOUT, async move {
        let response = match response.await {
            Ok(r) => r,
            Err(e) if refused(&e) => return Outcome::Refused(e.is_go_away()),
            Err(e) => return Outcome::Unanswered(e.to_string()),
        };
        let status = response.status().as_u16();
        let mut body = response.into_body();
        let mut length = 0;
        while let Some(chunk) = body.data().await {
            match chunk {
                Ok(chunk) => {
                    length += chunk.len();
                    if let Some(out) = body_out.as_deref_mut() {
                        out.extend_from_slice(&chunk);
                    }
                    let _ = body.flow_control().release_capacity(chunk.len());
                }
                Err(e) => return Outcome::Truncated(format!("{length} body bytes, then {e}")),
            }
        }
        Outcome::Answered(status)
    });
    finished.await.unwrap_or(Outcome::TimedOut)
}

/// A stream the server will never have processed.
fn refused(e: &h2::Error) -> bool {
    e.is_go_away() || e.reason() == Some(h2::Reason::REFUSED_STREAM)
}

/// What HTTP/2 request loops saw.
#[derive(Debug, Default, Clone)]
pub struct H2Stats {
    pub ok: u64,
    pub other_status: u64,
    /// 200s completed after `signalled` turned true.
    pub ok_after_signal: u64,
    pub refused: u64,
    pub unanswered: u64,
    pub truncated: u64,
    pub timed_out: u64,
    /// Connections that ended with the server's GOAWAY.
    pub goaway: u64,
    pub connections: u64,
    pub connect_failed: u64,
    pub first_problem: Option<String>,
}

impl H2Stats {
    fn absorb(&mut self, o: H2Stats) {
        self.ok += o.ok;
        self.other_status += o.other_status;
        self.ok_after_signal += o.ok_after_signal;
        self.refused += o.refused;
        self.unanswered += o.unanswered;
        self.truncated += o.truncated;
        self.timed_out += o.timed_out;
        self.goaway += o.goaway;
        self.connections += o.connections;
        self.connect_failed += o.connect_failed;
        if self.first_problem.is_none() {
            self.first_problem = o.first_problem;
        }
    }
}

/// Runs `conns` HTTP/2 connections with `streams` request loops each
/// (cycling `paths`), reconnecting when a connection ends, until `stop`.
pub async fn loops(
    connector: Connector,
    conns: usize,
    streams: usize,
    paths: &[&str],
    signalled: watch::Receiver<bool>,
    stop: watch::Receiver<bool>,
) -> H2Stats {
    let paths: Rc<Vec<String>> = Rc::new(paths.iter().map(|p| p.to_string()).collect());
    let connector = Rc::new(connector);
    let gate = Rc::new(Semaphore::new(64));
    let mut tasks = Vec::new();
    for i in 0..conns {
        let (connector, paths, gate) = (Rc::clone(&connector), Rc::clone(&paths), Rc::clone(&gate));
        let (signalled, mut stop) = (signalled.clone(), stop.clone());
        tasks.push(tokio::task::spawn_local(async move {
            let mut stats = H2Stats::default();
            while !*stop.borrow() {
                let conn = {
                    let _permit = gate.acquire().await;
                    connect(&connector).await
                };
                let conn = match conn {
                    Ok(c) => c,
                    Err(_) => {
                        stats.connect_failed += 1;
                        tokio::select! {
                            _ = stop.changed() => {}
                            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                        }
                        continue;
                    }
                };
                stats.connections += 1;
                let mut streams_of_conn = Vec::new();
                for s in 0..streams {
                    let (send, paths, signalled, stop) =
                        (conn.send.clone(), Rc::clone(&paths), signalled.clone(), stop.clone());
                    let authority = connector.addr.to_string();
                    let scheme = connector.protocol.scheme();
                    streams_of_conn.push(tokio::task::spawn_local(async move {
                        stream_loop(send, &authority, scheme, &paths, i + s, signalled, stop).await
                    }));
                }
                let mut goaway = false;
                for task in streams_of_conn {
                    if let Ok((s, g)) = task.await {
                        stats.absorb(s);
                        goaway |= g;
                    }
                }
                stats.goaway += u64::from(goaway);
            }
            stats
        }));
    }
    let mut total = H2Stats::default();
    for task in tasks {
        if let Ok(s) = task.await {
            total.absorb(s);
        }
    }
    total
}

/// One stream slot of a connection: requests one after another until the
/// connection takes no more or `stop`; also whether a GOAWAY ended it.
async fn stream_loop(
    send: SendRequest<Bytes>,
    authority: &str,
    scheme: &str,
    paths: &[String],
    mut n: usize,
    signalled: watch::Receiver<bool>,
    stop: watch::Receiver<bool>,
) -> (H2Stats, bool) {
    let mut stats = H2Stats::default();
    let mut goaway = false;
    while !*stop.borrow() {
        let path = &paths[n % paths.len()];
        n += 1;
        match get(&send, authority, scheme, path).await {
            Outcome::Answered(200) => {
                stats.ok += 1;
                stats.ok_after_signal += u64::from(*signalled.borrow());
            }
            Outcome::Answered(..) => stats.other_status += 1,
            Outcome::NotSent(e) => {
                goaway = e.is_go_away();
                break;
            }
            Outcome::Refused(by_goaway) => {
                stats.refused += 1;
                goaway = by_goaway;
                break;
            }
            Outcome::Unanswered(why) => {
                stats.unanswered += 1;
                stats.first_problem.get_or_insert(format!("unanswered: {why}"));
                break;
            }
            Outcome::Truncated(why) => {
                stats.truncated += 1;
                stats.first_problem.get_or_insert(format!("truncated: {why}"));
                break;
            }
            Outcome::TimedOut => {
                stats.timed_out += 1;
                break;
            }
        }
    }
    (stats, goaway)
}

/// Overload's HTTP/2 client: `conns` connections, each with one request in
/// flight on `path` after another (so requests in flight equal connections,
/// as for HTTP/1.1), reconnecting when a connection ends, until `stop`.
/// Counted in HTTP/1.1's [`LoopStats`] shape: a connection refused past
/// the server's limit (closed before or right after the handshake, or
/// answered with an HTTP/1.1 `503` no HTTP/2 client can read) never
/// answers its first request and counts as a failed connect; a stream
/// refused unprocessed
/// (GOAWAY, REFUSED_STREAM) is retried on a new connection and counts as
/// unanswered.
///
/// h2load cannot do this part: it aborts with about 6,600 connections or
/// more in one process (see [`super::overload_h2`]).
pub async fn keepalive_loops(
    connector: Connector,
    conns: usize,
    path: &str,
    stop: watch::Receiver<bool>,
) -> LoopStats {
    let connector = Rc::new(connector);
    let path: Rc<str> = Rc::from(path);
    // Connect in waves, as the HTTP/1.1 loops do.
    let gate = Rc::new(Semaphore::new(256));
    let mut tasks = Vec::with_capacity(conns);
    for _ in 0..conns {
        let (connector, path, gate, mut stop) =
            (Rc::clone(&connector), Rc::clone(&path), Rc::clone(&gate), stop.clone());
        tasks.push(tokio::task::spawn_local(async move {
            let mut stats = LoopStats::default();
            let authority = connector.addr.to_string();
            let scheme = connector.protocol.scheme();
            'outer: while !*stop.borrow() {
                let conn = {
                    let _permit = gate.acquire().await;
                    connect(&connector).await
                };
                let conn = match conn {
                    Ok(c) => c,
                    Err(_) => {
                        stats.connect_failed += 1;
                        tokio::select! {
                            _ = stop.changed() => {}
                            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                        }
                        continue;
                    }
                };
                let mut answered_here = 0u64;
                while !*stop.borrow() {
                    // The clock starts once the connection can take the
                    // stream: as for HTTP/1.1, where it starts after the
                    // connect, latency is the request's, not this client's
                    // wait for a new connection's first turn.
                    let outcome = match conn.send.clone().ready().await {
                        Ok(_) => None,
                        Err(e) => Some(Outcome::NotSent(e)),
                    };
                    let sent = Instant::now();
                    let outcome = match outcome {
                        Some(not_sent) => not_sent,
                        None => get(&conn.send, &authority, scheme, &path).await,
                    };
                    let refused_at_once =
                        matches!(outcome, Outcome::NotSent(_) | Outcome::Unanswered(_) | Outcome::Refused(_));
                    if answered_here == 0 && refused_at_once {
                        // Nothing ever came back on this connection: it was
                        // refused at the limit (over h2c, the HTTP/1.1 503
                        // reads as a protocol error, GOAWAY). Back off as a
                        // failed connect does.
                        stats.connect_failed += 1;
                        tokio::select! {
                            _ = stop.changed() => {}
                            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                        }
                        continue 'outer;
                    }
                    answered_here += 1;
                    match outcome {
                        Outcome::Answered(status) => {
                            stats.latencies_ms.push(sent.elapsed().as_secs_f64() * 1000.0);
                            if status == 200 {
                                stats.ok += 1;
                            } else {
                                stats.other_status += 1;
                                stats.unavailable += u64::from(status == 503);
                            }
                        }
                        // The connection ended between requests (idle
                        // close, GOAWAY): nothing was lost.
                        Outcome::NotSent(_) => continue 'outer,
                        Outcome::Refused(_) => {
                            stats.unanswered += 1;
                            continue 'outer;
                        }
                        Outcome::Unanswered(why) => {
                            stats.unanswered += 1;
                            stats.first_problem.get_or_insert(format!("unanswered: {why}"));
                            continue 'outer;
                        }
                        Outcome::Truncated(why) => {
                            stats.truncated += 1;
                            stats.first_problem.get_or_insert(format!("truncated: {why}"));
                            continue 'outer;
                        }
                        Outcome::TimedOut => {
                            stats.timed_out += 1;
                            continue 'outer;
                        }
                    }
                }
            }
            stats
        }));
    }
    let mut total = LoopStats::default();
    for task in tasks {
        if let Ok(s) = task.await {
            total.absorb(s);
        }
    }
    total
}

/// Sends `GET path` on a fresh connection of the connector's protocol and
/// returns the status, or why there was none.
pub async fn probe(connector: &Connector, path: &str) -> Result<u16, String> {
    let started = Instant::now();
    if connector.protocol.is_h2() {
        let conn = connect(connector).await?;
        return match get(&conn.send, &connector.addr.to_string(), connector.protocol.scheme(), path).await {
            Outcome::Answered(status) => Ok(status),
            other => Err(format!("{other:?} after {:?}", started.elapsed())),
        };
    }
    use tokio::io::AsyncWriteExt;
    let mut stream = connector.connect().await.map_err(|e| format!("connect: {e}"))?;
    stream.write_all(&super::clients::get(path)).await.map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::new();
    match tokio::time::timeout(REQUEST_TIMEOUT, super::clients::read_response(&mut stream, &mut buf)).await {
        Ok(Ok(response)) => Ok(response.status),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer within 10 s".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stress::clients::block_on;
    use crate::stress::protocol::Protocol;

    /// An h2c server answering by path: `/ok` 200 "hi", `/refuse`
    /// REFUSED_STREAM, `/reset` INTERNAL_ERROR, `/cut` a body reset
    /// midway, `/bye` 200 then GOAWAY.
    async fn server(listener: tokio::net::TcpListener) {
        let Ok((socket, _)) = listener.accept().await else { return };
        let Ok(mut conn) = h2::server::handshake(socket).await else { return };
        while let Some(Ok((request, mut respond))) = conn.accept().await {
            let ok = http::Response::new(());
            match request.uri().path() {
                "/refuse" => respond.send_reset(h2::Reason::REFUSED_STREAM),
                "/reset" => respond.send_reset(h2::Reason::INTERNAL_ERROR),
                "/cut" => {
                    if let Ok(mut body) = respond.send_response(ok, false) {
                        let _ = body.send_data(Bytes::from_static(b"half"), false);
                        // Reset once the client has the head: a reset
                        // arriving with it would lose the head too.
                        tokio::task::spawn_local(async move {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            body.send_reset(h2::Reason::INTERNAL_ERROR);
                        });
                    }
                }
                path => {
                    if let Ok(mut body) = respond.send_response(ok, false) {
                        let _ = body.send_data(Bytes::from_static(b"hi"), true);
                    }
                    if path == "/bye" {
                        conn.graceful_shutdown();
                    }
                }
            }
        }
    }

    #[test]
    fn outcomes_tell_refused_reset_truncated_and_goaway_apart() {
        let outcomes = block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            tokio::task::spawn_local(server(listener));
            let connector = Connector::new(Protocol::H2c, addr, None).expect("connector");
            let conn = connect(&connector).await.expect("h2c connection");
            let authority = addr.to_string();
            let mut seen = Vec::new();
            for path in ["/ok", "/refuse", "/reset", "/cut", "/bye"] {
                seen.push(get(&conn.send, &authority, "http", path).await);
            }
            // Give the GOAWAY time to arrive, then the connection takes no
            // new stream.
            tokio::time::sleep(Duration::from_millis(100)).await;
            seen.push(get(&conn.send, &authority, "http", "/ok").await);
            seen
        })
        .expect("runtime");
        assert!(matches!(outcomes[0], Outcome::Answered(200)), "{:?}", outcomes[0]);
        assert!(matches!(outcomes[1], Outcome::Refused(false)), "{:?}", outcomes[1]);
        assert!(matches!(outcomes[2], Outcome::Unanswered(_)), "{:?}", outcomes[2]);
        assert!(matches!(outcomes[3], Outcome::Truncated(_)), "{:?}", outcomes[3]);
        assert!(matches!(outcomes[4], Outcome::Answered(200)), "{:?}", outcomes[4]);
        match &outcomes[5] {
            Outcome::NotSent(e) => assert!(e.is_go_away() || e.is_io(), "{e:?}"),
            Outcome::Refused(true) => {}
            other => panic!("a request after GOAWAY was {other:?}"),
        }
    }
}
