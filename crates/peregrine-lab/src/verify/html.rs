//! The fortunes page, compared as parsed HTML rather than as bytes.
//!
//! Owns a small tokenizer (tags and text, entities decoded), the expected
//! document built from the 12 seeded fortunes plus the one added at request
//! time, and the comparison. Parsing first means equivalent encodings pass
//! (`&#39;` or `&#x27;`, `<!doctype html>` or `<!DOCTYPE html>`, whitespace
//! between tags) while anything a browser would render differently fails.

/// The seeded Fortune table, shared with the server crate so both sides read
/// the same rows.
const FORTUNES_TSV: &str = include_str!("../../../peregrine-tfb/data/fortunes.tsv");
const ADDED_FORTUNE: &str = "Additional fortune added at request time.";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    /// `<!...>`: doctype (lowercased, whitespace collapsed).
    Decl(String),
    /// Start tag name (lowercased) and its raw attribute text (trimmed).
    Start(String, String),
    End(String),
    /// Decoded text with surrounding whitespace removed; whitespace-only
    /// text is dropped, since it does not change what the table shows.
    Text(String),
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Decl(d) => write!(f, "<!{d}>"),
            Token::Start(n, a) if a.is_empty() => write!(f, "<{n}>"),
            Token::Start(n, a) => write!(f, "<{n} {a}>"),
            Token::End(n) => write!(f, "</{n}>"),
            Token::Text(t) => write!(f, "text {t:?}"),
        }
    }
}

/// Splits HTML into tokens. Comments are dropped. A `<` that cannot start a
/// tag is kept as text, so a stray unescaped `<` shows up as a difference.
pub fn tokenize(html: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut rest = html;
    let mut text = String::new();
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            text.push_str(rest);
            break;
        };
        text.push_str(&rest[..lt]);
        let tag = &rest[lt..];
        let next = tag.as_bytes().get(1).copied();
        let starts_tag = matches!(next, Some(b'!' | b'/')) || next.is_some_and(|b| b.is_ascii_alphabetic());
        if !starts_tag {
            text.push('<');
            rest = &tag[1..];
            continue;
        }
        flush_text(&mut text, &mut tokens)?;
        if let Some(comment) = tag.strip_prefix("<!--") {
            let end = comment.find("-->").ok_or_else(|| "unterminated comment".to_string())?;
            rest = &comment[end + 3..];
            continue;
        }
        let gt = tag.find('>').ok_or_else(|| format!("unterminated tag at {:?}", short(tag)))?;
        let inner = &tag[1..gt];
        rest = &tag[gt + 1..];
        if let Some(decl) = inner.strip_prefix('!') {
            let words: Vec<String> = decl.split_whitespace().map(str::to_ascii_lowercase).collect();
            tokens.push(Token::Decl(words.join(" ")));
        } else if let Some(name) = inner.strip_prefix('/') {
            tokens.push(Token::End(name.trim().to_ascii_lowercase()));
        } else {
            let inner = inner.trim_end_matches('/');
            let (name, attrs) = inner.split_once(|c: char| c.is_ascii_whitespace()).unwrap_or((inner, ""));
            tokens.push(Token::Start(name.to_ascii_lowercase(), attrs.trim().to_string()));
        }
    }
    flush_text(&mut text, &mut tokens)?;
    Ok(tokens)
}

fn flush_text(text: &mut String, tokens: &mut Vec<Token>) -> Result<(), String> {
    let trimmed = text.trim();
    if !trimmed.is_empty() {
        tokens.push(Token::Text(decode_entities(trimmed)?));
    }
    text.clear();
    Ok(())
}

fn short(s: &str) -> &str {
    match s.char_indices().nth(40) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Decodes character references: the five XML entities, `&apos;`, and
/// decimal or hex numeric references. A bare `&` or an unknown name is an
/// error: the template must have escaped it.
pub fn decode_entities(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let semi = after
            .find(';')
            .filter(|&i| i <= 10)
            .ok_or_else(|| format!("unescaped '&' in {:?}", short(&rest[amp..])))?;
        let name = &after[..semi];
        let ch = match name {
            "lt" => '<',
            "gt" => '>',
            "amp" => '&',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = if let Some(hex) = name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
                    u32::from_str_radix(hex, 16).ok()
                } else if let Some(dec) = name.strip_prefix('#') {
                    dec.parse().ok()
                } else {
                    None
                };
                code.and_then(char::from_u32)
                    .ok_or_else(|| format!("unknown character reference &{name};"))?
            }
        };
        out.push(ch);
        rest = &after[semi + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The seeded fortunes plus the request-time one, sorted by message in
/// ordinal (byte) order, which for UTF-8 equals code point order.
pub fn expected_fortunes() -> Vec<(u32, String)> {
    let mut rows: Vec<(u32, String)> = FORTUNES_TSV
        .lines()
        .skip(1) // column names
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let (id, msg) = l.split_once('\t')?;
            Some((id.trim().parse().ok()?, msg.to_string()))
        })
        .collect();
    rows.push((0, ADDED_FORTUNE.to_string()));
    rows.sort_by(|a, b| a.1.cmp(&b.1));
    rows
}

