//! The connection's read buffer: bytes received but not yet consumed.
//!
//! Requests are parsed in place from [`ReadBuf::data`]; a partial request
//! stays for the next read. The buffer grows only as far as the limits let a
//! request need, and shrinks back once a large body has gone. On io_uring,
//! HTTP/1.1 parses from the ring's receive buffers while this one is empty,
//! and only what must wait for more input is copied here
//! ([`ReadBuf::append`]; see `proto::h1::conn`).
//!
//! Its free space is never zeroed: reads go straight into the vector's
//! spare capacity through tokio's [`ReadBuf`](tokio::io::ReadBuf), which
//! counts what the reader wrote, and only those bytes join the data. Every
//! transport here writes through it without zeroing first (tokio's
//! `TcpStream`, the io_uring stream, tokio-rustls). Zeroing the default
//! 8 KiB when each connection began was, under callgrind, 8,224 of the
//! 27,015 user-space instructions of a connection that carried one
//! malformed request, and 8,192 of the 18,078 of a `Connection: close`
//! request (the `rep stosb` counted a byte at a time: a few hundred cycles
//! on the hardware, but a cache's worth of memory written for nothing).

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::AsyncRead;

/// The least room [`ReadBuf::drain_from`] reads into, for a buffer that
/// holds none.
const DRAIN_MIN: usize = 512;

pub(crate) struct ReadBuf {
    /// `buf[start..]` is the data; the vector's length is where it ends,
    /// and its spare capacity is uninitialised room for the next read.
    buf: Vec<u8>,
    start: usize,
    default_len: usize,
}

impl ReadBuf {
    pub(crate) fn new(len: usize) -> ReadBuf {
        ReadBuf { buf: Vec::with_capacity(len), start: 0, default_len: len }
    }

    pub(crate) fn empty() -> ReadBuf {
        ReadBuf { buf: Vec::new(), start: 0, default_len: 0 }
    }

