//! The JSON writer behind [`Json`](super::Json) and
//! [`Response::json`](super::Response::json): serde's data model to compact
//! JSON appended to a `Vec<u8>`, byte for byte what `serde_json::to_writer`
//! writes.
//!
//! Why not `serde_json::to_writer` itself: it escapes strings one byte at a
//! time, splitting the slice at every byte, about 8.6 instructions a byte
//! (callgrind on `/json`: 286 of a request's 2,828 user-space instructions
//! went to `serialize_str` for the key `message` and its 13-byte value).
//! Here a string is checked for the three kinds of byte that need escaping
//! in two overlapping words, or sixteen bytes at a time with SSE2 when it
//! is longer, then copied whole (two word stores up to 16 bytes). `/json`
//! went from 2,828 to 2,691 instructions a request (`scripts/callgrind`).
//!
//! Everything else is serde_json's: numbers, floats and escape sequences
//! are written by its `CompactFormatter`, so they cannot differ; this module
//! owns only the punctuation, the string scan and serde_json's rules for map
//! keys (strings, and numbers, booleans and unit variants written as
//! strings; anything else is an error) and for its private raw-value and
//! arbitrary-precision number tokens. A differential test and a fuzz target
//! hold it to serde_json's output.

use std::fmt::{self, Display};
use std::num::FpCategory;

use serde::ser::{self, Impossible, Serialize};
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};

/// Appends `value` to `out` as compact JSON. On an error `out` may hold part
/// of the value; the caller discards it.
#[inline]
pub(crate) fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), JsonError> {
    value.serialize(Writer { out })
}

/// Why a value could not be written as JSON: a map key that JSON cannot
/// hold, or an error the value's own `Serialize` implementation raised.
#[derive(Debug)]
pub(crate) struct JsonError(Box<str>);

impl JsonError {
    fn new(why: &str) -> JsonError {
        JsonError(why.into())
    }
}

impl Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for JsonError {}

impl ser::Error for JsonError {
    fn custom<T: Display>(msg: T) -> JsonError {
        JsonError(msg.to_string().into())
    }
}

fn key_must_be_a_string() -> JsonError {
    JsonError::new("key must be a string")
}

fn raw_value_must_be_a_string() -> JsonError {
    JsonError::new("a raw JSON value must be a string")
}

/// serde_json's struct names for values it writes verbatim: a `RawValue`
/// (feature `raw_value`) and a `Number` (feature `arbitrary_precision`).
const RAW_TOKENS: [&str; 2] = ["$serde_json::private::RawValue", "$serde_json::private::Number"];

/// serde_json's formatter, for numbers and escapes. Writing into a `Vec`
/// cannot fail, so its `io::Result`s are always `Ok`.
#[inline(always)]
fn formatted(written: std::io::Result<()>) -> Result<(), JsonError> {
    written.map_err(|e| JsonError(e.to_string().into()))
}

/// Whether `b` must be escaped inside a JSON string (RFC 8259 §7): a quote,
/// a backslash or a control character. DEL and non-ASCII pass as they are,
/// as serde_json writes them.
#[inline(always)]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Index of the first byte at or after `from` that needs escaping.
#[inline(always)]
fn first_escape(bytes: &[u8], from: usize) -> Option<usize> {
    let scanned = match simd::first_escape(bytes, from) {
        Ok(found) => return Some(found),
        Err(scanned) => scanned,
    };
    bytes[scanned..].iter().position(|&b| needs_escape(b)).map(|k| scanned + k)
}

/// Whether any byte of `bytes` needs escaping, read a block at a time:
/// 16-byte blocks with SSE2, then one last block ending at the end; under
/// 16 bytes, two overlapping words (a byte loop had cost about nine
/// instructions a byte, and most keys and short values are under 16).
#[inline(always)]
fn any_escape(bytes: &[u8]) -> bool {
    let n = bytes.len();
    if n >= 16 {
        return simd::any_escape_long(bytes);
    }
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let half = |at: usize| {
        let mut w = [0u8; 4];
        w.copy_from_slice(&bytes[at..at + 4]);
        u32::from_le_bytes(w) as u64
    };
    if n >= 8 {
        word_has_escape(word(0)) || word_has_escape(word(n - 8))
    } else if n >= 4 {
        // Both halves come from the string (overlapping when n < 8), so no
        // padding byte can look like a control character.
        word_has_escape(half(0) | half(n - 4) << 32)
    } else {
        bytes.iter().any(|&b| needs_escape(b))
    }
}

