//! [`Cached`]: a hand-written statement that each connection prepares once.
//!
//! diesel never caches a `sql_query` as a prepared statement (its text
//! could be anything, and an unbounded cache would grow without end), so
//! every bound statement would cost a parse, and on the servers a prepare
//! round trip, on every call. The hand-written statements of this crate are
//! a small fixed set of texts (one per operation and target status), with
//! every value bound, so [`Cached`] marks them safe to cache: each
//! connection prepares each text once and then only executes it. The cache
//! is keyed by the SQL text and the bind types. diesel marks every typed
//! `UPDATE` the same way (a changeset struct may skip its `None` fields,
//! so one type can render several texts): the store's updates assign
//! every column they name, one text per shape, and are wrapped the same.
//! One wrapper serves all three dialects: PostgreSQL and MySQL through
//! diesel-async's statement cache, SQLite through diesel's. On SQLite's
//! blocking connection only the load path honours it (`execute` re-checks
//! the statement through a reference, whose `QueryFragment` impl does not
//! forward `is_safe_to_cache_prepared`), so SQLite's hot writes end in
//! `RETURNING id` and run as queries.

use diesel::QueryResult;
use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};

/// A raw query (`sql_query` with its binds), or a typed `UPDATE` or
/// `INSERT`, whose prepared statement the connection keeps. Build it only
/// from a fixed statement text (a typed statement: only from fragments
/// whose text is the same on every call, no list of varying length), so
/// the cache stays bounded.
#[derive(Debug)]
pub(crate) struct Cached<Q>(Q);

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

impl<Q: Query> Query for Cached<Q> {
    // A raw query's (`Untyped`, read by name), or a typed statement's.
    type SqlType = Q::SqlType;
}

impl<Q, C> diesel::RunQueryDsl<C> for Cached<Q> {}

/// `.cached()` on a raw query with its binds.
pub(crate) trait CacheExt: Sized {
    /// This query, prepared once per connection.
    fn cached(self) -> Cached<Self> {
        Cached(self)
    }
}

impl<Q> CacheExt for Q {}
