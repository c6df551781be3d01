//! Statements prepared once per connection, for the server dialects.
//!
//! diesel never caches a `sql_query` as a prepared statement (its text could
//! be anything, and an unbounded cache would grow without end), so on
//! PostgreSQL and MySQL every bound statement would cost two round trips:
//! prepare, then execute. Each dialect's SQL is a small fixed set of texts
//! built in its `sql` module, with every value bound, so [`Cached`] marks
//! such a query safe to cache: each connection prepares each text once and
//! then only executes it, one round trip per statement. The cache is keyed
//! by the SQL text and the bind types. (SQLite keeps its own statement cache
//! on the sync connection; see `sqlite::query`.)

use diesel::QueryResult;
use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::sql_types::Untyped;

/// A raw query (`sql_query` with its binds) whose prepared statement the
/// connection keeps. Build it only from a dialect's fixed statements, so the
/// cache stays bounded.
#[derive(Debug)]
pub struct Cached<Q>(Q);

/// Wraps `query` so its prepared statement is cached per connection.
pub fn cached<Q>(query: Q) -> Cached<Q> {
    Cached(query)
}

impl<DB: Backend, Q: QueryFragment<DB>> QueryFragment<DB> for Cached<Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn is_safe_to_cache_prepared(&self, _backend: &DB) -> QueryResult<bool> {
        Ok(true)
    }
}

impl<Q> QueryId for Cached<Q> {
    // No static id: the cache is keyed by the SQL text.
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q> Query for Cached<Q> {
    type SqlType = Untyped;
}

/// `.cached()` on a raw query with its binds: the same as [`cached`].
pub trait CacheExt: Sized {
    /// This query, prepared once per connection.
    fn cached(self) -> Cached<Self> {
        Cached(self)
    }
}

impl<Q> CacheExt for Q {}
