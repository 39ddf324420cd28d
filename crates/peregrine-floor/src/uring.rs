//! The io_uring engine, as `../shared/floors/floor_uring.c` does it: one
//! thread; a multishot accept; a multishot receive per connection into a
//! ring of provided buffers, so no receive is ever submitted again while the
//! connection lives; one send per completed receive; every submission of a
//! loop turn entered with the wait for the next completions, one
//! `io_uring_enter` a turn. `SINGLE_ISSUER` and `DEFER_TASKRUN` let the
//! kernel run completion work only when this thread asks for it (falls back
//! to `COOP_TASKRUN` on kernels before 6.1).
//!
//! Two kernel savings beyond the C floor, so that no server's kernel work
//! per request is below the floor's: peregrine's io_uring driver has both,
//! and its kernel time per `/json` request was 5% below this floor's
//! without them. With them, the floor's requests per server CPU-second rose
//! 1.07x on `/json` and 1.01x on pipelined `/plaintext` (7 alternating
//! rounds, the lab's client, 256 connections, 2026-11-29):
//! - sockets are registered files (a sparse table, one slot per
//!   descriptor), so receives and sends skip the kernel's `fget`/`fput`
//!   (1.2% of the floor's samples on `/json` before);
//! - receive buffers are consumed incrementally (`IOU_PBUF_RING_INC`,
//!   Linux 6.12): receives are packed one after another into a few large
//!   buffers, a small region the cache keeps, where 4,096 separate 4 KB
//!   buffers sent every receive to a cold one (the kernel's copy into them,
//!   `_copy_to_iter`, was 4.0% of the floor's samples against peregrine's
//!   1.4%).
//!
//! Either falls back to the plain form where the kernel refuses it.
//!
//! Unlike the C floor it never corrupts its output: a connection has one
//! send in flight at most (answers made meanwhile queue behind it), a short
//! send is finished, and a request head split across receives still counts.

use std::io;
use std::net::SocketAddr;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::http::answer;
use crate::socket::{close, listen, local_addr, set_int_opt};

const RING_ENTRIES: u32 = 4096;
/// Receive buffers in the provided ring (a power of two, as the kernel
/// requires), and the size of each. Consumed incrementally, their 2 MiB hold
/// about 10,000 TFB request heads, some 40 loop turns' worth at 256
/// connections; a burst larger than that ends the multishot receives it
/// finds no room for (`ENOBUFS`), which are armed again. 64 buffers of
/// 16 KB did worse, per server CPU-second against the floor before either:
/// 0.96x on pipelined `/plaintext` (this size 1.01x) and 1.05x on `/json`
/// (1.07x); likely because more pipelined bursts were cut between two
/// buffers, which the floor then has to join.
const BUFFERS: u16 = 32;
const BUFFER_LEN: usize = 64 * 1024;
const GROUP: u16 = 1;
/// `IOU_PBUF_RING_INC`: the kernel consumes a provided buffer a receive at
/// a time instead of a whole buffer per receive.
const PBUF_RING_INC: u16 = 2;
/// `IORING_CQE_F_BUF_MORE`: the kernel goes on filling this completion's
/// buffer, so it is not to be handed back yet.
const CQE_F_BUF_MORE: u32 = 1 << 4;
/// Most slots in the registered file table (the kernel also refuses more
/// than the descriptor limit, `RLIMIT_NOFILE`): a socket whose descriptor
/// is below the table's size is named by its slot (slot = descriptor),
/// others by descriptor.
const FIXED_FILES: u32 = 65_536;

const ACCEPT: u64 = 1;
const RECV: u64 = 2;
const SEND: u64 = 3;

fn tag(kind: u64, fd: c_int) -> u64 {
    (fd as u64) << 8 | kind
}

/// A connection's state. `sending` is what the kernel is sending now; it is
/// not touched until that send completes, as the kernel reads it meanwhile.
#[derive(Default)]
struct Conn {
    partial: Vec<u8>,
    sending: Vec<u8>,
    /// How much of `sending` the kernel has taken.
    sent: usize,
    in_flight: bool,
    /// Answers made while a send was in flight.
    queued: Vec<u8>,
    /// The receive has ended (the peer is gone): close once the send in
    /// flight completes.
    closing: bool,
    /// The socket sits in the ring's file table, at slot = descriptor.
    fixed: bool,
}

