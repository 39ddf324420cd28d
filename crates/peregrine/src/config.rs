//! [`Config`]: every limit and timeout of the server, in one place.

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
    /// Listen backlog per worker.
    pub backlog: u32,
    /// Open connections per worker; beyond it new connections are answered
    /// `503` and closed. Lowered at start when the process's open-file limit
    /// could not hold every worker's connections plus a reserve.
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
    /// Time in-flight requests get to finish after a shutdown signal.
    pub shutdown_timeout: Duration,
    /// Initial size of each connection's read buffer.
    pub read_buffer_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workers: std::thread::available_parallelism().map(usize::from).unwrap_or(1),
            pin_workers: false,
            backlog: 4096,
            max_connections_per_worker: 25_000,
            max_head_bytes: 16 * 1024,
            max_headers: 100,
            max_body_bytes: 1024 * 1024,
            max_stream_body_bytes: 64 * 1024 * 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            io_timeout: Duration::from_secs(30),
            shutdown_timeout: Duration::from_millis(4500),
            read_buffer_bytes: 8 * 1024,
        }
    }
}
