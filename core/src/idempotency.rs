//! Idempotency keys: the one spelling every crate uses for a run materialised
//! from an event, so a redelivered event finds the run it already started.

use std::fmt;

/// The idempotency key of the run that `event` starts for `activation`:
/// `event:{event}:{activation}`.
///
/// Generic over the id types so a caller's own ids work too; each is written
/// with its `Display`.
pub fn event_run_key(event: impl fmt::Display, activation: impl fmt::Display) -> String {
    format!("event:{event}:{activation}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_names_the_event_and_the_activation() {
        assert_eq!(event_run_key("e1", "a1"), "event:e1:a1");
        assert_ne!(event_run_key("e1", "a1"), event_run_key("e1", "a2"));
        assert_ne!(event_run_key("e1", "a1"), event_run_key("e2", "a1"));
    }
}
