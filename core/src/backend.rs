//! Helpers for backend authors: code every backend would otherwise write
//! the same way, such as decoding the JSON text it stored into a typed
//! [`Error::Corrupt`] when it is not JSON.
//!
//! Nothing here is part of the ports' contract (that is [`ports`](crate::ports)):
//! a backend may use these helpers or not, and callers of a store never need them.

use serde_json::Value;

use crate::error::{Error, Result};

/// Reads `text` as stored JSON, naming `what` and `row` if it is not JSON
/// ([`Error::Corrupt`]: no valid write stores text that is not JSON).
pub fn decode_json(what: &'static str, row: &impl ToString, text: &str) -> Result<Value> {
    serde_json::from_str(text).map_err(|err| Error::Corrupt {
        what,
        row: row.to_string(),
        detail: err.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stored_json_decodes_or_is_corrupt() {
        let rows = [
            (r#"{"a":[1,null]}"#, Some(json!({"a": [1, null]}))),
            ("null", Some(json!(null))),
            ("", None),
            ("{\"a\":", None),
            ("'x'", None),
        ];
        for (text, expected) in rows {
            match (decode_json("step input", &"row-7", text), expected) {
                (Ok(value), Some(expected)) => assert_eq!(value, expected, "{text:?}"),
                (Err(Error::Corrupt { what, row, .. }), None) => {
                    assert_eq!((what, row.as_str()), ("step input", "row-7"), "{text:?}");
                }
                (other, expected) => panic!("{text:?}: expected {expected:?}, got {other:?}"),
            }
        }
    }
}
