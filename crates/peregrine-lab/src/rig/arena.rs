//! HttpArena's HTTP/1.1 profiles as load for [`super::load`]: which
//! endpoints each needs, its connection counts, pipelining and reconnects,
//! and its request templates (see `/work/shared/httparena/PROFILES.md`).
//!
//! A server names its endpoints by key (`baseline`, `pipeline`, `json`,
//! `upload`, `static`, `async-db`, `crud`), each mapped to a path; a profile
//! runs against a server only if it has every endpoint the profile needs.
//!
//! Connection counts are HttpArena's (4,096, 6,800 and 16,384 included),
//! capped only by what the open-files limit lets both the load generator
//! and the server open ([`Profile::connections`]; the bench raises the soft
//! limit to the hard one first and says when a profile is scaled down).
//! Counts the cap makes equal run once. With one client core the generator
//! is busier per request at the high counts; `bench` reports requests per
//! client CPU-second beside each run so that shows.

use super::load::Template;
use std::collections::BTreeMap;

/// One HttpArena HTTP/1.1 profile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    pub name: &'static str,
    /// Endpoint keys the server must have.
    pub endpoints: &'static [&'static str],
    /// HttpArena's connection counts.
    pub arena_connections: &'static [u32],
    /// Requests per write.
    pub pipeline: usize,
    /// Requests per connection before it is closed and reopened.
    pub reconnect_every: Option<u64>,
    /// What it sends, for `--help` and the docs.
    pub sends: &'static str,
}

pub const PROFILES: [Profile; 10] = [
    Profile {
        name: "baseline",
        endpoints: &["baseline"],
        arena_connections: &[512, 4096],
        pipeline: 1,
        reconnect_every: None,
        sends: "GET ?a=&b= (2 of 4), POST with a Content-Length body, POST chunked",
    },
    Profile {
        name: "pipelined",
        endpoints: &["pipeline"],
        arena_connections: &[512, 4096],
        pipeline: 16,
        reconnect_every: None,
        sends: "GET /pipeline, 16 per write",
    },
    Profile {
        name: "limited-conn",
        endpoints: &["baseline"],
        arena_connections: &[512, 4096],
        pipeline: 1,
        reconnect_every: Some(10),
        sends: "baseline's GETs, reconnecting every 10 requests",
    },
    Profile {
        name: "json",
        endpoints: &["json"],
        arena_connections: &[4096],
        pipeline: 1,
        reconnect_every: Some(25),
        sends: "GET /json/{1,10,25,50}?m={1..4}, reconnecting every 25",
    },
    Profile {
        name: "json-comp",
        endpoints: &["json"],
        arena_connections: &[512, 4096, 16384],
        pipeline: 1,
        reconnect_every: None,
        sends: "json's requests with Accept-Encoding: gzip, br (reports bytes per response)",
    },
    Profile {
        name: "upload",
        endpoints: &["upload"],
        arena_connections: &[32, 256],
        pipeline: 1,
        reconnect_every: Some(5),
        sends: "POST bodies of 500 KB to 20 MB (Expect: 100-continue above 1 MB), reconnecting every 5",
    },
    Profile {
        name: "static",
        endpoints: &["static"],
        arena_connections: &[1024, 4096, 6800],
        pipeline: 1,
        reconnect_every: Some(200),
        sends: "GET of the 20 static files, Accept-Encoding: br;q=1, gzip;q=0.8, reconnecting every 200",
    },
    Profile {
        name: "async-db",
        endpoints: &["async-db"],
        arena_connections: &[1024],
        pipeline: 1,
        reconnect_every: Some(25),
        sends: "GET ?min=&max=&limit= over four ranges, reconnecting every 25",
    },
    Profile {
        name: "crud",
        endpoints: &["crud"],
        arena_connections: &[4096],
        pipeline: 1,
        reconnect_every: Some(200),
        sends: "75% GET item, 15% PUT, 5% list (office), 5% POST create, over random ids (50,000 templates); reconnecting every 200",
    },
    Profile {
        name: "api-4",
        endpoints: &["baseline", "json", "async-db"],
        arena_connections: &[256],
        pipeline: 1,
        reconnect_every: Some(5),
        sends: "3 baseline : 3 /json/50?m=1 : 2 async-db, 5 requests per connection",
    },
];

