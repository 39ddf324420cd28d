//! HttpArena's gRPC service (`benchmark.BenchmarkService`) driven by
//! grpcurl, a client others wrote, over every listener that speaks HTTP/2:
//! h2c on the HTTP/1.1 port (by the preface), the h2c-only port, and TLS
//! with ALPN `h2` and a certificate from `scripts/certs` that grpcurl
//! verifies. `scripts/install-tools` installs grpcurl; set `GRPCURL` to
//! use another binary. A missing grpcurl fails these tests.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{free_port, repo_root, Server};

fn grpcurl() -> PathBuf {
    if let Some(path) = std::env::var_os("GRPCURL") {
        return path.into();
    }
    match std::env::var_os("HOME").map(|home| PathBuf::from(home).join("go/bin/grpcurl")) {
        Some(path) if path.exists() => path,
        _ => "grpcurl".into(),
    }
}

/// Runs grpcurl against `target` (`host:port`); `tls`: the CA to trust, or
/// plaintext. Returns (success, stdout, stderr).
fn call(target: &str, tls: Option<&PathBuf>, method: &str, data: &str) -> (bool, String, String) {
    let mut cmd = Command::new(grpcurl());
    match tls {
        Some(ca) => cmd.arg("-cacert").arg(ca),
        None => cmd.arg("-plaintext"),
    };
    cmd.arg("-import-path")
        .arg(repo_root().join("crates/peregrine-tfb/proto"))
        .args(["-proto", "benchmark.proto", "-format-error", "-d", data, target])
        .arg(format!("benchmark.BenchmarkService/{method}"));
    let out =
        cmd.output().unwrap_or_else(|e| panic!("grpcurl runs ({e}); scripts/install-tools installs it"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The `result`s of grpcurl's JSON output, in order.
fn results(stdout: &str) -> Vec<i64> {
    let stream = serde_json::Deserializer::from_str(stdout).into_iter::<serde_json::Value>();
    stream.map(|v| v.expect("grpcurl prints JSON")["result"].as_i64().unwrap_or(0)).collect()
}

#[test]
fn grpcurl_calls_get_sum_and_stream_sum_over_h2c_and_tls() {
    let certs = repo_root().join("target/test-scratch").join(format!("grpc-certs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&certs);
    let status =
        Command::new(repo_root().join("scripts/certs")).arg(&certs).status().expect("run scripts/certs");
    assert!(status.success(), "scripts/certs failed");
    let (h2c, tls1, tls2) = (free_port(), free_port(), free_port());
    let (cert, key) = (certs.join("server.crt"), certs.join("server.key"));
    let server = Server::start_with_args(
        "grpc",
        &[("TLS_CERT", cert.to_str().unwrap()), ("TLS_KEY", key.to_str().unwrap())],
        &[
            "--h2c-port",
            &h2c.to_string(),
            "--tls-port",
            &tls1.to_string(),
            "--tls-h2-port",
            &tls2.to_string(),
        ],
    );
    let ca = certs.join("ca.crt");
    let targets = [
        (server.addr.clone(), None),
        (format!("127.0.0.1:{h2c}"), None),
        (format!("localhost:{tls2}"), Some(&ca)),
    ];
    for (target, tls) in &targets {
        let (ok, out, err) = call(target, *tls, "GetSum", r#"{"a": 40, "b": 2}"#);
        assert!(ok, "{target}: {err}");
        assert_eq!(results(&out), [42], "{target}");
        // The profile's stream lengths: 10, 5000 and 0.
        for count in [10, 5000, 0] {
            let (ok, out, err) =
                call(target, *tls, "StreamSum", &format!(r#"{{"a": 1, "b": 2, "count": {count}}}"#));
            assert!(ok, "{target} count {count}: {err}");
            let want: Vec<i64> = (0..count).map(|i| 3 + i).collect();
            assert!(results(&out) == want, "{target} count {count}: {} replies", results(&out).len());
        }
    }
    // int32 arithmetic wraps, as the reference implementations' does
    // (proto3 leaves a zero result out, so a wrapped sum is checked).
    let (ok, out, _) = call(&server.addr, None, "GetSum", r#"{"a": 2147483647, "b": 1}"#);
    assert!(ok);
    assert_eq!(results(&out), [-2147483648]);
    // A refused count: the status grpcurl reports (3: INVALID_ARGUMENT).
    let (ok, _, err) = call(&server.addr, None, "StreamSum", r#"{"a": 1, "b": 2, "count": -1}"#);
    let error: serde_json::Value = serde_json::from_str(&err).unwrap_or_else(|_| panic!("a status: {err}"));
    assert!(!ok);
    assert_eq!(
        (error["code"].as_i64(), error["message"].as_str()),
        (Some(3), Some("count must not be negative"))
    );
    // The TLS port without h2 in ALPN cannot carry gRPC.
    let (ok, _, _) = call(&format!("localhost:{tls1}"), Some(&ca), "GetSum", r#"{"a": 1, "b": 2}"#);
    assert!(!ok, "gRPC over an HTTP/1.1-only TLS port must fail");
    let _ = std::fs::remove_dir_all(&certs);
}
