//! The notes server over a real socket: `Server::spawn` on port 0, one
//! keep-alive connection of raw HTTP/1.1 from `std::net::TcpStream`, on a
//! fresh SQLite file.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use notes::Database;
use peregrine::{Server, ServerHandle};
use serde_json::{json, Value};

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// A keep-alive connection that sends one request at a time.
struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    fn connect(server: &ServerHandle) -> Client {
        let stream = TcpStream::connect(server.local_addr()).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        Client { reader: BufReader::new(stream) }
    }

    fn send(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut request =
            format!("{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Length: {}\r\n", body.len());
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        self.reader.get_mut().write_all(request.as_bytes()).expect("write");

        let mut line = String::new();
        self.reader.read_line(&mut line).expect("status line");
        let status = line.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("a status code");
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("header line");
            let Some((name, value)) = line.trim_end().split_once(':') else { break };
            headers.push((name.to_owned(), value.trim().to_owned()));
        }
        let reply = Reply { status, headers, body: Vec::new() };
        // `204` has no body and no Content-Length.
        let length = reply.header("content-length").map_or(0, |n| n.parse().expect("a length"));
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).expect("body");
        Reply { body, ..reply }
    }
}

fn start() -> (ServerHandle, PathBuf) {
    let dir = std::env::temp_dir().join(format!("notes-socket-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let database = Database::open(None, dir.join("notes.db")).expect("SQLite opens");
    let static_dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/static"));
    let server = Server::new()
        .workers(2)
        .spawn("127.0.0.1:0", move |_| {
            let (database, static_dir) = (database.clone(), static_dir.clone());
            async move {
                Ok::<_, peregrine::db::Error>(notes::app(database.connect().await?, "t0ken", &static_dir))
            }
        })
        .expect("the server starts");
    (server, dir)
}

#[test]
fn notes_over_a_socket() {
    let (server, dir) = start();
    let mut c = Client::connect(&server);
    let auth = ("Authorization", "Bearer t0ken");
    let typed = ("Content-Type", "application/json");

    let r = c.send("POST", "/api/notes", &[auth, typed], r#"{"title":"socket","body":"hello"}"#);
    assert_eq!(r.status, 201);
    let id = r.json()["id"].as_i64().expect("an id");
    let r = c.send("GET", &format!("/api/notes/{id}"), &[auth], "");
    assert_eq!((r.status, r.json()), (200, json!({"id": id, "title": "socket", "body": "hello"})));
    assert!(r.header("x-request-id").is_some());
    let r = c.send("POST", "/api/notes", &[auth, typed], r#"{"title":"socket","body":"again"}"#);
    assert_eq!(r.status, 409);
    let r = c.send("PUT", &format!("/api/notes/{id}"), &[auth, typed], r#"{"title":"socket"}"#);
    assert_eq!(r.status, 422);
    let r = c.send("PUT", &format!("/api/notes/{id}"), &[auth, typed], r#"{"title":"s2","body":"b"}"#);
    assert_eq!((r.status, r.json()["title"].clone()), (200, json!("s2")));
    let r = c.send("GET", "/api/notes", &[auth], "");
    assert_eq!(r.json(), json!([{"id": id, "title": "s2", "body": "b"}]));

    let r = c.send("DELETE", &format!("/api/notes/{id}"), &[], "");
    assert_eq!((r.status, r.header("www-authenticate")), (401, Some("Bearer realm=\"notes\"")));
    assert_eq!(r.json(), json!({"error": "unauthorized"}));
    let r = c.send("DELETE", &format!("/api/notes/{id}"), &[auth], "");
    assert_eq!(r.status, 204);

    let preflight = [("Origin", "https://app.example"), ("Access-Control-Request-Method", "DELETE")];
    let r = c.send("OPTIONS", "/api/notes/1", &preflight, "");
    assert_eq!((r.status, r.header("access-control-allow-origin")), (204, Some("*")));
    let r = c.send("GET", "/nowhere", &[], "");
    assert_eq!((r.status, r.json()), (404, json!({"error": "no such resource"})));
    let r = c.send("GET", "/", &[], "");
    assert!(r.status == 200 && String::from_utf8_lossy(&r.body).contains("<h1>Notes</h1>"));

    server.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}
