//! The `h2` server builder from [`Http2Config`]: what the server announces
//! in its SETTINGS and the budgets that end an abusive connection.
//!
//! `SETTINGS_ENABLE_CONNECT_PROTOCOL` (RFC 8441, WebSocket over HTTP/2) is
//! always announced. Which routes take a WebSocket cannot be known ahead
//! (the extractor sits inside a type-erased handler), and announcing it
//! is harmless where none does: an extended `CONNECT` is then answered as
//! the `GET` it stands for would be (`404`, `405`, or `400` for a route
//! that does not speak WebSocket; see `connect.rs`), where without it `h2`
//! would reset the stream with `PROTOCOL_ERROR`. It costs six bytes of the
//! first SETTINGS frame.

use std::time::Duration;

use crate::config::Http2Config;

/// How long a stream the server reset keeps absorbing the client's frames
/// in flight (`h2`'s default is 1 s).
const RESET_STREAM_MEMORY: Duration = Duration::from_secs(1);
/// Reset streams remembered at once, for [`RESET_STREAM_MEMORY`].
const MAX_REMEMBERED_RESETS: usize = 256;

/// A server builder with every limit set from `config`.
pub(super) fn builder(config: &Http2Config) -> h2::server::Builder {
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(config.max_concurrent_streams)
        .initial_window_size(config.initial_stream_window)
        .initial_connection_window_size(config.initial_connection_window)
        // Legal values are 2^14..2^24-1 (RFC 9113 §6.5.2).
        .max_frame_size(config.max_frame_size.clamp(1 << 14, (1 << 24) - 1))
        .max_header_list_size(config.max_header_list_bytes)
        // `h2` refuses larger send buffers with a panic.
        .max_send_buffer_size(config.max_send_buffer_bytes.min(u32::MAX as usize))
        .max_pending_accept_reset_streams(config.max_pending_accept_reset_streams)
        .max_local_error_reset_streams(Some(config.max_local_error_reset_streams))
        .max_concurrent_reset_streams(MAX_REMEMBERED_RESETS)
        .reset_stream_duration(RESET_STREAM_MEMORY)
        .enable_connect_protocol();
    builder
}
