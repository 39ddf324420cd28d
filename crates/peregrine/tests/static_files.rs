//! `peregrine::fs::ServeDir` over real sockets, on real files in a temporary
//! directory: content types, precompressed siblings chosen by
//! `Accept-Encoding`, validators and `304`, `HEAD`, byte ranges, every
//! traversal attempt refused, and both sources (disk per request, memory).
//!
//! The client is raw (`http-probe`, as in `common`), with its own reader
//! because a `304` rightly has no `Content-Length`, which the common
//! client's rules demand of every final response.
//!
//! On the default event loop, or on io_uring with
//! `PEREGRINE_TEST_IO_URING` set (`common::config`): file bodies leave by
//! `sendfile(2)` on both.

mod common;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use http_probe::strict;
use peregrine::fs::ServeDir;
use peregrine::{Router, Server, ServerHandle};

/// 1000 bytes that are not all alike, so ranges are checkable.
fn app_js() -> Vec<u8> {
    (0..1000u32).map(|i| b"abcdefghijklmnopqrstuvwxyz0123456789"[(i % 36) as usize]).collect()
}

const HELLO: &[u8] = b"Hello, static world!\n";

/// A fresh directory with a `root` to serve and an `outside.txt` beside it.
struct Tree {
    base: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let base = std::env::temp_dir().join(format!("peregrine-static-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        let write = |name: &str, bytes: &[u8]| std::fs::write(root.join(name), bytes).unwrap();
        write("hello.txt", HELLO);
        write("app.js", &app_js());
        write("app.js.br", b"BROTLI-BYTES");
        write("app.js.gz", b"GZIP-BYTES");
        write("style.css", b"body { color: red }\n");
        write("style.css.zst", b"ZSTD-BYTES");
        write("data.json", b"{\"a\":1}");
        write("logo.svg", b"<svg/>");
        write("font.woff2", b"wOF2");
        write("noext", b"?");
        write("empty.txt", b"");
        write("with space.txt", b"spaced");
        write("only.txt.gz", b"GZIP-ONLY");
        write("favicon.ico", b"ICO");
        write("sub/page.html", b"<p>page</p>");
        write("app2.js", b"app2");
        std::fs::write(base.join("outside.txt"), b"SECRET OUTSIDE THE ROOT").unwrap();
        symlink("/etc", root.join("etc")).unwrap();
        symlink("/etc/passwd", root.join("passwd-link")).unwrap();
        symlink("../outside.txt", root.join("up")).unwrap();
        symlink("hello.txt", root.join("inside-link.txt")).unwrap();
        // A FIFO: opening it for reading would wait for a writer.
        let made = std::process::Command::new("mkfifo").arg(root.join("fifo")).status().unwrap();
        assert!(made.success(), "mkfifo");
        // A sibling that is a way out: it must never be served.
        symlink("/etc/passwd", root.join("app2.js.br")).unwrap();
        Tree { base }
    }

    fn root(&self) -> PathBuf {
        self.base.join("root")
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn start(files: ServeDir) -> ServerHandle {
    Server::with_config(common::config())
        .spawn("127.0.0.1:0", move |_| {
            let files = files.clone();
            async move { Router::new().get("/static/{*path}", files.clone()).get("/favicon.ico", files) }
        })
        .expect("test server starts")
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    /// The only header called `name`; panics if it repeats.
    fn header(&self, name: &str) -> Option<&str> {
        let mut found = self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name));
        let first = found.next().map(|(_, v)| v.as_str());
        assert!(found.next().is_none(), "{name} repeats: {:?}", self.headers);
        first
    }
}

/// One keep-alive connection; every response is checked for framing.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn new(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Conn { stream, buf: Vec::new() }
    }

    fn get(&mut self, path: &str, headers: &[(&str, &str)]) -> Reply {
        self.send("GET", path, headers)
    }

    fn send(&mut self, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\n");
        for (name, value) in headers {
            req.push_str(&format!("{name}: {value}\r\n"));
        }
        req.push_str("\r\n");
        self.stream.write_all(req.as_bytes()).unwrap();
        let head = http_probe::read_head(&mut self.stream, &mut self.buf).expect("a response head");
        let text = head.raw_text();
        let problems = strict::head_problems(&head);
        assert!(problems.is_empty(), "{problems:?}: {text}");
        let problems: Vec<String> = strict::final_problems(&head, SystemTime::now())
            .into_iter()
            // A 304 has no body, hence no Content-Length.
            .filter(|p| !(head.status == 304 && p == "no Content-Length header"))
            .collect();
        assert!(problems.is_empty(), "{problems:?}: {text}");
        if head.status == 304 {
            assert!(head.header("content-length").is_none(), "{text}");
        }
        let r = http_probe::read_body(&mut self.stream, &mut self.buf, head, method == "HEAD");
        assert!(r.cut_short.is_none() && r.defects.is_empty(), "{:?} {:?}: {text}", r.cut_short, r.defects);
        assert!(strict::leftover_problem(&self.buf).is_none(), "bytes after the body: {text}");
        Reply { status: r.status, headers: r.headers, body: r.body }
    }
}

