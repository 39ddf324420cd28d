//! Every raw system call the library makes, each behind a safe function.
//!
//! Sockets and the event loop go through tokio and socket2; what is left
//! are the few calls neither offers (open-file limits, CPU affinity,
//! `accept4` straight to non-blocking sockets for io_uring, `sendfile` and
//! `send` with `MSG_MORE` for file bodies and last responses, anonymous memory
//! for io_uring's receive buffers and its eventfd, and the calls the
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

/// Receives what the socket `fd` holds into `buf` without blocking
/// (`MSG_DONTWAIT`): `Ok(0)` at end of stream, `WouldBlock` when it holds
/// nothing.
pub(crate) fn recv_nonblocking(fd: RawFd, buf: &mut [std::mem::MaybeUninit<u8>]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the
    // duration of the call, and recv writes only within it (uninitialised
    // memory may be written to). On a bad descriptor it fails with EBADF.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Accepts one connection on the listening socket `listener`, already
/// non-blocking and close-on-exec (as tokio's accepted sockets are: the
/// ring's direct `recv` and `sendfile` calls beside its queued operations
/// must not block the worker) in the same system call; `WouldBlock` when
/// none is waiting.
pub(crate) fn accept_nonblocking(listener: RawFd) -> io::Result<(std::net::TcpStream, std::net::SocketAddr)> {
    // SAFETY: `try_init` hands over storage and a length for a socket
    // address, which `accept4` fills in and updates, as its contract asks.
    let (fd, addr) = unsafe {
        socket2::SockAddr::try_init(|storage, len| {
            let fd = libc::accept4(listener, storage.cast(), len, libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
            if fd < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(fd)
            }
        })
    }?;
    // SAFETY: `accept4` returned a new descriptor that nothing else owns.
    let stream = unsafe { <std::net::TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let peer =
        addr.as_socket().ok_or_else(|| io::Error::other("accepted a connection that is not TCP/IP"))?;
    Ok((stream, peer))
}

/// Sends `buf` on the socket `fd` without blocking, with `MSG_MORE`: the
/// kernel holds the bytes back to go out with what the next call sends
/// (a response head and the file body after it, in one segment), or with
/// the `FIN` of a shutdown.
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

/// Zeroed, private, anonymous memory from `mmap(2)`, unmapped when
/// dropped. Its pages take no memory until first written, which
/// `vec![0; n]` does not promise: an allocator zeroes memory it recycles
/// by writing to it. The io_uring worker's 8 MiB of receive buffers, made
/// that way, were resident from the start whenever the allocator had
/// memory to recycle: `peregrine-tfb`, one worker, on its first start
/// (after filling its database) had 32.6 MiB resident after one request
/// against epoll's 24.0 MiB; from this mapping, 24.6 MiB.
pub(crate) struct AnonymousMemory {
    ptr: *mut u8,
    len: usize,
    leaked: bool,
}

impl AnonymousMemory {
    /// Maps `len` bytes (page-aligned, zeroed).
    pub(crate) fn new(len: usize) -> io::Result<AnonymousMemory> {
        // SAFETY: an anonymous private mapping reads no pointer of ours;
        // the result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_ANONYMOUS | libc::MAP_PRIVATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(AnonymousMemory { ptr: ptr.cast(), len: len.max(1), leaked: false })
    }

    /// The address of byte `offset`, for handing to the kernel.
    ///
    /// # Panics
    /// If `offset` is past the end.
    pub(crate) fn ptr_at(&self, offset: usize) -> *mut u8 {
        assert!(offset <= self.len, "offset {offset} past a mapping of {} bytes", self.len);
        // SAFETY: within the mapping (or one past its end), checked above.
        unsafe { self.ptr.add(offset) }
    }

    /// `len` bytes from `offset`, which nothing may be writing while the
    /// slice lives (for memory the kernel fills, only bytes whose
    /// completion has been seen).
    ///
    /// # Panics
    /// If the range is not inside the mapping.
    pub(crate) fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.len),
            "bytes {offset}+{len} outside a mapping of {} bytes",
            self.len
        );
        // SAFETY: the range is inside the mapping (checked above), which
        // is readable, initialised (zeroed at first) and lives as long as
        // `self`; the caller vouches that nothing writes to it meanwhile.
        unsafe { std::slice::from_raw_parts(self.ptr.add(offset), len) }
    }

    /// Never unmaps this memory: for memory the kernel may still write
    /// into after its owner is gone.
    pub(crate) fn leak(&mut self) {
        self.leaked = true;
    }
}

