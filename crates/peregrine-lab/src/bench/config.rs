//! `lab/servers.toml`: which servers the bench can run and how.
//!
//! This module owns the file's format and its validation. Each `[[server]]`
//! entry is parsed on its own, so an error names the server (or its position
//! when it has no name) and the offending field instead of only a line number.

use crate::rig::arena;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

/// One server the bench can start, as written in `servers.toml`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// Short unique name used in `--only`, `--baseline` and the report.
    pub name: String,
    /// Run once before benchmarking (argv, no shell), e.g. a cargo build.
    #[serde(default)]
    pub build: Option<Vec<String>>,
    /// Run before benchmarking even with `--no-build` (argv, no shell;
    /// `{port}` is replaced), e.g. writing the server's config file.
    #[serde(default)]
    pub prepare: Option<Vec<String>>,
    /// The server itself (argv, no shell); `{port}` is replaced by `port`.
    /// It must exec the server directly: CPU time is read from this PID.
    pub run: Vec<String>,
    /// The TCP port the server listens on.
    pub port: u16,
    /// Where wrk connects; defaults to 127.0.0.1.
    #[serde(default = "default_host")]
    pub host: String,
    /// Extra environment for the server; `{port}` is replaced in values.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Request path per TFB test name, e.g. `plaintext = "/plaintext"`. A
    /// path ending in `=` gets the bench's `--queries` count appended.
    #[serde(default)]
    pub paths: BTreeMap<String, String>,
    /// HttpArena endpoints the server serves, by key (`baseline`,
    /// `pipeline`, `json`, `upload`, `static`, `async-db`, `crud`), each a
    /// path; a profile runs only on servers with every endpoint it needs.
    #[serde(default)]
    pub arena: BTreeMap<String, String>,
}

fn default_host() -> String {
    "127.0.0.1".to_string()
}

impl ServerSpec {
    /// The run argv with `{port}` filled in.
    pub fn run_argv(&self) -> Vec<String> {
        self.run.iter().map(|a| self.fill(a)).collect()
    }

    /// The prepare argv with `{port}` filled in.
    pub fn prepare_argv(&self) -> Option<Vec<String>> {
        self.prepare.as_ref().map(|argv| argv.iter().map(|a| self.fill(a)).collect())
    }

    /// The environment with `{port}` filled in.
    pub fn run_env(&self) -> Vec<(String, String)> {
        self.env.iter().map(|(k, v)| (k.clone(), self.fill(v))).collect()
    }

    /// The address wrk and the readiness probe connect to.
    pub fn resolve(&self) -> Result<SocketAddr, String> {
        (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| format!("server `{}`: cannot resolve {}: {e}", self.name, self.host))?
            .next()
            .ok_or_else(|| format!("server `{}`: {} has no address", self.name, self.host))
    }

    fn fill(&self, text: &str) -> String {
        text.replace("{port}", &self.port.to_string())
    }
}

/// Why `servers.toml` could not be used.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// The file could not be read.
    Read { path: String, reason: String },
    /// The text is not TOML, or lacks the `[[server]]` array.
    Syntax(String),
    /// One server entry is wrong; `server` is its name or `entry #N`.
    Server { server: String, problem: String },
    /// Two entries share a name.
    DuplicateName(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Read { path, reason } => write!(f, "cannot read {path}: {reason}"),
            ConfigError::Syntax(msg) => write!(f, "servers file is not valid: {msg}"),
            ConfigError::Server { server, problem } => write!(f, "server {server}: {problem}"),
            ConfigError::DuplicateName(name) => {
                write!(f, "server name `{name}` is used by more than one entry")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// Reads and validates a servers file.
pub fn load(path: &Path) -> Result<Vec<ServerSpec>, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::Read { path: path.display().to_string(), reason: e.to_string() })?;
    parse(&text).map_err(|e| match e {
        ConfigError::Syntax(msg) => ConfigError::Syntax(format!("{}: {msg}", path.display())),
        other => other,
    })
}

