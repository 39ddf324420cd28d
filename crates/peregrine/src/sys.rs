//! Every raw system call the library makes, each behind a safe function.
//!
//! Sockets and the event loop go through tokio and socket2; what is left
//! are the few calls neither offers (open-file limits, CPU affinity,
//! `sendfile` and `send` with `MSG_MORE` for file bodies, and the calls the
//! worker's sweep makes on a connection's descriptor from outside its
//! task). Keeping them here keeps `unsafe` in one reviewed place.

use std::io;
use std::os::fd::RawFd;

/// Raises this process's soft limit on open files to its hard limit and
/// returns the soft limit now in force (`None` if unknown or unlimited).
pub(crate) fn raise_open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid rlimit that getrlimit fills; the call only
    // reads this process's limits.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    if limit.rlim_cur < limit.rlim_max {
        let wanted = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        // SAFETY: `wanted` is a valid rlimit; raising the soft limit up to
        // the hard limit only concerns this process.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) } == 0 {
            limit.rlim_cur = limit.rlim_max;
        } else {
            tracing::warn!(
                soft = limit.rlim_cur,
                hard = limit.rlim_max,
                "could not raise the open-file limit"
            );
        }
    }
    (limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// The soft and hard limits on open files, for tests.
#[cfg(test)]
pub(crate) fn open_file_limits() -> (u64, u64) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: as in `raise_open_file_limit`.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    (limit.rlim_cur, limit.rlim_max)
}

/// Sets the soft limit on open files, for tests.
#[cfg(test)]
pub(crate) fn set_open_file_soft_limit(soft: u64) {
    let (_, hard) = open_file_limits();
    let wanted = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: `wanted` is a valid rlimit for this process only.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &wanted) }, 0);
}

/// The CPUs the calling thread may run on, in order.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is a valid, empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a properly sized cpu_set_t that sched_getaffinity
    // fills for the calling thread.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET reads the set it is given, within CPU_SETSIZE.
    (0..libc::CPU_SETSIZE as usize).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) }).collect()
}

/// Pins the calling thread to `cpu`. Returns whether it worked.
pub(crate) fn pin_current_thread(cpu: usize) -> bool {
    // SAFETY: an all-zero cpu_set_t is a valid, empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit of the set it is given; `cpu` is
    // bounds-checked against CPU_SETSIZE by the macro's implementation.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t; the call only changes the calling
    // thread's affinity.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
}

/// Sends `buf` on the socket `fd` without blocking, with `MSG_MORE`: the
/// kernel holds the bytes back to go out with what the next call sends
/// (a response head and the file body after it, in one segment).
pub(crate) fn send_more(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` bytes for the duration of the
    // call; send only reads them. On a bad descriptor it fails with EBADF.
    let n = unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_MORE | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Copies up to `count` bytes of the file `file` from `*offset` to the
/// socket `socket` inside the kernel (`sendfile(2)`), advancing `*offset`
/// by what was sent. `Ok(0)` means the file ended before `*offset`. The
/// socket must be non-blocking: when full, the call fails with
/// `WouldBlock`.
pub(crate) fn sendfile(socket: RawFd, file: RawFd, offset: &mut u64, count: usize) -> io::Result<usize> {
    let mut off = libc::off_t::try_from(*offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `off` is a valid, writable off_t for the duration of the
    // call; sendfile reads and updates it and touches no other memory of
    // ours. Bad descriptors make it fail with EBADF.
    let n = unsafe { libc::sendfile(socket, file, &mut off, count) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    *offset = off as u64;
    Ok(n as usize)
}

/// Shuts a socket down in both directions, so the task serving it sees end
/// of input and finishes. Used by the worker's sweep, which holds only the
/// descriptor of a connection owned by another task.
///
/// The caller must pass the descriptor of a socket that is still open: the
/// worker removes a connection from its registry (on the same thread)
/// before the socket is closed, so a registered descriptor is never stale.
pub(crate) fn shutdown_socket(fd: RawFd) {
    // SAFETY: shutdown only changes the state of the socket; on an invalid
    // descriptor it fails with EBADF and does nothing.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

/// Aborts a socket: like [`shutdown_socket`], and once the owning task
/// closes it the kernel sends a reset and drops whatever response bytes
/// are still queued, instead of going on feeding them to a client that
/// reads a few bytes a second (the closed socket would otherwise linger,
/// orphaned, holding its send buffer). Same contract as
/// [`shutdown_socket`].
pub(crate) fn abort_socket(fd: RawFd) {
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: setsockopt reads `size_of::<linger>()` bytes from the valid
    // pointer passed and keeps no reference; shutdown only changes the
    // socket's state. On an invalid descriptor both fail with EBADF and
    // do nothing.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
        libc::shutdown(fd, libc::SHUT_RDWR);
    }
}

/// Shuts down the read side of a socket: the task reading it sees end of
/// input, and can still write. Same contract as [`shutdown_socket`].
pub(crate) fn shutdown_read(fd: RawFd) {
    // SAFETY: as in `shutdown_socket`.
    unsafe { libc::shutdown(fd, libc::SHUT_RD) };
}

/// Whether the socket has received bytes not read yet.
pub(crate) fn has_pending_input(fd: RawFd) -> bool {
    let mut pending: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the valid pointer passed;
    // on a closed or invalid descriptor it fails and writes nothing.
    let ok = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut pending) } == 0;
    ok && pending > 0
}

/// Bytes written to the socket `fd` that its peer has not acknowledged
/// yet (`SIOCOUTQ`, which Linux numbers as `TIOCOUTQ`); 0 if unknown.
pub(crate) fn unsent_bytes(fd: RawFd) -> u64 {
    let mut queued: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one c_int through the valid pointer passed;
    // on a closed or invalid descriptor it fails and writes nothing.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) } == 0;
    if ok {
        u64::try_from(queued).unwrap_or(0)
    } else {
        0
    }
}

/// `SO_ATTACH_REUSEPORT_CBPF` (asm-generic/socket.h; the same on x86-64 and
/// arm64, the architectures this server is built for).
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;

/// Makes the kernel hand each new connection of the `SO_REUSEPORT` group
/// that `fd` belongs to one of its first `members` sockets, at random.
///
/// Without a program the kernel spreads connections over every socket in
/// the group, including one that another process of the same user binds
/// later: that process would silently take a share of the connections. A
/// socket joining later gets an index past `members`, which this program
/// never returns.
pub(crate) fn steer_reuseport_group(fd: RawFd, members: u32) -> io::Result<()> {
    // A = random u32; A = A % members; return A.
    let mut program = [
        libc::sock_filter {
            code: 0x20, // BPF_LD | BPF_W | BPF_ABS
            jt: 0,
            jf: 0,
            k: (libc::SKF_AD_OFF + libc::SKF_AD_RANDOM) as u32,
        },
        libc::sock_filter { code: 0x94, jt: 0, jf: 0, k: members.max(1) }, // BPF_ALU | BPF_MOD | BPF_K
        libc::sock_filter { code: 0x16, jt: 0, jf: 0, k: 0 },              // BPF_RET | BPF_A
    ];
    let fprog = libc::sock_fprog { len: program.len() as libc::c_ushort, filter: program.as_mut_ptr() };
    // SAFETY: `fprog` points at `program`, which outlives the call; the
    // kernel copies the program and reads exactly `len` instructions.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
