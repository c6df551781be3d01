//! A record of the statements a store sends, for the statement-count tests
//! and the bench: budgets are counted, not timed.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use diesel::connection::{Instrumentation, InstrumentationEvent};

/// Every statement a store sent, in order, with its SQL (binds left out).
///
/// Attach one through [`StoreConfig::statement_log`](crate::StoreConfig);
/// each pooled connection then reports to it. Transaction control counts
/// too: `BEGIN` and `COMMIT` are statements the server answers.
#[derive(Debug, Default)]
pub struct StatementLog {
    statements: Mutex<Vec<String>>,
}

impl StatementLog {
    /// An empty log.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// How many statements have been sent so far.
    pub fn count(&self) -> u64 {
        self.logged().len() as u64
    }

    /// The SQL of every statement sent so far.
    pub fn statements(&self) -> Vec<String> {
        self.logged().clone()
    }

    /// Forgets everything recorded so far.
    pub fn clear(&self) {
        self.logged().clear();
    }

    /// Runs `op` and returns its output with the statements it sent.
    ///
    /// Meant for a store used by one task at a time: statements other tasks
    /// send meanwhile are counted too.
    pub async fn capture<F: Future>(&self, op: F) -> (F::Output, Vec<String>) {
        self.clear();
        let out = op.await;
        (out, self.statements())
    }

    /// The statements, locked; a panic elsewhere while it was held leaves
    /// them as they were.
    fn logged(&self) -> MutexGuard<'_, Vec<String>> {
        self.statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The instrumentation to install on a connection so it reports here.
    pub fn instrumentation(self: &Arc<Self>) -> LogInstrumentation {
        LogInstrumentation {
            log: Arc::clone(self),
        }
    }
}

/// A diesel [`Instrumentation`] that records each started query in a
/// [`StatementLog`].
#[derive(Debug)]
pub struct LogInstrumentation {
    log: Arc<StatementLog>,
}

impl Instrumentation for LogInstrumentation {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        if let InstrumentationEvent::StartQuery { query, .. } = event {
            let mut sql = SqlOnly::default();
            // diesel writes the SQL, then ` -- binds: [...]`: the writer
            // stops the formatting there (the error it returns to do so is
            // expected), so a batch's thousands of binds are never
            // formatted only to be dropped.
            let _ = std::fmt::write(&mut sql, format_args!("{query}"));
            self.log.logged().push(sql.finish());
        }
    }
}

/// What diesel writes before its binds.
const BINDS_MARKER: &str = " -- binds:";

/// A [`std::fmt::Write`] that keeps a query's text up to diesel's binds
/// marker and refuses everything after it.
#[derive(Default)]
struct SqlOnly {
    text: String,
    done: bool,
}

impl SqlOnly {
    /// The SQL, without the binds or surrounding whitespace.
    fn finish(mut self) -> String {
        if let Some(at) = self.text.find(BINDS_MARKER) {
            self.text.truncate(at);
        }
        self.text.trim().to_owned()
    }
}

impl std::fmt::Write for SqlOnly {
    fn write_str(&mut self, piece: &str) -> std::fmt::Result {
        if self.done {
            return Err(std::fmt::Error);
        }
        // The marker may straddle two pieces: look at the tail written
        // before this piece too.
        let mut from = self.text.len().saturating_sub(BINDS_MARKER.len());
        while !self.text.is_char_boundary(from) {
            from -= 1;
        }
        self.text.push_str(piece);
        if self.text[from..].contains(BINDS_MARKER) {
            self.done = true;
            return Err(std::fmt::Error);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;

    #[test]
    fn the_sql_is_kept_and_the_binds_are_never_written() {
        let mut sql = SqlOnly::default();
        let written = write!(sql, "SELECT $1 -- binds: [{}]", "x".repeat(10));
        assert!(written.is_err(), "formatting stops at the binds");
        assert_eq!(sql.finish(), "SELECT $1");

        // The marker split across pieces.
        let mut sql = SqlOnly::default();
        assert!(sql.write_str("UPDATE t SET a = 1 -- bi").is_ok());
        assert!(sql.write_str("nds: [1]").is_err());
        assert!(sql.write_str("more").is_err());
        assert_eq!(sql.finish(), "UPDATE t SET a = 1");

        // No binds at all.
        let mut sql = SqlOnly::default();
        assert!(write!(sql, "  COMMIT ").is_ok());
        assert_eq!(sql.finish(), "COMMIT");
    }
}