/// Parses and validates the text of a servers file.
pub fn parse(text: &str) -> Result<Vec<ServerSpec>, ConfigError> {
    let mut table: toml::Table =
        toml::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string().trim().to_string()))?;
    let entries = match table.remove("server") {
        Some(toml::Value::Array(entries)) => entries,
        Some(_) => {
            return Err(ConfigError::Syntax("`server` must be an array of tables, written [[server]]".into()))
        }
        None => return Err(ConfigError::Syntax("no [[server]] entries".into())),
    };
    if let Some(key) = table.keys().next() {
        return Err(ConfigError::Syntax(format!(
            "unknown top-level key `{key}` (only [[server]] entries are allowed)"
        )));
    }

    let mut servers = Vec::with_capacity(entries.len());
    let mut seen = HashSet::new();
    for (i, entry) in entries.into_iter().enumerate() {
        // Name the entry before deserializing it, so the field error that
        // follows can say which server it belongs to.
        let label = match entry.get("name").and_then(|v| v.as_str()) {
            Some(name) => format!("`{name}`"),
            None => format!("entry #{}", i + 1),
        };
        let spec: ServerSpec = entry.try_into().map_err(|e: toml::de::Error| ConfigError::Server {
            server: label.clone(),
            problem: e.message().trim().to_string(),
        })?;
        validate(&spec).map_err(|problem| ConfigError::Server { server: label, problem })?;
        if !seen.insert(spec.name.clone()) {
            return Err(ConfigError::DuplicateName(spec.name));
        }
        servers.push(spec);
    }
    Ok(servers)
}

