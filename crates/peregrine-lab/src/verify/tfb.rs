//! Requests for the seven TFB test types.
//!
//! Owns which requests exercise the test types (one per type, the parameter
//! rule for `queries`/`count`, keep-alive, `Connection: close`, HTTP/1.0,
//! pipelining, the `Date` clock) and the concurrent-load helper the database
//! checks reuse. What a correct answer looks like lives in `checks`.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::checks::{self, Check};
use super::{Ctx, Reporter};
use crate::rig::client::{CloseState, Response, Target};

type CheckFn = Box<dyn Fn(&Response) -> Check + Send + Sync>;
type Checker = fn(&Response) -> Check;

/// Values of `queries`/`count` and the row count each must produce.
pub const PARAM_CASES: [(Option<&str>, usize); 9] = [
    (Some("20"), 20),
    (Some("2"), 2),
    (Some("0"), 1),
    (Some("foo"), 1),
    (Some("501"), 500),
    (Some(""), 1),
    (None, 1),
    (Some("-5"), 1),
    (Some("99999999999999999999"), 500),
];

pub fn run(ctx: &Ctx, rep: &mut Reporter, concurrent_load: bool) {
    let r = &ctx.routes;
    single(ctx, rep, "plaintext", &r.plaintext, &checks::check_plaintext);
    single(ctx, rep, "json", &r.json, &checks::check_json);
    single(ctx, rep, "db", &r.db, &checks::check_db);
    single(ctx, rep, "fortunes", &r.fortunes, &checks::check_fortunes);
    param_rule(ctx, rep, "queries", &r.queries, &r.queries_param, checks::check_rows);
    param_rule(ctx, rep, "updates", &r.updates, &r.updates_param, checks::check_updates);
    param_rule(ctx, rep, "cached-queries", &r.cached_queries, &r.cached_queries_param, checks::check_rows);
    keep_alive(ctx, rep);
    connection_close(ctx, rep);
    http10(ctx, rep);
    // With PostgreSQL the same load runs inside the statement-count check.
    if concurrent_load {
        if let Some(path) = rep.route("concurrent queries", &r.queries) {
            let q = format!("{path}?{}=20", r.queries_param);
            let name = format!("{} concurrent GET {q}", ctx.concurrency);
            let result =
                concurrent_gets(&ctx.target, &q, ctx.concurrency, &|resp| checks::check_rows(resp, 20));
            rep.record(&name, result);
        }
    }
}

fn single(ctx: &Ctx, rep: &mut Reporter, label: &str, path: &str, check: &dyn Fn(&Response) -> Check) {
    if let Some(path) = rep.route(label, path) {
        let result = ctx.target.get(path).and_then(|resp| check(&resp));
        rep.record(&format!("GET {path}"), result);
    }
}

fn param_rule(
    ctx: &Ctx,
    rep: &mut Reporter,
    label: &str,
    path: &str,
    param: &str,
    check: fn(&Response, usize) -> Check,
) {
    let Some(path) = rep.route(label, path) else {
        return;
    };
    for (value, want) in PARAM_CASES {
        let uri = match value {
            Some(v) => format!("{path}?{param}={v}"),
            None => path.to_string(),
        };
        let result = ctx.target.get(&uri).and_then(|resp| check(&resp, want));
        let noun = if want == 1 { "row" } else { "rows" };
        rep.record(&format!("GET {uri} -> {want} {noun}"), result);
    }
}

/// Several requests on one connection, each answered.
fn keep_alive(ctx: &Ctx, rep: &mut Reporter) {
    let r = &ctx.routes;
    let plan: Vec<(&str, Checker)> = [
        (r.plaintext.as_str(), checks::check_plaintext as Checker),
        (r.json.as_str(), checks::check_json),
        (r.db.as_str(), checks::check_db),
        (r.plaintext.as_str(), checks::check_plaintext),
    ]
    .into_iter()
    .filter(|(p, _)| !p.is_empty())
    .collect();
    if plan.len() < 2 {
        rep.skip("keep-alive", "needs two of plaintext, json, db");
        return;
    }
    let name = format!("keep-alive: {} requests on one connection", plan.len());
    let result = (|| {
        let mut conn = ctx.target.connect()?;
        for (i, (path, check)) in plan.iter().enumerate() {
            let resp = conn
                .exchange(&ctx.target.get_request(path))
                .map_err(|e| format!("request {i} (GET {path}): {e}"))?;
            check(&resp).map_err(|e| format!("request {i} (GET {path}): {e}"))?;
        }
        Ok(())
    })();
    rep.record(&name, result);
}

