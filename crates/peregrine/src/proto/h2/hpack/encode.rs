//! The HPACK encoder (RFC 7541 §6) for the header blocks we send: response
//! heads, on the hot path of every request.
//!
//! It trades a little compression for CPU, since a response head is mostly
//! fields that are either in the static table, repeat verbatim across
//! responses, or are unique to the response:
//!
//! - a field that matches a static entry whole is one byte;
//! - a few names whose short values repeat from response to response
//!   (`server`, `content-type`, `date`, `vary`, ...; see [`cached_name`])
//!   go into the dynamic table once and are one or two bytes afterwards,
//!   found again by a linear scan that compares lengths first: the table
//!   only ever holds these, so it stays a handful of entries;
//! - credentials and cookies are never indexed (§7.1.3), so no
//!   intermediary stores them and no compression-ratio attack learns them;
//! - everything else is a literal without indexing, its name as a static
//!   index when there is one: such values (lengths, etags, locations)
//!   rarely repeat, and inserting them would only evict the useful ones.
//!
//! Literals are written raw, never Huffman-coded: coding costs a table
//! lookup and bit shuffling per byte to save about a fifth of a few dozen
//! bytes, which is not worth it on the server's side of the wire.
//!
//! The dynamic table is capped at 4096 bytes whatever the peer allows, and
//! its storage is allocated once, so encoding allocates nothing in steady
//! state beyond growth of the caller's `dst`.

use super::table::{static_name_index, Dynamic, Name, ENTRY_OVERHEAD, STATIC};

/// The largest dynamic table we use: the default of RFC 9113 §6.5.2. A peer
/// advertising more gets no more of our memory.
const TABLE_CAP: usize = 4096;

/// The longest value of a [`cached_name`] field worth indexing: longer
/// values are rarely repeated verbatim and would crowd the table.
const MAX_CACHED_VALUE: usize = 64;

/// The encoding half of a connection's HPACK context.
#[derive(Debug)]
pub struct Encoder {
    table: Dynamic,
    /// The smallest table size set since the last block, if any was set:
    /// §4.2 wants it signalled before the final one.
    pending_min: Option<usize>,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder::new()
    }
}

/// Names whose values tend to repeat verbatim across responses.
fn cached_name(name: &[u8]) -> bool {
    matches!(
        name,
        b"server"
            | b"content-type"
            | b"date"
            | b"cache-control"
            | b"vary"
            | b"content-encoding"
            | b"alt-svc"
            | b"grpc-encoding"
            | b"grpc-accept-encoding"
            | b"access-control-allow-origin"
            | b"x-content-type-options"
    )
}

/// Names whose values are secrets: never indexed (§7.1.3).
fn sensitive_name(name: &[u8]) -> bool {
    matches!(name, b"set-cookie" | b"authorization" | b"cookie" | b"proxy-authorization")
}

/// Appends `value` as an integer with an `prefix`-bit prefix (§5.1), the
/// high bits of the first octet being `flags`.
pub(super) fn integer(dst: &mut Vec<u8>, flags: u8, prefix: u32, value: usize) {
    let mask = (1usize << prefix) - 1;
    if value < mask {
        dst.push(flags | value as u8);
        return;
    }
    dst.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        dst.push((rest & 0x7f) as u8 | 0x80);
        rest >>= 7;
    }
    dst.push(rest as u8);
}

/// Appends a raw (not Huffman-coded) string literal (§5.2).
pub(super) fn string(dst: &mut Vec<u8>, bytes: &[u8]) {
    integer(dst, 0, 7, bytes.len());
    dst.extend_from_slice(bytes);
}

/// Appends a literal field: `flags` and `prefix` pick the representation,
/// the name is a static index if it has one.
fn literal(dst: &mut Vec<u8>, flags: u8, prefix: u32, name: &[u8], value: &[u8]) {
    match static_name_index(name) {
        Some(index) => integer(dst, flags, prefix, index),
        None => {
            integer(dst, flags, prefix, 0);
            string(dst, name);
        }
    }
    string(dst, value);
}

