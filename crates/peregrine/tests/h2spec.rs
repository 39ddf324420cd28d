//! `h2spec` (github.com/summerwind/h2spec), the HTTP/2 conformance suite:
//! every case of its generic, http2 and hpack sections, plain and with
//! `--strict`, against h2c servers and over TLS (ALPN `h2`, certificates
//! from `scripts/certs`), over real sockets.
//!
//! `scripts/install-tools` installs it (`go install`); set `H2SPEC` to use
//! another binary. A missing h2spec fails these tests rather than skipping
//! them.

mod common;

use std::path::PathBuf;
use std::process::Command;

use peregrine::{Content, Listener, Method, Server, ServerHandle};

fn h2spec() -> PathBuf {
    if let Some(path) = std::env::var_os("H2SPEC") {
        return path.into();
    }
    let in_gopath = std::env::var_os("HOME").map(|home| PathBuf::from(home).join("go/bin/h2spec"));
    match in_gopath {
        Some(path) if path.exists() => path,
        _ => "h2spec".into(),
    }
}

/// A server on `127.0.0.1:0`; `http1`: whether the port takes HTTP/1.1 too.
fn start(http1: bool) -> ServerHandle {
    start_on(Listener::new(([127, 0, 0, 1], 0)).http1(http1))
}

fn start_on(listener: Listener) -> ServerHandle {
    Server::with_config(common::config())
        .listen(listener)
        .start(|_| async {
            // What h2spec requests, with any method: the body is read,
            // and the answer (with a body: some cases wait for DATA)
            // takes a moment, as a real handler's would. Several cases
            // need their stream still open when their next frames arrive
            // (the concurrent-stream limit, frames on half-closed
            // streams); an instant answer races them.
            let answer = |body: Vec<u8>| async move {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                Content("text/plain", format!("h2spec {}\n", body.len()))
            };
            common::test_router().route_async(Method::Get, "/h2spec", answer).route_async(
                Method::Post,
                "/h2spec",
                answer,
            )
        })
        .expect("test server starts")
}

/// Runs h2spec; returns its report and the "N tests, ..." summary line.
fn run(server: &ServerHandle, strict: bool) -> (String, String) {
    run_with(server, strict, &[])
}

fn run_with(server: &ServerHandle, strict: bool, extra: &[&str]) -> (String, String) {
    let mut cmd = Command::new(h2spec());
    cmd.args(extra);
    // A route that reads the body: on one that does not (or does not
    // exist) the server answers before the request ends and resets the
    // rest (RFC 9113 §8.1), racing the cases that check how a request's
    // later frames are refused.
    cmd.args(["-h", "127.0.0.1", "-p", &server.local_addr().port().to_string(), "-o", "5", "-P", "/h2spec"]);
    if strict {
        cmd.arg("--strict");
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("h2spec runs ({e}); scripts/install-tools installs it"));
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    let summary = report.lines().rev().find(|l| l.contains(" tests, ")).unwrap_or_default().to_owned();
    (report, summary)
}

fn passed_all(summary: &str) -> bool {
    summary.ends_with(", 0 skipped, 0 failed")
}

#[test]
fn every_case_passes_on_an_h2c_port() {
    let server = start(false);
    for strict in [false, true] {
        let (report, summary) = run(&server, strict);
        assert!(passed_all(&summary), "strict={strict}: {summary}\n{report}");
    }
}

/// On a port shared with HTTP/1.1, bytes that are not the HTTP/2 preface
/// are an HTTP/1.1 request: the one case that sends an invalid preface
/// gets a `400` and a close where an h2c-only port closes at once. Every
/// other case passes.
#[test]
fn every_other_case_passes_on_a_shared_port() {
    let server = start(true);
    for strict in [false, true] {
        let (report, summary) = run(&server, strict);
        let failures = report.split("Failures:").nth(1).unwrap_or_default();
        assert!(summary.ends_with(", 0 skipped, 1 failed"), "strict={strict}: {summary}\n{report}");
        assert!(
            failures.contains("3.5. HTTP/2 Connection Preface")
                && failures.contains("Sends invalid connection preface"),
            "strict={strict}: {failures}"
        );
    }
}

/// HTTP/2 over TLS, chosen by ALPN on a listener that also offers
/// HTTP/1.1: every case passes (h2spec's `-t`; `-k` because its client
/// has no way to trust the test CA).
#[cfg(feature = "tls")]
#[test]
fn every_case_passes_over_tls() {
    let dir = std::env::temp_dir().join(format!("peregrine-h2spec-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/certs");
    let status = Command::new(script).arg(&dir).status().expect("run scripts/certs");
    assert!(status.success(), "scripts/certs failed");
    let tls = peregrine::tls::Tls::from_pem_files(dir.join("server.crt"), dir.join("server.key"))
        .expect("load the test certificate");
    let server = start_on(Listener::new(([127, 0, 0, 1], 0)).tls(tls));
    for strict in [false, true] {
        let (report, summary) = run_with(&server, strict, &["-t", "-k"]);
        assert!(passed_all(&summary), "strict={strict}: {summary}\n{report}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
