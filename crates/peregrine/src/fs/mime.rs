//! The `Content-Type` of a file, from its extension (`mime_guess`'s table),
//! with `; charset=utf-8` on the textual types a browser would otherwise
//! decode with a guessed charset.
//!
//! Rules:
//! - Unknown extensions are `application/octet-stream`.
//! - The charset goes on `text/*`, JavaScript, SVG, XML and web app
//!   manifests. Not on `application/json`: RFC 8259 defines no charset
//!   parameter (JSON is UTF-8 by definition), and clients compare it
//!   exactly.
//! - A precompressed sibling is served with the type of the file it
//!   stands for (`app.js.br` as `app.js`, with `Content-Encoding: br`);
//!   asked for by its own name it is what its extension says.

use std::borrow::Cow;

/// The content type for `path` (only its extension counts).
pub(crate) fn content_type(path: &str) -> Cow<'static, str> {
    let essence = mime_guess::from_path(path).first_raw().unwrap_or("application/octet-stream");
    let with_charset = match essence {
        "text/html" => "text/html; charset=utf-8",
        "text/css" => "text/css; charset=utf-8",
        "text/plain" => "text/plain; charset=utf-8",
        "text/javascript" => "text/javascript; charset=utf-8",
        "application/javascript" => "application/javascript; charset=utf-8",
        "image/svg+xml" => "image/svg+xml; charset=utf-8",
        "application/xml" => "application/xml; charset=utf-8",
        "application/manifest+json" => "application/manifest+json; charset=utf-8",
        other if other.starts_with("text/") => return Cow::Owned(format!("{other}; charset=utf-8")),
        other => other,
    };
    Cow::Borrowed(with_charset)
}

#[cfg(test)]
mod tests {
    use super::content_type;

    #[test]
    fn textual_types_carry_utf8() {
        assert_eq!(content_type("a/b/site.css"), "text/css; charset=utf-8");
        assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
        assert!(content_type("app.js").ends_with("javascript; charset=utf-8"));
        assert_eq!(content_type("logo.svg"), "image/svg+xml; charset=utf-8");
        assert_eq!(content_type("data.csv"), "text/csv; charset=utf-8");
        assert_eq!(content_type("manifest.json"), "application/json");
        assert_eq!(content_type("font.woff2"), "font/woff2");
        assert_eq!(content_type("hero.webp"), "image/webp");
        assert_eq!(content_type("noext"), "application/octet-stream");
        assert_eq!(content_type("x.unknownext"), "application/octet-stream");
    }
}