impl Encoder {
    /// The peer's table starts at 4096 bytes (RFC 9113 §6.5.2 default).
    pub fn new() -> Encoder {
        Encoder { table: Dynamic::new(TABLE_CAP), pending_min: None }
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE changed: shrink (evict) if
    /// needed and emit a dynamic table size update at the start of the next
    /// block (RFC 7541 §4.2; if it changed more than once between blocks,
    /// the smallest then the final, per §4.2). We never use more than 4096
    /// bytes, so a larger setting is signalled as 4096.
    pub fn set_max_table_size(&mut self, size: usize) {
        let size = size.min(TABLE_CAP);
        self.table.set_max_size(size);
        self.pending_min = Some(self.pending_min.map_or(size, |min| min.min(size)));
    }

    /// Starts a header block in `dst` (appends; never clears): writes any
    /// pending size update.
    pub fn begin_block(&mut self, dst: &mut Vec<u8>) {
        if let Some(min) = self.pending_min.take() {
            let size = self.table.max_size();
            if min < size {
                integer(dst, 0x20, 5, min);
            }
            integer(dst, 0x20, 5, size);
        }
    }

    /// Appends `:status` (a full static match for 200, 204, 206, 304, 400,
    /// 404, 500 → one byte; otherwise a literal with the static name index
    /// 8).
    pub fn status(&mut self, status: u16, dst: &mut Vec<u8>) {
        let index = match status {
            200 => 8,
            204 => 9,
            206 => 10,
            304 => 11,
            400 => 12,
            404 => 13,
            500 => 14,
            _ => {
                // Decimal digits, most significant first, without a
                // formatter (u16: at most five).
                let mut digits = [0u8; 5];
                let mut at = digits.len();
                let mut rest = status;
                loop {
                    at -= 1;
                    digits[at] = b'0' + (rest % 10) as u8;
                    rest /= 10;
                    if rest == 0 {
                        break;
                    }
                }
                integer(dst, 0x00, 4, 8);
                string(dst, &digits[at..]);
                return;
            }
        };
        integer(dst, 0x80, 7, index);
    }

    /// Appends one field. `name` is already lowercase (the caller
    /// guarantees it). See the module docs for the strategy.
    pub fn field(&mut self, name: &[u8], value: &[u8], dst: &mut Vec<u8>) {
        if let Some(index) = static_match(name, value) {
            integer(dst, 0x80, 7, index);
        } else if sensitive_name(name) {
            literal(dst, 0x10, 4, name, value);
        } else if cached_name(name)
            && value.len() <= MAX_CACHED_VALUE
            && name.len() + value.len() + ENTRY_OVERHEAD <= self.table.max_size()
        {
            match self.find(name, value) {
                Some(pos) => integer(dst, 0x80, 7, STATIC.len() + 1 + pos),
                None => {
                    literal(dst, 0x40, 6, name, value);
                    self.table.insert(Name::Bytes(name), value);
                }
            }
        } else {
            literal(dst, 0x00, 4, name, value);
        }
    }

    /// The 0-based position (newest first) of `name: value` in the dynamic
    /// table.
    fn find(&self, name: &[u8], value: &[u8]) -> Option<usize> {
        (0..self.table.len()).find(|&pos| {
            self.table.get(pos).is_some_and(|(n, v)| {
                n.len() == name.len() && v.len() == value.len() && v == value && n == name
            })
        })
    }
}

/// The static index of `name: value` if the static table has it whole.
fn static_match(name: &[u8], value: &[u8]) -> Option<usize> {
    let first = static_name_index(name)?;
    // Entries with the same name are consecutive (Appendix A).
    STATIC[first - 1..]
        .iter()
        .take_while(|(n, _)| *n == name)
        .position(|(_, v)| *v == value)
        .map(|offset| first + offset)
}

#[cfg(test)]
mod tests {
    use super::super::decode::tests::{decode, Fields};
    use super::super::Decoder;
    use super::*;