/// Whether one of the eight bytes of `w` needs escaping: the classic
/// "has a byte less than n" and "has a zero byte" word tests (exact for
/// whether such a byte exists, which is all the caller asks).
#[inline(always)]
fn word_has_escape(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w;
    let quote = w ^ (ONES * b'"' as u64);
    let backslash = w ^ (ONES * b'\\' as u64);
    let zero_in = |x: u64| x.wrapping_sub(ONES) & !x;
    (below_space | zero_in(quote) | zero_in(backslash)) & HIGHS != 0
}

/// Writes `s` as a JSON string, quotes included.
#[inline]
fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    if !any_escape(bytes) {
        if bytes.len() <= 16 {
            push_short_quoted(out, bytes);
        } else {
            out.push(b'"');
            out.extend_from_slice(bytes);
            out.push(b'"');
        }
        return;
    }
    out.push(b'"');
    write_escaped(out, bytes);
    out.push(b'"');
}

/// Appends `"`, `bytes` (at most 16, none to escape) and `"` into space
/// the caller reserved, as overlapping word stores: `extend_from_slice`
/// calls `memcpy`, about 22 instructions for a short string, and most keys
/// and short values are short.
#[inline(always)]
fn push_short_quoted(out: &mut Vec<u8>, bytes: &[u8]) {
    let n = bytes.len();
    debug_assert!(n <= 16);
    let len = out.len();
    let spare = &mut out.spare_capacity_mut()[..n + 2];
    let copy = |dst: &mut [std::mem::MaybeUninit<u8>], src: &[u8]| {
        for (d, &b) in dst.iter_mut().zip(src) {
            d.write(b);
        }
    };
    spare[0].write(b'"');
    if n >= 8 {
        copy(&mut spare[1..9], &bytes[..8]);
        copy(&mut spare[n - 7..n + 1], &bytes[n - 8..]);
    } else if n >= 4 {
        copy(&mut spare[1..5], &bytes[..4]);
        copy(&mut spare[n - 3..n + 1], &bytes[n - 4..]);
    } else {
        copy(&mut spare[1..n + 1], bytes);
    }
    spare[n + 1].write(b'"');
    // SAFETY: the `n + 2` bytes after `len` were all written above (the
    // two overlapping copies cover positions 1..=n between them), and
    // `spare_capacity_mut` handed out that many, so they are within the
    // capacity.
    unsafe { out.set_len(len + n + 2) };
}

/// The inside of a string, its bytes to escape escaped.
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    let mut start = 0;
    while let Some(at) = first_escape(bytes, start) {
        out.extend_from_slice(&bytes[start..at]);
        write_escape(out, bytes[at]);
        start = at + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// The escape sequence of one byte that [`needs_escape`], as serde_json
/// writes it (`\n`, `\u001f`, ...).
#[cold]
fn write_escape(out: &mut Vec<u8>, b: u8) {
    let escape = match b {
        b'"' => CharEscape::Quote,
        b'\\' => CharEscape::ReverseSolidus,
        0x08 => CharEscape::Backspace,
        0x0c => CharEscape::FormFeed,
        b'\n' => CharEscape::LineFeed,
        b'\r' => CharEscape::CarriageReturn,
        b'\t' => CharEscape::Tab,
        other => CharEscape::AsciiControl(other),
    };
    // Writing into a Vec cannot fail.
    let _ = CompactFormatter.write_char_escape(out, escape);
}

/// A `Display` value written as a JSON string, escaped as it is formatted.
fn write_display<T: Display + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), JsonError> {
    struct Escaping<'a>(&'a mut Vec<u8>);
    impl fmt::Write for Escaping<'_> {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            write_escaped(self.0, s.as_bytes());
            Ok(())
        }
    }
    out.push(b'"');
    fmt::write(&mut Escaping(out), format_args!("{value}"))
        .map_err(|_| JsonError::new("a Display implementation returned an error"))?;
    out.push(b'"');
    Ok(())
}