#[test]
fn files_come_with_their_type_and_validators() {
    let tree = Tree::new();
    let server = start(ServeDir::new(tree.root()));
    let mut c = Conn::new(server.local_addr());
    let r = c.get("/static/hello.txt", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, HELLO);
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.header("cache-control"), None);
    let etag = r.header("etag").unwrap();
    assert!(etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2, "{etag}");
    let modified = httpdate::parse_http_date(r.header("last-modified").unwrap()).unwrap();
    let mtime = std::fs::metadata(tree.root().join("hello.txt")).unwrap().modified().unwrap();
    assert!(mtime.duration_since(modified).unwrap() < Duration::from_secs(1));

    for (path, content_type, body) in [
        ("/static/app.js", "javascript; charset=utf-8", &app_js()[..]),
        ("/static/data.json", "application/json", b"{\"a\":1}"),
        ("/static/logo.svg", "image/svg+xml; charset=utf-8", b"<svg/>"),
        ("/static/font.woff2", "font/woff2", b"wOF2"),
        ("/static/noext", "application/octet-stream", b"?"),
        ("/static/style.css", "text/css; charset=utf-8", b"body { color: red }\n"),
        ("/static/sub/page.html", "text/html; charset=utf-8", b"<p>page</p>"),
        ("/static/with%20space.txt", "text/plain; charset=utf-8", b"spaced"),
        ("/static/empty.txt", "text/plain; charset=utf-8", b""),
        ("/static/inside-link.txt", "text/plain; charset=utf-8", HELLO),
        // A sibling by its own name is an ordinary file.
        ("/static/app.js.gz", "application/gzip", b"GZIP-BYTES"),
        // A route without parameters serves the request path.
        ("/favicon.ico", "image/x-icon", b"ICO"),
    ] {
        let r = c.get(path, &[]);
        assert_eq!(r.status, 200, "{path}");
        assert!(r.header("content-type").unwrap().ends_with(content_type), "{path}: {:?}", r.headers);
        assert_eq!(r.body, body, "{path}");
        assert_eq!(r.header("content-encoding"), None, "{path}");
    }
    server.shutdown();
}

/// Path, `Accept-Encoding`, then the status, `Content-Encoding` and body
/// expected.
type Negotiation<'a> = (&'a str, Option<&'a str>, u16, Option<&'a str>, &'a [u8]);