    fn encode(e: &mut Encoder, fields: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut dst = Vec::new();
        e.begin_block(&mut dst);
        for (n, v) in fields {
            if *n == b":status" {
                let status = std::str::from_utf8(v).unwrap().parse().unwrap();
                e.status(status, &mut dst);
            } else {
                e.field(n, v, &mut dst);
            }
        }
        dst
    }

    fn owned(fields: &[(&[u8], &[u8])]) -> Fields {
        fields.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect()
    }

    /// The encoder's dynamic table, newest first, as the decoder shows its own.
    fn table(e: &Encoder) -> (Fields, usize) {
        let entries = (0..e.table.len())
            .filter_map(|i| e.table.get(i))
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect();
        (entries, e.table.size())
    }

    const HEAD: &[(&[u8], &[u8])] = &[
        (b":status", b"200"),
        (b"server", b"peregrine"),
        (b"date", b"Tue, 24 Nov 2026 07:00:00 GMT"),
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", b"1234"),
        (b"set-cookie", b"id=42; HttpOnly"),
        (b"accept-encoding", b"gzip, deflate"),
        (b"x-request-id", b"abc"),
        (b"vary", b"accept-encoding"),
        (b"cache-control", b""),
    ];

    #[test]
    fn round_trip_and_repeats_get_shorter() {
        let mut e = Encoder::new();
        let mut d = Decoder::new(4096);
        let first = encode(&mut e, HEAD);
        assert_eq!(decode(&mut d, &first).unwrap(), owned(HEAD));
        let second = encode(&mut e, HEAD);
        assert_eq!(decode(&mut d, &second).unwrap(), owned(HEAD));
        assert!(second.len() < first.len() / 2, "{} vs {}", second.len(), first.len());
        assert_eq!(d.table(), table(&e));
        // server, date, content-type, vary: four entries.
        assert_eq!(table(&e).0.len(), 4);
    }

    #[test]
    fn representations() {
        let mut e = Encoder::new();
        let mut dst = Vec::new();
        e.status(200, &mut dst);
        e.status(404, &mut dst);
        assert_eq!(dst, [0x88, 0x8d]);
        dst.clear();
        e.status(302, &mut dst);
        assert_eq!(dst, b"\x08\x03302");
        dst.clear();
        e.field(b":method", b"GET", &mut dst);
        e.field(b"accept-encoding", b"gzip, deflate", &mut dst);
        e.field(b"cache-control", b"", &mut dst);
        assert_eq!(dst, [0x82, 0x90, 0x98]);
        dst.clear();
        // Never indexed, static name index 55.
        e.field(b"set-cookie", b"a=b", &mut dst);
        assert_eq!(dst, b"\x1f\x28\x03a=b");
        dst.clear();
        // Without indexing, static name 28.
        e.field(b"content-length", b"5", &mut dst);
        assert_eq!(dst, b"\x0f\x0d\x015");
        dst.clear();
        // Without indexing, literal name.
        e.field(b"x-a", b"1", &mut dst);
        assert_eq!(dst, b"\x00\x03x-a\x011");
        dst.clear();
        // Incremental indexing, name index 54, then the entry at 62.
        e.field(b"server", b"p", &mut dst);
        e.field(b"server", b"p", &mut dst);
        assert_eq!(dst, b"\x76\x01p\xbe");
        dst.clear();
        // A long value of a cached name is not indexed.
        e.field(b"server", &[b'p'; 65], &mut dst);
        assert_eq!(dst[0], 0x0f);
        assert_eq!(table(&e).0.len(), 1);
    }

