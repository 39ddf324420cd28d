//! The route matcher: arbitrary paths against patterns with literals,
//! parameters and a trailing wildcard.
//!
//! Checked, for every match: putting the captured values back into the
//! pattern gives the path again; a `{param}` value is never empty and never
//! holds a `/`; and a pattern without parameters matches only itself.

#![no_main]

use libfuzzer_sys::fuzz_target;
use peregrine::fuzzing::capture;

const PATTERNS: &[&str] = &[
    "/",
    "/plaintext",
    "/json/{count}",
    "/p/{a}/{b}",
    "/{a}",
    "/{a}/{b}/{c}",
    "/files/{*rest}",
    "/{*all}",
    "/a/{x}/b/{*rest}",
    "/trailing/",
    "/x/{y}/",
];

fn rebuild(pattern: &str, values: &[String]) -> String {
    let mut values = values.iter();
    let parts: Vec<String> = pattern[1..]
        .split('/')
        .map(|part| {
            if part.starts_with('{') {
                values.next().expect("one value per parameter").clone()
            } else {
                part.to_string()
            }
        })
        .collect();
    assert!(values.next().is_none(), "more values than parameters");
    format!("/{}", parts.join("/"))
}

fuzz_target!(|path: &str| {
    for pattern in PATTERNS {
        let Some(values) = capture(pattern, path) else { continue };
        assert_eq!(rebuild(pattern, &values), path, "pattern {pattern}");
        let params = pattern.split('/').filter(|p| p.starts_with('{') && !p.starts_with("{*"));
        for (value, _) in values.iter().zip(params) {
            assert!(!value.is_empty() && !value.contains('/'), "{pattern} captured {value:?} from {path:?}");
        }
        if !pattern.contains('{') {
            assert_eq!(*pattern, path);
        }
    }
});
