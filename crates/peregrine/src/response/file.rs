//! [`FileRange`]: a response body that is a range of an open file, handed
//! to the connection's driver instead of being read into memory.
//!
//! A driver that can (cleartext HTTP/1.1 over TCP) sends it with
//! `sendfile(2)`: the bytes go from the page cache to the socket without
//! passing through user space. Every other writer (middleware's owned
//! responses, a transport with its own framing or encryption) refuses it,
//! and the caller reads the range into memory instead.

use std::fmt;
use std::fs::File;
use std::rc::Rc;

/// `len` bytes of `file` from `offset`.
pub(crate) struct FileRange {
    pub(crate) file: Rc<File>,
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

impl fmt::Debug for FileRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileRange")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}