impl Drop for AnonymousMemory {
    fn drop(&mut self) {
        if !self.leaked {
            // SAFETY: the mapping was made in `new` with this length and
            // is unmapped once, here; no slice of it outlives `self`.
            unsafe { libc::munmap(self.ptr.cast(), self.len) };
        }
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

/// A growable byte buffer [`pread_append`] can read into: its spare
/// capacity is written in place, then taken into its length.
pub(crate) trait AppendBuf {
    fn len(&self) -> usize;
    fn reserve(&mut self, additional: usize);
    fn spare_capacity_mut(&mut self) -> &mut [std::mem::MaybeUninit<u8>];
    /// # Safety
    /// The first `len - self.len()` bytes of the spare capacity are initialised.
    unsafe fn set_len(&mut self, len: usize);
}

impl AppendBuf for Vec<u8> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn reserve(&mut self, additional: usize) {
        Vec::reserve(self, additional)
    }
    fn spare_capacity_mut(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        Vec::spare_capacity_mut(self)
    }
    unsafe fn set_len(&mut self, len: usize) {
        // SAFETY: the caller promises the bytes up to `len` are initialised.
        unsafe { Vec::set_len(self, len) }
    }
}

impl AppendBuf for bytes::BytesMut {
    fn len(&self) -> usize {
        bytes::BytesMut::len(self)
    }
    fn reserve(&mut self, additional: usize) {
        bytes::BytesMut::reserve(self, additional)
    }
    fn spare_capacity_mut(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        bytes::BytesMut::spare_capacity_mut(self)
    }
    unsafe fn set_len(&mut self, len: usize) {
        // SAFETY: the caller promises the bytes up to `len` are initialised.
        unsafe { bytes::BytesMut::set_len(self, len) }
    }
}

/// Appends up to `count` bytes of `file` from `offset` to `buf` with
/// positioned reads (`pread(2)`: the descriptor may be shared, so its own
/// offset means nothing), straight into `buf`'s spare capacity, so the
/// bytes are not zeroed first. Returns how many bytes were appended: fewer
/// than `count` only where the file ends.
pub(crate) fn pread_append(
    file: &std::fs::File,
    buf: &mut impl AppendBuf,
    count: usize,
    offset: u64,
) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    buf.reserve(count);
    let mut done = 0;
    while done < count {
        let at = libc::off_t::try_from(offset + done as u64)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let spare = buf.spare_capacity_mut();
        let want = (count - done).min(spare.len());
        // SAFETY: `spare` is `buf`'s unused capacity, at least `want`
        // bytes of writable memory that nothing else refers to while `buf`
        // is borrowed mutably; pread writes at most `want` bytes there and
        // touches nothing else. A bad descriptor makes it fail with EBADF.
        let n = unsafe { libc::pread(file.as_raw_fd(), spare.as_mut_ptr().cast(), want, at) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            break;
        }
        // SAFETY: pread initialised the first `n` (<= `want`) bytes of the
        // spare capacity, which directly follow `buf`'s length.
        unsafe { buf.set_len(buf.len() + n as usize) };
        done += n as usize;
    }
    Ok(done)
}

/// Sets glibc's mmap and trim thresholds to `bytes` (`mallopt(3)`): blocks
/// that large are mapped on their own and unmapped when freed, and free
/// memory beyond it at the top of the heap is returned to the system.
/// This also turns off glibc's dynamic mmap threshold, which otherwise
/// rises to the largest block freed and keeps such blocks on the heap.
/// Returns whether glibc took both values.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn set_malloc_release_threshold(bytes: usize) -> bool {
    let Ok(value) = libc::c_int::try_from(bytes) else { return false };
    // SAFETY: mallopt only changes the allocator's tuning parameters (it
    // takes its own lock); it reads and writes none of our memory, and an
    // out-of-range value makes it return 0.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, value) == 1 && libc::mallopt(libc::M_TRIM_THRESHOLD, value) == 1
    }
}

/// Another C library or allocator: nothing to set.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn set_malloc_release_threshold(_bytes: usize) -> bool {
    false
}

/// Free memory glibc may keep before [`release_free_memory`] hands it back.
const FREE_MEMORY_KEPT: usize = 32 << 20;

