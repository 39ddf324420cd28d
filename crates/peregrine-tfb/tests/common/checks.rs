//! The HttpArena endpoint checks both backends must pass, against a
//! running server.

use super::{Reply, Server};

/// A read through `reader` right after a fill through `filler` is a HIT
/// with the filled body. Entries live 200 ms, which a loaded machine can
/// spend between two requests, so a pair that straddled an expiry is
/// retried (a few times; a cache that never hits still fails).
pub fn hit_after_fill(filler: &Server, reader: &Server, path: &str) -> Reply {
    let mut last = None;
    for _ in 0..5 {
        let filled = filler.get(path);
        assert_eq!(filled.status, 200, "{path}: {filled:?}");
        let read = reader.get(path);
        if read.header("x-cache") == Some("HIT") {
            assert_eq!(read.body, filled.body, "{path}: a hit must show what was cached");
            return read;
        }
        last = Some(read);
    }
    panic!("{path}: never a HIT right after a fill: {last:?}");
}

/// async-db: HttpArena's validator cases, the answer shape, and the
/// parameter rule for bad input (never an error).
pub fn async_db(server: &Server) {
    for (limit, (min, max)) in [7, 18, 33, 50].into_iter().zip([(5, 80), (20, 150), (100, 400), (10, 50)]) {
        let reply = server.get(&format!("/async-db?min={min}&max={max}&limit={limit}"));
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.header("content-type"), Some("application/json"));
        let body = reply.json();
        assert_eq!(body["count"], limit, "min={min} max={max} limit={limit}: {}", reply.body);
        let items = body["items"].as_array().expect("items");
        assert_eq!(items.len(), limit as usize);
        for item in items {
            let price = item["price"].as_i64().expect("price");
            assert!((min..=max).contains(&price), "{item}");
            for key in ["id", "name", "category", "quantity", "active"] {
                assert!(!item[key].is_null(), "{key} missing: {item}");
            }
            // Seeded rows have 1 to 4 tags; rows crud created have none.
            assert!(item["tags"].as_array().is_some_and(|t| t.len() <= 4), "{item}");
            assert!(item["rating"]["score"].is_i64() && item["rating"]["count"].is_i64(), "{item}");
        }
    }
    let empty = server.get("/async-db?min=9999&max=9999");
    assert_eq!((empty.status, empty.body.as_str()), (200, r#"{"items":[],"count":0}"#));
    let count = |path: &str| {
        let reply = server.get(path);
        assert_eq!(reply.status, 200, "{path}: {reply:?}");
        reply.json()["count"].as_i64().expect("count")
    };
    // Defaults (10..=50, limit 50) for missing, empty or non-integer values.
    assert_eq!(count("/async-db"), 50);
    assert_eq!(count("/async-db?min=&max=abc&limit=x"), 50);
    // limit clamped to 1..=50; huge and negative values are not errors.
    assert_eq!(count("/async-db?limit=0"), 1);
    assert_eq!(count("/async-db?limit=-5"), 1);
    assert_eq!(count("/async-db?limit=99999999999999999999"), 50);
    assert_eq!(count("/async-db?min=-99999999999999999999&max=99999999999999999999&limit=3"), 3);
    assert_eq!(count("/async-db?min=80&max=5"), 0, "min above max is an empty range");
}

/// crud: list, cached read (MISS, HIT, MISS after PUT), create, update,
/// 404s and the bad-input rule. `new_id` must not exist yet.
pub fn crud(server: &Server, new_id: i64) {
    let page = server.get("/crud/items?category=office&page=2&limit=5");
    assert_eq!(page.status, 200, "{page:?}");
    let body = page.json();
    assert_eq!(
        (body["total"].as_i64(), body["page"].as_i64(), body["limit"].as_i64()),
        (Some(5), Some(2), Some(5))
    );
    let items = body["items"].as_array().expect("items");
    assert!(items.iter().all(|i| i["category"] == "office"));
    assert!(items.windows(2).all(|w| w[0]["id"].as_i64() < w[1]["id"].as_i64()), "ordered by id");
    let default = server.get("/crud/items").json();
    assert_eq!((default["page"].as_i64(), default["limit"].as_i64()), (Some(1), Some(10)));
    assert!(default["items"].as_array().expect("items").iter().all(|i| i["category"] == "electronics"));
    assert_eq!(server.get("/crud/items?limit=500").json()["limit"], 50);
    for bad in ["page=0", "page=-1", "page=x", "limit=0", "limit=abc", "page=99999999999"] {
        let reply = server.get(&format!("/crud/items?{bad}"));
        assert_eq!(reply.status, 400, "{bad}: {reply:?}");
        assert!(reply.body.contains("\"error\""), "{reply:?}");
    }

    // Cached reads: a MISS, then a HIT with the same body.
    let id = 4242 + new_id % 1000;
    let first = server.get(&format!("/crud/items/{id}"));
    assert_eq!((first.status, first.header("x-cache")), (200, Some("MISS")), "{first:?}");
    let second = hit_after_fill(server, server, &format!("/crud/items/{id}"));
    assert_eq!(first.body, second.body);
    // PUT invalidates: the next GET is a MISS showing the new value.
    let put = server.send_json(
        "PUT",
        &format!("/crud/items/{id}"),
        r#"{"name":"Renamed","price":77,"quantity":5}"#,
    );
    assert_eq!(put.status, 200, "{put:?}");
    assert_eq!((put.json()["name"].as_str(), put.json()["price"].as_i64()), (Some("Renamed"), Some(77)));
    let after = server.get(&format!("/crud/items/{id}"));
    assert_eq!(after.header("x-cache"), Some("MISS"), "{after:?}");
    assert_eq!(after.json()["price"], 77);
    // Entries expire 200 ms after they were cached.
    std::thread::sleep(std::time::Duration::from_millis(250));
    assert_eq!(server.get(&format!("/crud/items/{id}")).header("x-cache"), Some("MISS"), "expired");

    // 404s.
    assert_eq!(server.get("/crud/items/2000000000").status, 404);
    let put = server.send_json("PUT", "/crud/items/2000000000", r#"{"name":"x","price":1,"quantity":1}"#);
    assert_eq!(put.status, 404, "{put:?}");

    // Create: 201 with the item; an upsert of the same id replaces it and
    // invalidates the cached entry.
    let create = format!(r#"{{"id":{new_id},"name":"New","category":"office","price":12,"quantity":3}}"#);
    let created = server.send_json("POST", "/crud/items", &create);
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!((created.json()["id"].as_i64(), created.json()["name"].as_str()), (Some(new_id), Some("New")));
    assert_eq!(server.get(&format!("/crud/items/{new_id}")).header("x-cache"), Some("MISS"));
    hit_after_fill(server, server, &format!("/crud/items/{new_id}"));
    let replace = create.replace("\"price\":12", "\"price\":13");
    assert_eq!(server.send_json("POST", "/crud/items", &replace).status, 201);
    let read = server.get(&format!("/crud/items/{new_id}"));
    assert_eq!((read.header("x-cache"), read.json()["price"].as_i64()), (Some("MISS"), Some(13)));

    // Bad ids: 400.
    for bad in ["abc", "0", "-3", "99999999999", "1.5"] {
        assert_eq!(server.get(&format!("/crud/items/{bad}")).status, 400, "GET {bad}");
        let put =
            server.send_json("PUT", &format!("/crud/items/{bad}"), r#"{"name":"x","price":1,"quantity":1}"#);
        assert_eq!(put.status, 400, "PUT {bad}");
    }
    // Bad bodies: 400 for syntax, 422 for shape, 413 when oversized.
    for (body, status) in [
        ("{\"id\":1,", 400),
        ("not json", 400),
        ("", 400),
        (r#"{"id":"1","name":"a","category":"b","price":1,"quantity":1}"#, 422),
        (r#"{"id":1,"name":"a","category":"b","price":1}"#, 422),
        (r#"{"id":0,"name":"a","category":"b","price":1,"quantity":1}"#, 422),
        ("[]", 422),
    ] {
        let reply = server.send_json("POST", "/crud/items", body);
        assert_eq!(reply.status, status, "POST {body:?}: {reply:?}");
        assert!(reply.body.contains("\"error\""), "{reply:?}");
    }
    for (body, status) in
        [("{", 400), (r#"{"name":"x","price":"1","quantity":1}"#, 422), (r#"{"name":"x"}"#, 422)]
    {
        let reply = server.send_json("PUT", &format!("/crud/items/{id}"), body);
        assert_eq!(reply.status, status, "PUT {body:?}: {reply:?}");
    }
    let huge = format!(r#"{{"id":5,"name":"{}","category":"b","price":1,"quantity":1}}"#, "x".repeat(70_000));
    assert_eq!(server.send_json("POST", "/crud/items", &huge).status, 413);
    // A body on GET is ignored.
    let with_body = server.request("GET", &format!("/crud/items/{id}"), &["Content-Length: 2"], b"{}");
    assert_eq!(with_body.status, 200, "{with_body:?}");
}
