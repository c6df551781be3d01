//! A signal to a run, as `flowstate_run_signals` stores it.

use crate::schema::JsonText;

/// A signal to insert: the run, the signal's name, its payload and when
/// it was sent.
#[derive(Debug)]
pub(crate) struct SignalRow {
    pub run_id: String,
    pub name: String,
    pub payload: JsonText,
    pub sent_at: i64,
}
