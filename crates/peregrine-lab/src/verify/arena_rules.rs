//! HttpArena's rules beyond single requests: the pipelined profile's
//! `/pipeline`, json-comp's negotiated compression, the TCP-fragmentation
//! checks, and the validator's anti-cheat cases for async-db (random
//! operands, the empty `min=9999&max=9999` range) and crud (a `MISS` after
//! every `PUT`).
//!
//! A group whose first request gets `404` is skipped (a server without
//! that endpoint), as the static-file group does.

use std::io::Read;
use std::time::Duration;

use super::checks::Check;
use super::{Ctx, Reporter};
use crate::rig::client::Response;

pub fn run(ctx: &Ctx, rep: &mut Reporter) {
    pipeline(ctx, rep);
    json_comp(ctx, rep);
    fragmentation(ctx, rep);
    async_db(ctx, rep);
    crud(ctx, rep);
}

fn missing(rep: &mut Reporter, what: &str, first: &Result<Response, String>) -> bool {
    match first {
        Ok(resp) if resp.status == 404 => {
            rep.skip(what, "first request is 404: no such endpoint");
            true
        }
        _ => false,
    }
}

fn pipeline(ctx: &Ctx, rep: &mut Reporter) {
    let t = &ctx.target;
    let first = t.get("/pipeline");
    if missing(rep, "pipelined profile", &first) {
        return;
    }
    let result = first.and_then(|resp| {
        if resp.status != 200 || resp.body != b"ok" {
            return Err(format!("status {} body {:?}", resp.status, resp.body_preview()));
        }
        match resp.header("content-type") {
            Some(ct) if ct.starts_with("text/plain") => {}
            other => return Err(format!("Content-Type {other:?}, want text/plain")),
        }
        let mut conn = t.connect()?;
        let batch: Vec<u8> = (0..16).flat_map(|_| t.get_request("/pipeline")).collect();
        conn.send(&batch)?;
        for i in 0..16 {
            let r = conn.read_response(false)?;
            if r.status != 200 || r.body != b"ok" {
                return Err(format!("pipelined response {i}: {} {:?}", r.status, r.body_preview()));
            }
        }
        Ok(())
    });
    rep.record("GET /pipeline -> ok, 16 pipelined in order", result);
}

/// Decodes a `gzip` or `br` body.
fn decode(coding: &str, body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    match coding {
        "gzip" => {
            flate2::read::GzDecoder::new(body).read_to_end(&mut out).map(|_| out).map_err(|e| e.to_string())
        }
        "br" => brotli::BrotliDecompress(&mut &body[..], &mut out).map(|()| out).map_err(|e| e.to_string()),
        other => Err(format!("unexpected Content-Encoding {other}")),
    }
}

fn json_comp(ctx: &Ctx, rep: &mut Reporter) {
    let t = &ctx.target;
    let Some(path) = rep.route("json-comp", &ctx.routes.json_items) else { return };
    let uri = format!("{path}/50?{}=1", ctx.routes.multiplier_param);
    let plain = t.get(&uri);
    if missing(rep, "json-comp", &plain) {
        return;
    }
    let result = plain.and_then(|plain| {
        if plain.header("content-encoding").is_some() {
            return Err("Content-Encoding without Accept-Encoding in the request".into());
        }
        let request = t.request("GET", &uri, &["Accept-Encoding: gzip, br"], b"");
        let compressed = t.connect().and_then(|mut c| c.exchange(&request))?;
        let Some(coding) = compressed.header("content-encoding").map(str::to_owned) else {
            return Err("no Content-Encoding for Accept-Encoding: gzip, br".into());
        };
        let decoded = decode(&coding, &compressed.body)?;
        if decoded != plain.body {
            return Err(format!("the {coding} body does not decode to the uncompressed one"));
        }
        Ok(format!("{coding}, {} of {} bytes", compressed.body.len(), plain.body.len()))
    });
    match result {
        Ok(detail) => rep.pass(&format!("GET {uri} compressed when accepted, plain otherwise ({detail})")),
        Err(why) => rep.fail(&format!("GET {uri} compressed when accepted, plain otherwise"), &why),
    }
}