pub fn serve(addr: SocketAddr) -> io::Result<()> {
    let listener = listen(addr, 0)?;
    let bound = local_addr(listener)?;
    let (mut ring, taskrun) =
        match IoUring::builder().setup_single_issuer().setup_defer_taskrun().build(RING_ENTRIES) {
            Ok(ring) => (ring, "DEFER_TASKRUN"),
            Err(_) => (
                IoUring::builder().setup_single_issuer().setup_coop_taskrun().build(RING_ENTRIES)?,
                "COOP_TASKRUN",
            ),
        };
    let mut buffers = ProvidedBuffers::register(&ring)?;
    let files = Files::register(&ring);
    eprintln!(
        "peregrine-floor listening on {bound} (io_uring, SINGLE_ISSUER | {taskrun}, {} buffers, {} files)",
        if buffers.incremental { "incremental" } else { "whole" },
        if files.registered { "registered" } else { "unregistered" },
    );

    push(&mut ring, &opcode::AcceptMulti::new(types::Fd(listener)).build().user_data(tag(ACCEPT, listener)))?;
    let mut conns: Vec<Conn> = Vec::new();
    let mut done: Vec<(u64, i32, u32)> = Vec::with_capacity(2 * RING_ENTRIES as usize);
    loop {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(err) if matches!(err.raw_os_error(), Some(libc::EINTR) | Some(libc::EBUSY)) => {}
            Err(err) => return Err(io::Error::new(err.kind(), format!("io_uring_enter: {err}"))),
        }
        done.clear();
        done.extend(ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
        for &(data, res, flags) in &done {
            let fd = (data >> 8) as c_int;
            match data & 0xff {
                ACCEPT => {
                    if res >= 0 {
                        accepted(&mut ring, &files, &mut conns, res)?;
                    }
                    if !cqueue::more(flags) {
                        let accept = opcode::AcceptMulti::new(types::Fd(listener)).build();
                        push(&mut ring, &accept.user_data(tag(ACCEPT, listener)))?;
                    }
                }
                RECV => {
                    let Some(conn) = conns.get_mut(fd as usize) else { continue };
                    if res > 0 {
                        let Some(bid) = cqueue::buffer_select(flags) else { continue };
                        let target = if conn.in_flight { &mut conn.queued } else { &mut conn.sending };
                        let more = flags & CQE_F_BUF_MORE != 0;
                        answer(&mut conn.partial, buffers.filled(bid, res as usize), target);
                        buffers.received(bid, res as usize, more);
                        if !conn.in_flight && !conn.sending.is_empty() {
                            send(&mut ring, fd, conn)?;
                        }
                    }
                    if cqueue::more(flags) {
                        continue;
                    }
                    if res > 0 || res == -libc::ENOBUFS {
                        // The kernel ended the multishot receive (no buffer
                        // was free, or its completion queue overflowed):
                        // arm it again.
                        push(&mut ring, &receive(conn, fd))?;
                    } else if conn.in_flight {
                        conn.closing = true;
                    } else {
                        close_conn(&ring, conn, fd);
                    }
                }
                SEND => {
                    let Some(conn) = conns.get_mut(fd as usize) else { continue };
                    conn.in_flight = false;
                    if res < 0 {
                        // The peer is gone. Shutting the socket down ends its
                        // receive, whose last completion closes it.
                        conn.sending.clear();
                        conn.queued.clear();
                        // SAFETY: shutdown takes no pointers.
                        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
                    } else {
                        conn.sent += res as usize;
                        if conn.sent == conn.sending.len() {
                            conn.sending.clear();
                            conn.sent = 0;
                            std::mem::swap(&mut conn.sending, &mut conn.queued);
                        }
                    }
                    if !conn.sending.is_empty() {
                        send(&mut ring, fd, conn)?;
                    } else if conn.closing {
                        close_conn(&ring, conn, fd);
                    }
                }
                _ => {}
            }
        }
    }
}

