//! [`Config`]: every limit and timeout of the server, in one place.
//! [`MinDataRate`]: the slowest a body or response may move.
//! [`EventLoop`]: epoll or io_uring under the cleartext connections.

use std::time::Duration;

/// Server settings. The defaults suit a production service; every field can
/// be changed through the builder methods or directly.
#[derive(Clone, Debug)]
pub struct Config {
    /// Worker threads, each with its own listener and event loop. Default:
    /// the number of CPUs this process may run on.
    pub workers: usize,
    /// Pin worker `i` to the `i`-th CPU the process may run on.
    pub pin_workers: bool,
    /// The event loop that serves a worker's cleartext TCP connections:
    /// epoll readiness (the default), an io_uring per worker, or io_uring
    /// where the kernel allows it. See [`EventLoop`] for what each costs.
    /// TLS connections use epoll either way.
    pub event_loop: EventLoop,
    /// Listen backlog per worker.
    pub backlog: u32,
    /// Open connections per worker; beyond it new connections are answered
    /// `503` and closed. A worker that reaches it first waits up to 250 ms
    /// for connections to close (a client recycling its connections opens
    /// new ones before the server has read the old ones' closes), then
    /// refuses at once until it is under the limit again. Lowered at start
    /// when the process's open-file limit could not hold every worker's
    /// connections plus a reserve.
    pub max_connections_per_worker: usize,
    /// Largest request line plus headers (`431` beyond).
    pub max_head_bytes: usize,
    /// Most header fields in one request (`431` beyond).
    pub max_headers: usize,
    /// Largest body of a route whose body is buffered (`413` beyond).
    pub max_body_bytes: u64,
    /// Largest body of a streaming route (`413` beyond).
    pub max_stream_body_bytes: u64,
    /// Time allowed from the first byte of a request head to its end; a
    /// slower client gets `408` and is disconnected.
    ///
    /// Timeouts are whole seconds, checked once a second without reading a
    /// clock on the request path: each fires between its value and its
    /// value plus three seconds, never early.
    pub header_timeout: Duration,
    /// Time a keep-alive connection may sit idle between requests.
    pub idle_timeout: Duration,
    /// Time a body read or a response write may make no progress.
    pub io_timeout: Duration,
    /// The slowest a request body may arrive, on average, once its grace
    /// period is over (`None`: no minimum, only [`Config::io_timeout`]).
    /// Without it a client trickling one byte every few seconds holds its
    /// connection for as long as it likes. A slower body is cut: `408` on
    /// a buffered route, an error from the body on a streaming one (then
    /// `408` too on HTTP/3, where only the stream is cut). It holds a
    /// WebSocket message part-way in too (close `1008`), counting only the
    /// time spent waiting for its bytes.
    /// Default: 240 bytes a second after 5 seconds (ASP.NET Core's
    /// figures).
    pub min_request_body_rate: Option<MinDataRate>,
    /// The slowest a client may take a response, on average, once the
    /// grace period is over (`None`: no minimum). What counts is what the
    /// client acknowledged, not what sits in the kernel's send buffer, so a
    /// client that opens a tiny receive window and reads a byte now and
    /// then (a "slow read" attack) is cut, and reset, so the kernel drops
    /// what it still held for it. Default: as for request bodies.
    ///
    /// On HTTP/2 a connection whose open streams all wait on the client
    /// (request body bytes, window updates) is held to the laxer of the
    /// two rates, counting DATA received and window granted. On HTTP/3
    /// each request stream is held to the two rates itself, counting the
    /// response bytes the client's flow-control credit let through once its
    /// first window was full; a slow stream is reset
    /// (`H3_REQUEST_CANCELLED`), its connection goes on.
    pub min_response_rate: Option<MinDataRate>,
    /// The most response bytes a cleartext TCP connection may have queued
    /// in the kernel but not yet sent (`TCP_NOTSENT_LOWAT`, set on the
    /// listening sockets, which accepted ones inherit; `None`: the
    /// kernel's default, no limit). Bytes in flight do not count, so a
    /// fast client's transfer still fills its path; a client with a closed
    /// receive window is given only this much beyond what it took, where
    /// Linux otherwise grows the send buffer to hold whole responses
    /// (2.7 MiB for a client that reads nothing on loopback). In the
    /// slow-read attack of `scripts/slow-attacks` (1,000 such clients,
    /// each sent three 300 KB files), allocating and purging those buffers
    /// cost other clients a quarter of the server's throughput; with
    /// 128 KiB they keep 95-96% of its requests/s and 98-100% of its
    /// requests per CPU-second, and HttpArena's static profile
    /// is unchanged (68.0-70.4k against 67.2-68.0k requests/s).
    ///
    /// TLS listeners set it too. On the `h2` crate it had made static-h2
    /// (TLS HTTP/2) cost the server a fifth more CPU; on the own HTTP/2
    /// server it costs nothing measurable (six alternating rounds, h2load
    /// -c 64 -m 32, server 99% busy either way: median 23,192 requests/s
    /// with it against 23,140 without, paired ratios 0.99-1.05), and a
    /// TLS reader that reads nothing is let queue 144 KiB instead of
    /// 2.7 MiB. Default: 128 KiB.
    pub tcp_notsent_lowat: Option<u32>,
    /// Time in-flight requests get to finish after a shutdown signal. A
    /// worker still busy 2 s after it (a handler blocking its thread) is
    /// logged and left behind, so shutting down always ends.
    pub shutdown_timeout: Duration,
    /// Initial size of each connection's read buffer.
    pub read_buffer_bytes: usize,
    /// With glibc's allocator: set at start as both its mmap threshold
    /// (`M_MMAP_THRESHOLD`, blocks at least this large get their own
    /// mapping, unmapped when freed) and its trim threshold
    /// (`M_TRIM_THRESHOLD`, free memory beyond this at the top of the heap
    /// goes back to the system). `None` leaves glibc's defaults, whose
    /// thresholds grow (up to 32 MiB) with the largest block freed, and
    /// instead checks once a second: when glibc holds more than 32 MiB
    /// free and more free than in use (after a burst of large messages),
    /// `malloc_trim` hands it back. See the README's memory section for
    /// the figures. Skipped when
    /// `MALLOC_MMAP_THRESHOLD_` or `MALLOC_TRIM_THRESHOLD_` is set in the
    /// environment; no effect with another allocator. Default: `None`.
    ///
    /// Fixed thresholds cost dearly where requests allocate large blocks:
    /// every brotli or gzip encoder (several MiB of window and tables) then
    /// gets its own mapping, zeroed by the kernel and unmapped again. With
    /// 128 KiB, HttpArena's json-comp (512 connections, one worker) fell
    /// from 25,753 and 14,750 to 4,652 and 4,435 requests/s at the same
    /// server CPU. Set it where memory must come back at once after each
    /// large message, rather than within a second, and responses are not
    /// compressed.
    pub malloc_release_threshold: Option<usize>,
    /// HTTP/2 limits and window sizes.
    pub http2: Http2Config,
    /// HTTP/3 (QUIC) limits and window sizes.
    pub http3: Http3Config,
}

