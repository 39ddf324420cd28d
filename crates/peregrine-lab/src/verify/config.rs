//! Which paths and parameter names the server under test uses.
//!
//! Owns the defaults (peregrine's own routes, which are also TFB's and
//! HttpArena's), loading overrides from a TOML file and from `--path` /
//! `--param` flags (flags win). A path set to the empty string turns its
//! checks into `SKIP`s, so a server that implements only part of the spec can
//! still be verified on the rest.

use serde::Deserialize;
use std::collections::BTreeMap;

/// Route paths, without query strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routes {
    pub plaintext: String,
    pub json: String,
    pub db: String,
    pub queries: String,
    pub fortunes: String,
    pub updates: String,
    pub cached_queries: String,
    /// HttpArena baseline: `GET`/`POST` `?a=&b=`.
    pub baseline: String,
    /// HttpArena json processing: the count is appended as `/{count}`.
    pub json_items: String,
    pub upload: String,
    /// The WebSocket echo endpoint (HttpArena echo-ws).
    pub ws: String,
    /// Query parameter names.
    pub queries_param: String,
    pub updates_param: String,
    pub cached_queries_param: String,
    pub multiplier_param: String,
}

impl Default for Routes {
    fn default() -> Self {
        Routes {
            plaintext: "/plaintext".into(),
            json: "/json".into(),
            db: "/db".into(),
            queries: "/queries".into(),
            fortunes: "/fortunes".into(),
            updates: "/updates".into(),
            cached_queries: "/cached-queries".into(),
            baseline: "/baseline11".into(),
            json_items: "/json".into(),
            upload: "/upload".into(),
            ws: "/ws".into(),
            queries_param: "queries".into(),
            updates_param: "queries".into(),
            cached_queries_param: "count".into(),
            multiplier_param: "m".into(),
        }
    }
}

const PATH_NAMES: &str =
    "plaintext, json, db, queries, fortunes, updates, cached_queries, baseline, json_items, upload, ws";
const PARAM_NAMES: &str = "queries, updates, cached_queries, multiplier";

/// The file form: `[paths]` and `[params]` tables of strings.
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct FileConfig {
    paths: BTreeMap<String, String>,
    params: BTreeMap<String, String>,
}

impl Routes {
    /// Defaults, then the TOML text (if any), then `NAME=VALUE` flags.
    pub fn load(toml_text: Option<&str>, paths: &[String], params: &[String]) -> Result<Routes, String> {
        let mut routes = Routes::default();
        if let Some(text) = toml_text {
            let file: FileConfig = toml::from_str(text).map_err(|e| format!("config: {e}"))?;
            for (k, v) in &file.paths {
                routes.set_path(k, v)?;
            }
            for (k, v) in &file.params {
                routes.set_param(k, v)?;
            }
        }
        for flag in paths {
            let (k, v) = split_flag(flag)?;
            routes.set_path(k, v)?;
        }
        for flag in params {
            let (k, v) = split_flag(flag)?;
            routes.set_param(k, v)?;
        }
        Ok(routes)
    }

    fn set_path(&mut self, name: &str, value: &str) -> Result<(), String> {
        if !value.is_empty() && !value.starts_with('/') {
            return Err(format!("path for {name} must start with '/': {value:?}"));
        }
        let slot = match name.replace('-', "_").as_str() {
            "plaintext" => &mut self.plaintext,
            "json" => &mut self.json,
            "db" => &mut self.db,
            "queries" => &mut self.queries,
            "fortunes" => &mut self.fortunes,
            "updates" => &mut self.updates,
            "cached_queries" => &mut self.cached_queries,
            "baseline" | "baseline11" => &mut self.baseline,
            "json_items" => &mut self.json_items,
            "upload" => &mut self.upload,
            "ws" => &mut self.ws,
            _ => return Err(format!("unknown path name {name:?} (known: {PATH_NAMES})")),
        };
        *slot = value.trim_end_matches('/').to_string();
        if slot.is_empty() && !value.is_empty() {
            // "/" alone stays a real path, not "skip".
            *slot = "/".into();
        }
        Ok(())
    }

    fn set_param(&mut self, name: &str, value: &str) -> Result<(), String> {
        if value.is_empty() || value.contains(['&', '=', '?', ' ', '#']) {
            return Err(format!("bad parameter name for {name}: {value:?}"));
        }
        let slot = match name.replace('-', "_").as_str() {
            "queries" => &mut self.queries_param,
            "updates" => &mut self.updates_param,
            "cached_queries" | "count" => &mut self.cached_queries_param,
            "multiplier" | "m" => &mut self.multiplier_param,
            _ => return Err(format!("unknown parameter name {name:?} (known: {PARAM_NAMES})")),
        };
        *slot = value.to_string();
        Ok(())
    }
}

fn split_flag(flag: &str) -> Result<(&str, &str), String> {
    flag.split_once('=').ok_or_else(|| format!("expected NAME=VALUE, got {flag:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_flags_override_defaults() {
        let toml = "[paths]\nplaintext = \"/pt\"\nupload = \"\"\n[params]\ncached_queries = \"n\"\n";
        let r = Routes::load(
            Some(toml),
            &["plaintext=/p2/".into(), "cached-queries=/cq".into()],
            &["queries=q".into()],
        )
        .expect("load");
        assert_eq!(r.plaintext, "/p2");
        assert_eq!(r.upload, "", "empty means skip");
        assert_eq!(r.cached_queries, "/cq");
        assert_eq!(r.cached_queries_param, "n");
        assert_eq!(r.queries_param, "q");
        assert_eq!(r.json, "/json");
    }

    #[test]
    fn rejects_unknown_names_and_bad_values() {
        assert!(Routes::load(Some("[paths]\nnope = \"/x\"\n"), &[], &[]).is_err());
        assert!(Routes::load(Some("[other]\n"), &[], &[]).is_err());
        assert!(Routes::load(None, &["json=noslash".into()], &[]).is_err());
        assert!(Routes::load(None, &["json".into()], &[]).is_err());
        assert!(Routes::load(None, &[], &["queries=a&b".into()]).is_err());
    }
}