/// The 20 files of HttpArena's `static/` (their `.br` and `.gz` siblings
/// are what `Accept-Encoding` may select).
pub const STATIC_FILES: [&str; 20] = [
    "analytics.js",
    "app.js",
    "bold.woff2",
    "components.css",
    "footer.html",
    "header.html",
    "helpers.js",
    "hero.webp",
    "icon-sprite.svg",
    "layout.css",
    "logo.svg",
    "manifest.json",
    "regular.woff2",
    "reset.css",
    "router.js",
    "theme.css",
    "thumb1.webp",
    "thumb2.webp",
    "utilities.css",
    "vendor.js",
];

/// Upload bodies larger than this are sent with `Expect: 100-continue`.
pub const EXPECT_ABOVE: usize = 1_000_000;

/// Upload body sizes, one template each.
pub const UPLOAD_SIZES: [usize; 6] = [500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000];

/// Endpoint paths of a server serving HttpArena the way peregrine-tfb does.
pub fn default_endpoints() -> BTreeMap<String, String> {
    [
        ("baseline", "/baseline11"),
        ("pipeline", "/pipeline"),
        ("json", "/json"),
        ("upload", "/upload"),
        ("static", "/static"),
        ("async-db", "/async-db"),
        ("crud", "/crud/items"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

pub fn find(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}

pub fn names() -> String {
    PROFILES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

impl Profile {
    /// HttpArena's counts capped at `max` (the most connections the
    /// open-files limit allows), duplicates dropped.
    pub fn connections(&self, max: u32) -> Vec<u32> {
        let mut levels: Vec<u32> = self.arena_connections.iter().map(|&c| c.min(max.max(1))).collect();
        levels.dedup();
        levels
    }

    /// HttpArena's counts above `max`, which [`Profile::connections`] scales down.
    pub fn scaled(&self, max: u32) -> Vec<u32> {
        self.arena_connections.iter().copied().filter(|&c| c > max).collect()
    }

    /// Whether the profile's requests reach the database (async-db, crud
    /// and the mixes that contain them).
    pub fn uses_database(&self) -> bool {
        self.endpoints.iter().any(|e| matches!(*e, "async-db" | "crud"))
    }

    /// The endpoints this profile needs that `endpoints` lacks.
    pub fn missing(&self, endpoints: &BTreeMap<String, String>) -> Vec<&'static str> {
        self.endpoints.iter().copied().filter(|e| !endpoints.contains_key(*e)).collect()
    }

    /// The request templates, for a server at `host` (the `Host` header)
    /// with these endpoint paths.
    pub fn templates(
        &self,
        endpoints: &BTreeMap<String, String>,
        host: &str,
    ) -> Result<Vec<Template>, String> {
        let missing = self.missing(endpoints);
        if !missing.is_empty() {
            return Err(format!("profile {} needs endpoint(s) {}", self.name, missing.join(", ")));
        }
        let path = |key: &str| endpoints[key].trim_end_matches('/').to_string();
        let r = Requests { host };
        let t = match self.name {
            "baseline" => baseline(&r, &path("baseline"), true),
            "limited-conn" => baseline(&r, &path("baseline"), false),
            "pipelined" => vec![r.get(&path("pipeline"), "", 1)],
            "json" => json(&r, &path("json"), ""),
            "json-comp" => json(&r, &path("json"), "Accept-Encoding: gzip, br\r\n"),
            "upload" => upload(&r, &path("upload")),
            "static" => STATIC_FILES
                .iter()
                .map(|f| {
                    r.get(&format!("{}/{f}", path("static")), "Accept-Encoding: br;q=1, gzip;q=0.8\r\n", 1)
                })
                .collect(),
            "async-db" => async_db(&r, &path("async-db")),
            "crud" => crud(&r, &path("crud")),
            "api-4" => {
                let async_db_path = format!("{}?min=10&max=50&limit=50", path("async-db"));
                vec![
                    r.get(&format!("{}?a=1&b=2", path("baseline")), "", 3),
                    r.get(&format!("{}/50?m=1", path("json")), "", 3),
                    r.get(&async_db_path, "", 2),
                ]
            }
            other => return Err(format!("no templates for profile {other}")),
        };
        Ok(t)
    }
}

/// Builds request bytes.
struct Requests<'a> {
    host: &'a str,
}

impl Requests<'_> {
    fn get(&self, target: &str, extra: &str, weight: u32) -> Template {
        let request = format!("GET {target} HTTP/1.1\r\nHost: {}\r\n{extra}\r\n", self.host).into_bytes();
        Template::new(request, weight)
    }

    fn with_body(
        &self,
        method: &str,
        target: &str,
        content_type: &str,
        body: &[u8],
        weight: u32,
    ) -> Template {
        let mut request = format!(
            "{method} {target} HTTP/1.1\r\nHost: {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
            self.host,
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        Template::new(request, weight)
    }

    /// As HttpArena's upload clients do: `Expect: 100-continue` above
    /// 1 MB, the body sent after the server's `100 Continue`.
    fn upload(&self, target: &str, body: &[u8]) -> Template {
        if body.len() <= EXPECT_ABOVE {
            return self.with_body("POST", target, "application/octet-stream", body, 1);
        }
        let mut request = format!(
            "POST {target} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/octet-stream\r\n\
             Content-Length: {}\r\nExpect: 100-continue\r\n\r\n",
            self.host,
            body.len()
        )
        .into_bytes();
        let head = request.len();
        request.extend_from_slice(body);
        Template { request, weight: 1, continue_at: Some(head) }
    }
}

fn baseline(r: &Requests, path: &str, posts: bool) -> Vec<Template> {
    let mut t = vec![r.get(&format!("{path}?a=1&b=2"), "", 1), r.get(&format!("{path}?a=13&b=42"), "", 1)];
    if posts {
        t.push(r.with_body("POST", &format!("{path}?a=1&b=2"), "text/plain", b"20", 1));
        let mut chunked = r.get(&format!("{path}?a=3&b=4"), "Transfer-Encoding: chunked\r\n", 1);
        chunked.request.splice(..3, *b"POST");
        chunked.request.extend_from_slice(b"2\r\n20\r\n0\r\n\r\n");
        t.push(chunked);
    }
    t
}

fn json(r: &Requests, path: &str, extra: &str) -> Vec<Template> {
    [(1, 1), (10, 2), (25, 3), (50, 4)]
        .iter()
        .map(|(n, m)| r.get(&format!("{path}/{n}?m={m}"), extra, 1))
        .collect()
}

/// A pattern rather than zeros, so nothing can compress the read away.
fn upload_body(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn upload(r: &Requests, path: &str) -> Vec<Template> {
    UPLOAD_SIZES.iter().map(|&n| r.upload(path, &upload_body(n))).collect()
}

fn async_db(r: &Requests, path: &str) -> Vec<Template> {
    [(10, 50, 50), (5, 80, 7), (20, 150, 18), (100, 400, 33)]
        .iter()
        .map(|(min, max, limit)| r.get(&format!("{path}?min={min}&max={max}&limit={limit}"), "", 1))
        .collect()
}

/// A fixed-seed xorshift, so every run sends the same crud ids.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Groups of 20 templates in HttpArena's crud mix (see [`crud`]).
const CRUD_GROUPS: u64 = 2_500;

/// HttpArena's crud mix: 75% reads of random ids 1..=50,000, 15% updates
/// of random ids, 5% lists of an `office` page 1..=10 and 5% creates with
/// ids counting up from 100,001, as [`CRUD_GROUPS`] groups of 20 equally
/// weighted templates (15 reads, 3 updates, 1 list, 1 create). Templates
/// are fixed bytes, so the ids are drawn once: 50,000 templates give
/// 37,500 read ids and 7,500 update ids spread over the table, and 2,500
/// create ids, as a random load would. Twenty templates alone would send
/// every update to the same four rows, a lock queue HttpArena's load does
/// not have (and its reads would all hit the cache).
fn crud(r: &Requests, path: &str) -> Vec<Template> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut t = Vec::with_capacity(20 * CRUD_GROUPS as usize);
    for group in 0..CRUD_GROUPS {
        for _ in 0..15 {
            t.push(r.get(&format!("{path}/{}", 1 + rng.below(50_000)), "", 1));
        }
        for k in 0..3 {
            let id = 1 + rng.below(50_000);
            let body = format!(r#"{{"name":"Updated {id}","price":{},"quantity":{}}}"#, 10 + k, 100 + k);
            t.push(r.with_body("PUT", &format!("{path}/{id}"), "application/json", body.as_bytes(), 1));
        }
        let page = 1 + rng.below(10);
        t.push(r.get(&format!("{path}?category=office&page={page}&limit=10"), "", 1));
        let id = 100_001 + group;
        let body =
            format!(r#"{{"id":{id},"name":"Created {id}","category":"office","price":42,"quantity":7}}"#);
        t.push(r.with_body("POST", path, "application/json", body.as_bytes(), 1));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rig::load::schedule;

    fn text(t: &Template) -> String {
        String::from_utf8_lossy(&t.request[..t.request.len().min(300)]).into_owned()
    }

    #[test]
    fn connections_are_capped_and_deduplicated() {
        let c = |n: &str, max| find(n).unwrap().connections(max);
        assert_eq!(c("baseline", 20_000), [512, 4096]);
        assert_eq!(c("static", 20_000), [1024, 4096, 6800]);
        assert_eq!(c("json-comp", 20_000), [512, 4096, 16384]);
        assert_eq!(c("baseline", 1024), [512, 1024]);
        assert_eq!(c("static", 1024), [1024]);
        assert_eq!(c("json-comp", 5000), [512, 4096, 5000]);
        assert_eq!(c("upload", 1024), [32, 256]);
        assert_eq!(c("api-4", 1024), [256]);
        assert_eq!(find("static").unwrap().scaled(5000), [6800]);
        assert!(find("static").unwrap().scaled(20_000).is_empty());
    }

    #[test]
    fn database_profiles() {
        let db: Vec<&str> = PROFILES.iter().filter(|p| p.uses_database()).map(|p| p.name).collect();
        assert_eq!(db, ["async-db", "crud", "api-4"]);
    }

    #[test]
    fn every_profile_has_well_formed_templates() {
        let endpoints = default_endpoints();
        for p in &PROFILES {
            let ts = p.templates(&endpoints, "127.0.0.1:8080").unwrap();
            assert!(!ts.is_empty(), "{}", p.name);
            for t in &ts {
                let head_end = t.request.windows(4).position(|w| w == b"\r\n\r\n").expect("a head") + 4;
                let head = String::from_utf8_lossy(&t.request[..head_end]);
                assert!(head.contains(" HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"), "{head}");
                let body = t.request.len() - head_end;
                if let Some(len) = head.split("Content-Length: ").nth(1) {
                    let len: usize = len.split("\r\n").next().unwrap().parse().unwrap();
                    assert_eq!(len, body, "{head}");
                } else if !head.contains("chunked") {
                    assert_eq!(body, 0, "{head}");
                }
            }
        }
    }

    #[test]
    fn mixes_follow_the_profiles() {
        let endpoints = default_endpoints();
        let crud = find("crud").unwrap().templates(&endpoints, "h").unwrap();
        assert_eq!(crud.len(), 50_000);
        let count = |m: &str| crud.iter().filter(|t| text(t).starts_with(m)).count();
        assert_eq!(
            (count("GET /crud/items/"), count("PUT "), count("GET /crud/items?"), count("POST ")),
            (37_500, 7_500, 2_500, 2_500)
        );
        assert!(crud.iter().any(|t| text(t).contains("category=office")));
        // Updates spread over the table rather than a few hot rows, and
        // every create has an id of its own.
        let ids = |m: &str| {
            crud.iter().map(text).filter(|t| t.starts_with(m)).collect::<std::collections::HashSet<_>>().len()
        };
        assert!(ids("PUT ") > 7_000, "{}", ids("PUT "));
        assert_eq!(ids("POST "), 2_500);

        let api = find("api-4").unwrap().templates(&endpoints, "h").unwrap();
        let order = schedule(&api);
        assert_eq!(order.len(), 8);
        assert!(text(&api[1]).starts_with("GET /json/50?m=1 "));

        let stat = find("static").unwrap().templates(&endpoints, "h").unwrap();
        assert_eq!(stat.len(), 20);
        assert!(text(&stat[0]).starts_with("GET /static/analytics.js HTTP/1.1"));
        assert!(text(&stat[0]).contains("Accept-Encoding: br;q=1, gzip;q=0.8"));

        let up = find("upload").unwrap().templates(&endpoints, "h").unwrap();
        assert!(up.iter().all(|t| t.request.len() >= 500_000 && t.request.len() < 20_001_000));
        for t in &up {
            let expects = text(t).contains("Expect: 100-continue\r\n");
            assert_eq!(expects, t.continue_at.is_some());
            assert_eq!(expects, t.request.len() > 2_000_000);
            if let Some(at) = t.continue_at {
                assert!(t.request[..at].ends_with(b"\r\n\r\n"));
            }
        }

        let chunked = &find("baseline").unwrap().templates(&endpoints, "h").unwrap()[3];
        assert!(text(chunked).starts_with("POST /baseline11?a=3&b=4 HTTP/1.1"), "{}", text(chunked));
        assert!(text(chunked).ends_with("\r\n\r\n2\r\n20\r\n0\r\n\r\n"));
    }

    #[test]
    fn a_missing_endpoint_is_named() {
        let mut endpoints = default_endpoints();
        endpoints.remove("async-db");
        let api = find("api-4").unwrap();
        assert_eq!(api.missing(&endpoints), ["async-db"]);
        assert!(api.templates(&endpoints, "h").unwrap_err().contains("async-db"));
        assert!(find("baseline").unwrap().missing(&endpoints).is_empty());
    }
}