/// Where sockets are named: by their slot in the ring's file table when
/// it was registered (and the descriptor fits it), else by descriptor.
struct Files {
    registered: bool,
    slots: u32,
}

impl Files {
    /// A sparse table as large as the descriptor limit allows.
    fn register(ring: &IoUring) -> Files {
        let slots = FIXED_FILES.min(descriptor_limit());
        Files { registered: ring.submitter().register_files_sparse(slots).is_ok(), slots }
    }

    /// Puts a new socket in the table, and says whether it is there (it is
    /// named by descriptor otherwise).
    fn enter(&self, ring: &IoUring, fd: c_int) -> bool {
        self.registered
            && (fd as u32) < self.slots
            && ring.submitter().register_files_update(fd as u32, &[fd]).is_ok()
    }
}

/// Closes a connection's socket, first taking it out of the file table,
/// whose reference would otherwise keep it open.
fn close_conn(ring: &IoUring, conn: &mut Conn, fd: c_int) {
    if conn.fixed {
        // A failure leaves the slot holding the socket until a later socket
        // with the same descriptor replaces it; nothing better can be done.
        let _ = ring.submitter().register_files_update(fd as u32, &[-1]);
    }
    *conn = Conn::default();
    close(fd);
}

/// The soft descriptor limit (`u32::MAX` when unlimited or unknown).
fn descriptor_limit() -> u32 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes only the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return u32::MAX;
    }
    u32::try_from(limit.rlim_cur).unwrap_or(u32::MAX)
}

/// Sets a new connection up and arms its multishot receive.
fn accepted(ring: &mut IoUring, files: &Files, conns: &mut Vec<Conn>, fd: c_int) -> io::Result<()> {
    // Responses must leave at once, not wait for Nagle to batch them.
    if let Err(err) = set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1, "TCP_NODELAY") {
        eprintln!("peregrine-floor: {err}");
        close(fd);
        return Ok(());
    }
    let idx = fd as usize;
    if conns.len() <= idx {
        conns.resize_with(idx + 1, Conn::default);
    }
    conns[idx] = Conn { fixed: files.enter(ring, fd), ..Conn::default() };
    push(ring, &receive(&conns[idx], fd))
}

fn receive(conn: &Conn, fd: c_int) -> squeue::Entry {
    let entry = if conn.fixed {
        opcode::RecvMulti::new(types::Fixed(fd as u32), GROUP).build()
    } else {
        opcode::RecvMulti::new(types::Fd(fd), GROUP).build()
    };
    entry.user_data(tag(RECV, fd))
}

/// Sends what is left of `conn.sending`.
fn send(ring: &mut IoUring, fd: c_int, conn: &mut Conn) -> io::Result<()> {
    let rest = &conn.sending[conn.sent..];
    let entry = if conn.fixed {
        opcode::Send::new(types::Fixed(fd as u32), rest.as_ptr(), rest.len() as u32).build()
    } else {
        opcode::Send::new(types::Fd(fd), rest.as_ptr(), rest.len() as u32).build()
    };
    conn.in_flight = true;
    push(ring, &entry.user_data(tag(SEND, fd)))
}

/// Queues one submission, entering the kernel first if the queue is full.
fn push(ring: &mut IoUring, entry: &squeue::Entry) -> io::Result<()> {
    loop {
        // SAFETY: every buffer an entry points to outlives its operation:
        // receives use the provided ring, which lives for the process; a
        // send points into its connection's `sending`, which is neither
        // changed nor dropped until the send's completion arrives (a
        // connection is reset only with no send in flight).
        if unsafe { ring.submission().push(entry) }.is_ok() {
            return Ok(());
        }
        ring.submit()?;
    }
}

