//! Requests for the HttpArena profiles beyond TFB: baseline (query sum, and
//! the body added by `POST` with `Content-Length` or chunked), json
//! processing (`/json/{count}?m=`) and upload (the count of body bytes read).

use super::checks;
use super::{Ctx, Reporter};

/// Upload size: well inside HttpArena's 500 KB..20 MB range, small enough to
/// keep the run short.
const UPLOAD_BYTES: usize = 1024 * 1024;

pub fn run(ctx: &Ctx, rep: &mut Reporter) {
    let r = &ctx.routes;
    let t = &ctx.target;
    if let Some(path) = rep.route("baseline", &r.baseline) {
        let uri = format!("{path}?a=13&b=42");
        let get = t.get(&uri).and_then(|resp| checks::check_baseline(&resp, 55));
        rep.record(&format!("GET {uri} -> 55"), get);

        let post = t.request("POST", &uri, &["Content-Length: 1"], b"7");
        let result = t
            .connect()
            .and_then(|mut c| c.exchange(&post))
            .and_then(|resp| checks::check_baseline(&resp, 62));
        rep.record(&format!("POST {uri} body 7 (Content-Length) -> 62"), result);

        let chunked = t.request("POST", &uri, &["Transfer-Encoding: chunked"], b"1\r\n7\r\n0\r\n\r\n");
        let result = t
            .connect()
            .and_then(|mut c| c.exchange(&chunked))
            .and_then(|resp| checks::check_baseline(&resp, 62));
        rep.record(&format!("POST {uri} body 7 (chunked) -> 62"), result);
    }
    if let Some(path) = rep.route("json processing", &r.json_items) {
        for (count, m) in [(5, Some(2)), (5, None), (50, Some(3))] {
            let uri = match m {
                Some(m) => format!("{path}/{count}?{}={m}", r.multiplier_param),
                None => format!("{path}/{count}"),
            };
            let result = t.get(&uri).and_then(|resp| checks::check_json_items(&resp, count, m.unwrap_or(1)));
            rep.record(&format!("GET {uri}"), result);
        }
    }
    if let Some(path) = rep.route("upload", &r.upload) {
        // A pattern rather than zeros, so a server that compresses or
        // deduplicates cannot shortcut the read.
        let body: Vec<u8> = (0..UPLOAD_BYTES).map(|i| (i % 251) as u8).collect();
        let len = format!("Content-Length: {UPLOAD_BYTES}");
        let request = t.request("POST", path, &[&len], &body);
        let result = t
            .connect()
            .and_then(|mut c| c.exchange(&request))
            .and_then(|resp| checks::check_upload(&resp, UPLOAD_BYTES));
        rep.record(&format!("POST {path} {UPLOAD_BYTES} bytes (Content-Length)"), result);

        let mut chunked = Vec::with_capacity(UPLOAD_BYTES + 1024);
        for piece in body.chunks(60_000) {
            chunked.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            chunked.extend_from_slice(piece);
            chunked.extend_from_slice(b"\r\n");
        }
        chunked.extend_from_slice(b"0\r\n\r\n");
        let request = t.request("POST", path, &["Transfer-Encoding: chunked"], &chunked);
        let result = t
            .connect()
            .and_then(|mut c| c.exchange(&request))
            .and_then(|resp| checks::check_upload(&resp, UPLOAD_BYTES));
        rep.record(&format!("POST {path} {UPLOAD_BYTES} bytes (chunked)"), result);
    }
}