    #[inline]
    pub(crate) fn data(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.start == self.buf.len()
    }

    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        self.start += n.min(self.len());
        if self.start == self.buf.len() {
            self.clear();
        }
    }

    /// Appends `bytes`, input received elsewhere, after the data.
    pub(crate) fn append(&mut self, bytes: &[u8]) {
        self.make_room(bytes.len(), 0);
        self.buf.extend_from_slice(bytes);
    }

    /// Drops what is buffered.
    #[inline]
    fn clear(&mut self) {
        self.start = 0;
        self.buf.clear();
    }

    /// Makes free space of at least `min` bytes, and enough that the
    /// buffered data can reach `total` bytes: first by moving the data to
    /// the front, then by growing (at least doubling, as before).
    #[inline]
    fn make_room(&mut self, min: usize, total: usize) {
        let wanted_free = min.max(total.saturating_sub(self.len()));
        if self.buf.capacity() - self.buf.len() < wanted_free {
            self.move_or_grow(wanted_free);
        }
    }

    #[inline(never)]
    fn move_or_grow(&mut self, wanted_free: usize) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        if self.buf.capacity() - self.buf.len() < wanted_free {
            let grown = (self.buf.len() + wanted_free).max(self.buf.capacity() * 2);
            self.buf.reserve_exact(grown - self.buf.len());
        }
    }

    /// Reads once from `stream` into free space of at least `min` bytes,
    /// enough for the data to reach `total`, and appends what arrived.
    /// Returns how many bytes that was (0 at the end of the stream).
    ///
    /// A `poll_fn` rather than an `async fn`, so that it can inline into the
    /// connection's future as tokio's `read` did. Keep-alive requests cost
    /// the same as with `read` within callgrind's spread (`/json`, 16
    /// connections: 2,723-2,734 instructions before, 2,720-2,771 after).
    #[inline]
    pub(crate) fn read_from<'a, R: AsyncRead + Unpin>(
        &'a mut self,
        stream: &'a mut R,
        min: usize,
        total: usize,
    ) -> impl Future<Output = io::Result<usize>> + 'a {
        self.make_room(min, total);
        poll_fn(move |cx| self.poll_fill(stream, cx))
    }

    /// One poll of `stream` into the spare capacity.
    #[inline]
    fn poll_fill<R: AsyncRead + Unpin>(
        &mut self,
        stream: &mut R,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        let spare = self.buf.spare_capacity_mut();
        let room = spare.as_ptr();
        let mut window = tokio::io::ReadBuf::uninit(spare);
        ready!(Pin::new(&mut *stream).poll_read(cx, &mut window))?;
        let filled = window.filled();
        // A reader can only have filled the window it was handed, unless it
        // replaced the window with another (safe code can): then none of
        // the spare capacity is known to be written.
        if filled.as_ptr() != room.cast::<u8>() {
            return Poll::Ready(Err(io::Error::other(
                "a reader filled a buffer other than the one it was given",
            )));
        }
        let n = filled.len();
        // SAFETY: tokio's `ReadBuf` counts as filled only bytes that were
        // written through it (or that a reader declared written with its
        // unsafe `assume_init`), and the check above shows they are the
        // first `n` bytes of this vector's spare capacity.
        unsafe { self.buf.set_len(self.buf.len() + n) };
        Poll::Ready(Ok(n))
    }

    /// Drops what is buffered, reads once from `stream` into the whole
    /// buffer and drops that too: a closing connection discards its
    /// client's last bytes this way. Returns how many bytes were read.
    pub(crate) async fn drain_from<R: AsyncRead + Unpin>(&mut self, stream: &mut R) -> io::Result<usize> {
        self.clear();
        let n = self.read_from(stream, DRAIN_MIN, 0).await;
        self.clear();
        n
    }

    /// Returns to the default size if a large request grew the buffer.
    pub(crate) fn shrink(&mut self) {
        if self.buf.capacity() > self.default_len * 4 && self.len() <= self.default_len {
            let mut fresh = Vec::with_capacity(self.default_len);
            fresh.extend_from_slice(self.data());
            self.buf = fresh;
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `bytes` into `b` as a socket would, at least `min` free.
    fn feed(b: &mut ReadBuf, bytes: &[u8], min: usize, total: usize) -> usize {
        let mut source = bytes;
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(b.read_from(&mut source, min, total)).unwrap()
    }

    #[test]
    fn compacts_and_grows() {
        let mut b = ReadBuf::new(8);
        assert_eq!(feed(&mut b, b"abcdef", 1, 0), 6);
        b.consume(4);
        assert_eq!(b.data(), b"ef");
        // Room for 6 more: the data moves to the front rather than grow.
        assert_eq!(feed(&mut b, b"ghijkl", 6, 0), 6);
        assert_eq!(b.data(), b"efghijkl");
        assert_eq!(b.buf.capacity(), 8);
        // Room for the data to reach 100 bytes: it grows.
        assert_eq!(feed(&mut b, &[b'x'; 200], 1, 100), 92);
        assert_eq!(b.len(), 100);
        assert_eq!(&b.data()[..8], b"efghijkl");
        b.consume(100);
        assert!(b.is_empty());
        b.shrink();
        assert_eq!(b.buf.capacity(), 8);
    }

    #[test]
    fn reads_append_only_what_arrived() {
        let mut b = ReadBuf::new(64);
        assert_eq!(feed(&mut b, b"GET / HTTP/1.1\r\n", 1, 0), 16);
        assert_eq!(b.data(), b"GET / HTTP/1.1\r\n");
        assert_eq!(feed(&mut b, b"", 1, 0), 0, "the end of the stream reads nothing");
        assert_eq!(b.len(), 16);
    }

    #[test]
    fn drain_discards_what_was_buffered_and_what_it_read() {
        let mut b = ReadBuf::new(16);
        feed(&mut b, b"abc", 1, 0);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut rest: &[u8] = &[7; 40];
        assert_eq!(
            runtime.block_on(b.drain_from(&mut rest)).unwrap(),
            40,
            "at least the drain's minimum room"
        );
        assert!(b.is_empty());
        let mut empty = ReadBuf::empty();
        let mut more: &[u8] = b"xyz";
        assert_eq!(runtime.block_on(empty.drain_from(&mut more)).unwrap(), 3);
        assert!(empty.is_empty());
    }

    /// A reader that answers with a window of its own instead of filling
    /// the one it was given.
    struct Swapper;

    impl AsyncRead for Swapper {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let other: &'static mut [u8] = Box::leak(Box::new(*b"evil"));
            let mut replaced = tokio::io::ReadBuf::new(other);
            replaced.advance(4);
            *buf = replaced;
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn a_reader_that_swaps_the_window_is_an_error_not_data() {
        let mut b = ReadBuf::new(8);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        assert!(runtime.block_on(b.read_from(&mut Swapper, 1, 0)).is_err());
        assert!(b.is_empty());
    }
}