/// HTTP/3 and QUIC settings: what the server announces to clients and the
/// limits that bound what one connection may cost it. The handshake is
/// bounded by [`Config::header_timeout`], a quiet connection by
/// [`Config::idle_timeout`] (QUIC's idle timeout), and the connections a
/// worker holds by [`Config::max_connections_per_worker`], counted apart
/// from its TCP connections.
///
/// The QPACK dynamic table is not configurable: the `h3` crate decodes
/// header blocks statelessly and announces a table capacity of 0, so a
/// client can make the server keep no compression state at all, and a
/// block that refers to the dynamic table is a `QPACK_DECOMPRESSION_FAILED`
/// connection error.
#[derive(Clone, Debug)]
pub struct Http3Config {
    /// Request streams a client may have open at once (QUIC
    /// `initial_max_streams_bidi`, renewed as streams close).
    pub max_concurrent_streams: u32,
    /// Flow-control window of each stream a client sends on.
    pub stream_window: u32,
    /// Flow-control window of the whole connection.
    pub connection_window: u32,
    /// Largest decoded header section, 32 bytes per field included
    /// (`SETTINGS_MAX_FIELD_SECTION_SIZE`); larger ones are answered `431`.
    pub max_header_list_bytes: u32,
    /// Address validation: once a worker has this many handshakes in
    /// progress, a new connection from an address not yet validated is
    /// first sent a Retry (RFC 9000 §8.1.2), which costs an honest client
    /// one round trip and a spoofed source its whole attempt. `Some(0)`
    /// validates every address; `None` never sends Retry (the 3x
    /// amplification limit still holds before validation).
    pub retry_above_handshakes: Option<usize>,
}