#[test]
fn precompressed_siblings_follow_accept_encoding() {
    let tree = Tree::new();
    let server = start(ServeDir::new(tree.root()));
    let mut c = Conn::new(server.local_addr());
    let js = app_js();
    let cases: [Negotiation<'_>; 14] = [
        // HttpArena's header: br wins.
        ("/static/app.js", Some("br;q=1, gzip;q=0.8"), 200, Some("br"), b"BROTLI-BYTES"),
        ("/static/app.js", Some("gzip, deflate"), 200, Some("gzip"), b"GZIP-BYTES"),
        ("/static/app.js", Some("br;q=0.5, gzip"), 200, Some("gzip"), b"GZIP-BYTES"),
        ("/static/app.js", Some("gzip;q=0, br;q=0"), 200, None, &js),
        ("/static/app.js", Some("deflate"), 200, None, &js),
        ("/static/app.js", Some("*"), 200, Some("br"), b"BROTLI-BYTES"),
        ("/static/app.js", Some("identity;q=0, gzip"), 200, Some("gzip"), b"GZIP-BYTES"),
        ("/static/app.js", Some("gzip;q=0.5, identity"), 200, None, &js),
        ("/static/style.css", Some("gzip, zstd"), 200, Some("zstd"), b"ZSTD-BYTES"),
        // Without Accept-Encoding, the exact file.
        ("/static/app.js", None, 200, None, &js),
        // Nothing acceptable exists.
        ("/static/hello.txt", Some("identity;q=0"), 406, None, b"no acceptable content coding\n"),
        ("/static/hello.txt", Some("br, *;q=0"), 406, None, b"no acceptable content coding\n"),
        // The file itself must exist, even when only its sibling would go.
        ("/static/only.txt", Some("gzip"), 404, None, b"not found\n"),
        // A sibling that links out of the root is not there.
        ("/static/app2.js", Some("br"), 200, None, b"app2"),
    ];
    let mut etags = Vec::new();
    for (path, accept, status, coding, body) in cases {
        let headers: Vec<(&str, &str)> = accept.map(|a| ("Accept-Encoding", a)).into_iter().collect();
        let r = c.get(path, &headers);
        assert_eq!(r.status, status, "{path} {accept:?}");
        assert_eq!(r.header("content-encoding"), coding, "{path} {accept:?}");
        assert_eq!(r.body, body, "{path} {accept:?}");
        if status != 404 {
            assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{path} {accept:?}");
        }
        if path == "/static/app.js" {
            etags.push((coding, r.header("etag").unwrap().to_string()));
        }
    }
    // Each variant has its own validator.
    for (ca, ea) in &etags {
        for (cb, eb) in &etags {
            assert_eq!(ca == cb, ea == eb, "{etags:?}");
        }
    }
    server.shutdown();
}

#[test]
fn validators_answer_304() {
    let tree = Tree::new();
    let server = start(ServeDir::new(tree.root()).cache_control("public, max-age=60"));
    let mut c = Conn::new(server.local_addr());
    let first = c.get("/static/app.js", &[]);
    assert_eq!(first.header("cache-control"), Some("public, max-age=60"));
    let etag = first.header("etag").unwrap().to_string();
    let modified = first.header("last-modified").unwrap().to_string();
    let weak = format!("W/{etag}");
    let listed = format!("\"nope\", {etag}");
    let not_modified = |r: &Reply, what: &str| {
        assert_eq!(r.status, 304, "{what}");
        assert!(r.body.is_empty(), "{what}");
        assert_eq!(r.header("etag"), Some(etag.as_str()), "{what}");
        assert_eq!(r.header("cache-control"), Some("public, max-age=60"), "{what}");
        assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{what}");
        assert_eq!(r.header("content-encoding"), None, "{what}");
    };
    for value in [etag.as_str(), weak.as_str(), listed.as_str(), "*"] {
        not_modified(&c.get("/static/app.js", &[("If-None-Match", value)]), value);
    }
    not_modified(&c.get("/static/app.js", &[("If-Modified-Since", &modified)]), "If-Modified-Since");
    // HEAD too.
    let r = c.send("HEAD", "/static/app.js", &[("If-None-Match", &etag)]);
    assert_eq!(r.status, 304);

    let old = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(86_400));
    for headers in [
        vec![("If-None-Match", "\"nope\"")],
        vec![("If-Modified-Since", old.as_str())],
        vec![("If-Modified-Since", "not a date")],
        // If-None-Match wins over If-Modified-Since.
        vec![("If-None-Match", "\"nope\""), ("If-Modified-Since", modified.as_str())],
        // The identity tag does not match the br variant.
        vec![("If-None-Match", etag.as_str()), ("Accept-Encoding", "br")],
    ] {
        let r = c.get("/static/app.js", &headers);
        assert_eq!(r.status, 200, "{headers:?}");
        assert!(!r.body.is_empty(), "{headers:?}");
    }
    let br = c.get("/static/app.js", &[("Accept-Encoding", "br")]);
    let br_tag = br.header("etag").unwrap();
    let r = c.get("/static/app.js", &[("Accept-Encoding", "br"), ("If-None-Match", br_tag)]);
    assert_eq!(r.status, 304);
    server.shutdown();
}

