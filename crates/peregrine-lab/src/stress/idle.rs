//! Idle connections: what an open, quiet connection costs the server in
//! memory, for each protocol, and that closing them gives every file
//! descriptor back.
//!
//! For each of `--protocols`, a fresh server (so memory one protocol freed
//! is not reused by the next and hidden) gets `--connections` connections,
//! each completing one `GET /plaintext` and then left open and silent
//! (with `ws`: a WebSocket upgrade of `/ws`, answered `101`, and one text
//! message echoed).
//! The server's resident memory (`VmRSS`) and open file descriptors are
//! read from `/proc` before and while they are held; the difference over
//! the count is the cost of one idle connection. Then they all close and
//! the descriptors must return to the starting count.
//!
//! Checked: every connection was opened and answered 200, the server held
//! one descriptor per connection, memory per idle connection is at most
//! `--max-kib-per-connection`, and the descriptors came back. RSS counts
//! user-space memory only (the kernel's socket buffers are not in it), and
//! freed memory the allocator keeps shows as no drop after the close, so
//! only the rise while holding is measured.

use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

use super::clients::{block_on, get, read_response};
use super::h2client;
use super::protocol::{Connector, Io, Protocol};
use super::target::{Target, TargetArgs};
use super::Report;
use crate::rig::cpu::pin_self;
use crate::rig::fdlimit;
use crate::rig::procfs::{fd_count, rss_kib};
use crate::rig::wsframe;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Idle connections held per protocol.
    #[arg(long, default_value_t = 2_000)]
    connections: usize,
    /// Protocols to measure, one after the other.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "h1,tls,h2,h2c,ws")]
    protocols: Vec<Protocol>,
    /// Fail when one idle connection costs more resident memory than this.
    /// Generous on purpose (measured: 9 to 27 KiB): TLS adds rustls's
    /// per-connection state and HTTP/2 its connection's (HPACK tables,
    /// stream map), and 64 KiB is still 640 MiB for 10,000 idle
    /// clients, the most a server sized for them should spend. It catches
    /// a buffer kept per connection that should not be (a 64 KiB read
    /// buffer alone would break it); the figure is what to watch.
    #[arg(long, default_value_t = 64.0)]
    max_kib_per_connection: f64,
}

/// One held client connection.
pub(super) enum Held {
    H1(#[allow(dead_code)] Box<dyn Io>),
    H2(#[allow(dead_code)] h2client::H2Conn),
}

/// What one protocol's run measured.
struct Measured {
    opened: usize,
    answered: usize,
    first_problem: Option<String>,
    rss_before: u64,
    rss_held: u64,
    fds_before: usize,
    fds_held: usize,
    fds_after: usize,
    fds_back_secs: f64,
}

pub fn run(target: &TargetArgs, args: &Args) -> Result<Report, String> {
    let fd_limit = fdlimit::raise();
    let mut report = Report::new("idle");
    report.figure("idle connections per protocol", args.connections);
    report.figure("open-file limit", fd_limit);
    pin_self(&target.load_cpu);
    for &protocol in &args.protocols {
        let mut server =
            Target::start_serving(target, &format!("idle-{}", protocol.name()), &[], &[protocol])?;
        let pid = server.pid();
        let connector = server.connector(protocol)?;
        println!("idle: {} {} connections, server PID {pid}", args.connections, protocol.describe());
        let m = block_on(hold(connector, args.connections, pid))??;
        let name = protocol.name();
        let kib = m.rss_held.saturating_sub(m.rss_before) as f64 / m.opened.max(1) as f64;
        let held = m.fds_held.saturating_sub(m.fds_before);
        report.figure(
            format!("{name}: connections opened / answered {}", expected_status(protocol)),
            format!("{} / {}", m.opened, m.answered),
        );
        report.figure(format!("{name}: connections held (server fds over its start)"), held);
        report.figure(
            format!("{name}: server RSS KiB before / holding"),
            format!("{} / {}", m.rss_before, m.rss_held),
        );
        report.figure(format!("{name}: KiB per idle connection"), format!("{kib:.1}"));
        report.figure(
            format!("{name}: server fds before / holding / after close"),
            format!("{} / {} / {} (back in {:.1} s)", m.fds_before, m.fds_held, m.fds_after, m.fds_back_secs),
        );
        report.check(
            m.answered == args.connections,
            format!(
                "{name}: all {} connections answered ({}; {:?})",
                args.connections, m.answered, m.first_problem
            ),
        );
        report.check(held >= m.answered, format!("{name}: the server held every connection ({held} fds)"));
        report.check(
            kib <= args.max_kib_per_connection,
            format!("{name}: {kib:.1} KiB per idle connection <= {}", args.max_kib_per_connection),
        );
        report.check(
            m.fds_after == m.fds_before,
            format!("{name}: file descriptors back to {} after close ({})", m.fds_before, m.fds_after),
        );
        report.check(server.server.check_alive().is_ok(), format!("{name}: server still running"));
        server.server.stop().map_err(|e| format!("stopping the server: {e}"))?;
    }
    Ok(report.finish())
}

/// Opens `n` connections of the connector's protocol, one request each,
/// reads the server's memory and descriptors while they are held, closes
/// them and waits (10 s at most) for the descriptors to come back.
async fn hold(connector: Connector, n: usize, pid: u32) -> Result<Measured, String> {
    // Let start-up allocations settle before the baseline.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_before = rss_kib(pid).ok_or("cannot read the server's RSS")?;
    let fds_before = fd_count(pid).ok_or("cannot read the server's file descriptors")?;
    let gate = std::rc::Rc::new(Semaphore::new(64));
    let expected = expected_status(connector.protocol);
    let connector = std::rc::Rc::new(connector);
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let (gate, connector) = (std::rc::Rc::clone(&gate), std::rc::Rc::clone(&connector));
        tasks.push(tokio::task::spawn_local(async move {
            let _permit = gate.acquire().await;
            open_one(&connector).await
        }));
    }
    let mut held = Vec::with_capacity(n);
    let (mut answered, mut first_problem) = (0, None);
    for task in tasks {
        match task.await {
            Ok(Ok((conn, status))) if status == expected => {
                answered += 1;
                held.push(conn);
            }
            Ok(Ok((conn, status))) => {
                first_problem.get_or_insert(format!("status {status}"));
                held.push(conn);
            }
            Ok(Err(e)) => {
                first_problem.get_or_insert(e);
            }
            Err(e) => {
                first_problem.get_or_insert(e.to_string());
            }
        }
    }
    let opened = held.len();
    // The server finishes with the last request before it reads as idle.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_held = rss_kib(pid).ok_or("cannot read the server's RSS")?;
    let fds_held = fd_count(pid).ok_or("cannot read the server's file descriptors")?;
    drop(held);
    let closed = Instant::now();
    let mut fds_after = fds_held;
    while closed.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        fds_after = fd_count(pid).ok_or("cannot read the server's file descriptors")?;
        if fds_after <= fds_before {
            break;
        }
    }
    Ok(Measured {
        opened,
        answered,
        first_problem,
        rss_before,
        rss_held,
        fds_before,
        fds_held,
        fds_after,
        fds_back_secs: closed.elapsed().as_secs_f64(),
    })
}