/// The ring of receive buffers the kernel picks from. Both the ring and the
/// buffers live for the rest of the process (the engine runs until it
/// exits), so the kernel can never write into freed memory.
struct ProvidedBuffers {
    entries: *mut types::BufRingEntry,
    data: *mut u8,
    tail: u16,
    /// The kernel consumes buffers incrementally (`IOU_PBUF_RING_INC`);
    /// otherwise each receive takes a whole buffer.
    incremental: bool,
    /// Per buffer: where the kernel's next receive into it starts (always
    /// 0 when not incremental).
    filled_to: Vec<usize>,
}

impl ProvidedBuffers {
    fn register(ring: &IoUring) -> io::Result<Self> {
        let ring_bytes = BUFFERS as usize * std::mem::size_of::<types::BufRingEntry>();
        // SAFETY: an anonymous private mapping takes no pointers; the result
        // is checked. mmap memory is page-aligned and zeroed, as the kernel
        // requires of a buffer ring (its tail starts at 0).
        let entries = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_ANONYMOUS | libc::MAP_PRIVATE,
                -1,
                0,
            )
        };
        if entries == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let data = Box::leak(vec![0u8; BUFFERS as usize * BUFFER_LEN].into_boxed_slice()).as_mut_ptr();
        let register = |flags| {
            // SAFETY: the ring is page-aligned, BUFFERS entries long, and
            // never unmapped.
            unsafe { ring.submitter().register_buf_ring_with_flags(entries as u64, BUFFERS, GROUP, flags) }
        };
        // Kernels before 6.12 refuse the flag: whole buffers then.
        let incremental = match register(PBUF_RING_INC) {
            Ok(()) => true,
            Err(_) => {
                register(0).map_err(|err| {
                    io::Error::new(err.kind(), format!("registering the buffer ring: {err}"))
                })?;
                false
            }
        };
        let mut this = ProvidedBuffers {
            entries: entries.cast(),
            data,
            tail: 0,
            incremental,
            filled_to: vec![0; BUFFERS as usize],
        };
        for bid in 0..BUFFERS {
            this.add(bid);
        }
        this.publish();
        Ok(this)
    }

    /// The `len` bytes a receive wrote into buffer `bid`, which the kernel
    /// handed over in a completion.
    fn filled(&self, bid: u16, len: usize) -> &[u8] {
        assert!(bid < BUFFERS, "the kernel returned buffer {bid} of {BUFFERS}");
        let start = self.filled_to[bid as usize];
        assert!(start + len <= BUFFER_LEN, "the kernel returned buffer {bid} with {len} bytes at {start}");
        // SAFETY: in bounds (checked above); the kernel wrote these bytes
        // before posting the completion and will not touch them again: it
        // goes on past them in this buffer, or, once the buffer is handed
        // back by `received`, only after they have been read.
        unsafe { std::slice::from_raw_parts(self.data.add(bid as usize * BUFFER_LEN + start), len) }
    }

    /// The receive of `len` bytes into buffer `bid` has been read: the
    /// buffer goes back to the kernel unless it goes on filling it (`more`).
    fn received(&mut self, bid: u16, len: usize, more: bool) {
        if self.incremental && more {
            self.filled_to[bid as usize] += len;
            return;
        }
        self.filled_to[bid as usize] = 0;
        self.add(bid);
        self.publish();
    }

    fn add(&mut self, bid: u16) {
        let slot = (self.tail & (BUFFERS - 1)) as usize;
        // SAFETY: slot < BUFFERS, so the entry lies inside the mapping; the
        // kernel reads entries only between the head and the published
        // tail, and this one is past the tail until `publish`.
        let entry = unsafe { &mut *self.entries.add(slot) };
        // SAFETY: bid < BUFFERS, so the address is inside `data`.
        entry.set_addr(unsafe { self.data.add(bid as usize * BUFFER_LEN) } as u64);
        entry.set_len(BUFFER_LEN as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail is a u16 inside the ring's first entry, in the
        // mapping, suitably aligned; the kernel reads it concurrently, so it
        // is written atomically with release order (the entries first).
        let tail = unsafe { AtomicU16::from_ptr(types::BufRingEntry::tail(self.entries) as *mut u16) };
        tail.store(self.tail, Ordering::Release);
    }
}
