//! Canonical JSON: object keys sorted by their UTF-8 bytes (at every depth), no whitespace, strings
//! and numbers as `serde_json` writes them. A record's `hash` is taken over this form of the record
//! without its `hash` field, and every line of the chain is written in this form.

use serde_json::Value;

/// Appends `v`'s canonical form to `out`.
pub fn write(v: &Value, out: &mut Vec<u8>) {
    match v {
        // serde_json's map is already ordered by key bytes (unless a crate turned on its
        // `preserve_order`): then no sort and no second lookup per key.
        Value::Object(m) if m.keys().is_sorted() => {
            out.push(b'{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(k, out);
                out.push(b':');
                write(x, out);
            }
            out.push(b'}');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_unstable();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(k, out);
                out.push(b':');
                write(&m[k.as_str()], out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(x, out);
            }
            out.push(b']');
        }
        Value::String(s) => string(s, out),
        other => {
            // Null, booleans and numbers: serde_json's own rendering (cannot fail into a Vec).
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

/// `v`'s canonical form.
pub fn to_vec(v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    write(v, &mut out);
    out
}

fn string(s: &str, out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(&mut *out, s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_at_every_depth_and_nothing_is_spaced() {
        let v = json!({"b": 1, "a": {"z": [1, {"y": null, "x": "é\n"}], "c": true}, "A": -2.5});
        assert_eq!(
            String::from_utf8(to_vec(&v)).unwrap(),
            r#"{"A":-2.5,"a":{"c":true,"z":[1,{"x":"é\n","y":null}]},"b":1}"#
        );
    }

    #[test]
    fn a_canonical_line_reads_back_to_the_same_bytes() {
        let v =
            json!({"duration_ms": 0.1234567891234, "n": 18446744073709551615u64, "s": "\u{1}\""});
        let once = to_vec(&v);
        let back: Value = serde_json::from_slice(&once).unwrap();
        assert_eq!(to_vec(&back), once);
    }
}