/// The status that counts a connection as answered: `101` for a WebSocket
/// (whose echo [`open_websocket`] checks as well), else `200`.
fn expected_status(protocol: Protocol) -> u16 {
    if protocol == Protocol::Ws {
        101
    } else {
        200
    }
}

/// One connection with one `GET /plaintext` answered (a WebSocket: upgraded
/// and one message echoed), kept open.
async fn open_one(connector: &Connector) -> Result<(Held, u16), String> {
    if connector.protocol == Protocol::Ws {
        return open_websocket(connector).await;
    }
    if connector.protocol.is_h2() {
        let conn = h2client::connect(connector).await?;
        let authority = connector.addr.to_string();
        return match h2client::get(&conn.send, &authority, connector.protocol.scheme(), "/plaintext").await {
            h2client::Outcome::Answered(status) => Ok((Held::H2(conn), status)),
            other => Err(format!("{other:?}")),
        };
    }
    let mut stream = connector.connect().await.map_err(|e| format!("connect: {e}"))?;
    stream.write_all(&get("/plaintext")).await.map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::new();
    let response = tokio::time::timeout(Duration::from_secs(10), read_response(&mut stream, &mut buf))
        .await
        .map_err(|_| "no answer within 10 s".to_string())?
        .map_err(|e| e.to_string())?;
    Ok((Held::H1(stream), response.status))
}

/// A WebSocket on `/ws`: the upgrade answered `101`, then one text message
/// sent and its echo read back whole (frames from the lab's `wsframe`).
pub(super) async fn open_websocket(connector: &Connector) -> Result<(Held, u16), String> {
    let mut stream = connector.connect().await.map_err(|e| format!("connect: {e}"))?;
    let upgrade = wsframe::handshake(&connector.addr.to_string(), "/ws", "");
    stream.write_all(&upgrade).await.map_err(|e| format!("write: {e}"))?;
    let exchange = async {
        let mut buf = Vec::new();
        let head_end = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            read_more(&mut stream, &mut buf, "the upgrade was answered").await?;
        };
        let status = std::str::from_utf8(&buf[..head_end])
            .ok()
            .and_then(|head| head.split(' ').nth(1))
            .and_then(|code| code.parse::<u16>().ok())
            .ok_or("no status line in the answer to the upgrade")?;
        if status != 101 {
            return Ok(status);
        }
        buf.drain(..head_end);
        stream.write_all(&wsframe::frame(0x81, b"idle")).await.map_err(|e| format!("write: {e}"))?;
        let echo = loop {
            if let Some(f) = wsframe::parse_frame(&buf)? {
                break (f.fin, f.opcode, f.payload.to_vec());
            }
            read_more(&mut stream, &mut buf, "the echo").await?;
        };
        if echo != (true, 0x1, b"idle".to_vec()) {
            return Err(format!("unexpected echo frame {echo:?}"));
        }
        Ok(101)
    };
    let status = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| "no upgrade and echo within 10 s".to_string())??;
    Ok((Held::H1(stream), status))
}

/// Appends what the next read brings; an error if the server closed
/// before `what`.
async fn read_more(stream: &mut Box<dyn Io>, buf: &mut Vec<u8>, what: &str) -> Result<(), String> {
    if stream.read_buf(buf).await.map_err(|e| format!("read: {e}"))? == 0 {
        return Err(format!("closed before {what}"));
    }
    Ok(())
}
