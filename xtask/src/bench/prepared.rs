//! [`Prepared`]: a hand-written statement of the baselines that each
//! connection prepares once, as anyone writing the SQL by hand would.

use diesel::QueryResult;
use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::sql_types::Untyped;

/// A `sql_query` whose prepared statement diesel-async keeps per
/// connection (plain `sql_query` is never cached, so each call would
/// prepare it again: two round trips instead of one). Sound here: the text
/// is one of a few constants and every value is bound.
pub struct Prepared<Q>(pub Q);

impl<DB: Backend, Q: QueryFragment<DB>> QueryFragment<DB> for Prepared<Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn is_safe_to_cache_prepared(&self, _backend: &DB) -> QueryResult<bool> {
        Ok(true)
    }
}

impl<Q> QueryId for Prepared<Q> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q> Query for Prepared<Q> {
    type SqlType = Untyped;
}