#[test]
fn head_has_the_length_and_headers_but_no_body() {
    let tree = Tree::new();
    let server = start(ServeDir::new(tree.root()));
    let mut c = Conn::new(server.local_addr());
    let get = c.get("/static/app.js", &[]);
    let head = c.send("HEAD", "/static/app.js", &[]);
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-length"), Some("1000"));
    for name in ["content-type", "etag", "last-modified", "vary", "accept-ranges"] {
        assert_eq!(head.header(name), get.header(name), "{name}");
    }
    let head = c.send("HEAD", "/static/app.js", &[("Accept-Encoding", "gzip")]);
    assert_eq!((head.header("content-length"), head.header("content-encoding")), (Some("10"), Some("gzip")));
    // Ranges are defined for GET only: HEAD answers as the GET without one.
    let head = c.send("HEAD", "/static/app.js", &[("Range", "bytes=0-9")]);
    assert_eq!((head.status, head.header("content-length")), (200, Some("1000")));
    assert_eq!(c.send("HEAD", "/static/missing", &[]).status, 404);
    // The connection is still in step.
    assert_eq!(c.get("/static/hello.txt", &[]).body, HELLO);
    server.shutdown();
}

#[test]
fn single_ranges_get_206_and_the_rest_200_or_416() {
    let tree = Tree::new();
    let server = start(ServeDir::new(tree.root()));
    let mut c = Conn::new(server.local_addr());
    let all = app_js();
    for (range, first, last) in
        [("bytes=0-4", 0, 4), ("bytes=-6", 994, 999), ("bytes=990-", 990, 999), ("bytes=5-100000", 5, 999)]
    {
        let r = c.get("/static/app.js", &[("Range", range)]);
        assert_eq!(r.status, 206, "{range}");
        assert_eq!(r.header("content-range"), Some(format!("bytes {first}-{last}/1000").as_str()), "{range}");
        assert_eq!(r.body, &all[first..=last], "{range}");
        assert_eq!(r.header("accept-ranges"), Some("bytes"));
    }
    for range in ["bytes=1000-", "bytes=5000-6000", "bytes=-0", "bytes=99999999999999999999999-"] {
        let r = c.get("/static/app.js", &[("Range", range)]);
        assert_eq!(r.status, 416, "{range}");
        assert_eq!(r.header("content-range"), Some("bytes */1000"), "{range}");
        assert_eq!(r.header("content-encoding"), None, "{range}");
    }
    // Garbage, several ranges (overlapping or not), other units: ignored.
    for range in ["bytes=abc", "bytes=5-2", "bytes=0-1,3-4", "bytes=0-5,2-8", "lines=1-2", "bytes", "=0-1"] {
        let r = c.get("/static/app.js", &[("Range", range)]);
        assert_eq!(r.status, 200, "{range}");
        assert_eq!(r.body, all, "{range}");
        assert_eq!(r.header("content-range"), None, "{range}");
    }
    // A range of the chosen variant: the compressed bytes.
    let r = c.get("/static/app.js", &[("Range", "bytes=0-5"), ("Accept-Encoding", "br")]);
    assert_eq!((r.status, r.header("content-encoding")), (206, Some("br")));
    assert_eq!(r.header("content-range"), Some("bytes 0-5/12"));
    assert_eq!(r.body, b"BROTLI");
    // An empty file has no byte to range over.
    assert_eq!(c.get("/static/empty.txt", &[("Range", "bytes=0-")]).status, 416);
    assert_eq!(c.get("/static/empty.txt", &[("Range", "bytes=-5")]).status, 200);
    // If-Range keeps the range only while the file is the same.
    let etag = c.get("/static/app.js", &[]).header("etag").unwrap().to_string();
    let r = c.get("/static/app.js", &[("Range", "bytes=0-4"), ("If-Range", &etag)]);
    assert_eq!(r.status, 206);
    let r = c.get("/static/app.js", &[("Range", "bytes=0-4"), ("If-Range", "\"stale\"")]);
    assert_eq!((r.status, r.body.len()), (200, 1000));
    server.shutdown();
}