/// Gives memory the allocator holds free back to the system
/// (`malloc_trim(3)`), when it holds more than 32 MiB free and more free
/// than in use: after a burst of large messages, not during a steady load
/// whose large blocks (compression windows) are reused request after
/// request. Returns the free bytes it found, when it trimmed.
///
/// `mallinfo2` walks every arena's free lists under their locks, so this
/// is meant for a once-a-second timer, not a request path.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn release_free_memory() -> Option<usize> {
    // SAFETY: mallinfo2 only reads the allocator's statistics (taking each
    // arena's lock) and returns them by value.
    let info = unsafe { libc::mallinfo2() };
    let (free, in_use) = (info.fordblks, info.uordblks);
    if free < FREE_MEMORY_KEPT || free <= in_use {
        return None;
    }
    // SAFETY: malloc_trim releases free pages of every arena back to the
    // system under the arenas' locks; no memory in use is touched.
    unsafe { libc::malloc_trim(0) };
    Some(free)
}

/// Another C library or allocator: nothing to release.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn release_free_memory() -> Option<usize> {
    None
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

/// A new non-blocking, close-on-exec eventfd, counting from zero: the
/// io_uring worker's wake-up signal (see `worker::uring`).
#[cfg(target_os = "linux")]
pub(crate) fn eventfd() -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: eventfd takes no pointers; it returns a new descriptor or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and nothing else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Sets `TCP_NOTSENT_LOWAT` on a TCP socket: the kernel takes no more
/// writes while `bytes` or more of what it holds are still unsent (see
/// [`crate::Config::tcp_notsent_lowat`]).
pub(crate) fn set_tcp_notsent_lowat(fd: RawFd, bytes: u32) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: a plain integer, no pointers in it.
    unsafe { set_socket_option(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, &value) }
}

/// `setsockopt(fd, level, name)` with `value`'s bytes, which the kernel
/// reads (`size_of::<T>()` of them) during the call and does not keep.
///
/// # Safety
///
/// Any pointer inside `value` (a BPF program's instructions) must be valid
/// for the call, for as many elements as `value` says.
unsafe fn set_socket_option<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` is a valid reference to `size_of::<T>()` bytes for
    // the call; the caller vouches for pointers inside it. On an invalid
    // descriptor the call fails with EBADF and does nothing.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Aborts a socket: like [`shutdown_socket`], and once the owning task
/// closes it the kernel sends a reset and drops whatever response bytes
/// are still queued, instead of going on feeding them to a client that
/// reads a few bytes a second (the closed socket would otherwise linger,
/// orphaned, holding its send buffer). Same contract as
/// [`shutdown_socket`].
pub(crate) fn abort_socket(fd: RawFd) {
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: `linger` is plain data, no pointers in it. Failing (on an
    // invalid descriptor) leaves nothing to undo.
    let _ = unsafe { set_socket_option(fd, libc::SOL_SOCKET, libc::SO_LINGER, &linger) };
    // SAFETY: shutdown only changes the socket's state; on an invalid
    // descriptor it fails with EBADF and does nothing.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

/// Shuts down the read side of a socket: the task reading it sees end of
/// input, and can still write. Same contract as [`shutdown_socket`].
pub(crate) fn shutdown_read(fd: RawFd) {
    // SAFETY: as in `shutdown_socket`.
    unsafe { libc::shutdown(fd, libc::SHUT_RD) };
}

/// Ends the write side of a socket (the peer reads end of stream) once
/// what was sent before has gone. Same contract as [`shutdown_socket`].
pub(crate) fn shutdown_write(fd: RawFd) {
    // SAFETY: as in `shutdown_socket`.
    unsafe { libc::shutdown(fd, libc::SHUT_WR) };
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
    unsafe { set_socket_option(fd, libc::SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fprog) }
}

#[cfg(test)]
mod tests {
    use super::AnonymousMemory;

    #[test]
    fn anonymous_memory_is_zeroed_writable_and_bounded() {
        let len = 3 * 4096 + 10;
        let memory = AnonymousMemory::new(len).expect("mmap");
        assert!(memory.bytes(0, len).iter().all(|&b| b == 0));
        // The kernel writes through `ptr_at`; so does this test.
        // SAFETY: byte 4096 + 7 is inside the mapping, and no slice of it
        // is alive while it is written.
        unsafe { memory.ptr_at(4096 + 7).write(42) };
        assert_eq!(memory.bytes(4096, 8), &[0, 0, 0, 0, 0, 0, 0, 42]);
        assert_eq!(memory.ptr_at(len), memory.ptr_at(0).wrapping_add(len));
        assert!(std::panic::catch_unwind(|| memory.bytes(len - 4, 5).len()).is_err());
        assert!(std::panic::catch_unwind(|| memory.bytes(usize::MAX, 2).len()).is_err());
        assert!(std::panic::catch_unwind(|| memory.ptr_at(len + 1)).is_err());
    }
}
