//! Pure checks over one parsed [`Response`].
//!
//! Each function answers "does this response satisfy rule X of SPEC.md?"
//! with `Ok(())` or an `expected ..., got ...` message, and does no I/O, so
//! unit tests can feed every check a deliberately wrong response. The
//! orchestration modules (`tfb`, `arena`, `badinput`, `db`) decide which
//! requests to send and which checks apply to each answer.

use super::html;
use crate::rig::client::{Framing, Response};
use http_probe::date::parse_imf_fixdate;
use serde_json::Value;

pub type Check = Result<(), String>;

/// The HttpArena json-processing dataset, shared with the server crate.
pub(super) const DATASET_JSON: &str = include_str!("../../../peregrine-tfb/data/dataset.json");

/// Content types the spec prescribes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaType {
    /// `text/plain`, optionally `; charset=utf-8`.
    TextPlain,
    /// `application/json`, optionally `; charset=utf-8`.
    Json,
    /// `text/html; charset=utf-8`, the parameter required.
    HtmlUtf8,
}

/// Runs every check and joins all failures, so one report line shows every
/// problem of a response instead of only the first.
pub fn all<I: IntoIterator<Item = Check>>(checks: I) -> Check {
    let errors: Vec<String> = checks.into_iter().filter_map(Result::err).collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

pub fn check_status(resp: &Response, want: u16) -> Check {
    if resp.status == want {
        Ok(())
    } else {
        Err(format!(
            "expected status {want}, got {} {} (body {})",
            resp.status,
            resp.reason,
            resp.body_preview()
        ))
    }
}

/// An HTTP/1.1 request gets an HTTP/1.1 answer (keep-alive and pipelining
/// depend on it).
pub fn check_version(resp: &Response) -> Check {
    if resp.version == "HTTP/1.1" {
        Ok(())
    } else {
        Err(format!("expected an HTTP/1.1 response, got {}", resp.version))
    }
}

pub fn check_server(resp: &Response) -> Check {
    match resp.header("server") {
        Some(v) if !v.is_empty() => Ok(()),
        Some(_) => Err("expected a non-empty Server header, got an empty one".into()),
        None => Err("expected a Server header, got none".into()),
    }
}

pub fn check_date(resp: &Response) -> Check {
    let dates: Vec<&str> = resp.header_all("date").collect();
    match dates.as_slice() {
        [one] => {
            parse_imf_fixdate(one).map(|_| ()).map_err(|e| format!("expected Date in IMF-fixdate, got {e}"))
        }
        [] => Err("expected a Date header, got none".into()),
        many => Err(format!("expected one Date header, got {}", many.len())),
    }
}

pub fn check_content_type(resp: &Response, want: MediaType) -> Check {
    let Some(value) = resp.header("content-type") else {
        return Err("expected a Content-Type header, got none".into());
    };
    let mut parts = value.split(';');
    let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let mut charset = None;
    for param in parts {
        let param = param.trim();
        if param.is_empty() {
            continue;
        }
        match param.split_once('=') {
            Some((k, v)) if k.trim().eq_ignore_ascii_case("charset") => {
                charset = Some(v.trim().trim_matches('"').to_ascii_lowercase());
            }
            _ => return Err(format!("expected no Content-Type parameter other than charset, got {value:?}")),
        }
    }
    let (want_essence, charset_required) = match want {
        MediaType::TextPlain => ("text/plain", false),
        MediaType::Json => ("application/json", false),
        MediaType::HtmlUtf8 => ("text/html", true),
    };
    let label =
        if charset_required { format!("{want_essence}; charset=utf-8") } else { want_essence.to_string() };
    let charset_ok = match charset.as_deref() {
        None => !charset_required,
        Some(c) => c == "utf-8",
    };
    if essence == want_essence && charset_ok {
        Ok(())
    } else {
        Err(format!("expected Content-Type {label}, got {value:?}"))
    }
}

/// `Content-Length` present (not chunked) and equal to the body length.
pub fn check_content_length(resp: &Response) -> Check {
    let mut lengths = resp.header_all("content-length");
    let Some(first) = lengths.next() else {
        return Err(match resp.framing {
            Framing::Chunked => "expected Content-Length, got chunked transfer coding".into(),
            _ => "expected a Content-Length header, got none".into(),
        });
    };
    if lengths.next().is_some() {
        return Err("expected one Content-Length header, got several".into());
    }
    let Some(declared) = resp.content_length() else {
        return Err(format!("expected Content-Length to be a number, got {first:?}"));
    };
    let short = resp.defects.iter().any(|d| d.contains("shorter than Content-Length"));
    let long = resp.defects.iter().any(|d| d.contains("unexpected bytes after"));
    if declared != resp.body.len() || short || long {
        let detail = resp
            .defects
            .iter()
            .find(|d| d.contains("Content-Length") || d.contains("unexpected bytes"))
            .cloned()
            .unwrap_or_else(|| format!("{} body bytes", resp.body.len()));
        return Err(format!("expected Content-Length {declared} to match the body, got {detail}"));
    }
    Ok(())
}

/// No framing or syntax defects were seen while parsing.
pub fn check_well_formed(resp: &Response) -> Check {
    if resp.defects.is_empty() {
        Ok(())
    } else {
        Err(format!("expected a well-formed response, got {}", resp.defects.join(", ")))
    }
}

/// Status 200 plus every header the spec requires of the seven test types.
pub fn check_common(resp: &Response, media: MediaType) -> Check {
    check_status(resp, 200)?;
    all([
        check_version(resp),
        check_server(resp),
        check_date(resp),
        check_content_type(resp, media),
        check_content_length(resp),
        check_well_formed(resp),
    ])
}

pub fn check_plaintext(resp: &Response) -> Check {
    // A wrong status makes every other complaint noise; report it alone.
    check_status(resp, 200)?;
    all([check_common(resp, MediaType::TextPlain), check_body_text(resp, "Hello, World!")])
}

fn check_body_text(resp: &Response, want: &str) -> Check {
    if resp.body == want.as_bytes() {
        Ok(())
    } else {
        Err(format!("expected body {want:?}, got {}", resp.body_preview()))
    }
}

fn parse_json(resp: &Response) -> Result<Value, String> {
    serde_json::from_slice(&resp.body)
        .map_err(|e| format!("expected a JSON body, got {} ({e})", resp.body_preview()))
}

pub fn check_json(resp: &Response) -> Check {
    // A wrong status makes every other complaint noise; report it alone.
    check_status(resp, 200)?;
    all([check_common(resp, MediaType::Json), check_json_body(resp)])
}

fn check_json_body(resp: &Response) -> Check {
    let v = parse_json(resp)?;
    if v == serde_json::json!({"message": "Hello, World!"}) {
        Ok(())
    } else {
        Err(format!("expected {{\"message\":\"Hello, World!\"}}, got {v}"))
    }
}

/// One World row: exactly `id` and `randomNumber`, integers in 1..=10000.
pub fn check_world_row(v: &Value) -> Check {
    let Some(obj) = v.as_object() else {
        return Err(format!("expected a World object, got {v}"));
    };
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    if keys != ["id", "randomNumber"] {
        return Err(format!("expected keys id and randomNumber, got {v}"));
    }
    for key in ["id", "randomNumber"] {
        match obj[key].as_i64() {
            Some(n) if (1..=10_000).contains(&n) => {}
            _ => return Err(format!("expected {key} an integer in 1..=10000, got {v}")),
        }
    }
    Ok(())
}

pub fn check_db(resp: &Response) -> Check {
    // A wrong status makes every other complaint noise; report it alone.
    check_status(resp, 200)?;
    all([check_common(resp, MediaType::Json), parse_json(resp).and_then(|v| check_world_row(&v))])
}

/// A JSON array of `n` World rows (`/queries`, `/cached-queries`).
pub fn check_rows(resp: &Response, n: usize) -> Check {
    // A wrong status makes every other complaint noise; report it alone.
    check_status(resp, 200)?;
    all([check_common(resp, MediaType::Json), rows_body(resp, n).map(|_| ())])
}

fn rows_body(resp: &Response, n: usize) -> Result<Vec<(i64, i64)>, String> {
    let v = parse_json(resp)?;
    let Some(items) = v.as_array() else {
        return Err(format!("expected a JSON array, got {}", resp.body_preview()));
    };
    if items.len() != n {
        return Err(format!("expected an array of {n} rows, got {}", items.len()));
    }
    let mut rows = Vec::with_capacity(n);
    for (i, item) in items.iter().enumerate() {
        check_world_row(item).map_err(|e| format!("row {i}: {e}"))?;
        // Both fields were just checked to be integers.
        rows.push((
            item["id"].as_i64().unwrap_or_default(),
            item["randomNumber"].as_i64().unwrap_or_default(),
        ));
    }
    Ok(rows)
}

/// `/updates`: rows as in `/queries`, and a repeated id shows one value,
/// the one that was stored.
pub fn check_updates(resp: &Response, n: usize) -> Check {
    // A wrong status makes every other complaint noise; report it alone.
    check_status(resp, 200)?;
    all([check_common(resp, MediaType::Json), update_rows(resp, n).map(|_| ())])
}

/// The `(id, randomNumber)` pairs of an `/updates` answer, checked for
/// shape and self-consistency.
pub fn update_rows(resp: &Response, n: usize) -> Result<Vec<(i64, i64)>, String> {
    let rows = rows_body(resp, n)?;
    let mut seen = std::collections::HashMap::new();
    for &(id, value) in &rows {
        if let Some(&earlier) = seen.get(&id) {
            if earlier != value {
                return Err(format!(
                    "expected repeated id {id} to show the one stored value, got {earlier} and {value}"
                ));
            }
        }
        seen.insert(id, value);
    }
    Ok(rows)
}

pub fn check_fortunes(resp: &Response) -> Check {
    // A wrong status makes every other complaint noise; report it alone.
    check_status(resp, 200)?;
    all([check_common(resp, MediaType::HtmlUtf8), check_fortunes_body(&resp.body)])
}

fn check_fortunes_body(body: &[u8]) -> Check {
    let text =
        std::str::from_utf8(body).map_err(|e| format!("expected a UTF-8 body, got invalid UTF-8 ({e})"))?;
    if text.to_ascii_lowercase().contains("<script") {
        return Err("expected the <script> fortune escaped, got a raw <script> tag".into());
    }
    html::compare_fortunes(text)
}

/// Error responses: the status, well-formed framing with a correct
/// `Content-Length`, and a valid `Date`.
pub fn check_error(resp: &Response, status: u16) -> Check {
    check_status(resp, status)?;
    // RFC 9110 §6.6.1 requires Date on 4xx; on 5xx it is optional, but if
    // sent it must still be valid.
    let date = if status < 500 || resp.header("date").is_some() { check_date(resp) } else { Ok(()) };
    all([check_content_length(resp), check_well_formed(resp), date])
}

/// `405` with an `Allow` header listing `allowed`.
pub fn check_method_not_allowed(resp: &Response, allowed: &str) -> Check {
    all([check_error(resp, 405), check_allow(resp, allowed)])
}

fn check_allow(resp: &Response, allowed: &str) -> Check {
    let Some(allow) = resp.header("allow") else {
        return Err("expected an Allow header, got none".into());
    };
    if allow.split(',').any(|m| m.trim() == allowed) {
        Ok(())
    } else {
        Err(format!("expected Allow to list {allowed}, got {allow:?}"))
    }
}

/// HttpArena baseline: the sum as the whole `text/plain` body.
pub fn check_baseline(resp: &Response, sum: i64) -> Check {
    // A wrong status makes every other complaint noise; report it alone.
    check_status(resp, 200)?;
    all([check_common(resp, MediaType::TextPlain), check_body_text(resp, &sum.to_string())])
}

/// HttpArena json processing: the first `count` dataset items, each with
/// `total = price * quantity * m`, and `count`.
pub fn check_json_items(resp: &Response, count: usize, m: i64) -> Check {
    // A wrong status makes every other complaint noise; report it alone.
    check_status(resp, 200)?;
    all([check_common(resp, MediaType::Json), json_items_body(resp, count, m)])
}

fn json_items_body(resp: &Response, count: usize, m: i64) -> Check {
    let v = parse_json(resp)?;
    let dataset: Value =
        serde_json::from_str(DATASET_JSON).map_err(|e| format!("embedded dataset.json is invalid: {e}"))?;
    let source = dataset.as_array().map(Vec::as_slice).unwrap_or_default();
    let items = v
        .get("items")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("expected an object with an items array, got {}", resp.body_preview()))?;
    if v.get("count").and_then(Value::as_u64) != Some(count as u64) {
        return Err(format!("expected count {count}, got {}", v.get("count").unwrap_or(&Value::Null)));
    }
    if items.len() != count {
        return Err(format!("expected {count} items, got {}", items.len()));
    }
    for (i, item) in items.iter().enumerate() {
        let price = item.get("price").and_then(Value::as_f64);
        let quantity = item.get("quantity").and_then(Value::as_f64);
        let total = item.get("total").and_then(Value::as_f64);
        let (Some(price), Some(quantity), Some(total)) = (price, quantity, total) else {
            return Err(format!("item {i}: expected numeric price, quantity and total, got {item}"));
        };
        let want = price * quantity * m as f64;
        if (total - want).abs() > 1e-6 * want.abs().max(1.0) {
            return Err(format!("item {i}: expected total {want} (price*quantity*{m}), got {total}"));
        }
        // Every other field is the dataset's own, unchanged.
        if let (Some(got), Some(Value::Object(src))) = (item.as_object(), source.get(i)) {
            for (k, want) in src {
                if got.get(k) != Some(want) {
                    return Err(format!(
                        "item {i}: expected {k} = {want} (dataset item {i}), got {}",
                        got.get(k).unwrap_or(&Value::Null)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// HttpArena upload: the body is the number of bytes read.
pub fn check_upload(resp: &Response, n: usize) -> Check {
    check_status(resp, 200)?;
    all([check_content_length(resp), check_well_formed(resp), check_body_text(resp, &n.to_string())])
}

/// Two `Date` values taken at least two seconds apart must differ and move
/// forward.
pub fn check_date_advanced(first: &str, second: &str) -> Check {
    let a = parse_imf_fixdate(first)?;
    let b = parse_imf_fixdate(second)?;
    if b > a {
        Ok(())
    } else {
        Err(format!("expected a later Date after 2 s, got {first:?} then {second:?}"))
    }
}

/// The server's `Date` against our clock (only meaningful on one machine).
pub fn check_date_near(date: &str, now_unix: i64, tolerance_secs: i64) -> Check {
    let t = parse_imf_fixdate(date)?;
    if (t - now_unix).abs() <= tolerance_secs {
        Ok(())
    } else {
        Err(format!(
            "expected Date within {tolerance_secs} s of this machine's clock, got {date:?} ({} s off)",
            t - now_unix
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::html::render_expected;

    const DATE: &str = "Sat, 21 Nov 2026 04:40:51 GMT";

    /// A response with the given status line, headers (Content-Length
    /// added when `cl` is true) and body, parsed like a real one.
    fn resp_with(status: &str, headers: &[&str], body: &[u8], cl: bool) -> Response {
        let mut raw = format!("HTTP/1.1 {status}\r\n");
        for h in headers {
            raw.push_str(h);
            raw.push_str("\r\n");
        }
        if cl {
            raw.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        raw.push_str("\r\n");
        let mut bytes = raw.into_bytes();
        bytes.extend_from_slice(body);
        Response::parse(&bytes).expect("test response parses")
    }

    fn ok(content_type: &str, body: &[u8]) -> Response {
        resp_with(
            "200 OK",
            &["Server: t", &format!("Date: {DATE}"), &format!("Content-Type: {content_type}")],
            body,
            true,
        )
    }

    fn rows_json(n: usize) -> String {
        let rows: Vec<String> =
            (1..=n).map(|i| format!("{{\"id\":{i},\"randomNumber\":{}}}", i * 7)).collect();
        format!("[{}]", rows.join(","))
    }

    #[test]
    fn plaintext_passes_and_each_defect_fails() {
        check_plaintext(&ok("text/plain", b"Hello, World!")).expect("good");
        check_plaintext(&ok("text/plain; charset=utf-8", b"Hello, World!")).expect("charset ok");
        let cases = [
            // wrong Content-Length (too long, then too short)
            resp_with(
                "200 OK",
                &["Server: t", &format!("Date: {DATE}"), "Content-Type: text/plain", "Content-Length: 12"],
                b"Hello, World!",
                false,
            ),
            resp_with(
                "200 OK",
                &["Server: t", &format!("Date: {DATE}"), "Content-Type: text/plain", "Content-Length: 14"],
                b"Hello, World!",
                false,
            ),
            // missing Content-Length (chunked instead)
            resp_with(
                "200 OK",
                &[
                    "Server: t",
                    &format!("Date: {DATE}"),
                    "Content-Type: text/plain",
                    "Transfer-Encoding: chunked",
                ],
                b"d\r\nHello, World!\r\n0\r\n\r\n",
                false,
            ),
            // bad Date formats
            resp_with(
                "200 OK",
                &["Server: t", "Date: Sat, 21 Nov 2026 04:40:51 UTC", "Content-Type: text/plain"],
                b"Hello, World!",
                true,
            ),
            resp_with(
                "200 OK",
                &["Server: t", "Date: Sun, 21 Nov 2026 04:40:51 GMT", "Content-Type: text/plain"],
                b"Hello, World!",
                true,
            ),
            resp_with("200 OK", &["Server: t", "Content-Type: text/plain"], b"Hello, World!", true),
            // missing Server
            resp_with(
                "200 OK",
                &[&format!("Date: {DATE}"), "Content-Type: text/plain"],
                b"Hello, World!",
                true,
            ),
            // wrong content type, wrong body, wrong status
            ok("text/html", b"Hello, World!"),
            ok("text/plain; charset=latin1", b"Hello, World!"),
            ok("text/plain", b"Hello, World!\n"),
            resp_with(
                "201 Created",
                &["Server: t", &format!("Date: {DATE}"), "Content-Type: text/plain"],
                b"Hello, World!",
                true,
            ),
        ];
        for (i, r) in cases.iter().enumerate() {
            assert!(check_plaintext(r).is_err(), "case {i} passed: {r:?}");
        }
    }

    #[test]
    fn bare_lf_head_is_not_well_formed() {
        let r = Response::parse(
            format!("HTTP/1.1 200 OK\nServer: t\nDate: {DATE}\nContent-Type: text/plain\nContent-Length: 13\n\nHello, World!").as_bytes(),
        )
        .expect("parse");
        let err = check_plaintext(&r).unwrap_err();
        assert!(err.contains("bare LF"), "{err}");
    }

    #[test]
    fn json_checks() {
        check_json(&ok("application/json", br#"{"message":"Hello, World!"}"#)).expect("good");
        check_json(&ok("application/json", br#"{ "message" : "Hello, World!" }"#)).expect("spacing");
        assert!(check_json(&ok("text/plain", br#"{"message":"Hello, World!"}"#)).is_err());
        assert!(check_json(&ok("application/json", br#"{"message":"Hello World!"}"#)).is_err());
        assert!(check_json(&ok("application/json", br#"{"message":"Hello, World!","x":1}"#)).is_err());
        assert!(check_json(&ok("application/json", br#"{"message":"Hello, World!""#)).is_err());
    }

    #[test]
    fn db_and_rows_checks() {
        check_db(&ok("application/json", br#"{"id":1,"randomNumber":10000}"#)).expect("good");
        for bad in [
            &br#"{"id":0,"randomNumber":5}"#[..],
            br#"{"id":1,"randomNumber":10001}"#,
            br#"{"id":1,"randomnumber":5}"#,
            br#"{"id":"1","randomNumber":5}"#,
            br#"{"id":1.5,"randomNumber":5}"#,
            br#"[{"id":1,"randomNumber":5}]"#,
        ] {
            assert!(check_db(&ok("application/json", bad)).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        check_rows(&ok("application/json", rows_json(20).as_bytes()), 20).expect("20 rows");
        let err = check_rows(&ok("application/json", rows_json(19).as_bytes()), 20).unwrap_err();
        assert!(err.contains("expected an array of 20 rows, got 19"), "{err}");
        assert!(check_rows(&ok("application/json", br#"{"id":1,"randomNumber":5}"#), 1).is_err());
    }

    #[test]
    fn updates_with_conflicting_repeated_ids_fail() {
        let good = br#"[{"id":5,"randomNumber":9},{"id":5,"randomNumber":9}]"#;
        check_updates(&ok("application/json", good), 2).expect("consistent");
        let bad = br#"[{"id":5,"randomNumber":9},{"id":5,"randomNumber":8}]"#;
        assert!(check_updates(&ok("application/json", bad), 2).is_err());
    }

    #[test]
    fn fortunes_checks() {
        let page = render_expected();
        let html = "text/html; charset=utf-8";
        check_fortunes(&ok(html, page.as_bytes())).expect("reference page");
        check_fortunes(&ok("text/html;charset=UTF-8", page.as_bytes())).expect("spelling variant");
        // Missing charset parameter.
        assert!(check_fortunes(&ok("text/html", page.as_bytes())).is_err());
        // Unescaped script row.
        let raw = page.replace("&lt;script&gt;", "<script>").replace("&lt;/script&gt;", "</script>");
        let err = check_fortunes(&ok(html, raw.as_bytes())).unwrap_err();
        assert!(err.contains("<script>"), "{err}");
        // Japanese row mangled into Latin-1 bytes.
        let mangled: Vec<u8> = page.replace("フレームワークのベンチマーク", "?").into_bytes();
        assert!(check_fortunes(&ok(html, &mangled)).is_err());
        let mut invalid = page.clone().into_bytes();
        invalid.extend_from_slice(&[0xff, 0xfe]);
        assert!(check_fortunes(&ok(html, &invalid)).is_err());
        // Unsorted.
        let swapped = page.replacen("<tr><td>", "<tr><td>X", 1);
        assert!(check_fortunes(&ok(html, swapped.as_bytes())).is_err());
    }

    #[test]
    fn error_and_405_checks() {
        let e405 =
            resp_with("405 Method Not Allowed", &[&format!("Date: {DATE}"), "Allow: GET, HEAD"], b"", true);
        check_method_not_allowed(&e405, "GET").expect("good 405");
        // 200 instead of 405.
        assert!(check_method_not_allowed(&ok("text/plain", b"Hello, World!"), "GET").is_err());
        // 405 without Allow.
        let no_allow = resp_with("405 Method Not Allowed", &[&format!("Date: {DATE}")], b"", true);
        let err = check_method_not_allowed(&no_allow, "GET").unwrap_err();
        assert!(err.contains("Allow"), "{err}");
        // Allow without the method.
        let wrong_allow =
            resp_with("405 Method Not Allowed", &[&format!("Date: {DATE}"), "Allow: POST"], b"", true);
        assert!(check_method_not_allowed(&wrong_allow, "GET").is_err());
        // An error without Content-Length, or with a wrong one.
        let no_cl =
            resp_with("400 Bad Request", &[&format!("Date: {DATE}"), "Connection: close"], b"bad", false);
        assert!(check_error(&no_cl, 400).is_err());
        let wrong_cl =
            resp_with("400 Bad Request", &[&format!("Date: {DATE}"), "Content-Length: 10"], b"bad", false);
        assert!(check_error(&wrong_cl, 400).is_err());
        let good_400 = resp_with("400 Bad Request", &[&format!("Date: {DATE}")], b"bad request", true);
        check_error(&good_400, 400).expect("good 400");
        assert!(check_error(&good_400, 431).is_err());
    }

    #[test]
    fn arena_checks() {
        check_baseline(&ok("text/plain", b"55"), 55).expect("sum");
        assert!(check_baseline(&ok("text/plain", b"56"), 55).is_err());
        check_upload(&ok("text/plain", b"1048576"), 1_048_576).expect("upload");
        assert!(check_upload(&ok("text/plain", b"1048575"), 1_048_576).is_err());

        let dataset: Value = serde_json::from_str(DATASET_JSON).expect("dataset");
        let build = |m: i64, skew: i64| {
            let items: Vec<Value> = dataset.as_array().expect("array")[..5]
                .iter()
                .map(|it| {
                    let mut it = it.clone();
                    let total =
                        it["price"].as_i64().unwrap_or(0) * it["quantity"].as_i64().unwrap_or(0) * m + skew;
                    it["total"] = total.into();
                    it
                })
                .collect();
            serde_json::json!({"items": items, "count": 5}).to_string()
        };
        check_json_items(&ok("application/json", build(2, 0).as_bytes()), 5, 2).expect("items");
        assert!(check_json_items(&ok("application/json", build(1, 0).as_bytes()), 5, 2).is_err());
        assert!(check_json_items(&ok("application/json", build(2, 1).as_bytes()), 5, 2).is_err());
        assert!(check_json_items(&ok("application/json", build(2, 0).as_bytes()), 4, 2).is_err());
    }

    #[test]
    fn date_progress_checks() {
        check_date_advanced(DATE, "Sat, 21 Nov 2026 04:40:53 GMT").expect("advanced");
        assert!(check_date_advanced(DATE, DATE).is_err());
        assert!(check_date_advanced(DATE, "Sat, 21 Nov 2026 04:40:50 GMT").is_err());
        let t = parse_imf_fixdate(DATE).expect("date");
        check_date_near(DATE, t + 1, 2).expect("near");
        assert!(check_date_near(DATE, t + 10, 2).is_err());
    }
}