/// The serializer: a value at the current position of `out`.
struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

/// An array or object being written; `first` until its first element.
struct Compound<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    /// The closing bytes: `]`, `}`, or `]}` / `}}` for a variant.
    close: &'static [u8],
}

impl Compound<'_> {
    #[inline(always)]
    fn separate(&mut self) {
        if self.first {
            self.first = false;
        } else {
            self.out.push(b',');
        }
    }
}

impl<'a> Writer<'a> {
    /// `{"variant":`, the opening of every variant with data.
    #[inline]
    fn open_variant(&mut self, variant: &str) {
        self.out.push(b'{');
        write_str(self.out, variant);
        self.out.push(b':');
    }

    #[inline]
    fn compound(self, open: u8, close: &'static [u8]) -> Compound<'a> {
        self.out.push(open);
        Compound { out: self.out, first: true, close }
    }
}

/// The integer methods of a serializer, one list for both writers: `plain`
/// writes the number, `quoted` writes it as a string (a map key).
macro_rules! integers {
    ($how:ident) => {
        integers!(@each $how,
            serialize_i8: i8 => write_i8,
            serialize_i16: i16 => write_i16,
            serialize_i32: i32 => write_i32,
            serialize_i64: i64 => write_i64,
            serialize_i128: i128 => write_i128,
            serialize_u8: u8 => write_u8,
            serialize_u16: u16 => write_u16,
            serialize_u32: u32 => write_u32,
            serialize_u64: u64 => write_u64,
            serialize_u128: u128 => write_u128,
        );
    };
    (@each plain, $($method:ident: $ty:ty => $write:ident),* $(,)?) => {
        $(
            #[inline]
            fn $method(self, v: $ty) -> Result<(), JsonError> {
                formatted(CompactFormatter.$write(self.out, v))
            }
        )*
    };
    (@each quoted, $($method:ident: $ty:ty => $write:ident),* $(,)?) => {
        $(
            fn $method(self, v: $ty) -> Result<(), JsonError> {
                self.quoted(|out| CompactFormatter.$write(out, v))
            }
        )*
    };
}

impl<'a> ser::Serializer for Writer<'a> {
    type Ok = ();
    type Error = JsonError;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Struct<'a>;
    type SerializeStructVariant = Compound<'a>;

    #[inline]
    fn serialize_bool(self, v: bool) -> Result<(), JsonError> {
        self.out.extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }

    integers!(plain);

    /// NaN and the infinities have no JSON form: `null`, as serde_json.
    #[inline]
    fn serialize_f32(self, v: f32) -> Result<(), JsonError> {
        match v.classify() {
            FpCategory::Nan | FpCategory::Infinite => self.serialize_unit(),
            _ => formatted(CompactFormatter.write_f32(self.out, v)),
        }
    }

    #[inline]
    fn serialize_f64(self, v: f64) -> Result<(), JsonError> {
        match v.classify() {
            FpCategory::Nan | FpCategory::Infinite => self.serialize_unit(),
            _ => formatted(CompactFormatter.write_f64(self.out, v)),
        }
    }

    #[inline]
    fn serialize_char(self, v: char) -> Result<(), JsonError> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }

    #[inline]
    fn serialize_str(self, v: &str) -> Result<(), JsonError> {
        write_str(self.out, v);
        Ok(())
    }

    /// An array of numbers, as serde_json writes bytes.
    fn serialize_bytes(self, v: &[u8]) -> Result<(), JsonError> {
        formatted(CompactFormatter.write_byte_array(self.out, v))
    }

    #[inline]
    fn serialize_none(self) -> Result<(), JsonError> {
        self.serialize_unit()
    }

