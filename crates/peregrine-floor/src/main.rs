//! The floor: a bare epoll responder that does no HTTP work at all.
//!
//! It owns nothing but a listening socket and a byte counter per connection:
//! for every `\r\n\r\n` in the bytes a connection sends, it appends one fixed,
//! realistically sized plaintext response to that connection's output buffer,
//! and after each read it hands the whole output buffer to a single `write()`.
//! No parsing, no routing, no date formatting, one thread. Whatever a real
//! server measures on this machine, this is the ceiling it is compared with.
//!
//! Usage: `peregrine-floor [--addr HOST:PORT]` (default `127.0.0.1:8080`).

use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::raw::c_int;
use std::process::ExitCode;

/// The one response. Same size and shape as a real TechEmpower plaintext
/// response (status line, Server, Content-Type, Content-Length, Date), so the
/// floor moves exactly as many bytes per request as a real server does. The
/// date is frozen on purpose: updating it is HTTP work, and the floor does none.
const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\n\
Server: peregrine\r\n\
Content-Type: text/plain\r\n\
Content-Length: 13\r\n\
Date: Sat, 21 Nov 2026 04:40:51 GMT\r\n\
\r\n\
Hello, World!";

/// The end of a request head; each one found earns one response.
const TERMINATOR: &[u8] = b"\r\n\r\n";

const DEFAULT_ADDR: &str = "127.0.0.1:8080";
const BACKLOG: c_int = 4096;
const READ_BUF: usize = 64 * 1024;
const MAX_EVENTS: usize = 256;

/// What the floor keeps per connection: bytes of an unfinished request, and
/// response bytes the kernel did not take yet (only after a short write).
#[derive(Default)]
struct Conn {
    partial: Vec<u8>,
    pending: Vec<u8>,
    /// Whether the fd is registered for EPOLLOUT (only while `pending` waits).
    want_out: bool,
}

fn main() -> ExitCode {
    let addr = match parse_args(std::env::args().skip(1)) {
        Ok(addr) => addr,
        Err(msg) => {
            eprintln!("peregrine-floor: {msg}");
            eprintln!("usage: peregrine-floor [--addr HOST:PORT]");
            return ExitCode::from(2);
        }
    };
    match serve(addr) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("peregrine-floor: {err}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<SocketAddr, String> {
    let mut addr = DEFAULT_ADDR.to_string();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--addr" => addr = args.next().ok_or("--addr needs a value")?,
            other => match other.strip_prefix("--addr=") {
                Some(value) => addr = value.to_string(),
                None => return Err(format!("unknown argument `{other}`")),
            },
        }
    }
    addr.parse().map_err(|e| format!("bad --addr `{addr}`: {e} (want HOST:PORT with a numeric host)"))
}

/// Turns a libc return value into an `io::Result`, naming the failed call.
fn check(ret: c_int, what: &str) -> io::Result<c_int> {
    if ret < 0 {
        let err = io::Error::last_os_error();
        Err(io::Error::new(err.kind(), format!("{what}: {err}")))
    } else {
        Ok(ret)
    }
}

fn serve(addr: SocketAddr) -> io::Result<()> {
    let listener = listen(addr)?;
    // SAFETY: epoll_create1 takes no pointers; the result is checked.
    let epfd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }, "epoll_create1")?;
    epoll_ctl(epfd, libc::EPOLL_CTL_ADD, listener, libc::EPOLLIN as u32)?;
    eprintln!("peregrine-floor listening on {addr}");

    // Connections are indexed by fd: fds are small dense integers, so a Vec is
    // the cheapest map there is.
    let mut conns: Vec<Conn> = Vec::new();
    let mut read_buf = vec![0u8; READ_BUF];
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];

    loop {
        // SAFETY: `events` is a valid, writable array of MAX_EVENTS entries.
        let n = unsafe { libc::epoll_wait(epfd, events.as_mut_ptr(), MAX_EVENTS as c_int, -1) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(io::Error::new(err.kind(), format!("epoll_wait: {err}")));
        }
        for ev in &events[..n as usize] {
            let fd = ev.u64 as c_int;
            if fd == listener {
                accept_all(epfd, listener, &mut conns);
                continue;
            }
            let Some(conn) = conns.get_mut(fd as usize) else {
                continue;
            };
            let flags = ev.events;
            let keep = if flags & libc::EPOLLOUT as u32 != 0 && !conn.pending.is_empty() {
                flush_pending(epfd, fd, conn)
            } else if flags & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
                on_readable(epfd, fd, conn, &mut read_buf)
            } else {
                true
            };
            if !keep {
                *conn = Conn::default();
                // SAFETY: fd is an open connection we own; closing it also
                // removes it from the epoll set.
                unsafe { libc::close(fd) };
            }
        }
    }
}