/// Every way out of the root, encoded or linked, is a 404 (or the parser's
/// 400), never a 500, and never the file.
fn assert_no_way_out(files: ServeDir) {
    let server = start(files);
    let mut c = Conn::new(server.local_addr());
    for path in [
        "/static/../outside.txt",
        "/static/../../../../etc/passwd",
        "/static/%2e%2e/outside.txt",
        "/static/%2E%2e/outside.txt",
        "/static/..%2foutside.txt",
        "/static/..%2Foutside.txt",
        "/static/sub/..%2f..%2foutside.txt",
        "/static/sub%5c..%5c..%5coutside.txt",
        "/static/..\\outside.txt",
        "/static/a%00b",
        "/static/hello.txt%00.png",
        "/static//etc/passwd",
        "/static/%2fetc/passwd",
        "/static/etc/passwd",
        "/static/passwd-link",
        "/static/up",
        "/static/./hello.txt",
        "/static/sub",
        "/static/sub/",
        "/static/fifo",
        "/static/",
        "/static/missing.txt",
        "/static/%zz",
        "/static/%",
    ] {
        let r = c.get(path, &[]);
        assert!(r.status == 404 || r.status == 400, "{path}: {} {:?}", r.status, r.headers);
        let body = String::from_utf8_lossy(&r.body);
        assert!(!body.contains("root:") && !body.contains("SECRET"), "{path}: {body}");
        if r.status == 400 {
            // The parser refused the request line; start again.
            c = Conn::new(server.local_addr());
        }
    }
    let r = c.get("/static/app2.js", &[("Accept-Encoding", "br")]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"app2"[..]));
    server.shutdown();
}

#[test]
fn nothing_outside_the_root_is_reachable() {
    let tree = Tree::new();
    assert_no_way_out(ServeDir::new(tree.root()));
}

#[test]
fn nothing_outside_the_root_is_reachable_in_memory() {
    let tree = Tree::new();
    assert_no_way_out(ServeDir::new(tree.root()).in_memory().unwrap());
}

#[test]
fn disk_mode_reads_per_request_and_memory_mode_keeps_its_snapshot() {
    let tree = Tree::new();
    let disk = start(ServeDir::new(tree.root()));
    let memory_files = ServeDir::new(tree.root()).in_memory().unwrap();
    assert!(memory_files.is_in_memory());
    let memory = start(memory_files);
    let (mut d, mut m) = (Conn::new(disk.local_addr()), Conn::new(memory.local_addr()));
    assert_eq!(d.get("/static/hello.txt", &[]).body, HELLO);
    let from_memory = m.get("/static/hello.txt", &[]);
    assert_eq!(from_memory.body, HELLO);
    assert_eq!(from_memory.header("etag"), d.get("/static/hello.txt", &[]).header("etag"));

    std::fs::write(tree.root().join("hello.txt"), b"changed").unwrap();
    std::fs::write(tree.root().join("new.txt"), b"new").unwrap();
    assert_eq!(d.get("/static/hello.txt", &[]).body, b"changed");
    assert_eq!(d.get("/static/new.txt", &[]).body, b"new");
    assert_eq!(m.get("/static/hello.txt", &[]).body, HELLO);
    assert_eq!(m.get("/static/new.txt", &[]).status, 404);
    disk.shutdown();
    memory.shutdown();
}

