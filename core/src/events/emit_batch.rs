//! The pure part of a batched emit
//! ([`EventStore::emit_batch`](crate::ports::EventStore::emit_batch)): how
//! many events one call may carry ([`MAX_EMIT_BATCH`]), the check of the
//! whole batch before anything is written ([`encode_emit_batch`]), and
//! which earlier event of the batch an event repeats ([`first_of_key`]).
//! Stores carry them out; nothing here writes.

use std::collections::HashMap;

use super::{EncodedEvent, NewEvent};
use crate::error::{Error, InvalidInput};
use crate::limits::InputLimits;

/// The most events one
/// [`EventStore::emit_batch`](crate::ports::EventStore::emit_batch)
/// records: the same bound as a dispatch batch
/// ([`MAX_DISPATCH_BATCH`](super::MAX_DISPATCH_BATCH)), so the events'
/// rows bound in one multi-row insert stay far from any placeholder limit
/// (16 columns a row: 8,000 binds) and a batch holds its keys briefly.
pub const MAX_EMIT_BATCH: usize = 500;

/// The field a refused batch size names.
const EMIT_BATCH: &str = "emit batch";

/// Checks the size of a batched emit: at most [`MAX_EMIT_BATCH`] events,
/// else [`InvalidInput::OutOfRange`] (`emit batch`), refused rather than
/// cut, as a dispatch batch is. An empty batch is accepted: it records
/// nothing and answers nothing, so a caller flushing whatever it has
/// gathered need not test for none.
pub fn check_emit_batch(len: usize) -> Result<(), Error> {
    if len > MAX_EMIT_BATCH {
        return Err(Error::InvalidInput(InvalidInput::OutOfRange {
            field: EMIT_BATCH,
            detail: format!("{len} events is more than {MAX_EMIT_BATCH}"),
        }));
    }
    Ok(())
}

/// Checks a whole batch before any of it is written: its size
/// ([`check_emit_batch`]), then every event as
/// [`checks::emit`](crate::ports::checks::emit) checks one, in input
/// order. Answers each event's JSON as text, in input order, or the first
/// refusal, which refuses the batch. Run it through
/// [`checked`](crate::limits::checked), so a refused batch, however deep
/// its JSON, is dropped without recursion.
pub fn encode_emit_batch(
    limits: &InputLimits,
    events: &[NewEvent],
) -> Result<Vec<EncodedEvent>, Error> {
    check_emit_batch(events.len())?;
    events
        .iter()
        .map(|event| crate::ports::checks::emit(limits, event))
        .collect()
}

/// For each event of a batch, the index of the first event of the batch
/// with its (app, scope, type, dedupe key): itself when none comes before
/// it or it has no dedupe key. An event whose first is another is
/// answered as that one's duplicate and records nothing, as a second
/// [`emit`](crate::ports::EventStore::emit) of the key would.
pub fn first_of_key(events: &[NewEvent]) -> Vec<usize> {
    let mut first: HashMap<(&str, &str, &str, &str), usize> = HashMap::new();
    events
        .iter()
        .enumerate()
        .map(|(i, event)| match &event.dedupe_key {
            Some(key) => *first
                .entry((
                    event.app_id.as_str(),
                    event.scope_id.as_str(),
                    event.event_type.as_str(),
                    key.as_str(),
                ))
                .or_insert(i),
            None => i,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn emit_batch_sizes() {
        let rows = [
            (0, true),
            (1, true),
            (64, true),
            (MAX_EMIT_BATCH, true),
            (MAX_EMIT_BATCH + 1, false),
            (usize::MAX, false),
        ];
        for (len, accepted) in rows {
            match check_emit_batch(len) {
                Ok(()) => assert!(accepted, "{len} accepted"),
                Err(Error::InvalidInput(InvalidInput::OutOfRange { field, .. })) => {
                    assert!(!accepted, "{len} refused");
                    assert_eq!(field, "emit batch");
                }
                Err(other) => panic!("{len}: {other:?}"),
            }
        }
    }

    #[test]
    fn first_of_key_table() {
        let e = |app: &str, ty: &str, key: Option<&str>| {
            let event = NewEvent::new(app, "s", ty, json!({}));
            match key {
                Some(key) => event.with_dedupe_key(key),
                None => event,
            }
        };
        let rows: [(&str, Vec<NewEvent>, Vec<usize>); 6] = [
            ("empty", vec![], vec![]),
            (
                "no keys",
                vec![e("a", "t", None), e("a", "t", None)],
                vec![0, 1],
            ),
            (
                "one key twice",
                vec![e("a", "t", Some("k")), e("a", "t", Some("k"))],
                vec![0, 0],
            ),
            (
                "the first of three",
                vec![
                    e("a", "t", None),
                    e("a", "t", Some("k")),
                    e("a", "t", Some("k")),
                    e("a", "t", Some("k")),
                ],
                vec![0, 1, 1, 1],
            ),
            (
                "another app",
                vec![e("a", "t", Some("k")), e("b", "t", Some("k"))],
                vec![0, 1],
            ),
            (
                "another type",
                vec![
                    e("a", "t", Some("k")),
                    e("a", "u", Some("k")),
                    e("a", "u", Some("k")),
                ],
                vec![0, 1, 1],
            ),
        ];
        for (name, events, expected) in rows {
            assert_eq!(first_of_key(&events), expected, "{name}");
        }
    }

    #[test]
    fn a_bad_event_refuses_the_batch() {
        let limits = InputLimits::default();
        let fine = NewEvent::new("a", "s", "t", json!({}));
        let bad = NewEvent::new("a", "s", "t", json!({})).with_dedupe_key("");
        let encoded = encode_emit_batch(&limits, &[fine.clone(), fine.clone()]);
        assert_eq!(encoded.map(|e| e.len()).ok(), Some(2));
        let refused = encode_emit_batch(&limits, &[fine.clone(), bad, fine]);
        assert!(
            matches!(refused, Err(Error::InvalidInput(_))),
            "{refused:?}"
        );
    }
}