/// Tokens before the first fortune row, and per row.
const HEAD_TOKENS: usize = 17;
const ROW_TOKENS: usize = 8;

/// The expected token stream of the fortunes page.
pub fn expected_tokens() -> Vec<Token> {
    let start = |n: &str| Token::Start(n.to_string(), String::new());
    let end = |n: &str| Token::End(n.to_string());
    let text = |t: &str| Token::Text(t.to_string());
    let mut t = vec![
        Token::Decl("doctype html".into()),
        start("html"),
        start("head"),
        start("title"),
        text("Fortunes"),
        end("title"),
        end("head"),
        start("body"),
        start("table"),
        start("tr"),
        start("th"),
        text("id"),
        end("th"),
        start("th"),
        text("message"),
        end("th"),
        end("tr"),
    ];
    for (id, msg) in expected_fortunes() {
        t.extend([
            start("tr"),
            start("td"),
            text(&id.to_string()),
            end("td"),
            start("td"),
            text(msg.trim()),
            end("td"),
            end("tr"),
        ]);
    }
    t.extend([end("table"), end("body"), end("html")]);
    t
}

/// Compares a fortunes body with the expected document; the error names the
/// first difference with its position.
pub fn compare_fortunes(body: &str) -> Result<(), String> {
    let got = tokenize(body)?;
    let want = expected_tokens();
    let rows = expected_fortunes();
    // Names the table row a token belongs to, so a failure reads "in row 3
    // (id 0 ...)" rather than only a token index.
    let row_of = |i: usize| -> String {
        i.checked_sub(HEAD_TOKENS)
            .map(|k| k / ROW_TOKENS)
            .and_then(|r| rows.get(r).map(|(id, msg)| (r, id, msg)))
            .map(|(r, id, msg)| format!(" in fortune row {r} (expected id {id}, {msg:?})"))
            .unwrap_or_default()
    };
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        if w != g {
            return Err(format!("expected {w} at token {i}{}, got {g}", row_of(i)));
        }
    }
    match got.len().cmp(&want.len()) {
        std::cmp::Ordering::Less => {
            Err(format!("expected {} at token {}, got end of document", want[got.len()], got.len()))
        }
        std::cmp::Ordering::Greater => {
            Err(format!("expected end of document at token {}, got {}", want.len(), got[want.len()]))
        }
        std::cmp::Ordering::Equal => Ok(()),
    }
}

/// Renders the expected page with minimal escaping (for tests and the test
/// server).
#[cfg(test)]
pub fn render_expected() -> String {
    let mut s = String::from(
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>",
    );
    for (id, msg) in expected_fortunes() {
        s.push_str(&format!("<tr><td>{id}</td><td>{}</td></tr>", escape(&msg)));
    }
    s.push_str("</table></body></html>");
    s
}

#[cfg(test)]
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#x27;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_rows_are_sorted_and_complete() {
        let rows = expected_fortunes();
        assert_eq!(rows.len(), 13);
        assert_eq!(
            rows[0].1,
            "<script>alert(\"This should not be displayed in a browser alert box.\");</script>"
        );
        assert_eq!(rows[12].0, 12, "the Japanese row sorts last");
        assert!(rows.iter().any(|(id, m)| *id == 0 && m == ADDED_FORTUNE));
    }

    #[test]
    fn tokenizer_decodes_and_ignores_layout_whitespace() {
        let toks = tokenize("<!doctype html>\n <p class=\"a\">a &lt;b&gt; &#39;&#x27;&quot;&amp;</p>\n")
            .expect("tokens");
        assert_eq!(
            toks,
            vec![
                Token::Decl("doctype html".into()),
                Token::Start("p".into(), "class=\"a\"".into()),
                Token::Text("a <b> ''\"&".into()),
                Token::End("p".into()),
            ]
        );
        assert!(decode_entities("a & b").is_err());
        assert!(decode_entities("&bogus;").is_err());
        assert_eq!(decode_entities("&#12501;").as_deref(), Ok("フ"));
    }

    #[test]
    fn reference_page_matches_and_variants_fail() {
        let page = render_expected();
        compare_fortunes(&page).expect("reference page");
        // Pretty-printed with other valid escapes still matches.
        let pretty = page.replace("<tr>", "\n  <tr>").replace("&#x27;", "&#39;");
        compare_fortunes(&pretty).expect("pretty page");
        // Unescaped script, missing row, wrong order.
        let raw = page.replace("&lt;script&gt;", "<script>");
        assert!(compare_fortunes(&raw).is_err());
        let missing =
            page.replace("<tr><td>0</td><td>Additional fortune added at request time.</td></tr>", "");
        assert!(compare_fortunes(&missing).unwrap_err().contains("Additional"));
        assert!(compare_fortunes(&page.replace("</html>", "</html><p>")).is_err());
    }
}