#[test]
fn memory_mode_answers_like_disk_mode() {
    let tree = Tree::new();
    let disk = start(ServeDir::new(tree.root()));
    let memory = start(ServeDir::new(tree.root()).in_memory().unwrap());
    let (mut d, mut m) = (Conn::new(disk.local_addr()), Conn::new(memory.local_addr()));
    for (method, path, headers) in [
        ("GET", "/static/app.js", vec![]),
        ("GET", "/static/app.js", vec![("Accept-Encoding", "br;q=1, gzip;q=0.8")]),
        ("GET", "/static/style.css", vec![("Accept-Encoding", "zstd")]),
        ("GET", "/static/app.js", vec![("Range", "bytes=10-19")]),
        ("GET", "/static/app.js", vec![("Range", "bytes=2000-")]),
        ("GET", "/static/hello.txt", vec![("Accept-Encoding", "identity;q=0")]),
        ("GET", "/static/inside-link.txt", vec![]),
        ("GET", "/static/sub/page.html", vec![]),
        ("GET", "/static/app.js.gz", vec![]),
        ("HEAD", "/static/app.js", vec![]),
        ("GET", "/static/only.txt", vec![("Accept-Encoding", "gzip")]),
    ] {
        let (a, b) = (d.send(method, path, &headers), m.send(method, path, &headers));
        assert_eq!(a.status, b.status, "{method} {path} {headers:?}");
        assert_eq!(a.body, b.body, "{method} {path} {headers:?}");
        for name in ["content-type", "content-encoding", "content-range", "etag", "last-modified", "vary"] {
            assert_eq!(a.header(name), b.header(name), "{name}: {method} {path} {headers:?}");
        }
    }
    let etag = m.get("/static/app.js", &[]).header("etag").unwrap().to_string();
    assert_eq!(m.get("/static/app.js", &[("If-None-Match", &etag)]).status, 304);
    disk.shutdown();
    memory.shutdown();
}

#[test]
fn precompressed_siblings_can_be_turned_off() {
    let tree = Tree::new();
    let server = start(ServeDir::new(tree.root()).precompressed(false));
    let mut c = Conn::new(server.local_addr());
    let r = c.get("/static/app.js", &[("Accept-Encoding", "br, gzip")]);
    assert_eq!((r.status, r.header("content-encoding"), r.header("vary")), (200, None, None));
    assert_eq!(r.body, app_js());
    assert_eq!(c.get("/static/app.js", &[("Accept-Encoding", "identity;q=0")]).status, 406);
    server.shutdown();
}

#[test]
fn a_missing_root_is_404_not_500() {
    let server = start(ServeDir::new(Path::new("/nonexistent/peregrine/static")));
    let mut c = Conn::new(server.local_addr());
    assert_eq!(c.get("/static/x.txt", &[]).status, 404);
    assert!(ServeDir::new("/nonexistent/peregrine/static").in_memory().is_err());
    server.shutdown();
}

#[test]
fn large_files_arrive_whole_and_in_ranges() {
    let tree = Tree::new();
    // Larger than the connection's flush threshold and kept buffer.
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(tree.root().join("big.bin"), &big).unwrap();
    for files in [ServeDir::new(tree.root()), ServeDir::new(tree.root()).in_memory().unwrap()] {
        let server = start(files);
        let mut c = Conn::new(server.local_addr());
        for _ in 0..2 {
            let r = c.get("/static/big.bin", &[]);
            assert_eq!((r.status, r.body.len()), (200, big.len()));
            assert!(r.body == big);
            let r = c.get("/static/big.bin", &[("Range", "bytes=2999990-")]);
            assert_eq!(r.status, 206);
            assert_eq!(r.body, &big[2_999_990..]);
            assert_eq!(r.header("content-range"), Some("bytes 2999990-2999999/3000000"));
        }
        // Still in step after the large bodies.
        assert_eq!(c.get("/static/hello.txt", &[]).body, HELLO);
        server.shutdown();
    }
}

