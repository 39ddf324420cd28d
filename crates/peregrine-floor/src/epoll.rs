//! The epoll engine: one thread, level-triggered epoll, one `read()` and
//! one `write()` per readable event, as `../shared/floors/floor.c` does.
//!
//! callgrind, wrk with TFB's headers, 16 connections: 262 user instructions
//! a request pipelined x16 and 404 unpipelined, against the C epoll floor's
//! 910 and 950 (it scans bytes one at a time; this uses memchr's SIMD
//! memmem). Both make the same syscalls per request.

use std::io;
use std::net::SocketAddr;
use std::os::raw::c_int;

use crate::http::answer;
use crate::socket::{check, close, listen, local_addr, set_int_opt};

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

pub fn serve(addr: SocketAddr) -> io::Result<()> {
    let listener = listen(addr, libc::SOCK_NONBLOCK)?;
    let bound = local_addr(listener)?;
    // SAFETY: epoll_create1 takes no pointers; the result is checked.
    let epfd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }, "epoll_create1")?;
    epoll_ctl(epfd, libc::EPOLL_CTL_ADD, listener, libc::EPOLLIN as u32)?;
    eprintln!("peregrine-floor listening on {bound} (epoll)");

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
                // Closing also removes it from the epoll set.
                close(fd);
            }
        }
    }
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
            close(fd);
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

    answer(&mut conn.partial, fresh, &mut conn.pending);
    if conn.pending.is_empty() {
        return true;
    }
    flush_pending(epfd, fd, conn)
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