    #[inline]
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), JsonError> {
        value.serialize(self)
    }

    #[inline]
    fn serialize_unit(self) -> Result<(), JsonError> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), JsonError> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), JsonError> {
        write_str(self.out, variant);
        Ok(())
    }

    #[inline]
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), JsonError> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), JsonError> {
        self.open_variant(variant);
        value.serialize(Writer { out: &mut *self.out })?;
        self.out.push(b'}');
        Ok(())
    }

    #[inline]
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a>, JsonError> {
        Ok(self.compound(b'[', b"]"))
    }

    fn serialize_tuple(self, len: usize) -> Result<Compound<'a>, JsonError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Compound<'a>, JsonError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, JsonError> {
        self.open_variant(variant);
        Ok(self.compound(b'[', b"]}"))
    }

    #[inline]
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a>, JsonError> {
        Ok(self.compound(b'{', b"}"))
    }

    #[inline]
    fn serialize_struct(self, name: &'static str, _len: usize) -> Result<Struct<'a>, JsonError> {
        if RAW_TOKENS.contains(&name) {
            return Ok(Struct::Raw(self.out));
        }
        Ok(Struct::Fields(self.compound(b'{', b"}")))
    }

    fn serialize_struct_variant(
        mut self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a>, JsonError> {
        self.open_variant(variant);
        Ok(self.compound(b'{', b"}}"))
    }

    fn collect_str<T: Display + ?Sized>(self, value: &T) -> Result<(), JsonError> {
        write_display(self.out, value)
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = JsonError;

    #[inline]
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), JsonError> {
        self.separate();
        value.serialize(Writer { out: &mut *self.out })
    }

    #[inline]
    fn end(self) -> Result<(), JsonError> {
        self.out.extend_from_slice(self.close);
        Ok(())
    }
}

/// Tuples of every kind are arrays: their elements go out as a sequence's.
macro_rules! tuples_as_sequences {
    ($($trait:ident :: $method:ident),* $(,)?) => {
        $(
            impl ser::$trait for Compound<'_> {
                type Ok = ();
                type Error = JsonError;

                fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), JsonError> {
                    ser::SerializeSeq::serialize_element(self, value)
                }

                fn end(self) -> Result<(), JsonError> {
                    ser::SerializeSeq::end(self)
                }
            }
        )*
    };
}

tuples_as_sequences! {
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = JsonError;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), JsonError> {
        self.separate();
        key.serialize(KeyWriter { out: &mut *self.out })
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), JsonError> {
        self.out.push(b':');
        value.serialize(Writer { out: &mut *self.out })
    }

    fn end(self) -> Result<(), JsonError> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = JsonError;

    #[inline]
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), JsonError> {
        self.separate();
        write_str(self.out, key);
        self.out.push(b':');
        value.serialize(Writer { out: &mut *self.out })
    }

    fn end(self) -> Result<(), JsonError> {
        ser::SerializeSeq::end(self)
    }
}

/// A struct: its fields as an object, or one of serde_json's raw tokens,
/// whose single field is text written as it is.
enum Struct<'a> {
    Fields(Compound<'a>),
    Raw(&'a mut Vec<u8>),
}

impl ser::SerializeStruct for Struct<'_> {
    type Ok = ();
    type Error = JsonError;

    #[inline]
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), JsonError> {
        match self {
            Struct::Fields(fields) => ser::SerializeStructVariant::serialize_field(fields, key, value),
            Struct::Raw(out) => value.serialize(RawWriter { out }),
        }
    }

    #[inline]
    fn end(self) -> Result<(), JsonError> {
        match self {
            Struct::Fields(fields) => ser::SerializeSeq::end(fields),
            Struct::Raw(_) => Ok(()),
        }
    }
}

/// Writes a map key: JSON keys are strings, so numbers, booleans and unit
/// variants are quoted and anything else is refused, as serde_json does.
struct KeyWriter<'a> {
    out: &'a mut Vec<u8>,
}

impl KeyWriter<'_> {
    /// `"` + what `write` writes + `"`.
    #[inline]
    fn quoted(self, write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Result<(), JsonError> {
        self.out.push(b'"');
        formatted(write(self.out))?;
        self.out.push(b'"');
        Ok(())
    }
}

