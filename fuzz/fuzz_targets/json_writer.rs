//! The response JSON writer against serde_json: for any value built from
//! the input, both write the same bytes, or both refuse it.
//!
//! The input is read as a small program: each byte picks the next node
//! (null, a boolean, an integer, a float from eight raw bytes, a string,
//! an array or an object, whose children follow), and strings take their
//! bytes straight from the input, so control characters, quotes,
//! backslashes and multi-byte characters land at every offset of the
//! writer's 16-byte scan.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Number, Value};

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        taken
    }

    fn string(&mut self) -> String {
        let len = self.byte() as usize % 48;
        String::from_utf8_lossy(self.take(len)).into_owned()
    }

    fn value(&mut self, depth: u32) -> Value {
        let kinds = if depth >= 6 { 5 } else { 7 };
        match self.byte() % kinds {
            0 => Value::Null,
            1 => Value::Bool(self.byte() % 2 == 1),
            2 => {
                let mut raw = [0u8; 8];
                let taken = self.take(8);
                raw[..taken.len()].copy_from_slice(taken);
                let bits = u64::from_le_bytes(raw);
                match bits % 3 {
                    0 => Value::Number(Number::from(bits as i64)),
                    1 => Value::Number(Number::from(bits)),
                    _ => Number::from_f64(f64::from_bits(bits)).map_or(Value::Null, Value::Number),
                }
            }
            3 | 4 => Value::String(self.string()),
            5 => Value::Array((0..self.byte() % 6).map(|_| self.value(depth + 1)).collect()),
            _ => {
                let mut map = Map::new();
                for _ in 0..self.byte() % 6 {
                    let key = self.string();
                    let value = self.value(depth + 1);
                    map.insert(key, value);
                }
                Value::Object(map)
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let value = Input(data).value(0);
    let theirs = serde_json::to_vec(&value).expect("serde_json writes every Value");
    let mut ours = Vec::new();
    peregrine::fuzzing::write_json(&mut ours, &value).expect("the writer takes every Value");
    assert_eq!(ours, theirs, "{value:?}");
});
