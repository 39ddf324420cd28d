//! [`FileRange`]: a response body that is a range of an open file, handed
//! to the connection's driver instead of being read into memory.
//!
//! Cleartext HTTP/1.1 over TCP sends it with `sendfile(2)`: the bytes go
//! from the page cache to the socket without passing through user space.
//! TLS HTTP/1.1 reads it into the connection's output buffer a piece at a
//! time, and HTTP/2 a piece at a time as the stream's window opens, so no
//! file is ever held in memory whole. Only a writer whose response goes to
//! middleware or the test client (which look at the body's bytes) refuses
//! it, and the caller reads the range into memory instead.

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
