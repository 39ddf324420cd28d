//! The connection's read buffer: bytes received but not yet consumed.
//!
//! Requests are parsed in place from [`ReadBuf::data`]; a partial request
//! stays for the next read. The buffer grows only as far as the limits let a
//! request need, and shrinks back once a large body has gone.

/// The least [`ReadBuf::scratch`] lends, for a buffer that holds none.
const SCRATCH_MIN: usize = 512;

pub(crate) struct ReadBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    default_len: usize,
}

impl ReadBuf {
    pub(crate) fn new(len: usize) -> ReadBuf {
        ReadBuf { buf: vec![0; len], start: 0, end: 0, default_len: len }
    }

    pub(crate) fn empty() -> ReadBuf {
        ReadBuf { buf: Vec::new(), start: 0, end: 0, default_len: 0 }
    }

    #[inline]
    pub(crate) fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.start == self.end
    }

    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        self.start += n.min(self.len());
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Free space to read into, at least `min` bytes, and enough that the
    /// buffered data can reach `total` bytes.
    pub(crate) fn spare(&mut self, min: usize, total: usize) -> &mut [u8] {
        let wanted_free = min.max(total.saturating_sub(self.len()));
        if self.buf.len() - self.end < wanted_free {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.buf.len() - self.end < wanted_free {
                let new_len = (self.end + wanted_free).max(self.buf.len() * 2);
                self.buf.resize(new_len, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    #[inline]
    pub(crate) fn filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }

    /// Drops what is buffered and lends the whole buffer, never empty, as
    /// scratch space: a closing connection drains its client's last bytes
    /// into it.
    pub(crate) fn scratch(&mut self) -> &mut [u8] {
        self.start = 0;
        self.end = 0;
        if self.buf.is_empty() {
            self.buf.resize(SCRATCH_MIN, 0);
        }
        &mut self.buf
    }

    /// Returns to the default size if a large request grew the buffer.
    pub(crate) fn shrink(&mut self) {
        if self.buf.len() > self.default_len * 4 && self.len() <= self.default_len {
            let mut fresh = vec![0; self.default_len];
            let n = self.len();
            fresh[..n].copy_from_slice(self.data());
            self.buf = fresh;
            self.start = 0;
            self.end = n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compacts_and_grows() {
        let mut b = ReadBuf::new(8);
        b.spare(1, 0)[..6].copy_from_slice(b"abcdef");
        b.filled(6);
        b.consume(4);
        assert_eq!(b.data(), b"ef");
        let spare = b.spare(6, 0);
        assert!(spare.len() >= 6);
        assert_eq!(b.data(), b"ef");
        let spare = b.spare(1, 100);
        assert!(spare.len() >= 98);
        assert_eq!(b.data(), b"ef");
        b.consume(2);
        assert!(b.is_empty());
        b.shrink();
        assert_eq!(b.buf.len(), 8);
    }

    #[test]
    fn scratch_lends_the_whole_buffer_and_drops_the_data() {
        let mut b = ReadBuf::new(16);
        b.spare(1, 0)[..3].copy_from_slice(b"abc");
        b.filled(3);
        b.consume(1);
        assert_eq!(b.scratch().len(), 16);
        assert!(b.is_empty());
        assert_eq!(ReadBuf::empty().scratch().len(), SCRATCH_MIN);
    }
}
