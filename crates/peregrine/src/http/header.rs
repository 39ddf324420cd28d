//! [`Header`]: one request header field as every protocol's codec hands it
//! to the pipeline, borrowed from the connection's buffers.

/// One header field, borrowing the buffer it was decoded into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'b> {
    /// The field name as sent (a token: ASCII).
    pub name: &'b str,
    /// The field value, without surrounding whitespace. May hold bytes
    /// above 0x7F (obs-text), never control characters other than HTAB.
    pub value: &'b [u8],
}