/// Creates the non-blocking listening socket with SO_REUSEADDR and a deep
/// backlog, so a burst of benchmark connections is never refused.
fn listen(addr: SocketAddr) -> io::Result<c_int> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    let flags = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: socket takes no pointers; the result is checked.
    let fd = check(unsafe { libc::socket(family, flags, 0) }, "socket")?;
    set_int_opt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1, "SO_REUSEADDR")?;

    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large and aligned enough for any
            // sockaddr type, including sockaddr_in.
            let sin = unsafe { &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as above, sockaddr_storage fits sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_addr.s6_addr = v6.ip().octets();
            sin6.sin6_scope_id = v6.scope_id();
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: storage holds an initialized sockaddr of `len` bytes.
    let ret =
        unsafe { libc::bind(fd, &storage as *const _ as *const libc::sockaddr, len as libc::socklen_t) };
    check(ret, &format!("bind {addr}"))?;
    // SAFETY: listen takes no pointers; the result is checked.
    check(unsafe { libc::listen(fd, BACKLOG) }, "listen")?;
    Ok(fd)
}

fn set_int_opt(fd: c_int, level: c_int, name: c_int, value: c_int, what: &str) -> io::Result<()> {
    // SAFETY: the option value points to a live c_int of the size passed.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &value as *const c_int as *const libc::c_void,
            mem::size_of::<c_int>() as libc::socklen_t,
        )
    };
    check(ret, what).map(|_| ())
}

fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, events: u32) -> io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: fd as u64 };
    // SAFETY: `ev` is a valid epoll_event that outlives the call.
    check(unsafe { libc::epoll_ctl(epfd, op, fd, &mut ev) }, "epoll_ctl").map(|_| ())
}

/// Accepts until the backlog is empty (the listener is level-triggered, but
/// draining it saves wake-ups during a connection burst).
fn accept_all(epfd: c_int, listener: c_int, conns: &mut Vec<Conn>) {
    loop {
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        // SAFETY: null address pointers are allowed: we don't need the peer.
        let fd = unsafe { libc::accept4(listener, std::ptr::null_mut(), std::ptr::null_mut(), flags) };
        if fd < 0 {
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::WouldBlock => return,
                io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted => continue,
                // Out of fds or memory: leave the rest queued and serve the
                // connections we have; the next wake-up retries.
                _ => {
                    eprintln!("peregrine-floor: accept4: {err}");
                    return;
                }
            }
        }
        // Responses must leave at once, not wait for Nagle to batch them.
        let setup = set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1, "TCP_NODELAY")
            .and_then(|()| epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32));
        if let Err(err) = setup {
            eprintln!("peregrine-floor: {err}");
            // SAFETY: fd was just accepted and is owned by us alone.
            unsafe { libc::close(fd) };
            continue;
        }
        let idx = fd as usize;
        if conns.len() <= idx {
            conns.resize_with(idx + 1, Conn::default);
        }
        conns[idx] = Conn::default();
    }
}

/// Reads once, answers every complete request head, writes once. Returns
/// false when the connection should be closed.
fn on_readable(epfd: c_int, fd: c_int, conn: &mut Conn, read_buf: &mut [u8]) -> bool {
    // SAFETY: read_buf is a valid, writable buffer of the length passed.
    let n = unsafe { libc::read(fd, read_buf.as_mut_ptr() as *mut libc::c_void, read_buf.len()) };
    if n == 0 {
        return false;
    }
    if n < 0 {
        let kind = io::Error::last_os_error().kind();
        return matches!(kind, io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted);
    }
    let fresh = &read_buf[..n as usize];

    let mut out = mem::take(&mut conn.pending);
    if conn.partial.is_empty() {
        // Common case: the read holds whole requests; never copy them.
        let consumed = respond_to(fresh, &mut out);
        conn.partial.extend_from_slice(&fresh[consumed..]);
    } else {
        // A request head was split across reads: search the joined bytes so
        // a terminator straddling the boundary is still found.
        conn.partial.extend_from_slice(fresh);
        let consumed = respond_to(&conn.partial, &mut out);
        conn.partial.drain(..consumed);
    }
    conn.pending = out;
    if conn.pending.is_empty() {
        return true;
    }
    flush_pending(epfd, fd, conn)
}