impl Default for Http3Config {
    fn default() -> Self {
        Http3Config {
            max_concurrent_streams: 128,
            stream_window: 256 * 1024,
            connection_window: 1024 * 1024,
            max_header_list_bytes: 16 * 1024,
            retry_above_handshakes: Some(64),
        }
    }
}

/// HTTP/2 settings: what the server announces to clients and the limits
/// that bound what one connection may cost it.
#[derive(Clone, Debug)]
pub struct Http2Config {
    /// Streams a client may have open at once (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub max_concurrent_streams: u32,
    /// Flow-control window of each stream a client sends on: how much
    /// request body the server accepts before the handler reads it.
    pub initial_stream_window: u32,
    /// Flow-control window of the whole connection.
    pub initial_connection_window: u32,
    /// Largest frame payload the server accepts (`SETTINGS_MAX_FRAME_SIZE`).
    pub max_frame_size: u32,
    /// Largest decoded header list, HPACK's 32 bytes per field included
    /// (`SETTINGS_MAX_HEADER_LIST_SIZE`); larger ones are refused with
    /// `431`, and a CONTINUATION flood ends the connection.
    pub max_header_list_bytes: u32,
    /// Response bytes a connection may have queued for its socket before
    /// its streams wait for the client to read: window capacity for a
    /// large or streamed body is granted only below this. (A small
    /// response, up to 16 KiB, is queued whole; the connection reads no
    /// more requests while its queue is over 256 KiB.)
    pub max_send_buffer_bytes: usize,
    /// Streams the client resets before the server took them (within one
    /// batch of frames read) before the connection ends with
    /// `ENHANCE_YOUR_CALM` (rapid reset, CVE-2023-44487).
    pub max_pending_accept_reset_streams: usize,
    /// Streams the server had to reset for the client's protocol errors
    /// before the connection ends with `ENHANCE_YOUR_CALM`.
    pub max_local_error_reset_streams: usize,
}

impl Default for Http2Config {
    fn default() -> Self {
        Http2Config {
            max_concurrent_streams: 128,
            initial_stream_window: 256 * 1024,
            initial_connection_window: 1024 * 1024,
            max_frame_size: 16 * 1024,
            max_header_list_bytes: 16 * 1024,
            max_send_buffer_bytes: 128 * 1024,
            max_pending_accept_reset_streams: 20,
            max_local_error_reset_streams: 256,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workers: std::thread::available_parallelism().map(usize::from).unwrap_or(1),
            pin_workers: false,
            event_loop: EventLoop::Epoll,
            backlog: 4096,
            max_connections_per_worker: 25_000,
            max_head_bytes: 16 * 1024,
            max_headers: 100,
            max_body_bytes: 1024 * 1024,
            max_stream_body_bytes: 64 * 1024 * 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            io_timeout: Duration::from_secs(30),
            min_request_body_rate: Some(MinDataRate::DEFAULT),
            min_response_rate: Some(MinDataRate::DEFAULT),
            tcp_notsent_lowat: Some(128 * 1024),
            shutdown_timeout: Duration::from_millis(4500),
            read_buffer_bytes: 8 * 1024,
            malloc_release_threshold: None,
            http2: Http2Config::default(),
            http3: Http3Config::default(),
        }
    }
}

