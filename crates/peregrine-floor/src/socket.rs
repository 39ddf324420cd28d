//! The listening socket and the few libc calls both engines share, each
//! wrapped so the engines stay safe code.

use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::raw::c_int;

const BACKLOG: c_int = 4096;

/// Turns a libc return value into an `io::Result`, naming the failed call.
pub fn check(ret: c_int, what: &str) -> io::Result<c_int> {
    if ret < 0 {
        let err = io::Error::last_os_error();
        Err(io::Error::new(err.kind(), format!("{what}: {err}")))
    } else {
        Ok(ret)
    }
}

/// Creates the listening socket (`flags`: `SOCK_NONBLOCK` for epoll, none
/// for io_uring) with SO_REUSEADDR and a deep
/// backlog, so a burst of benchmark connections is never refused.
pub fn listen(addr: SocketAddr, flags: c_int) -> io::Result<c_int> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    let flags = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | flags;
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

pub fn set_int_opt(fd: c_int, level: c_int, name: c_int, value: c_int, what: &str) -> io::Result<()> {
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

/// The address a socket is bound to: with port 0 asked for, the one the
/// kernel picked, which is what callers need to connect to.
pub fn local_addr(fd: c_int) -> io::Result<SocketAddr> {
    use std::os::fd::FromRawFd;
    // SAFETY: `fd` is an open socket the caller owns; wrapping it in
    // ManuallyDrop borrows it for one getsockname and never closes it.
    let listener = mem::ManuallyDrop::new(unsafe { std::net::TcpListener::from_raw_fd(fd) });
    listener.local_addr()
}

/// Closes a connection the floor owns.
pub fn close(fd: c_int) {
    // SAFETY: close takes no pointers; a stale fd at worst gets EBADF.
    unsafe { libc::close(fd) };
}