/// Appends one response per request head in `input` to `out` and returns how
/// many bytes of `input` those heads used (the rest is an unfinished request).
fn respond_to(input: &[u8], out: &mut Vec<u8>) -> usize {
    let mut consumed = 0;
    while let Some(at) = find(&input[consumed..], TERMINATOR) {
        out.extend_from_slice(RESPONSE);
        consumed += at + TERMINATOR.len();
    }
    consumed
}

/// glibc's memmem is vectorized; wrapped so the rest of the code stays safe.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    // SAFETY: both pointers are valid for the lengths passed; memmem only
    // reads, and returns null or a pointer into `haystack`.
    let hit = unsafe {
        libc::memmem(
            haystack.as_ptr() as *const libc::c_void,
            haystack.len(),
            needle.as_ptr() as *const libc::c_void,
            needle.len(),
        )
    };
    if hit.is_null() {
        None
    } else {
        Some(hit as usize - haystack.as_ptr() as usize)
    }
}

/// Writes `conn.pending` with one write(). A short write (socket buffer full)
/// keeps the rest and asks epoll for writability; once drained, it goes back
/// to waiting for reads only. Returns false when the connection is dead.
fn flush_pending(epfd: c_int, fd: c_int, conn: &mut Conn) -> bool {
    // Rust's runtime sets SIGPIPE to ignored before main, so a write to a
    // peer that hung up returns EPIPE instead of killing the process.
    // SAFETY: pending is a valid buffer of the length passed.
    let n = unsafe { libc::write(fd, conn.pending.as_ptr() as *const libc::c_void, conn.pending.len()) };
    if n < 0 {
        let kind = io::Error::last_os_error().kind();
        if !matches!(kind, io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) {
            return false;
        }
    } else {
        conn.pending.drain(..n as usize);
    }
    // Only touch the epoll registration when the interest actually changes:
    // in the common case (whole buffer written) this costs no extra syscall.
    let want_out = !conn.pending.is_empty();
    if want_out == conn.want_out {
        return true;
    }
    conn.want_out = want_out;
    let events = if want_out { libc::EPOLLIN | libc::EPOLLOUT } else { libc::EPOLLIN };
    epoll_ctl(epfd, libc::EPOLL_CTL_MOD, fd, events as u32).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQ: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n";

    #[test]
    fn response_is_realistic_size() {
        // Status line + 4 headers + 13-byte body, as a real server sends.
        assert_eq!(RESPONSE.len(), 134);
        assert!(RESPONSE.ends_with(b"\r\n\r\nHello, World!"));
    }

    #[test]
    fn sixteen_pipelined_requests_get_sixteen_responses() {
        let input = REQ.repeat(16);
        let mut out = Vec::new();
        assert_eq!(respond_to(&input, &mut out), input.len());
        assert_eq!(out, RESPONSE.repeat(16));
    }

    #[test]
    fn partial_request_is_left_for_the_next_read() {
        let mut input = REQ.repeat(2);
        input.extend_from_slice(b"GET / HTTP/1.1\r\n\r");
        let mut out = Vec::new();
        assert_eq!(respond_to(&input, &mut out), REQ.len() * 2);
        assert_eq!(out.len(), RESPONSE.len() * 2);
    }

    #[test]
    fn args() {
        let parse = |v: &[&str]| parse_args(v.iter().map(|s| s.to_string()));
        assert_eq!(parse(&[]).map(|a| a.port()), Ok(8080));
        assert_eq!(parse(&["--addr", "127.0.0.1:9"]).map(|a| a.port()), Ok(9));
        assert_eq!(parse(&["--addr=[::1]:7"]).map(|a| a.port()), Ok(7));
        assert!(parse(&["--addr"]).is_err());
        assert!(parse(&["--bogus"]).is_err());
    }
}