/// `Connection: close` is honoured: the answer, then the server closes.
fn connection_close(ctx: &Ctx, rep: &mut Reporter) {
    let Some(path) = rep.route("connection close", &ctx.routes.plaintext) else {
        return;
    };
    let request = ctx.target.request("GET", path, &["Connection: close"], b"");
    let result = (|| {
        let mut conn = ctx.target.connect()?;
        let resp = conn.exchange(&request)?;
        checks::check_plaintext(&resp)?;
        expect_closed(conn.wait_closed(ctx.close_wait), ctx.close_wait)
    })();
    rep.record(&format!("GET {path} with Connection: close -> closed after"), result);
}

/// An HTTP/1.0 request without keep-alive is answered, then closed.
fn http10(ctx: &Ctx, rep: &mut Reporter) {
    let Some(path) = rep.route("HTTP/1.0", &ctx.routes.plaintext) else {
        return;
    };
    let request = format!("GET {}{path} HTTP/1.0\r\nHost: {}\r\n\r\n", ctx.target.prefix, ctx.target.host);
    let result = (|| {
        let mut conn = ctx.target.connect()?;
        let resp = conn.exchange(request.as_bytes())?;
        checks::all([
            checks::check_status(&resp, 200),
            checks::check_content_length(&resp),
            checks::check_well_formed(&resp),
        ])?;
        expect_closed(conn.wait_closed(ctx.close_wait), ctx.close_wait)
    })();
    rep.record(&format!("HTTP/1.0 GET {path} -> closed after"), result);
}

/// Turns a close probe into a check result.
pub fn expect_closed(state: CloseState, waited: Duration) -> Check {
    match state {
        CloseState::Closed => Ok(()),
        CloseState::Open => Err(format!(
            "expected the server to close the connection, got it still open after {} s",
            waited.as_secs_f32()
        )),
        CloseState::Data(n) => Err(format!("expected the connection closed, got {n} more bytes")),
    }
}

/// Pipelining: a batch of requests in one write, answered in order.
pub fn pipelining(ctx: &Ctx, rep: &mut Reporter) {
    let r = &ctx.routes;
    if let Some(path) = rep.route("pipelining", &r.plaintext) {
        let plan: Vec<(String, CheckFn)> =
            (0..16).map(|_| (path.to_string(), Box::new(checks::check_plaintext) as CheckFn)).collect();
        let result = pipeline(&ctx.target, &plan);
        rep.record(&format!("16 pipelined GET {path} in one write"), result);
    }
    // Mixed kinds catch a server that answers fast requests ahead of slow
    // (database) ones, or drops one of them when both share one read.
    let q = |p: &str, name: &str, v: usize| format!("{p}?{name}={v}");
    let mut plan: Vec<(String, CheckFn)> = Vec::new();
    let mut add = |path: &str, uri: String, check: CheckFn| {
        if !path.is_empty() {
            plan.push((uri, check));
        }
    };
    add(&r.plaintext, r.plaintext.clone(), Box::new(checks::check_plaintext));
    add(&r.db, r.db.clone(), Box::new(checks::check_db));
    add(&r.json, r.json.clone(), Box::new(checks::check_json));
    add(&r.queries, q(&r.queries, &r.queries_param, 3), Box::new(|x| checks::check_rows(x, 3)));
    add(&r.plaintext, r.plaintext.clone(), Box::new(checks::check_plaintext));
    add(&r.fortunes, r.fortunes.clone(), Box::new(checks::check_fortunes));
    add(
        &r.cached_queries,
        q(&r.cached_queries, &r.cached_queries_param, 2),
        Box::new(|x| checks::check_rows(x, 2)),
    );
    add(&r.updates, q(&r.updates, &r.updates_param, 4), Box::new(|x| checks::check_updates(x, 4)));
    add(&r.json, r.json.clone(), Box::new(checks::check_json));
    if plan.len() < 2 {
        rep.skip("pipelined mixed requests", "needs two configured TFB routes");
        return;
    }
    let name = format!("{} pipelined mixed requests in one write", plan.len());
    let result = pipeline(&ctx.target, &plan);
    rep.record(&name, result);
}