    #[test]
    fn size_updates() {
        let mut e = Encoder::new();
        let mut d = Decoder::new(4096);
        decode(&mut d, &encode(&mut e, HEAD)).unwrap();
        e.set_max_table_size(0);
        e.set_max_table_size(1024);
        let block = encode(&mut e, HEAD);
        // 0, then 1024 (31 + 993).
        assert_eq!(block[..4], [0x20, 0x3f, 0xe1, 0x07]);
        assert_eq!(decode(&mut d, &block).unwrap(), owned(HEAD));
        assert_eq!(d.table(), table(&e));
        assert_eq!(table(&e).0.len(), 4);
        // A single change is a single update; none when nothing changed.
        e.set_max_table_size(0);
        let block = encode(&mut e, HEAD);
        assert_eq!(block[..2], [0x20, 0x88]);
        assert_eq!(decode(&mut d, &block).unwrap(), owned(HEAD));
        assert_eq!(d.table(), (vec![], 0));
        // Growing: the final size alone, since it is also the smallest.
        e.set_max_table_size(4096);
        e.set_max_table_size(1 << 20);
        let block = encode(&mut e, HEAD);
        assert_eq!(block[..4], [0x3f, 0xe1, 0x1f, 0x88]);
        assert_eq!(decode(&mut d, &block).unwrap(), owned(HEAD));
        assert_eq!(d.table(), table(&e));
    }

    use super::super::Rng;

    #[test]
    fn random_blocks_stay_in_sync() {
        const NAMES: &[&[u8]] = &[
            b"server",
            b"content-type",
            b"date",
            b"cache-control",
            b"vary",
            b"content-encoding",
            b"alt-svc",
            b"grpc-encoding",
            b"access-control-allow-origin",
            b"x-content-type-options",
            b"set-cookie",
            b"authorization",
            b"content-length",
            b"etag",
            b"location",
            b"x-custom",
            b"x-another-name",
            b":path",
            b":method",
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut e = Encoder::new();
        let mut d = Decoder::new(4096);
        let mut values: Vec<Vec<u8>> = Vec::new();
        for len in [0usize, 1, 3, 10, 30, 64, 65, 200, 1000, 5000] {
            for k in 0..3u8 {
                values.push((0..len).map(|i| b'a' + ((i as u8).wrapping_add(k * 7) % 26)).collect());
            }
        }
        values.push(b"GET".to_vec());
        values.push(b"/".to_vec());
        let mut dst = Vec::new();
        for round in 0..1000 {
            if rng.below(20) == 0 {
                for _ in 0..=rng.below(3) {
                    e.set_max_table_size([0, 64, 256, 1024, 4096, 9999][rng.below(6)]);
                }
            }
            let mut fields: Fields = Vec::new();
            dst.clear();
            e.begin_block(&mut dst);
            for _ in 0..rng.below(12) {
                if rng.below(8) == 0 {
                    let status = [200u16, 204, 302, 404, 500, 999, 101][rng.below(7)];
                    e.status(status, &mut dst);
                    fields.push((b":status".to_vec(), status.to_string().into_bytes()));
                } else {
                    let name = NAMES[rng.below(NAMES.len())];
                    let value = &values[rng.below(values.len())];
                    e.field(name, value, &mut dst);
                    fields.push((name.to_vec(), value.clone()));
                }
            }
            assert_eq!(decode(&mut d, &dst).unwrap(), fields, "round {round}");
            assert_eq!(d.table(), table(&e), "round {round}");
        }
    }

    /// Once the table holds what repeats, encoding allocates nothing: the
    /// table's store and `dst` keep their capacity.
    #[test]
    fn steady_state_keeps_capacity() {
        let mut e = Encoder::new();
        let mut dst = Vec::with_capacity(1024);
        for _ in 0..3 {
            dst.clear();
            encode_into(&mut e, &mut dst);
        }
        let (store, out) = (e.table.buf_capacity(), dst.capacity());
        for _ in 0..1000 {
            dst.clear();
            encode_into(&mut e, &mut dst);
            assert_eq!((e.table.buf_capacity(), dst.capacity()), (store, out));
        }
    }

    fn encode_into(e: &mut Encoder, dst: &mut Vec<u8>) {
        e.begin_block(dst);
        for (n, v) in &HEAD[1..] {
            e.field(n, v, dst);
        }
    }
}
