//! How the flusher answers one queued completion: a callback, answered
//! exactly once. [`GroupCommit::submit`](crate::GroupCommit::submit)'s
//! sends on the caller's `oneshot`; a pool worker's counts the answer and
//! frees the step's room, so that no task has to sit waiting on each
//! step's answer.
//!
//! If the flusher ends without answering (it panicked inside the store),
//! dropping the callback answers the stopped-flusher error, so a caller's
//! [`Pending`](crate::Pending) resolves and a pool never waits for a
//! step's room that nobody will give back.

use crate::error::{Error, FlushFailed, Result};

/// A callback answered once with a queued completion's result.
pub(crate) type Callback = Box<dyn FnOnce(Result<()>) + Send>;

/// A [`Callback`] that is answered when dropped unanswered.
pub(crate) struct Answered(Option<Callback>);

impl Answered {
    /// Wraps `callback`.
    pub(crate) fn new(callback: Callback) -> Self {
        Self(Some(callback))
    }

    /// Runs the callback with `result`, if it has not run yet.
    pub(crate) fn answer(&mut self, result: Result<()>) {
        if let Some(callback) = self.0.take() {
            callback(result);
        }
    }
}

impl Drop for Answered {
    fn drop(&mut self) {
        self.answer(Err(flusher_stopped()));
    }
}

/// The answer to an item whose flusher ended before the store answered:
/// whether it was written is unknown.
pub(crate) fn flusher_stopped() -> Error {
    Error::FlushFailed(FlushFailed {
        message: "the flusher stopped before the store answered".to_owned(),
        retryable: false,
        items: 0,
        attempts: 0,
        gave_up: false,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    fn recorder() -> (Arc<Mutex<Vec<bool>>>, Callback) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&seen);
        let callback: Callback = Box::new(move |result: Result<()>| {
            into.lock().unwrap().push(result.is_ok());
        });
        (seen, callback)
    }

    #[test]
    fn a_callback_is_answered_once() {
        let (seen, callback) = recorder();
        Answered::new(callback).answer(Ok(()));
        assert_eq!(*seen.lock().unwrap(), [true]);
    }

    #[test]
    fn a_callback_dropped_unanswered_gets_the_stopped_flusher_error() {
        let (seen, callback) = recorder();
        drop(Answered::new(callback));
        assert_eq!(*seen.lock().unwrap(), [false]);
    }
}