fn pipeline(target: &Target, plan: &[(String, CheckFn)]) -> Check {
    let mut conn = target.connect()?;
    let batch: Vec<u8> = plan.iter().flat_map(|(uri, _)| target.get_request(uri)).collect();
    conn.send(&batch)?;
    for (i, (uri, check)) in plan.iter().enumerate() {
        let resp = conn.read_response(false).map_err(|e| format!("response {i} (GET {uri}): {e}"))?;
        check(&resp).map_err(|e| format!("response {i} (GET {uri}): {e}"))?;
    }
    match conn.buffered() {
        0 => Ok(()),
        n => Err(format!("expected {} responses, got {n} more bytes after them", plan.len())),
    }
}

/// `clients` connections opened first, then one request each released
/// together, so the server really sees them concurrently. Returns how many
/// succeeded, or an error naming how many failed and the first failure.
pub fn concurrent_gets(
    target: &Target,
    uri: &str,
    clients: usize,
    check: &(dyn Fn(&Response) -> Check + Sync),
) -> Check {
    let barrier = Arc::new(Barrier::new(clients));
    let request = target.get_request(uri);
    let results: Vec<Check> = thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|_| {
                let barrier = Arc::clone(&barrier);
                let request = &request;
                thread::Builder::new().stack_size(256 * 1024).spawn_scoped(s, move || {
                    let conn = target.connect();
                    // Every thread reaches the barrier, connected or not,
                    // or the others would wait forever.
                    barrier.wait();
                    let mut conn = conn?;
                    let resp = conn.exchange(request)?;
                    check(&resp)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or_else(|_| Err("client thread panicked".into())),
                Err(e) => Err(format!("cannot spawn a client thread: {e}")),
            })
            .collect()
    });
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    match failures.first() {
        None => Ok(()),
        Some(first) => {
            Err(format!("expected {clients} good responses, got {} failures; first: {first}", failures.len()))
        }
    }
}

/// The first `Date` sample of the clock check.
pub struct DateProbe {
    first: Option<(Instant, String)>,
}

impl DateProbe {
    pub fn start(ctx: &Ctx) -> DateProbe {
        DateProbe { first: sample_date(ctx).ok().map(|d| (Instant::now(), d)) }
    }

    /// Takes the second sample at least two seconds after the first, and
    /// on a loopback target also compares with this machine's clock.
    pub fn finish(self, ctx: &Ctx, rep: &mut Reporter) {
        let name = "Date advances between requests 2 s apart";
        let Some((at, first)) = self.first else {
            match sample_date(ctx) {
                Err(e) => rep.fail(name, &e),
                Ok(_) => rep.fail(name, "expected a Date sample at the start, got none"),
            }
            return;
        };
        let wait = Duration::from_millis(2100).saturating_sub(at.elapsed());
        thread::sleep(wait);
        let second = sample_date(ctx);
        rep.record(
            name,
            second.as_ref().map_err(Clone::clone).and_then(|s| checks::check_date_advanced(&first, s)),
        );
        if ctx.target.addr.ip().is_loopback() {
            if let Ok(s) = second {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs() as i64)
                    .unwrap_or_default();
                rep.record("Date matches this machine's clock", checks::check_date_near(&s, now, 2));
            }
        }
    }
}

/// `Date` of a response from the first configured TFB route.
fn sample_date(ctx: &Ctx) -> Result<String, String> {
    let r = &ctx.routes;
    let path = [&r.plaintext, &r.json, &r.db]
        .into_iter()
        .find(|p| !p.is_empty())
        .ok_or("no plaintext, json or db route configured")?;
    let resp = ctx.target.get(path)?;
    resp.header("date")
        .map(str::to_string)
        .ok_or_else(|| format!("expected a Date header on GET {path}, got none"))
}