/// Which event loop serves a worker's cleartext TCP connections.
///
/// With io_uring, receives and sends are submissions, and each loop turn's
/// enter the kernel in one system call, where epoll readiness costs a
/// `recvfrom` and a `sendto` a request. Measured on a 2-core VM, one worker
/// on CPU 0 and the load on CPU 1, requests per server CPU-second of
/// io_uring against epoll (median of the round ratios; `peregrine-lab bench
/// --profiles all --quick --rounds 3` and `--rounds 5`, 2026-11-27): it
/// wins where requests are small and connections many (TFB `/json` 1.06x
/// to 1.19x; HttpArena crud 1.28x, json-comp 1.17x, limited-conn 1.13x,
/// pipelined 1.09x, api-4 1.09x, baseline 1.03x; WebSocket echo at 16,384
/// connections 1.20x to 1.25x actix-ws where epoll gave 1.11x to 1.14x),
/// is level on HttpArena json and async-db, and loses a little on static
/// files (0.92x to 0.94x) and uploads (0.95x to 0.96x), whose large bodies
/// move beside the ring as on epoll (a direct `recv`, `sendfile(2)`). It
/// holds more memory, its receive buffers and in-flight sends: 9 to 28 MiB
/// more peak RSS for one worker at 512 to 4,096 connections in those runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EventLoop {
    /// epoll readiness: works on every Linux kernel and under every
    /// seccomp profile. The library's default, since io_uring is
    /// forbidden in many containers and sandboxes and an application
    /// should take it knowingly (`peregrine-tfb` starts with `Auto`).
    #[default]
    Epoll,
    /// An io_uring per worker. Where the kernel refuses it (before Linux
    /// 6.12, or forbidden by a seccomp filter such as Docker's default or
    /// by `kernel.io_uring_disabled`), the worker logs a warning and uses
    /// epoll.
    IoUring,
    /// io_uring where the kernel allows it, epoll otherwise, chosen once
    /// at start; the fallback is logged at `info`, since it is expected
    /// (in a container with the default seccomp profile, for example).
    Auto,
}

/// A minimum data rate: once `grace` has passed since a transfer (a
/// request body, or one batch of response bytes) began, the bytes moved
/// must average at least `bytes_per_second` over the time spent waiting
/// for the client.
///
/// Checked by the worker's once-a-second sweep, so a transfer is cut
/// between one and three seconds after it falls behind; time a handler
/// spends between two reads of a streamed body does not count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MinDataRate {
    /// The average rate required, in bytes a second.
    pub bytes_per_second: u64,
    /// How long a transfer may go before the rate applies (whole seconds).
    pub grace: Duration,
}

impl MinDataRate {
    /// 240 bytes a second after 5 seconds.
    pub const DEFAULT: MinDataRate = MinDataRate { bytes_per_second: 240, grace: Duration::from_secs(5) };

    /// The laxer of two minimums, field by field (the lower rate, the
    /// longer grace); `None` when either is `None` (no minimum). HTTP/2
    /// holds a connection whose streams all wait on the client to it,
    /// since request bodies and responses share the connection.
    pub(crate) fn laxer(a: Option<MinDataRate>, b: Option<MinDataRate>) -> Option<MinDataRate> {
        let (a, b) = (a?, b?);
        Some(MinDataRate {
            bytes_per_second: a.bytes_per_second.min(b.bytes_per_second),
            grace: a.grace.max(b.grace),
        })
    }

    /// Whether `moved` bytes in `waited` seconds of waiting fall short.
    pub(crate) fn falls_short(self, moved: u64, waited: u64) -> bool {
        waited > self.grace.as_secs() && moved < self.bytes_per_second.saturating_mul(waited)
    }
}
