//! Statements prepared once per connection.
//!
//! diesel never caches a `sql_query` as a prepared statement (its text could
//! be anything, and an unbounded cache would grow without end), so on MySQL,
//! where every bound statement goes through the binary protocol, each one
//! would cost two round trips: `COM_STMT_PREPARE`, then `COM_STMT_EXECUTE`.
//! This dialect's SQL is a small fixed set (the constants of `sql`, a few
//! dozen texts in all), so [`Cached`] marks a query safe to cache: each
//! connection prepares each text once and then only executes it, one round
//! trip per statement. The cache is keyed by the SQL text and bind types.

use diesel::QueryResult;
use diesel::mysql::Mysql;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::sql_types::Untyped;

/// A raw query (`sql_query` with its binds) whose prepared statement the
/// connection keeps.
#[derive(Debug)]
pub(super) struct Cached<Q>(Q);

impl<Q: QueryFragment<Mysql>> QueryFragment<Mysql> for Cached<Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, Mysql>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn is_safe_to_cache_prepared(&self, _backend: &Mysql) -> QueryResult<bool> {
        // Only ever built from this dialect's fixed statements (see the
        // module doc), so the cache stays bounded.
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

/// `.cached()` on a raw query with its binds.
pub(super) trait CacheExt: Sized {
    /// This query, prepared once per connection.
    fn cached(self) -> Cached<Self> {
        Cached(self)
    }
}

impl<Q: QueryFragment<Mysql>> CacheExt for Q {}