#[test]
fn pipelined_requests_stay_in_order_around_file_bodies() {
    // Bodies from 4 KiB up leave by sendfile after their head; the small
    // ones between them come from the output buffer. Sent in one write,
    // they must come back whole and in order.
    let tree = Tree::new();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(tree.root().join("big.bin"), &big).unwrap();
    let server = start(ServeDir::new(tree.root()));
    let mut c = Conn::new(server.local_addr());
    let one = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
    let batch =
        [one("/static/big.bin"), one("/static/hello.txt"), one("/static/big.bin"), one("/static/app.js")];
    c.stream.write_all(batch.concat().as_bytes()).unwrap();
    let expected: [&[u8]; 4] = [&big, HELLO, &big, &app_js()];
    for want in expected {
        let head = http_probe::read_head(&mut c.stream, &mut c.buf).expect("a response head");
        let r = http_probe::read_body(&mut c.stream, &mut c.buf, head, false);
        assert!(r.cut_short.is_none() && r.defects.is_empty(), "{:?} {:?}", r.cut_short, r.defects);
        assert_eq!(r.status, 200);
        assert!(r.body == want, "body of {} bytes, expected {}", r.body.len(), want.len());
    }
    assert!(c.buf.is_empty());
    server.shutdown();
}

#[test]
fn renamed_deleted_and_new_files_are_seen_within_two_seconds() {
    // The per-worker open-file cache keeps what a path resolved to for a
    // second; an edit in place shows at once (the test above), a rename, a
    // deletion or a new file at a path that was a 404 within that second.
    let tree = Tree::new();
    let server = start(ServeDir::new(tree.root()));
    let mut c = Conn::new(server.local_addr());
    let big_old = vec![b'o'; 10_000];
    std::fs::write(tree.root().join("deploy.js"), &big_old).unwrap();
    assert_eq!(c.get("/static/deploy.js", &[]).body, big_old);
    assert_eq!(c.get("/static/later.txt", &[]).status, 404);
    assert_eq!(c.get("/static/gone.txt", &[]).status, 404);
    std::fs::write(tree.root().join("gone.txt"), b"soon gone").unwrap();

    // An atomic deploy: write aside, rename over.
    let big_new = vec![b'n'; 20_000];
    std::fs::write(tree.root().join("deploy.js.tmp"), &big_new).unwrap();
    std::fs::rename(tree.root().join("deploy.js.tmp"), tree.root().join("deploy.js")).unwrap();
    std::fs::write(tree.root().join("later.txt"), b"here now").unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(c.get("/static/gone.txt", &[]).body, b"soon gone");
    let r = c.get("/static/deploy.js", &[]);
    assert_eq!(r.header("content-length"), Some("20000"));
    assert!(r.body == big_new);
    assert_eq!(c.get("/static/later.txt", &[]).body, b"here now");

    std::fs::remove_file(tree.root().join("gone.txt")).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(c.get("/static/gone.txt", &[]).status, 404);
    server.shutdown();
}

#[test]
fn file_bodies_behind_middleware_arrive_whole() {
    // Middleware sees an owned response, so the file is read into memory
    // instead of being sent by sendfile; the bytes must be the same.
    let tree = Tree::new();
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 241) as u8).collect();
    std::fs::write(tree.root().join("big.bin"), &big).unwrap();
    let files = ServeDir::new(tree.root());
    let server = Server::with_config(common::config())
        .spawn("127.0.0.1:0", move |_| {
            let files = files.clone();
            async move {
                let tag =
                    peregrine::middleware::from_fn(|req, next: peregrine::middleware::Next| async move {
                        next.run(req).await.header("X-Seen", "yes")
                    });
                Router::new().get("/static/{*path}", files).layer(tag)
            }
        })
        .expect("test server starts");
    let mut c = Conn::new(server.local_addr());
    for _ in 0..2 {
        let r = c.get("/static/big.bin", &[]);
        assert_eq!((r.status, r.header("x-seen")), (200, Some("yes")));
        assert!(r.body == big);
        let r = c.get("/static/big.bin", &[("Range", "bytes=100000-100009")]);
        assert_eq!(r.status, 206);
        assert_eq!(r.body, &big[100_000..100_010]);
    }
    server.shutdown();
}