/// Checks what serde cannot: non-empty values and well-formed paths.
fn validate(spec: &ServerSpec) -> Result<(), String> {
    if spec.name.trim().is_empty() {
        return Err("field `name` is empty".into());
    }
    if !matches!(spec.run.first(), Some(p) if !p.is_empty()) {
        return Err("field `run` needs at least the program to start".into());
    }
    for (field, argv) in [("build", &spec.build), ("prepare", &spec.prepare)] {
        if let Some(argv) = argv {
            if !matches!(argv.first(), Some(p) if !p.is_empty()) {
                return Err(format!("field `{field}` is empty (leave it out instead)"));
            }
        }
    }
    if spec.port == 0 {
        return Err("field `port` must not be 0".into());
    }
    if spec.host.is_empty() {
        return Err("field `host` is empty".into());
    }
    if spec.paths.is_empty() && spec.arena.is_empty() {
        return Err("fields `paths` and `arena` name no test and no HttpArena endpoint".into());
    }
    for (field, map) in [("paths", &spec.paths), ("arena", &spec.arena)] {
        for (key, path) in map {
            if !path.starts_with('/') {
                return Err(format!("field `{field}.{key}` is `{path}`, but must start with `/`"));
            }
        }
    }
    let known = arena::default_endpoints();
    if let Some(key) = spec.arena.keys().find(|k| !known.contains_key(*k)) {
        let names: Vec<&str> = known.keys().map(String::as_str).collect();
        return Err(format!(
            "field `arena.{key}` is not an HttpArena endpoint (known: {})",
            names.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[server]]
name = "floor"
build = ["cargo", "build", "--release", "-p", "peregrine-floor"]
run = ["target/release/peregrine-floor", "--addr", "127.0.0.1:{port}"]
port = 8091
env = { RUST_LOG = "warn", PORT = "{port}" }
[server.paths]
plaintext = "/plaintext"
queries = "/queries?queries="

[[server]]
name = "other"
run = ["./other"]
port = 8092
host = "localhost"
paths = { json = "/json" }
"#;

    fn err_text(text: &str) -> String {
        match parse(text) {
            Ok(s) => panic!("expected an error, got {s:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn parses_good_file() {
        let servers = parse(GOOD).expect("good file parses");
        assert_eq!(servers.len(), 2);
        let floor = &servers[0];
        assert_eq!(floor.name, "floor");
        assert_eq!(floor.host, "127.0.0.1");
        assert_eq!(floor.run_argv(), ["target/release/peregrine-floor", "--addr", "127.0.0.1:8091"]);
        assert!(floor.run_env().contains(&("PORT".into(), "8091".into())));
        assert_eq!(floor.paths["queries"], "/queries?queries=");
        assert_eq!(servers[1].build, None);
        assert_eq!(servers[1].host, "localhost");
    }

    #[test]
    fn missing_field_names_server_and_field() {
        let text = GOOD.replace("port = 8092\n", "");
        let msg = err_text(&text);
        assert!(msg.contains("`other`"), "{msg}");
        assert!(msg.contains("port"), "{msg}");
    }

    #[test]
    fn nameless_entry_is_named_by_position() {
        let msg = err_text("[[server]]\nrun = [\"x\"]\nport = 1\npaths = { a = \"/\" }\n");
        assert!(msg.contains("entry #1"), "{msg}");
        assert!(msg.contains("name"), "{msg}");
    }

    #[test]
    fn wrong_type_and_unknown_field_are_reported() {
        let msg = err_text(&GOOD.replace("port = 8091", "port = \"8091\""));
        assert!(msg.contains("`floor`"), "{msg}");
        let msg = err_text(&GOOD.replace("port = 8092", "port = 8092\nprot = 1"));
        assert!(msg.contains("`other`") && msg.contains("prot"), "{msg}");
    }

    #[test]
    fn bad_values_are_rejected() {
        let msg = err_text(&GOOD.replace("\"/json\"", "\"json\""));
        assert!(msg.contains("paths.json"), "{msg}");
        let msg = err_text(&GOOD.replace("run = [\"./other\"]", "run = []"));
        assert!(msg.contains("`run`"), "{msg}");
        let msg = err_text(&GOOD.replace("name = \"other\"", "name = \"floor\""));
        assert!(msg.contains("more than one"), "{msg}");
    }

    #[test]
    fn empty_and_zero_values_are_rejected() {
        let cases = [
            (GOOD.replace("port = 8091", "port = 0"), "`port` must not be 0"),
            (GOOD.replace("port = 8091", "port = 70000"), "`floor`"),
            (
                GOOD.replace(
                    "build = [\"cargo\", \"build\", \"--release\", \"-p\", \"peregrine-floor\"]",
                    "build = []",
                ),
                "`build` is empty",
            ),
            (GOOD.replace("name = \"other\"", "name = \" \""), "`name` is empty"),
            (GOOD.replace("host = \"localhost\"", "host = \"\""), "`host` is empty"),
            (GOOD.replace("paths = { json = \"/json\" }", "paths = {}"), "name no test"),
            (GOOD.replace("paths = { json = \"/json\" }\n", ""), "name no test"),
        ];
        for (text, expected) in cases {
            let msg = err_text(&text);
            assert!(msg.contains(expected), "expected `{expected}` in: {msg}");
        }
    }

    #[test]
    fn arena_endpoints_parse_and_are_checked() {
        let nginx = "[[server]]\nname = \"nginx\"\nrun = [\"nginx\"]\nport = 8085\n\
                     prepare = [\"configure\", \"{port}\"]\n[server.arena]\nstatic = \"/static\"\n";
        let servers = parse(nginx).expect("a server with only HttpArena endpoints");
        assert!(servers[0].paths.is_empty());
        assert_eq!(servers[0].prepare_argv(), Some(vec!["configure".to_string(), "8085".to_string()]));
        let msg = err_text(&nginx.replace("[\"configure\", \"{port}\"]", "[]"));
        assert!(msg.contains("`prepare` is empty"), "{msg}");
        assert_eq!(servers[0].arena["static"], "/static");

        let both = GOOD.replace("queries = \"/queries?queries=\"\n", "queries = \"/queries?queries=\"\n[server.arena]\nbaseline = \"/baseline11\"\nasync-db = \"/async-db\"\n");
        let servers = parse(&both).expect("paths and arena together");
        assert_eq!(servers[0].arena.len(), 2);
        assert_eq!(servers[0].paths.len(), 2);

        let msg = err_text(&nginx.replace("static = ", "statics = "));
        assert!(msg.contains("`arena.statics` is not an HttpArena endpoint"), "{msg}");
        let msg = err_text(&nginx.replace("\"/static\"", "\"static\""));
        assert!(msg.contains("`arena.static` is `static`"), "{msg}");
        let msg = err_text(&nginx.replace("static = ", "static = 1\n#"));
        assert!(msg.contains("`nginx`"), "{msg}");
    }

    #[test]
    fn the_lab_servers_file_parses() {
        let text = include_str!("../../../../lab/servers.toml");
        let servers = parse(text).expect("lab/servers.toml is valid");
        let find = |n: &str| servers.iter().find(|s| s.name == n).expect(n);
        assert_eq!(find("peregrine").arena.len(), 7);
        assert_eq!(find("actix").arena, find("peregrine").arena, "actix serves every HttpArena endpoint");
        assert_eq!(find("nginx").arena.keys().collect::<Vec<_>>(), ["static"]);
        assert!(find("nginx").paths.is_empty());
        // The C reference responders build from the repository alone.
        for c in ["c-floor", "c-floor-uring"] {
            assert_eq!(find(c).prepare.as_deref(), Some(&["lab/floors/build".to_string()][..]), "{c}");
            assert!(find(c).run[0].starts_with("target/lab-floors/"), "{c}");
        }
        assert!(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../lab/floors/build")).exists());
    }

    #[test]
    fn top_level_shape_is_checked() {
        let msg = err_text("server = 1\n");
        assert!(msg.contains("array of tables"), "{msg}");
        let msg = err_text(&format!("workers = 2\n{GOOD}"));
        assert!(msg.contains("unknown top-level key `workers`"), "{msg}");
    }

    #[test]
    fn syntax_errors_are_reported() {
        assert!(matches!(parse("[[server]\n"), Err(ConfigError::Syntax(_))));
        assert!(matches!(parse("x = 1\n"), Err(ConfigError::Syntax(_))));
        assert!(matches!(parse(""), Err(ConfigError::Syntax(_))));
    }
}
