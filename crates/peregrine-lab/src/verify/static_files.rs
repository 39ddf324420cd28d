//! HttpArena's `static` profile: `GET /static/{file}` for its 20 files,
//! each with the right `Content-Type` and, without `Accept-Encoding`, its
//! exact on-disk size; with the profile's `Accept-Encoding: br;q=1,
//! gzip;q=0.8`, the file or a `br`/`gzip` body saying so; `404` for a
//! missing file; and no way out of the directory (`..`, encoded or not, is
//! a 4xx, never the file and never a 5xx).
//!
//! A server that answers `404` for the first file has no static route: the
//! group is skipped rather than failed (the lab's reference test server,
//! and peers that do not enter this profile).

use super::checks::{self, Check};
use super::{Ctx, Reporter};
use crate::rig::client::Response;

/// The profile's header.
const ACCEPT_ENCODING: &str = "Accept-Encoding: br;q=1, gzip;q=0.8";

/// HttpArena's files: name, size on disk, acceptable content types (the
/// part before any `;`).
const FILES: [(&str, usize, &[&str]); 20] = [
    ("reset.css", 8192, CSS),
    ("analytics.js", 12288, JS),
    ("app.js", 204800, JS),
    ("bold.woff2", 22528, &["font/woff2"]),
    ("components.css", 204800, CSS),
    ("footer.html", 56320, HTML),
    ("header.html", 122880, HTML),
    ("helpers.js", 22528, JS),
    ("hero.webp", 46080, WEBP),
    ("icon-sprite.svg", 71680, SVG),
    ("layout.css", 25600, CSS),
    ("logo.svg", 15344, SVG),
    ("manifest.json", 2883, &["application/json", "application/manifest+json"]),
    ("regular.woff2", 18432, &["font/woff2"]),
    ("router.js", 35840, JS),
    ("theme.css", 18432, CSS),
    ("thumb1.webp", 8192, WEBP),
    ("thumb2.webp", 6144, WEBP),
    ("utilities.css", 61440, CSS),
    ("vendor.js", 307200, JS),
];
const CSS: &[&str] = &["text/css"];
const JS: &[&str] = &["application/javascript", "text/javascript"];
const HTML: &[&str] = &["text/html"];
const SVG: &[&str] = &["image/svg+xml"];
const WEBP: &[&str] = &["image/webp"];

pub fn run(ctx: &Ctx, rep: &mut Reporter) {
    let t = &ctx.target;
    match t.get("/static/reset.css") {
        Ok(resp) if resp.status == 404 => {
            return rep.skip("static files", "GET /static/reset.css is 404: no static route");
        }
        Err(e) => return rep.fail("GET /static/reset.css", &e),
        Ok(_) => {}
    }
    for (name, size, types) in FILES {
        let uri = format!("/static/{name}");
        let plain = t.get(&uri).and_then(|resp| check_identity(&resp, size, types));
        rep.record(&format!("GET {uri} -> {size} bytes"), plain);
        let request = t.request("GET", &uri, &[ACCEPT_ENCODING], b"");
        let encoded = t
            .connect()
            .and_then(|mut c| c.exchange(&request))
            .and_then(|resp| check_encoded(&resp, size, types));
        rep.record(&format!("GET {uri} ({ACCEPT_ENCODING})"), encoded);
    }
    let missing = t.get("/static/no-such-file.css").and_then(|resp| checks::check_status(&resp, 404));
    rep.record("GET /static/no-such-file.css -> 404", missing);
    for uri in ["/static/../Cargo.toml", "/static/%2e%2e/%2e%2e/Cargo.toml", "/static/..%2f..%2fCargo.toml"] {
        let request = t.get_request(uri);
        let result = t.connect().and_then(|mut c| c.exchange(&request)).and_then(|resp| refused(&resp));
        rep.record(&format!("GET {uri} -> 4xx"), result);
    }
}

fn check_identity(resp: &Response, size: usize, types: &[&str]) -> Check {
    checks::check_status(resp, 200)?;
    checks::all([
        checks::check_content_length(resp),
        checks::check_well_formed(resp),
        check_type(resp, types),
        match resp.header("content-encoding") {
            None => Ok(()),
            Some(coding) => {
                Err(format!("expected no Content-Encoding without Accept-Encoding, got {coding:?}"))
            }
        },
        check_size(resp, size),
    ])
}

fn check_encoded(resp: &Response, size: usize, types: &[&str]) -> Check {
    checks::check_status(resp, 200)?;
    let coding = match resp.header("content-encoding") {
        None => check_size(resp, size),
        Some(c) if c.eq_ignore_ascii_case("br") || c.eq_ignore_ascii_case("gzip") => {
            if resp.body.is_empty() {
                Err(format!("expected a {c} body, got an empty one"))
            } else {
                Ok(())
            }
        }
        Some(c) => Err(format!("expected br, gzip or no Content-Encoding, got {c:?}")),
    };
    checks::all([
        checks::check_content_length(resp),
        checks::check_well_formed(resp),
        check_type(resp, types),
        coding,
    ])
}

fn check_type(resp: &Response, types: &[&str]) -> Check {
    let value = resp.header("content-type").unwrap_or("");
    let essence = value.split(';').next().unwrap_or("").trim();
    if types.iter().any(|t| essence.eq_ignore_ascii_case(t)) {
        Ok(())
    } else {
        Err(format!("expected Content-Type {}, got {value:?}", types.join(" or ")))
    }
}

fn check_size(resp: &Response, size: usize) -> Check {
    if resp.body.len() == size {
        Ok(())
    } else {
        Err(format!("expected the file's {size} bytes, got {}", resp.body.len()))
    }
}

fn refused(resp: &Response) -> Check {
    if (400..500).contains(&resp.status) {
        Ok(())
    } else {
        Err(format!("expected a 4xx, got {} ({} body bytes)", resp.status, resp.body.len()))
    }
}