/// Requests split at HttpArena's boundaries, each with `Connection: close`:
/// the server must answer, then close.
fn fragmentation(ctx: &Ctx, rep: &mut Reporter) {
    let t = &ctx.target;
    let Some(path) = rep.route("fragmentation", &ctx.routes.baseline) else { return };
    let pieces: [(&str, Vec<Vec<u8>>); 3] = [
        (
            "request line split mid-path",
            vec![format!("GET {}", &path[..path.len() / 2]).into_bytes(), format!("{}?a=1&b=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &path[path.len() / 2..]).into_bytes()],
        ),
        (
            "headers one per write",
            vec![
                format!("GET {path}?a=1&b=2 HTTP/1.1\r\n").into_bytes(),
                b"Host: x\r\n".to_vec(),
                b"Connection: close\r\n".to_vec(),
                b"\r\n".to_vec(),
            ],
        ),
        (
            "body one byte at a time",
            std::iter::once(format!("POST {path}?a=1&b=2 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n").into_bytes())
                .chain([b"1".to_vec(), b"0".to_vec()])
                .collect(),
        ),
    ];
    for (name, writes) in pieces {
        let expected = if name.starts_with("body") { "13" } else { "3" };
        let result = t.connect().and_then(|mut conn| {
            for piece in &writes {
                conn.send(piece)?;
                std::thread::sleep(Duration::from_millis(20));
            }
            let resp = conn.read_response(false)?;
            if resp.status != 200 || resp.body != expected.as_bytes() {
                return Err(format!("got {} {:?}, want 200 {expected}", resp.status, resp.body_preview()));
            }
            match conn.wait_closed(Duration::from_secs(2)) {
                crate::rig::client::CloseState::Closed => Ok(()),
                other => Err(format!("not closed after Connection: close ({other:?})")),
            }
        });
        rep.record(&format!("fragmented: {name}, answered then closed"), result);
    }
}

/// The async-db body's `count`, and that every item's price is in range.
fn async_db_count(resp: &Response, min: i64, max: i64) -> Result<usize, String> {
    if resp.status != 200 {
        return Err(format!("status {}", resp.status));
    }
    let v: serde_json::Value = serde_json::from_slice(&resp.body).map_err(|e| format!("not JSON: {e}"))?;
    let items = v["items"].as_array().ok_or("no items array")?;
    let count = v["count"].as_u64().ok_or("no count")? as usize;
    if count != items.len() {
        return Err(format!("count {count} but {} items", items.len()));
    }
    for item in items {
        let price = item["price"].as_i64().ok_or("an item without a price")?;
        if price < min || price > max {
            return Err(format!("price {price} outside {min}..={max}"));
        }
        for field in ["id", "name", "category", "quantity", "active", "tags", "rating"] {
            if item.get(field).is_none() {
                return Err(format!("an item without {field}"));
            }
        }
    }
    Ok(count)
}

fn async_db(ctx: &Ctx, rep: &mut Reporter) {
    let t = &ctx.target;
    let first = t.get("/async-db?min=10&max=50&limit=5");
    if missing(rep, "async-db", &first) {
        return;
    }
    let mut cases: Vec<(i64, i64, usize)> = [(5, 80), (20, 150), (100, 400), (10, 50)]
        .into_iter()
        .zip([7, 18, 33, 50])
        .map(|((a, b), l)| (a, b, l))
        .collect();
    // Operands the server cannot have prepared answers for.
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(7, |d| d.subsec_nanos());
    let low = 1 + i64::from(seed % 200);
    cases.push((low, low + 150, 1 + (seed % 50) as usize));
    for (min, max, limit) in cases {
        let uri = format!("/async-db?min={min}&max={max}&limit={limit}");
        let result: Check = t.get(&uri).and_then(|resp| {
            let count = async_db_count(&resp, min, max)?;
            if count == limit {
                Ok(())
            } else {
                Err(format!("count {count}, want {limit}"))
            }
        });
        rep.record(&format!("GET {uri} -> {limit} items in range"), result);
    }
    let empty = t.get("/async-db?min=9999&max=9999&limit=50").and_then(|resp| {
        match async_db_count(&resp, 9999, 9999)? {
            0 => Ok(()),
            n => Err(format!("count {n}, want 0")),
        }
    });
    rep.record("GET /async-db?min=9999&max=9999 -> count 0", empty);
}

fn crud(ctx: &Ctx, rep: &mut Reporter) {
    let t = &ctx.target;
    let first = t.get("/crud/items/1");
    if missing(rep, "crud", &first) {
        return;
    }
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(3, |d| d.subsec_nanos());
    let id = 1 + seed % 50_000;
    let price = 1 + seed % 997;
    let uri = format!("/crud/items/{id}");
    let result: Check = (|| {
        // Warm the cache, then see a hit.
        let _ = t.get(&uri)?;
        let hit = t.get(&uri)?;
        if hit.status != 200 || hit.header("x-cache") != Some("HIT") {
            return Err(format!(
                "second GET: {} X-Cache {:?}, want 200 HIT",
                hit.status,
                hit.header("x-cache")
            ));
        }
        let body = format!("{{\"name\":\"verify {seed}\",\"price\":{price},\"quantity\":3}}");
        let put = t.request(
            "PUT",
            &uri,
            &["Content-Type: application/json", &format!("Content-Length: {}", body.len())],
            body.as_bytes(),
        );
        let put = t.connect().and_then(|mut c| c.exchange(&put))?;
        if put.status != 200 {
            return Err(format!("PUT: status {}", put.status));
        }
        let after = t.get(&uri)?;
        if after.header("x-cache") != Some("MISS") {
            return Err(format!("GET after PUT: X-Cache {:?}, want MISS", after.header("x-cache")));
        }
        let v: serde_json::Value =
            serde_json::from_slice(&after.body).map_err(|e| format!("not JSON: {e}"))?;
        if v["price"].as_i64() != Some(i64::from(price))
            || v["name"].as_str() != Some(&format!("verify {seed}"))
        {
            return Err(format!("GET after PUT returned {v}, not the new value"));
        }
        let missing = t.get("/crud/items/999999999")?;
        if missing.status != 404 {
            return Err(format!("GET of an absent id: status {}", missing.status));
        }
        Ok(())
    })();
    rep.record(&format!("crud: GET {uri} HIT, PUT, then MISS with the new value; absent id 404"), result);
}