/// Serializer methods that only refuse, with the error `$why()`.
macro_rules! refused {
    ($why:ident; $($method:ident($($arg:ty),*) -> $ok:ty),* $(,)?) => {
        $(
            fn $method(self, $(_: $arg),*) -> Result<$ok, JsonError> {
                Err($why())
            }
        )*
    };
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = JsonError;
    type SerializeSeq = Impossible<(), JsonError>;
    type SerializeTuple = Impossible<(), JsonError>;
    type SerializeTupleStruct = Impossible<(), JsonError>;
    type SerializeTupleVariant = Impossible<(), JsonError>;
    type SerializeMap = Impossible<(), JsonError>;
    type SerializeStruct = Impossible<(), JsonError>;
    type SerializeStructVariant = Impossible<(), JsonError>;

    #[inline]
    fn serialize_str(self, v: &str) -> Result<(), JsonError> {
        write_str(self.out, v);
        Ok(())
    }

    fn serialize_char(self, v: char) -> Result<(), JsonError> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }

    fn serialize_bool(self, v: bool) -> Result<(), JsonError> {
        self.quoted(|out| CompactFormatter.write_bool(out, v))
    }

    integers!(quoted);

    fn serialize_f32(self, v: f32) -> Result<(), JsonError> {
        if !v.is_finite() {
            return Err(JsonError::new("float key must be finite (got NaN or +/-inf)"));
        }
        self.quoted(|out| CompactFormatter.write_f32(out, v))
    }

    fn serialize_f64(self, v: f64) -> Result<(), JsonError> {
        if !v.is_finite() {
            return Err(JsonError::new("float key must be finite (got NaN or +/-inf)"));
        }
        self.quoted(|out| CompactFormatter.write_f64(out, v))
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), JsonError> {
        write_str(self.out, variant);
        Ok(())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), JsonError> {
        value.serialize(self)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), JsonError> {
        value.serialize(self)
    }

    fn collect_str<T: Display + ?Sized>(self, value: &T) -> Result<(), JsonError> {
        write_display(self.out, value)
    }

    refused! { key_must_be_a_string;
        serialize_bytes(&[u8]) -> (),
        serialize_none() -> (),
        serialize_unit() -> (),
        serialize_unit_struct(&'static str) -> (),
        serialize_seq(Option<usize>) -> Impossible<(), JsonError>,
        serialize_tuple(usize) -> Impossible<(), JsonError>,
        serialize_tuple_struct(&'static str, usize) -> Impossible<(), JsonError>,
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Impossible<(), JsonError>,
        serialize_map(Option<usize>) -> Impossible<(), JsonError>,
        serialize_struct(&'static str, usize) -> Impossible<(), JsonError>,
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Impossible<(), JsonError>,
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), JsonError> {
        Err(key_must_be_a_string())
    }
}

/// The field of a raw token: text that is already JSON, written as it is.
struct RawWriter<'a> {
    out: &'a mut Vec<u8>,
}

impl ser::Serializer for RawWriter<'_> {
    type Ok = ();
    type Error = JsonError;
    type SerializeSeq = Impossible<(), JsonError>;
    type SerializeTuple = Impossible<(), JsonError>;
    type SerializeTupleStruct = Impossible<(), JsonError>;
    type SerializeTupleVariant = Impossible<(), JsonError>;
    type SerializeMap = Impossible<(), JsonError>;
    type SerializeStruct = Impossible<(), JsonError>;
    type SerializeStructVariant = Impossible<(), JsonError>;

    fn serialize_str(self, v: &str) -> Result<(), JsonError> {
        self.out.extend_from_slice(v.as_bytes());
        Ok(())
    }

    refused! { raw_value_must_be_a_string;
        serialize_bool(bool) -> (),
        serialize_i8(i8) -> (),
        serialize_i16(i16) -> (),
        serialize_i32(i32) -> (),
        serialize_i64(i64) -> (),
        serialize_u8(u8) -> (),
        serialize_u16(u16) -> (),
        serialize_u32(u32) -> (),
        serialize_u64(u64) -> (),
        serialize_f32(f32) -> (),
        serialize_f64(f64) -> (),
        serialize_char(char) -> (),
        serialize_bytes(&[u8]) -> (),
        serialize_none() -> (),
        serialize_unit() -> (),
        serialize_unit_struct(&'static str) -> (),
        serialize_unit_variant(&'static str, u32, &'static str) -> (),
        serialize_seq(Option<usize>) -> Impossible<(), JsonError>,
        serialize_tuple(usize) -> Impossible<(), JsonError>,
        serialize_tuple_struct(&'static str, usize) -> Impossible<(), JsonError>,
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Impossible<(), JsonError>,
        serialize_map(Option<usize>) -> Impossible<(), JsonError>,
        serialize_struct(&'static str, usize) -> Impossible<(), JsonError>,
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Impossible<(), JsonError>,
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), JsonError> {
        Err(raw_value_must_be_a_string())
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _value: &T,
    ) -> Result<(), JsonError> {
        Err(raw_value_must_be_a_string())
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), JsonError> {
        Err(raw_value_must_be_a_string())
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };

    /// Whether any byte of `bytes` (16 or more) needs escaping: 16-byte
    /// blocks, and one last block ending at the end.
    #[inline(always)]
    pub(super) fn any_escape_long(bytes: &[u8]) -> bool {
        debug_assert!(bytes.len() >= 16);
        let last = bytes.len() - 16;
        let mut i = 0;
        loop {
            let at = i.min(last);
            if block_mask(bytes, at) != 0 {
                return true;
            }
            if at == last {
                return false;
            }
            i += 16;
        }
    }

    /// The bytes of the 16 at `at` that need escaping, as a bit mask.
    #[inline(always)]
    fn block_mask(bytes: &[u8], at: usize) -> u32 {
        assert!(at + 16 <= bytes.len());
        // SAFETY: `at + 16 <= bytes.len()` (asserted above), so the 16
        // bytes read are in bounds; `_mm_loadu_si128` has no alignment
        // requirement, and SSE2 is part of the x86_64 baseline.
        unsafe {
            let v = _mm_loadu_si128(bytes.as_ptr().add(at).cast::<__m128i>());
            // b <= 0x1F  <=>  min(b, 0x1F) == b (unsigned).
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
            let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
            _mm_movemask_epi8(_mm_or_si128(control, _mm_or_si128(quote, backslash))) as u32
        }
    }

    /// `Ok(index)` of the first byte at or after `from` that needs
    /// escaping, or `Err(scanned)`: none up to `scanned`, and fewer than 16
    /// bytes after it, left to the caller's byte loop.
    #[inline(always)]
    pub(super) fn first_escape(bytes: &[u8], from: usize) -> Result<usize, usize> {
        let mut i = from;
        while i + 16 <= bytes.len() {
            let mask = block_mask(bytes, i);
            if mask != 0 {
                return Ok(i + mask.trailing_zeros() as usize);
            }
            i += 16;
        }
        Err(i)
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod simd {
    #[inline(always)]
    pub(super) fn any_escape_long(bytes: &[u8]) -> bool {
        bytes.iter().any(|&b| super::needs_escape(b))
    }

    #[inline(always)]
    pub(super) fn first_escape(_: &[u8], from: usize) -> Result<usize, usize> {
        Err(from)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;
    use serde_json::{json, Value};

    use super::*;

    /// Ours against serde_json's, for a value both accept or both refuse.
    fn assert_same<T: Serialize + ?Sized + std::fmt::Debug>(value: &T) {
        let theirs = serde_json::to_vec(value);
        let mut ours = Vec::new();
        let written = write(&mut ours, value);
        match theirs {
            Ok(theirs) => {
                assert!(written.is_ok(), "{value:?}: ours failed ({written:?}), serde_json wrote {theirs:?}");
                assert!(
                    ours == theirs,
                    "{value:?}: ours {:?}, serde_json {:?}",
                    String::from_utf8_lossy(&ours),
                    String::from_utf8_lossy(&theirs)
                );
            }
            Err(e) => assert!(written.is_err(), "{value:?}: serde_json refused ({e}), ours wrote {ours:?}"),
        }
    }

    #[derive(Serialize, Debug)]
    enum Shape {
        Unit,
        Newtype(u8),
        Tuple(i32, String),
        Struct { x: f64, tag: Option<&'static str> },
    }

    #[derive(Serialize, Debug)]
    struct Unit;

    #[derive(Serialize, Debug)]
    struct Wrapper(&'static str);

    #[derive(Serialize, Debug)]
    struct Pair(u8, bool);

    #[derive(Serialize, Debug)]
    struct Record {
        id: u32,
        #[serde(rename = "randomNumber")]
        random_number: i64,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        shapes: Vec<Shape>,
        unit: Unit,
        wrapper: Wrapper,
        pair: Pair,
        empty: Vec<u8>,
        nothing: (),
        chars: (char, char),
    }

    /// Bytes through `serialize_bytes`, as serde_bytes would send them.
    #[derive(Debug)]
    struct Bytes(&'static [u8]);
    impl Serialize for Bytes {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(self.0)
        }
    }

    /// A value serialized through `collect_str`.
    #[derive(Debug)]
    struct Shown(&'static str);
    impl Serialize for Shown {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_str(&format_args!("<{}>", self.0))
        }
    }

    #[test]
    fn every_kind_of_value_matches_serde_json() {
        assert_same(&Record {
            id: 7,
            random_number: -4242,
            note: None,
            shapes: vec![
                Shape::Unit,
                Shape::Newtype(3),
                Shape::Tuple(-1, "t\"\n".into()),
                Shape::Struct { x: 1.5e300, tag: Some("é") },
                Shape::Struct { x: f64::NAN, tag: None },
            ],
            unit: Unit,
            wrapper: Wrapper("w"),
            pair: Pair(255, false),
            empty: vec![],
            nothing: (),
            chars: ('\u{1f}', '€'),
        });
        assert_same(&Bytes(b"\x00\xff abc"));
        assert_same(&Bytes(b""));
        assert_same(&Shown("a\"b\\c\u{7}"));
        assert_same(&(i128::MIN, u128::MAX, f32::MIN_POSITIVE, f32::INFINITY, -0.0f64, 0.1f32));
        assert_same(&Some(Some(())));
        assert_same(&Vec::<Vec<u8>>::new());
        assert_same(&vec![vec![], vec![1u8]]);
        assert_same(&json!({"a": [1, 2.5, null, true, "x"], "b": {}, "c": [], "d": {"e": -1}}));
    }

    #[test]
    fn map_keys_follow_serde_json() {
        assert_same(&BTreeMap::from([(1i32, "a"), (-2, "b")]));
        assert_same(&BTreeMap::from([(true, 1), (false, 2)]));
        assert_same(&BTreeMap::from([('k', 1)]));
        assert_same(&BTreeMap::from([(u128::MAX, 1)]));
        assert_same(&BTreeMap::from([(Some("s"), 1)]));
        assert_same(&BTreeMap::from([(Key::Alpha, 1), (Key::Beta, 2)]));
        assert_same(&BTreeMap::from([(Id(9), "nine")]));
        for key in [1.25f64, -0.0, 1e-7, f64::NAN, f64::INFINITY] {
            assert_same(&FloatKey(key));
        }
        // Keys JSON cannot hold: both refuse.
        assert_same(&BTreeMap::from([(vec![1u8], 1)]));
        assert_same(&BTreeMap::from([(None::<&str>, 1)]));
        assert_same(&BTreeMap::from([((), 1)]));
        assert_same(&BTreeMap::from([((1, 2), 1)]));
    }

    #[derive(Serialize, Debug, PartialEq, Eq, PartialOrd, Ord)]
    enum Key {
        Alpha,
        Beta,
    }

    #[derive(Serialize, Debug, PartialEq, Eq, PartialOrd, Ord)]
    struct Id(u32);

    /// A one-entry map with a float key (floats are not `Ord`).
    #[derive(Debug)]
    struct FloatKey(f64);
    impl Serialize for FloatKey {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::SerializeMap;
            let mut map = s.serialize_map(Some(1))?;
            map.serialize_entry(&self.0, &0)?;
            map.end()
        }
    }

    #[test]
    fn strings_match_for_every_byte_at_every_position() {
        // Every ASCII byte, alone and at each offset of strings long enough
        // to take the 16-byte scan (and its tail).
        for len in [1usize, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 31, 32, 33, 47] {
            for pos in 0..len {
                for b in 0..=0x7fu8 {
                    let mut s = vec![b'a'; len];
                    s[pos] = b;
                    let s = String::from_utf8(s).expect("ASCII");
                    assert_same(&s);
                }
            }
        }
        // Escapes next to each other, and multi-byte characters around them.
        assert_same("\"\"\\\\\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f}");
        assert_same("ünïcödé \u{2028} 𝄞 and a \"quote\" after sixteen bytes of text");
    }

    /// The block and word checks against the byte rule: every byte value
    /// at every position of every length up to 40, over a background of
    /// ASCII letters and of bytes from multi-byte characters.
    #[test]
    fn escape_checks_agree_with_the_byte_rule() {
        for background in [b'a', 0x80, 0xff] {
            for len in 0..=40usize {
                for pos in 0..len {
                    for b in 0..=255u8 {
                        let mut bytes = vec![background; len];
                        bytes[pos] = b;
                        let expected = bytes.iter().any(|&c| needs_escape(c));
                        assert_eq!(
                            any_escape(&bytes),
                            expected,
                            "{b:#x} at {pos} of {len} on {background:#x}"
                        );
                        assert_eq!(
                            first_escape(&bytes, 0),
                            bytes.iter().position(|&c| needs_escape(c)),
                            "{b:#x} at {pos} of {len}"
                        );
                    }
                }
            }
        }
    }

    /// Random values, mostly strings full of characters that need escaping.
    #[test]
    fn random_values_match_serde_json() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..3_000 {
            let value = random_value(&mut next, 0);
            assert_same(&value);
        }
    }

    fn random_value(next: &mut impl FnMut() -> u64, depth: u32) -> Value {
        let pick = if depth > 3 { next() % 5 } else { next() % 7 };
        match pick {
            0 => Value::Null,
            1 => Value::Bool(next() % 2 == 0),
            2 => match next() % 3 {
                0 => json!(next() as i64),
                1 => json!(next()),
                _ => json!(f64::from_bits(next())),
            },
            3 | 4 => Value::String(random_string(next)),
            5 => Value::Array((0..next() % 5).map(|_| random_value(next, depth + 1)).collect()),
            _ => Value::Object(
                (0..next() % 5).map(|_| (random_string(next), random_value(next, depth + 1))).collect(),
            ),
        }
    }

    fn random_string(next: &mut impl FnMut() -> u64) -> String {
        const PIECES: [&str; 10] =
            ["a", "\"", "\\", "\n", "\u{1}", "\u{1f}", "\u{7f}", "é", "𝄞", "0123456789abcdef"];
        (0..next() % 24).map(|_| PIECES[(next() % PIECES.len() as u64) as usize]).collect()
    }

    /// serde_json's private tokens write their text as it is.
    #[test]
    fn raw_tokens_are_written_verbatim() {
        struct Raw(&'static str);
        impl Serialize for Raw {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct;
                let mut st = s.serialize_struct("$serde_json::private::RawValue", 1)?;
                st.serialize_field("$serde_json::private::RawValue", self.0)?;
                st.end()
            }
        }
        let mut out = Vec::new();
        write(&mut out, &vec![Raw("{\"pre\":[1,2]}"), Raw("3.14")]).expect("raw values");
        assert_eq!(out, b"[{\"pre\":[1,2]},3.14]");
    }

    #[test]
    fn errors_from_serialize_implementations_are_kept() {
        struct Failing;
        impl Serialize for Failing {
            fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(serde::ser::Error::custom("the value refused"))
            }
        }
        let mut out = Vec::new();
        let e = write(&mut out, &vec![Failing]).expect_err("refused");
        assert_eq!(e.to_string(), "the value refused");
    }
}
