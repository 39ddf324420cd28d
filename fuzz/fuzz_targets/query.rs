//! `percent_decode` on arbitrary UTF-8, in both modes.
//!
//! Size bound: every output byte comes from an input byte of its own (a
//! literal byte, or `+` turned into a space) or from a `%XX` escape, which
//! is three input bytes for one decoded byte. Decoded bytes that are not
//! UTF-8 become U+FFFD (three bytes) — but each replacement stands for at
//! least one escaped byte, i.e. at least three input bytes, and literal
//! bytes from the `&str` input are valid UTF-8 on their own and never get
//! swallowed by a replacement. So the output is never longer than the input.

#![no_main]

use std::borrow::Cow;

use libfuzzer_sys::fuzz_target;
use peregrine::request::percent_decode;

fuzz_target!(|s: &str| {
    let form = percent_decode(s, true);
    let path = percent_decode(s, false);

    for out in [&form, &path] {
        assert!(out.len() <= s.len(), "{s:?} decoded to {out:?}");
    }

    // Nothing to decode means the input itself, borrowed.
    if !s.contains('%') {
        assert!(matches!(path, Cow::Borrowed(x) if x == s));
        if !s.contains('+') {
            assert!(matches!(form, Cow::Borrowed(x) if x == s));
        }
    }

    // `+` is neither a hex digit nor `%`, so turning it into a space first
    // cannot change how escapes are read: form decoding is path decoding
    // after that substitution.
    assert_eq!(form, percent_decode(&s.replace('+', " "), false));

    // Without escapes that decode to bytes, the only change is `+`.
    if !s.contains('%') {
        assert_eq!(form, s.replace('+', " "));
    }
});
