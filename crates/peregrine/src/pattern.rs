//! Route patterns: `/users/{id}/files/{*rest}` parsed once at start-up and
//! matched against raw request paths.
//!
//! A leaf that both the [router](crate::router) (which groups patterns by
//! shape) and the [request](crate::request) (which finds a parameter's value
//! by name when a handler asks for it) use. The parameter names live in the
//! pattern, so two routes of the same shape registered for different methods
//! (`GET /u/{id}` and `POST /u/{name}`) each keep their own names.

/// Largest number of `{name}` parameters in one route pattern.
pub const MAX_PATH_PARAMS: usize = 8;

/// One `/`-separated part of a route pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Segment {
    /// Matches exactly this text.
    Static(Box<str>),
    /// `{name}`: one non-empty segment.
    Param(Box<str>),
    /// `{*name}`: the rest of the path (last segment only).
    Wildcard(Box<str>),
}

/// A parsed route pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    /// The pattern as written, for messages.
    pub(crate) text: Box<str>,
    segments: Vec<Segment>,
    /// The whole path when the pattern has no parameters: matched with one
    /// comparison instead of segment by segment.
    literal: Option<Box<str>>,
}

impl Pattern {
    /// Parses `pattern`.
    ///
    /// # Panics
    /// On an invalid pattern: a programming error found at start-up, never
    /// at request time.
    pub(crate) fn parse(pattern: &str) -> Pattern {
        assert!(pattern.starts_with('/'), "route pattern {pattern:?} must start with '/'");
        let mut segments = Vec::new();
        let parts: Vec<&str> = pattern[1..].split('/').collect();
        for (i, part) in parts.iter().enumerate() {
            if let Some(name) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                let segment = if let Some(rest) = name.strip_prefix('*') {
                    assert!(i == parts.len() - 1, "wildcard must be last in {pattern:?}");
                    assert!(!rest.is_empty(), "empty parameter name in {pattern:?}");
                    Segment::Wildcard(rest.into())
                } else {
                    assert!(!name.is_empty(), "empty parameter name in {pattern:?}");
                    Segment::Param(name.into())
                };
                segments.push(segment);
            } else {
                assert!(!part.contains(['{', '}']), "malformed segment {part:?} in {pattern:?}");
                segments.push(Segment::Static((*part).into()));
            }
        }
        let params = segments.iter().filter(|s| !matches!(s, Segment::Static(_))).count();
        assert!(params <= MAX_PATH_PARAMS, "too many parameters in {pattern:?}");
        let literal = (params == 0).then(|| pattern.into());
        Pattern { text: pattern.into(), segments, literal }
    }

    /// Whether `other` matches exactly the same paths (names aside).
    pub(crate) fn same_shape(&self, other: &Pattern) -> bool {
        self.segments.len() == other.segments.len()
            && self.segments.iter().zip(&other.segments).all(|pair| match pair {
                (Segment::Static(a), Segment::Static(b)) => a == b,
                (Segment::Param(_), Segment::Param(_)) | (Segment::Wildcard(_), Segment::Wildcard(_)) => true,
                _ => false,
            })
    }

    /// Whether the pattern has no parameters.
    pub(crate) fn is_literal(&self) -> bool {
        self.literal.is_some()
    }

    /// Whether `path` matches.
    #[inline]
    pub(crate) fn matches(&self, path: &str) -> bool {
        match &self.literal {
            Some(literal) => eq_short(literal.as_bytes(), path.as_bytes()),
            None => self.capture(path).is_some(),
        }
    }

    /// The raw value of parameter `name` in `path`, if the path matches.
    pub(crate) fn param<'p>(&self, name: &str, path: &'p str) -> Option<&'p str> {
        let index = self.names().position(|n| n == name)?;
        let (values, n) = self.capture(path)?;
        values[..n].get(index).copied()
    }

    /// Parameter names in pattern order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|s| match s {
            Segment::Param(name) | Segment::Wildcard(name) => Some(name.as_ref()),
            Segment::Static(_) => None,
        })
    }

    /// Matches `path`, returning the raw (still percent-encoded) parameter
    /// values in pattern order and how many there are.
    pub(crate) fn capture<'p>(&self, path: &'p str) -> Option<([&'p str; MAX_PATH_PARAMS], usize)> {
        let rest = path.strip_prefix('/')?;
        let mut values = [""; MAX_PATH_PARAMS];
        let mut n = 0;
        let mut remaining = Some(rest);
        for segment in &self.segments {
            let current = remaining?;
            if let Segment::Wildcard(_) = segment {
                values[n] = current;
                return Some((values, n + 1));
            }
            let (part, next) = match current.find('/') {
                Some(i) => (&current[..i], Some(&current[i + 1..])),
                None => (current, None),
            };
            match segment {
                Segment::Static(s) if s.as_ref() == part => {}
                Segment::Param(_) if !part.is_empty() => {
                    values[n] = part;
                    n += 1;
                }
                _ => return None,
            }
            remaining = next;
        }
        remaining.is_none().then_some((values, n))
    }
}

/// `a == b`, with paths of 8 to 16 bytes compared as two overlapping words
/// inline: `==` on slices called `memcmp`, about 18 instructions a routed
/// request (`scripts/callgrind`, pipelined `/plaintext`).
#[inline(always)]
fn eq_short(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let n = a.len();
    if (8..=16).contains(&n) {
        let word = |s: &[u8], at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&s[at..at + 8]);
            u64::from_ne_bytes(w)
        };
        return word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8);
    }
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_compare_agrees_with_slice_equality() {
        let base = b"/abcdefghijklmnopqrst";
        for n in 0..base.len() {
            let a = &base[..n];
            assert!(eq_short(a, a));
            for at in 0..n {
                let mut b = a.to_vec();
                b[at] ^= 0x20;
                assert!(!eq_short(a, &b), "{n} {at}");
            }
            assert!(!eq_short(a, &base[..n + 1]));
        }
    }

    fn captured(pattern: &str, path: &str) -> Option<Vec<String>> {
        Pattern::parse(pattern).capture(path).map(|(v, n)| v[..n].iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn captures_params_and_wildcards() {
        assert_eq!(captured("/a/{x}/b/{y}", "/a/1/b/2"), Some(vec!["1".into(), "2".into()]));
        assert_eq!(captured("/static/{*file}", "/static/css/x.css"), Some(vec!["css/x.css".into()]));
        assert_eq!(captured("/json/{n}", "/json/"), None);
        assert_eq!(captured("/json/{n}", "/json/1/2"), None);
        assert_eq!(captured("/", "/"), Some(vec![]));
    }

    #[test]
    fn names_live_in_the_pattern() {
        let by_id = Pattern::parse("/u/{id}");
        let by_name = Pattern::parse("/u/{name}");
        assert!(by_id.same_shape(&by_name));
        assert_eq!(by_name.param("name", "/u/ada"), Some("ada"));
        assert_eq!(by_id.param("name", "/u/ada"), None);
        assert!(!by_id.same_shape(&Pattern::parse("/u/{*rest}")));
        assert!(!by_id.same_shape(&Pattern::parse("/v/{id}")));
    }
}
